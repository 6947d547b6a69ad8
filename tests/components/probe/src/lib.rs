//! Probes the `http` and `signing` imports (world `plugin-with-signing`). Each action is a backup action
//! on ConfigMaps and reads its input from the item's `data`; it returns the item with
//! `data.result` (or `data.error`) set, so a test sees exactly what the import answered.
//!
//! * `test.velero-wasm.io/http-get`: GET `data.url`; `result` is `<status> <body>`.
//! * `test.velero-wasm.io/sign-s3`: presign `data.url` (`s3://bucket/key`) in `data.region` with the
//!   shared-credentials text in `data.credentials`, as of `data.now` (Unix seconds).

#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({
    path: "../../../wit",
    world: "plugin-with-signing",
});

use exports::velero_wasm::plugin::actions::{
    ActionInfo, BackupRequest, BackupResponse, Guest, Kind, OperationProgress, RestoreRequest,
    RestoreResponse, Selector,
};
use serde_json::Value;
use velero_wasm::plugin::http;
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

impl Guest for Probe {
    fn describe() -> Vec<ActionInfo> {
        vec![info("http-get"), info("sign-s3")]
    }

    fn backup(action: String, request: BackupRequest) -> Result<BackupResponse, String> {
        let mut item: Value = serde_json::from_str(&request.item).map_err(|e| e.to_string())?;
        let outcome = match action.as_str() {
            "test.velero-wasm.io/http-get" => http_get(&item),
            "test.velero-wasm.io/sign-s3" => sign_s3(&item),
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
