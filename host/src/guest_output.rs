//! The guest's stdout and stderr. They never reach the host's stdout (which belongs to the go-plugin
//! handshake): each is captured in memory, keeping the last [`GuestOutput::CAPACITY`] bytes, so the
//! runtime can log them and quote a Rust panic message in the call's error.

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
    /// The guest's stderr (quoted in errors: a Rust panic message lands there).
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

    /// The message of the last Rust panic written here (`panicked at src/lib.rs:3:5: boom`), if any.
    pub fn panic_message(&self) -> Option<String> {
        let text = self.text();
        let start = text.rfind("panicked at ")?;
        let lines: Vec<&str> = text[start..]
            .lines()
            .take_while(|l| !l.starts_with("note: "))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        Some(lines.join(" "))
    }
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
    }
}
