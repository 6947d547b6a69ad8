//! The `random` capability: bytes from a [`RandomSource`], the operating system's secure generator
//! ([`SystemRandom`]), or a recording or replay of it ([`RecordingRandom`], [`ReplayRandom`]), so that
//! an action that puts random values in its output (a new firmware UUID) replays identically:
//!
//! ```text
//! {"capability":"random","call":{"len":16},"answer":{"ok":{"base64":"9qA0mW1o…"}}}
//! ```
//!
//! `wasi:random` (what `std` draws its `HashMap` seeds from) is not recorded: it is the system's
//! generator in every run. The stock components use it only for those seeds, which never reach an
//! output (their maps are looked up, not iterated into results); a component that draws values from
//! `wasi:random` directly (the `getrandom` crate) gets new ones on replay.

use std::sync::Arc;

use serde_json::{json, Value};

use super::recording::{
    bytes_from_json, bytes_to_json, Recorder, RecordingError, Replay, Replayer,
};
use super::CallState;
use crate::bindings::velero_wasm::plugin::random::Host;

/// The most bytes one `bytes` call returns; asking for more traps with a message saying so.
pub const MAX_BYTES: u32 = 1 << 20;

/// The `capability` of random lines.
const RANDOM: &str = "random";

/// Where random bytes come from.
pub trait RandomSource: Send + Sync {
    /// `len` random bytes; the error says why there are none.
    fn bytes(&self, len: u32) -> Result<Vec<u8>, String>;
}

/// The operating system's secure generator.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemRandom;

impl RandomSource for SystemRandom {
    fn bytes(&self, len: u32) -> Result<Vec<u8>, String> {
        let mut bytes = vec![0u8; len as usize];
        getrandom::fill(&mut bytes).map_err(|e| format!("the system generator failed: {e}"))?;
        Ok(bytes)
    }
}

fn call(len: u32) -> Value {
    json!({ "len": len })
}

fn answer_from_json(answer: &Value) -> Result<Result<Vec<u8>, String>, String> {
    match (answer.get("ok"), answer.get("error")) {
        (Some(bytes), _) => bytes_from_json(bytes).map(Ok),
        (None, Some(Value::String(message))) => Ok(Err(message.clone())),
        _ => Err(format!(
            "a random answer is {{\"ok\": bytes}} or {{\"error\": \"message\"}}, not {answer}"
        )),
    }
}

/// A source that draws from another and records every answer.
pub struct RecordingRandom {
    inner: Arc<dyn RandomSource>,
    recorder: Arc<Recorder>,
}

impl RecordingRandom {
    /// Records what `inner` draws.
    pub fn new(inner: Arc<dyn RandomSource>, recorder: Arc<Recorder>) -> RecordingRandom {
        RecordingRandom { inner, recorder }
    }
}

impl RandomSource for RecordingRandom {
    fn bytes(&self, len: u32) -> Result<Vec<u8>, String> {
        let answer = self.inner.bytes(len);
        let recorded = match &answer {
            Ok(bytes) => json!({"ok": bytes_to_json(bytes)}),
            Err(message) => json!({ "error": message }),
        };
        self.recorder.write(RANDOM, call(len), recorded);
        answer
    }
}

/// A source that answers from a recording, strictly: calls of the same length get their bytes in
/// recorded order.
pub struct ReplayRandom {
    replayer: Arc<Replayer>,
}

impl ReplayRandom {
    /// Answers the random calls of `replay`; refuses a recording with a malformed answer.
    pub fn new(replay: &Replay) -> Result<ReplayRandom, RecordingError> {
        let replayer = replay.replayer(RANDOM, |answer| answer_from_json(answer).map(|_| ()))?;
        Ok(ReplayRandom { replayer })
    }
}

impl RandomSource for ReplayRandom {
    fn bytes(&self, len: u32) -> Result<Vec<u8>, String> {
        let answer = self
            .replayer
            .answer(&call(len), |c| format!("bytes({})", c["len"]))?;
        let bytes = answer_from_json(&answer)??;
        if bytes.len() != len as usize {
            return Err(format!(
                "replay: the recorded answer of bytes({len}) has {} bytes",
                bytes.len()
            ));
        }
        Ok(bytes)
    }
}

impl Host for CallState {
    fn bytes(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        self.count_capability_call()
            .map_err(|limit| wasmtime::format_err!("random: {limit}"))?;
        if len > MAX_BYTES {
            wasmtime::bail!("random: {len} bytes asked for in one call; the limit is {MAX_BYTES}");
        }
        self.services
            .random
            .bytes(len)
            .map_err(|e| wasmtime::format_err!("random: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::recording::{Header, Recording};
    use std::time::UNIX_EPOCH;

    #[test]
    fn recorded_bytes_replay_in_order_per_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: UNIX_EPOCH,
            velero_namespace: String::new(),
        };
        let recorder = Recorder::create(&path, &header).unwrap();
        let recording = RecordingRandom::new(Arc::new(SystemRandom), recorder.clone());
        let drawn = [
            recording.bytes(16).unwrap(),
            recording.bytes(4).unwrap(),
            recording.bytes(16).unwrap(),
        ];
        assert_ne!(drawn[0], drawn[2], "16 random bytes twice the same");
        recorder.finish().unwrap();
        let line: Value = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .nth(1)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(line["capability"], "random");
        assert_eq!(line["call"], json!({"len": 16}));

        let replay = Replay::new(Recording::read(&path).unwrap());
        let replayed = ReplayRandom::new(&replay).unwrap();
        assert_eq!(replayed.bytes(4).unwrap(), drawn[1]);
        assert_eq!(replayed.bytes(16).unwrap(), drawn[0]);
        assert_eq!(replayed.bytes(16).unwrap(), drawn[2]);
        let e = replayed.bytes(16).unwrap_err();
        assert!(
            e.starts_with("replay: the call bytes(16) is not in the recording"),
            "{e}"
        );
        assert_eq!(replay.misses(), vec!["random: bytes(16)"]);
    }

    #[test]
    fn malformed_random_answers_are_refused() {
        assert!(answer_from_json(&json!({"ok": "raw"})).is_err());
        assert!(answer_from_json(&json!({})).is_err());
        assert_eq!(
            answer_from_json(&json!({"ok": {"base64": "AAE="}})),
            Ok(Ok(vec![0, 1]))
        );
        assert_eq!(
            answer_from_json(&json!({"error": "no entropy"})),
            Ok(Err("no entropy".into()))
        );
    }
}
