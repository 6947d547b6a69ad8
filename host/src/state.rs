//! Where the host keeps state between processes: compiled modules (so a plugin process Velero starts
//! does not compile them again), the last good version of each directory module, and the actions last
//! listed to Velero (`plugin::listing`).
//!
//! The first of: `$VELERO_WASM_STATE_DIR`; `$VELERO_SCRATCH_DIR/velero-wasm` (the Velero pod's scratch
//! volume, shared by every plugin process of the pod); `$XDG_CACHE_HOME/velero-wasm`;
//! `$HOME/.cache/velero-wasm`. None of them set: no state is kept.

use std::path::PathBuf;

/// The state directory for this environment, if one can be named.
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("VELERO_WASM_STATE_DIR")
        .or_else(|| var("VELERO_SCRATCH_DIR").map(|d| d.join("velero-wasm")))
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("velero-wasm")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("velero-wasm")))
}
