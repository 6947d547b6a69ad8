//! The wasm runtime: one engine and linker, a [`Registry`] of loaded modules, and the calls
//! ([`Runtime::backup`], [`Runtime::restore`], …) that both the gRPC server and the CLI use.
//!
//! Each module is compiled once and linked once; each call gets a fresh store and instance (so no
//! state leaks between items), a memory cap and a deadline. A trap, a deadline or an exhausted cap
//! fails that one call with a [`CallError`] naming the module, action and item.

mod call;
mod engine;
mod error;
mod module;
mod registry;
mod signing;

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::Linker;
use wasmtime::Engine;

pub use engine::{EPOCH_TICK, MAX_CONCURRENT_CALLS};
pub use error::{CallError, Fault, LoadError};
pub use module::{validate_name, LoadedModule};
pub use registry::{ActionEntry, Catalog, Registry};
pub use signing::{types as signing_types, Signing};

use crate::capabilities::{self, CallState, Services};
use crate::modules::ModuleSource;

/// The runtime: modules, and the services their capabilities use.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    registry: Arc<Registry>,
    services: Arc<Services>,
    slots: Semaphore,
    signing: Arc<Signing>,
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
            signing,
        })
    }

    /// The services behind the capabilities.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Compiles, links and describes a module, then puts it in service (replacing a module of the same
    /// name). On failure the registry is unchanged.
    pub async fn load(&self, source: ModuleSource) -> Result<Loaded, LoadError> {
        let (engine, linker) = (self.engine.clone(), self.linker.clone());
        let origin = source.origin.to_string();
        let name = source.name.clone();
        let linked = tokio::task::spawn_blocking(move || module::link(&engine, &linker, source))
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

    /// Loads several modules in order, logging each outcome; returns the errors.
    pub async fn load_all(&self, sources: Vec<ModuleSource>) -> Vec<LoadError> {
        let mut errors = Vec::new();
        for source in sources {
            let origin = source.origin.clone();
            match self.load(source).await {
                Ok(loaded) => {
                    tracing::debug!(module = loaded.module, actions = loaded.actions, signing = loaded.signing, %origin, "module loaded");
                    for warning in &loaded.warnings {
                        tracing::warn!("{warning}");
                    }
                }
                Err(e) => {
                    tracing::error!("{e}");
                    errors.push(e);
                }
            }
        }
        errors
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
