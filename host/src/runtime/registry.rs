//! The loaded modules and the actions they provide, swapped whole: a call takes a snapshot, so loading
//! or replacing a module never disturbs calls in flight, and a module that fails to load leaves the
//! last good one in service.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::module::LoadedModule;
use crate::action::ActionInfo;

/// One action and the module that provides it.
#[derive(Clone, Debug)]
pub struct ActionEntry {
    /// The module.
    pub module: Arc<LoadedModule>,
    /// Index of the action in `module.actions`.
    pub index: usize,
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
}

impl Catalog {
    /// The catalog with `module` added, or replacing the module of the same name. Fails when one of its
    /// actions is provided by another module.
    fn with(&self, module: LoadedModule) -> Result<Catalog, String> {
        let module = Arc::new(module);
        let mut modules = self.modules.clone();
        modules.insert(module.name.to_string(), module.clone());
        let mut actions = BTreeMap::new();
        let mut signer: Option<Arc<LoadedModule>> = None;
        for m in modules.values() {
            if m.exports_signing() {
                if let Some(other) = &signer {
                    return Err(format!(
                        "velero-wasm:plugin/signing is exported by both module {} and module {}; only one module may export it",
                        other.name, m.name
                    ));
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
                    let (a, b) = (&other.module.name, &m.name);
                    return Err(format!(
                        "action {} is provided by both module {a} and module {b}; to replace a module, give the new one the same name",
                        info.name
                    ));
                }
            }
        }
        Ok(Catalog {
            modules,
            actions,
            signer,
        })
    }

    /// The module that exports `velero-wasm:plugin/signing`, if one is loaded.
    pub fn signer(&self) -> Option<&Arc<LoadedModule>> {
        self.signer.as_ref()
    }

    /// Every module, by name.
    pub fn modules(&self) -> impl Iterator<Item = &Arc<LoadedModule>> {
        self.modules.values()
    }

    /// Every action, by name.
    pub fn actions(&self) -> impl Iterator<Item = &ActionEntry> {
        self.actions.values()
    }

    /// One action.
    pub fn action(&self, name: &str) -> Option<&ActionEntry> {
        self.actions.get(name)
    }
}

/// The current catalog.
#[derive(Default)]
pub struct Registry {
    current: RwLock<Arc<Catalog>>,
}

impl Registry {
    /// A snapshot of the current catalog.
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Adds or replaces a module; on conflict nothing changes.
    pub fn install(&self, module: LoadedModule) -> Result<(), String> {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let next = current.with(module)?;
        *current = Arc::new(next);
        Ok(())
    }
}
