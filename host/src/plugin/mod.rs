//! Velero's plugin protocol (go-plugin handshake, infrastructure services, one service per Velero
//! kind), each call dispatched to the runtime.

use std::process::ExitCode;

/// Runs as a Velero plugin.
pub fn main() -> ExitCode {
    eprintln!("velero-wasm: the Velero plugin protocol is not implemented yet");
    ExitCode::from(1)
}
