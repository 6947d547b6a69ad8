//! `velero-wasm module`: its subcommands, and which file does each (`module_local.rs` the local ones,
//! `push.rs` the registry one).

use super::{module_local, push};

/// The subcommands of `module`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ModuleCommand {
    /// Make a key pair for signing modules: PREFIX.key (private, mode 0600) and PREFIX.pub (for the
    /// hosts' VELERO_WASM_TRUSTED_KEYS). Prints the key id.
    Keygen(module_local::KeygenArgs),
    /// Write the ConfigMap YAML of a module, or of every module of a directory (one ConfigMap each),
    /// optionally signed. Each must fit Kubernetes' 1 MiB object limit; its size goes to stderr.
    Pack(module_local::PackArgs),
    /// Write a stock module's component and manifest (<NAME>.wasm, <NAME>.toml) into a directory.
    Export(module_local::ExportArgs),
    /// Check the modules of a directory or of a packed ConfigMap YAML file as the host will: name,
    /// sha256 pin and signature. Exits 1 when any is refused.
    Verify(module_local::VerifyArgs),
    /// Push a module (component, manifest and signature) to an OCI registry as a wasm artifact, and
    /// print its reference pinned by digest: what a module ConfigMap's <name>.oci names.
    Push(push::PushArgs),
}

/// Runs a `module` subcommand; returns the exit status.
pub(crate) async fn run(command: ModuleCommand, config: &crate::config::Config) -> u8 {
    let (verb, result) = match command {
        ModuleCommand::Keygen(args) => ("keygen", module_local::keygen(&args)),
        ModuleCommand::Pack(args) => ("pack", module_local::pack(&args, config)),
        ModuleCommand::Export(args) => ("export", module_local::export(&args)),
        ModuleCommand::Verify(args) => ("verify", module_local::verify(&args)),
        ModuleCommand::Push(args) => ("push", push::push(&args, config).await),
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("velero-wasm module {verb}: {}", failure.message);
            failure.code
        }
    }
}
