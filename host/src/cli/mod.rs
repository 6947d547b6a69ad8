//! The commands people run: `run` (a policy author's local loop: one action on one item, against a
//! fixture cluster), `actions` (what is loaded, and what each module may do), `sign` (a signed
//! object-store URL from the signing component), `module` (the operator's keys, packing and checking
//! of modules), `new` (a module's crate to start from), `build` (a module's crate to a pinned
//! component), `test` (suites of cases as data), `bench` (one action's cost), `diff` (two module sets compared on a backup), `status` (what the
//! plugin processes serve, and what their shadow modules did), `install-plugin` (the
//! plugin image's init container: the binary copies itself into Velero's plugin directory) and `rbac`
//! (the RBAC the modules' grants need).

mod actions;
mod bench;
mod build;
mod build_freshness;
mod compile_progress;
mod diff;
/// Public for the fuzz target `diff_archive` (fuzz/): what `diff` reads from a backup archive.
pub mod diff_archive;
mod install;
mod module;
mod module_command;
mod new;
mod output_file;
mod pack_guard;
mod push;
mod rbac;
mod restore_input;
mod run;
mod settings;
mod sign;
mod signing;
mod status;
mod suite_layout;
mod test;
mod text;
mod velero_namespace;
mod vendored_sdk;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::capabilities::Services;
use crate::config::Config;
use crate::modules::configmaps::ConfigMapModules;
use crate::modules::{StockChoice, TrustedKeys};
use crate::runtime::{CompileCache, LoadProblem, ModuleConfig, Runtime};

/// What `--version` prints after the name: the binary's version and the WIT package its components
/// are built against (read from `wit/` when the binary is built).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (WIT ",
    env!("VELERO_WASM_WIT_PACKAGE"),
    ")"
);

/// Velero item actions as sandboxed WebAssembly components.
///
/// Velero runs this binary as a plugin (it sets VELERO_PLUGIN=hello); by hand, use the commands below.
#[derive(Debug, Parser)]
#[command(name = "velero-wasm", version = VERSION, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,

    /// Log level for messages on stderr: trace, debug, info, warn, error.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    log_level: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one action on one item and print the result as JSON.
    Run(Box<run::RunArgs>),
    /// List every loaded action: name, kind, what it applies to, its module and the module's grant.
    Actions(actions::ActionsArgs),
    /// Print a signed object-store URL (S3 presigned GET or Azure Blob SAS), made by the signing module.
    Sign(Box<sign::SignArgs>),
    /// Copy this binary into Velero's plugin directory (the plugin image's init container runs this).
    InstallPlugin(install::InstallArgs),
    /// Print the RBAC (ClusterRole, Roles, bindings) that the loaded modules' grants need, as YAML.
    Rbac(rbac::RbacArgs),
    /// Make, sign, pack, check and push modules: keygen, pack, export, verify, push.
    #[command(subcommand)]
    Module(module_command::ModuleCommand),
    /// Build a module's crate as a component, pin its sha256 in its manifest, check its grant, and
    /// write both to DIR/module/.
    Build(build::BuildArgs),
    /// Start a module's crate: an action of the kind asked for, its manifest, unit tests, fixtures, a suite.
    New(new::NewArgs),
    /// Run the cases of test suites (YAML): each an action on an item, with its expected result.
    Test(test::TestArgs),
    /// Measure one action on one item: warm-up, then N calls; median, p90, p99 and what they hold.
    Bench(Box<bench::BenchArgs>),
    /// Compare two module sets on a backup: every backup, item-block and restore action of each over
    /// every item of a Velero backup archive (or a directory of manifests), naming the actions one set
    /// lacks; exit 1 when a result differs.
    Diff(Box<diff::DiffArgs>),
    /// Show what the plugin processes serve (each module's version, source, signature) and what their
    /// shadow modules did: calls compared, differences, faults, the last differing item.
    Status(status::StatusArgs),
}

/// Which stock modules load, and where modules beyond them come from.
#[derive(Debug, clap::Args)]
pub struct ModuleArgs {
    /// A directory of modules (<name>.wasm with <name>.toml beside it), or a file of module
    /// ConfigMaps as `module pack` writes them, that add to or replace the stock modules by name.
    #[arg(long, env = "VELERO_WASM_MODULES", value_name = "DIR|FILE")]
    modules: Option<PathBuf>,

    /// The stock modules to load: `all`, `none`, or names separated by commas (hcp brings signing).
    #[arg(long, env = "VELERO_WASM_STOCK", value_name = "LIST", default_value = "all",
          value_parser = StockChoice::parse)]
    stock: StockChoice,
    /// Public keys (a .pub file or a directory of them): every module beyond the stock ones must be
    /// signed by one of them.
    #[arg(long, env = "VELERO_WASM_TRUSTED_KEYS", value_name = "FILE|DIR")]
    trusted_keys: Option<PathBuf>,
}

impl ModuleArgs {
    /// The trusted keys named, read; keys that cannot be read are bad input.
    fn trusted_keys(&self) -> Result<Option<TrustedKeys>, Failure> {
        read_trusted_keys(self.trusted_keys.as_deref())
    }
}

/// Reads `--trusted-keys`, if given.
fn read_trusted_keys(path: Option<&std::path::Path>) -> Result<Option<TrustedKeys>, Failure> {
    path.filter(|p| !p.as_os_str().is_empty())
        .map(|p| {
            TrustedKeys::load(p).map_err(|e| Failure::bad_input(format!("--trusted-keys {e}")))
        })
        .transpose()
}

/// Exit status: the command worked.
pub const EXIT_OK: u8 = 0;
/// Exit status: the action (or something it needed) failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad input (unreadable file, bad JSON or YAML, unknown action, wrong item).
pub const EXIT_BAD_INPUT: u8 = 2;

/// Runs the CLI with the process's arguments and its `config` (read once by `main.rs`; clap reads
/// the variables that stand for flags, `env = …` below, as it parses them).
pub fn main(config: Config) -> ExitCode {
    let cli = Cli::parse();
    crate::logging::init_human(&cli.log_level);
    crate::capabilities::memory::MemoryBudget::configure_process(&config);
    let config = &config;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("velero-wasm: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(*args, config).await,
            Command::Actions(args) => actions::actions(args, config).await,
            Command::Sign(args) => sign::sign(*args, config).await,
            Command::InstallPlugin(args) => install::install_plugin(args),
            Command::Rbac(args) => rbac::rbac(args),
            Command::Module(command) => module_command::run(command, config).await,
            Command::Build(args) => build::build(args, config).await,
            Command::New(args) => new::new(args),
            Command::Test(args) => test::test(args, config).await,
            Command::Bench(args) => bench::bench(*args, config).await,
            Command::Diff(args) => diff::diff(*args, config).await,
            Command::Status(args) => status::status(args, config),
        }
    });
    ExitCode::from(code)
}

/// Longest failure message printed: a module's error is the module's to size, stderr is not.
const MAX_MESSAGE: usize = 16 << 10;

/// A command's failure: what to print, and the exit status.
pub struct Failure {
    /// Exit status.
    pub code: u8,
    /// One line (or a few) for stderr.
    pub message: String,
}

impl Failure {
    fn bad_input(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message: message.to_string(),
        }
    }

    /// A failure whose message (an action's own error, quoted) is cut to [`MAX_MESSAGE`] bytes.
    fn failed(message: impl std::fmt::Display) -> Failure {
        let mut message = message.to_string();
        if message.len() > MAX_MESSAGE {
            let all = message.len();
            let mut end = MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(&format!("… ({all} bytes in all)"));
        }
        Failure {
            code: EXIT_FAILED,
            message,
        }
    }

    fn prefixed(self, prefix: &str) -> Failure {
        Failure {
            code: self.code,
            message: format!("{prefix}{}", self.message),
        }
    }
}

/// The compile cache of the state directory `config` names, if there is one.
fn compile_cache(config: &Config) -> Option<CompileCache> {
    crate::state::default_dir(config).and_then(|d| CompileCache::open(d.join("compiled")))
}

/// A runtime with the stock modules and those of `--modules`. Returns it and the load problems
/// (modules left out, or served in an earlier version), which the caller reports.
async fn load_runtime(
    args: &ModuleArgs,
    services: Services,
    config: &Config,
) -> Result<(Runtime, Vec<LoadProblem>), Failure> {
    load_runtime_with(args, services, None, config).await
}

/// Like [`load_runtime`], with the module ConfigMaps read through the API loaded last.
async fn load_runtime_with(
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
        .with_compile_watch(compile_progress::watch())
        .with_version_floor(floor);
    let modules = ModuleConfig {
        directory: args.modules.clone(),
        last_good: None,
        stock: args.stock.clone(),
        trusted_keys: args.trusted_keys()?,
        configmaps,
    };
    let problems = runtime.load_modules(&modules).await.map_err(|e| {
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
