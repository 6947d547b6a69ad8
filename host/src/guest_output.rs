//! The guest's stdout and stderr. They never reach the host's stdout (which belongs to the go-plugin
//! handshake): each is captured in memory, keeping the last [`GuestOutput::CAPACITY`] bytes, so the
//! runtime can log them and quote, in the call's error, a Rust panic message or a Python traceback.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi_io::bytes::Bytes;

/// The captures of a call's stdout and stderr, which the runtime reads once the call is over.
#[derive(Clone, Default)]
pub struct GuestStreams {
    /// The guest's stdout, logged at debug level after the call.
    pub stdout: GuestOutput,
    /// The guest's stderr (quoted in errors: a Rust panic message or a Python traceback lands there).
    pub stderr: GuestOutput,
}

/// A bounded capture of one guest output stream; clones share the buffer.
#[derive(Clone, Default)]
pub struct GuestOutput {
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl GuestOutput {
    /// How much of the stream is kept: its last 16 KiB.
    pub const CAPACITY: usize = 16 << 10;

    fn append(&self, bytes: &[u8]) {
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        buffer.extend_from_slice(bytes);
        if buffer.len() > Self::CAPACITY {
            let excess = buffer.len() - Self::CAPACITY;
            buffer.drain(..excess);
        }
    }

    /// What was captured, as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        let buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&buffer).into_owned()
    }

    /// How much of a panic message or a traceback an error quotes: enough for an author to act on,
    /// little enough that a log line stays readable.
    pub const QUOTE_LIMIT: usize = 4 << 10;

    /// The message of the last Rust panic written here (`panicked at src/lib.rs:3:5: boom`), if any,
    /// on one line and at most [`GuestOutput::QUOTE_LIMIT`] bytes.
    pub fn panic_message(&self) -> Option<String> {
        let text = self.text();
        let start = text.rfind("panicked at ")?;
        let lines: Vec<&str> = text[start..]
            .lines()
            .take_while(|l| !l.starts_with("note: "))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        Some(bounded(&lines.join(" ")))
    }

    /// The last Python traceback written here, from `Traceback (most recent call last):` to the
    /// exception's own line, at most [`GuestOutput::QUOTE_LIMIT`] bytes (its first line and its
    /// tail: the exception and the innermost frames). componentize-py prints it when an exported
    /// function raises, then traps with a panic that names no cause.
    pub fn python_traceback(&self) -> Option<String> {
        const HEADER: &str = "Traceback (most recent call last):";
        let text = self.text();
        let start = text.rfind(HEADER)?;
        let lines: Vec<&str> = text[start..]
            .lines()
            .take_while(|l| !l.starts_with("thread '") && !l.starts_with("panicked at "))
            .collect();
        let traceback = lines.join("\n");
        Some(bounded(traceback.trim_end()))
    }
}

/// `text` itself when it fits in [`GuestOutput::QUOTE_LIMIT`]; otherwise its first line, `…` and as
/// much of its end as fits, cut at a line (or at least a character) boundary.
fn bounded(text: &str) -> String {
    if text.len() <= GuestOutput::QUOTE_LIMIT {
        return text.to_string();
    }
    let first = text.lines().next().unwrap_or_default();
    let first = &first[..floor_char_boundary(first, GuestOutput::QUOTE_LIMIT / 4)];
    let room = GuestOutput::QUOTE_LIMIT - first.len() - "\n…\n".len();
    let mut from = text.len() - room;
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let tail = &text[from..];
    let tail = match tail.find('\n') {
        Some(at) if at + 1 < tail.len() => &tail[at + 1..],
        _ => tail,
    };
    format!("{first}\n…\n{tail}")
}

/// The largest index at most `at` that is a character boundary of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

impl AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_finds_the_panic_line() {
        let out = GuestOutput::default();
        out.append(&vec![b'x'; GuestOutput::CAPACITY]);
        out.append(b"\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n");
        assert_eq!(out.text().len(), GuestOutput::CAPACITY);
        assert_eq!(
            out.panic_message().as_deref(),
            Some("panicked at src/lib.rs:3:5: boom")
        );
        assert_eq!(out.python_traceback(), None);
    }

    /// What componentize-py writes when an exported function raises: the traceback, then the panic of
    /// its runtime, which names no cause.
    const RAISED: &str = "Traceback (most recent call last):
  File \"/app.py\", line 40, in backup
    return label(item_json, host_list, current)
  File \"/app.py\", line 27, in label
    namespace = item.get(\"metadata\", {}).get(\"namespace\", \"\")
AttributeError: 'list' object has no attribute 'get'
thread '<unnamed>' panicked at src/lib.rs:1268:25:
Python function threw an unexpected exception
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
";

    #[test]
    fn finds_the_last_python_traceback_up_to_its_exception() {
        let out = GuestOutput::default();
        out.append(b"Traceback (most recent call last):\nValueError: an earlier call\n");
        out.append(RAISED.as_bytes());
        let traceback = out.python_traceback().unwrap();
        assert!(traceback
            .starts_with("Traceback (most recent call last):\n  File \"/app.py\", line 40"));
        assert!(traceback.ends_with("AttributeError: 'list' object has no attribute 'get'"));
        assert!(!traceback.contains("earlier call") && !traceback.contains("panicked"));
        assert_eq!(
            out.panic_message().as_deref(),
            Some("panicked at src/lib.rs:1268:25: Python function threw an unexpected exception")
        );
    }

    #[test]
    fn a_long_traceback_keeps_its_first_line_and_its_end_within_the_limit() {
        let out = GuestOutput::default();
        let mut text = String::from("Traceback (most recent call last):\n");
        for depth in 0..200 {
            text.push_str(&format!(
                "  File \"/app.py\", line {depth}, in récursion\n    récursion()\n"
            ));
        }
        text.push_str("RecursionError: maximum recursion depth exceeded\n");
        out.append(text.as_bytes());
        let traceback = out.python_traceback().unwrap();
        assert!(
            traceback.len() <= GuestOutput::QUOTE_LIMIT,
            "{}",
            traceback.len()
        );
        assert!(traceback.starts_with("Traceback (most recent call last):\n…\n  "));
        assert!(traceback.ends_with("RecursionError: maximum recursion depth exceeded"));
        assert!(traceback.contains("line 199, in"));

        let panicked = GuestOutput::default();
        panicked.append(
            format!(
                "thread 'main' panicked at src/lib.rs:1:1:\n{}\n",
                "é".repeat(5000)
            )
            .as_bytes(),
        );
        let message = panicked.panic_message().unwrap();
        assert!(message.len() <= GuestOutput::QUOTE_LIMIT && message.starts_with("panicked at"));
    }
}
