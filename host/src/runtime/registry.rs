//! The loaded modules and the actions they provide, swapped whole: a call takes a snapshot, so loading
//! or replacing a module never disturbs calls in flight, and a module that fails to load leaves the
//! last good one in service.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::module::LoadedModule;
use crate::action::ActionInfo;
use crate::modules::failure_policy::PolicyState;

/// One action and the module that provides it.
#[derive(Clone, Debug)]
pub struct ActionEntry {
    /// The module.
    pub(crate) module: Arc<LoadedModule>,
    /// Index of the action in `module.actions`.
    pub(crate) index: usize,
}

impl ActionEntry {
    /// The action's description.
    pub fn info(&self) -> &ActionInfo {
        &self.module.actions[self.index]
    }
}

/// A consistent set of modules.
#[derive(Default, Debug)]
pub struct Catalog {
    modules: BTreeMap<String, Arc<LoadedModule>>,
    actions: BTreeMap<String, ActionEntry>,
    signer: Option<Arc<LoadedModule>>,
    /// Shadow modules, by the name of the module they shadow (which is their own name too): called
    /// after the serving module, never instead of it (`crate::shadow`).
    shadows: BTreeMap<String, Arc<LoadedModule>>,
    /// The failure policy of each module that is not stock, by name, and whether it triggered
    /// (a refused module without a module of its name in service has an entry too).
    policies: BTreeMap<String, PolicyState>,
}

/// Why a module cannot join the modules in service: it would provide what another module provides.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Conflict {
    /// Two modules would export `velero-wasm:plugin/signing`.
    #[error("velero-wasm:plugin/signing is exported by both module {first} and module {second}; only one module may export it")]
    Signing {
        /// The module in service.
        first: Arc<str>,
        /// The module loading.
        second: Arc<str>,
    },
    /// Two modules would provide an action of the same name.
    #[error("action {action} is provided by both module {first} and module {second}; to replace a module, give the new one the same name")]
    Action {
        /// The action.
        action: String,
        /// The module that provides it in service.
        first: Arc<str>,
        /// The module loading.
        second: Arc<str>,
    },
}

impl Catalog {
    /// The catalog with `module` added, or replacing the module of the same name. Fails when one of its
    /// actions is provided by another module.
    fn with(&self, module: LoadedModule) -> Result<Catalog, Conflict> {
        let module = Arc::new(module);
        let mut modules = self.modules.clone();
        modules.insert(module.name.to_string(), module.clone());
        let mut actions = BTreeMap::new();
        let mut signer: Option<Arc<LoadedModule>> = None;
        for m in modules.values() {
            if m.exports_signing() {
                if let Some(other) = &signer {
                    return Err(Conflict::Signing {
                        first: other.name.clone(),
                        second: m.name.clone(),
                    });
                }
                signer = Some(m.clone());
            }
            for (index, info) in m.actions.iter().enumerate() {
                if let Some(other) = actions.insert(
                    info.name.clone(),
                    ActionEntry {
                        module: m.clone(),
                        index,
                    },
                ) {
                    return Err(Conflict::Action {
                        action: info.name.clone(),
                        first: other.module.name.clone(),
                        second: m.name.clone(),
                    });
                }
            }
        }
        Ok(Catalog {
            modules,
            actions,
            signer,
            shadows: self.shadows.clone(),
            policies: self.policies.clone(),
        })
    }

    /// The catalog with `module` as the shadow of the module of its name (replacing an earlier
    /// shadow). A shadow's actions and exports never serve, so they cannot conflict with others.
    fn with_shadow(&self, module: LoadedModule) -> Catalog {
        let mut shadows = self.shadows.clone();
        shadows.insert(module.name.to_string(), Arc::new(module));
        Catalog {
            modules: self.modules.clone(),
            actions: self.actions.clone(),
            signer: self.signer.clone(),
            shadows,
            policies: self.policies.clone(),
        }
    }

    /// The catalog with `state` as the failure policy of module `name` (none: forgotten).
    fn with_policy(&self, name: &str, state: Option<PolicyState>) -> Catalog {
        let mut policies = self.policies.clone();
        match state {
            Some(state) => policies.insert(name.to_string(), state),
            None => policies.remove(name),
        };
        Catalog {
            modules: self.modules.clone(),
            actions: self.actions.clone(),
            signer: self.signer.clone(),
            shadows: self.shadows.clone(),
            policies,
        }
    }

    /// The failure policy of module `name` and whether it triggered, if it has one recorded.
    pub(crate) fn policy(&self, name: &str) -> Option<&PolicyState> {
        self.policies.get(name)
    }

    /// Every failure policy recorded, by module name.
    pub(crate) fn policies(&self) -> impl Iterator<Item = (&String, &PolicyState)> {
        self.policies.iter()
    }

    /// The shadow of `module`, if it has one.
    pub(crate) fn shadow(&self, module: &str) -> Option<&Arc<LoadedModule>> {
        self.shadows.get(module)
    }

    /// Every shadow module, by name.
    pub(crate) fn shadows(&self) -> impl Iterator<Item = &Arc<LoadedModule>> {
        self.shadows.values()
    }

    /// The shadow of `module`'s action `action`, if `module` has a shadow: `Some(None)` when the shadow
    /// does not provide that action.
    pub(crate) fn shadow_action(&self, module: &str, action: &str) -> Option<Option<ActionEntry>> {
        let shadow = self.shadows.get(module)?;
        Some(
            shadow
                .actions
                .iter()
                .position(|a| a.name == action)
                .map(|index| ActionEntry {
                    module: shadow.clone(),
                    index,
                }),
        )
    }

    /// The module that exports `velero-wasm:plugin/signing`, if one is loaded.
    pub(crate) fn signer(&self) -> Option<&Arc<LoadedModule>> {
        self.signer.as_ref()
    }

    /// Every module, by name.
    pub(crate) fn modules(&self) -> impl Iterator<Item = &Arc<LoadedModule>> {
        self.modules.values()
    }

    /// Every action, by name.
    pub fn actions(&self) -> impl Iterator<Item = &ActionEntry> {
        self.actions.values()
    }

    /// One action.
    pub(crate) fn action(&self, name: &str) -> Option<&ActionEntry> {
        self.actions.get(name)
    }
}

/// The current catalog.
#[derive(Default)]
pub(crate) struct Registry {
    current: RwLock<Arc<Catalog>>,
}

impl Registry {
    /// A snapshot of the current catalog.
    pub(crate) fn snapshot(&self) -> Arc<Catalog> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Adds or replaces a module; on conflict nothing changes.
    pub(crate) fn install(&self, module: LoadedModule) -> Result<(), Conflict> {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let next = current.with(module)?;
        *current = Arc::new(next);
        Ok(())
    }

    /// Records the failure policy of module `name` (`None`: forgets it).
    pub(crate) fn set_policy(&self, name: &str, state: Option<PolicyState>) {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let next = current.with_policy(name, state);
        *current = Arc::new(next);
    }

    /// Adds or replaces a shadow module.
    pub(crate) fn install_shadow(&self, module: LoadedModule) {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let next = current.with_shadow(module);
        *current = Arc::new(next);
    }
}
