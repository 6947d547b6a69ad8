//! The version `--version` prints.

/// What `--version` prints after the name: the binary's version and the WIT package its components
/// are built against (read from `wit/` when the binary is built).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (WIT ",
    env!("VELERO_WASM_WIT_PACKAGE"),
    ")"
);
