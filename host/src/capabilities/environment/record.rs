//! Record and replay of the environment: [`RecordingEnvironment`] reads from another source and
//! writes each answer; [`ReplayEnvironment`] answers from a [`Replay`] and reads neither the process's
//! variables nor any file. Velero's namespace is in the recording's header. Only calls the grant
//! allows reach a source, so only those are recorded; a replay checks the same grant first.
//!
//! ```text
//! {"capability":"environment","call":{"op":"variable","name":"AZURE_TENANT_ID"},"answer":{"ok":"tid-5678"}}
//! {"capability":"environment","call":{"op":"variable","name":"AZURE_CLIENT_ID"},"answer":{"ok":null}}
//! {"capability":"environment","call":{"op":"read-env-file","variable":"AWS_WEB_IDENTITY_TOKEN_FILE"},"answer":{"ok":{"text":"eyJhbGciOi…"}}}
//! {"capability":"environment","call":{"op":"read-env-file","variable":"AZURE_FEDERATED_TOKEN_FILE"},"answer":{"error":"environment variable AZURE_FEDERATED_TOKEN_FILE is not set"}}
//! ```
//!
//! A variable's answer is `{"ok": value}` (null when unset); a file's is `{"ok": bytes}` (`{"text": …}`
//! or `{"base64": …}`) or `{"error": message}`. A replayed call that is not in the recording answers
//! unset (a variable) or an error (a file), and the run fails naming it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::EnvironmentSource;
use crate::capabilities::recording::{
    bytes_from_json, bytes_to_json, Recorder, RecordingError, Replay, Replayer,
};

/// The `capability` of environment lines.
const ENVIRONMENT: &str = "environment";

fn variable_call(name: &str) -> Value {
    json!({"op": "variable", "name": name})
}

fn file_call(variable: &str) -> Value {
    json!({"op": "read-env-file", "variable": variable})
}

fn file_answer_to_json(answer: &Result<Vec<u8>, String>) -> Value {
    match answer {
        Ok(bytes) => json!({"ok": bytes_to_json(bytes)}),
        Err(message) => json!({"error": message}),
    }
}

/// A recorded answer read back, whichever call it answers; the error says what is malformed.
fn answer_from_json(answer: &Value) -> Result<Answer, String> {
    match (answer.get("ok"), answer.get("error")) {
        (Some(Value::Null), _) => Ok(Answer::Variable(None)),
        (Some(Value::String(value)), _) => Ok(Answer::Variable(Some(value.clone()))),
        (Some(bytes), _) => bytes_from_json(bytes).map(|b| Answer::File(Ok(b))),
        (None, Some(Value::String(message))) => Ok(Answer::File(Err(message.clone()))),
        _ => Err(format!(
            "an environment answer is {{\"ok\": …}} or {{\"error\": \"message\"}}, not {answer}"
        )),
    }
}

/// A recorded environment answer.
#[derive(Debug, PartialEq)]
enum Answer {
    /// A variable's value.
    Variable(Option<String>),
    /// A file's contents, or why it could not be read.
    File(Result<Vec<u8>, String>),
}

/// A source that reads from another and records every answer.
pub struct RecordingEnvironment {
    inner: Arc<dyn EnvironmentSource>,
    recorder: Arc<Recorder>,
}

impl RecordingEnvironment {
    /// Records what `inner` answers.
    pub fn new(inner: Arc<dyn EnvironmentSource>, recorder: Arc<Recorder>) -> RecordingEnvironment {
        RecordingEnvironment { inner, recorder }
    }
}

#[async_trait]
impl EnvironmentSource for RecordingEnvironment {
    fn variable(&self, name: &str) -> Option<String> {
        let value = self.inner.variable(name);
        self.recorder
            .write(ENVIRONMENT, variable_call(name), json!({ "ok": value }));
        value
    }

    async fn read_file(&self, variable: &str) -> Result<Vec<u8>, String> {
        let answer = self.inner.read_file(variable).await;
        self.recorder.write(
            ENVIRONMENT,
            file_call(variable),
            file_answer_to_json(&answer),
        );
        answer
    }
}

/// A source that answers from a recording, strictly.
pub struct ReplayEnvironment {
    replayer: Arc<Replayer>,
}

impl ReplayEnvironment {
    /// Answers the environment calls of `replay`; refuses a recording with a malformed answer.
    pub fn new(replay: &Replay) -> Result<ReplayEnvironment, RecordingError> {
        let replayer =
            replay.replayer(ENVIRONMENT, |answer| answer_from_json(answer).map(|_| ()))?;
        Ok(ReplayEnvironment { replayer })
    }

    fn answer(&self, call: Value) -> Result<Answer, String> {
        let answer = self.replayer.answer(&call, describe)?;
        answer_from_json(&answer)
    }
}

/// `variable AZURE_TENANT_ID`, `read-env-file AWS_WEB_IDENTITY_TOKEN_FILE`: a call in words.
fn describe(call: &Value) -> String {
    let op = call["op"].as_str().unwrap_or("");
    let name = call
        .get("name")
        .or_else(|| call.get("variable"))
        .and_then(Value::as_str)
        .unwrap_or("");
    format!("{op} {name}")
}

#[async_trait]
impl EnvironmentSource for ReplayEnvironment {
    fn variable(&self, name: &str) -> Option<String> {
        match self.answer(variable_call(name)) {
            Ok(Answer::Variable(value)) => value,
            Ok(Answer::File(_)) => {
                tracing::error!("replay: the recorded answer of variable {name} is a file's");
                None
            }
            // The miss is kept and fails the run; the module sees the variable unset meanwhile.
            Err(message) => {
                tracing::error!("{message}");
                None
            }
        }
    }

    async fn read_file(&self, variable: &str) -> Result<Vec<u8>, String> {
        match self.answer(file_call(variable))? {
            Answer::File(contents) => contents,
            Answer::Variable(_) => Err(format!(
                "replay: the recorded answer of read-env-file {variable} is not a file's contents"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::recording::{Header, Recording};
    use crate::capabilities::Environment;
    use std::collections::BTreeMap;
    use std::time::UNIX_EPOCH;

    #[test]
    fn answers_are_recorded_as_values_bytes_or_messages() {
        assert_eq!(
            answer_from_json(&json!({"ok": "tid-5678"})),
            Ok(Answer::Variable(Some("tid-5678".into())))
        );
        assert_eq!(
            answer_from_json(&json!({"ok": null})),
            Ok(Answer::Variable(None))
        );
        let token = file_answer_to_json(&Ok(b"eyJ.token\n".to_vec()));
        assert_eq!(token, json!({"ok": {"text": "eyJ.token\n"}}));
        assert_eq!(
            answer_from_json(&token),
            Ok(Answer::File(Ok(b"eyJ.token\n".to_vec())))
        );
        let binary = file_answer_to_json(&Ok(vec![0xff, 0xfe]));
        assert_eq!(binary, json!({"ok": {"base64": "//4="}}));
        assert_eq!(
            answer_from_json(&binary),
            Ok(Answer::File(Ok(vec![0xff, 0xfe])))
        );
        let unset = file_answer_to_json(&Err("environment variable T is not set".into()));
        assert_eq!(
            answer_from_json(&unset),
            Ok(Answer::File(
                Err("environment variable T is not set".into())
            ))
        );
        assert!(answer_from_json(&json!({"error": 3}))
            .unwrap_err()
            .contains("{\"ok\": …} or {\"error\": \"message\"}"));
        assert!(answer_from_json(&json!({"ok": 3})).is_err());
    }

    #[tokio::test]
    async fn a_recorded_environment_replays_without_the_process_or_files() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "eyJ.projected").unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: UNIX_EPOCH,
            velero_namespace: "velero".into(),
        };
        let recorder = Recorder::create(&path, &header).unwrap();
        let live = Environment::fixed(BTreeMap::from([
            ("AZURE_TENANT_ID".to_string(), "tid".to_string()),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE".to_string(),
                token.display().to_string(),
            ),
        ]));
        let recording = RecordingEnvironment::new(live.source(), recorder.clone());
        assert_eq!(
            recording.variable("AZURE_TENANT_ID").as_deref(),
            Some("tid")
        );
        assert_eq!(recording.variable("AZURE_CLIENT_ID"), None);
        assert_eq!(
            recording.read_file("AWS_WEB_IDENTITY_TOKEN_FILE").await,
            Ok(b"eyJ.projected".to_vec())
        );
        let unset = recording.read_file("AZURE_FEDERATED_TOKEN_FILE").await;
        assert_eq!(
            unset,
            Err("environment variable AZURE_FEDERATED_TOKEN_FILE is not set".into())
        );
        recorder.finish().unwrap();
        std::fs::remove_file(&token).unwrap();

        let replay = Replay::new(Recording::read(&path).unwrap());
        let replayed = ReplayEnvironment::new(&replay).unwrap();
        assert_eq!(replayed.variable("AZURE_TENANT_ID").as_deref(), Some("tid"));
        assert_eq!(replayed.variable("AZURE_CLIENT_ID"), None);
        assert_eq!(
            replayed.read_file("AWS_WEB_IDENTITY_TOKEN_FILE").await,
            Ok(b"eyJ.projected".to_vec()),
            "the file is gone: the answer is the recording's"
        );
        assert_eq!(
            replayed.read_file("AZURE_FEDERATED_TOKEN_FILE").await,
            unset
        );
        assert!(replay.misses().is_empty());

        // Calls not recorded: unset, an error, and both kept as misses.
        assert_eq!(replayed.variable("HOME"), None);
        let e = replayed
            .read_file("AWS_WEB_IDENTITY_TOKEN_FILE")
            .await
            .unwrap_err();
        assert!(
            e.starts_with("replay: the call read-env-file AWS_WEB_IDENTITY_TOKEN_FILE is not in the recording"),
            "{e}"
        );
        assert_eq!(
            replay.misses(),
            vec![
                "environment: variable HOME",
                "environment: read-env-file AWS_WEB_IDENTITY_TOKEN_FILE"
            ]
        );
    }
}
