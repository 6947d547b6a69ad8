//! Kubernetes objects in files: JSON or YAML, one or many per file (YAML `---` documents, JSON arrays),
//! `List` kinds unwrapped. Errors name the file and, for YAML, the line.
//!
//! Only regular files are read, each of at most [`MAX_FILE`] bytes (a FIFO or `/dev/zero` is refused,
//! not waited on). A directory is walked once however many symbolic links lead to it, so links that
//! point back up the tree (a loop) add nothing.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The largest file read: 64 MiB.
pub(crate) const MAX_FILE: u64 = 64 << 20;

/// The deepest nesting of YAML collections read (serde_norway refuses deeper ones as well, but only
/// once its parser has read the whole document, which takes time that grows with the square of the
/// depth: seconds for a few kilobytes of `[`).
pub(crate) const MAX_YAML_DEPTH: usize = 128;

/// A file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct DocumentError {
    /// The file.
    pub(crate) path: PathBuf,
    /// What is wrong.
    pub(crate) message: String,
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
    let mut walked = HashSet::new();
    for path in paths {
        collect_files(path, &mut files, &mut walked)?;
    }
    let mut objects = Vec::new();
    for file in files {
        for value in read_values(&file)? {
            unwrap_lists(&file, value, &mut objects)?;
        }
    }
    Ok(objects)
}

/// Adds the files of `path` to `files`: the file itself, or the object files in the directory and
/// those below it, following symbolic links (a mounted ConfigMap is links), each directory once
/// (`walked` holds the device and inode of those already walked).
fn collect_files(
    path: &Path,
    files: &mut Vec<PathBuf>,
    walked: &mut HashSet<(u64, u64)>,
) -> Result<(), DocumentError> {
    let meta = std::fs::metadata(path).map_err(|e| error(path, format!("cannot be read: {e}")))?;
    if !meta.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    if !walked.insert((meta.dev(), meta.ino())) {
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
            collect_files(&entry, files, walked)?;
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
    let bytes =
        crate::regular_file::read(path, MAX_FILE).map_err(|e| error(path, e.to_string()))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| error(path, format!("cannot be read: it is not UTF-8 text ({e})")))?;
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
    // Syntax and nesting first: libyaml's messages name the place without quoting the file.
    crate::yaml_events::check(&text, MAX_YAML_DEPTH)
        .map_err(|e| error(path, format!("invalid YAML{e}")))?;
    use serde::Deserialize;
    let mut values = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value = Value::deserialize(doc)
            .map_err(|e| error(path, format!("invalid YAML{}", value_error(&e))))?;
        values.push(value);
    }
    Ok(values)
}

/// The message of a serde_norway error in a file whose syntax is valid (checked before), shown after
/// "invalid YAML": a value that cannot become JSON, and where. Its position only: serde's own message quotes the value (`invalid value:
/// string "…"`), and the file may be anything readable, such as a file of secrets named by mistake.
fn value_error(e: &serde_norway::Error) -> String {
    let what = "a value JSON cannot hold (a tag, an unknown alias, a key that is not a string, a \
                number out of range or too many aliases)";
    match e.location() {
        Some(at) => format!(" at line {} column {}: {what}", at.line(), at.column()),
        None => format!(": {what}"),
    }
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
    fn yaml_nesting_is_limited_before_it_is_parsed() {
        use crate::yaml_events::{check, Refused};
        let nested = |depth: usize| format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        assert!(check(&nested(127), MAX_YAML_DEPTH).is_ok());
        assert!(matches!(
            check(&nested(128), MAX_YAML_DEPTH),
            Err(Refused::TooDeep { line: 1, .. })
        ));
        let blocks = format!("a:\n{}", "- ".repeat(200));
        assert!(matches!(
            check(&blocks, MAX_YAML_DEPTH),
            Err(Refused::TooDeep { line: 2, .. })
        ));
        assert!(matches!(
            check("a: [", MAX_YAML_DEPTH),
            Err(Refused::Syntax(_))
        ));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("deep.yaml");
        std::fs::write(&p, format!("kind: X\ndata: {}", "[".repeat(100_000))).unwrap();
        let e = read_object(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("deep.yaml: invalid YAML: nested deeper than 128 levels at line 2"),
            "{e}"
        );
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
        for (name, content) in [
            ("tag.yaml", "kind: !!int topsecret-first-line\n"),
            ("syntax.yaml", "topsecret: first line\n  broken: [\n"),
            ("key.yaml", "? [topsecret]\n: 1\n"),
        ] {
            let p = dir.path().join(name);
            std::fs::write(&p, content).unwrap();
            let e = read_object(&p).unwrap_err().to_string();
            assert!(
                e.contains(name) && e.contains("line") && !e.contains("topsecret"),
                "the path and the place, never the file's text: {e}"
            );
        }
        assert!(read_object(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string()
            .contains("cannot be read"));
    }
}
