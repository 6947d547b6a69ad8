//! Objects as JSON text: what the API server sends is checked to be JSON once, where it enters the
//! host, and handed to the guest as the same text. A read is never parsed into a tree and written out
//! again on its way through (the guest parses it anyway); only host code that looks inside an object
//! (the write log, the host's own calls) parses it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// How many levels of arrays and objects the host reads into a tree: serde_json's bound (it refuses
/// the 128th), which keeps the recursion of a parse off the end of the stack.
pub(crate) const MAX_DEPTH: usize = 127;

/// Why a document, well-formed JSON, cannot be read into a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TreeError {
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    #[error("nested deeper than {MAX_DEPTH} levels: not read")]
    TooDeep,
    /// What else a tree cannot hold (a number past the range of `f64`), in serde_json's words.
    #[error("cannot be read as a tree ({0}): not read")]
    Other(String),
}

/// One JSON document, known to be well-formed, kept as its text.
pub struct Json(Box<RawValue>);

impl Json {
    /// Checks that `bytes` are one JSON document and keeps them as they are.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Json, serde_json::Error> {
        serde_json::from_slice::<&RawValue>(bytes).map(|raw| Json(raw.to_owned()))
    }

    /// A document already checked by serde_json (an item of a list parsed as such).
    pub(crate) fn from_raw(raw: Box<RawValue>) -> Json {
        Json(raw)
    }

    /// JSON `null` (a delete's answer, an empty body).
    pub(crate) fn null() -> Json {
        Json(RawValue::NULL.to_owned())
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The text, without copying it.
    pub(crate) fn into_string(self) -> String {
        Box::<str>::from(self.0).into_string()
    }

    /// The document as a tree, for host code that reads fields of it. Checking that the text is
    /// JSON set no bound on its depth (the guest gets it as it is), but a tree is built by recursion:
    /// past [`MAX_DEPTH`] levels it is an error that says so, never a `null` that would read as
    /// "nothing there".
    pub(crate) fn to_value(&self) -> Result<Value, TreeError> {
        serde_json::from_str(self.as_str()).map_err(|e| {
            // serde_json's only word for its depth bound (its error codes are private).
            if e.to_string().starts_with("recursion limit exceeded") {
                TreeError::TooDeep
            } else {
                TreeError::Other(e.to_string())
            }
        })
    }

    /// A list item with `apiVersion` and `kind` first, as a get of the object returns it. The API
    /// server leaves both out of the items of a list of built-in types. An item that has both already,
    /// or that is not an object, is kept as it is.
    pub(crate) fn with_type(self, api_version: &str, kind: &str) -> Json {
        /// Whether a field is there at all (`null` included).
        #[derive(Default)]
        struct Present(bool);
        impl<'de> Deserialize<'de> for Present {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Present, D::Error> {
                serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
            }
        }
        #[derive(Deserialize)]
        struct TypeMeta {
            #[serde(rename = "apiVersion", default)]
            api_version: Present,
            #[serde(default)]
            kind: Present,
        }
        let text = self.as_str();
        if !text.starts_with('{') {
            return self;
        }
        let meta = match serde_json::from_str::<TypeMeta>(text) {
            Ok(meta) => meta,
            Err(_) => return self,
        };
        match (meta.api_version.0, meta.kind.0) {
            (true, true) => self,
            (false, false) => {
                // Neither key is there: put both in front of the item's own fields.
                let rest = text[1..].trim_start();
                let separator = if rest.starts_with('}') { "" } else { "," };
                let typed = format!(
                    "{{\"apiVersion\":{},\"kind\":{}{separator}{rest}",
                    Value::from(api_version),
                    Value::from(kind)
                );
                Json::parse(typed.as_bytes()).unwrap_or(self)
            }
            // One of the two: rebuild the object so that neither key appears twice.
            _ => match self.to_value() {
                Ok(value) => Json::from(typed_value(value, api_version, kind)),
                // Too deep to rebuild: kept as it is, as a document that is not an object is.
                Err(_) => self,
            },
        }
    }
}

/// `item` with `apiVersion` and `kind` first and the item's other fields after them.
fn typed_value(item: Value, api_version: &str, kind: &str) -> Value {
    let Value::Object(fields) = item else {
        return item;
    };
    let mut typed = serde_json::Map::with_capacity(fields.len() + 2);
    typed.insert("apiVersion".into(), Value::from(api_version));
    typed.insert("kind".into(), Value::from(kind));
    for (key, value) in fields {
        if key != "apiVersion" && key != "kind" {
            typed.insert(key, value);
        }
    }
    Value::Object(typed)
}

impl From<Value> for Json {
    fn from(value: Value) -> Json {
        // Writing a `Value` out cannot fail: its keys are strings and its numbers finite.
        Json(serde_json::value::to_raw_value(&value).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }
}

impl From<&Value> for Json {
    fn from(value: &Value) -> Json {
        Json(serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }
}

impl Clone for Json {
    fn clone(&self) -> Json {
        Json(self.0.to_owned())
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Two documents are equal when they hold the same JSON, however it is spaced.
impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.as_str() == other.as_str()
            || matches!((self.to_value(), other.to_value()), (Ok(a), Ok(b)) if a == b)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// Read from any format (a recording is read through a `Value`), so through a tree.
impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        Value::deserialize(deserializer).map(Json::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn typed(item: &str) -> String {
        Json::parse(item.as_bytes())
            .unwrap()
            .with_type("v1", "Pod")
            .into_string()
    }

    #[test]
    fn a_list_item_gets_its_type_in_front_of_its_own_fields() {
        assert_eq!(
            typed(r#"{"metadata":{"name":"a"},"spec":{}}"#),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{}}"#
        );
        assert_eq!(typed("{ }"), r#"{"apiVersion":"v1","kind":"Pod"}"#);
        assert_eq!(
            typed("{\n  \"a\": 1}"),
            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"a\": 1}"
        );
    }

    #[test]
    fn an_item_with_its_type_keeps_it_and_no_key_appears_twice() {
        let both = r#"{"kind":"Other","apiVersion":"x/v2","a":1}"#;
        assert_eq!(typed(both), both);
        let one: Value = serde_json::from_str(&typed(r#"{"kind":"Other","a":1}"#)).unwrap();
        assert_eq!(one, json!({"apiVersion": "v1", "kind": "Pod", "a": 1}));
        let text = typed(r#"{"kind":"Other","a":1}"#);
        assert_eq!(text.matches("\"kind\"").count(), 1, "{text}");
        assert_eq!(typed("[1]"), "[1]");
        let null_kind = typed(r#"{"kind":null,"a":1}"#);
        assert_eq!(null_kind.matches("\"kind\"").count(), 1, "{null_kind}");
    }

    /// `levels` arrays, one inside the other.
    fn nested(levels: usize) -> Json {
        Json::parse(format!("{}{}", "[".repeat(levels), "]".repeat(levels)).as_bytes()).unwrap()
    }

    /// A document deeper than a tree is read is kept as JSON (for the guest) but read into a tree it
    /// is an error that says so, not `null`; two such documents are equal only when their text is.
    #[test]
    fn a_document_too_deep_for_a_tree_is_an_error_not_null() {
        assert!(nested(MAX_DEPTH).to_value().unwrap().is_array());
        let deep = nested(MAX_DEPTH + 1);
        assert_eq!(deep.to_value(), Err(TreeError::TooDeep));
        assert_eq!(
            TreeError::TooDeep.to_string(),
            "nested deeper than 127 levels: not read"
        );
        assert_ne!(deep, nested(MAX_DEPTH + 2));
        assert_eq!(deep, nested(MAX_DEPTH + 1));
        // Kept as it is when its type is to be put in front.
        let text = format!(r#"{{"kind":"Other","a":{}}}"#, deep.as_str());
        assert_eq!(typed(&text), text);
        // A number JSON allows and a tree cannot hold: an error too.
        let huge = Json::parse(b"[1e400]").unwrap();
        assert!(
            matches!(huge.to_value(), Err(TreeError::Other(m)) if m.contains("number out of range")),
            "{:?}",
            huge.to_value()
        );
    }

    #[test]
    fn only_json_is_kept_and_equality_is_of_the_document() {
        assert!(Json::parse(b"{\"a\":").is_err());
        assert!(Json::parse(b"{} {}").is_err());
        assert_eq!(
            Json::parse(b"{\"a\": 1, \"b\": [ ]}").unwrap(),
            Json::from(json!({"a": 1, "b": []}))
        );
        let through_a_value: Json = serde_json::from_value(json!({"a": [1, "x"]})).unwrap();
        assert_eq!(through_a_value.as_str(), r#"{"a":[1,"x"]}"#);
        assert_eq!(
            serde_json::to_string(&through_a_value).unwrap(),
            r#"{"a":[1,"x"]}"#
        );
    }
}
