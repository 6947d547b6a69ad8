//! Kubernetes objects in files: JSON or YAML, one or many per file (YAML `---` documents, JSON arrays),
//! `List` kinds unwrapped. Errors name the file and, for YAML, the line.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct DocumentError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

fn error(path: &Path, message: impl Into<String>) -> DocumentError {
    DocumentError {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Reads exactly one JSON object from a file (an item, a Backup, a Restore).
pub fn read_object(path: &Path) -> Result<Value, DocumentError> {
    let mut values = read_values(path)?;
    match values.len() {
        1 => match values.remove(0) {
            v @ Value::Object(_) => Ok(v),
            _ => Err(error(path, "expected a JSON or YAML object")),
        },
        0 => Err(error(path, "the file holds no object")),
        n => Err(error(path, format!("expected one object, found {n}"))),
    }
}

/// Reads every object in the files and directories given (directories recursively, `.json`, `.yaml`
/// and `.yml` files in name order), with the file each came from.
pub fn read_objects(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Value)>, DocumentError> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &mut files)?;
    }
    let mut objects = Vec::new();
    for file in files {
        for value in read_values(&file)? {
            unwrap_lists(&file, value, &mut objects)?;
        }
    }
    Ok(objects)
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), DocumentError> {
    let meta = std::fs::metadata(path).map_err(|e| error(path, format!("cannot be read: {e}")))?;
    if !meta.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| error(path, format!("cannot be read: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, files)?;
        } else if entry
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "json" | "yaml" | "yml"))
        {
            files.push(entry);
        }
    }
    Ok(())
}

fn unwrap_lists(
    file: &Path,
    value: Value,
    out: &mut Vec<(PathBuf, Value)>,
) -> Result<(), DocumentError> {
    match value {
        Value::Null => Ok(()),
        Value::Array(items) => items
            .into_iter()
            .try_for_each(|v| unwrap_lists(file, v, out)),
        Value::Object(ref map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List")) =>
        {
            let Some(Value::Array(items)) = map.get("items") else {
                return Err(error(file, "a List without an items array"));
            };
            items
                .iter()
                .cloned()
                .try_for_each(|v| unwrap_lists(file, v, out))
        }
        Value::Object(_) => {
            out.push((file.to_path_buf(), value));
            Ok(())
        }
        _ => Err(error(file, "expected objects, found a scalar")),
    }
}

/// Parses a file: JSON when it looks like JSON, else YAML (possibly several documents).
fn read_values(path: &Path) -> Result<Vec<Value>, DocumentError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| error(path, format!("cannot be read: {e}")))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            error(
                path,
                format!(
                    "invalid JSON at line {} column {}: {e}",
                    e.line(),
                    e.column()
                ),
            )
        })?;
        return Ok(vec![value]);
    }
    use serde::Deserialize;
    let mut values = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value =
            Value::deserialize(doc).map_err(|e| error(path, format!("invalid YAML: {e}")))?;
        values.push(value);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_yaml_lists_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("a.json"),
            r#"{"kind":"Pod","metadata":{"name":"a"}}"#,
        )
        .unwrap();
        std::fs::write(
            d.join("b.yaml"),
            "kind: Pod\nmetadata: {name: b}\n---\nkind: List\nitems:\n- {kind: Pod, metadata: {name: c}}\n",
        )
        .unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/d.yml"), "kind: Pod\nmetadata: {name: d}\n").unwrap();
        std::fs::write(d.join("readme.md"), "ignored").unwrap();
        let names: Vec<String> = read_objects(&[d.to_path_buf()])
            .unwrap()
            .iter()
            .map(|(_, v)| v["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
    }

    #[test]
    fn errors_name_the_file_and_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.json");
        std::fs::write(&p, "{\n  \"kind\": \"Pod\",\n}").unwrap();
        let e = read_object(&p).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("line 3"), "{e}");
        let p = dir.path().join("bad.yaml");
        std::fs::write(&p, "kind: [").unwrap();
        assert!(read_object(&p)
            .unwrap_err()
            .to_string()
            .contains("invalid YAML"));
        assert!(read_object(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string()
            .contains("cannot be read"));
    }
}
