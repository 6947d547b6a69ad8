//! Logs as Velero reads them from a plugin's stderr (docs/plugin-protocol.md#s13): one hclog JSON object per line, with
//! string `@level` (trace, debug, info, warn, error), string `@message`, `@timestamp` in hclog's exact
//! layout, and every other field as a string, so that `namespace`, `name` and `resource` can never
//! crash Velero's log hooks. The fields of the spans an event happens in (the RPC's action and item)
//! are added to it; a guest's `fields` (a JSON object from the `log` capability) become top-level keys.
//! Lines stay under the 64 KiB Velero's reader splits at. A panic hook writes panics the same way.

use std::io::Write;
use std::time::SystemTime;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// Longest `@message` kept.
const MAX_MESSAGE: usize = 16 << 10;
/// Longest field value kept.
const MAX_VALUE: usize = 4 << 10;
/// Longest line written (Velero's reader splits lines at 64 KiB and logs the pieces at debug).
pub(crate) const MAX_LINE: usize = 60 << 10;

/// Keys a guest's own fields may not take: ours, and those Velero drops or interprets.
const RESERVED: &[&str] = &[
    "module",
    "action",
    "resource",
    "namespace",
    "name",
    "logSource",
    "time",
    "timestamp",
    "level",
    "msg",
    "error",
];

/// Installs hclog JSON logging on stderr at `level` (Velero's spelling), and the panic hook. The
/// transport's own chatter (h2, hyper, tower) is kept to warnings: at Velero's `--log-level debug`
/// it would drown the lines that matter.
pub(crate) fn init(level: &str) {
    let mut filter = crate::logging::filter(level);
    for quiet in [
        "h2=warn",
        "hyper=warn",
        "hyper_util=warn",
        "tower=warn",
        "tonic=warn",
    ] {
        if let Ok(directive) = quiet.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let _ = tracing_subscriber::registry()
        .with(HclogLayer::new(std::io::stderr))
        .with(filter)
        .try_init();
    install_panic_hook();
}

/// A [`Layer`] writing hclog JSON lines to the writers `W` makes.
pub(crate) struct HclogLayer<W> {
    make_writer: W,
}

impl<W> HclogLayer<W> {
    /// A layer writing through `make_writer` (e.g. `std::io::stderr`).
    pub(crate) fn new(make_writer: W) -> Self {
        HclogLayer { make_writer }
    }
}

/// The fields of a span, kept in its extensions.
struct SpanFields(Vec<(String, String)>);

impl<S, W> Layer<S> for HclogLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields.pairs));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = Fields::default();
        values.record(&mut fields);
        let mut extensions = span.extensions_mut();
        match extensions.get_mut::<SpanFields>() {
            Some(SpanFields(existing)) => existing.extend(fields.pairs),
            None => extensions.insert(SpanFields(fields.pairs)),
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut pairs = Vec::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(SpanFields(fields)) = span.extensions().get::<SpanFields>() {
                    pairs.extend(fields.iter().cloned());
                }
            }
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        pairs.extend(fields.pairs);
        let metadata = event.metadata();
        let source = match (metadata.target(), metadata.file(), metadata.line()) {
            ("guest", _, _) => None,
            (_, Some(file), Some(line)) => Some(format!("{file}:{line}")),
            _ => None,
        };
        let line = format_line(
            *metadata.level(),
            &fields.message,
            &pairs,
            source.as_deref(),
            SystemTime::now(),
        );
        let _ = self.make_writer.make_writer().write_all(line.as_bytes());
    }
}

/// The values of an event's or span's fields, all as strings.
#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string());
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.pairs.push((field.name().to_string(), value));
        }
    }
}

/// One hclog JSON line, `\n`-terminated: `@level`, `@message`, `@timestamp`, then the fields (later
/// ones replace earlier ones of the same key; empty `namespace`/`name`/`resource` are left out).
pub(crate) fn format_line(
    level: Level,
    message: &str,
    pairs: &[(String, String)],
    source: Option<&str>,
    now: SystemTime,
) -> String {
    let mut object = Map::new();
    object.insert("@level".into(), Value::String(level_name(level).into()));
    object.insert("@message".into(), Value::String(cut(message, MAX_MESSAGE)));
    object.insert("@timestamp".into(), Value::String(timestamp(now)));
    if let Some(source) = source {
        object.insert("logSource".into(), Value::String(source.to_string()));
        object.insert("@logSourceSetBy".into(), Value::String("plugin".into()));
    }
    for (key, value) in pairs {
        if key == "fields" {
            if let Ok(Value::Object(guest)) = serde_json::from_str::<Value>(value) {
                for (key, value) in guest {
                    let key = if key.starts_with('@') || RESERVED.contains(&key.as_str()) {
                        format!("fields.{key}")
                    } else {
                        key
                    };
                    let text = match value {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    object.insert(key, Value::String(cut(&text, MAX_VALUE)));
                }
                continue;
            }
        }
        if value.is_empty() && matches!(key.as_str(), "namespace" | "name" | "resource") {
            continue;
        }
        object.insert(key.clone(), Value::String(cut(value, MAX_VALUE)));
    }
    // Each entry is serialised once; when the line is too long, entries are dropped from the end
    // until it fits, and the line says so. Linear in the size of the line, whatever its fields.
    let mut parts: Vec<String> = object
        .into_iter()
        .map(|(key, value)| {
            let mut part = Value::String(key).to_string();
            part.push(':');
            part.push_str(&value.to_string());
            part
        })
        .collect();
    let mut size = 2 + parts.iter().map(String::len).sum::<usize>() + parts.len() - 1;
    if size > MAX_LINE {
        const TRUNCATED: &str = r#""truncated":"true""#;
        while parts.len() > 3 && size + 1 + TRUNCATED.len() > MAX_LINE {
            if let Some(dropped) = parts.pop() {
                size -= dropped.len() + 1;
            }
        }
        parts.push(TRUNCATED.to_string());
        size += 1 + TRUNCATED.len();
    }
    let mut line = String::with_capacity(size + 1);
    line.push('{');
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(part);
    }
    line.push_str("}\n");
    line
}

/// hclog's level names.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// The time in hclog's JSON layout, `2006-01-02T15:04:05.000000Z07:00`, in UTC.
pub(crate) fn timestamp(now: SystemTime) -> String {
    humantime::format_rfc3339_micros(now).to_string()
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Makes a panic (a host bug) an error line Velero shows, instead of raw text it would log at debug.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string());
        let source = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()));
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        let line = format_line(
            Level::ERROR,
            &format!("velero-wasm panicked: {payload}"),
            &[("thread".to_string(), thread)],
            source.as_deref(),
            SystemTime::now(),
        );
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }));
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn parse(line: &str) -> Map<String, Value> {
        assert!(
            line.ends_with('\n') && !line[..line.len() - 1].contains('\n'),
            "{line:?}"
        );
        match serde_json::from_str(line).unwrap() {
            Value::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn timestamps_use_hclogs_exact_layout() {
        let t = UNIX_EPOCH + Duration::from_micros(1_738_317_600_123_456);
        assert_eq!(timestamp(t), "2025-01-31T10:00:00.123456Z");
        assert_eq!(
            timestamp(UNIX_EPOCH + Duration::from_secs(1_738_317_600)),
            "2025-01-31T10:00:00.000000Z"
        );
    }

    #[test]
    fn a_line_has_string_level_message_and_fields() {
        let pairs = vec![
            ("action".to_string(), "example.io/a".to_string()),
            ("namespace".to_string(), "shop".to_string()),
            ("name".to_string(), "".to_string()),
            (
                "fields".to_string(),
                r#"{"step":"2","name":"spoof","@level":"x","count":3}"#.to_string(),
            ),
        ];
        let line = format_line(Level::WARN, "hello", &pairs, Some("src/x.rs:3"), UNIX_EPOCH);
        let o = parse(&line);
        assert_eq!(o["@level"], "warn");
        assert_eq!(o["@message"], "hello");
        assert_eq!(o["@timestamp"], "1970-01-01T00:00:00.000000Z");
        assert_eq!(o["logSource"], "src/x.rs:3");
        assert_eq!(o["@logSourceSetBy"], "plugin");
        assert_eq!(o["namespace"], "shop");
        assert!(!o.contains_key("name"), "an empty name is left out");
        assert_eq!(o["step"], "2");
        assert_eq!(o["count"], "3", "guest values become strings");
        assert_eq!(
            o["fields.name"], "spoof",
            "a guest cannot replace the item's name"
        );
        assert_eq!(o["fields.@level"], "x");
        assert!(o.values().all(Value::is_string));
    }

    #[test]
    fn long_lines_are_cut_below_64_kib() {
        let big = "é".repeat(50_000);
        let pairs: Vec<(String, String)> =
            (0..40).map(|i| (format!("k{i}"), big.clone())).collect();
        let line = format_line(Level::INFO, &big, &pairs, None, UNIX_EPOCH);
        assert!(line.len() <= MAX_LINE + 1, "{}", line.len());
        let o = parse(&line);
        assert_eq!(o["truncated"], "true");
        assert!(o["@message"].as_str().unwrap().ends_with('…'));
    }

    #[test]
    fn many_fields_are_dropped_in_one_pass_and_the_line_stays_identical_json() {
        let value = "v".repeat(4 << 10);
        let fields: Map<String, Value> = (0..2000)
            .map(|i| (format!("k{i}"), Value::String(value.clone())))
            .collect();
        let pairs = vec![("fields".to_string(), Value::Object(fields).to_string())];
        let line = format_line(Level::ERROR, "m", &pairs, None, UNIX_EPOCH);
        assert!(line.len() <= MAX_LINE + 1, "{}", line.len());
        let o = parse(&line);
        assert_eq!(o["truncated"], "true");
        assert_eq!(o["k0"].as_str().unwrap().len(), 4 << 10);
        assert!(o.len() > 10 && !o.contains_key("k1999"));

        let short = format_line(
            Level::INFO,
            "m",
            &[("a".into(), "b".into())],
            None,
            UNIX_EPOCH,
        );
        assert_eq!(
            short,
            "{\"@level\":\"info\",\"@message\":\"m\",\"@timestamp\":\"1970-01-01T00:00:00.000000Z\",\"a\":\"b\"}\n"
        );
    }

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    #[test]
    fn events_carry_the_fields_of_their_spans() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(HclogLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::error_span!(
                "rpc",
                action = "example.io/a",
                resource = "pods",
                namespace = "ns",
                name = "p"
            );
            let _guard = span.enter();
            tracing::info!(count = 3, "inside");
            tracing::debug!(target: "guest", name = "", fields = r#"{"k":"v"}"#, "from the guest");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Map<String, Value>> =
            text.lines().map(|l| parse(&format!("{l}\n"))).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["@level"], "info");
        assert_eq!(lines[0]["action"], "example.io/a");
        assert_eq!(lines[0]["resource"], "pods");
        assert_eq!(lines[0]["count"], "3");
        assert!(lines[0]["logSource"]
            .as_str()
            .unwrap()
            .contains("log_format.rs"));
        assert_eq!(lines[1]["@level"], "debug");
        assert_eq!(lines[1]["k"], "v");
        assert_eq!(lines[1]["namespace"], "ns");
        assert_eq!(
            lines[1]["name"], "p",
            "an empty event field does not hide the span's"
        );
        assert!(
            !lines[1].contains_key("logSource"),
            "a guest line has no host source location"
        );
    }
}
