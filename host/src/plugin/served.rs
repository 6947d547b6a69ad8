//! The seam between Velero's services and what runs the actions: [`Dispatch`](super::dispatch::Dispatch)
//! sees the actions in service only through [`ServedActions`] and each action it finds only through
//! [`ServedAction`], as Kubewarden's policy-server API sees its policies only through its
//! `EvaluationEnvironment`. In the plugin, [`RuntimeActions`] puts the wasm [`Runtime`] and its
//! [`Shadows`] behind it; protocol tests put a fake there and drive the gRPC services without
//! compiling any wasm (tests/plugin_fake.rs).
//!
//! An action is found once per call and its calls are made on what was found: a module replaced in
//! between (a reload) does not change the module a call started with.

use std::sync::Arc;

use async_trait::async_trait;

use super::kept_listing::Listed;
use crate::action::slot::Family;
use crate::action::{ActionInfo, BackupOutcome, OperationProgress, ResourceId, RestoreOutcome};
use crate::runtime::{calls, ActionEntry, CallError, Lane, Runtime};
use crate::shadow::{Mirrored, Shadows};

/// The actions in service, as Velero's services need them: found by the name Velero sends, listed,
/// and waited for while modules load.
#[async_trait]
pub trait ServedActions: Send + Sync {
    /// Waits until a call to the action `name` can be served as it will stay: its module is in
    /// service, or (when no module in service provides it yet) every module has loaded.
    async fn ready_for(&self, name: &str);

    /// Waits until every module has loaded, so that a listing is the whole one.
    async fn all_loaded(&self);

    /// The action Velero calls `name`, as it serves now; `None` when no module in service provides it.
    fn action(&self, name: &str) -> Option<Box<dyn ServedAction>>;

    /// Every action in service, with its kind, sorted by name: what `ListPlugins` lists.
    fn actions(&self) -> Vec<Listed>;
}

/// One action as it was found for a call: what it is, each call Velero's services make to it, and its
/// shadow (called after Velero has its answer, see [`crate::shadow`]).
#[async_trait]
pub trait ServedAction: Send + Sync {
    /// The name of the module that provides it (metrics and logs name it).
    fn module(&self) -> &str;

    /// Its name, kind and what it applies to.
    fn info(&self) -> &ActionInfo;

    /// Backup Execute (v1 and v2).
    async fn backup(&self, call: calls::Backup) -> Result<BackupOutcome, CallError>;

    /// Restore Execute (v1 and v2).
    async fn restore(&self, call: calls::Restore) -> Result<RestoreOutcome, CallError>;

    /// ItemBlockAction GetRelatedItems.
    async fn related_items(&self, call: calls::RelatedItems) -> Result<Vec<ResourceId>, CallError>;

    /// DeleteItemAction Execute.
    async fn delete(&self, call: calls::Delete) -> Result<(), CallError>;

    /// Progress of an operation the action started (v2).
    async fn progress(&self, call: calls::Progress) -> Result<OperationProgress, CallError>;

    /// Cancel of an operation the action started (v2).
    async fn cancel(&self, call: calls::Cancel) -> Result<(), CallError>;

    /// AreAdditionalItemsReady (restore v2).
    async fn items_ready(&self, call: calls::ItemsReady) -> Result<bool, CallError>;

    /// Whether the action's module has a shadow: only then is a call's input kept for it.
    fn has_shadow(&self) -> bool;

    /// Hands a call this action answered to its module's shadow, which runs it on its own task after
    /// the answer; what the shadow does is compared and counted, never returned.
    fn mirror(&self, call: Mirrored);
}

/// The plugin's actions: those of the wasm runtime's modules in service, mirrored to their shadows.
pub(crate) struct RuntimeActions {
    runtime: Arc<Runtime>,
    shadows: Arc<Shadows>,
}

impl RuntimeActions {
    /// The actions of `runtime`, whose calls are mirrored to `shadows`.
    pub(crate) fn new(runtime: Arc<Runtime>, shadows: Arc<Shadows>) -> RuntimeActions {
        RuntimeActions { runtime, shadows }
    }
}

#[async_trait]
impl ServedActions for RuntimeActions {
    async fn ready_for(&self, name: &str) {
        let runtime = &self.runtime;
        runtime
            .loading()
            .ready_for(name, |action| {
                runtime.action(action).map(|e| e.module.name.to_string())
            })
            .await;
    }

    async fn all_loaded(&self) {
        self.runtime.loading().all_done().await;
    }

    fn action(&self, name: &str) -> Option<Box<dyn ServedAction>> {
        let entry = self.runtime.action(name)?;
        Some(Box::new(RuntimeAction {
            runtime: self.runtime.clone(),
            shadows: self.shadows.clone(),
            entry,
        }))
    }

    fn actions(&self) -> Vec<Listed> {
        // The catalog is sorted by name.
        self.runtime
            .catalog()
            .actions()
            .map(|e| (e.info().kind, e.info().name.clone()))
            .collect()
    }
}

/// One action of the runtime, as found: its entry in the catalog of that moment.
struct RuntimeAction {
    runtime: Arc<Runtime>,
    shadows: Arc<Shadows>,
    entry: ActionEntry,
}

#[async_trait]
impl ServedAction for RuntimeAction {
    fn module(&self) -> &str {
        &self.entry.module.name
    }

    fn info(&self) -> &ActionInfo {
        self.entry.info()
    }

    async fn backup(&self, call: calls::Backup) -> Result<BackupOutcome, CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    async fn restore(&self, call: calls::Restore) -> Result<RestoreOutcome, CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    async fn related_items(&self, call: calls::RelatedItems) -> Result<Vec<ResourceId>, CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    async fn delete(&self, call: calls::Delete) -> Result<(), CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    async fn progress(&self, call: calls::Progress) -> Result<OperationProgress, CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    async fn cancel(&self, call: calls::Cancel) -> Result<(), CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    async fn items_ready(&self, call: calls::ItemsReady) -> Result<bool, CallError> {
        self.runtime.call(Lane::Serving, &self.entry, call).await
    }

    fn has_shadow(&self) -> bool {
        Shadows::wanted(&self.runtime, &self.entry)
    }

    fn mirror(&self, call: Mirrored) {
        self.shadows.mirror(self.runtime.clone(), &self.entry, call);
    }
}

/// The actions one slot serves for one call, in name order.
pub(crate) struct Covered {
    family: Family,
    actions: Vec<Box<dyn ServedAction>>,
}

impl Covered {
    /// The actions `actions` of `family`'s slot (sorted by name by the caller).
    pub(crate) fn new(family: Family, actions: Vec<Box<dyn ServedAction>>) -> Covered {
        Covered { family, actions }
    }

    /// The served actions, in name order.
    pub(crate) fn actions(&self) -> &[Box<dyn ServedAction>] {
        &self.actions
    }

    /// The slot's family.
    pub(crate) fn family(&self) -> Family {
        self.family
    }

    /// The slot's name.
    pub(crate) fn name(&self) -> &'static str {
        self.family.slot_name()
    }

    /// The selector Velero is given for the slot: covering every served action's own.
    pub(crate) fn selector(&self) -> crate::action::Selector {
        crate::action::slot::covering(self.actions.iter().map(|a| &a.info().applies_to))
    }
}
