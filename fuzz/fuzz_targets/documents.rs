//! Kubernetes objects as the host reads them: files of JSON or YAML (one or many documents, `List`
//! kinds) through `documents` and the fixture cluster they build, and the item, Backup and Restore
//! fields of a gRPC request through `dispatch` and `ItemRef`.
//!
//! Input: the file's text, which is also the request field.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use velero_wasm::action::ItemRef;
use velero_wasm::documents::{read_object, read_objects};
use velero_wasm::plugin::dispatch;
use velero_wasm::Clock;
use velero_wasm::FixtureCluster;

/// One file per process, rewritten for each input (read_object and the fixture cluster read files).
fn file() -> &'static PathBuf {
    static FILE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = FILE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("object.yaml");
        (dir, path)
    });
    path
}

fuzz_target!(|data: &[u8]| {
    let path = file();
    std::fs::write(path, data).expect("the temporary file is writable");
    if let Ok(object) = read_object(path) {
        assert!(object.is_object());
        let text = object.to_string();
        // What the host read, as a request field, is accepted as a document.
        dispatch::document("backup", text.clone().into_bytes())
            .unwrap_or_else(|e| panic!("{text}: {}", e.message()));
        // Its identity reads, or fails with a reason (a `kind` that is not a string).
        let _ = ItemRef::parse(&text);
    }
    if let Ok(objects) = read_objects(std::slice::from_ref(path)) {
        assert!(objects.iter().all(|(_, o)| o.is_object()));
    }
    let _ = FixtureCluster::load(std::slice::from_ref(path), Clock::System);

    // The same bytes as the item, Backup and Restore fields of a request.
    if let Ok(item) = dispatch::item("item", data.to_vec()) {
        assert!(!item.id.kind.is_empty());
        let _ = (item.id.to_string(), item.id.group_resource());
    }
    let _ = dispatch::document("restore", data.to_vec());
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(item) = ItemRef::parse(text) {
            let _ = (item.to_string(), item.group_resource(), item.group());
        }
    }
});
