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
pub const MAX_FILE: u64 = 64 << 20;

/// The deepest nesting of YAML collections read (serde_norway refuses deeper ones as well, but only
/// once its parser has read the whole document, which takes time that grows with the square of the
/// depth: seconds for a few kilobytes of `[`).
pub const MAX_YAML_DEPTH: usize = 128;

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
    if let Some(line) = nested_deeper_than(&text, MAX_YAML_DEPTH) {
        return Err(error(
            path,
            format!("invalid YAML: nested deeper than {MAX_YAML_DEPTH} levels at line {line}"),
        ));
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

/// The line (1-based) where collections in `text` first nest deeper than `limit`, if they do. Reads
/// YAML events only up to there; syntax errors are left to the parse that follows.
#[allow(unsafe_code)] // libyaml's event parser: see the SAFETY comment at each call.
pub(crate) fn nested_deeper_than(text: &str, limit: usize) -> Option<u64> {
    use std::mem::MaybeUninit;
    use unsafe_libyaml_norway as unsafe_yaml;

    /// Frees the parser on every way out.
    struct Parser(Box<MaybeUninit<unsafe_yaml::yaml_parser_t>>);
    impl Drop for Parser {
        fn drop(&mut self) {
            // SAFETY: initialized in `nested_deeper_than` before this value exists.
            unsafe { unsafe_yaml::yaml_parser_delete(self.0.as_mut_ptr()) }
        }
    }

    let mut boxed = Box::new(MaybeUninit::<unsafe_yaml::yaml_parser_t>::uninit());
    // SAFETY: `yaml_parser_initialize` fills the (boxed, so never moved) parser; on failure nothing
    // was allocated and it is not used.
    if unsafe { unsafe_yaml::yaml_parser_initialize(boxed.as_mut_ptr()) }.fail {
        return None;
    }
    let mut parser = Parser(boxed);
    let sys = parser.0.as_mut_ptr();
    // SAFETY: the parser reads `text`, which outlives it (it is dropped at the end of this function).
    unsafe {
        unsafe_yaml::yaml_parser_set_encoding(sys, unsafe_yaml::YAML_UTF8_ENCODING);
        unsafe_yaml::yaml_parser_set_input_string(sys, text.as_ptr(), text.len() as u64);
    }
    let mut depth = 0usize;
    loop {
        let mut event = MaybeUninit::<unsafe_yaml::yaml_event_t>::uninit();
        // SAFETY: an initialized parser and room for one event, which is read only when the parse
        // succeeded and deleted right after.
        let (kind, line) = unsafe {
            if unsafe_yaml::yaml_parser_parse(sys, event.as_mut_ptr()).fail {
                return None;
            }
            let event = event.as_mut_ptr();
            let seen = ((*event).type_, (*event).start_mark.line + 1);
            unsafe_yaml::yaml_event_delete(event);
            seen
        };
        match kind {
            unsafe_yaml::YAML_SEQUENCE_START_EVENT | unsafe_yaml::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > limit {
                    return Some(line);
                }
            }
            unsafe_yaml::YAML_SEQUENCE_END_EVENT | unsafe_yaml::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1)
            }
            unsafe_yaml::YAML_STREAM_END_EVENT => return None,
            _ => {}
        }
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
        let nested = |depth: usize| format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(nested_deeper_than(&nested(127), MAX_YAML_DEPTH), None);
        assert_eq!(nested_deeper_than(&nested(128), MAX_YAML_DEPTH), Some(1));
        let blocks = format!("a:\n{}", "- ".repeat(200));
        assert_eq!(nested_deeper_than(&blocks, MAX_YAML_DEPTH), Some(2));
        // A syntax error is the parse's to report.
        assert_eq!(nested_deeper_than("a: [", MAX_YAML_DEPTH), None);
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
        assert!(read_object(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string()
            .contains("cannot be read"));
    }
}
