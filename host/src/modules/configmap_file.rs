//! A file of module ConfigMaps (what `module pack` writes) read as a module directory, so that
//! `--modules modules.yaml` runs, tests or lists exactly what will be applied, with no cluster: each
//! ConfigMap is checked as the host checks one read through the API ([`files_of`]), then its module
//! as a directory's.

use std::path::Path;

use serde_json::Value;

use super::configmaps::{files_of, FilesError, LABEL};
use super::directory::{module_from_parts, DirectoryScan, OverrideFile, PartError};
use super::signature::{verify, SignatureError, TrustedKeys};
use super::source::{ModuleSource, Origin};

/// The modules of the ConfigMaps in `file` (YAML documents or JSON, `List`s unwrapped). A ConfigMap
/// that cannot be used is a problem named `<file>/<module>.wasm`, as a directory's file would be.
pub(crate) fn scan(file: &Path, trusted: Option<&TrustedKeys>) -> DirectoryScan {
    let mut scan = DirectoryScan::default();
    let objects = match crate::documents::read_objects(&[file.to_path_buf()]) {
        Ok(objects) => objects,
        Err(e) => {
            scan.problems.push((file.to_path_buf(), e.message));
            return scan;
        }
    };
    for (index, (_, object)) in objects.iter().enumerate() {
        let label = object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(LABEL))
            .and_then(Value::as_str);
        // Named as a directory's file would be, so that the module's name is its stem.
        let shown = match label.unwrap_or("") {
            "" => file.to_path_buf(),
            name => file.join(format!("{name}.wasm")),
        };
        let what = describe(index, object);
        match read_one(file, &shown, object, label, trusted) {
            Ok(Found::Module(module)) => scan.modules.push(*module),
            Ok(Found::Override(found)) => scan.overrides.push(found),
            Err(why) => scan.problems.push((shown, format!("{what}: {why}"))),
        }
    }
    scan
}

/// What one ConfigMap of the file holds.
enum Found {
    /// A module, component and manifest.
    Module(Box<ModuleSource>),
    /// A manifest alone: an override of the stock module of its name.
    Override(OverrideFile),
}

/// How a problem names a document of the file: its place, kind and name.
fn describe(index: usize, object: &Value) -> String {
    format!(
        "document {} ({} {})",
        index + 1,
        object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("object"),
        object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("without a name")
    )
}

/// The module (or override) of one document, labelled `label`, checked as the host checks a
/// ConfigMap read through the API; `shown` is the path it goes by.
fn read_one(
    file: &Path,
    shown: &Path,
    object: &Value,
    label: Option<&str>,
    trusted: Option<&TrustedKeys>,
) -> Result<Found, Unusable> {
    let name = label.unwrap_or("");
    if object.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
        return Err(Unusable::NotAConfigMap);
    }
    let files = files_of(object, label)?;
    if files
        .iter()
        .any(|(key, _)| key.ends_with(&format!(".{}", super::oci::EXTENSION)))
    {
        return Err(Unusable::Artifact(name.to_string()));
    }
    let file_named = |ext: &str| {
        files
            .iter()
            .find(|(key, _)| *key == format!("{name}.{ext}"))
            .map(|(_, bytes)| bytes.clone())
    };
    let text = |ext: &str| {
        file_named(ext)
            .map(|bytes| {
                String::from_utf8(bytes).map_err(|_| Unusable::NotText(format!("{name}.{ext}")))
            })
            .transpose()
    };
    let (manifest, signature) = (text("toml")?, text("sig")?);
    let manifest = manifest.ok_or_else(|| Unusable::NoManifest(name.to_string()))?;
    match file_named("wasm") {
        Some(wasm) => module_from_parts(
            name,
            wasm,
            &manifest,
            signature.as_deref(),
            Origin::File(shown.to_path_buf()),
            trusted,
        )
        .map(|module| Found::Module(Box::new(module)))
        .map_err(Unusable::from),
        None => verify(name, None, &manifest, signature.as_deref(), trusted)
            .map(|signature| {
                Found::Override(OverrideFile {
                    name: name.to_string(),
                    path: file.join(format!("{name}.toml")),
                    text: manifest,
                    signature,
                })
            })
            .map_err(Unusable::from),
    }
}

/// Why a document of the file gives no module.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("is not a ConfigMap")]
    NotAConfigMap,
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("names an OCI artifact ({0}.oci), which only the plugin pulls: run or check the module from its directory instead")]
    Artifact(String),
    #[error("{0} is not UTF-8 text")]
    NotText(String),
    #[error("it has no {0}.toml")]
    NoManifest(String),
    #[error(transparent)]
    Parts(#[from] PartError),
    #[error(transparent)]
    Signature(#[from] SignatureError),
}
