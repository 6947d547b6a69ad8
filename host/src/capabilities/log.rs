//! The `log` capability: a guest's lines go through `tracing`, tagged with the module, the action and
//! the item (`resource`, `namespace`, `name`, always strings, as Velero requires), the guest's own
//! key-value pairs as one JSON object in `fields`.
//!
//! A line is bounded before anything is formatted, in one pass over what the guest sent: the message
//! and each value are cut, fields beyond [`MAX_FIELDS`] or [`MAX_FIELD_BYTES`] are dropped (the line
//! says how many in `droppedFields`), and one call may log at most [`MAX_LINES_PER_CALL`] lines and
//! [`MAX_LOG_BYTES_PER_CALL`] bytes. A `log` call therefore costs time linear in what the guest sent,
//! and the host never writes more than that budget on a guest's behalf.

use serde_json::{Map, Value};

use super::call_id::CallId;
use crate::bindings::velero_wasm::plugin::log::{Host, Level};

/// Lines one call may write; later ones are dropped (with one warning saying so).
pub(crate) const MAX_LINES_PER_CALL: u32 = 1000;

/// Bytes (messages and fields, as JSON) one call may write; later lines are dropped (with one warning).
pub(crate) const MAX_LOG_BYTES_PER_CALL: usize = 1 << 20;

/// Fields kept of one line; the others are dropped and counted.
pub(crate) const MAX_FIELDS: usize = 64;

/// Bytes of one line's fields (keys and values as JSON); fields beyond are dropped and counted.
pub(crate) const MAX_FIELD_BYTES: usize = 32 << 10;

/// Longest message kept; longer ones are cut (Velero splits lines over 64 KiB).
const MAX_MESSAGE: usize = 8 << 10;

/// Longest field value kept.
const MAX_VALUE: usize = 4 << 10;

/// Longest field key kept.
const MAX_KEY: usize = 256;

/// What one call has logged so far: the part of the call's state only this capability reads.
#[derive(Debug, Default)]
pub(crate) struct LogState {
    /// Lines the guest has logged in this call.
    lines: u32,
    /// Bytes (messages and fields) the guest has logged in this call.
    bytes: usize,
    /// Whether the guest's log budget ran out in this call (said once, then lines are dropped).
    dropped: bool,
}

/// What the `log` capability sees of a call: who calls (its lines are tagged with it), and what the
/// call has logged so far.
pub(crate) struct LogView<'a> {
    pub(super) call: &'a CallId,
    pub(super) log: &'a mut LogState,
}

/// The `log` import's host functions take a [`LogView`] of the call.
pub(super) struct LogHost;

impl wasmtime::component::HasData for LogHost {
    type Data<'a> = LogView<'a>;
}

impl Host for LogView<'_> {
    fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        if self.log.dropped {
            return;
        }
        if self.log.lines == MAX_LINES_PER_CALL {
            self.log.dropped = true;
            let warning = format!(
                "the module logged more than {MAX_LINES_PER_CALL} lines in one call; dropping the rest"
            );
            emit(self.call, Level::Warn, &warning, "{}", 0);
            return;
        }
        let message = truncate(message, MAX_MESSAGE);
        let (fields, dropped) = bounded_fields(fields);
        let size = json_len(&message) + fields.len();
        if self.log.bytes + size > MAX_LOG_BYTES_PER_CALL {
            self.log.dropped = true;
            let warning = format!(
                "the module logged more than {} KiB in one call; dropping the rest",
                MAX_LOG_BYTES_PER_CALL >> 10
            );
            emit(self.call, Level::Warn, &warning, "{}", 0);
            return;
        }
        self.log.lines += 1;
        self.log.bytes += size;
        emit(self.call, level, &message, &fields, dropped);
    }
}

/// The guest's fields as one JSON object, within [`MAX_FIELDS`] and [`MAX_FIELD_BYTES`], and how many
/// were dropped. Each key and value is measured once: linear in what the guest sent.
fn bounded_fields(fields: Vec<(String, String)>) -> (String, usize) {
    let total = fields.len();
    let mut kept = Map::new();
    let mut bytes = 2; // {}
    for (key, value) in fields {
        if kept.len() == MAX_FIELDS {
            break;
        }
        let key = truncate(key, MAX_KEY);
        let value = truncate(value, MAX_VALUE);
        // "key":"value",
        let size = json_len(&key) + json_len(&value) + 2;
        if bytes + size > MAX_FIELD_BYTES {
            break;
        }
        bytes += size;
        kept.insert(key, Value::String(value));
    }
    let dropped = total - kept.len();
    (Value::Object(kept).to_string(), dropped)
}

/// The length of `text` as a JSON string, quotes included.
fn json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

fn emit(call: &CallId, level: Level, message: &str, fields: &str, dropped: usize) {
    let (resource, namespace, name) = match call.item() {
        Some(item) => (
            item.group_resource(),
            item.namespace.as_str(),
            item.name.as_str(),
        ),
        None => (String::new(), "", ""),
    };
    let module = &*call.module;
    let action = call.action.as_str();
    macro_rules! event {
        ($macro:ident $(, $key:ident = $value:expr)*) => {
            if dropped > 0 {
                tracing::$macro!(target: "guest", module, action, resource = resource.as_str(), namespace, name, fields, droppedFields = dropped, $($key = $value,)* "{message}")
            } else {
                tracing::$macro!(target: "guest", module, action, resource = resource.as_str(), namespace, name, fields, $($key = $value,)* "{message}")
            }
        };
    }
    match (level, call.is_shadow()) {
        (Level::Trace, _) => event!(trace),
        (Level::Debug, _) => event!(debug),
        (Level::Info, _) => event!(info),
        // A shadow's warnings and errors are the candidate's business, not the backup's: at info,
        // with the level the guest asked for (docs/operation.md#what-velero-counts).
        (Level::Warn, true) => event!(info, shadow = true, guestLevel = "warn"),
        (Level::Error, true) => event!(info, shadow = true, guestLevel = "error"),
        (Level::Warn, false) => event!(warn),
        (Level::Error, false) => event!(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_bounded_in_count_and_bytes_and_the_rest_counted() {
        let many: Vec<(String, String)> = (0..1000)
            .map(|i| (format!("k{i}"), "v".repeat(4096)))
            .collect();
        let (json, dropped) = bounded_fields(many);
        assert!(json.len() <= MAX_FIELD_BYTES, "{}", json.len());
        let kept: Map<String, Value> = serde_json::from_str(&json).unwrap();
        assert_eq!(kept.len() + dropped, 1000);
        assert!(kept.len() >= 7, "as many 4 KiB fields as fit are kept");

        let small: Vec<(String, String)> =
            (0..100).map(|i| (format!("k{i}"), "v".into())).collect();
        let (json, dropped) = bounded_fields(small);
        let kept: Map<String, Value> = serde_json::from_str(&json).unwrap();
        assert_eq!((kept.len(), dropped), (MAX_FIELDS, 100 - MAX_FIELDS));
    }

    #[test]
    fn escaped_values_count_at_their_json_size() {
        let control = "\u{1}".repeat(4096);
        assert_eq!(json_len(&control), 2 + 6 * 4096);
        assert_eq!(json_len("a\"b"), 6);
        assert_eq!(json_len("é"), 4);
        let (json, _) = bounded_fields(vec![("k".into(), control); 10]);
        assert!(json.len() <= MAX_FIELD_BYTES, "{}", json.len());
        let (json, dropped) = bounded_fields(vec![("k\n".into(), "\"x\\".into())]);
        assert_eq!(
            (json.len(), dropped),
            (2 + json_len("k\n") + json_len("\"x\\") + 1, 0)
        );
    }
}
