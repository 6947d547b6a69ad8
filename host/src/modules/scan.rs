//! Reading a module directory, or the file of module ConfigMaps that stands for one.

use super::configmap_file;
use super::directory::{self, DirectoryScan};
use super::signature::TrustedKeys;

/// The environment variable naming a directory of extra modules.
pub use crate::config::VELERO_WASM_MODULES as MODULES_ENV;

/// Reads every module in `dir` (one whole version of a kubelet-mounted directory), checking signatures
/// against `trusted` keys (see [`read_module`](super::directory::read_module)); `dir` may also be a file of module ConfigMaps.
/// Fails only when the directory itself cannot be read.
pub fn scan_directory(
    dir: &std::path::Path,
    trusted: Option<&TrustedKeys>,
) -> std::io::Result<DirectoryScan> {
    // A file of module ConfigMaps (`module pack`'s output) stands for the directory it describes.
    if std::fs::metadata(dir)?.is_file() {
        return Ok(configmap_file::scan(dir, trusted));
    }
    directory::scan_directory(dir, trusted)
}

/// Every module name `dir` ([`scan_directory`]'s) may put in service, without reading a module; `None`
/// when that cannot be told without reading them all (`dir` is a file of module ConfigMaps).
pub(crate) fn directory_names(dir: &std::path::Path) -> Option<std::collections::BTreeSet<String>> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_file() => None,
        _ => Some(directory::names(dir)),
    }
}
