//! Where modules come from: the stock components embedded in the binary, a module directory (a
//! mounted ConfigMap, or a policy author's build output) and module ConfigMaps read through the API
//! ([`configmaps`]), each adding modules or replacing earlier ones by name. Each module is a
//! component (`<name>.wasm`), its [`Manifest`] (`<name>.toml`) and, optionally, a
//! [signature](signature) (`<name>.sig`); a manifest alone, named after a stock module, overrides that
//! module's settings and limits and may narrow its grant ([`stock_override`]). A module ConfigMap may
//! name an OCI artifact instead of holding the files ([`oci`]).

pub mod cluster_floor;
pub mod compression;
mod configmap_file;
pub mod configmaps;
mod directory;
pub mod failure_policy;
mod last_good;
mod manifest;
pub mod oci;
pub mod settings_schema;
pub mod signature;
mod stock;
pub mod stock_override;
pub mod version_floor;

use bytes::Bytes;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

pub use directory::{
    module_from_parts, read_module, DirectoryScan, OverrideFile, PartError, ReadError,
};
pub use failure_policy::FailurePolicy;
pub use last_good::{LastGood, RecallError};
pub use manifest::{
    parse_byte_size, Grant, KubeRule, Limits, Manifest, ManifestError, NamespaceRule, Verbs,
    MAX_MEMORY,
};
pub use signature::{ModuleSignature, TrustedKeys};
pub use stock::{
    chosen_stock_modules, stock_modules, stock_names, StockChoice, StockError, UnknownStock,
    STOCK_ENV,
};
pub use version_floor::{Rollback, VersionFloor};

/// Reads every module in `dir` (one whole version of a kubelet-mounted directory), checking signatures
/// against `trusted` keys (see [`read_module`]); `dir` may also be a file of module ConfigMaps.
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
pub fn directory_names(dir: &std::path::Path) -> Option<std::collections::BTreeSet<String>> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_file() => None,
        _ => Some(directory::names(dir)),
    }
}

/// A module as found, before compilation.
#[derive(Clone)]
pub struct ModuleSource {
    /// Module name (the file stem; stock modules are named after their crate).
    pub name: String,
    /// The component's bytes.
    pub wasm: Bytes,
    /// Lower-case hex sha256 of `wasm`.
    pub sha256: String,
    /// Its manifest.
    pub manifest: Manifest,
    /// The manifest as written (kept so that a good module can be remembered as it came).
    pub manifest_text: Arc<str>,
    /// Where it came from.
    pub origin: Origin,
    /// Its signature, as checked when it was read (stock modules and modules made in code have none).
    pub signature: Option<ModuleSignature>,
}

impl ModuleSource {
    /// A module from bytes and manifest text: the manifest is parsed and the sha256 computed (a sha256
    /// the manifest pins is not checked here; [`read_module`] checks it for files).
    pub fn new(
        name: &str,
        wasm: Vec<u8>,
        manifest_text: &str,
        origin: Origin,
    ) -> Result<ModuleSource, ManifestError> {
        Ok(ModuleSource {
            name: name.to_string(),
            sha256: sha256_hex(&wasm),
            wasm: Bytes::from(wasm),
            manifest: Manifest::parse(manifest_text)?,
            manifest_text: Arc::from(manifest_text),
            origin,
            signature: None,
        })
    }
}

impl fmt::Debug for ModuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleSource")
            .field("name", &self.name)
            .field("bytes", &self.wasm.len())
            .field("sha256", &self.sha256)
            .field("origin", &self.origin)
            .field("signature", &self.signature.as_ref().map(|s| &s.key))
            .finish()
    }
}

/// Where a module came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Embedded in the binary.
    Stock,
    /// Read from a file.
    File(PathBuf),
    /// Read from a module ConfigMap through the API (materialised under the state directory).
    ConfigMap {
        /// The ConfigMap's name.
        name: String,
        /// Its uid: the object, whatever its name (not shown).
        uid: String,
        /// Its `resourceVersion` when it was read.
        resource_version: String,
    },
    /// A stock component with an override manifest from this origin.
    Override(Box<Origin>),
}

impl Origin {
    /// Whether the component is the binary's own (stock, or stock with an override manifest).
    pub fn is_stock_component(&self) -> bool {
        matches!(self, Origin::Stock | Origin::Override(_))
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Stock => f.write_str("stock"),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::ConfigMap {
                name,
                resource_version,
                ..
            } => write!(f, "ConfigMap {name}@{resource_version}"),
            Origin::Override(from) => write!(f, "stock + override {from}"),
        }
    }
}

/// Lower-case hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a module name is acceptable: lower-case letters, digits and `-`, starting with a letter.
pub fn valid_module_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
