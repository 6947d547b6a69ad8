//! Where the host's logs go: always stderr (stdout belongs to the plugin handshake and to `run`'s JSON).
//! People get a compact human format; the plugin mode gets hclog JSON lines (see `plugin::log_format`).

use std::io::{IsTerminal, Write};

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

/// Log levels as Velero spells them (`--log-level`), mapped onto tracing's.
pub(crate) fn filter(level: &str) -> EnvFilter {
    let directive = match level.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "warn" | "warning" => "warn",
        "error" | "fatal" | "panic" => "error",
        _ => "info",
    };
    EnvFilter::new(format!(
        "{directive},wasmtime=warn,cranelift=warn,wasmtime_wasi=warn"
    ))
}

/// Human-readable logs on stderr, for the CLI.
pub(crate) fn init_human(level: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_writer(|| LineCap::new(std::io::stderr()))
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_span_events(FmtSpan::NONE)
        .compact()
        .try_init();
}

/// Longest line the CLI writes to stderr: whatever a module logs, the host's lines stay readable.
pub(crate) const MAX_CLI_LINE: usize = 64 << 10;

/// A writer for one log line that passes at most [`MAX_CLI_LINE`] bytes and ends a cut line with a
/// note and a newline (the formatter writes each line through a writer of its own).
pub(crate) struct LineCap<W: Write> {
    inner: W,
    written: usize,
    cut: bool,
}

impl<W: Write> LineCap<W> {
    /// A capped writer for one line.
    pub(crate) fn new(inner: W) -> LineCap<W> {
        LineCap {
            inner,
            written: 0,
            cut: false,
        }
    }
}

impl<W: Write> Write for LineCap<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.cut {
            return Ok(buf.len());
        }
        let room = MAX_CLI_LINE - self.written;
        if buf.len() <= room {
            let n = self.inner.write(buf)?;
            self.written += n;
            return Ok(n);
        }
        // Cut at a character boundary, then say so.
        let mut end = room;
        while end > 0 && buf[end] & 0xC0 == 0x80 {
            end -= 1;
        }
        self.inner.write_all(&buf[..end])?;
        self.inner.write_all(" … (line cut)\n".as_bytes())?;
        self.cut = true;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_at_a_character_and_say_so() {
        let mut out = Vec::new();
        let line = format!("{}\n", "é".repeat(MAX_CLI_LINE));
        LineCap::new(&mut out).write_all(line.as_bytes()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.len() <= MAX_CLI_LINE + 20, "{}", text.len());
        assert!(text.ends_with(" … (line cut)\n"));
        assert_eq!(text.matches('\n').count(), 1);

        let mut out = Vec::new();
        LineCap::new(&mut out).write_all(b"short\n").unwrap();
        assert_eq!(out, b"short\n");
    }
}
