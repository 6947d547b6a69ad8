//! Record and replay of outbound HTTP: [`RecordingHttp`] passes each exchange to another transport
//! and writes it with its answer; [`ReplayHttp`] answers from a [`Replay`] and sends nothing. The
//! file and the strict replay are [`recording`](crate::capabilities::recording)'s; an exchange looks
//! like this in it:
//!
//! ```text
//! {"capability":"http","call":{"method":"POST","url":"https://sts.amazonaws.com/","headers":[["content-type","application/x-www-form-urlencoded"]],"body":{"text":"Action=AssumeRoleWithWebIdentity&…"}},"answer":{"ok":{"status":200,"headers":[["content-type","text/xml"]],"body":{"text":"<AssumeRoleWithWebIdentityResponse>…"}}}}
//! {"capability":"http","call":{"method":"GET","url":"https://acct.blob.core.windows.net/c/b","headers":[],"body":{"text":""}},"answer":{"error":{"reason":"timeout","message":"GET https://acct.blob.core.windows.net:443: no complete answer within 10s"}}}
//! ```
//!
//! The call is what the capability let through: method, URL, headers (pairs, in the module's order)
//! and body. The limits (answer size, time) are not part of it: a replay answers at once, and the
//! capability checks a replayed answer against the module's size limit again. The answer is
//! `{"ok": {"status", "headers", "body"}}` or `{"error": {"reason", "message"}}`, the reason being
//! the WIT error's name (`timeout`, `too-large`, `transport`, `invalid`). Bodies are `{"text": …}` or
//! `{"base64": …}`. Requests the grant denies never reach a transport, so they are not recorded: a
//! replay denies them again by the same grant.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{origin, Answer, Exchange, ExchangeError, HttpTransport};
use crate::capabilities::recording::{
    bytes_from_json, bytes_to_json, Recorder, RecordingError, Replay, Replayer,
};

/// The `capability` of HTTP lines.
const HTTP: &str = "http";

/// An exchange as recorded: what was sent.
fn call_to_json(exchange: &Exchange) -> Value {
    json!({
        "method": exchange.method,
        "url": exchange.url,
        "headers": exchange.headers,
        "body": bytes_to_json(&exchange.body),
    })
}

fn reason(error: &ExchangeError) -> &'static str {
    match error {
        ExchangeError::Timeout(_) => "timeout",
        ExchangeError::TooLarge(_) => "too-large",
        ExchangeError::Transport(_) => "transport",
        ExchangeError::Invalid(_) => "invalid",
    }
}

/// An answer as recorded.
fn answer_to_json(answer: &Result<Answer, ExchangeError>) -> Value {
    match answer {
        Ok(a) => {
            json!({"ok": {"status": a.status, "headers": a.headers, "body": bytes_to_json(&a.body)}})
        }
        Err(e) => json!({"error": {"reason": reason(e), "message": e.to_string()}}),
    }
}

/// A recorded answer read back; the error says what is malformed.
fn answer_from_json(answer: &Value) -> Result<Result<Answer, ExchangeError>, String> {
    if let Some(ok) = answer.get("ok") {
        let status = ok
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .ok_or("the answer's `status` is not an HTTP status")?;
        let headers: Vec<(String, String)> =
            serde_json::from_value(ok.get("headers").cloned().unwrap_or(json!([])))
                .map_err(|e| format!("the answer's `headers` are not [name, value] pairs: {e}"))?;
        let body = bytes_from_json(ok.get("body").unwrap_or(&Value::Null))
            .map_err(|e| format!("the answer's body: {e}"))?;
        return Ok(Ok(Answer {
            status,
            headers,
            body,
        }));
    }
    let error = answer
        .get("error")
        .ok_or("the answer has neither `ok` nor `error`")?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(Err(
        match error.get("reason").and_then(Value::as_str).unwrap_or("") {
            "timeout" => ExchangeError::Timeout(message),
            "too-large" => ExchangeError::TooLarge(message),
            "transport" => ExchangeError::Transport(message),
            "invalid" => ExchangeError::Invalid(message),
            other => return Err(format!("unknown error reason {other:?}")),
        },
    ))
}

/// `POST https://sts.amazonaws.com:443/path?…`: an exchange in words, for replay errors. The query is
/// left out (it may carry a signature); `?…` says there was one.
fn describe(call: &Value) -> String {
    let url = call["url"].as_str().unwrap_or("");
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
        call["method"].as_str().unwrap_or(""),
        origin(url)
    )
}

/// A transport that passes every exchange to another and records it with its answer.
pub struct RecordingHttp {
    inner: Arc<dyn HttpTransport>,
    recorder: Arc<Recorder>,
}

impl RecordingHttp {
    /// Records the exchanges `inner` makes.
    pub fn new(inner: Arc<dyn HttpTransport>, recorder: Arc<Recorder>) -> RecordingHttp {
        RecordingHttp { inner, recorder }
    }
}

#[async_trait]
impl HttpTransport for RecordingHttp {
    async fn exchange(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
        let call = call_to_json(&exchange);
        let answer = self.inner.exchange(exchange).await;
        self.recorder.write(HTTP, call, answer_to_json(&answer));
        answer
    }
}

/// A transport that answers from a recording, strictly, and sends nothing.
pub struct ReplayHttp {
    replayer: Arc<Replayer>,
}

impl ReplayHttp {
    /// Answers the HTTP exchanges of `replay`; refuses a recording with a malformed HTTP answer.
    pub fn new(replay: &Replay) -> Result<ReplayHttp, RecordingError> {
        let replayer = replay.replayer(HTTP, |answer| answer_from_json(answer).map(|_| ()))?;
        Ok(ReplayHttp { replayer })
    }
}

#[async_trait]
impl HttpTransport for ReplayHttp {
    async fn exchange(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
        let answer = self
            .replayer
            .answer(&call_to_json(&exchange), describe)
            .map_err(ExchangeError::Transport)?;
        answer_from_json(&answer).map_err(ExchangeError::Transport)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::recording::{Header, Recording};
    use std::sync::Mutex;
    use std::time::{Duration, UNIX_EPOCH};

    /// A transport that answers from a list and keeps what it was sent.
    struct Scripted {
        answers: Mutex<Vec<Result<Answer, ExchangeError>>>,
        sent: Mutex<Vec<Exchange>>,
    }

    #[async_trait]
    impl HttpTransport for Scripted {
        async fn exchange(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
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

    #[test]
    fn exchanges_are_recorded_as_sent_and_received() {
        let sent = exchange(
            "POST",
            "https://sts.amazonaws.com/",
            b"Action=AssumeRoleWithWebIdentity&WebIdentityToken=eyJ",
        );
        assert_eq!(
            call_to_json(&sent),
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
            answer_to_json(&Ok(binary.clone())),
            json!({"ok": {"status": 206, "headers": [], "body": {"base64": "/9j/"}}})
        );
        assert_eq!(
            answer_from_json(&answer_to_json(&Ok(binary.clone()))),
            Ok(Ok(binary))
        );
        for error in [
            ExchangeError::Timeout("t".into()),
            ExchangeError::TooLarge("l".into()),
            ExchangeError::Transport("c".into()),
            ExchangeError::Invalid("i".into()),
        ] {
            let recorded = answer_to_json(&Err(error.clone()));
            assert_eq!(answer_from_json(&recorded), Ok(Err(error)), "{recorded}");
        }
        assert_eq!(
            answer_to_json(&Err(ExchangeError::TooLarge("big".into()))),
            json!({"error": {"reason": "too-large", "message": "big"}})
        );
    }

    #[test]
    fn malformed_answers_say_what_is_wrong() {
        let problem = |v: Value| answer_from_json(&v).unwrap_err();
        assert!(problem(json!({})).contains("neither `ok` nor `error`"));
        assert!(problem(json!({"ok": {"status": 70000, "body": {"text": ""}}})).contains("status"));
        assert!(
            problem(json!({"ok": {"status": 200, "headers": [["a"]], "body": {"text": ""}}}))
                .contains("[name, value] pairs")
        );
        assert!(problem(json!({"ok": {"status": 200, "body": "x"}})).contains("body"));
        assert!(
            problem(json!({"error": {"reason": "denied", "message": "m"}}))
                .contains("unknown error reason \"denied\"")
        );
    }

    #[test]
    fn replay_errors_name_the_exchange_without_its_query() {
        let call = call_to_json(&exchange(
            "GET",
            "https://acct.blob.core.windows.net/c/b?sig=SECRET&se=1",
            b"",
        ));
        let words = describe(&call);
        assert_eq!(
            words,
            "GET https://acct.blob.core.windows.net:443/c/b?… (with the headers and body sent)"
        );
        assert_eq!(
            describe(&call_to_json(&exchange("POST", "http://127.0.0.1:9", b""))),
            "POST http://127.0.0.1:9 (with the headers and body sent)"
        );
    }

    #[tokio::test]
    async fn a_recorded_exchange_replays_and_a_different_one_misses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: UNIX_EPOCH,
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
        let recording = RecordingHttp::new(network.clone(), recorder.clone());
        let sts = exchange("POST", "https://sts.amazonaws.com/", b"Action=A");
        let down = exchange("GET", "http://127.0.0.1:9/", b"");
        assert_eq!(recording.exchange(sts.clone()).await, Ok(sts_answer()));
        assert!(recording.exchange(down.clone()).await.is_err());
        recorder.finish().unwrap();
        assert_eq!(network.sent.lock().unwrap().len(), 2);

        let replay = Replay::new(Recording::read(&path).unwrap());
        let http = ReplayHttp::new(&replay).unwrap();
        // The limits are not part of the call: other limits replay the same exchange.
        let mut same = sts.clone();
        same.timeout = Duration::from_millis(1);
        assert_eq!(http.exchange(same).await, Ok(sts_answer()));
        assert_eq!(
            http.exchange(down).await,
            Err(ExchangeError::Transport("connection refused".into()))
        );
        // Another body is another call.
        let other = exchange("POST", "https://sts.amazonaws.com/", b"Action=B");
        let ExchangeError::Transport(message) = http.exchange(other).await.unwrap_err() else {
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
