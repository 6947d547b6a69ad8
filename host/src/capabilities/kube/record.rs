//! Record and replay of `kube` calls: [`RecordingKube`] writes each call and its answer to a
//! [`Recorder`]; [`ReplayKube`] answers from a [`Replay`]. The file and the strict replay are
//! [`recording`](crate::capabilities::recording)'s; this module is how kube calls look in it:
//!
//! ```text
//! {"capability":"kube","call":{"op":"get","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","name":"a"},"answer":{"ok":{…}}}
//! {"capability":"kube","call":{"op":"list","api":{…},"namespace":"ns","labelSelector":"app=web","fieldSelector":""},"answer":{"ok":[…]}}
//! {"capability":"kube","call":{"op":"patch","api":{…},"namespace":"ns","name":"a","patchType":"merge","patch":{…}},"answer":{"error":{"reason":"not-found","message":"…"}}}
//! ```
//!
//! `call.op` is `get`, `list`, `create`, `update`, `patch` or `delete`; `create` and `update` carry
//! `object`. `answer` is `{"ok": …}` (the object, the list of objects, or null for delete) or
//! `{"error": {"reason", "message"}}` with the WIT error's name as `reason`. A call that is not in the
//! recording fails with `other` naming it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{ApiResource, KubeBackend, KubeError, ListOptions, Patch};
use crate::capabilities::recording::{Recorder, RecordingError, Replay, Replayer};

/// The `capability` of kube lines.
const KUBE: &str = "kube";

/// A backend that passes every call to another and records it with its answer.
pub struct RecordingKube {
    inner: Arc<dyn KubeBackend>,
    recorder: Arc<Recorder>,
}

impl RecordingKube {
    /// Records the calls `inner` answers.
    pub fn new(inner: Arc<dyn KubeBackend>, recorder: Arc<Recorder>) -> RecordingKube {
        RecordingKube { inner, recorder }
    }

    fn record<T: serde::Serialize>(&self, call: Value, answer: &Result<T, KubeError>) {
        self.recorder.write(KUBE, call, answer_to_json(answer));
    }
}

/// A kube call as recorded.
fn call(op: &str, api: &ApiResource, namespace: &str, rest: Value) -> Value {
    let mut call = json!({
        "op": op,
        "api": {"group": api.group, "version": api.version, "resource": api.resource},
        "namespace": namespace,
    });
    if let (Some(map), Value::Object(rest)) = (call.as_object_mut(), rest) {
        map.extend(rest);
    }
    call
}

fn list_call(api: &ApiResource, namespace: &str, options: &ListOptions) -> Value {
    call(
        "list",
        api,
        namespace,
        json!({"labelSelector": options.label_selector_text, "fieldSelector": options.field_selector_text}),
    )
}

fn patch_call(api: &ApiResource, namespace: &str, name: &str, patch: &Patch) -> Value {
    call(
        "patch",
        api,
        namespace,
        json!({"name": name, "patchType": patch.kind(), "patch": patch.to_value()}),
    )
}

fn reason(error: &KubeError) -> &'static str {
    match error {
        KubeError::NotFound(_) => "not-found",
        KubeError::Conflict(_) => "conflict",
        KubeError::Forbidden(_) => "forbidden",
        KubeError::Denied(_) => "denied",
        KubeError::Invalid(_) => "invalid",
        KubeError::TooLarge(_) => "too-large",
        KubeError::Other(_) => "other",
    }
}

fn answer_to_json<T: serde::Serialize>(answer: &Result<T, KubeError>) -> Value {
    match answer {
        Ok(value) => json!({"ok": value}),
        Err(e) => json!({"error": {"reason": reason(e), "message": e.to_string()}}),
    }
}

fn answer_from_json(answer: &Value) -> Result<Result<Value, KubeError>, String> {
    if let Some(ok) = answer.get("ok") {
        return Ok(Ok(ok.clone()));
    }
    let error = answer
        .get("error")
        .ok_or("the answer has neither `ok` nor `error`")?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let e = match error.get("reason").and_then(Value::as_str).unwrap_or("") {
        "not-found" => KubeError::NotFound(message),
        "conflict" => KubeError::Conflict(message),
        "forbidden" => KubeError::Forbidden(message),
        "denied" => KubeError::Denied(message),
        "invalid" => KubeError::Invalid(message),
        "other" => KubeError::Other(message),
        // Replayed, a list past the module's memory stops the call as it did when recorded.
        "too-large" => KubeError::TooLarge(message),
        other => return Err(format!("unknown error reason {other:?}")),
    };
    Ok(Err(e))
}

#[async_trait]
impl KubeBackend for RecordingKube {
    async fn get(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Value, KubeError> {
        let answer = self.inner.get(api, namespace, name).await;
        self.record(call("get", api, namespace, json!({"name": name})), &answer);
        answer
    }

    async fn list(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Value>, KubeError> {
        let answer = self.inner.list(api, namespace, options).await;
        self.record(list_call(api, namespace, options), &answer);
        answer
    }

    async fn create(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        let call = call("create", api, namespace, json!({"object": object}));
        let answer = self.inner.create(api, namespace, object).await;
        self.record(call, &answer);
        answer
    }

    async fn update(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        let call = call("update", api, namespace, json!({"object": object}));
        let answer = self.inner.update(api, namespace, object).await;
        self.record(call, &answer);
        answer
    }

    async fn patch(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        let answer = self.inner.patch(api, namespace, name, patch).await;
        self.record(patch_call(api, namespace, name, patch), &answer);
        answer
    }

    async fn delete(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        let answer = self.inner.delete(api, namespace, name).await;
        self.record(
            call("delete", api, namespace, json!({"name": name})),
            &answer,
        );
        answer
    }
}

/// A backend that answers from a recording, strictly.
pub struct ReplayKube {
    replayer: Arc<Replayer>,
}

impl ReplayKube {
    /// Answers the kube calls of `replay`; refuses a recording with a malformed kube answer.
    pub fn new(replay: &Replay) -> Result<ReplayKube, RecordingError> {
        let replayer = replay.replayer(KUBE, |answer| answer_from_json(answer).map(|_| ()))?;
        Ok(ReplayKube { replayer })
    }

    fn answer(&self, call: Value) -> Result<Value, KubeError> {
        let answer = self
            .replayer
            .answer(&call, describe)
            .map_err(KubeError::Other)?;
        answer_from_json(&answer).map_err(KubeError::Other)?
    }
}

/// `get configmaps.example.io v1 in ns named a`: a call in words, for replay errors.
fn describe(call: &Value) -> String {
    let s = |p: &str| call.pointer(p).and_then(Value::as_str).unwrap_or("");
    let resource = if s("/api/group").is_empty() {
        s("/api/resource").to_string()
    } else {
        format!("{}.{}", s("/api/resource"), s("/api/group"))
    };
    let scope = if s("/namespace").is_empty() {
        "cluster-wide".to_string()
    } else {
        format!("in namespace {}", s("/namespace"))
    };
    let target = match s("/op") {
        "list" => format!(
            " with labels {:?} and fields {:?}",
            s("/labelSelector"),
            s("/fieldSelector")
        ),
        "create" | "update" => format!(
            " named {:?} (the object differs or was not recorded)",
            s("/object/metadata/name")
        ),
        "patch" => format!(
            " named {:?} with this {} patch: {}",
            s("/name"),
            s("/patchType"),
            call["patch"]
        ),
        _ => format!(" named {:?}", s("/name")),
    };
    format!(
        "{} {resource} {} {scope}{target}",
        s("/op"),
        s("/api/version")
    )
}

fn from_answer<T: serde::de::DeserializeOwned>(
    answer: Result<Value, KubeError>,
) -> Result<T, KubeError> {
    serde_json::from_value(answer?).map_err(|e| {
        KubeError::Other(format!(
            "replay: the recorded answer has the wrong shape: {e}"
        ))
    })
}

#[async_trait]
impl KubeBackend for ReplayKube {
    async fn get(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Value, KubeError> {
        self.answer(call("get", api, namespace, json!({"name": name})))
    }

    async fn list(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Value>, KubeError> {
        from_answer(self.answer(list_call(api, namespace, options)))
    }

    async fn create(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        self.answer(call("create", api, namespace, json!({"object": object})))
    }

    async fn update(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        self.answer(call("update", api, namespace, json!({"object": object})))
    }

    async fn patch(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.answer(patch_call(api, namespace, name, patch))
    }

    async fn delete(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        self.answer(call("delete", api, namespace, json!({"name": name})))
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::kube::fixture::FixtureCluster;
    use crate::capabilities::recording::{Header, Recording};
    use crate::capabilities::Clock;
    use std::path::Path;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn configmaps() -> ApiResource {
        ApiResource::new("", "v1", "configmaps")
    }

    async fn record_some_calls(path: &Path, start: SystemTime) -> Vec<Result<Value, KubeError>> {
        let fixture = FixtureCluster::empty(Clock::fixed(start));
        let header = Header {
            clock_start: start,
            velero_namespace: String::new(),
        };
        let recorder = Recorder::create(path, &header).unwrap();
        let kube = RecordingKube::new(Arc::new(fixture), recorder.clone());
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let answers = vec![
            kube.get(&configmaps(), "ns", "a").await,
            kube.create(&configmaps(), "ns", object).await,
            kube.get(&configmaps(), "ns", "a").await,
            kube.list(
                &configmaps(),
                "ns",
                &ListOptions::parse("", "metadata.name=a").unwrap(),
            )
            .await
            .map(Value::from),
        ];
        recorder.finish().unwrap();
        answers
    }

    fn replay_of(path: &Path) -> Replay {
        Replay::new(Recording::read(path).unwrap())
    }

    #[tokio::test]
    async fn a_replay_gives_the_recorded_answers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let start = UNIX_EPOCH + Duration::new(1_777_716_000, 123_456_789);
        let recorded = record_some_calls(&path, start).await;
        assert!(matches!(recorded[0], Err(KubeError::NotFound(_))));

        let replay = replay_of(&path);
        assert_eq!(replay.header().clock_start, start);
        let kube = ReplayKube::new(&replay).unwrap();
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        // The same call twice gets the two recorded answers, in order: first not found, then the object.
        assert_eq!(kube.get(&configmaps(), "ns", "a").await, recorded[0]);
        assert_eq!(kube.create(&configmaps(), "ns", object).await, recorded[1]);
        assert_eq!(kube.get(&configmaps(), "ns", "a").await, recorded[2]);
        let listed = kube
            .list(
                &configmaps(),
                "ns",
                &ListOptions::parse("", "metadata.name=a").unwrap(),
            )
            .await;
        assert_eq!(listed.map(Value::from), recorded[3]);
        assert!(replay.misses().is_empty());
        assert!(replay.unused().is_empty());
    }

    #[test]
    fn every_error_replays_as_the_error_recorded() {
        let api = configmaps();
        for error in [
            KubeError::NotFound("n".into()),
            KubeError::Conflict("c".into()),
            KubeError::Forbidden("f".into()),
            KubeError::Denied("d".into()),
            KubeError::Invalid("i".into()),
            KubeError::Other("o".into()),
            // A list past the module's memory must stop the replayed call too, not just fail it.
            KubeError::list_too_large(&api, 1024),
        ] {
            let recorded: Result<Value, KubeError> = Err(error.clone());
            let replayed = answer_from_json(&answer_to_json(&recorded)).unwrap();
            assert_eq!(replayed, recorded);
        }
    }

    #[tokio::test]
    async fn a_call_not_in_the_recording_fails_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        record_some_calls(&path, UNIX_EPOCH).await;
        let replay = replay_of(&path);
        let kube = ReplayKube::new(&replay).unwrap();
        let e = kube
            .delete(
                &ApiResource::new("apps", "v1", "deployments"),
                "prod",
                "web",
            )
            .await
            .unwrap_err();
        let KubeError::Other(message) = e else {
            panic!("{e:?}")
        };
        assert!(
            message.contains("delete deployments.apps v1 in namespace prod named \"web\""),
            "{message}"
        );
        assert!(message.contains("rec.jsonl"), "{message}");
        assert_eq!(
            replay.misses(),
            vec!["kube: delete deployments.apps v1 in namespace prod named \"web\""]
        );
        // A list with other selectors is another call.
        let e = kube
            .list(
                &configmaps(),
                "ns",
                &ListOptions::parse("app=x", "").unwrap(),
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("with labels \"app=x\""), "{e}");
        assert_eq!(replay.unused(), vec![("kube", 4)]);
    }

    #[test]
    fn malformed_kube_answers_are_refused_with_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header =
            r#"{"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00Z"}}"#;
        let refused = |answer: &str| {
            std::fs::write(
                &path,
                format!(
                    "{header}\n{{\"capability\":\"kube\",\"call\":{{}},\"answer\":{answer}}}\n"
                ),
            )
            .unwrap();
            ReplayKube::new(&replay_of(&path))
                .err()
                .expect("refused")
                .to_string()
        };
        assert!(
            refused(r#"{"error":{"reason":"odd"}}"#).ends_with(":2: unknown error reason \"odd\""),
        );
        assert!(refused("{}").ends_with(":2: the answer has neither `ok` nor `error`"));
        // Lines of other capabilities are theirs: the kube replay neither checks nor counts them.
        std::fs::write(
            &path,
            format!("{header}\n{{\"capability\":\"http\",\"call\":{{}},\"answer\":{{}}}}\n"),
        )
        .unwrap();
        let replay = replay_of(&path);
        ReplayKube::new(&replay).unwrap();
        assert!(replay.unused().is_empty());
    }
}
