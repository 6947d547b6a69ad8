//! The wasm runtime: one engine and linker, a [`Registry`] of loaded modules, and the calls
//! ([`Runtime::backup`], [`Runtime::restore`], …) that both the gRPC server and the CLI use.
//!
//! Each module is compiled once and linked once; each call gets a fresh store and instance (so no
//! state leaks between items), a memory cap and a deadline. A trap, a deadline or an exhausted cap
//! fails that one call with a [`CallError`] naming the module, action and item.

mod benchmark;
mod cache;
mod call;
pub mod calls;
pub mod compile_budget;
mod cpu_share;
mod engine;
mod error;
mod loading;
mod module;
mod needs;
mod registry;
mod signer;

use std::sync::Arc;

use tokio::sync::Semaphore;

#[doc(hidden)]
pub(crate) use benchmark::WarmInstance;
pub use cache::CompileCache;
use call::Caller;
pub(crate) use call::Lane;
pub(crate) use calls::ActionCall;
pub use compile_budget::CompileBudget;
pub use engine::MAX_CONCURRENT_CALLS;
pub(crate) use error::LoadError;
#[cfg(test)]
pub(crate) use error::Trapped;
pub use error::{CallError, Fault};
pub(crate) use loading::Loading;
pub use module::validate_name;
pub(crate) use module::{CompileWatch, LoadedModule};
pub(crate) use registry::{ActionEntry, Catalog, Registry};
pub use signer::types as signing_types;
pub(crate) use signer::Signing;

use crate::action::{BackupOutcome, BackupRequest, ItemRef, RestoreOutcome, RestoreRequest};
use crate::capabilities::{self, Services};
use crate::modules::failure_policy::PolicyState;
use crate::modules::ModuleSource;

/// The runtime: modules, and the services their capabilities use.
pub struct Runtime {
    /// The engine, the linked capabilities and the compile cache every module is compiled with.
    compiler: module::Compiler,
    registry: Arc<Registry>,
    /// What every call runs with (the engine, the services, the signing module, the call slots).
    caller: Caller,
    signing: Arc<Signing>,
    loading: Loading,
}

/// What loading one module produced.
#[derive(Debug)]
pub struct Loaded {
    /// Module name.
    pub module: String,
    /// Number of actions it provides.
    pub(crate) actions: usize,
    /// Whether it exports `velero-wasm:plugin/signing`.
    pub signing: bool,
    /// Things worth telling the operator (needs the grant does not cover).
    pub(crate) warnings: Vec<String>,
    /// Settings declared in the old vocabulary, converted: what to write instead. Apart from the
    /// warnings because a plugin says them once where an operator looks (the module's ConfigMap,
    /// `velero-wasm status`), not as a warning Velero counts in every backup.
    pub(crate) deprecations: Vec<String>,
}

impl Runtime {
    /// A runtime with no modules yet.
    pub fn new(services: Services) -> anyhow::Result<Runtime> {
        let engine = engine::new_engine()
            .map_err(|e| anyhow::anyhow!("cannot create the wasm engine: {e}"))?;
        let linker = capabilities::linker(&engine)
            .map_err(|e| anyhow::anyhow!("cannot link the capabilities: {e}"))?;
        let registry = Arc::new(Registry::default());
        let services = Arc::new(services);
        let signing = Arc::new(Signing::new(
            engine.clone(),
            registry.clone(),
            services.clone(),
        ));
        Ok(Runtime {
            caller: Caller {
                engine: engine.clone(),
                services,
                signing: signing.clone(),
                slots: Semaphore::new(MAX_CONCURRENT_CALLS as usize),
            },
            compiler: module::Compiler {
                engine,
                linker,
                cache: None,
                watch: None,
                budget: Arc::new(CompileBudget::new(compile_budget::default_limit())),
            },
            registry,
            signing,
            loading: Loading::default(),
        })
    }

    /// Keeps compiled modules in `cache`, and loads them from there.
    pub fn with_compile_cache(mut self, cache: Option<CompileCache>) -> Runtime {
        self.compiler.cache = cache;
        self
    }

    /// Holds the compiles of modules other than the stock ones to `budget` (the default is
    /// [`compile_budget::default_limit`]).
    pub fn with_compile_budget(mut self, budget: CompileBudget) -> Runtime {
        self.compiler.budget = Arc::new(budget);
        self
    }

    /// The budget compiles are held to: what it let through is logged once modules are compiled.
    pub fn compile_budget(&self) -> &CompileBudget {
        &self.compiler.budget
    }

    /// Tells `watch` of every module compiled rather than read from the cache.
    pub(crate) fn with_compile_watch(mut self, watch: Option<Arc<dyn CompileWatch>>) -> Runtime {
        self.compiler.watch = watch;
        self
    }

    /// The services behind the capabilities.
    pub fn services(&self) -> &Services {
        &self.caller.services
    }

    /// Describes a module, then puts it in service (replacing a module of the same name). A module
    /// described before (same bytes, same manifest, this host) is put in service from its cached
    /// description and compiled on first use; any other is compiled, linked and described now. On
    /// failure the registry is unchanged.
    pub async fn load(&self, source: ModuleSource) -> Result<Loaded, LoadError> {
        self.load_as(source, false).await
    }

    /// Loads a module as the shadow of the module of its name ([`crate::shadow`]): described and
    /// linked as [`Self::load`] does, but it never serves and may not write.
    pub(crate) async fn load_shadow(&self, source: ModuleSource) -> Result<Loaded, LoadError> {
        self.load_as(source, true).await
    }

    async fn load_as(&self, source: ModuleSource, shadow: bool) -> Result<Loaded, LoadError> {
        let (mut linked, actions, key) = self.link_or_recall(source).await?;
        if shadow {
            match Arc::get_mut(&mut linked.caps) {
                Some(caps) => caps.shadow = true,
                None => {
                    return Err(linked.error("its capabilities are shared; not loaded as a shadow"))
                }
            }
        }
        let described_now = linked.exports.is_some();
        let interfaces = linked.interfaces;
        let (loaded, (warnings, deprecations)) = module::finish(linked, actions)?;
        if let (true, Some(cache), Some(key)) = (described_now, self.compiler.cache.as_ref(), &key)
        {
            let description = cache::Description {
                interfaces,
                actions: loaded.actions.clone(),
            };
            cache.store_description(key, &description);
        }
        let report = Loaded {
            module: loaded.name.to_string(),
            actions: loaded.actions.len(),
            signing: loaded.exports_signing(),
            warnings,
            deprecations,
        };
        tracing::debug!(
            module = %loaded.name,
            origin = %loaded.origin,
            actions = report.actions,
            compiled = described_now,
            "module loaded (compiled now, or from its kept description)"
        );
        if shadow {
            self.registry.install_shadow(loaded);
            return Ok(report);
        }
        self.install(loaded)?;
        Ok(report)
    }

    /// The module of `source`, linked: from its description in the compile cache (compiled on first
    /// use), or compiled and described now. Also the key its description is kept under, if there is a
    /// compile cache.
    async fn link_or_recall(
        &self,
        source: ModuleSource,
    ) -> Result<
        (
            module::Linked,
            Vec<crate::action::ActionInfo>,
            Option<String>,
        ),
        LoadError,
    > {
        let compiler = self.compiler.clone();
        let store = self.compiler.cache.as_ref();
        let key = store.map(|_| cache::description_key(&source));
        let kept = store
            .zip(key.as_deref())
            .and_then(|(cache, key)| cache.description(key));
        if let Some(kept) = kept {
            let linked = module::described(&compiler, source, kept.interfaces)?;
            return Ok((linked, kept.actions, key));
        }
        let (name, origin) = (source.name.clone(), source.origin.to_string());
        let linked = tokio::task::spawn_blocking(move || module::link(&compiler, source))
            .await
            .map_err(|e| LoadError {
                module: name,
                origin,
                problem: format!("compilation was interrupted: {e}"),
            })??;
        let actions = self.caller.describe(&linked).await?;
        Ok((linked, actions, key))
    }

    /// Puts `loaded` in service.
    fn install(&self, loaded: LoadedModule) -> Result<(), LoadError> {
        let (module, origin) = (loaded.name.to_string(), loaded.origin.to_string());
        self.registry.install(loaded).map_err(|conflict| LoadError {
            module,
            origin,
            problem: conflict.to_string(),
        })
    }

    /// Compiles every module in service that is not compiled yet, one at a time (leaving the other
    /// cores to the calls being served), so that no call waits for it later. A plugin does this once
    /// its modules are in service; a call to a module not compiled yet compiles it itself.
    pub(crate) async fn compile_all(&self) {
        for module in self.catalog().modules() {
            module.compile_now().await;
        }
    }

    /// Loads several modules in order; returns the errors (the modules before and after still load).
    pub async fn load_all(&self, sources: Vec<ModuleSource>) -> Vec<LoadError> {
        let mut errors = Vec::new();
        for source in sources {
            if let Err(e) = self.load(source).await {
                errors.push(e);
            }
        }
        errors
    }

    /// How far loading is: a plugin's calls wait on it (see [`Loading`]).
    pub(crate) fn loading(&self) -> &Loading {
        &self.loading
    }

    /// Records module `name`'s failure policy and whether it triggered (none: a version serves),
    /// for `status` and `actions`; the module plan ([`crate::plan`]) decides it.
    pub(crate) fn set_policy(&self, name: &str, state: Option<PolicyState>) {
        self.registry.set_policy(name, state);
    }

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

    /// Makes `call` to the action of `entry` in `lane`: the one path of every call of the actions
    /// interface. A call the action's kind does not have (a v1 action has no Progress) is refused.
    pub(crate) async fn call<C: ActionCall>(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        call: C,
    ) -> Result<C::Output, CallError> {
        self.caller.call(lane, entry, call).await
    }

    /// Runs a backup action (`backup`, `backup-v2`) on one item, serving Velero; `item` is the
    /// identity of `request.item`, as the caller read it.
    pub async fn backup(
        &self,
        entry: &ActionEntry,
        item: ItemRef,
        request: BackupRequest,
    ) -> Result<BackupOutcome, CallError> {
        let call = calls::Backup { item, request };
        self.call(Lane::Serving, entry, call).await
    }

    /// Runs a restore action (`restore`, `restore-v2`) on one item, serving Velero; `item` is the
    /// identity of `request.item`.
    pub async fn restore(
        &self,
        entry: &ActionEntry,
        item: ItemRef,
        request: RestoreRequest,
    ) -> Result<RestoreOutcome, CallError> {
        let call = calls::Restore { item, request };
        self.call(Lane::Serving, entry, call).await
    }

    /// Instantiates the module of a backup action once, for [`WarmInstance::backup`].
    #[doc(hidden)]
    pub async fn warm_instance(&self, action: &str) -> anyhow::Result<WarmInstance> {
        let entry = self
            .action(action)
            .ok_or_else(|| anyhow::anyhow!("no action {action}"))?;
        WarmInstance::new(&self.caller.engine, &self.caller.services, &entry, action).await
    }

    /// Calls into the module that exports `velero-wasm:plugin/signing`.
    pub fn signing(&self) -> &Signing {
        &self.signing
    }

    /// The current catalog of modules and actions.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.registry.snapshot()
    }
}
