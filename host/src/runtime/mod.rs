//! The wasm runtime: one engine and linker, a [`Registry`] of loaded modules, and the calls
//! ([`Runtime::backup`], [`Runtime::restore`], …) that both the gRPC server and the CLI use.
//!
//! Each module is compiled once and linked once; each call gets a fresh store and instance (so no
//! state leaks between items), a memory cap and a deadline. A trap, a deadline or an exhausted cap
//! fails that one call with a [`CallError`] naming the module, action and item.

mod cache;
mod call;
mod engine;
mod error;
mod module;
mod registry;
mod signing;
mod warm;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::join_all;
use tokio::sync::Semaphore;
use wasmtime::component::Linker;
use wasmtime::Engine;

pub use cache::CompileCache;
pub use engine::{EPOCH_TICK, MAX_CONCURRENT_CALLS};
pub use error::{CallError, Fault, LoadError};
pub use module::{validate_name, LoadedModule};
pub use registry::{ActionEntry, Catalog, Registry};
pub use signing::{types as signing_types, Signing};
pub use warm::WarmInstance;

use crate::capabilities::{self, CallState, Services};
use crate::modules::{
    chosen_stock_modules, scan_directory, LastGood, ModuleSource, StockChoice, TrustedKeys,
};

/// The runtime: modules, and the services their capabilities use.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    registry: Arc<Registry>,
    services: Arc<Services>,
    slots: Semaphore,
    cache: Option<CompileCache>,
    signing: Arc<Signing>,
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
}

/// Something about the modules worth telling the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadProblem {
    /// What happened.
    pub message: String,
    /// A module (or an update of it) could not be used; otherwise this is a warning about a module
    /// that is in service.
    pub broken: bool,
    /// Whether the module concerned (or an earlier version of it) is in service.
    pub served: bool,
}

impl LoadProblem {
    fn warning(message: String) -> LoadProblem {
        LoadProblem {
            message,
            broken: false,
            served: true,
        }
    }

    fn not_served(message: String) -> LoadProblem {
        LoadProblem {
            message,
            broken: true,
            served: false,
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
            engine,
            linker,
            registry,
            services,
            slots: Semaphore::new(MAX_CONCURRENT_CALLS as usize),
            cache: None,
            signing,
        })
    }

    /// Keeps compiled modules in `cache`, and loads them from there.
    pub fn with_compile_cache(mut self, cache: Option<CompileCache>) -> Runtime {
        self.cache = cache;
        self
    }

    /// The services behind the capabilities.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Compiles, links and describes a module, then puts it in service (replacing a module of the same
    /// name). On failure the registry is unchanged.
    pub async fn load(&self, source: ModuleSource) -> Result<Loaded, LoadError> {
        let (engine, linker, cache) =
            (self.engine.clone(), self.linker.clone(), self.cache.clone());
        let origin = source.origin.to_string();
        let name = source.name.clone();
        let linked = tokio::task::spawn_blocking(move || {
            module::link(&engine, &linker, cache.as_ref(), source)
        })
        .await
        .map_err(|e| LoadError {
            module: name,
            origin,
            problem: format!("compilation was interrupted: {e}"),
        })??;
        let actions = self.describe(&linked).await?;
        let (loaded, warnings) = module::finish(linked, actions)?;
        let report = Loaded {
            module: loaded.name.to_string(),
            actions: loaded.actions.len(),
            signing: loaded.exports_signing(),
            warnings,
        };
        let (module, origin) = (loaded.name.to_string(), loaded.origin.to_string());
        self.registry.install(loaded).map_err(|problem| LoadError {
            module,
            origin,
            problem,
        })?;
        Ok(report)
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

    /// Loads the stock modules `config.stock` chooses, then those of the module directory, each group
    /// concurrently (the work is reading, checking and mapping compiled code: one module per core). A
    /// stock module that a directory module replaces is not loaded unless that module turns out
    /// unusable. A directory module that cannot be used falls back to its last good version, if one
    /// was remembered, else to the stock module of its name, if chosen. Returns what is worth
    /// reporting; fails only when the directory itself cannot be read (the stock modules are loaded
    /// all the same).
    pub async fn load_modules(
        &self,
        config: &ModuleConfig,
    ) -> Result<Vec<LoadProblem>, std::io::Error> {
        let mut problems = Vec::new();
        let trusted = config.trusted_keys.as_ref();
        let scan = config
            .directory
            .as_deref()
            .map(|dir| scan_directory(dir, trusted));
        let replaced: Vec<&str> = match &scan {
            Some(Ok(scan)) => scan.modules.iter().map(|m| m.name.as_str()).collect(),
            _ => Vec::new(),
        };
        let mut stock = Vec::new();
        let mut set_aside = Vec::new();
        for module in chosen_stock_modules(&config.stock) {
            match module {
                Ok(source) if replaced.contains(&source.name.as_str()) => set_aside.push(source),
                Ok(source) => stock.push(source),
                Err(problem) => problems.push(LoadProblem::not_served(problem)),
            }
        }
        for loaded in join_all(stock.into_iter().map(|source| self.load(source))).await {
            match loaded {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning))
                }
                Err(e) => problems.push(LoadProblem::not_served(e.to_string())),
            }
        }
        let Some(scan) = scan else {
            return Ok(problems);
        };
        let scan = scan?;
        // A store that cannot be trusted is reported once, then not used at all.
        let last_good = match &config.last_good {
            Some(store) => match store.open() {
                Ok(()) => Some(store),
                Err(why) => {
                    problems.push(LoadProblem::warning(format!(
                        "not keeping last good versions of modules: {why}"
                    )));
                    None
                }
            },
            None => None,
        };
        let mut broken: Vec<(String, String)> = scan
            .problems
            .into_iter()
            .map(|(path, problem)| {
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (name, format!("{}: {problem}", path.display()))
            })
            .collect();
        let kept: Vec<ModuleSource> = scan.modules.clone();
        let loads = join_all(scan.modules.into_iter().map(|module| self.load(module))).await;
        for (loaded, kept) in loads.into_iter().zip(kept) {
            match loaded {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning));
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
                Err(e) => broken.push((kept.name.clone(), e.to_string())),
            }
        }
        for (name, problem) in broken {
            let (served, fallback) = match last_good {
                Some(store) => match store.recall(&name, trusted) {
                    Ok(previous) => {
                        let sha = previous.sha256.clone();
                        match self.load(previous).await {
                            Ok(_) => (
                                true,
                                format!("serving its last good version (sha256 {sha}) instead"),
                            ),
                            Err(e) => {
                                self.stock_fallback(
                                    &name,
                                    &format!("its last good version does not load either: {e}"),
                                    &mut set_aside,
                                )
                                .await
                            }
                        }
                    }
                    Err(why) => self.stock_fallback(&name, &why, &mut set_aside).await,
                },
                None => {
                    self.stock_fallback(&name, "no last good versions are kept", &mut set_aside)
                        .await
                }
            };
            problems.push(LoadProblem {
                message: format!("{problem}; {fallback}"),
                broken: true,
                served,
            });
        }
        Ok(problems)
    }

    /// Serves the stock module `name` in place of a directory module that cannot be used: loaded now
    /// if it was set aside, or already in service if the directory module never replaced it.
    async fn stock_fallback(
        &self,
        name: &str,
        why: &str,
        set_aside: &mut Vec<ModuleSource>,
    ) -> (bool, String) {
        if let Some(i) = set_aside.iter().position(|m| m.name == name) {
            return match self.load(set_aside.swap_remove(i)).await {
                Ok(_) => (true, format!("{why}: serving the stock module {name}")),
                Err(e) => (
                    false,
                    format!("{why}; the stock module {name} does not load either: {e}"),
                ),
            };
        }
        let stock = self
            .catalog()
            .modules()
            .any(|m| &*m.name == name && m.origin == crate::modules::Origin::Stock);
        if stock {
            (true, format!("{why}: serving the stock module {name}"))
        } else {
            (false, format!("{why}: module {name} is not served"))
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
