//! Probes the `http` and `signing` imports (world `plugin-with-signing`). Each action is a backup action
//! on ConfigMaps and reads its input from the item's `data`; it returns the item with
//! `data.result` (or `data.error`) set, so a test sees exactly what the import answered.
//!
//! * `test.velero-wasm.io/http-get`: GET `data.url`; `result` is `<status> <body>`.
//! * `test.velero-wasm.io/sign-s3`: presign `data.url` (`s3://bucket/key`) in `data.region` with the
//!   shared-credentials text in `data.credentials`, as of `data.now` (Unix seconds).
//! * `test.velero-wasm.io/environment`: `result` is a JSON object with Velero's namespace, the
//!   variable `data.variable` and the file named by the variable `data.file`, each `{"ok": …}` or
//!   `{"error": …}` as the `environment` import answered.
//! * `test.velero-wasm.io/kube-get`: gets the core `v1` object of resource `data.resource` named
//!   `data.name` in namespace `data.namespace`; `result` is its name, `error` the kube error.

#![cfg(target_arch = "wasm32")]
// SAFETY: the only unsafe code is the glue wit-bindgen generates for the world's imports and exports
// (`export_name`, the canonical ABI's raw pointers); the generated items' docs are the WIT's.
#![allow(unsafe_code, missing_docs)]

wit_bindgen::generate!({
    path: "../../../wit",
    world: "plugin-with-signing",
});

use exports::velero_wasm::plugin::actions::{
    ActionInfo, BackupRequest, BackupResponse, Guest, Kind, OperationProgress, RestoreRequest,
    RestoreResponse, Selector,
};
use serde_json::Value;
use velero_wasm::plugin::environment;
use velero_wasm::plugin::http;
use velero_wasm::plugin::kube;
use velero_wasm::plugin::signing;
use velero_wasm::plugin::types::{ResourceId, Timestamp};

struct Probe;

fn info(name: &str) -> ActionInfo {
    ActionInfo {
        name: format!("test.velero-wasm.io/{name}"),
        kind: Kind::Backup,
        applies_to: Selector {
            included_namespaces: vec![],
            excluded_namespaces: vec![],
            included_resources: vec!["configmaps".into()],
            excluded_resources: vec![],
            label_selector: String::new(),
        },
        description: String::new(),
        needs: vec![],
    }
}

fn field<'a>(item: &'a Value, name: &str) -> &'a str {
    item["data"][name].as_str().unwrap_or("")
}

fn http_get(item: &Value) -> Result<String, String> {
    let request = http::Request {
        method: "GET".into(),
        url: field(item, "url").into(),
        headers: vec![("accept".into(), "text/plain".into())],
        body: vec![],
    };
    match http::send(&request) {
        Ok(response) => Ok(format!(
            "{} {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        )),
        Err(e) => Err(format!("{e:?}")),
    }
}

fn sign_s3(item: &Value) -> Result<String, String> {
    let (bucket, key) =
        match signing::parse_snapshot_url(field(item, "url")).map_err(|e| format!("{e:?}"))? {
            signing::SnapshotUrl::S3((bucket, key)) => (bucket, key),
            other => return Err(format!("not an s3 URL: {other:?}")),
        };
    let keys = match signing::parse_aws_credentials(field(item, "credentials"))
        .map_err(|e| format!("{e:?}"))?
    {
        signing::AwsCredentialSource::Keys(keys) => keys,
        other => return Err(format!("not static keys: {other:?}")),
    };
    let request = signing::S3Request {
        bucket,
        key,
        region: field(item, "region").into(),
        endpoint: None,
        force_path_style: false,
        expires_seconds: 3600,
        now: field(item, "now").parse().ok().map(|seconds| Timestamp {
            seconds,
            nanoseconds: 0,
        }),
    };
    signing::presign_s3(&request, &signing::AwsCredentials::Keys(keys))
        .map_err(|e| format!("{e:?}"))
}

fn answer<T: Into<Value>>(result: Result<T, String>) -> Value {
    match result {
        Ok(v) => serde_json::json!({"ok": v.into()}),
        Err(e) => serde_json::json!({"error": e}),
    }
}

fn probe_environment(item: &Value) -> Result<String, String> {
    let variable = environment::variable(field(item, "variable"));
    let file = environment::read_env_file(field(item, "file"))
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    Ok(serde_json::json!({
        "veleroNamespace": environment::velero_namespace(),
        "variable": answer(variable.map(|v| v.map(Value::String).unwrap_or(Value::Null))),
        "file": answer(file),
    })
    .to_string())
}

fn kube_get(item: &Value) -> Result<String, String> {
    let api = kube::ApiResource {
        group: String::new(),
        version: "v1".into(),
        resource: field(item, "resource").into(),
    };
    let object = kube::get(&api, field(item, "namespace"), field(item, "name"))
        .map_err(|e| format!("{e:?}"))?;
    let object: Value = serde_json::from_str(&object).map_err(|e| e.to_string())?;
    Ok(object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string())
}

impl Guest for Probe {
    fn describe() -> Vec<ActionInfo> {
        vec![
            info("http-get"),
            info("sign-s3"),
            info("environment"),
            info("kube-get"),
        ]
    }

    fn backup(action: String, request: BackupRequest) -> Result<BackupResponse, String> {
        let mut item: Value = serde_json::from_str(&request.item).map_err(|e| e.to_string())?;
        let outcome = match action.as_str() {
            "test.velero-wasm.io/http-get" => http_get(&item),
            "test.velero-wasm.io/sign-s3" => sign_s3(&item),
            "test.velero-wasm.io/environment" => probe_environment(&item),
            "test.velero-wasm.io/kube-get" => kube_get(&item),
            other => return Err(format!("unknown action {other}")),
        };
        let (key, value) = match outcome {
            Ok(result) => ("result", result),
            Err(error) => ("error", error),
        };
        item["data"][key] = Value::String(value);
        Ok(BackupResponse {
            item: Some(item.to_string()),
            additional_items: vec![],
            operation_id: None,
            post_operation_items: vec![],
        })
    }

    fn restore(action: String, _: RestoreRequest) -> Result<RestoreResponse, String> {
        Err(format!("{action} has no restore"))
    }
    fn related_items(action: String, _: String, _: String) -> Result<Vec<ResourceId>, String> {
        Err(format!("{action} has no related-items"))
    }
    fn delete(action: String, _: String, _: String) -> Result<(), String> {
        Err(format!("{action} has no delete"))
    }
    fn progress(action: String, _: String, _: String) -> Result<OperationProgress, String> {
        Err(format!("{action} has no progress"))
    }
    fn cancel(_: String, _: String, _: String) -> Result<(), String> {
        Ok(())
    }
    fn items_ready(_: String, _: Vec<ResourceId>, _: String) -> Result<bool, String> {
        Ok(true)
    }
}

export!(Probe);
