//! The `log` capability: a guest's lines go through `tracing`, tagged with the module, the action and
//! the item (`resource`, `namespace`, `name`, always strings, as Velero requires), the guest's own
//! key-value pairs as one JSON object in `fields`.

use super::CallState;
use crate::bindings::velero_wasm::plugin::log::{Host, Level};

/// Lines one call may write; later ones are dropped (with one warning saying so).
pub const MAX_LINES_PER_CALL: u32 = 1000;

/// Longest message kept; longer ones are cut (Velero splits lines over 64 KiB).
const MAX_MESSAGE: usize = 8 << 10;

impl Host for CallState {
    fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        self.log_lines += 1;
        if self.log_lines > MAX_LINES_PER_CALL {
            if self.log_lines == MAX_LINES_PER_CALL + 1 {
                emit(
                    self,
                    Level::Warn,
                    "the module logged more than 1000 lines in one call; dropping the rest",
                    "{}",
                );
            }
            return;
        }
        let fields = serde_json::Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(truncate(v))))
                .collect(),
        )
        .to_string();
        emit(self, level, &truncate(message), &fields);
    }
}

fn truncate(mut text: String) -> String {
    if text.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

fn emit(state: &CallState, level: Level, message: &str, fields: &str) {
    let call = &state.call;
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
        ($macro:ident) => {
            tracing::$macro!(target: "guest", module, action, resource = resource.as_str(), namespace, name, fields, "{message}")
        };
    }
    match level {
        Level::Trace => event!(trace),
        Level::Debug => event!(debug),
        Level::Info => event!(info),
        Level::Warn => event!(warn),
        Level::Error => event!(error),
    }
}
