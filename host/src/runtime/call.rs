//! One call into a component: given the action its caller found and the item it read, instantiate in
//! a fresh store under the module's memory cap and deadline, call the export, turn misbehaviour into a
//! [`Fault`], check what came back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use wasmtime::Store;

use super::error::{CallError, Fault};
use super::module::LoadedModule;
use super::registry::ActionEntry;
use super::Runtime;
use crate::action::{
    ActionInfo, ActionKind, BackupOutcome, BackupRequest, ItemRef, OperationProgress, ResourceId,
    RestoreOutcome, RestoreRequest,
};
use crate::bindings::{backup_outcome, restore_outcome, wit_actions, wit_types, Plugin};
use crate::capabilities::memory::{MemoryBudget, MemoryCap, Refusal};
use crate::capabilities::{CallId, CallState};

/// How a call is admitted and bounded: a serving call waits for one of the runtime's slots and draws
/// on the process's memory budget; a shadow call (`crate::shadow`) was admitted by the shadows' own
/// budget, takes no slot, and runs under the shadows' deadline and memory budget.
#[derive(Clone, Copy, Debug)]
pub enum Lane {
    /// A call whose answer goes to Velero.
    Serving,
    /// A shadow's call, compared and dropped.
    Shadow {
        /// The longest a shadow call may run (the module's own timeout, if shorter, wins).
        timeout: Duration,
        /// The guest memory all shadow calls together may hold.
        memory: &'static MemoryBudget,
    },
}

/// The most additional (or related, or post-operation) items one call may return.
pub const MAX_ITEMS: usize = 100_000;

/// How far a call got.
enum Stage<R> {
    Instantiate(wasmtime::Error),
    Called(wasmtime::Result<R>),
}

type GuestCall<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// The calls of the actions interface, and the kinds that have each.
#[derive(Clone, Copy)]
enum Export {
    Backup,
    Restore,
    RelatedItems,
    Delete,
    Progress,
    Cancel,
    ItemsReady,
}

impl Export {
    fn name(self) -> &'static str {
        match self {
            Export::Backup => "backup",
            Export::Restore => "restore",
            Export::RelatedItems => "related-items",
            Export::Delete => "delete",
            Export::Progress => "progress",
            Export::Cancel => "cancel",
            Export::ItemsReady => "items-ready",
        }
    }

    fn allowed(self, kind: ActionKind) -> bool {
        use ActionKind::*;
        match self {
            Export::Backup => matches!(kind, Backup | BackupV2),
            Export::Restore => matches!(kind, Restore | RestoreV2),
            Export::RelatedItems => kind == ItemBlock,
            Export::Delete => kind == Delete,
            Export::Progress | Export::Cancel => matches!(kind, BackupV2 | RestoreV2),
            Export::ItemsReady => kind == RestoreV2,
        }
    }
}

/// Refuses a call the action's kind does not have (a v1 action has no Progress): a check of the
/// entry, not a second lookup.
fn check_export(entry: &ActionEntry, export: Export) -> Result<(), CallError> {
    let kind = entry.info().kind;
    if export.allowed(kind) {
        return Ok(());
    }
    Err(CallError::WrongKind {
        action: entry.info().name.clone(),
        kind,
        call: export.name(),
    })
}

impl Runtime {
    /// The action named `name`, if some module provides it.
    pub fn action(&self, name: &str) -> Option<ActionEntry> {
        self.catalog().action(name).cloned()
    }

    /// The action named `name` as a call needs it: the one lookup of a call, whose entry the call
    /// methods below take.
    pub fn resolve(&self, name: &str) -> Result<ActionEntry, CallError> {
        self.action(name)
            .ok_or_else(|| CallError::UnknownAction(name.to_string()))
    }

    /// Runs a backup action (`backup`, `backup-v2`) on one item; `item` is the identity of
    /// `request.item`, as the caller read it.
    pub async fn backup(
        &self,
        entry: &ActionEntry,
        item: ItemRef,
        request: BackupRequest,
    ) -> Result<BackupOutcome, CallError> {
        self.backup_on(Lane::Serving, entry, item, request).await
    }

    /// [`Self::backup`] in `lane`.
    pub async fn backup_on(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        item: ItemRef,
        request: BackupRequest,
    ) -> Result<BackupOutcome, CallError> {
        check_export(entry, Export::Backup)?;
        let uid = uid_of(&request.backup);
        let wit_request = wit_actions::BackupRequest {
            item: request.item,
            backup: request.backup,
        };
        let name = entry.info().name.clone();
        let ((response, item), ctx) = self
            .invoke(lane, entry, Some(item), uid, move |plugin, store| {
                Box::pin(async move {
                    let response = plugin
                        .velero_wasm_plugin_actions()
                        .call_backup(store, &name, &wit_request)
                        .await?;
                    Ok((response, wit_request.item))
                })
            })
            .await?;
        let response = response.map_err(CallError::Action)?;
        let module = &entry.module;
        check_output(
            module,
            &ctx,
            response.item.as_deref(),
            &response.additional_items,
        )?;
        check_ids(&ctx, "post-operation items", &response.post_operation_items)?;
        Ok(backup_outcome(response, item))
    }

    /// Runs a restore action (`restore`, `restore-v2`) on one item; `item` is the identity of
    /// `request.item`.
    pub async fn restore(
        &self,
        entry: &ActionEntry,
        item: ItemRef,
        request: RestoreRequest,
    ) -> Result<RestoreOutcome, CallError> {
        self.restore_on(Lane::Serving, entry, item, request).await
    }

    /// [`Self::restore`] in `lane`.
    pub async fn restore_on(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        item: ItemRef,
        request: RestoreRequest,
    ) -> Result<RestoreOutcome, CallError> {
        check_export(entry, Export::Restore)?;
        let uid = uid_of(&request.restore);
        let wit_request = wit_actions::RestoreRequest {
            item: request.item,
            item_from_backup: request.item_from_backup,
            restore: request.restore,
        };
        let name = entry.info().name.clone();
        let ((response, item), ctx) = self
            .invoke(lane, entry, Some(item), uid, move |plugin, store| {
                Box::pin(async move {
                    let response = plugin
                        .velero_wasm_plugin_actions()
                        .call_restore(store, &name, &wit_request)
                        .await?;
                    Ok((response, wit_request.item))
                })
            })
            .await?;
        let response = response.map_err(CallError::Action)?;
        check_output(
            &entry.module,
            &ctx,
            response.item.as_deref(),
            &response.additional_items,
        )?;
        Ok(restore_outcome(response, item))
    }

    /// Runs an item-block action: the items to back up in the same block as `item` (`id` is its
    /// identity).
    pub async fn related_items(
        &self,
        entry: &ActionEntry,
        id: ItemRef,
        item: String,
        backup: String,
    ) -> Result<Vec<ResourceId>, CallError> {
        self.related_items_on(Lane::Serving, entry, id, item, backup)
            .await
    }

    /// [`Self::related_items`] in `lane`.
    pub async fn related_items_on(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        id: ItemRef,
        item: String,
        backup: String,
    ) -> Result<Vec<ResourceId>, CallError> {
        check_export(entry, Export::RelatedItems)?;
        let name = entry.info().name.clone();
        let uid = uid_of(&backup);
        let (response, ctx) = self
            .invoke(lane, entry, Some(id), uid, move |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_related_items(store, &name, &item, &backup)
                        .await
                })
            })
            .await?;
        let items = response.map_err(CallError::Action)?;
        check_ids(&ctx, "related items", &items)?;
        Ok(items.into_iter().map(ResourceId::from).collect())
    }

    /// Runs a delete action on one item of a backup being deleted (`id` is its identity).
    pub async fn delete(
        &self,
        entry: &ActionEntry,
        id: ItemRef,
        item: String,
        backup: String,
    ) -> Result<(), CallError> {
        self.delete_on(Lane::Serving, entry, id, item, backup).await
    }

    /// [`Self::delete`] in `lane`.
    pub async fn delete_on(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        id: ItemRef,
        item: String,
        backup: String,
    ) -> Result<(), CallError> {
        check_export(entry, Export::Delete)?;
        let name = entry.info().name.clone();
        let (response, _) = self
            .invoke(lane, entry, Some(id), None, move |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_delete(store, &name, &item, &backup)
                        .await
                })
            })
            .await?;
        response.map_err(CallError::Action)
    }

    /// The progress of an operation a v2 action started. `subject` is the Backup or Restore JSON.
    pub async fn progress(
        &self,
        entry: &ActionEntry,
        operation_id: &str,
        subject: String,
    ) -> Result<OperationProgress, CallError> {
        check_export(entry, Export::Progress)?;
        let (name, id) = (entry.info().name.clone(), operation_id.to_string());
        let (response, _) = self
            .invoke(Lane::Serving, entry, None, None, move |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_progress(store, &name, &id, &subject)
                        .await
                })
            })
            .await?;
        Ok(response.map_err(CallError::Action)?.into())
    }

    /// Cancels an operation a v2 action started.
    pub async fn cancel(
        &self,
        entry: &ActionEntry,
        operation_id: &str,
        subject: String,
    ) -> Result<(), CallError> {
        check_export(entry, Export::Cancel)?;
        let (name, id) = (entry.info().name.clone(), operation_id.to_string());
        let (response, _) = self
            .invoke(Lane::Serving, entry, None, None, move |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_cancel(store, &name, &id, &subject)
                        .await
                })
            })
            .await?;
        response.map_err(CallError::Action)
    }

    /// Whether the additional items of a `restore-v2` action are ready.
    pub async fn items_ready(
        &self,
        entry: &ActionEntry,
        items: Vec<ResourceId>,
        restore: String,
    ) -> Result<bool, CallError> {
        check_export(entry, Export::ItemsReady)?;
        let name = entry.info().name.clone();
        let items: Vec<wit_types::ResourceId> = items.into_iter().map(Into::into).collect();
        let (response, _) = self
            .invoke(Lane::Serving, entry, None, None, move |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_items_ready(store, &name, &items, &restore)
                        .await
                })
            })
            .await?;
        response.map_err(CallError::Action)
    }

    /// Asks a freshly linked module for its actions, under its own limits.
    pub(super) async fn describe(
        &self,
        linked: &super::module::Linked,
    ) -> Result<Vec<ActionInfo>, super::LoadError> {
        let Some(pre) = linked.exports.as_ref().and_then(|e| e.pre.as_ref()) else {
            return Ok(Vec::new());
        };
        let input = CallInput {
            id: CallId::new(linked.caps.module.clone(), "describe", None),
            caps: linked.caps.clone(),
            limits: linked.source.manifest.limits,
            budget: None,
        };
        let (result, id) = self
            .run_in_store(pre, input, |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_describe(store)
                        .await
                })
            })
            .await;
        match result {
            Ok(actions) => Ok(actions.into_iter().map(ActionInfo::from).collect()),
            Err(fault) => Err(linked.error(format!("describe {fault}{}", id.on_item()))),
        }
    }

    /// Runs `call` on the action of `entry`, on `item` if the call has one, for the Backup or Restore
    /// whose uid is `backup` (its reads may come from that backup's read view).
    async fn invoke<R: Send + 'static>(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        item: Option<ItemRef>,
        backup: Option<Arc<str>>,
        call: impl for<'a> FnOnce(&'a Plugin, &'a mut Store<CallState>) -> GuestCall<'a, R> + Send,
    ) -> Result<(R, CallId), CallError> {
        let module = &entry.module;
        let mut input = CallInput::of(module, &entry.info().name, item);
        input.id = input.id.for_backup(backup);
        if let Lane::Shadow { timeout, memory } = lane {
            input.limits.timeout = input.limits.timeout.min(timeout);
            input.budget = Some(memory);
        }
        let exports = module
            .exports()
            .await
            .map_err(|problem| CallError::fault(&input.id, Fault::Instantiate(problem)))?;
        let Some(pre) = &exports.pre else {
            let problem = "the module does not export velero-wasm:plugin/actions";
            return Err(CallError::fault(
                &input.id,
                Fault::Instantiate(problem.into()),
            ));
        };
        match self.run_in_store(pre, input, call).await {
            (Ok(r), id) => Ok((r, id)),
            (Err(fault), id) => Err(CallError::fault(&id, fault)),
        }
    }

    /// Runs one call once a slot is free: a call waits for a slot at most its own deadline, then runs
    /// under its full deadline.
    async fn run_in_store<R: Send + 'static>(
        &self,
        pre: &crate::bindings::PluginPre<CallState>,
        input: CallInput,
        call: impl for<'a> FnOnce(&'a Plugin, &'a mut Store<CallState>) -> GuestCall<'a, R> + Send,
    ) -> (Result<R, Fault>, CallId) {
        let timeout = input.limits.timeout;
        // A shadow call was admitted by the shadows' own budget: it never takes a serving call's slot.
        let shadow = input.budget.is_some();
        let slot = match shadow {
            true => None,
            false => Some(tokio::time::timeout(timeout, self.slots.acquire()).await),
        };
        match &slot {
            None | Some(Ok(Ok(_))) => {}
            Some(Ok(Err(_)) | Err(_)) => {
                let fault = Fault::NoSlot {
                    timeout,
                    slots: super::MAX_CONCURRENT_CALLS,
                };
                return (Err(fault), input.id);
            }
        };
        let host = Host {
            engine: &self.compiler.engine,
            services: &self.services,
            signing: Some(self.signing.clone()),
        };
        run_in_store(host, pre, input, call).await
    }
}

/// Where a call runs: the engine, the host-wide services, and where the call's `signing` import goes
/// (`None` where the import is not offered: inside a signing call itself).
pub(super) struct Host<'a> {
    pub engine: &'a wasmtime::Engine,
    pub services: &'a Arc<crate::capabilities::Services>,
    pub signing: Option<Arc<dyn crate::capabilities::SigningService>>,
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

/// What one call is given besides its guest function: which call it is, and the grant and limits of
/// its module.
pub(super) struct CallInput {
    pub id: CallId,
    pub caps: Arc<crate::capabilities::ModuleCaps>,
    pub limits: crate::modules::Limits,
    /// The memory budget the call draws on, when not the process's (a shadow call's).
    pub budget: Option<&'static MemoryBudget>,
}

impl CallInput {
    /// A call of `action` (on `item`, if any) to `module`, under its grant and limits.
    pub(super) fn of(module: &LoadedModule, action: &str, item: Option<ItemRef>) -> CallInput {
        CallInput {
            id: CallId::new(module.name.clone(), action, item),
            caps: module.caps.clone(),
            limits: module.limits,
            budget: None,
        }
    }
}

/// A module prepared for instantiation: a typed world (`PluginPre`) or a plain `InstancePre`.
pub(super) trait Prepared: Sync {
    /// What instantiation yields.
    type Instance: Send;
    /// Instantiates in `store`.
    fn instantiate<'a>(&'a self, store: &'a mut Store<CallState>) -> GuestCall<'a, Self::Instance>;
}

impl Prepared for crate::bindings::PluginPre<CallState> {
    type Instance = Plugin;
    fn instantiate<'a>(&'a self, store: &'a mut Store<CallState>) -> GuestCall<'a, Plugin> {
        Box::pin(self.instantiate_async(store))
    }
}

impl Prepared for wasmtime::component::InstancePre<CallState> {
    type Instance = wasmtime::component::Instance;
    fn instantiate<'a>(&'a self, store: &'a mut Store<CallState>) -> GuestCall<'a, Self::Instance> {
        Box::pin(self.instantiate_async(store))
    }
}

/// Runs one call in a fresh store under the module's memory cap and deadline, and turns misbehaviour
/// into a [`Fault`].
pub(super) async fn run_in_store<P: Prepared, R: Send + 'static>(
    host: Host<'_>,
    pre: &P,
    input: CallInput,
    call: impl for<'a> FnOnce(&'a P::Instance, &'a mut Store<CallState>) -> GuestCall<'a, R> + Send,
) -> (Result<R, Fault>, CallId) {
    let CallInput {
        id,
        caps,
        limits,
        budget,
    } = input;
    let mut state = CallState::new(id, caps, host.services.clone(), &limits);
    if let Some(budget) = budget {
        state.memory = MemoryCap::new(limits.memory, budget);
    }
    state.limit = Some(host.services.clock.limit(limits.timeout));
    state.signing = host.signing;
    let mut store = Store::new(host.engine, state);
    store.limiter(|state| &mut state.memory);
    // Yield at every tick (so the deadline can end a spinning guest), and stop a call whose host work
    // ran into a limit (`CallState::stop`).
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|store| match store.data().exceeded {
        Some(_) => Err(wasmtime::format_err!(
            "stopped by the host: a limit was exceeded"
        )),
        None => Ok(wasmtime::UpdateDeadline::Yield(1)),
    });
    let outcome = tokio::time::timeout(limits.timeout, async {
        match pre.instantiate(&mut store).await {
            Err(e) => Stage::Instantiate(e),
            Ok(instance) => Stage::Called(call(&instance, &mut store).await),
        }
    })
    .await;
    let state = store.into_data();
    log_guest_output(&state);
    let result = match outcome {
        Err(_elapsed) => Err(Fault::Timeout(limits.timeout)),
        // A limit the host's work ran into fails the call even when the guest carried on.
        Ok(_) if state.exceeded.is_some() => {
            Err(Fault::Limit(state.exceeded.clone().unwrap_or_default()))
        }
        Ok(Stage::Called(Ok(r))) => Ok(r),
        Ok(Stage::Called(Err(error))) => Err(classify(error, &state, limits.memory)),
        Ok(Stage::Instantiate(_)) if state.memory.refused.is_some() => {
            Err(memory_fault(&state, limits.memory))
        }
        Ok(Stage::Instantiate(error)) => Err(Fault::Instantiate(format!("{error:#}"))),
    };
    (result, state.call)
}

/// Turns a wasmtime error into a [`Fault`].
fn classify(error: wasmtime::Error, state: &CallState, memory_limit: u64) -> Fault {
    if state.memory.refused.is_some() {
        return memory_fault(state, memory_limit);
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return Fault::Exit(exit.0);
    }
    let mut message = match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string(),
    };
    if let Some(frame) = error
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .and_then(|bt| {
            bt.frames()
                .iter()
                .find_map(|f| f.func_name().map(str::to_string))
        })
    {
        message = format!("{message} in {frame}");
    }
    match state.stderr.panic_message() {
        Some(panic) => Fault::Trap(format!("{panic} ({message})")),
        None => Fault::Trap(message),
    }
}

/// The module's own cap, or the process's budget, whichever refused the guest's growth.
fn memory_fault(state: &CallState, memory_limit: u64) -> Fault {
    match state.memory.refused {
        Some((asked, Refusal::Budget)) => Fault::MemoryBudget {
            asked_mib: asked >> 20,
            budget_mib: state.memory.budget().limit() >> 20,
        },
        _ => Fault::Memory {
            limit_mib: memory_limit >> 20,
        },
    }
}

fn log_guest_output(state: &CallState) {
    for (stream, output) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let text = output.text();
        if !text.is_empty() {
            tracing::debug!(
                module = &*state.call.module,
                action = state.call.action.as_str(),
                "guest {stream}: {}",
                text.trim_end()
            );
        }
    }
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

fn fault(ctx: &CallId, problem: String) -> CallError {
    CallError::fault(ctx, Fault::Output(problem))
}

/// An item must be a JSON object with a non-empty `kind`, within the module's output limit.
fn check_item(item: &str, limit: u64) -> Result<(), String> {
    if item.len() as u64 > limit {
        return Err(format!(
            "an item of {} bytes, over its output limit of {} bytes",
            item.len(),
            limit
        ));
    }
    #[derive(Deserialize)]
    struct Kinded<'a> {
        #[serde(borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_str::<Kinded>(item) {
        Err(e) => Err(format!("an item that is not a JSON object: {e}")),
        Ok(k) if k.kind.as_deref().unwrap_or("").is_empty() => Err("an item without a kind".into()),
        Ok(_) => Ok(()),
    }
}

/// Identifiers must use plural lower-case resources and groups without versions (Velero looks them up
/// by `resource.group`).
fn check_ids(ctx: &CallId, what: &str, ids: &[wit_types::ResourceId]) -> Result<(), CallError> {
    if ids.len() > MAX_ITEMS {
        return Err(fault(
            ctx,
            format!("{} {what}, more than the {MAX_ITEMS} allowed", ids.len()),
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
            return Err(fault(
                ctx,
                format!(
                    "{what}[{i}] with group {:?} and resource {:?}: use the API group without version and the plural lower-case resource (e.g. \"\" and \"persistentvolumeclaims\")",
                    id.group, id.resource
                ),
            ));
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
            check_item(r#"{"metadata":{}}"#, 100).unwrap_err(),
            "an item without a kind"
        );
        assert_eq!(
            check_item(r#"{"kind":""}"#, 100).unwrap_err(),
            "an item without a kind"
        );
        assert!(check_item("[1]", 100)
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(check_item("{\"kind\":\"Pod\",", 100)
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(check_item(r#"{"kind":"Pod"}"#, 5)
            .unwrap_err()
            .contains("over its output limit"));
        assert!(check_item(r#"{"kind":"Pod\u0041"}"#, 100).is_ok());
    }
}
