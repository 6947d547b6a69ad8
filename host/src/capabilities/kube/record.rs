//! Record and replay: `run --record FILE` writes every kube call and its answer as it happens;
//! `run --replay FILE` answers from such a file and sends nothing anywhere, so a case captured against
//! a real cluster becomes an offline test.
//!
//! # The file: JSON Lines
//! One JSON document per line, appended and flushed as calls happen (a crashed run keeps what it did).
//! The first line is the header; every other line is one call:
//!
//! ```text
//! {"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00.123456789Z"}}
//! {"capability":"kube","call":{"op":"get","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","name":"a"},"answer":{"ok":{…}}}
//! {"capability":"kube","call":{"op":"list","api":{…},"namespace":"ns","labelSelector":"app=web","fieldSelector":""},"answer":{"ok":[…]}}
//! {"capability":"kube","call":{"op":"patch","api":{…},"namespace":"ns","name":"a","patchType":"merge","patch":{…}},"answer":{"error":{"reason":"not-found","message":"…"}}}
//! ```
//!
//! `call.op` is `get`, `list`, `create`, `update`, `patch` or `delete`; `create` and `update` carry
//! `object`. `answer` is `{"ok": …}` (the object, the list of objects, or null for delete) or
//! `{"error": {"reason", "message"}}` with the WIT error's name as `reason`. Other capabilities (HTTP)
//! can be added as lines with their own `capability` value; a replay ignores lines of capabilities it
//! does not replay.
//!
//! # The clock
//! The header holds the instant the run's clock started. While recording, the clock starts there and
//! advances by exactly what the guest sleeps (sleeps really wait, see [`Clock::stepped`]); replay
//! starts a virtual clock at the same instant, so every time the guest reads is the same in both runs.
//! With `--now`, the recording holds that instant and sleeps return at once, as `--now` always does.
//!
//! # Replay is strict
//! A call is answered by the first unused recorded line with an identical call; identical calls are
//! answered in recorded order. A call with no such line fails with `other` naming the call, and the run
//! fails even if the action swallowed the error ([`ReplayKube::misses`]).
//!
//! [`Clock::stepped`]: crate::capabilities::Clock::stepped

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{ApiResource, KubeBackend, KubeError, ListOptions, Patch};

/// The header's `recording` value.
const MAGIC: &str = "velero-wasm";
/// The format version this host writes and reads.
const VERSION: u64 = 1;
/// The `capability` of kube lines.
const KUBE: &str = "kube";

/// A recording that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file cannot be created, written or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a recording, or a line is malformed.
    #[error("{}:{line}: {problem}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

/// Where calls are recorded: a JSON Lines file, written line by line and flushed after each.
pub struct Recorder {
    path: PathBuf,
    file: Mutex<File>,
    failure: Mutex<Option<String>>,
}

impl Recorder {
    /// Creates (or truncates) the file and writes the header with the clock's start.
    pub fn create(path: &Path, clock_start: SystemTime) -> Result<Arc<Recorder>, RecordingError> {
        let io = |source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::create(path).map_err(io)?;
        let header = json!({
            "recording": MAGIC,
            "version": VERSION,
            "clock": {"start": rfc3339(clock_start)},
        });
        writeln!(file, "{header}")
            .and_then(|_| file.flush())
            .map_err(io)?;
        Ok(Arc::new(Recorder {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            failure: Mutex::new(None),
        }))
    }

    /// Appends one call of `capability` and its answer. A write failure is kept for [`Recorder::finish`].
    pub fn write(&self, capability: &str, call: Value, answer: Value) {
        let line = json!({"capability": capability, "call": call, "answer": answer});
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = writeln!(file, "{line}").and_then(|_| file.flush()) {
            tracing::error!(path = %self.path.display(), "cannot write the recording: {e}");
            self.failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(|| e.to_string());
        }
    }

    /// Whether every call was written; the first write error otherwise.
    pub fn finish(&self) -> Result<(), String> {
        match self
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            None => Ok(()),
            Some(e) => Err(format!(
                "the recording {} is incomplete: {e}",
                self.path.display()
            )),
        }
    }
}

/// An instant in RFC 3339, with nanoseconds only when it has them.
fn rfc3339(t: SystemTime) -> String {
    let whole = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() == 0)
        .unwrap_or(true);
    if whole {
        humantime::format_rfc3339_seconds(t).to_string()
    } else {
        humantime::format_rfc3339_nanos(t).to_string()
    }
}

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

/// One recorded call.
#[derive(Debug, Clone)]
struct Entry {
    capability: String,
    call: Value,
    answer: Value,
}

/// A recording read back: the clock's start and the calls.
#[derive(Debug, Clone)]
pub struct Recording {
    path: PathBuf,
    /// The instant the recorded run's clock started.
    pub clock_start: SystemTime,
    entries: Vec<Entry>,
}

impl Recording {
    /// Reads and checks a recording.
    pub fn read(path: &Path) -> Result<Recording, RecordingError> {
        let format = |line: usize, problem: String| RecordingError::Format {
            path: path.to_path_buf(),
            line,
            problem,
        };
        let file = File::open(path).map_err(|source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut lines = Vec::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| RecordingError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let value: Value =
                serde_json::from_str(&line).map_err(|e| format(i + 1, format!("not JSON: {e}")))?;
            lines.push((i + 1, value));
        }
        let Some((_, header)) = lines.first() else {
            return Err(format(
                1,
                "the file is empty: a recording starts with its header line".into(),
            ));
        };
        if header.get("recording").and_then(Value::as_str) != Some(MAGIC) {
            return Err(format(
                1,
                format!(
                    "not a velero-wasm recording (the header needs \"recording\": \"{MAGIC}\")"
                ),
            ));
        }
        if header.get("version").and_then(Value::as_u64) != Some(VERSION) {
            return Err(format(
                1,
                format!(
                    "recording version {} is not supported (this host reads {VERSION})",
                    header["version"]
                ),
            ));
        }
        let start = header
            .pointer("/clock/start")
            .and_then(Value::as_str)
            .unwrap_or("");
        let clock_start = humantime::parse_rfc3339_weak(start).map_err(|e| {
            format(
                1,
                format!("clock.start {start:?} is not an RFC 3339 time: {e}"),
            )
        })?;
        let mut entries = Vec::new();
        for (number, mut value) in lines.into_iter().skip(1) {
            let capability = value
                .get("capability")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if capability.is_empty() {
                return Err(format(number, "a call line needs a `capability`".into()));
            }
            let (Some(call), Some(answer)) = (
                value.get_mut("call").map(Value::take),
                value.get_mut("answer").map(Value::take),
            ) else {
                return Err(format(
                    number,
                    "a call line needs `call` and `answer`".into(),
                ));
            };
            if capability == KUBE {
                // Checked once here, so that a replay never meets a malformed answer.
                let _checked =
                    answer_from_json(&answer).map_err(|problem| format(number, problem))?;
            }
            entries.push(Entry {
                capability,
                call,
                answer,
            });
        }
        Ok(Recording {
            path: path.to_path_buf(),
            clock_start,
            entries,
        })
    }
}

/// A backend that answers from a recording, strictly.
pub struct ReplayKube {
    path: PathBuf,
    entries: Mutex<Vec<(Value, Value, bool)>>,
    misses: Mutex<Vec<String>>,
}

impl ReplayKube {
    /// Answers the kube calls of `recording`.
    pub fn new(recording: &Recording) -> ReplayKube {
        let entries = recording
            .entries
            .iter()
            .filter(|e| e.capability == KUBE)
            .map(|e| (e.call.clone(), e.answer.clone(), false))
            .collect();
        ReplayKube {
            path: recording.path.clone(),
            entries: Mutex::new(entries),
            misses: Mutex::new(Vec::new()),
        }
    }

    /// The calls that were not in the recording, described.
    pub fn misses(&self) -> Vec<String> {
        self.misses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many recorded calls were not made.
    pub fn unused(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| !e.2)
            .count()
    }

    fn answer(&self, call: Value) -> Result<Value, KubeError> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = entries.iter_mut().find(|(c, _, used)| !used && *c == call) {
            entry.2 = true;
            return answer_from_json(&entry.1).map_err(KubeError::Other)?;
        }
        drop(entries);
        let what = describe(&call);
        self.misses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(what.clone());
        Err(KubeError::Other(format!(
            "replay: the call {what} is not in the recording {} (or was already answered)",
            self.path.display()
        )))
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
    use crate::capabilities::Clock;
    use std::time::{Duration, UNIX_EPOCH};

    fn configmaps() -> ApiResource {
        ApiResource::new("", "v1", "configmaps")
    }

    async fn record_some_calls(path: &Path, start: SystemTime) -> Vec<Result<Value, KubeError>> {
        let fixture = FixtureCluster::empty(Clock::fixed(start));
        let recorder = Recorder::create(path, start).unwrap();
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

    #[tokio::test]
    async fn a_replay_gives_the_recorded_answers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let start = UNIX_EPOCH + Duration::new(1_777_716_000, 123_456_789);
        let recorded = record_some_calls(&path, start).await;
        assert!(matches!(recorded[0], Err(KubeError::NotFound(_))));

        let recording = Recording::read(&path).unwrap();
        assert_eq!(recording.clock_start, start);
        let replay = ReplayKube::new(&recording);
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        // The same call twice gets the two recorded answers, in order: first not found, then the object.
        assert_eq!(replay.get(&configmaps(), "ns", "a").await, recorded[0]);
        assert_eq!(
            replay.create(&configmaps(), "ns", object).await,
            recorded[1]
        );
        assert_eq!(replay.get(&configmaps(), "ns", "a").await, recorded[2]);
        let listed = replay
            .list(
                &configmaps(),
                "ns",
                &ListOptions::parse("", "metadata.name=a").unwrap(),
            )
            .await;
        assert_eq!(listed.map(Value::from), recorded[3]);
        assert!(replay.misses().is_empty());
        assert_eq!(replay.unused(), 0);
    }

    #[tokio::test]
    async fn a_call_not_in_the_recording_fails_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        record_some_calls(&path, UNIX_EPOCH).await;
        let replay = ReplayKube::new(&Recording::read(&path).unwrap());
        let e = replay
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
        assert_eq!(replay.misses().len(), 1);
        // A list with other selectors is another call.
        let e = replay
            .list(
                &configmaps(),
                "ns",
                &ListOptions::parse("app=x", "").unwrap(),
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("with labels \"app=x\""), "{e}");
        assert_eq!(replay.unused(), 4);
    }

    #[test]
    fn malformed_recordings_are_refused_with_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let check = |text: &str, expected: &str| {
            std::fs::write(&path, text).unwrap();
            let e = Recording::read(&path).unwrap_err().to_string();
            assert!(e.contains(expected), "{e}");
        };
        check("", ":1: the file is empty");
        check(
            "{\"recording\":\"other\"}\n",
            ":1: not a velero-wasm recording",
        );
        let header =
            r#"{"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00Z"}}"#;
        check(&format!("{header}\nnot json\n"), ":2: not JSON");
        check(
            &format!("{header}\n{{\"capability\":\"kube\",\"call\":{{}}}}\n"),
            ":2: a call line needs `call` and `answer`",
        );
        check(
            &format!("{header}\n{{\"capability\":\"kube\",\"call\":{{}},\"answer\":{{\"error\":{{\"reason\":\"odd\"}}}}}}\n"),
            ":2: unknown error reason",
        );
        // Lines of other capabilities are kept for them and ignored by the kube replay.
        std::fs::write(
            &path,
            format!("{header}\n{{\"capability\":\"http\",\"call\":{{}},\"answer\":{{}}}}\n"),
        )
        .unwrap();
        assert_eq!(
            ReplayKube::new(&Recording::read(&path).unwrap()).unused(),
            0
        );
    }
}
