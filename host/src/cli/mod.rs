//! The commands people run: `run` (a policy author's local loop: one action on one item, against a
//! fixture cluster), `actions` (what is loaded, and what each module may do), `sign` (a signed
//! object-store URL from the signing component), `module` (the operator's keys, packing and checking
//! of modules), `new` (a module's crate to start from), `build` (a module's crate to a pinned
//! component), `test` (suites of cases as data), `bench` (one action's cost), `diff` (two module sets compared on a backup), `status` (what the
//! plugin processes serve, and what their shadow modules did), `install-plugin` (the
//! plugin image's init container: the binary copies itself into Velero's plugin directory) and `rbac`
//! (the RBAC the modules' grants need).

mod actions;
/// Public for the fuzz target `diff_archive` (fuzz/): what `diff` reads from a backup archive.
pub(crate) mod backup_item;
mod bench;
mod build;
mod build_freshness;
mod compile_progress;
mod diff;
pub(crate) mod diff_archive;
mod diff_memory;
mod failure;
mod install;
mod module_args;
mod module_command;
mod module_local;
mod new;
mod output_file;
mod pack_guard;
mod push;
mod rbac;
mod restore_input;
mod run;
mod settings;
mod sign;
mod sign_flags;
mod status;
mod suite_layout;
mod test;
mod text;
mod velero_namespace;
mod vendored_sdk;
mod version;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;
use failure::EXIT_FAILED;
use version::VERSION;

/// Velero item actions as sandboxed WebAssembly components.
///
/// Velero runs this binary as a plugin (it sets VELERO_PLUGIN=hello); by hand, use the commands below.
#[derive(Debug, Parser)]
#[command(name = "velero-wasm", version = VERSION, propagate_version = true)]
pub(crate) struct Cli {
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
