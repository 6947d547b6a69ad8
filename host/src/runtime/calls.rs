//! The calls of the actions interface, one type each: what the call is given, which kinds of action
//! have it, how the export is called and what is checked of its answer. [`super::Runtime::call`] is
//! the one path that runs any of them, in the lane the caller chooses.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Deserialize;
use wasmtime::Store;

use super::error::{BadOutput, CallError, Fault};
use super::module::LoadedModule;
use crate::action::{
    ActionKind, BackupOutcome, BackupRequest, ItemRef, OperationProgress, ResourceId,
    RestoreOutcome, RestoreRequest,
};
use crate::bindings::{backup_outcome, restore_outcome, wit_actions, wit_types, Plugin};
use crate::capabilities::{CallId, CallState};

/// A guest call under way: the future wasmtime's bindings return, borrowing the store.
pub(super) type GuestCall<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// The most additional (or related, or post-operation) items one call may return.
pub(crate) const MAX_ITEMS: usize = 100_000;

/// One call of the actions interface with its input.
pub(crate) trait ActionCall: Send + 'static {
    /// What the caller gets.
    type Output;
    /// What the guest's export returns, before it is checked.
    type Raw: Send + 'static;
    /// The call's name in the WIT interface (for [`CallError::WrongKind`]).
    const NAME: &'static str;
    /// Whether the call's answer names items to Velero in a backup (additional or related items):
    /// such a call may ask what was named before (`named-items`).
    const NAMES_ITEMS: bool = false;
    /// Whether the host records what the answer names ([`Self::named`]) once a serving call has
    /// answered: only a listed item-block action's related items (docs/named-items.md#s2).
    fn recorded(&self) -> bool {
        false
    }
    /// The items the answer names to Velero, recorded when [`Self::recorded`].
    fn named(output: &Self::Output) -> &[ResourceId] {
        let _ = output;
        &[]
    }
    /// Whether an action of `kind` has this call (a v1 action has no `progress`).
    fn allowed(kind: ActionKind) -> bool;
    /// The item the call is on, and the uid of the Backup or Restore it is made for (its reads may
    /// come from that backup's read view).
    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>);
    /// Calls the export for the action `name`.
    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw>;
    /// Checks what the guest returned and makes the caller's answer of it.
    fn answer(
        raw: Self::Raw,
        module: &LoadedModule,
        id: &CallId,
    ) -> Result<Self::Output, CallError>;
}

/// Backup Execute (`backup`, `backup-v2`) on one item; `item` is the identity of `request.item`, as
/// the caller read it.
#[derive(Clone)]
pub struct Backup {
    /// The item's identity.
    pub item: ItemRef,
    /// The item and the Backup.
    pub request: BackupRequest,
}

impl ActionCall for Backup {
    type Output = BackupOutcome;
    type Raw = (Result<wit_actions::BackupResponse, String>, String);
    const NAME: &'static str = "backup";
    const NAMES_ITEMS: bool = true;

    fn allowed(kind: ActionKind) -> bool {
        matches!(kind, ActionKind::Backup | ActionKind::BackupV2)
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (Some(self.item.clone()), uid_of(&self.request.backup))
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        let request = wit_actions::BackupRequest {
            item: self.request.item,
            backup: self.request.backup,
        };
        Box::pin(async move {
            let response = plugin
                .velero_wasm_plugin_actions()
                .call_backup(store, &name, &request)
                .await?;
            Ok((response, request.item))
        })
    }

    fn answer(
        (response, item): Self::Raw,
        module: &LoadedModule,
        id: &CallId,
    ) -> Result<BackupOutcome, CallError> {
        let response = response.map_err(CallError::Action)?;
        check_output(
            module,
            id,
            response.item.as_deref(),
            &response.additional_items,
        )?;
        check_ids(id, "post-operation items", &response.post_operation_items)?;
        Ok(backup_outcome(response, item))
    }
}

/// Restore Execute (`restore`, `restore-v2`) on one item; `item` is the identity of `request.item`.
#[derive(Clone)]
pub struct Restore {
    /// The item's identity.
    pub item: ItemRef,
    /// The item, the item as backed up, and the Restore.
    pub request: RestoreRequest,
}

impl ActionCall for Restore {
    type Output = RestoreOutcome;
    type Raw = (Result<wit_actions::RestoreResponse, String>, String);
    const NAME: &'static str = "restore";

    fn allowed(kind: ActionKind) -> bool {
        matches!(kind, ActionKind::Restore | ActionKind::RestoreV2)
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (Some(self.item.clone()), uid_of(&self.request.restore))
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        let request = wit_actions::RestoreRequest {
            item: self.request.item,
            item_from_backup: self.request.item_from_backup,
            restore: self.request.restore,
        };
        Box::pin(async move {
            let response = plugin
                .velero_wasm_plugin_actions()
                .call_restore(store, &name, &request)
                .await?;
            Ok((response, request.item))
        })
    }

    fn answer(
        (response, item): Self::Raw,
        module: &LoadedModule,
        id: &CallId,
    ) -> Result<RestoreOutcome, CallError> {
        let response = response.map_err(CallError::Action)?;
        check_output(
            module,
            id,
            response.item.as_deref(),
            &response.additional_items,
        )?;
        Ok(restore_outcome(response, item))
    }
}

/// ItemBlockAction GetRelatedItems: the items to back up in the same block as the item.
#[derive(Clone)]
pub struct RelatedItems {
    /// The item's identity.
    pub item: ItemRef,
    /// The item's JSON.
    pub(crate) text: String,
    /// The Backup's JSON.
    pub(crate) backup: String,
    /// Whether its answer is the whole of what Velero gets (a listed action's call), so that what it
    /// names is recorded (`named-items`); not for one of the calls a slot chains, whose answer Velero
    /// never gets when a later one fails.
    pub(crate) answers_velero: bool,
}

impl ActionCall for RelatedItems {
    type Output = Vec<ResourceId>;
    type Raw = Result<Vec<wit_types::ResourceId>, String>;
    const NAME: &'static str = "related-items";
    const NAMES_ITEMS: bool = true;

    fn recorded(&self) -> bool {
        self.answers_velero
    }

    fn named(output: &Vec<ResourceId>) -> &[ResourceId] {
        output
    }

    fn allowed(kind: ActionKind) -> bool {
        kind == ActionKind::ItemBlock
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (Some(self.item.clone()), uid_of(&self.backup))
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        Box::pin(async move {
            plugin
                .velero_wasm_plugin_actions()
                .call_related_items(store, &name, &self.text, &self.backup)
                .await
        })
    }

    fn answer(raw: Self::Raw, _: &LoadedModule, id: &CallId) -> Result<Self::Output, CallError> {
        let items = raw.map_err(CallError::Action)?;
        check_ids(id, "related items", &items)?;
        Ok(items.into_iter().map(ResourceId::from).collect())
    }
}

/// DeleteItemAction Execute on one item of a backup being deleted.
#[derive(Clone)]
pub struct Delete {
    /// The item's identity.
    pub item: ItemRef,
    /// The item's JSON.
    pub(crate) text: String,
    /// The Backup's JSON.
    pub(crate) backup: String,
}

impl ActionCall for Delete {
    type Output = ();
    type Raw = Result<(), String>;
    const NAME: &'static str = "delete";

    fn allowed(kind: ActionKind) -> bool {
        kind == ActionKind::Delete
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (Some(self.item.clone()), None)
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        Box::pin(async move {
            plugin
                .velero_wasm_plugin_actions()
                .call_delete(store, &name, &self.text, &self.backup)
                .await
        })
    }

    fn answer(raw: Self::Raw, _: &LoadedModule, _: &CallId) -> Result<(), CallError> {
        raw.map_err(CallError::Action)
    }
}

/// The progress of an operation a v2 action started; `subject` is the Backup or Restore JSON.
pub struct Progress {
    /// The operation's id, as the action returned it.
    pub operation_id: String,
    /// The Backup or Restore JSON.
    pub(crate) subject: String,
}

impl ActionCall for Progress {
    type Output = OperationProgress;
    type Raw = Result<wit_actions::OperationProgress, String>;
    const NAME: &'static str = "progress";

    fn allowed(kind: ActionKind) -> bool {
        matches!(kind, ActionKind::BackupV2 | ActionKind::RestoreV2)
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (None, None)
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        Box::pin(async move {
            plugin
                .velero_wasm_plugin_actions()
                .call_progress(store, &name, &self.operation_id, &self.subject)
                .await
        })
    }

    fn answer(raw: Self::Raw, _: &LoadedModule, _: &CallId) -> Result<Self::Output, CallError> {
        Ok(raw.map_err(CallError::Action)?.into())
    }
}

/// Cancels an operation a v2 action started.
pub struct Cancel {
    /// The operation's id.
    pub operation_id: String,
    /// The Backup or Restore JSON.
    pub(crate) subject: String,
}

impl ActionCall for Cancel {
    type Output = ();
    type Raw = Result<(), String>;
    const NAME: &'static str = "cancel";

    fn allowed(kind: ActionKind) -> bool {
        matches!(kind, ActionKind::BackupV2 | ActionKind::RestoreV2)
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (None, None)
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        Box::pin(async move {
            plugin
                .velero_wasm_plugin_actions()
                .call_cancel(store, &name, &self.operation_id, &self.subject)
                .await
        })
    }

    fn answer(raw: Self::Raw, _: &LoadedModule, _: &CallId) -> Result<(), CallError> {
        raw.map_err(CallError::Action)
    }
}

/// Whether the additional items of a `restore-v2` action are ready.
pub struct ItemsReady {
    /// The additional items.
    pub items: Vec<ResourceId>,
    /// The Restore JSON.
    pub(crate) restore: String,
}

impl ActionCall for ItemsReady {
    type Output = bool;
    type Raw = Result<bool, String>;
    const NAME: &'static str = "items-ready";

    fn allowed(kind: ActionKind) -> bool {
        kind == ActionKind::RestoreV2
    }

    fn subject(&self) -> (Option<ItemRef>, Option<Arc<str>>) {
        (None, None)
    }

    fn call<'a>(
        self,
        plugin: &'a Plugin,
        store: &'a mut Store<CallState>,
        name: String,
    ) -> GuestCall<'a, Self::Raw> {
        let items: Vec<wit_types::ResourceId> = self.items.into_iter().map(Into::into).collect();
        Box::pin(async move {
            plugin
                .velero_wasm_plugin_actions()
                .call_items_ready(store, &name, &items, &self.restore)
                .await
        })
    }

    fn answer(raw: Self::Raw, _: &LoadedModule, _: &CallId) -> Result<bool, CallError> {
        raw.map_err(CallError::Action)
    }
}

/// The `metadata.uid` of a Backup or Restore as Velero sends it (JSON); `None` when it has none or
/// is not JSON (the action then gets the text as it is, and its reads go to the API server).
fn uid_of(subject: &str) -> Option<Arc<str>> {
    #[derive(Deserialize)]
    struct Subject {
        metadata: Metadata,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        uid: String,
    }
    let subject: Subject = serde_json::from_str(subject).ok()?;
    Some(subject.metadata.uid)
        .filter(|uid| !uid.is_empty())
        .map(Arc::from)
}

/// Checks an item an action returned, and its additional items.
fn check_output(
    module: &LoadedModule,
    ctx: &CallId,
    item: Option<&str>,
    additional: &[wit_types::ResourceId],
) -> Result<(), CallError> {
    if let Some(item) = item {
        check_item(item, module.limits.output).map_err(|problem| fault(ctx, problem))?;
    }
    check_ids(ctx, "additional items", additional)
}

fn fault(ctx: &CallId, problem: BadOutput) -> CallError {
    CallError::fault(ctx, Fault::Output(problem))
}

/// An item must be a JSON object with a non-empty `kind`, within the module's output limit.
fn check_item(item: &str, limit: u64) -> Result<(), BadOutput> {
    if item.len() as u64 > limit {
        return Err(BadOutput::ItemTooLarge {
            len: item.len(),
            limit,
        });
    }
    #[derive(Deserialize)]
    struct Kinded<'a> {
        #[serde(borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_str::<Kinded>(item) {
        Err(e) => Err(BadOutput::NotObject(e)),
        Ok(k) if k.kind.as_deref().unwrap_or("").is_empty() => Err(BadOutput::NoKind),
        Ok(_) => Ok(()),
    }
}

/// Identifiers must use plural lower-case resources and groups without versions (Velero looks them up
/// by `resource.group`).
fn check_ids(
    ctx: &CallId,
    what: &'static str,
    ids: &[wit_types::ResourceId],
) -> Result<(), CallError> {
    if ids.len() > MAX_ITEMS {
        let count = ids.len();
        return Err(fault(
            ctx,
            BadOutput::TooManyIds {
                count,
                limit: MAX_ITEMS,
                what,
            },
        ));
    }
    for (i, id) in ids.iter().enumerate() {
        let bad_resource = id.resource.is_empty()
            || id
                .resource
                .bytes()
                .any(|b| b.is_ascii_uppercase() || b == b'/' || b == b'.');
        let bad_group = id.group.contains('/') || id.group.bytes().any(|b| b.is_ascii_uppercase());
        if bad_resource || bad_group {
            let bad = BadOutput::BadId {
                what,
                index: i,
                group: id.group.clone(),
                resource: id.resource.clone(),
            };
            return Err(fault(ctx, bad));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_item;

    #[test]
    fn items_must_be_objects_with_a_kind_within_the_limit() {
        assert!(check_item(r#"{"kind":"Pod","spec":{"a":[1,2]}}"#, 100).is_ok());
        assert_eq!(
            check_item(r#"{"metadata":{}}"#, 100)
                .unwrap_err()
                .to_string(),
            "an item without a kind"
        );
        assert_eq!(
            check_item(r#"{"kind":""}"#, 100).unwrap_err().to_string(),
            "an item without a kind"
        );
        assert!(check_item("[1]", 100)
            .unwrap_err()
            .to_string()
            .contains("not a JSON object"));
        assert!(check_item("{\"kind\":\"Pod\",", 100)
            .unwrap_err()
            .to_string()
            .contains("not a JSON object"));
        assert!(check_item(r#"{"kind":"Pod"}"#, 5)
            .unwrap_err()
            .to_string()
            .contains("over its output limit"));
        assert!(check_item(r#"{"kind":"Pod\u0041"}"#, 100).is_ok());
    }
}
