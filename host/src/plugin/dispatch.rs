//! What every Velero service does before it calls the runtime: find the action the request's `plugin`
//! field names among those the service's kind can run, check the JSON documents of the request, and
//! open the tracing span that tags every log line of the call with the action and the item.
//!
//! An action Velero listed that no module provides any more is *retired* ([`super::kept_listing`]): its
//! AppliesTo matches nothing ([`RETIRED_RESOURCE`]), Execute returns the item unchanged, and its
//! operations cannot be followed. A v1 service never passes on an operation a v2 action started.
//!
//! A slot's name finds the actions in service that the listing Velero holds lacks ([`super::slot`]).

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tonic::{Response, Status};
use tracing::{Instrument, Span};

use super::convert::resource_selector;
use super::grpc_status;
use super::kept_listing::Listed;
use super::proto::generated::ResourceSelector;
use super::served::Covered;
use super::served::{RuntimeActions, ServedAction, ServedActions};
use crate::action::slot::{pending, slot_family, Family};
use crate::action::{
    ActionKind, BackupOutcome, BackupRequest, ItemRef, OperationProgress, ResourceId,
    RestoreOutcome, RestoreRequest,
};
use crate::runtime::{calls, CallError, Runtime};
use crate::shadow::{Budget as ShadowBudget, Mirror, Shadows};

/// The only resource a retired action applies to: a name no API server serves.
pub const RETIRED_RESOURCE: &str = "retired-action.velero-wasm.io";

/// The actions in service, as the gRPC services see them.
#[derive(Clone)]
pub struct Dispatch {
    /// What runs the actions: the wasm runtime in the plugin, a fake in protocol tests.
    actions: Arc<dyn ServedActions>,
    /// The shadows the calls are mirrored to, after their answer (their figures are written and
    /// summed up through this).
    shadows: Arc<Shadows>,
    /// Known once the modules are loaded (after the handshake, see [`super::gate`]).
    retired: Arc<OnceLock<BTreeSet<Listed>>>,
    /// The listing Velero holds (kept when it was given, [`super::kept_listing`]): the slots serve the
    /// actions in service it lacks. Unknown (no state directory), the slots serve nothing.
    listed: Arc<OnceLock<Vec<Listed>>>,
}

/// What a request's `plugin` names.
pub(crate) enum Found {
    /// A loaded action.
    Action(Box<dyn ServedAction>),
    /// An action Velero listed that no module provides any more.
    Retired,
    /// A slot, with the actions it serves now.
    Slot(Covered),
}

/// An item from a request: its JSON text and its identity.
pub struct Item {
    /// The JSON, exactly as received.
    pub(crate) text: String,
    /// Kind, resource, namespace, name.
    pub id: ItemRef,
}

impl Dispatch {
    /// Dispatches to the modules of `runtime`, mirroring calls to their shadows within
    /// `shadow_budget` (the configuration's, read at start by the caller): the plugin's dispatch.
    pub fn new(runtime: Arc<Runtime>, shadow_budget: ShadowBudget) -> Dispatch {
        let shadows = Shadows::new(shadow_budget);
        let actions = Arc::new(RuntimeActions::new(runtime, shadows.clone()));
        Dispatch::serving(actions, shadows)
    }

    /// Dispatches to `actions`, whatever runs them (protocol tests serve a fake); `shadows` are those
    /// the actions mirror their calls to, finished and written through [`Self::shadows`].
    pub fn serving(actions: Arc<dyn ServedActions>, shadows: Arc<Shadows>) -> Dispatch {
        Dispatch {
            actions,
            shadows,
            retired: Arc::default(),
            listed: Arc::default(),
        }
    }

    /// The actions in service (`ListPlugins` lists them).
    pub(crate) fn actions(&self) -> &dyn ServedActions {
        &*self.actions
    }

    /// The shadows calls are mirrored to.
    pub(crate) fn shadows(&self) -> &Shadows {
        &self.shadows
    }

    /// Also answers for these actions, which Velero listed and no module provides any more; set once
    /// the modules are loaded (a second call changes nothing).
    pub fn set_retired(&self, retired: BTreeSet<Listed>) {
        let _ = self.retired.set(retired);
    }

    /// The listing Velero holds, as kept when it was given; set once the modules are loaded (a
    /// second call changes nothing). The slots serve the actions in service it lacks.
    pub fn set_listed(&self, listed: Vec<Listed>) {
        let _ = self.listed.set(listed);
    }

    /// The actions the slot of `family` serves now, in name order: those in service of its kinds that
    /// the listing Velero holds lacks; none while that listing is unknown.
    pub(crate) fn covered(&self, family: Family) -> Covered {
        let Some(listed) = self.listed.get() else {
            return Covered::new(family, Vec::new());
        };
        let actions = pending(listed, &self.actions.actions())
            .into_iter()
            .filter(|(kind, _)| Family::of(*kind) == family)
            .filter_map(|(_, name)| self.actions.action(&name))
            .collect();
        Covered::new(family, actions)
    }

    /// The action named `name`, if Velero's service for `kind` can run it, or a retired action of that
    /// kind and name; otherwise Velero's "not found" status. While modules load, waits for the module
    /// that provides it (for all of them, when none in service does yet).
    pub(crate) async fn find(&self, kind: ActionKind, name: &str) -> Result<Found, Status> {
        if let Some(family) = slot_family(name).filter(|f| *f == Family::of(kind)) {
            // Any module may add an action the slot serves.
            self.actions.all_loaded().await;
            return Ok(Found::Slot(self.covered(family)));
        }
        self.actions.ready_for(name).await;
        let Some(action) = self.actions.action(name) else {
            let listed = (kind, name.to_string());
            if self.retired.get().is_some_and(|r| r.contains(&listed)) {
                tracing::warn!("{name} was listed to Velero but no module provides it any more: it does nothing until Velero restarts");
                return Ok(Found::Retired);
            }
            return Err(grpc_status::not_found(
                kind,
                name,
                "no loaded module provides it",
            ));
        };
        let actual = action.info().kind;
        if !kind.can_serve(actual) {
            return Err(grpc_status::not_found(
                kind,
                name,
                &format!("it is a {} action", actual.velero_kind()),
            ));
        }
        Ok(Found::Action(action))
    }

    /// Backup Execute (v1 and v2): checks the request's documents, names the item in the call's span,
    /// runs the action.
    pub(crate) async fn backup(
        &self,
        kind: ActionKind,
        name: &str,
        item: Vec<u8>,
        backup: Vec<u8>,
    ) -> Result<BackupOutcome, Status> {
        let found = self.find(kind, name).await?;
        let item = self::item("item", item)?;
        tag(&item.id);
        let backup = document("backup", backup)?;
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => return self.slot_backup(kind, covered, item, backup).await,
            Found::Retired => {
                return Ok(BackupOutcome {
                    item: item.text,
                    additional_items: Vec::new(),
                    operation_id: None,
                    post_operation_items: Vec::new(),
                })
            }
        };
        let request = BackupRequest {
            item: item.text,
            backup,
        };
        let call = calls::Backup {
            item: item.id,
            request,
        };
        let outcome = self.mirrored(kind, &*action, "Execute", call).await?;
        if let (ActionKind::Backup, Some(id)) = (kind, &outcome.operation_id) {
            return Err(grpc_status::untracked_operation(kind, name, id));
        }
        if let Some(id) = &outcome.operation_id {
            tracing::debug!(operation_id = id.as_str(), "operation started");
        }
        Ok(outcome)
    }

    /// Restore Execute (v1 and v2), likewise.
    pub(crate) async fn restore(
        &self,
        kind: ActionKind,
        name: &str,
        item: Vec<u8>,
        item_from_backup: Vec<u8>,
        restore: Vec<u8>,
    ) -> Result<RestoreOutcome, Status> {
        let found = self.find(kind, name).await?;
        let item = self::item("item", item)?;
        tag(&item.id);
        let id = item.id;
        let request = RestoreRequest {
            item: item.text,
            item_from_backup: self::item("itemFromBackup", item_from_backup)?.text,
            restore: document("restore", restore)?,
        };
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => return self.slot_restore(kind, covered, request).await,
            Found::Retired => {
                return Ok(RestoreOutcome {
                    item: request.item,
                    additional_items: Vec::new(),
                    skip_restore: false,
                    operation_id: None,
                    wait_for_additional_items: false,
                    additional_items_timeout: None,
                })
            }
        };
        let call = calls::Restore { item: id, request };
        let outcome = self.mirrored(kind, &*action, "Execute", call).await?;
        if let (ActionKind::Restore, Some(id)) = (kind, &outcome.operation_id) {
            return Err(grpc_status::untracked_operation(kind, name, id));
        }
        if let Some(id) = &outcome.operation_id {
            tracing::debug!(operation_id = id.as_str(), "operation started");
        }
        Ok(outcome)
    }

    /// ItemBlockAction GetRelatedItems.
    pub(crate) async fn related_items(
        &self,
        name: &str,
        item: Vec<u8>,
        backup: Vec<u8>,
    ) -> Result<Vec<ResourceId>, Status> {
        let kind = ActionKind::ItemBlock;
        let found = self.find(kind, name).await?;
        let item = self::item("item", item)?;
        tag(&item.id);
        let backup = document("backup", backup)?;
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => return self.slot_related_items(covered, item, backup).await,
            Found::Retired => return Ok(Vec::new()),
        };
        let call = calls::RelatedItems {
            item: item.id,
            text: item.text,
            backup,
            answers_velero: true,
        };
        self.mirrored(kind, &*action, "GetRelatedItems", call).await
    }

    /// DeleteItemAction Execute.
    pub(crate) async fn delete(
        &self,
        name: &str,
        item: Vec<u8>,
        backup: Vec<u8>,
    ) -> Result<(), Status> {
        let kind = ActionKind::Delete;
        let found = self.find(kind, name).await?;
        let item = self::item("item", item)?;
        tag(&item.id);
        let backup = document("backup", backup)?;
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => return self.slot_delete(covered, item, backup).await,
            Found::Retired => return Ok(()),
        };
        let call = calls::Delete {
            item: item.id,
            text: item.text,
            backup,
        };
        self.mirrored(kind, &*action, "Execute", call).await
    }

    /// Progress (v2): `subject` is the Backup or Restore, in the request field named `field`.
    pub(crate) async fn progress(
        &self,
        kind: ActionKind,
        name: &str,
        operation_id: &str,
        field: &str,
        subject: Vec<u8>,
    ) -> Result<OperationProgress, Status> {
        let found = self.find(kind, name).await?;
        let subject = document(field, subject)?;
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => {
                return self
                    .slot_progress(kind, covered.family(), operation_id, subject)
                    .await
            }
            Found::Retired => return Err(grpc_status::retired_operation(name)),
        };
        let operation_id = operation_id.to_string();
        let call = calls::Progress {
            operation_id,
            subject,
        };
        let progress = measured(&*action, "Progress", action.progress(call)).await;
        progress.map_err(|e| grpc_status::call_failed(kind, &e))
    }

    /// Cancel (v2), likewise.
    pub(crate) async fn cancel(
        &self,
        kind: ActionKind,
        name: &str,
        operation_id: &str,
        field: &str,
        subject: Vec<u8>,
    ) -> Result<(), Status> {
        let found = self.find(kind, name).await?;
        let subject = document(field, subject)?;
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => {
                return self
                    .slot_cancel(kind, covered.family(), operation_id, subject)
                    .await
            }
            Found::Retired => return Err(grpc_status::retired_operation(name)),
        };
        let operation_id = operation_id.to_string();
        let call = calls::Cancel {
            operation_id,
            subject,
        };
        let cancelled = measured(&*action, "Cancel", action.cancel(call)).await;
        cancelled.map_err(|e| grpc_status::call_failed(kind, &e))
    }

    /// AreAdditionalItemsReady (restore v2).
    pub(crate) async fn items_ready(
        &self,
        name: &str,
        items: Vec<ResourceId>,
        restore: Vec<u8>,
    ) -> Result<bool, Status> {
        let kind = ActionKind::RestoreV2;
        let found = self.find(kind, name).await?;
        let restore = document("restore", restore)?;
        let action = match found {
            Found::Action(action) => action,
            Found::Slot(covered) => return self.slot_items_ready(covered, items, restore).await,
            Found::Retired => return Ok(true),
        };
        let call = calls::ItemsReady { items, restore };
        let ready = measured(
            &*action,
            "AreAdditionalItemsReady",
            action.items_ready(call),
        )
        .await;
        ready.map_err(|e| grpc_status::call_failed(kind, &e))
    }

    /// The AppliesTo answer for the action `name` of `kind`: its selector, always set.
    pub(crate) async fn applies_to(
        &self,
        kind: ActionKind,
        name: &str,
    ) -> Result<ResourceSelector, Status> {
        let span = call_span(kind, "AppliesTo", name);
        let found = self
            .find(kind, name)
            .instrument(span.clone())
            .await
            .inspect_err(|s| {
                span.in_scope(|| tracing::debug!("AppliesTo failed: {}", s.message()))
            })?;
        Ok(match found {
            Found::Action(action) => resource_selector(&action.info().applies_to),
            Found::Retired => ResourceSelector {
                included_resources: vec![RETIRED_RESOURCE.to_string()],
                ..ResourceSelector::default()
            },
            Found::Slot(covered) => {
                let names: Vec<&str> = covered
                    .actions()
                    .iter()
                    .map(|a| a.info().name.as_str())
                    .collect();
                span.in_scope(|| tracing::debug!(serves = names.join(","), "AppliesTo of a slot"));
                resource_selector(&covered.selector())
            }
        })
    }
}

impl Dispatch {
    /// Makes `call` for Velero ([`measured`]), then hands it with its answer to the shadow of the
    /// module, if it has one: the one path of the calls that are mirrored.
    async fn mirrored<C: Served>(
        &self,
        kind: ActionKind,
        action: &dyn ServedAction,
        velero_call: &'static str,
        call: C,
    ) -> Result<C::Output, Status>
    where
        C::Output: Clone,
    {
        self.mirrored_call(kind, action, velero_call, call)
            .await
            .map_err(|e| grpc_status::call_failed(kind, &e))
    }

    /// [`Self::mirrored`] with the call's own error, for a slot to name the action in it.
    pub(super) async fn mirrored_call<C: Served>(
        &self,
        kind: ActionKind,
        action: &dyn ServedAction,
        velero_call: &'static str,
        call: C,
    ) -> Result<C::Output, Arc<CallError>>
    where
        C::Output: Clone,
    {
        let kept = action.has_shadow().then(|| call.clone());
        let result = measured(action, velero_call, call.served_by(action))
            .await
            .map_err(Arc::new);
        if let Some(call) = kept {
            action.mirror(call.mirrored(kind, result.clone()));
        }
        result
    }
}

/// A call to an action, made by [`ServedAction`] (the future of one of its methods).
type ServedCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, CallError>> + Send + 'a>>;

/// The calls that are mirrored to shadows, each with the [`ServedAction`] method that makes it.
pub(super) trait Served: Mirror
where
    Self::Output: Clone,
{
    /// Makes the call to `action`.
    fn served_by(self, action: &dyn ServedAction) -> ServedCall<'_, Self::Output>;
}

impl Served for calls::Backup {
    fn served_by(self, action: &dyn ServedAction) -> ServedCall<'_, BackupOutcome> {
        action.backup(self)
    }
}

impl Served for calls::Restore {
    fn served_by(self, action: &dyn ServedAction) -> ServedCall<'_, RestoreOutcome> {
        action.restore(self)
    }
}

impl Served for calls::RelatedItems {
    fn served_by(self, action: &dyn ServedAction) -> ServedCall<'_, Vec<ResourceId>> {
        action.related_items(self)
    }
}

impl Served for calls::Delete {
    fn served_by(self, action: &dyn ServedAction) -> ServedCall<'_, ()> {
        action.delete(self)
    }
}

/// Waits for `work`, a call to `action` for Velero (whose name for it is `velero_call`), recorded in
/// the metrics when they are exported (see [`crate::metrics`]).
pub(super) async fn measured<T>(
    action: &dyn ServedAction,
    velero_call: &'static str,
    work: impl Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    crate::metrics::measured(action.module(), &action.info().name, velero_call, work).await
}

/// Reads an item field: UTF-8 JSON of an object with a non-empty `kind`, as Velero requires of items.
pub fn item(field: &str, bytes: Vec<u8>) -> Result<Item, Status> {
    let text = object(field, bytes)?;
    let id = ItemRef::parse(&text)
        .map_err(|e| grpc_status::bad_request(field, format!("not valid JSON: {}", e.0)))?;
    if id.kind.is_empty() {
        return Err(grpc_status::bad_request(
            field,
            format!("Object 'Kind' is missing in '{}'", excerpt(&text)),
        ));
    }
    Ok(Item { text, id })
}

/// Reads a Backup or Restore field: UTF-8 JSON of an object (its `kind` may be absent).
pub fn document(field: &str, bytes: Vec<u8>) -> Result<String, Status> {
    let text = object(field, bytes)?;
    serde_json::from_str::<serde::de::IgnoredAny>(&text)
        .map_err(|e| grpc_status::bad_request(field, format!("not valid JSON: {e}")))?;
    Ok(text)
}

fn object(field: &str, bytes: Vec<u8>) -> Result<String, Status> {
    if bytes.is_empty() {
        return Err(grpc_status::bad_request(
            field,
            "is empty (unexpected end of JSON input)",
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| grpc_status::bad_request(field, format!("not UTF-8 text: {e}")))?;
    if !text.trim_start().starts_with('{') {
        return Err(grpc_status::bad_request(
            field,
            format!("must be a JSON object, got '{}'", excerpt(&text)),
        ));
    }
    Ok(text)
}

/// The first 200 characters of a document, for error messages.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// The span of one call: every line logged during it (the host's and the guest's) carries the kind,
/// the call and the action, and once [`tag`] names it, the item's resource, namespace and name, so that
/// Velero attributes it. Created at error level so that it is enabled whatever `--log-level` says; it
/// only adds fields.
pub(crate) fn call_span(kind: ActionKind, call: &'static str, action: &str) -> Span {
    tracing::error_span!(
        "call",
        kind = kind.velero_kind(),
        call,
        action,
        resource = tracing::field::Empty,
        namespace = tracing::field::Empty,
        name = tracing::field::Empty,
    )
}

/// Names the item in the current call's span.
pub(crate) fn tag(item: &ItemRef) {
    let span = Span::current();
    span.record("resource", item.group_resource().as_str());
    span.record("namespace", item.namespace.as_str());
    span.record("name", item.name.as_str());
}

/// Runs one call inside its span and logs its outcome at debug level (a failure is Velero's to
/// report: it logs the status at error level itself).
pub(crate) async fn traced<T>(
    span: Span,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<Response<T>, Status> {
    async move {
        let started = Instant::now();
        let result = call.await;
        // The fields are computed only when debug lines are enabled.
        match &result {
            Ok(_) => tracing::debug!(
                elapsed_us = started.elapsed().as_micros() as u64,
                "call finished"
            ),
            Err(status) => tracing::debug!(
                elapsed_us = started.elapsed().as_micros() as u64,
                code = ?status.code(),
                "call failed: {}",
                status.message()
            ),
        }
        result.map(Response::new)
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    #[test]
    fn items_must_be_objects_with_a_kind() {
        let ok = item(
            "item",
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"}}"#.to_vec(),
        )
        .unwrap();
        assert_eq!(ok.id.to_string(), "pods ns/p");
        for (bytes, expected) in [
            (&b""[..], "item: is empty (unexpected end of JSON input)"),
            (b"null", "item: must be a JSON object, got 'null'"),
            (b"[\"v1\",\"Pod\"]", "item: must be a JSON object"),
            (b"{\"kind\":", "item: not valid JSON: EOF"),
            (
                b"{\"metadata\":{}}",
                "item: Object 'Kind' is missing in '{\"metadata\":{}}'",
            ),
            (
                b"{\"kind\":\"Pod\"} trailing",
                "item: not valid JSON: trailing characters",
            ),
            (b"\xff{}", "item: not UTF-8 text"),
        ] {
            let status = item("item", bytes.to_vec()).err().unwrap();
            assert_eq!(status.code(), Code::InvalidArgument);
            assert!(
                status.message().starts_with(expected),
                "{:?}: {}",
                String::from_utf8_lossy(bytes),
                status.message()
            );
        }
    }

    #[test]
    fn documents_must_be_json_objects() {
        assert!(document("backup", b"{\"spec\":{}}".to_vec()).is_ok());
        assert!(document("backup", b"{\"spec\":".to_vec())
            .unwrap_err()
            .message()
            .starts_with("backup: not valid JSON"));
        assert!(document("restore", Vec::new())
            .unwrap_err()
            .message()
            .contains("unexpected end of JSON input"));
    }
}
