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
mod cpu_share;
mod engine;
mod error;
mod loading;
mod module;
mod needs;
mod registry;
mod signer;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::join_all;
use tokio::sync::Semaphore;

#[doc(hidden)]
pub use benchmark::WarmInstance;
pub use cache::CompileCache;
pub use call::Lane;
pub use calls::ActionCall;
pub use engine::{EPOCH_TICK, MAX_CONCURRENT_CALLS};
pub use error::{
    BadOutput, CallError, Cause, CompileError, Fault, InstantiateError, LoadError, Trapped,
};
pub use loading::Loading;
pub use module::{validate_name, CompileWatch, LoadedModule, NameError};
pub use registry::{ActionEntry, Catalog, Registry};
pub use signer::{types as signing_types, Signing};

use crate::capabilities::{self, Services};
use crate::modules::configmaps::{Cached, ConfigMapModules};
use crate::modules::failure_policy::{PolicyState, Triggered};
use crate::modules::{
    chosen_stock_modules, scan_directory, stock_override, DirectoryScan, FailurePolicy, LastGood,
    ModuleSource, Origin, OverrideFile, StockChoice, TrustedKeys, VersionFloor,
};

/// The runtime: modules, and the services their capabilities use.
pub struct Runtime {
    /// The engine, the linked capabilities and the compile cache every module is compiled with.
    compiler: module::Compiler,
    registry: Arc<Registry>,
    services: Arc<Services>,
    slots: Semaphore,
    signing: Arc<Signing>,
    floor: Option<VersionFloor>,
    loading: Loading,
}

/// The stock modules in service, with what was worth reporting about them
/// ([`Runtime::load_stock_modules`]); later sources fall back to them.
#[derive(Debug, Default)]
pub struct StockInService {
    sources: BTreeMap<String, ModuleSource>,
    problems: Vec<LoadProblem>,
}

/// Where a host's modules come from, beyond the stock ones.
#[derive(Debug, Clone, Default)]
pub struct ModuleConfig {
    /// The module directory (`--modules`, `VELERO_WASM_MODULES`): adds modules, replaces stock ones by name.
    pub directory: Option<PathBuf>,
    /// Where the last good version of each directory module is kept, for when an update is broken.
    pub last_good: Option<LastGood>,
    /// Which stock modules load (`VELERO_WASM_STOCK`, `--stock`).
    pub stock: StockChoice,
    /// The keys a module that is not stock must be signed by (`VELERO_WASM_TRUSTED_KEYS`,
    /// `--trusted-keys`); none: signatures are checked when present, not required.
    pub trusted_keys: Option<TrustedKeys>,
    /// The module ConfigMaps read through the API (already written out), loaded after the directory.
    pub configmaps: Option<ConfigMapModules>,
}

/// Something about the modules worth telling the operator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadProblem {
    /// What happened.
    pub message: String,
    /// A module (or an update of it) could not be used; otherwise this is a warning about a module
    /// that is in service.
    pub broken: bool,
    /// Whether the module concerned (or an earlier version of it) is in service.
    pub served: bool,
    /// It concerns a shadow module only: the serving module is untouched, so the plugin logs it
    /// at info, never where Velero counts it (docs/operation.md#what-velero-counts).
    pub shadow: bool,
    /// The module's failure policy refused its actions: each item they are given fails with the
    /// reason, which is what Velero counts, so the plugin logs this at info.
    pub refused: bool,
}

impl LoadProblem {
    fn warning(message: String) -> LoadProblem {
        LoadProblem {
            message,
            broken: false,
            served: true,
            ..LoadProblem::default()
        }
    }

    /// A shadow that cannot be loaded, or a remark on one: the module it would shadow serves as before.
    fn about_shadow(message: String) -> LoadProblem {
        LoadProblem {
            shadow: true,
            ..LoadProblem::warning(message)
        }
    }

    fn not_served(message: String) -> LoadProblem {
        LoadProblem {
            message,
            broken: true,
            served: false,
            ..LoadProblem::default()
        }
    }
}

impl std::fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What loading one module produced.
#[derive(Debug)]
pub struct Loaded {
    /// Module name.
    pub module: String,
    /// Number of actions it provides.
    pub actions: usize,
    /// Whether it exports `velero-wasm:plugin/signing`.
    pub signing: bool,
    /// Things worth telling the operator (needs the grant does not cover).
    pub warnings: Vec<String>,
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
            compiler: module::Compiler {
                engine,
                linker,
                cache: None,
                watch: None,
            },
            registry,
            services,
            slots: Semaphore::new(MAX_CONCURRENT_CALLS as usize),
            signing,
            floor: None,
            loading: Loading::default(),
        })
    }

    /// Keeps compiled modules in `cache`, and loads them from there.
    pub fn with_compile_cache(mut self, cache: Option<CompileCache>) -> Runtime {
        self.compiler.cache = cache;
        self
    }

    /// Tells `watch` of every module compiled rather than read from the cache.
    pub fn with_compile_watch(mut self, watch: Option<Arc<dyn CompileWatch>>) -> Runtime {
        self.compiler.watch = watch;
        self
    }

    /// Refuses a module signed by a trusted key below the version `floor` has seen served, and
    /// raises the floor with each one that serves (rollback protection, [`VersionFloor`]).
    pub fn with_version_floor(mut self, floor: Option<VersionFloor>) -> Runtime {
        self.floor = floor;
        self
    }

    /// The services behind the capabilities.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Describes a module, then puts it in service (replacing a module of the same name). A module
    /// described before (same bytes, same manifest, this host) is put in service from its cached
    /// description and compiled on first use; any other is compiled, linked and described now. On
    /// failure the registry is unchanged.
    pub async fn load(&self, source: ModuleSource) -> Result<Loaded, LoadError> {
        self.load_as(source, false).await
    }

    /// Loads a module as the shadow of the module of its name ([`crate::shadow`]): checked as
    /// [`Self::load`] checks a module (signature, version floor), but it never serves, may not write,
    /// and does not raise the version floor.
    pub async fn load_shadow(&self, source: ModuleSource) -> Result<Loaded, LoadError> {
        self.load_as(source, true).await
    }

    async fn load_as(&self, source: ModuleSource, shadow: bool) -> Result<Loaded, LoadError> {
        // Only a verified signature says which version this is; without one there is nothing to hold
        // it to (and no trusted keys to protect).
        let floor = self
            .floor
            .as_ref()
            .filter(|_| source.signature.as_ref().is_some_and(|s| s.verified));
        if let Some(floor) = floor {
            floor
                .check(&source)
                .map_err(|why| module::load_error(&source, why.to_string()))?;
        }
        let kept_source = floor.filter(|_| !shadow).map(|_| source.clone());
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
        let (loaded, warnings) = module::finish(linked, actions)?;
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
        self.install(loaded, floor.zip(kept_source))?;
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
        let actions = self.describe(&linked).await?;
        Ok((linked, actions, key))
    }

    /// Puts `loaded` in service, and raises the version floor to its version when it is held to one.
    fn install(
        &self,
        loaded: LoadedModule,
        floor: Option<(&VersionFloor, ModuleSource)>,
    ) -> Result<(), LoadError> {
        let (module, origin) = (loaded.name.to_string(), loaded.origin.to_string());
        self.registry
            .install(loaded)
            .map_err(|conflict| LoadError {
                module: module.clone(),
                origin,
                problem: conflict.to_string(),
            })?;
        if let Some((floor, source)) = floor {
            if let Err(e) = floor.raise(&source) {
                tracing::warn!(module = %module, "cannot record the version served: {e}");
            }
        }
        Ok(())
    }

    /// Compiles every module in service that is not compiled yet, one at a time (leaving the other
    /// cores to the calls being served), so that no call waits for it later. A plugin does this once
    /// its modules are in service; a call to a module not compiled yet compiles it itself.
    pub async fn compile_all(&self) {
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

    /// Loads the stock modules `choice` names, concurrently (the work is reading, checking and mapping
    /// compiled code, one module per core); returns their sources, which a manifest without a
    /// component overrides.
    async fn load_stock(
        &self,
        choice: &StockChoice,
        problems: &mut Vec<LoadProblem>,
    ) -> BTreeMap<String, ModuleSource> {
        let mut stock = BTreeMap::new();
        for source in chosen_stock_modules(choice) {
            match source {
                Ok(source) => {
                    stock.insert(source.name.clone(), source);
                }
                Err(problem) => problems.push(LoadProblem::not_served(problem.to_string())),
            }
        }
        let loads = join_all(stock.values().map(|source| self.load(source.clone()))).await;
        for loaded in loads {
            match loaded {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning))
                }
                Err(e) => problems.push(LoadProblem::not_served(e.to_string())),
            }
        }
        stock
    }

    /// Loads the stock modules `config.stock` chooses (concurrently: the work is reading, checking
    /// and mapping compiled code, one module per core), then those of the module directory, then
    /// those of the module ConfigMaps: each later source replaces a module of the same name (stock <
    /// directory < ConfigMap). A module whose signature is refused (`config.trusted_keys`) cannot be
    /// used. A module that cannot be used falls back to its last good version from the same source, if
    /// one was remembered, else to what already serves under its name (a stock module, or the
    /// directory's). A manifest without a component overrides the stock module of its name. Returns
    /// what is worth reporting; fails only when the directory itself cannot be read.
    ///
    /// Every source is read before any module beyond the stock ones compiles, and [`Self::loading`]
    /// then knows which modules are still to come: a call to another module need not wait for them,
    /// and the ConfigMap module a call waits for compiles next.
    pub async fn load_modules(
        &self,
        config: &ModuleConfig,
    ) -> Result<Vec<LoadProblem>, std::io::Error> {
        let stock = self.load_stock_modules(&config.stock).await;
        self.load_beyond_stock(config, stock).await
    }

    /// Puts the stock modules `choice` names in service (the first step of [`Self::load_modules`]),
    /// so that they can serve while the other sources are still read: a plugin does this before it
    /// lists the module ConfigMaps and pulls the artifacts they name.
    pub async fn load_stock_modules(&self, choice: &StockChoice) -> StockInService {
        let mut problems = Vec::new();
        let sources = self.load_stock(choice, &mut problems).await;
        StockInService { sources, problems }
    }

    /// The rest of [`Self::load_modules`] once `stock` ([`Self::load_stock_modules`] of
    /// `config.stock`) serves: the module directory, then the module ConfigMaps.
    pub async fn load_beyond_stock(
        &self,
        config: &ModuleConfig,
        stock: StockInService,
    ) -> Result<Vec<LoadProblem>, std::io::Error> {
        let StockInService {
            sources: stock,
            mut problems,
        } = stock;
        let trusted = config.trusted_keys.as_ref();
        let annotations = config
            .configmaps
            .as_ref()
            .map(|c| annotated_policies(c, &mut problems))
            .unwrap_or_default();
        let sources = Sources {
            stock: &stock,
            trusted,
            annotations: &annotations,
        };

        // Read every source first: which modules are still to come.
        let directory = match &config.directory {
            Some(dir) => Some(scan_directory(dir, trusted)?),
            None => None,
        };
        let ConfigMapPlan {
            chosen,
            shadows,
            early_broken,
        } = config
            .configmaps
            .as_ref()
            .map(|configmaps| plan_configmaps(configmaps, trusted, &mut problems))
            .unwrap_or_default();
        let from_configmaps: BTreeSet<String> = chosen
            .iter()
            .map(|(cached, _)| cached.module.clone())
            .chain(early_broken.iter().map(|b| b.module.clone()))
            .collect();
        let from_directory: BTreeSet<String> =
            directory.as_ref().map(scan_names).unwrap_or_default();
        // A module with a shadow is settled once its shadow is loaded too: the shadow sees every call.
        let shadowed: BTreeSet<String> = shadows.iter().map(|(c, _)| c.module.clone()).collect();
        let settle = |name: &str| {
            if !shadowed.contains(name) {
                self.loading.settled(name);
            }
        };
        self.loading.known(
            from_directory
                .union(&from_configmaps)
                .chain(&shadowed)
                .cloned()
                .collect(),
        );

        if let (Some(scan), Some(_)) = (directory, &config.directory) {
            let last_good = self.open_last_good(config.last_good.as_ref(), &mut problems);
            let broken = self
                .load_scan(
                    scan,
                    last_good,
                    sources,
                    &|o: &OverrideFile| Origin::File(o.path.clone()),
                    &mut problems,
                )
                .await;
            self.fall_back(broken, last_good, sources, &mut problems)
                .await;
            for name in from_directory.difference(&from_configmaps) {
                settle(name);
            }
        }
        if let Some(configmaps) = &config.configmaps {
            let plan = ConfigMapPlan {
                chosen,
                shadows: Vec::new(),
                early_broken,
            };
            self.load_configmap_modules(configmaps, plan, sources, &settle, &mut problems)
                .await;
        }
        self.record_policies(&annotations);
        for (cached, scan) in shadows {
            self.load_shadows(cached, scan, &stock, &mut problems).await;
            self.loading.settled(&cached.module);
        }
        Ok(problems)
    }

    /// Records the failure policy in force for each module in service that is not stock and whose
    /// policy did not trigger: its manifest's, or its ConfigMap's annotation, the stricter
    /// ([`FailurePolicy::strictest`]), else the default.
    fn record_policies(&self, annotations: &BTreeMap<String, FailurePolicy>) {
        let catalog = self.catalog();
        for module in catalog.modules() {
            if module.origin == Origin::Stock || catalog.policy(&module.name).is_some() {
                continue;
            }
            let annotation = configmap_uid(&module.origin)
                .and_then(|uid| annotations.get(uid))
                .map(|p| (*p, ANNOTATION_SOURCE));
            let stated = module.on_failure.map(|p| (p, MANIFEST_SOURCE));
            let (policy, from) = FailurePolicy::strictest(stated.into_iter().chain(annotation));
            self.registry.set_policy(
                &module.name,
                Some(PolicyState {
                    policy: policy.to_string(),
                    from: from.to_string(),
                    triggered: None,
                }),
            );
        }
    }

    /// Records that module `name`'s failure policy (stated in `from`) triggered: what it led to and
    /// why, for `status` and `actions`.
    fn record_trigger(
        &self,
        name: &str,
        policy: FailurePolicy,
        from: &str,
        outcome: &str,
        cause: &str,
    ) {
        self.registry.set_policy(
            name,
            Some(PolicyState {
                policy: policy.to_string(),
                from: from.to_string(),
                triggered: Some(Triggered {
                    outcome: outcome.to_string(),
                    cause: cause.to_string(),
                }),
            }),
        );
    }

    /// Loads the modules of the ConfigMaps `plan` chose, the one a call waits for first; a module
    /// whose ConfigMap cannot be used falls back to its last good version, or to what already serves.
    async fn load_configmap_modules(
        &self,
        configmaps: &ConfigMapModules,
        plan: ConfigMapPlan<'_>,
        sources: Sources<'_>,
        settle: &(dyn Fn(&str) + Sync),
        problems: &mut Vec<LoadProblem>,
    ) {
        let ConfigMapPlan {
            mut chosen,
            early_broken,
            ..
        } = plan;
        let last_good = self.open_last_good(configmaps.last_good.as_ref(), problems);
        for broken in early_broken {
            let name = broken.module.clone();
            self.fall_back(vec![broken], last_good, sources, problems)
                .await;
            settle(&name);
        }
        while !chosen.is_empty() {
            let names: Vec<&str> = chosen.iter().map(|(c, _)| c.module.as_str()).collect();
            let (cached, scan) = chosen.remove(self.loading.next(&names));
            let from = cached.origin();
            let broken: Vec<Broken> = self
                .load_scan(
                    scan,
                    last_good,
                    sources,
                    &|_: &OverrideFile| from.clone(),
                    problems,
                )
                .await
                .into_iter()
                .map(|b| Broken {
                    configmap: Some(cached.uid.clone()),
                    ..b
                })
                .collect();
            self.fall_back(broken, last_good, sources, problems).await;
            settle(&cached.module);
        }
    }

    /// Loads what a shadow ConfigMap holds as shadows ([`Self::load_shadow`]); what cannot be loaded is
    /// reported, and the module it would shadow serves as before.
    async fn load_shadows(
        &self,
        cached: &Cached,
        scan: DirectoryScan,
        stock: &BTreeMap<String, ModuleSource>,
        problems: &mut Vec<LoadProblem>,
    ) {
        let origin = cached.origin();
        for (_, problem) in scan.problems {
            problems.push(LoadProblem::about_shadow(format!(
                "shadow {problem}; no shadow is loaded from it"
            )));
        }
        let mut sources = Vec::new();
        for module in scan.modules {
            sources.push(Ok(module));
        }
        for file in scan.overrides {
            sources.push(match stock.get(&file.name) {
                Some(base) => stock_override::apply(base, &file.text, origin.clone())
                    .map(|mut source| {
                        source.signature = file.signature.clone();
                        source
                    })
                    .map_err(|why| format!("override of module {} refused: {why}", file.name)),
                None => Err(format!(
                    "a manifest without its component ({}.wasm), and no stock module is named {}",
                    file.name, file.name
                )),
            });
        }
        for source in sources {
            let source = match source {
                Ok(source) => source,
                Err(why) => {
                    problems.push(LoadProblem::about_shadow(format!(
                        "shadow {origin}: {why}; no shadow is loaded from it"
                    )));
                    continue;
                }
            };
            let name = source.name.clone();
            match self.load_shadow(source).await {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::about_shadow));
                    let (served, _) = self.serving(&name);
                    if !served {
                        problems.push(LoadProblem::about_shadow(format!(
                            "shadow {origin}: no module {name} serves, so the shadow is never called"
                        )));
                    }
                    tracing::info!(module = %name, origin = %origin, "shadow module loaded");
                }
                Err(e) => problems.push(LoadProblem::about_shadow(format!(
                    "shadow {e}; no shadow is loaded from it"
                ))),
            }
        }
    }

    /// How far loading is: a plugin's calls wait on it (see [`Loading`]).
    pub fn loading(&self) -> &Loading {
        &self.loading
    }

    /// The last good store, if it can be trusted (a store that cannot is reported, then not used).
    fn open_last_good<'a>(
        &self,
        store: Option<&'a LastGood>,
        problems: &mut Vec<LoadProblem>,
    ) -> Option<&'a LastGood> {
        let store = store?;
        match store.open() {
            Ok(()) => Some(store),
            Err(why) => {
                problems.push(LoadProblem::warning(format!(
                    "not keeping last good versions of modules: {why}"
                )));
                None
            }
        }
    }

    /// Loads what a directory scan found (remembering each module that loads) and its overrides.
    /// Returns the modules that could not be used, with the reason, for [`Self::fall_back`].
    async fn load_scan(
        &self,
        scan: DirectoryScan,
        last_good: Option<&LastGood>,
        sources: Sources<'_>,
        override_origin: &(dyn Fn(&OverrideFile) -> Origin + Sync),
        problems: &mut Vec<LoadProblem>,
    ) -> Vec<Broken> {
        let mut broken: Vec<Broken> = scan
            .problems
            .into_iter()
            .map(|(path, problem)| {
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let shown = path.display().to_string();
                let message = if shown.is_empty() || problem.contains(&shown) {
                    problem
                } else {
                    format!("{shown}: {problem}")
                };
                Broken {
                    module: name,
                    message,
                    configmap: None,
                    stated: None,
                }
            })
            .collect();
        let kept: Vec<ModuleSource> = scan.modules.clone();
        let loads = join_all(scan.modules.into_iter().map(|module| self.load(module))).await;
        for (loaded, kept) in loads.into_iter().zip(kept) {
            match loaded {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning));
                    // A version that serves replaces whatever a failure policy did under its name.
                    self.registry.set_policy(&kept.name, None);
                    if let Some(store) = last_good {
                        if let Err(e) = store.remember(&kept) {
                            problems.push(LoadProblem::warning(format!(
                                "module {}: cannot keep a copy in {}: {e}",
                                kept.name,
                                store.dir().display()
                            )));
                        }
                    }
                }
                Err(e) => broken.push(Broken {
                    module: kept.name.clone(),
                    message: e.to_string(),
                    configmap: None,
                    stated: kept
                        .manifest
                        .on_failure
                        .filter(|_| sources.stated_by_operator(kept.signature.as_ref())),
                }),
            }
        }
        for file in scan.overrides {
            self.load_override(file, sources, override_origin, problems)
                .await;
        }
        broken
    }

    /// Loads the stock module `file` overrides (a manifest without a component) with the override's
    /// manifest; a refusal goes to `problems`, saying what serves instead.
    async fn load_override(
        &self,
        file: OverrideFile,
        sources: Sources<'_>,
        override_origin: &(dyn Fn(&OverrideFile) -> Origin + Sync),
        problems: &mut Vec<LoadProblem>,
    ) {
        let from = override_origin(&file);
        let Some(base) = sources.stock.get(&file.name) else {
            let (served, now) = self.serving(&file.name);
            problems.push(LoadProblem {
                message: format!(
                    "{from}: a manifest without its component ({}.wasm), and no stock module is named {}; {now}",
                    file.name, file.name
                ),
                broken: true,
                served,
                ..LoadProblem::default()
            });
            return;
        };
        let refused = match stock_override::apply(base, &file.text, from.clone()) {
            Ok(mut source) => match self
                .load({
                    source.signature = file.signature.clone();
                    source
                })
                .await
            {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning));
                    self.registry.set_policy(&file.name, None);
                    return;
                }
                Err(e) => e.to_string(),
            },
            Err(why) => why.to_string(),
        };
        let problem = format!("override {from} of module {} refused: {refused}", file.name);
        // Its policy: the override's own (when its manifest reads and is the operator's), or its
        // ConfigMap's annotation. No last good copy is kept of an override: last-good serves stock.
        let manifest = crate::modules::Manifest::parse(&file.text).ok();
        let stated = manifest
            .and_then(|m| m.on_failure)
            .filter(|_| sources.stated_by_operator(file.signature.as_ref()))
            .map(|p| (p, MANIFEST_SOURCE));
        let annotation = sources.annotation(&from).map(|p| (p, ANNOTATION_SOURCE));
        let (policy, stated_in) = FailurePolicy::strictest(stated.into_iter().chain(annotation));
        let (served, now, outcome) = match policy {
            FailurePolicy::Refuse => self.refuse(&file.name, &problem, stated_in, None).await,
            _ => {
                let (served, now) = self.serving(&file.name);
                (served, now, outcome_of(served, false))
            }
        };
        let message = format!("{problem}; {now}");
        self.record_trigger(&file.name, policy, stated_in, outcome, &message);
        problems.push(LoadProblem {
            message,
            broken: true,
            served,
            refused: policy == FailurePolicy::Refuse && !served,
            ..LoadProblem::default()
        });
    }

    /// Applies each broken module's failure policy ([`FailurePolicy`]): puts its last good version
    /// in service (`last-good`, the default, which without one leaves what serves under its name),
    /// leaves what serves under its name (`stock`), or refuses its actions (`refuse`); says which.
    async fn fall_back(
        &self,
        broken: Vec<Broken>,
        last_good: Option<&LastGood>,
        sources: Sources<'_>,
        problems: &mut Vec<LoadProblem>,
    ) {
        let trusted = sources.trusted;
        for Broken {
            module: name,
            message: problem,
            configmap,
            stated,
        } in broken
        {
            // With trusted keys, a remembered version stands in for a broken update of the ConfigMap
            // it came from, never for another: a signed module whose ConfigMap was deleted stays
            // deleted, whatever junk is labelled with its name afterwards.
            let other_object = match (trusted, &configmap, last_good) {
                (Some(_), Some(uid), Some(store)) => match store.came_from(&name) {
                    Some(kept) if &kept == uid => None,
                    kept => Some((kept, uid.clone())),
                },
                _ => None,
            };
            // The copy that may stand in, or why none may.
            let recalled: Result<ModuleSource, String> = match (last_good, other_object) {
                (Some(_), Some((kept, uid))) => Err(format!(
                    "its last good version came from another ConfigMap object (uid {}), not this one (uid {uid}), so it does not stand in for it",
                    kept.as_deref().unwrap_or("unrecorded")
                )),
                (Some(store), None) => store.recall(&name, trusted).map_err(|why| why.to_string()),
                (None, _) => Err(
                    "no earlier copy that loaded is kept to fall back on (the plugin keeps one in its state directory)".to_string(),
                ),
            };
            // The policy: the strictest that the failed version's manifest (when it is the
            // operator's), the ConfigMap's annotation and the last good copy's manifest state.
            let annotation = configmap
                .as_ref()
                .and_then(|uid| sources.annotations.get(uid))
                .map(|p| (*p, ANNOTATION_SOURCE));
            let kept = recalled
                .as_ref()
                .ok()
                .and_then(|copy| copy.manifest.on_failure)
                .map(|p| (p, LAST_GOOD_SOURCE));
            let stated_here = stated.map(|p| (p, MANIFEST_SOURCE));
            let (policy, stated_in) =
                FailurePolicy::strictest(stated_here.into_iter().chain(annotation).chain(kept));
            let (served, fallback, outcome) = match policy {
                FailurePolicy::LastGood => {
                    let (served, fallback) = match recalled {
                        Ok(previous) => {
                            let sha = previous.sha256.clone();
                            match self.load(previous).await {
                                Ok(_) => (
                                    true,
                                    format!("serving its last good version (sha256 {sha}) instead"),
                                ),
                                Err(e) => self.stock_fallback(
                                    &name,
                                    &format!("its last good version does not load either: {e}"),
                                ),
                            }
                        }
                        Err(why) => self.stock_fallback(&name, &why),
                    };
                    let copy = served && fallback.starts_with("serving its last good");
                    (served, fallback, outcome_of(served, copy))
                }
                FailurePolicy::Stock => {
                    let (served, fallback) = self.stock_fallback(
                        &name,
                        &format!(
                            "its failure policy is stock ({stated_in}), so no kept copy stands in"
                        ),
                    );
                    (served, fallback, outcome_of(served, false))
                }
                FailurePolicy::Refuse => {
                    self.refuse(&name, &problem, stated_in, recalled.ok()).await
                }
            };
            let message = format!("{problem}; {fallback}");
            self.record_trigger(&name, policy, stated_in, outcome, &message);
            problems.push(LoadProblem {
                message,
                broken: true,
                served,
                refused: outcome == REFUSING,
                ..LoadProblem::default()
            });
        }
    }

    /// Refuses the actions of module `name` (failure policy `refuse`, stated in `stated_in`) because
    /// of `problem`: the module that lists them — its last good `copy` when one may stand in (its own
    /// actions), else what serves under its name — stays in service, and every call of them fails
    /// with the reason, so the items they are given fail rather than go to a module the operator
    /// did not choose. Returns whether anything serves (never), what was done, and the outcome.
    async fn refuse(
        &self,
        name: &str,
        problem: &str,
        stated_in: &str,
        copy: Option<ModuleSource>,
    ) -> (bool, String, &'static str) {
        let mut lists = String::new();
        if let Some(copy) = copy {
            let sha = copy.sha256.clone();
            match self.load(copy).await {
                Ok(_) => lists = format!("its last good version (sha256 {sha})"),
                Err(e) => {
                    tracing::debug!(module = name, "its last good version does not load: {e}")
                }
            }
        }
        let why = format!(
            "module {name} cannot be loaded and its failure policy is refuse ({stated_in}): {problem}"
        );
        match self.catalog().modules().find(|m| &*m.name == name) {
            Some(module) => {
                module.refuse(&why);
                if lists.is_empty() {
                    lists = module.origin.to_string();
                }
                (
                    false,
                    format!(
                        "refusing its actions (failure policy refuse, {stated_in}): each item they are given fails with this reason; the actions are those of {lists}"
                    ),
                    REFUSING,
                )
            }
            None => (
                false,
                format!(
                    "its failure policy is refuse ({stated_in}), but no module {name} is in service whose actions could be refused: Velero is not told of its actions"
                ),
                "not served",
            ),
        }
    }

    fn stock_fallback(&self, name: &str, why: &str) -> (bool, String) {
        let (served, now) = self.serving(name);
        (served, format!("{why}: {now}"))
    }

    /// Whether a module of this name is in service, and which, for people.
    fn serving(&self, name: &str) -> (bool, String) {
        match self.catalog().modules().find(|m| &*m.name == name) {
            Some(m) if m.origin == Origin::Stock => {
                (true, format!("serving the stock module {name}"))
            }
            Some(m) => (true, format!("serving module {name} from {}", m.origin)),
            None => (false, format!("module {name} is not served")),
        }
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

/// A module that could not be used, for [`Runtime::fall_back`].
struct Broken {
    module: String,
    /// Why, naming where it came from.
    message: String,
    /// The uid of the ConfigMap it came from, if it came from one.
    configmap: Option<String>,
    /// The failure policy its own manifest states, when that manifest is the operator's (its
    /// signature verified, or no keys are trusted).
    stated: Option<FailurePolicy>,
}

/// Where a failure policy was stated, as `status` and `actions` show it.
const MANIFEST_SOURCE: &str = "manifest";
const ANNOTATION_SOURCE: &str = "ConfigMap annotation";
const LAST_GOOD_SOURCE: &str = "last good copy's manifest";
/// The outcome of a failure policy that refused a module's actions.
const REFUSING: &str = "refusing";

/// The outcome of a failure policy that did not refuse, for `status`.
fn outcome_of(served: bool, last_good_copy: bool) -> &'static str {
    match (served, last_good_copy) {
        (true, true) => "serving last good copy",
        (true, false) => "serving stock",
        (false, _) => "not served",
    }
}

/// The uid of the ConfigMap a module (or the override of a stock one) came from.
fn configmap_uid(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::ConfigMap { uid, .. } => Some(uid),
        Origin::Override(from) => configmap_uid(from),
        _ => None,
    }
}

/// The failure policies module ConfigMaps state in their annotation, by uid; a value that is no
/// policy is reported and taken as `refuse`, the strictest: the operator asked for one.
fn annotated_policies(
    configmaps: &ConfigMapModules,
    problems: &mut Vec<LoadProblem>,
) -> BTreeMap<String, FailurePolicy> {
    let mut written: BTreeMap<String, (String, String)> = configmaps
        .on_failure
        .iter()
        .map(|(uid, text)| (uid.clone(), (uid.clone(), text.clone())))
        .collect();
    for cached in configmaps.configmaps.iter().filter(|c| !c.shadow) {
        if let Some(text) = &cached.on_failure {
            written.insert(cached.uid.clone(), (cached.configmap.clone(), text.clone()));
        }
    }
    let mut policies = BTreeMap::new();
    for (uid, (configmap, text)) in written {
        let policy = FailurePolicy::parse(&text).unwrap_or_else(|why| {
            problems.push(LoadProblem::warning(format!(
                "ConfigMap {configmap}: annotation {}: {why}; taken as refuse, the strictest, until it is corrected",
                crate::modules::failure_policy::ANNOTATION
            )));
            FailurePolicy::Refuse
        });
        policies.insert(uid, policy);
    }
    policies
}

/// What a module source falls back on: the stock modules (a manifest without a component overrides
/// one), and the keys that verify signatures.
#[derive(Clone, Copy)]
struct Sources<'a> {
    stock: &'a BTreeMap<String, ModuleSource>,
    trusted: Option<&'a TrustedKeys>,
    /// The failure policies module ConfigMaps state in their annotation, by uid.
    annotations: &'a BTreeMap<String, FailurePolicy>,
}

impl Sources<'_> {
    /// Whether what a manifest with this signature states is the operator's: no keys are trusted,
    /// or a trusted key signed it.
    fn stated_by_operator(&self, signature: Option<&crate::modules::ModuleSignature>) -> bool {
        self.trusted.is_none() || signature.is_some_and(|s| s.verified)
    }

    /// The failure policy the annotation of the ConfigMap `origin` came from states, if any.
    fn annotation(&self, origin: &Origin) -> Option<FailurePolicy> {
        self.annotations.get(configmap_uid(origin)?).copied()
    }
}

/// The module ConfigMaps' copies as read: the one copy of each module that is to serve, the one to
/// shadow it, and the modules none of whose ConfigMaps could be used (each falls back).
#[derive(Default)]
struct ConfigMapPlan<'a> {
    chosen: Vec<(&'a Cached, DirectoryScan)>,
    shadows: Vec<(&'a Cached, DirectoryScan)>,
    early_broken: Vec<Broken>,
}

/// Reads the copies of the module ConfigMaps and chooses one per module (and one shadow per
/// module); what cannot be used goes to `problems`, naming its ConfigMap.
fn plan_configmaps<'a>(
    configmaps: &'a ConfigMapModules,
    trusted: Option<&TrustedKeys>,
    problems: &mut Vec<LoadProblem>,
) -> ConfigMapPlan<'a> {
    let mut early_broken: Vec<Broken> = Vec::new();
    let mut scanned = Vec::new();
    let mut shadow_scanned = Vec::new();
    for cached in &configmaps.configmaps {
        let origin = cached.origin();
        let mut scan = match scan_directory(&cached.dir, trusted) {
            Ok(scan) => scan,
            Err(e) => {
                problems.push(LoadProblem::not_served(format!(
                    "{origin}: its copy {} cannot be read: {e}",
                    cached.dir.display()
                )));
                continue;
            }
        };
        for module in &mut scan.modules {
            module.origin = origin.clone();
        }
        for (path, problem) in &mut scan.problems {
            let file = path.file_name().map(PathBuf::from).unwrap_or_default();
            *problem = format!("{origin}: {}: {problem}", file.display());
            *path = file;
        }
        if cached.shadow {
            shadow_scanned.push((cached, scan));
        } else {
            scanned.push((cached, scan));
        }
    }
    let chosen = one_per_module(scanned, trusted.is_some(), problems);
    let before = problems.len();
    let shadows = one_per_module(shadow_scanned, trusted.is_some(), problems);
    for problem in &mut problems[before..] {
        problem.shadow = true;
    }
    for problem in &configmaps.problems {
        if problem.shadow {
            // The module it would shadow serves as before.
            problems.push(LoadProblem::about_shadow(format!(
                "{}; no shadow is loaded from it",
                problem.message
            )));
            continue;
        }
        let chosen_instead = problem
            .module
            .as_ref()
            .and_then(|m| chosen.iter().find(|(c, _)| c.module == *m));
        match (&problem.module, chosen_instead) {
            (Some(_), Some((instead, _))) => problems.push(LoadProblem {
                message: format!(
                    "{}; ConfigMap {} holds the module instead",
                    problem.message, instead.configmap
                ),
                broken: true,
                served: true,
                ..LoadProblem::default()
            }),
            (Some(name), None) => early_broken.push(Broken {
                module: name.clone(),
                message: problem.message.clone(),
                configmap: Some(problem.uid.clone().unwrap_or_default()),
                stated: None,
            }),
            (None, _) => problems.push(LoadProblem::not_served(problem.message.clone())),
        }
    }
    ConfigMapPlan {
        chosen,
        shadows,
        early_broken,
    }
}

/// One ConfigMap for each module its label names, the others reported as left out. Without trusted
/// keys the first by name serves; with them, the ConfigMaps whose module verified come first, the
/// highest `version` among them, so that an unsigned ConfigMap (or an older signed one) cannot keep a
/// signed module out by sorting before it.
fn one_per_module<'a>(
    scanned: Vec<(&'a Cached, DirectoryScan)>,
    trusted: bool,
    problems: &mut Vec<LoadProblem>,
) -> Vec<(&'a Cached, DirectoryScan)> {
    type Rank = (bool, Option<semver::Version>);
    let rank = |scan: &DirectoryScan| -> Rank {
        let usable =
            scan.problems.is_empty() && !(scan.modules.is_empty() && scan.overrides.is_empty());
        let version = scan
            .modules
            .first()
            .and_then(|m| m.manifest.version.clone())
            .or_else(|| {
                let text = &scan.overrides.first()?.text;
                crate::modules::Manifest::parse(text).ok()?.version
            });
        (usable, version)
    };
    let mut chosen: Vec<(&'a Cached, DirectoryScan)> = Vec::new();
    let mut left_out: Vec<(&'a Cached, Option<String>)> = Vec::new();
    for (cached, scan) in scanned {
        let same = chosen
            .iter()
            .position(|(c, _)| !c.module.is_empty() && c.module == cached.module);
        let Some(at) = same else {
            chosen.push((cached, scan));
            continue;
        };
        if trusted && rank(&scan) > rank(&chosen[at].1) {
            let (first, first_scan) = std::mem::replace(&mut chosen[at], (cached, scan));
            left_out.push((first, first_scan.problems.first().map(|(_, p)| p.clone())));
        } else {
            left_out.push((cached, scan.problems.first().map(|(_, p)| p.clone())));
        }
    }
    for (cached, why) in left_out {
        let serving = chosen
            .iter()
            .find(|(c, _)| c.module == cached.module)
            .map(|(c, _)| c.configmap.as_str())
            .unwrap_or_default();
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        problems.push(LoadProblem {
            message: format!(
                "ConfigMap {}: module {} is already in ConfigMap {serving}; this one is left out{why}",
                cached.configmap, cached.module
            ),
            broken: true,
            served: true,
            ..LoadProblem::default()
        });
    }
    chosen
}

/// The module names a directory scan stands for: its modules, overrides and refused files.
fn scan_names(scan: &DirectoryScan) -> BTreeSet<String> {
    scan.modules
        .iter()
        .map(|m| m.name.clone())
        .chain(scan.overrides.iter().map(|o| o.name.clone()))
        .chain(
            scan.problems
                .iter()
                .filter_map(|(path, _)| Some(path.file_stem()?.to_string_lossy().into_owned())),
        )
        .collect()
}
