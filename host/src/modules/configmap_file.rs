//! A file of module ConfigMaps (what `module pack` writes) read as a module directory, so that
//! `--modules modules.yaml` runs, tests or lists exactly what will be applied, with no cluster: each
//! ConfigMap is checked as the host checks one read through the API ([`files_of`]), then its module
//! as a directory's.

use std::path::Path;

use serde_json::Value;

use super::configmaps::{files_of, LABEL};
use super::directory::{module_from_parts, DirectoryScan, OverrideFile};
use super::signature::{verify, TrustedKeys};
use super::Origin;

/// The modules of the ConfigMaps in `file` (YAML documents or JSON, `List`s unwrapped). A ConfigMap
/// that cannot be used is a problem named `<file>/<module>.wasm`, as a directory's file would be.
pub fn scan(file: &Path, trusted: Option<&TrustedKeys>) -> DirectoryScan {
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
        let name = label.unwrap_or("");
        // Named as a directory's file would be, so that the module's name is its stem.
        let shown = match name {
            "" => file.to_path_buf(),
            name => file.join(format!("{name}.wasm")),
        };
        let what = format!(
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
        );
        if object.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
            scan.problems
                .push((shown, format!("{what}: is not a ConfigMap")));
            continue;
        }
        let files = match files_of(object, label) {
            Ok(files) => files,
            Err(why) => {
                scan.problems.push((shown, format!("{what}: {why}")));
                continue;
            }
        };
        if files
            .iter()
            .any(|(key, _)| key.ends_with(&format!(".{}", super::oci::EXTENSION)))
        {
            scan.problems.push((
                shown,
                format!("{what}: names an OCI artifact ({name}.oci), which only the plugin pulls: run or check the module from its directory instead"),
            ));
            continue;
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
                    String::from_utf8(bytes)
                        .map_err(|_| format!("{what}: {name}.{ext} is not UTF-8 text"))
                })
                .transpose()
        };
        let (manifest, signature) = match (text("toml"), text("sig")) {
            (Ok(Some(manifest)), Ok(signature)) => (manifest, signature),
            (Err(why), _) | (_, Err(why)) => {
                scan.problems.push((shown, why));
                continue;
            }
            (Ok(None), _) => {
                scan.problems
                    .push((shown, format!("{what}: it has no {name}.toml")));
                continue;
            }
        };
        match file_named("wasm") {
            Some(wasm) => match module_from_parts(
                name,
                wasm,
                &manifest,
                signature.as_deref(),
                Origin::File(shown.clone()),
                trusted,
            ) {
                Ok(module) => scan.modules.push(module),
                Err(e) => scan.problems.push((shown, format!("{what}: {e}"))),
            },
            None => match verify(name, None, &manifest, signature.as_deref(), trusted) {
                Ok(signature) => scan.overrides.push(OverrideFile {
                    name: name.to_string(),
                    path: file.join(format!("{name}.toml")),
                    text: manifest,
                    signature,
                }),
                Err(e) => scan.problems.push((shown, format!("{what}: {e}"))),
            },
        }
    }
    scan
}
