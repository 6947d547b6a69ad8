//! A capability call is a value. Once a capability has checked what a guest asks for (the grant, the
//! sizes, the names), it hands one [`Call`] value to its [`Backend`] and gets one answer back. Every
//! backend of every capability has that one method, so whatever stands between the capability and the
//! backend is written once for all of them: the recording and the replay
//! (`capabilities/recording.rs`), the write log of `run` (`cluster/writes.rs`). It sits below both
//! the capabilities and the clients that answer them (`cluster/`), which share it.
//!
//! Calls, answers and errors are serde types: a recording is those values as JSON, and every error of
//! every capability is recorded as `{"reason": …, "message": …}`.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One call of a capability to its backend, as a value: what a recording writes and a replay matches.
pub trait Call: Serialize + Send + 'static {
    /// The capability's name: the `capability` of its lines in a recording.
    const CAPABILITY: &'static str;
    /// What the call answers.
    type Answer: Serialize + DeserializeOwned + Send + 'static;
    /// Why the call failed; serialised as `{"reason": …, "message": …}`.
    type Error: Serialize + DeserializeOwned + std::fmt::Display + Send + 'static;

    /// The call in words, for errors (a call a replay cannot answer).
    fn describe(&self) -> String;

    /// The error of a call no recorded answer can answer (`message` says why).
    fn unanswered(message: String) -> Self::Error;
}

/// What answers a capability's calls: the fixture cluster, a live cluster, the network, the process's
/// environment, the system's generator, a recording of one of them, or a replay.
#[async_trait]
pub trait Backend<C: Call>: Send + Sync {
    /// Answers one call.
    async fn call(&self, call: C) -> Result<C::Answer, C::Error>;
}

/// The error of a capability whose guest sees a message alone (`environment`, `random`), recorded in
/// the shape every capability's errors have: `{"reason": "other", "message": …}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{0}")]
#[serde(from = "FailureShapes", into = "Tagged")]
pub struct Failure(pub String);

#[derive(Serialize, Deserialize)]
#[serde(tag = "reason", content = "message", rename_all = "kebab-case")]
enum Tagged {
    Other(String),
}

/// The shapes a [`Failure`] is read from: the one written, and the bare message recordings of
/// earlier versions hold.
#[derive(Deserialize)]
#[serde(untagged)]
enum FailureShapes {
    Tagged(Tagged),
    Message(String),
}

impl From<FailureShapes> for Failure {
    fn from(shape: FailureShapes) -> Failure {
        match shape {
            FailureShapes::Tagged(Tagged::Other(message)) | FailureShapes::Message(message) => {
                Failure(message)
            }
        }
    }
}

impl From<Failure> for Tagged {
    fn from(failure: Failure) -> Tagged {
        Tagged::Other(failure.0)
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failures_are_recorded_like_every_error_and_read_in_the_earlier_shape_too() {
        let failure = Failure("environment variable T is not set".into());
        let recorded = serde_json::to_value(&failure).unwrap();
        assert_eq!(
            recorded,
            json!({"reason": "other", "message": "environment variable T is not set"})
        );
        assert_eq!(
            serde_json::from_value::<Failure>(recorded).unwrap(),
            failure
        );
        assert_eq!(
            serde_json::from_value::<Failure>(json!("environment variable T is not set")).unwrap(),
            failure
        );
        assert!(serde_json::from_value::<Failure>(json!(3)).is_err());
    }
}
