//! Record and replay of capability calls: `run --record FILE` writes every call a run makes to the
//! host (kube, http, environment, random) with its answer as it happens; `run --replay FILE` answers
//! from such a file and sends nothing anywhere, so a case captured against a real cluster and real
//! cloud endpoints becomes an offline test.
//!
//! This module is the part every capability shares: the file, the [`Recorder`], the [`Recording`]
//! read back, the strict [`Replay`], and the two wrappers that put them in front of any
//! [`Backend`]: [`Recorded`] and [`Replayed`]. A line is a capability's [`Call`] and its answer as
//! serde writes them (the types are in [`kube`], [`http`], [`environment`], [`random`]).
//!
//! # The file: JSON Lines
//! One JSON document per line, appended and flushed as calls happen (a crashed run keeps what it did).
//! The first line is the header, with the run's fixed inputs; every other line is one call:
//!
//! ```text
//! {"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00.123456789Z"},"environment":{"veleroNamespace":"velero"}}
//! {"capability":"kube","call":{"op":"get","api":{…},"namespace":"ns","name":"a"},"answer":{"ok":{…}}}
//! {"capability":"http","call":{"method":"POST","url":"https://sts.amazonaws.com/","headers":[…],"body":{"text":"Action=…"}},"answer":{"ok":{"status":200,"headers":[…],"body":{"text":"<…>"}}}}
//! {"capability":"environment","call":{"op":"read-env-file","variable":"AWS_WEB_IDENTITY_TOKEN_FILE"},"answer":{"ok":{"text":"eyJ…"}}}
//! {"capability":"random","call":{"len":16},"answer":{"ok":{"base64":"…"}}}
//! ```
//!
//! The answer is `{"ok": …}` or `{"error": {"reason": …, "message": …}}`, the same error shape for
//! every capability (recordings of earlier versions, whose `environment` and `random` errors are a
//! bare message, still replay). Bytes (bodies, file contents, random bytes) are `{"text": …}` when
//! they are UTF-8 and `{"base64": …}` otherwise ([`bytes`]). A replay ignores lines of capabilities it
//! does not know, so that a newer host's recording still replays what this host can.
//!
//! # The clock
//! The header holds the instant the run's clock started. While recording, the clock starts there and
//! advances by exactly what the guest sleeps (sleeps really wait, see [`Clock::stepped`]); replay
//! starts a virtual clock at the same instant, so every time the guest reads is the same in both runs.
//!
//! # Replay is strict
//! A call is answered by the first unused recorded line of its capability with an identical call;
//! identical calls are answered in recorded order. A call with no such line fails naming the call, and
//! the run fails even if the action swallowed the error ([`Replay::misses`]).
//!
//! # Secrets
//! A recording holds what was sent and received: tokens in HTTP requests and answers, the contents of
//! token files, Secrets read from the cluster. The file is made readable by its owner only (mode 0600,
//! an existing file too), and never written through a symbolic link.
//!
//! # Size
//! A recording holds at most [`MAX_RECORDING`] bytes: a call that would go past it is not written,
//! and [`Recorder::finish`] then fails the run. A replay reads a regular file of at most that size.
//!
//! [`kube`]: super::kube
//! [`http`]: super::http
//! [`environment`]: super::environment
//! [`random`]: super::random
//! [`Clock::stepped`]: super::Clock::stepped

use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::backend::{Backend, Call};

/// The header's `recording` value.
const MAGIC: &str = "velero-wasm";
/// The format version this host writes and reads.
const VERSION: u64 = 1;

/// The largest recording written or replayed: 256 MiB.
pub(crate) const MAX_RECORDING: u64 = 256 << 20;

/// A recording that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordingError {
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
        problem: FormatProblem,
    },
}

/// What is wrong with a line of a recording.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FormatProblem {
    /// Not a JSON document.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// No line at all.
    #[error("the file is empty: a recording starts with its header line")]
    Empty,
    /// A header this host cannot replay.
    #[error(transparent)]
    Header(#[from] BadHeader),
    /// A call line without its capability.
    #[error("a call line needs a `capability`")]
    NoCapability,
    /// A call line without its call or its answer.
    #[error("a call line needs `call` and `answer`")]
    NoCallOrAnswer,
    /// An answer that is not the shape its capability records.
    #[error(transparent)]
    Answer(#[from] MalformedAnswer),
}

/// A recorded answer that is neither `{"ok": …}` nor `{"error": {"reason": …, "message": …}}` of its
/// capability's types.
#[derive(Debug, thiserror::Error)]
#[error("the answer is not {{\"ok\": …}} or {{\"error\": {{\"reason\": …, \"message\": …}}}}: {0}")]
pub(crate) struct MalformedAnswer(#[source] serde_json::Error);

/// The run's fixed inputs, in the header: what a replay must start from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// The instant the run's clock started.
    pub(crate) clock_start: SystemTime,
    /// The namespace Velero runs in, as the run's modules saw it ("" when unknown).
    pub(crate) velero_namespace: String,
}

/// What is wrong with a recording's header line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadHeader {
    /// No `"recording"` magic.
    #[error("not a velero-wasm recording (the header needs \"recording\": \"{MAGIC}\")")]
    NotARecording,
    /// A version this host does not read.
    #[error("recording version {0} is not supported (this host reads {VERSION})")]
    Version(Value),
    /// `clock.start` is not a time.
    #[error("clock.start {start:?} is not an RFC 3339 time: {source}")]
    ClockStart {
        /// The text.
        start: String,
        /// humantime's reason.
        source: humantime::TimestampError,
    },
    /// `environment.veleroNamespace` is not a string.
    #[error("environment.veleroNamespace is {0}, not a string")]
    VeleroNamespace(Value),
}

impl Header {
    fn to_json(&self) -> Value {
        json!({
            "recording": MAGIC,
            "version": VERSION,
            "clock": {"start": rfc3339(self.clock_start)},
            "environment": {"veleroNamespace": self.velero_namespace},
        })
    }

    fn from_json(header: &Value) -> Result<Header, BadHeader> {
        if header.get("recording").and_then(Value::as_str) != Some(MAGIC) {
            return Err(BadHeader::NotARecording);
        }
        if header.get("version").and_then(Value::as_u64) != Some(VERSION) {
            return Err(BadHeader::Version(header["version"].clone()));
        }
        let start = header
            .pointer("/clock/start")
            .and_then(Value::as_str)
            .unwrap_or("");
        let clock_start =
            humantime::parse_rfc3339_weak(start).map_err(|source| BadHeader::ClockStart {
                start: start.to_string(),
                source,
            })?;
        let velero_namespace = match header.pointer("/environment/veleroNamespace") {
            None => String::new(),
            Some(Value::String(namespace)) => namespace.clone(),
            Some(other) => return Err(BadHeader::VeleroNamespace(other.clone())),
        };
        Ok(Header {
            clock_start,
            velero_namespace,
        })
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

/// Bytes as recorded, for `#[serde(with = "bytes")]`: `{"text": …}` when they are UTF-8,
/// `{"base64": …}` otherwise.
pub(crate) mod bytes {
    use base64::Engine as _;
    use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Recorded<T> {
        Text(T),
        Base64(T),
    }

    /// Writes `bytes` as text or base64.
    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Recorded::Text(text).serialize(serializer),
            Err(_) => Recorded::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
                .serialize(serializer),
        }
    }

    /// Reads bytes written by [`serialize`].
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        match Recorded::<String>::deserialize(deserializer).map_err(|e| {
            de::Error::custom(format!(
                "bytes are {{\"text\": …}} or {{\"base64\": …}}: {e}"
            ))
        })? {
            Recorded::Text(text) => Ok(text.into_bytes()),
            Recorded::Base64(encoded) => base64::engine::general_purpose::STANDARD
                .decode(&encoded)
                .map_err(|e| de::Error::custom(format!("bytes {encoded:?} are not base64: {e}"))),
        }
    }
}

/// A recorded answer: `{"ok": …}` or `{"error": …}`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Outcome<A, E> {
    Ok(A),
    Error(E),
}

impl<A, E> Outcome<A, E> {
    fn of(result: &Result<A, E>) -> Outcome<&A, &E> {
        match result {
            Ok(answer) => Outcome::Ok(answer),
            Err(error) => Outcome::Error(error),
        }
    }

    fn into_result(self) -> Result<A, E> {
        match self {
            Outcome::Ok(answer) => Ok(answer),
            Outcome::Error(error) => Err(error),
        }
    }
}

/// A recorded answer of `C` read back; the error says what is malformed.
pub(crate) fn answer_of<C: Call>(
    answer: &Value,
) -> Result<Result<C::Answer, C::Error>, MalformedAnswer> {
    Outcome::<C::Answer, C::Error>::deserialize(answer)
        .map(Outcome::into_result)
        .map_err(MalformedAnswer)
}

/// A backend that passes every call to another and records it with its answer.
pub(crate) struct Recorded<C: Call> {
    inner: Arc<dyn Backend<C>>,
    recorder: Arc<Recorder>,
}

impl<C: Call> Recorded<C> {
    /// Records the calls `inner` answers.
    pub(crate) fn new(inner: Arc<dyn Backend<C>>, recorder: Arc<Recorder>) -> Recorded<C> {
        Recorded { inner, recorder }
    }
}

#[async_trait]
impl<C: Call> Backend<C> for Recorded<C> {
    async fn call(&self, call: C) -> Result<C::Answer, C::Error> {
        let recorded = serde_json::to_value(&call);
        let answer = self.inner.call(call).await;
        match recorded {
            Ok(call) => self
                .recorder
                .write(C::CAPABILITY, &call, &Outcome::of(&answer)),
            Err(source) => self.recorder.fail(RecordProblem::Encode {
                capability: C::CAPABILITY.to_string(),
                source,
            }),
        }
        answer
    }
}

/// A backend that answers from a recording, strictly, and reaches nothing else.
pub(crate) struct Replayed<C: Call> {
    replayer: Arc<Replayer>,
    call: PhantomData<fn(C)>,
}

impl<C: Call> Replayed<C> {
    /// Answers the calls of `C`'s capability in `replay`; refuses a recording with a malformed answer
    /// of that capability.
    pub(crate) fn new(replay: &Replay) -> Result<Replayed<C>, RecordingError> {
        let replayer =
            replay.replayer(C::CAPABILITY, |answer| answer_of::<C>(answer).map(|_| ()))?;
        Ok(Replayed {
            replayer,
            call: PhantomData,
        })
    }
}

#[async_trait]
impl<C: Call> Backend<C> for Replayed<C> {
    async fn call(&self, call: C) -> Result<C::Answer, C::Error> {
        let recorded = serde_json::to_value(&call)
            .map_err(|e| C::unanswered(format!("replay: {}: {e}", call.describe())))?;
        let answer = self
            .replayer
            .answer(&recorded, |_| call.describe())
            .map_err(|miss| C::unanswered(miss.to_string()))?;
        answer_of::<C>(&answer).map_err(|e| C::unanswered(e.to_string()))?
    }
}

/// Where calls are recorded: a JSON Lines file, written line by line and flushed after each.
pub(crate) struct Recorder {
    path: PathBuf,
    /// The file and the bytes written to it.
    file: Mutex<(File, u64)>,
    limit: u64,
    failure: Mutex<Option<RecordProblem>>,
}

impl Recorder {
    /// Creates (or truncates) the file, readable by its owner only (an existing file is made so), and
    /// writes the header. A symbolic link, or anything but a regular file, is refused.
    pub(crate) fn create(path: &Path, header: &Header) -> Result<Arc<Recorder>, RecordingError> {
        Recorder::create_with_limit(path, header, MAX_RECORDING)
    }

    fn create_with_limit(
        path: &Path,
        header: &Header,
        limit: u64,
    ) -> Result<Arc<Recorder>, RecordingError> {
        let io = |source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Not truncated yet: first make sure it is a regular file (a FIFO, opened without blocking,
        // is refused rather than waited on) and nobody else's to read.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| {
                io(if e.raw_os_error() == Some(libc::ELOOP) {
                    std::io::Error::other(
                        "is a symbolic link: a recording holds secrets and is written only to a regular file; give the path it points to",
                    )
                } else {
                    e
                })
            })?;
        if !file.metadata().map_err(io)?.is_file() {
            return Err(io(std::io::Error::other(
                "is not a regular file: a recording is written only to a regular file",
            )));
        }
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| {
                io(std::io::Error::other(format!(
                    "cannot be made readable by its owner only (mode 0600): {e}"
                )))
            })?;
        file.set_len(0).map_err(io)?;
        let first = format!("{}\n", header.to_json());
        file.write_all(first.as_bytes())
            .and_then(|_| file.flush())
            .map_err(io)?;
        Ok(Arc::new(Recorder {
            path: path.to_path_buf(),
            file: Mutex::new((file, first.len() as u64)),
            limit,
            failure: Mutex::new(None),
        }))
    }

    /// Appends one call of `capability` and its answer. A write failure, or a call that would take the
    /// recording past its limit, is kept for [`Recorder::finish`]; nothing is written after it.
    pub(crate) fn write(&self, capability: &str, call: &impl Serialize, answer: &impl Serialize) {
        #[derive(Serialize)]
        struct Line<'a, C, A> {
            capability: &'a str,
            call: &'a C,
            answer: &'a A,
        }
        let line = match serde_json::to_string(&Line {
            capability,
            call,
            answer,
        }) {
            Ok(line) => line + "\n",
            Err(source) => {
                let capability = capability.to_string();
                return self.fail(RecordProblem::Encode { capability, source });
            }
        };
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let (file, written) = &mut *guard;
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if failure.is_some() {
            return;
        }
        if *written + line.len() as u64 > self.limit {
            let problem = RecordProblem::Limit { limit: self.limit };
            tracing::error!(path = %self.path.display(), "recording stopped: {problem}");
            *failure = Some(problem);
            return;
        }
        match file.write_all(line.as_bytes()).and_then(|_| file.flush()) {
            Ok(()) => *written += line.len() as u64,
            Err(e) => {
                tracing::error!(path = %self.path.display(), "cannot write the recording: {e}");
                *failure = Some(RecordProblem::Write(e));
            }
        }
    }

    /// Keeps `problem` for [`Recorder::finish`] (the first one wins); nothing is written after it.
    fn fail(&self, problem: RecordProblem) {
        tracing::error!(path = %self.path.display(), "recording stopped: {problem}");
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(problem);
    }

    /// Whether every call was written; the first write error otherwise.
    pub(crate) fn finish(&self) -> Result<(), Incomplete> {
        match self
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            None => Ok(()),
            Some(failure) => Err(Incomplete {
                path: self.path.clone(),
                failure,
            }),
        }
    }
}

/// Why a recording stopped before its run ended: the calls after that are not in it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordProblem {
    /// A call or its answer cannot be written as JSON.
    #[error("a {capability} call cannot be written: {source}")]
    Encode {
        /// The capability of the call.
        capability: String,
        /// The encoder's error.
        source: serde_json::Error,
    },
    /// The next line would take the recording past its limit.
    #[error("it reached its limit of {} (calls after that are not in it)", crate::regular_file::size(*limit))]
    Limit {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file cannot be written.
    #[error(transparent)]
    Write(std::io::Error),
}

/// A recording that does not hold every call of its run ([`Recorder::finish`]).
#[derive(Debug, thiserror::Error)]
#[error("the recording {} is incomplete: {failure}", path.display())]
pub(crate) struct Incomplete {
    /// The recording.
    pub(crate) path: PathBuf,
    /// Why it stopped.
    #[source]
    pub(crate) failure: RecordProblem,
}

/// A replayed call that is not in the recording, or whose recorded answers were all given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replay: the call {what} is not in the recording {} (or was already answered)", path.display())]
pub(crate) struct ReplayMiss {
    /// The call, in words.
    pub(crate) what: String,
    /// The recording.
    pub(crate) path: PathBuf,
}

/// One recorded call.
#[derive(Debug, Clone)]
struct Line {
    number: usize,
    capability: String,
    call: Value,
    answer: Value,
}

/// A recording read back: its header and its calls.
#[derive(Debug, Clone)]
pub(crate) struct Recording {
    path: PathBuf,
    /// The run's fixed inputs.
    pub(crate) header: Header,
    lines: Vec<Line>,
}

impl Recording {
    /// Reads a recording and checks its header and the shape of every line.
    pub(crate) fn read(path: &Path) -> Result<Recording, RecordingError> {
        let format = |line: usize, problem: FormatProblem| RecordingError::Format {
            path: path.to_path_buf(),
            line,
            problem,
        };
        let io = |source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        };
        let bytes = crate::regular_file::read(path, MAX_RECORDING).map_err(|e| {
            io(match e {
                crate::regular_file::FileError::Io(e) => e,
                other => std::io::Error::other(other.to_string()),
            })
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not UTF-8 text: {e}"),
            ))
        })?;
        let mut documents = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value =
                serde_json::from_str(line).map_err(|e| format(i + 1, FormatProblem::NotJson(e)))?;
            documents.push((i + 1, value));
        }
        let Some((number, header)) = documents.first() else {
            return Err(format(1, FormatProblem::Empty));
        };
        let header =
            Header::from_json(header).map_err(|problem| format(*number, problem.into()))?;
        let mut lines = Vec::new();
        for (number, mut value) in documents.into_iter().skip(1) {
            let capability = value
                .get("capability")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if capability.is_empty() {
                return Err(format(number, FormatProblem::NoCapability));
            }
            let (Some(call), Some(answer)) = (
                value.get_mut("call").map(Value::take),
                value.get_mut("answer").map(Value::take),
            ) else {
                return Err(format(number, FormatProblem::NoCallOrAnswer));
            };
            lines.push(Line {
                number,
                capability,
                call,
                answer,
            });
        }
        Ok(Recording {
            path: path.to_path_buf(),
            header,
            lines,
        })
    }
}

/// A replay in progress: a recording, the [`Replayer`] of each capability that answers from it, and
/// the calls that were not in it.
pub(crate) struct Replay {
    recording: Recording,
    replayers: Mutex<Vec<Arc<Replayer>>>,
    misses: Arc<Mutex<Vec<String>>>,
}

impl Replay {
    /// Starts replaying `recording`.
    pub(crate) fn new(recording: Recording) -> Replay {
        Replay {
            recording,
            replayers: Mutex::new(Vec::new()),
            misses: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The recorded run's fixed inputs.
    pub(crate) fn header(&self) -> &Header {
        &self.recording.header
    }

    /// The replayer of `capability`'s lines (the same one however often it is asked for). `check`
    /// validates each recorded answer once, here, so that a replay never meets a malformed one; its
    /// error is reported with the line.
    pub(crate) fn replayer(
        &self,
        capability: &'static str,
        check: impl Fn(&Value) -> Result<(), MalformedAnswer>,
    ) -> Result<Arc<Replayer>, RecordingError> {
        let mut replayers = self.replayers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = replayers.iter().find(|r| r.capability == capability) {
            return Ok(existing.clone());
        }
        let mut slots = Vec::new();
        for line in self
            .recording
            .lines
            .iter()
            .filter(|l| l.capability == capability)
        {
            check(&line.answer).map_err(|problem| RecordingError::Format {
                path: self.recording.path.clone(),
                line: line.number,
                problem: problem.into(),
            })?;
            slots.push(Slot {
                call: line.call.clone(),
                answer: line.answer.clone(),
                used: false,
            });
        }
        let replayer = Arc::new(Replayer {
            capability,
            path: self.recording.path.clone(),
            slots: Mutex::new(slots),
            misses: self.misses.clone(),
        });
        replayers.push(replayer.clone());
        Ok(replayer)
    }

    /// Every call that was not in the recording, as `capability: call in words`, in the order made.
    pub(crate) fn misses(&self) -> Vec<String> {
        self.misses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many recorded calls of each replayed capability were not made (capabilities with none left
    /// out).
    pub(crate) fn unused(&self) -> Vec<(&'static str, usize)> {
        self.replayers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|r| (r.capability, r.unused()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// One recorded call and whether it has answered.
#[derive(Debug)]
struct Slot {
    call: Value,
    answer: Value,
    used: bool,
}

/// The recorded calls of one capability, answering strictly: each identical call in recorded order,
/// nothing else.
pub(crate) struct Replayer {
    capability: &'static str,
    path: PathBuf,
    slots: Mutex<Vec<Slot>>,
    misses: Arc<Mutex<Vec<String>>>,
}

impl Replayer {
    /// The recorded answer of the first unused call identical to `call`. Without one, the miss is
    /// kept for the end of the run and the error names the call (`describe` puts it in words) and the
    /// recording.
    pub(crate) fn answer(
        &self,
        call: &Value,
        describe: impl FnOnce(&Value) -> String,
    ) -> Result<Value, ReplayMiss> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.iter_mut().find(|s| !s.used && s.call == *call) {
            slot.used = true;
            return Ok(slot.answer.clone());
        }
        drop(slots);
        let what = describe(call);
        self.misses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{}: {what}", self.capability));
        Err(ReplayMiss {
            what,
            path: self.path.clone(),
        })
    }

    /// How many recorded calls were not made.
    pub(crate) fn unused(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| !s.used)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    const HEADER: &str = r#"{"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00Z"},"environment":{"veleroNamespace":"velero"}}"#;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("rec.jsonl");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_recording_reads_back_its_header_and_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: UNIX_EPOCH + Duration::new(1_777_716_000, 123_456_789),
            velero_namespace: "openshift-adp".into(),
        };
        let recorder = Recorder::create(&path, &header).unwrap();
        recorder.write("demo", &json!({"n": 1}), &json!({"ok": "one"}));
        recorder.write("other", &json!({"n": 1}), &json!({"ok": "elsewhere"}));
        recorder.finish().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "a recording holds secrets");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(r#"{"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00.123456789Z"},"environment":{"veleroNamespace":"openshift-adp"}}"#),
            "{text}"
        );
        let recording = Recording::read(&path).unwrap();
        assert_eq!(recording.header, header);
        let replay = Replay::new(recording);
        let demo = replay.replayer("demo", |_| Ok(())).unwrap();
        assert_eq!(
            demo.answer(&json!({"n": 1}), |_| unreachable!()),
            Ok(json!({"ok": "one"}))
        );
        // Lines of other capabilities are theirs: this one has nothing left, "other" one line.
        assert_eq!(demo.unused(), 0);
        replay.replayer("other", |_| Ok(())).unwrap();
        assert_eq!(replay.unused(), vec![("other", 1)]);
    }

    #[test]
    fn a_recording_stops_at_its_limit_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let header = Header {
            clock_start: UNIX_EPOCH,
            velero_namespace: String::new(),
        };
        let recorder = Recorder::create_with_limit(&path, &header, 400).unwrap();
        for n in 0..100 {
            recorder.write("demo", &json!({"n": n}), &json!({"ok": "x".repeat(20)}));
        }
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= 400, "{size} bytes");
        let e = recorder.finish().unwrap_err().to_string();
        assert!(
            e.ends_with("rec.jsonl is incomplete: it reached its limit of 400 bytes (calls after that are not in it)"),
            "{e}"
        );
        // What was written is a recording that replays (whole lines only).
        let replay = Replay::new(Recording::read(&path).unwrap());
        let demo = replay.replayer("demo", |_| Ok(())).unwrap();
        assert!(demo.unused() >= 3, "{}", demo.unused());
    }

    #[test]
    fn identical_calls_are_answered_in_recorded_order_then_miss() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            &format!(
                "{HEADER}\n\
                 {{\"capability\":\"demo\",\"call\":{{\"n\":1}},\"answer\":\"first\"}}\n\
                 {{\"capability\":\"demo\",\"call\":{{\"n\":2}},\"answer\":\"two\"}}\n\
                 {{\"capability\":\"demo\",\"call\":{{\"n\":1}},\"answer\":\"second\"}}\n"
            ),
        );
        let replay = Replay::new(Recording::read(&path).unwrap());
        let demo = replay.replayer("demo", |_| Ok(())).unwrap();
        let describe = |call: &Value| format!("number {}", call["n"]);
        assert_eq!(demo.answer(&json!({"n": 1}), describe), Ok(json!("first")));
        assert_eq!(demo.answer(&json!({"n": 1}), describe), Ok(json!("second")));
        let e = demo
            .answer(&json!({"n": 1}), describe)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("replay: the call number 1 is not in the recording ")
                && e.contains("rec.jsonl")
                && e.ends_with("(or was already answered)"),
            "{e}"
        );
        // A second replayer of the same capability is the same one: its answers are not given twice.
        let again = replay.replayer("demo", |_| Ok(())).unwrap();
        assert!(again.answer(&json!({"n": 3}), describe).is_err());
        assert_eq!(replay.misses(), vec!["demo: number 1", "demo: number 3"]);
        assert_eq!(replay.unused(), vec![("demo", 1)]);
        assert_eq!(again.answer(&json!({"n": 2}), describe), Ok(json!("two")));
        assert_eq!(replay.unused(), vec![]);
    }

    #[test]
    fn a_malformed_answer_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            &format!("{HEADER}\n\n{{\"capability\":\"demo\",\"call\":{{}},\"answer\":\"bad\"}}\n"),
        );
        let replay = Replay::new(Recording::read(&path).unwrap());
        let e = replay
            .replayer("demo", |answer| {
                let no_ok = || MalformedAnswer(serde::de::Error::custom("no ok"));
                answer.get("ok").map(|_| ()).ok_or_else(no_ok)
            })
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.ends_with("rec.jsonl:3: the answer is not {\"ok\": …} or {\"error\": {\"reason\": …, \"message\": …}}: no ok"),
            "{e}"
        );
    }

    #[test]
    fn malformed_recordings_are_refused_with_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let check = |text: &str, expected: &str| {
            let path = write(dir.path(), text);
            let e = Recording::read(&path).unwrap_err().to_string();
            assert!(e.contains(expected), "{e}");
        };
        check("", ":1: the file is empty");
        check(
            "{\"recording\":\"other\"}\n",
            ":1: not a velero-wasm recording",
        );
        check(
            "{\"recording\":\"velero-wasm\",\"version\":9}\n",
            ":1: recording version 9 is not supported (this host reads 1)",
        );
        check(
            "{\"recording\":\"velero-wasm\",\"version\":1,\"clock\":{\"start\":\"noon\"}}\n",
            ":1: clock.start \"noon\" is not an RFC 3339 time",
        );
        check(
            "{\"recording\":\"velero-wasm\",\"version\":1,\"clock\":{\"start\":\"2026-05-02T10:00:00Z\"},\"environment\":{\"veleroNamespace\":7}}\n",
            ":1: environment.veleroNamespace is 7, not a string",
        );
        check(&format!("{HEADER}\nnot json\n"), ":2: not JSON");
        check(
            &format!("{HEADER}\n{{\"call\":{{}},\"answer\":{{}}}}\n"),
            ":2: a call line needs a `capability`",
        );
        check(
            &format!("{HEADER}\n{{\"capability\":\"kube\",\"call\":{{}}}}\n"),
            ":2: a call line needs `call` and `answer`",
        );
        // A header without the environment (an older recording) means an unknown namespace.
        let path = write(
            dir.path(),
            r#"{"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00Z"}}"#,
        );
        assert_eq!(Recording::read(&path).unwrap().header.velero_namespace, "");
    }

    #[test]
    fn bytes_are_text_when_utf8_and_base64_otherwise() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Recorded(#[serde(with = "bytes")] Vec<u8>);
        let to_json = |b: &[u8]| serde_json::to_value(Recorded(b.to_vec())).unwrap();
        let from_json = |v: Value| {
            serde_json::from_value::<Recorded>(v)
                .map(|r| r.0)
                .map_err(|e| e.to_string())
        };
        assert_eq!(to_json(b"Action=x&y=1"), json!({"text": "Action=x&y=1"}));
        assert_eq!(to_json(b""), json!({"text": ""}));
        assert_eq!(to_json(&[0xff, 0x00, 0x10]), json!({"base64": "/wAQ"}));
        for bytes in [&b"eyJ.token\n"[..], &[0xff, 0x00, 0x10], &[]] {
            assert_eq!(from_json(to_json(bytes)).unwrap(), bytes);
        }
        assert!(from_json(json!({"base64": "%%"}))
            .unwrap_err()
            .contains("not base64"));
        assert!(from_json(json!("raw"))
            .unwrap_err()
            .contains("{\"text\": …} or {\"base64\": …}"));
    }
}
