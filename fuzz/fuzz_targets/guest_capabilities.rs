//! What a guest passes to the host's capabilities, through the real call path (a component's import,
//! the grant check, the service behind it): the `probe` test component reads its arguments from the
//! item, so fuzzing the item fuzzes the URL of an `http` request (parsing, the grant's host and port
//! matching, the answer's limits), the S3 presigning request of `signing` (credentials text, URL,
//! region, time), the names of `environment` variables and files, and the resource, namespace and
//! name of a `kube` get (authorization against the grant, the fixture cluster).
//!
//! Input: byte 0 picks the action; the rest, split at NUL bytes, is the item's `data`: url, region,
//! credentials, now, variable, file, resource, name, namespace (also the item's namespace).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use velero_wasm::action::{BackupRequest, ItemRef};
use velero_wasm_fuzz::plugin_host;

const ACTIONS: &[&str] = &["http-get", "sign-s3", "environment", "kube-get"];
const FIELDS: &[&str] = &[
    "url",
    "region",
    "credentials",
    "now",
    "variable",
    "file",
    "resource",
    "name",
    "namespace",
];

// The host (stock modules compiled, test components loaded) is built before fuzzing starts, so that
// its compilation never counts against the first input's timeout.
fuzz_target!(init: { plugin_host(); }, |data: &[u8]| {
    let [selector, rest @ ..] = data else {
        return;
    };
    let action = format!(
        "test.velero-wasm.io/{}",
        ACTIONS[usize::from(*selector) % ACTIONS.len()]
    );
    let text = String::from_utf8_lossy(rest);
    let fields: Map<String, Value> = FIELDS
        .iter()
        .zip(text.split('\0'))
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    let namespace = fields.get("namespace").cloned().unwrap_or_default();
    let item = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fuzz", "namespace": namespace},
        "data": fields,
    });
    let request = BackupRequest {
        item: item.to_string(),
        backup: json!({"kind": "Backup", "metadata": {"name": "b", "namespace": "velero"}})
            .to_string(),
    };
    let host = plugin_host();
    // The guest reports what the import answered (or fails); either way the host answers.
    let Ok(entry) = host.runtime.resolve(&action) else {
        return;
    };
    let Ok(id) = ItemRef::parse(&request.item) else {
        return;
    };
    let _ = host.tokio.block_on(host.runtime.backup(&entry, id, request));
});
