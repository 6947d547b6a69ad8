//! The `velero-wasm` binary: a Velero plugin when Velero starts it (the go-plugin magic cookie
//! `VELERO_PLUGIN=hello` is set), otherwise the command-line tool.

use std::process::ExitCode;

/// The static binary's allocator. A plugin call makes many small, short-lived allocations on several
/// threads (gRPC frames, API answers, the guest's strings); musl's allocator made an Execute twice as
/// slow as the glibc build's, and mimalloc brings it level. glibc builds keep glibc's allocator: with
/// mimalloc there, 200 clients that stopped reading held 101 MiB (tests/plugin_faults.rs allows 100).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The one read of the environment: everything below gets its settings from this value.
    let config = velero_wasm::config::Config::from_env();
    if config
        .velero_plugin()
        .is_some_and(|v| v == velero_wasm::plugin::handshake::COOKIE_VALUE)
    {
        return velero_wasm::plugin::main(config);
    }
    // Velero passes only flags; a person passes a command (or --help, --version), perhaps after the
    // global `--log-level LEVEL`.
    let mut rest = args.iter().skip(1).filter_map(|a| a.to_str());
    let first = loop {
        match rest.next() {
            Some("--log-level") => {
                rest.next();
            }
            Some(flag) if flag.starts_with("--log-level=") => {}
            other => break other.unwrap_or(""),
        }
    };
    let wants_cli =
        !first.starts_with('-') || matches!(first, "--help" | "-h" | "--version" | "-V");
    if first.is_empty() || !wants_cli {
        eprintln!(
            "velero-wasm is a Velero plugin: Velero starts it from its plugin directory with VELERO_PLUGIN=hello.\n\
             It is not meant to be executed this way. To use it by hand, see `velero-wasm --help`:\n  \
             velero-wasm run --action NAME --item FILE (--backup FILE | --restore FILE) [--cluster PATH ...]\n  \
             velero-wasm actions"
        );
        return ExitCode::from(1);
    }
    // A person's command stops quietly when what reads its output goes away (`velero-wasm … | head`),
    // as other command-line tools do, instead of panicking on the broken pipe. (The plugin keeps
    // Rust's default of ignoring SIGPIPE: a write to a closed pipe is then an error it handles.)
    // SAFETY: setting a signal's disposition to its default, before any thread is started.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    velero_wasm::cli_main(config)
}
