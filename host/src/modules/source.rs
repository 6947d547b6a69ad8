//! A module as found, before compilation, and where it came from.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use super::identity::sha256_hex;
use super::manifest::{Manifest, ManifestError};
use super::signature::ModuleSignature;

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
    pub(crate) manifest_text: Arc<str>,
    /// Where it came from.
    pub origin: Origin,
    /// Its signature, as checked when it was read (stock modules and modules made in code have none).
    pub(crate) signature: Option<ModuleSignature>,
}

impl ModuleSource {
    /// A module from bytes and manifest text: the manifest is parsed and the sha256 computed (a sha256
    /// the manifest pins is not checked here; [`read_module`](super::directory::read_module) checks it for files).
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
    pub(crate) fn is_stock_component(&self) -> bool {
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
