//! The `random` capability: bytes from the operating system's secure generator.

use super::CallState;
use crate::bindings::velero_wasm::plugin::random::Host;

/// The most bytes one `bytes` call returns; asking for more traps with a message saying so.
pub const MAX_BYTES: u32 = 1 << 20;

impl Host for CallState {
    fn bytes(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        if len > MAX_BYTES {
            wasmtime::bail!("random: {len} bytes asked for in one call; the limit is {MAX_BYTES}");
        }
        let mut bytes = vec![0u8; len as usize];
        getrandom::fill(&mut bytes)
            .map_err(|e| wasmtime::format_err!("random: the system generator failed: {e}"))?;
        Ok(bytes)
    }
}
