//! How a command ends: its exit status, and the message it prints when it fails.

/// Exit status: the command worked.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit status: the action (or something it needed) failed.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit status: bad input (unreadable file, bad JSON or YAML, unknown action, wrong item).
pub(crate) const EXIT_BAD_INPUT: u8 = 2;

/// Longest failure message printed: a module's error is the module's to size, stderr is not.
const MAX_MESSAGE: usize = 16 << 10;

/// A command's failure: what to print, and the exit status.
pub(crate) struct Failure {
    /// Exit status.
    pub(crate) code: u8,
    /// One line (or a few) for stderr.
    pub(crate) message: String,
}

impl Failure {
    pub(super) fn bad_input(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message: message.to_string(),
        }
    }

    /// A failure whose message (an action's own error, quoted) is cut to [`MAX_MESSAGE`] bytes.
    pub(super) fn failed(message: impl std::fmt::Display) -> Failure {
        let mut message = message.to_string();
        if message.len() > MAX_MESSAGE {
            let all = message.len();
            let mut end = MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(&format!("… ({all} bytes in all)"));
        }
        Failure {
            code: EXIT_FAILED,
            message,
        }
    }

    pub(super) fn prefixed(self, prefix: &str) -> Failure {
        Failure {
            code: self.code,
            message: format!("{prefix}{}", self.message),
        }
    }
}
