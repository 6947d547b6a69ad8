//! The files a module ConfigMap holds ([`files_of`]): its keys checked to be the module's, decoded,
//! expanded and bounded, or why they are not a module's ([`FilesError`]).

use base64::Engine as _;
use serde_json::Value;

use super::metadata::LABEL;
use crate::modules::compression::{self, COMPRESSED_EXTENSION};
use crate::modules::identity::valid_module_name;
use crate::modules::oci;

/// The most a module ConfigMap may hold, its files decoded (the API server's object limit).
pub(crate) const MAX_CONFIGMAP_BYTES: u64 = 1 << 20;

/// Whether a ConfigMap's files name an OCI artifact (`<name>.oci`) instead of holding the module.
pub(super) fn is_artifact(files: &[(String, Vec<u8>)]) -> bool {
    files
        .iter()
        .any(|(key, _)| key.ends_with(&format!(".{}", oci::EXTENSION)))
}

/// The files of a module ConfigMap (`data` as text, `binaryData` decoded), checked: keys
/// `<module>.wasm|toml|sig` only, none in both sections, at most [`MAX_CONFIGMAP_BYTES`] in all as
/// stored; a component stored compressed (`<module>.wasm.gz`) comes out expanded, as `<module>.wasm`.
/// `module` is the value of its [`LABEL`]. The host and `velero-wasm module verify` both check a
/// ConfigMap with it, so that verify passes exactly what the host would load.
pub(crate) fn files_of(
    item: &Value,
    module: Option<&str>,
) -> Result<Vec<(String, Vec<u8>)>, FilesError> {
    let module = match module {
        Some(m) if valid_module_name(m) => m,
        Some(m) => return Err(FilesError::Label(m.to_string())),
        None => return Err(FilesError::NoLabel),
    };
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut keys: Vec<&String> = Vec::new();
    let mut total: u64 = 0;
    for (section, binary) in [("data", false), ("binaryData", true)] {
        let Some(entries) = item.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (key, value) in entries {
            let allowed = ["wasm", COMPRESSED_EXTENSION, "toml", "sig", oci::EXTENSION]
                .map(|ext| format!("{module}.{ext}"));
            if !allowed.contains(key) {
                return Err(FilesError::Key {
                    section,
                    key: key.clone(),
                    allowed: allowed.join(", "),
                });
            }
            if keys.contains(&key) {
                return Err(FilesError::Both(key.clone()));
            }
            keys.push(key);
            let text = value.as_str().unwrap_or("");
            let bytes = if binary {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|source| FilesError::NotBase64 {
                        key: key.clone(),
                        source,
                    })?
            } else {
                text.as_bytes().to_vec()
            };
            total += bytes.len() as u64;
            if total > MAX_CONFIGMAP_BYTES {
                return Err(FilesError::TooLarge);
            }
            let (key, bytes) = compression::expanded(key, bytes)?;
            if files.iter().any(|(k, _)| *k == key) {
                return Err(FilesError::Twice(key));
            }
            files.push((key, bytes));
        }
    }
    if is_artifact(&files) {
        if files.len() > 1 {
            return Err(FilesError::ArtifactAndFiles(module.to_string()));
        }
        if let Err(why) = oci::Reference::parse(&String::from_utf8_lossy(&files[0].1)) {
            return Err(FilesError::Reference {
                module: module.to_string(),
                why,
            });
        }
        return Ok(files);
    }
    if !files.iter().any(|(k, _)| k.ends_with(".toml")) {
        return Err(FilesError::NoManifest(module.to_string()));
    }
    Ok(files)
}

/// Why a module ConfigMap's files are not a module's (see [`files_of`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    /// Its label is not a module name.
    #[error("label {LABEL}={0:?} is not a module name (lower-case letters, digits and '-', starting with a letter)")]
    Label(String),
    /// It has no label naming a module.
    #[error("label {LABEL} does not name a module")]
    NoLabel,
    /// A key that is not one of the module's files.
    #[error("{section} key {key:?} is not one of {allowed}")]
    Key {
        /// `data` or `binaryData`.
        section: &'static str,
        /// The key.
        key: String,
        /// The keys allowed, comma-separated.
        allowed: String,
    },
    /// A key in both sections.
    #[error("key {0:?} is in both data and binaryData")]
    Both(String),
    /// A binaryData value that is not base64.
    #[error("binaryData key {key:?} is not base64: {source}")]
    NotBase64 {
        /// The key.
        key: String,
        /// What the decoder said.
        #[source]
        source: base64::DecodeError,
    },
    /// More than a ConfigMap may hold.
    #[error(
        "holds more than {MAX_CONFIGMAP_BYTES} bytes (1 MiB), the most a module ConfigMap may hold"
    )]
    TooLarge,
    /// A compressed component that does not expand.
    #[error(transparent)]
    Packed(#[from] compression::KeyExpandError),
    /// The component both as it is and compressed.
    #[error("it holds {0} both as it is and compressed")]
    Twice(String),
    /// An artifact reference beside files.
    #[error("it names an OCI artifact ({0}.{ext}) and holds files as well: the component, manifest and signature come from the artifact, so it must hold {0}.{ext} alone", ext = oci::EXTENSION)]
    ArtifactAndFiles(String),
    /// An artifact reference that does not parse.
    #[error("{module}.{ext}: {why}", ext = oci::EXTENSION)]
    Reference {
        /// The module.
        module: String,
        /// What the parser said.
        why: oci::ReferenceError,
    },
    /// No manifest.
    #[error("it has no {0}.toml")]
    NoManifest(String),
}
