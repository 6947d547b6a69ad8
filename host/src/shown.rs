//! Guest input quoted in the host's log lines and errors (a name, a namespace, a selector, an
//! origin), cut short so that a guest cannot fill a log line or a message with what it sends. Below
//! every floor that quotes guest input: the capabilities and the clients behind them.

/// Longest piece of guest input quoted in a host log line or error (a name, a namespace, an origin).
const MAX_SHOWN: usize = 256;

/// `text` for a log line or a message: cut to [`MAX_SHOWN`] bytes, marked with `…` when cut.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    shown_within(text, MAX_SHOWN)
}

/// `text` cut to `max` bytes, marked with `…` and its length when cut.
pub fn shown_within(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len()).into()
}
