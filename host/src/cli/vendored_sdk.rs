//! The SDK's source carried in the binary, for `velero-wasm new` to write into a new crate
//! (`vendor/velero-wasm-sdk/`, a path dependency): a module builds with only this binary and Cargo,
//! no checkout and no registry copy of the SDK. Its Cargo.toml files inherit from the workspace
//! (`version.workspace = true`); the copies written have those values filled in, so that they stand
//! alone.

use anyhow::anyhow;

/// Where `new` writes the SDK, relative to the new crate.
pub(crate) const VENDOR_DIR: &str = "vendor/velero-wasm-sdk";

// `SDK_FILES`: each file of sdk/ and its text (host/build.rs).
include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The workspace manifest the SDK's Cargo.toml files inherit from.
const WORKSPACE: &str = include_str!("../../../Cargo.toml");

/// The SDK's files as `new` writes them: path under the new crate, text.
pub(crate) fn files() -> anyhow::Result<Vec<(String, String)>> {
    let workspace: toml::Table = WORKSPACE
        .parse()
        .map_err(|e| anyhow!("the workspace Cargo.toml carried in the binary: {e}"))?;
    SDK_FILES
        .iter()
        .map(|(path, text)| {
            let text = match path.ends_with("Cargo.toml") {
                true => standalone(text, &workspace).map_err(|e| anyhow!("sdk/{path}: {e}"))?,
                false => text.to_string(),
            };
            Ok((format!("{VENDOR_DIR}/{path}"), text))
        })
        .collect()
}

/// `manifest` with every `workspace = true` replaced by the workspace's value: `[package]` fields from
/// `[workspace.package]`, dependencies from `[workspace.dependencies]` (their own keys, such as
/// `features`, kept).
fn standalone(manifest: &str, workspace: &toml::Table) -> anyhow::Result<String> {
    let mut doc: toml_edit::DocumentMut = manifest.parse()?;
    let ws = workspace
        .get("workspace")
        .and_then(toml::Value::as_table)
        .ok_or_else(|| anyhow!("no [workspace]"))?;
    let empty = toml::Table::new();
    let section = |name: &str| {
        ws.get(name)
            .and_then(toml::Value::as_table)
            .unwrap_or(&empty)
    };
    let (package, dependencies) = (section("package"), section("dependencies"));
    if let Some(fields) = doc
        .get_mut("package")
        .and_then(toml_edit::Item::as_table_like_mut)
    {
        for (key, item) in fields.iter_mut() {
            if inherits(item) {
                let value = package
                    .get(key.get())
                    .ok_or_else(|| anyhow!("workspace.package.{} is not set", key.get()))?;
                *item = toml_edit::value(edit_value(value)?);
            }
        }
    }
    // The workspace's lints hold this repository's own code to its rules; a copy in someone's crate
    // is not linted, so it has none.
    if doc.get("lints").is_some_and(inherits) {
        doc.remove("lints");
    }
    for deps in dependency_tables(&mut doc) {
        for (name, item) in deps.iter_mut() {
            if inherits(item) {
                let inherited = dependencies
                    .get(name.get())
                    .ok_or_else(|| anyhow!("workspace.dependencies.{} is not set", name.get()))?;
                *item = toml_edit::value(inherited_dependency(name.get(), inherited, item)?);
            }
        }
    }
    Ok(doc.to_string())
}

/// Whether a manifest item is `{ workspace = true }`.
fn inherits(item: &toml_edit::Item) -> bool {
    item.get("workspace")
        .and_then(toml_edit::Item::as_bool)
        .unwrap_or(false)
}

/// The manifest's `[dependencies]` and every `[target.*.dependencies]`.
fn dependency_tables(doc: &mut toml_edit::DocumentMut) -> Vec<&mut dyn toml_edit::TableLike> {
    let mut tables = Vec::new();
    for (key, item) in doc.as_table_mut().iter_mut() {
        match key.get() {
            "dependencies" => tables.extend(item.as_table_like_mut()),
            "target" => {
                for (_, target) in item
                    .as_table_like_mut()
                    .into_iter()
                    .flat_map(|t| t.iter_mut())
                {
                    tables.extend(
                        target
                            .as_table_like_mut()
                            .and_then(|t| t.get_mut("dependencies"))
                            .and_then(toml_edit::Item::as_table_like_mut),
                    );
                }
            }
            _ => {}
        }
    }
    tables
}

/// The workspace's entry for dependency `name` with the member's own keys (`own`) added; the member's
/// `features` add to the workspace's.
fn inherited_dependency(
    name: &str,
    inherited: &toml::Value,
    own: &toml_edit::Item,
) -> anyhow::Result<toml_edit::InlineTable> {
    let mut merged = toml_edit::InlineTable::new();
    match inherited {
        toml::Value::String(version) => {
            merged.insert("version", version.as_str().into());
        }
        toml::Value::Table(table) => {
            for (k, v) in table {
                merged.insert(k, edit_value(v)?);
            }
        }
        other => return Err(anyhow!("workspace.dependencies.{name}: {other}")),
    }
    for (k, v) in own.as_table_like().into_iter().flat_map(|t| t.iter()) {
        let Some(v) = v.as_value() else { continue };
        match k {
            "workspace" => {}
            "features" => {
                let mut all = merged
                    .get("features")
                    .and_then(toml_edit::Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                all.extend(v.as_array().into_iter().flatten().cloned());
                merged.insert("features", all.into());
            }
            _ => {
                merged.insert(k, v.clone());
            }
        }
    }
    Ok(merged)
}

/// A `toml` value as a `toml_edit` one.
fn edit_value(value: &toml::Value) -> anyhow::Result<toml_edit::Value> {
    let text = format!("v = {value}");
    let doc: toml_edit::DocumentMut = text.parse()?;
    doc.get("v")
        .and_then(toml_edit::Item::as_value)
        .cloned()
        .ok_or_else(|| anyhow!("{value} is not a TOML value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_manifests_stand_alone() {
        let files = files().unwrap();
        for (path, text) in &files {
            if !path.ends_with("Cargo.toml") {
                continue;
            }
            assert!(!text.contains("workspace = true"), "{path}:\n{text}");
            let cargo: toml::Table = text.parse().unwrap();
            assert_eq!(
                cargo["package"]["version"].as_str(),
                Some(env!("CARGO_PKG_VERSION")),
                "{path}"
            );
        }
        let sdk = &files
            .iter()
            .find(|(p, _)| p == "vendor/velero-wasm-sdk/Cargo.toml")
            .unwrap()
            .1;
        let cargo: toml::Table = sdk.parse().unwrap();
        let json = &cargo["dependencies"]["serde_json"];
        assert_eq!(json["version"].as_str(), Some("1"));
        assert_eq!(json["features"][0].as_str(), Some("preserve_order"));
        assert_eq!(
            cargo["dependencies"]["serde"]["features"][0].as_str(),
            Some("derive")
        );
        assert!(files
            .iter()
            .any(|(p, _)| p == "vendor/velero-wasm-sdk/wit/actions.wit"));
        assert!(files
            .iter()
            .any(|(p, _)| p == "vendor/velero-wasm-sdk/label-selector/src/lib.rs"));
        assert!(files
            .iter()
            .any(|(p, _)| p == "vendor/velero-wasm-sdk/grant/src/lib.rs"));
    }
}
