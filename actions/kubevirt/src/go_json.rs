//! JSON text as Go's `encoding/json` writes a value it decoded into `interface{}`: object keys sorted,
//! no whitespace, every number a float64 (`1.0` is written `1`, `1e21` is `1e+21`), and `<`, `>`, `&`,
//! U+2028 and U+2029 escaped. Upstream re-encodes a NetworkAttachmentDefinition's CNI config this way
//! when it rewrites it, so upstream mode writes the same bytes.

use serde_json::Value;

/// `value` encoded the way Go's `json.Marshal` encodes it.
pub fn encode(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => out.push_str(&string(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&string(key));
                out.push(':');
                write(&map[key], out);
            }
            out.push('}');
        }
    }
}

/// Go's float64 encoding: the shortest decimal that reads back, in exponent form below 1e-6 and from
/// 1e21 on (with a signed exponent of at least one digit: `1e+21`, `1e-7`).
fn float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                format!("{mantissa}e+{exponent}")
            }
            _ => text,
        }
    } else {
        format!("{f}")
    }
}

/// A JSON string with Go's escapes: serde_json's (the same short forms and `\u00xx`) plus the HTML
/// characters and the two JavaScript line separators Go escapes too. These characters only occur
/// inside the string, so replacing them in the encoded text is exact.
fn string(s: &str) -> String {
    let encoded = serde_json::to_string(s).unwrap_or_default();
    let mut out = String::with_capacity(encoded.len());
    for c in encoded.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_level_and_nothing_is_indented() {
        let v: Value =
            serde_json::from_str(r#"{"z": 1, "a": {"y": [true, null], "b": "x"}}"#).unwrap();
        assert_eq!(encode(&v), r#"{"a":{"b":"x","y":[true,null]},"z":1}"#);
    }

    #[test]
    fn numbers_are_float64_as_go_writes_them() {
        let v: Value = serde_json::from_str(
            "[1.0, 1500, 0.5, 1e21, 1e-7, 0.000001, -2.5e30, 12345678901234567890, 0]",
        )
        .unwrap();
        assert_eq!(
            encode(&v),
            "[1,1500,0.5,1e+21,1e-7,0.000001,-2.5e+30,12345678901234567000,0]"
        );
    }

    #[test]
    fn html_characters_and_line_separators_are_escaped() {
        let v = json!({"k": "a<b>&c\u{2028}\n\"q\"\\"});
        assert_eq!(
            encode(&v),
            r#"{"k":"a\u003cb\u003e\u0026c\u2028\n\"q\"\\"}"#
        );
    }
}
