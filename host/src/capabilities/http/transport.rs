//! Where the `http` capability's checked requests go: a `Backend<Exchange>`. The capability decides
//! what may be sent (grant, method, headers, sizes, the time allowed); a backend only exchanges it:
//! over the network ([`NetworkTransport`], directly or through the environment's proxy), or through a
//! recording or a replay ([`recording`](crate::capabilities::recording)).
//!
//! In a recording, the call is what the capability let through: method, URL, headers (pairs, in the
//! module's order) and body. The limits (answer size, time) are not part of it: a replay answers at
//! once, and the capability checks a replayed answer against the module's size limit again. The answer
//! is `{"status", "headers", "body"}`, an error `{"reason", "message"}` with the WIT error's name as
//! `reason` (`timeout`, `too-large`, `transport`, `invalid`). Bodies are `{"text": …}` or
//! `{"base64": …}`. Requests the grant denies never reach a backend, so they are not recorded: a
//! replay denies them again by the same grant.
//!
//! ```text
//! {"capability":"http","call":{"method":"POST","url":"https://sts.amazonaws.com/","headers":[["content-type","application/x-www-form-urlencoded"]],"body":{"text":"Action=AssumeRoleWithWebIdentity&…"}},"answer":{"ok":{"status":200,"headers":[["content-type","text/xml"]],"body":{"text":"<AssumeRoleWithWebIdentityResponse>…"}}}}
//! {"capability":"http","call":{"method":"GET","url":"https://acct.blob.core.windows.net/c/b","headers":[],"body":{"text":""}},"answer":{"error":{"reason":"timeout","message":"GET https://acct.blob.core.windows.net:443: no complete answer within 10s"}}}
//! ```

use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Full};

use hyper::body::Bytes;
use serde::{de, Deserialize, Deserializer, Serialize};

use super::target::origin;
use crate::backend::{Backend, Call};
use crate::capabilities::recording::bytes;

/// One request, as the capability has checked it: the `http` capability's call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    /// Upper-case method, one the capability allows.
    pub method: String,
    /// The absolute URL, as the module gave it; its origin is granted.
    pub url: String,
    /// Valid header names and values, in the module's order; never `host` or `content-length`.
    pub headers: Vec<(String, String)>,
    /// Request body, within the capability's cap.
    #[serde(with = "bytes")]
    pub body: Vec<u8>,
    /// The largest answer body to accept.
    #[serde(skip)]
    pub max_response: u64,
    /// How long the whole exchange may take.
    #[serde(skip)]
    pub timeout: Duration,
}

/// The answer, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// HTTP status code.
    #[serde(deserialize_with = "status")]
    pub status: u16,
    /// Header names (lower case) and values.
    #[serde(default, deserialize_with = "headers")]
    pub headers: Vec<(String, String)>,
    /// Body.
    #[serde(with = "bytes")]
    pub body: Vec<u8>,
}

fn status<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u16, D::Error> {
    let status = u64::deserialize(deserializer)?;
    u16::try_from(status)
        .map_err(|_| de::Error::custom(format!("`status` {status} is not an HTTP status")))
}

fn headers<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, String)>, D::Error> {
    Vec::deserialize(deserializer)
        .map_err(|e| de::Error::custom(format!("`headers` are not [name, value] pairs: {e}")))
}

/// Why an exchange brought no answer (the WIT `error` variants a backend can give); recorded as
/// `{"reason": "timeout", "message": …}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "reason", content = "message", rename_all = "kebab-case")]
pub enum ExchangeError {
    /// No complete answer within the time allowed.
    #[error("{0}")]
    Timeout(String),
    /// The answer is larger than allowed.
    #[error("{0}")]
    TooLarge(String),
    /// Connection, TLS or protocol failure.
    #[error("{0}")]
    Transport(String),
    /// The request could not be built.
    #[error("{0}")]
    Invalid(String),
}

impl Call for Exchange {
    const CAPABILITY: &'static str = "http";
    type Answer = Answer;
    type Error = ExchangeError;

    /// `POST https://sts.amazonaws.com:443/path?…`. The query is left out (it may carry a signature);
    /// `?…` says there was one.
    fn describe(&self) -> String {
        let url = self.url.as_str();
        let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
        let path_start = url[after_scheme..]
            .find(['/', '?', '#'])
            .map(|i| i + after_scheme)
            .unwrap_or(url.len());
        let rest = &url[path_start..];
        let path = match rest.split_once('?') {
            Some((path, _)) => format!("{path}?…"),
            None => rest.split('#').next().unwrap_or("").to_string(),
        };
        format!(
            "{} {}{path} (with the headers and body sent)",
            self.method,
            origin(url)
        )
    }

    fn unanswered(message: String) -> ExchangeError {
        ExchangeError::Transport(message)
    }
}

/// The network ([`crate::network`]): the host's shared clients, directly or through the proxy of the
/// environment.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NetworkTransport;

/// The error of an answer over `limit` bytes.
pub(super) fn too_large(origin: &str, limit: u64) -> ExchangeError {
    ExchangeError::TooLarge(format!("the answer of {origin} is over the module's limit of {limit} bytes (manifest [limits] http-response)"))
}

#[async_trait]
impl Backend<Exchange> for NetworkTransport {
    /// Exchanges one request for its answer, within `exchange`'s limits.
    async fn call(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
        let origin = origin(&exchange.url);
        let Exchange {
            method,
            url,
            headers,
            body,
            max_response,
            timeout,
        } = exchange;
        let mut builder = hyper::Request::builder()
            .method(method.as_str())
            .uri(url.as_str());
        for (name, value) in &headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ExchangeError::Invalid(format!("request to {origin}: {e}")))?;
        let exchange = async {
            let response = crate::network::send(request, &format!("{method} {origin}"))
                .await
                .map_err(ExchangeError::Transport)?;
            let status = response.status().as_u16();
            if let Some(length) = response
                .headers()
                .get(hyper::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            {
                if length > max_response {
                    return Err(too_large(&origin, max_response));
                }
            }
            let headers: Vec<(String, String)> = response
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            // Frame by frame: past the limit nothing more is read, and each frame is charged to the
            // guest's account (when made for a guest) before it is kept.
            let mut incoming = response.into_body();
            let mut body = crate::answer_charge::AnswerBody::new();
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| {
                    ExchangeError::Transport(format!("{method} {origin}: reading the answer: {e}"))
                })?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if (body.len() + data.len()) as u64 > max_response {
                    return Err(too_large(&origin, max_response));
                }
                body.extend(&data).map_err(|refused| {
                    ExchangeError::TooLarge(format!("{method} {origin}: {refused}"))
                })?;
            }
            Ok(Answer {
                status,
                headers,
                // Its buffer stays held on the account until the guest has it.
                body: body.into_vec(),
            })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ExchangeError::Timeout(format!(
                "{method} {origin}: no complete answer within {}",
                humantime::format_duration(timeout)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::recording::{
        answer_of, Header, Recorded, Recorder, Recording, Replay, Replayed,
    };
    use serde_json::{json, Value};
    use std::sync::{Arc, Mutex};

    /// A backend that answers from a list and keeps what it was sent.
    struct Scripted {
        answers: Mutex<Vec<Result<Answer, ExchangeError>>>,
        sent: Mutex<Vec<Exchange>>,
    }

    #[async_trait]
    impl Backend<Exchange> for Scripted {
        async fn call(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
            self.sent.lock().unwrap().push(exchange);
            self.answers.lock().unwrap().remove(0)
        }
    }

    fn exchange(method: &str, url: &str, body: &[u8]) -> Exchange {
        Exchange {
            method: method.into(),
            url: url.into(),
            headers: vec![(
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            )],
            body: body.to_vec(),
            max_response: 1 << 20,
            timeout: Duration::from_secs(10),
        }
    }

    fn sts_answer() -> Answer {
        Answer {
            status: 200,
            headers: vec![("content-type".into(), "text/xml".into())],
            body: b"<AssumeRoleWithWebIdentityResponse/>".to_vec(),
        }
    }

    /// An answer as a recording holds it.
    fn recorded(answer: &Result<Answer, ExchangeError>) -> Value {
        match answer {
            Ok(answer) => json!({ "ok": answer }),
            Err(error) => json!({ "error": error }),
        }
    }

    /// A recorded answer read back, as a replay reads it.
    fn read_back(answer: Value) -> Result<Result<Answer, ExchangeError>, String> {
        answer_of::<Exchange>(&answer).map_err(|e| e.to_string())
    }

    #[test]
    fn exchanges_are_recorded_as_sent_and_received() {
        let sent = exchange(
            "POST",
            "https://sts.amazonaws.com/",
            b"Action=AssumeRoleWithWebIdentity&WebIdentityToken=eyJ",
        );
        assert_eq!(
            serde_json::to_value(&sent).unwrap(),
            json!({"method": "POST", "url": "https://sts.amazonaws.com/",
                   "headers": [["Content-Type", "application/x-www-form-urlencoded"]],
                   "body": {"text": "Action=AssumeRoleWithWebIdentity&WebIdentityToken=eyJ"}})
        );
        let binary = Answer {
            status: 206,
            headers: vec![],
            body: vec![0xff, 0xd8, 0xff],
        };
        assert_eq!(
            recorded(&Ok(binary.clone())),
            json!({"ok": {"status": 206, "headers": [], "body": {"base64": "/9j/"}}})
        );
        assert_eq!(read_back(recorded(&Ok(binary.clone()))), Ok(Ok(binary)));
        for error in [
            ExchangeError::Timeout("t".into()),
            ExchangeError::TooLarge("l".into()),
            ExchangeError::Transport("c".into()),
            ExchangeError::Invalid("i".into()),
        ] {
            let answer = recorded(&Err(error.clone()));
            assert_eq!(read_back(answer.clone()), Ok(Err(error)), "{answer}");
        }
        assert_eq!(
            recorded(&Err(ExchangeError::TooLarge("big".into()))),
            json!({"error": {"reason": "too-large", "message": "big"}})
        );
    }

    #[test]
    fn malformed_answers_say_what_is_wrong() {
        let problem = |v: Value| read_back(v).unwrap_err();
        assert!(problem(json!({})).contains("not {\"ok\": …} or {\"error\""));
        assert!(
            problem(json!({"ok": {"status": 70000, "body": {"text": ""}}}))
                .contains("`status` 70000 is not an HTTP status")
        );
        assert!(
            problem(json!({"ok": {"status": 200, "headers": [["a"]], "body": {"text": ""}}}))
                .contains("[name, value] pairs")
        );
        assert!(problem(json!({"ok": {"status": 200, "body": "x"}}))
            .contains("bytes are {\"text\": …} or {\"base64\": …}"));
        assert!(
            problem(json!({"error": {"reason": "denied", "message": "m"}}))
                .contains("unknown variant `denied`")
        );
    }

    #[test]
    fn replay_errors_name_the_exchange_without_its_query() {
        let call = exchange(
            "GET",
            "https://acct.blob.core.windows.net/c/b?sig=SECRET&se=1",
            b"",
        );
        assert_eq!(
            call.describe(),
            "GET https://acct.blob.core.windows.net:443/c/b?… (with the headers and body sent)"
        );
        assert_eq!(
            exchange("POST", "http://127.0.0.1:9", b"").describe(),
            "POST http://127.0.0.1:9 (with the headers and body sent)"
        );
    }

    #[tokio::test]
    async fn a_recorded_exchange_replays_and_a_different_one_misses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: std::time::UNIX_EPOCH,
            velero_namespace: String::new(),
        };
        let recorder = Recorder::create(&path, &header).unwrap();
        let network = Arc::new(Scripted {
            answers: Mutex::new(vec![
                Ok(sts_answer()),
                Err(ExchangeError::Transport("connection refused".into())),
            ]),
            sent: Mutex::new(Vec::new()),
        });
        let recording = Recorded::<Exchange>::new(network.clone(), recorder.clone());
        let sts = exchange("POST", "https://sts.amazonaws.com/", b"Action=A");
        let down = exchange("GET", "http://127.0.0.1:9/", b"");
        assert_eq!(recording.call(sts.clone()).await, Ok(sts_answer()));
        assert!(recording.call(down.clone()).await.is_err());
        recorder.finish().unwrap();
        assert_eq!(network.sent.lock().unwrap().len(), 2);

        let replay = Replay::new(Recording::read(&path).unwrap());
        let http = Replayed::<Exchange>::new(&replay).unwrap();
        // The limits are not part of the call: other limits replay the same exchange.
        let mut same = sts.clone();
        same.timeout = Duration::from_millis(1);
        assert_eq!(http.call(same).await, Ok(sts_answer()));
        assert_eq!(
            http.call(down).await,
            Err(ExchangeError::Transport("connection refused".into()))
        );
        // Another body is another call.
        let other = exchange("POST", "https://sts.amazonaws.com/", b"Action=B");
        let ExchangeError::Transport(message) = http.call(other).await.unwrap_err() else {
            panic!("a miss is a transport error")
        };
        assert!(
            message.starts_with("replay: the call POST https://sts.amazonaws.com:443/ (with the headers and body sent) is not in the recording"),
            "{message}"
        );
        assert_eq!(
            replay.misses(),
            vec!["http: POST https://sts.amazonaws.com:443/ (with the headers and body sent)"]
        );
        assert!(replay.unused().is_empty());
    }
}
