//! What can go wrong while signing, and the rule that no secret ever leaves in an error.

/// Why a URL could not be signed. Messages follow the texts of docs/hcp.md#s5 and docs/signing.md#s6.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is incomplete or malformed.
    #[error("{0}")]
    Invalid(String),
    /// A remote service refused or answered badly.
    #[error("{0}")]
    Remote(String),
    /// The request could not be made (denied, timeout, transport).
    #[error("{0}")]
    Transport(String),
}

impl Error {
    /// The same error with `context: ` in front of its message.
    pub fn context(self, context: &str) -> Error {
        match self {
            Error::Invalid(m) => Error::Invalid(format!("{context}: {m}")),
            Error::Remote(m) => Error::Remote(format!("{context}: {m}")),
            Error::Transport(m) => Error::Transport(format!("{context}: {m}")),
        }
    }

    /// The same error with every occurrence of each secret replaced by `[redacted]`. Values shorter
    /// than 4 characters are left alone: they are not secrets worth the name and would garble text.
    pub fn redact(self, secrets: &[&str]) -> Error {
        let scrub = |mut m: String| {
            for secret in secrets.iter().filter(|s| s.len() >= 4) {
                m = m.replace(*secret, "[redacted]");
            }
            m
        };
        match self {
            Error::Invalid(m) => Error::Invalid(scrub(m)),
            Error::Remote(m) => Error::Remote(scrub(m)),
            Error::Transport(m) => Error::Transport(scrub(m)),
        }
    }
}

/// At most this much of a remote answer is quoted in an error.
pub const QUOTED_BODY: usize = 512;

/// A response body as quoted in an error: lossy UTF-8, trimmed, cut to [`QUOTED_BODY`] bytes.
pub fn quote_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.len() <= QUOTED_BODY {
        return text.to_string();
    }
    let mut cut = QUOTED_BODY;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_removes_every_secret() {
        let e = Error::Remote("STS returned HTTP 403: token eyJabc not valid for eyJabc".into());
        assert_eq!(
            e.redact(&["eyJabc", ""]).to_string(),
            "STS returned HTTP 403: token [redacted] not valid for [redacted]"
        );
    }

    #[test]
    fn long_bodies_are_cut() {
        let body = "é".repeat(400);
        let quoted = quote_body(body.as_bytes());
        assert!(quoted.len() <= QUOTED_BODY + "…".len());
        assert!(quoted.ends_with('…'));
    }
}
