//! Where the host's logs go: always stderr (stdout belongs to the plugin handshake and to `run`'s JSON).
//! People get a compact human format; the plugin mode gets hclog JSON lines (see `plugin::log_format`).

use std::io::IsTerminal;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

/// Log levels as Velero spells them (`--log-level`), mapped onto tracing's.
pub fn filter(level: &str) -> EnvFilter {
    let directive = match level.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "warn" | "warning" => "warn",
        "error" | "fatal" | "panic" => "error",
        _ => "info",
    };
    EnvFilter::new(format!(
        "{directive},wasmtime=warn,cranelift=warn,wasmtime_wasi=warn"
    ))
}

/// Human-readable logs on stderr, for the CLI.
pub fn init_human(level: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_span_events(FmtSpan::NONE)
        .compact()
        .try_init();
}
