//! The `random` capability: bytes from the `Backend<RandomCall>` of the host's services, the
//! operating system's secure generator ([`SystemRandom`]), or a recording or replay of it, so that an
//! action that puts random values in its output (a new firmware UUID) replays identically:
//!
//! ```text
//! {"capability":"random","call":{"len":16},"answer":{"ok":{"base64":"9qA0mW1o…"}}}
//! ```
//!
//! `wasi:random` (what `std` draws its `HashMap` seeds from) is not recorded: it is the system's
//! generator in every run. The stock components use it only for those seeds, which never reach an
//! output (their maps are looked up, not iterated into results); a component that draws values from
//! `wasi:random` directly (the `getrandom` crate) gets new ones on replay.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::budget::WorkBudget;
use super::recording::bytes;
use crate::backend::{Backend, Call, Failure};
use crate::bindings::velero_wasm::plugin::random::Host;

/// The most bytes one `bytes` call returns; asking for more traps with a message saying so.
pub(crate) const MAX_BYTES: u32 = 1 << 20;

/// A draw of `len` random bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RandomCall {
    /// How many bytes.
    pub(crate) len: u32,
}

/// The bytes drawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RandomBytes(#[serde(with = "bytes")] pub Vec<u8>);

impl Call for RandomCall {
    const CAPABILITY: &'static str = "random";
    type Answer = RandomBytes;
    type Error = Failure;

    /// `bytes(16)`.
    fn describe(&self) -> String {
        format!("bytes({})", self.len)
    }

    fn unanswered(message: String) -> Failure {
        Failure(message)
    }
}

/// The operating system's secure generator.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SystemRandom;

#[async_trait]
impl Backend<RandomCall> for SystemRandom {
    async fn call(&self, call: RandomCall) -> Result<RandomBytes, Failure> {
        let mut bytes = vec![0u8; call.len as usize];
        getrandom::fill(&mut bytes).map_err(|e| format!("the system generator failed: {e}"))?;
        Ok(RandomBytes(bytes))
    }
}

/// What the `random` capability sees of a call: where random bytes come from, and the work budget it
/// charges.
pub(crate) struct RandomView<'a> {
    pub(super) backend: &'a std::sync::Arc<dyn Backend<RandomCall>>,
    pub(super) budget: &'a mut WorkBudget,
}

/// The `random` import's host functions take a [`RandomView`] of the call.
pub(super) struct RandomHost;

impl wasmtime::component::HasData for RandomHost {
    type Data<'a> = RandomView<'a>;
}

impl Host for RandomView<'_> {
    async fn bytes(&mut self, len: u32) -> wasmtime::Result<Vec<u8>> {
        self.budget
            .charge()
            .map_err(|limit| wasmtime::format_err!("random: {limit}"))?;
        if len > MAX_BYTES {
            wasmtime::bail!("random: {len} bytes asked for in one call; the limit is {MAX_BYTES}");
        }
        let RandomBytes(bytes) = self
            .backend
            .call(RandomCall { len })
            .await
            .map_err(|e| wasmtime::format_err!("random: {e}"))?;
        // A replayed answer (a recording edited by hand) may have another length than asked for.
        if bytes.len() != len as usize {
            wasmtime::bail!(
                "random: the answer of bytes({len}) has {} bytes",
                bytes.len()
            );
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::recording::{
        answer_of, Header, Recorded, Recorder, Recording, Replay, Replayed,
    };
    use serde_json::{json, Value};
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    #[tokio::test]
    async fn recorded_bytes_replay_in_order_per_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: UNIX_EPOCH,
            velero_namespace: String::new(),
        };
        let recorder = Recorder::create(&path, &header).unwrap();
        let recording = Recorded::<RandomCall>::new(Arc::new(SystemRandom), recorder.clone());
        let draw = |len| recording.call(RandomCall { len });
        let drawn = [
            draw(16).await.unwrap(),
            draw(4).await.unwrap(),
            draw(16).await.unwrap(),
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
        let replayed = Replayed::<RandomCall>::new(&replay).unwrap();
        let draw = |len| replayed.call(RandomCall { len });
        assert_eq!(draw(4).await.unwrap(), drawn[1]);
        assert_eq!(draw(16).await.unwrap(), drawn[0]);
        assert_eq!(draw(16).await.unwrap(), drawn[2]);
        let e = draw(16).await.unwrap_err().0;
        assert!(
            e.starts_with("replay: the call bytes(16) is not in the recording"),
            "{e}"
        );
        assert_eq!(replay.misses(), vec!["random: bytes(16)"]);
    }

    #[test]
    fn malformed_random_answers_are_refused() {
        let read = |v: Value| answer_of::<RandomCall>(&v).map_err(|e| e.to_string());
        assert!(read(json!({"ok": "raw"})).is_err());
        assert!(read(json!({})).is_err());
        assert_eq!(
            read(json!({"ok": {"base64": "AAE="}})),
            Ok(Ok(RandomBytes(vec![0, 1])))
        );
        assert_eq!(
            read(json!({"error": {"reason": "other", "message": "no entropy"}})),
            Ok(Err(Failure("no entropy".into())))
        );
        // The shape of an earlier version's errors.
        assert_eq!(
            read(json!({"error": "no entropy"})),
            Ok(Err(Failure("no entropy".into())))
        );
    }
}
