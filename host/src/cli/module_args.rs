//! The modules a command serves: `--modules`, `--stock` and `--trusted-keys`, and the runtime they
//! load into (with the state directory's compile cache), the same way for every command.

use std::path::PathBuf;

use super::compile_progress;
use super::failure::Failure;
use crate::capabilities::Services;
use crate::config::Config;
use crate::modules::configmaps::ConfigMapModules;
use crate::modules::{StockChoice, TrustedKeys};
use crate::plan::{self, LoadProblem, ModuleConfig};
use crate::runtime::{CompileCache, Runtime};

/// Which stock modules load, and where modules beyond them come from.
#[derive(Debug, clap::Args)]
pub(crate) struct ModuleArgs {
    /// A directory of modules (<name>.wasm with <name>.toml beside it), or a file of module
    /// ConfigMaps as `module pack` writes them, that add to or replace the stock modules by name.
    #[arg(long, env = crate::config::VELERO_WASM_MODULES, value_name = "DIR|FILE")]
    pub(super) modules: Option<PathBuf>,

    /// The stock modules to load: `all`, `none`, or names separated by commas (hcp brings signing).
    #[arg(long, env = crate::config::VELERO_WASM_STOCK, value_name = "LIST", default_value = "all",
          value_parser = StockChoice::parse)]
    pub(super) stock: StockChoice,
    /// Public keys (a .pub file or a directory of them): every module beyond the stock ones must be
    /// signed by one of them.
    #[arg(long, env = crate::config::VELERO_WASM_TRUSTED_KEYS, value_name = "FILE|DIR")]
    pub(super) trusted_keys: Option<PathBuf>,
}

impl ModuleArgs {
    /// The trusted keys named, read; keys that cannot be read are bad input.
    pub(super) fn trusted_keys(&self) -> Result<Option<TrustedKeys>, Failure> {
        read_trusted_keys(self.trusted_keys.as_deref())
    }
}

/// Reads `--trusted-keys`, if given.
pub(super) fn read_trusted_keys(
    path: Option<&std::path::Path>,
) -> Result<Option<TrustedKeys>, Failure> {
    path.filter(|p| !p.as_os_str().is_empty())
        .map(|p| {
            TrustedKeys::load(p).map_err(|e| Failure::bad_input(format!("--trusted-keys {e}")))
        })
        .transpose()
}

/// The compile cache of the state directory `config` names, if there is one.
pub(super) fn compile_cache(config: &Config) -> Option<CompileCache> {
    crate::state::default_dir(config).and_then(|d| CompileCache::open(d.join("compiled")))
}

/// A runtime with the stock modules and those of `--modules`. Returns it and the load problems
/// (modules left out, or served in an earlier version), which the caller reports.
pub(super) async fn load_runtime(
    args: &ModuleArgs,
    services: Services,
    config: &Config,
) -> Result<(Runtime, Vec<LoadProblem>), Failure> {
    load_runtime_with(args, services, None, config).await
}

/// Like [`load_runtime`], with the module ConfigMaps read through the API loaded last.
pub(super) async fn load_runtime_with(
    args: &ModuleArgs,
    services: Services,
    configmaps: Option<ConfigMapModules>,
    config: &Config,
) -> Result<(Runtime, Vec<LoadProblem>), Failure> {
    // Reading the cluster's modules as the plugin does, the plugin's rollback protection too.
    let floor = configmaps
        .as_ref()
        .and(crate::state::default_dir(config))
        .map(|state| crate::modules::VersionFloor::at(&state));
    let runtime = Runtime::new(services)
        .map_err(|e| Failure::failed(format!("{e:#}")))?
        .with_compile_cache(compile_cache(config))
        .with_compile_budget(crate::runtime::CompileBudget::from_config(config))
        .with_compile_watch(compile_progress::watch());
    let modules = ModuleConfig {
        directory: args.modules.clone(),
        last_good: None,
        stock: args.stock.clone(),
        trusted_keys: args.trusted_keys()?,
        configmaps,
        floor,
    };
    let problems = plan::load_modules(&runtime, &modules).await.map_err(|e| {
        let dir = args
            .modules
            .as_deref()
            .unwrap_or(std::path::Path::new(""))
            .display();
        // A crate's suite names its `module/`, which only `velero-wasm build` makes.
        let hint = match args.modules.as_deref() {
            Some(path) if !path.exists() && path.file_name().is_some_and(|n| n == "module") => {
                "; a crate's module/ is made by `velero-wasm build` in the crate's directory: build first"
                    .to_string()
            }
            _ => String::new(),
        };
        Failure::bad_input(format!("--modules {dir}: cannot be read: {e}{hint}"))
    })?;
    Ok((runtime, problems))
}
