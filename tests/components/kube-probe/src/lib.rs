//! Exercises the `kube` capability and reports what it saw as its output item, so that the same run
//! against two backends (fixtures, a live API server) can be compared field by field.
//!
//! - `test.velero-wasm.io/kube-probe` (backup, ConfigMaps): in the item's namespace, get (found and
//!   missing), list by labels, by fields, across namespaces (many objects, so several pages), create
//!   (and again: conflict), merge patch, JSON patch, update (stale: conflict; fresh), delete (and again:
//!   not found), create without a name (invalid). The output is the item with a `report` field; the
//!   additional items are the ConfigMaps labelled `app=web`.
//! - `test.velero-wasm.io/kube-secret` (backup, ConfigMaps): reads the Secret named by setting `secret`
//!   in the item's namespace and reports the answer (to see `forbidden` from the server).
//! - `test.velero-wasm.io/kube-read-all` (backup, ConfigMaps): one `read-all` of the ConfigMaps
//!   `big-0` … `big-<N-1>` of the item's namespace (N: setting `reads`, default 16) and reports each
//!   answer's length or error (to see what the host holds for one batch).
//! - `test.velero-wasm.io/kube-get` (backup, ConfigMaps): one `get` of the ConfigMap named by setting
//!   `name` (default `big-0`) in the item's namespace, and reports the answer's length or error (`make
//!   memory` runs 64 of these at once, to see what the host holds for concurrent calls).
//!
//! Server-set metadata (uid, resourceVersion, creationTimestamp) differs between backends by nature:
//! the report says whether it was set, not what it was.

use serde_json::{json, Map, Value};
use velero_wasm_sdk::bindings::velero_wasm::plugin::kube::{
    self, ApiResource, GetRead, ListOptions, PatchType, Read, ReadAnswer,
};
use velero_wasm_sdk::*;

struct Probe;

fn configmaps() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        resource: "configmaps".into(),
    }
}

/// `variant: message` (the message only where backends agree on it).
fn error(e: &kube::Error) -> Value {
    let text = match e {
        kube::Error::NotFound(m) => format!("not-found: {m}"),
        kube::Error::Conflict(m) => format!("conflict: {m}"),
        kube::Error::Forbidden(m) => format!("forbidden: {m}"),
        kube::Error::Denied(m) => format!("denied: {m}"),
        // Validation messages are worded by each server.
        kube::Error::Invalid(_) => "invalid".to_string(),
        kube::Error::Other(m) => format!("other: {m}"),
    };
    Value::String(text)
}

/// An object without the metadata each server sets its own way, plus whether it was set.
fn normalized(json: &str) -> Value {
    let mut object: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let mut server_set = Map::new();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["uid", "resourceVersion", "creationTimestamp"] {
            server_set.insert(
                field.to_string(),
                Value::Bool(metadata.remove(field).is_some()),
            );
        }
        metadata.remove("managedFields");
        metadata.remove("generation");
    }
    json!({"object": object, "serverSet": server_set})
}

fn answer(result: Result<String, kube::Error>) -> Value {
    match result {
        Ok(json) => normalized(&json),
        Err(e) => json!({"error": error(&e)}),
    }
}

fn names(result: Result<Vec<String>, kube::Error>) -> Value {
    match result {
        Ok(items) => Value::Array(
            items
                .iter()
                .map(|i| {
                    let o: Value = serde_json::from_str(i).unwrap_or(Value::Null);
                    json!(format!(
                        "{} {}/{}",
                        o["kind"].as_str().unwrap_or("?"),
                        o["metadata"]["namespace"].as_str().unwrap_or(""),
                        o["metadata"]["name"].as_str().unwrap_or("")
                    ))
                })
                .collect(),
        ),
        Err(e) => json!({"error": error(&e)}),
    }
}

fn options(labels: &str, fields: &str) -> ListOptions {
    ListOptions {
        label_selector: labels.into(),
        field_selector: fields.into(),
    }
}

fn probe(ns: &str) -> (Value, Vec<ResourceId>) {
    let cm = configmaps();
    let mut report = Map::new();
    let mut put = |key: &str, value: Value| {
        report.insert(key.to_string(), value);
    };
    put("get", answer(kube::get(&cm, ns, "a")));
    put("getMissing", answer(kube::get(&cm, ns, "missing")));

    let web = kube::list(&cm, ns, &options("app=web", ""));
    let additional = web
        .as_ref()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| serde_json::from_str::<Value>(i).ok())
                .map(|o| {
                    ResourceId::new(
                        "",
                        "configmaps",
                        ns,
                        o["metadata"]["name"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    put("listLabels", names(web));
    put(
        "listLabelsAndFields",
        names(kube::list(&cm, ns, &options("app", "metadata.name!=a"))),
    );
    put(
        "listSetBased",
        names(kube::list(
            &cm,
            ns,
            &options("tier in (front,back),!legacy", ""),
        )),
    );
    put(
        "listFieldNamespace",
        names(kube::list(
            &cm,
            "",
            &options("app=web", &format!("metadata.namespace={ns}")),
        )),
    );
    put(
        "listBadSelector",
        names(kube::list(&cm, ns, &options("app in (", ""))),
    );
    match kube::list(&cm, "", &options("probe=many", "")) {
        Ok(items) => {
            let all = names(Ok(items));
            let all = all.as_array().cloned().unwrap_or_default();
            put(
                "listMany",
                json!({"count": all.len(), "first": all.first(), "last": all.last(),
                       "sorted": all.windows(2).all(|w| w[0].as_str() <= w[1].as_str())}),
            );
        }
        Err(e) => put("listMany", json!({"error": error(&e)})),
    }

    let created = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "created", "namespace": ns, "labels": {"made-by": "probe"}},
        "data": {"key": "one"}})
    .to_string();
    put("create", answer(kube::create(&cm, ns, &created)));
    put("createAgain", answer(kube::create(&cm, ns, &created)));
    let stale = kube::get(&cm, ns, "created").unwrap_or_default();
    put(
        "mergePatch",
        answer(kube::patch(
            &cm,
            ns,
            "created",
            PatchType::Merge,
            r#"{"metadata":{"labels":{"patched":"merge"}},"data":{"key":null,"merged":"yes"}}"#,
        )),
    );
    put(
        "jsonPatch",
        answer(kube::patch(
            &cm,
            ns,
            "created",
            PatchType::Json,
            r#"[{"op":"add","path":"/data/added","value":"2"},{"op":"replace","path":"/data/merged","value":"json"}]"#,
        )),
    );
    put(
        "jsonPatchFailing",
        answer(kube::patch(
            &cm,
            ns,
            "created",
            PatchType::Json,
            r#"[{"op":"test","path":"/data/merged","value":"nope"}]"#,
        )),
    );
    put(
        "patchMissing",
        answer(kube::patch(&cm, ns, "missing", PatchType::Merge, "{}")),
    );
    let mut stale: Value = serde_json::from_str(&stale).unwrap_or(Value::Null);
    stale["data"] = json!({"stale": "write"});
    put(
        "updateStale",
        answer(kube::update(&cm, ns, &stale.to_string())),
    );
    let mut fresh: Value = serde_json::from_str(&kube::get(&cm, ns, "created").unwrap_or_default())
        .unwrap_or(Value::Null);
    fresh["data"]["updated"] = json!("yes");
    put("update", answer(kube::update(&cm, ns, &fresh.to_string())));
    let mut missing = fresh.clone();
    missing["metadata"] = json!({"name": "missing", "namespace": ns});
    put(
        "updateMissing",
        answer(kube::update(&cm, ns, &missing.to_string())),
    );
    put(
        "delete",
        json!(kube::delete(&cm, ns, "created")
            .map_err(|e| error(&e))
            .err()),
    );
    put("getDeleted", answer(kube::get(&cm, ns, "created")));
    put(
        "deleteAgain",
        json!(kube::delete(&cm, ns, "created")
            .map_err(|e| error(&e))
            .err()),
    );
    let nameless =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns}}).to_string();
    put("createNameless", answer(kube::create(&cm, ns, &nameless)));
    let generated = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-", "namespace": ns}}).to_string();
    put(
        "createGenerated",
        match kube::create(&cm, ns, &generated) {
            Ok(json) => {
                let o: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                let name = o["metadata"]["name"].as_str().unwrap_or("");
                json!({"prefixed": name.starts_with("gen-") && name.len() > 4})
            }
            Err(e) => json!({"error": error(&e)}),
        },
    );
    (Value::Object(report), additional)
}

impl Plugin for Probe {
    fn describe() -> Vec<ActionInfo> {
        vec![
            ActionInfo::new("test.velero-wasm.io/kube-probe", Kind::Backup)
                .applies_to(Selector::resources(&["configmaps"]))
                .description("exercises every kube call and reports what it saw")
                .needs_kube(
                    "configmaps",
                    &[
                        Verb::Get,
                        Verb::List,
                        Verb::Create,
                        Verb::Update,
                        Verb::Patch,
                        Verb::Delete,
                    ],
                ),
            ActionInfo::new("test.velero-wasm.io/kube-read-all", Kind::Backup)
                .applies_to(Selector::resources(&["configmaps"]))
                .description("reads N ConfigMaps in one read-all and reports each answer")
                .needs_kube("configmaps", &[Verb::Get]),
            ActionInfo::new("test.velero-wasm.io/kube-get", Kind::Backup)
                .applies_to(Selector::resources(&["configmaps"]))
                .description("gets the ConfigMap named by setting `name` and reports its length")
                .needs_kube("configmaps", &[Verb::Get]),
            ActionInfo::new("test.velero-wasm.io/kube-secret", Kind::Backup)
                .applies_to(Selector::resources(&["configmaps"]))
                .description("reads the Secret named by setting `secret` and reports the answer")
                .needs_kube("secrets", &[Verb::Get]),
        ]
    }

    fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        let item = Object::parse(&request.item)?;
        let ns = item.namespace().to_string();
        let (report, additional) = match action {
            "test.velero-wasm.io/kube-probe" => probe(&ns),
            "test.velero-wasm.io/kube-read-all" => {
                let reads: usize = config::get("reads")
                    .map(|n| n.parse().map_err(|e| format!("setting `reads`: {e}")))
                    .transpose()?
                    .unwrap_or(16);
                let batch: Vec<Read> = (0..reads)
                    .map(|i| {
                        Read::Get(GetRead {
                            api: configmaps(),
                            namespace: ns.clone(),
                            name: format!("big-{i}"),
                        })
                    })
                    .collect();
                let answers = kube::read_all(&batch)
                    .iter()
                    .map(|answer| match answer {
                        Ok(ReadAnswer::Object(text)) => json!({"length": text.len()}),
                        Ok(ReadAnswer::Objects(texts)) => json!({"objects": texts.len()}),
                        Err(e) => json!({"error": error(e)}),
                    })
                    .collect();
                (Value::Array(answers), Vec::new())
            }
            "test.velero-wasm.io/kube-get" => {
                let name = config::get("name").unwrap_or_else(|| "big-0".to_string());
                let answer = match kube::get(&configmaps(), &ns, &name) {
                    Ok(text) => json!({"length": text.len()}),
                    Err(e) => json!({"error": error(&e)}),
                };
                (answer, Vec::new())
            }
            "test.velero-wasm.io/kube-secret" => {
                let name = config::get("secret").ok_or("setting `secret` is not set")?;
                let secrets = ApiResource {
                    group: String::new(),
                    version: "v1".into(),
                    resource: "secrets".into(),
                };
                (answer(kube::get(&secrets, &ns, &name)), Vec::new())
            }
            other => return Err(format!("no such action: {other}")),
        };
        let mut out = item.into_value();
        out["report"] = report;
        let out = Object::from_value(out)?;
        Ok(BackupResponse::with_item(&out).additional(additional))
    }
}

export_plugin!(Probe);
