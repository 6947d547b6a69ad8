//! [`Object`]: a Kubernetes object as JSON, edited in place so that fields this code does not know
//! survive untouched.

use serde_json::{Map, Value};

/// A Kubernetes object (item, Backup, Restore, or anything read from the cluster) as a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Object(pub Map<String, Value>);

impl Object {
    /// Parses JSON text that must hold an object.
    pub fn parse(json: &str) -> Result<Object, String> {
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(map)) => Ok(Object(map)),
            Ok(other) => Err(format!("expected a JSON object, got {}", type_name(&other))),
            Err(e) => Err(format!("invalid JSON: {e}")),
        }
    }

    /// Wraps a JSON value that must be an object.
    pub fn from_value(value: Value) -> Result<Object, String> {
        match value {
            Value::Object(map) => Ok(Object(map)),
            other => Err(format!("expected a JSON object, got {}", type_name(&other))),
        }
    }

    /// The object as compact JSON text.
    pub fn to_json(&self) -> String {
        // A map of JSON values has nothing serde_json could refuse to write.
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// The object as a JSON value.
    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }

    /// The value at a JSON pointer (`/spec/template/spec/volumes`), if present.
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return None;
        }
        let mut parts = pointer.trim_start_matches('/').split('/');
        let first = parts.next()?;
        let mut current = self.0.get(&unescape(first))?;
        for part in parts {
            current = match current {
                Value::Object(map) => map.get(&unescape(part))?,
                Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// The value at a JSON pointer, mutably, if present.
    pub fn pointer_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        let mut parts = pointer.trim_start_matches('/').split('/');
        let first = parts.next()?;
        let mut current = self.0.get_mut(&unescape(first))?;
        for part in parts {
            current = match current {
                Value::Object(map) => map.get_mut(&unescape(part))?,
                Value::Array(items) => items.get_mut(part.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// The string at a JSON pointer; `None` when absent or not a string.
    pub fn str_at(&self, pointer: &str) -> Option<&str> {
        self.pointer(pointer).and_then(Value::as_str)
    }

    /// The boolean at a JSON pointer; `false` when absent or not a boolean.
    pub fn bool_at(&self, pointer: &str) -> bool {
        self.pointer(pointer)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The array at a JSON pointer; empty when absent or not an array.
    pub fn array_at(&self, pointer: &str) -> &[Value] {
        self.pointer(pointer)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Sets a value at a JSON pointer, creating intermediate objects (not arrays) as needed.
    /// Fails when a step on the way is neither an object nor absent.
    pub fn set(&mut self, pointer: &str, value: Value) -> Result<(), String> {
        let parts: Vec<String> = pointer
            .trim_start_matches('/')
            .split('/')
            .map(unescape)
            .collect();
        let (last, path) = parts.split_last().ok_or("empty pointer")?;
        let mut map = &mut self.0;
        for part in path {
            let entry = map
                .entry(part.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if entry.is_null() {
                *entry = Value::Object(Map::new());
            }
            map = entry
                .as_object_mut()
                .ok_or_else(|| format!("{pointer}: {part} is not an object"))?;
        }
        map.insert(last.clone(), value);
        Ok(())
    }

    /// Removes the value at a JSON pointer (object keys only) and returns it.
    pub fn remove(&mut self, pointer: &str) -> Option<Value> {
        let (parent, last) = match pointer.rfind('/') {
            Some(0) | None => return self.0.remove(&unescape(pointer.trim_start_matches('/'))),
            Some(i) => (&pointer[..i], unescape(&pointer[i + 1..])),
        };
        self.pointer_mut(parent)?.as_object_mut()?.remove(&last)
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.str_at("/apiVersion").unwrap_or("")
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        self.str_at("/kind").unwrap_or("")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.str_at("/metadata/name").unwrap_or("")
    }

    /// `metadata.namespace` ("" for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.str_at("/metadata/namespace").unwrap_or("")
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.str_at("/metadata/uid").unwrap_or("")
    }

    /// One label's value; `Some("")` for a label present with an empty value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.pointer("/metadata/labels")?.get(key)?.as_str()
    }

    /// Whether a label is present, whatever its value.
    pub fn has_label(&self, key: &str) -> bool {
        self.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .is_some()
    }

    /// Sets a label (creating `metadata.labels` if needed).
    pub fn set_label(&mut self, key: &str, value: &str) {
        self.set_meta_entry("labels", key, value)
    }

    /// Removes a label; returns its old value.
    pub fn remove_label(&mut self, key: &str) -> Option<String> {
        self.remove_meta_entry("labels", key)
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.pointer("/metadata/annotations")?.get(key)?.as_str()
    }

    /// Sets an annotation (creating `metadata.annotations` if needed).
    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.set_meta_entry("annotations", key, value)
    }

    /// Removes an annotation; returns its old value.
    pub fn remove_annotation(&mut self, key: &str) -> Option<String> {
        self.remove_meta_entry("annotations", key)
    }

    fn set_meta_entry(&mut self, field: &str, key: &str, value: &str) {
        let metadata = self
            .0
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(map) = made_object(metadata) else {
            return;
        };
        let entries = map
            .entry(field)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(entries) = made_object(entries) {
            entries.insert(key.to_string(), Value::String(value.to_string()));
        }
    }

    fn remove_meta_entry(&mut self, field: &str, key: &str) -> Option<String> {
        let entries = self
            .0
            .get_mut("metadata")?
            .get_mut(field)?
            .as_object_mut()?;
        let old = entries.remove(key)?;
        Some(old.as_str().unwrap_or_default().to_string())
    }
}

/// `value` as an object, replacing whatever else it held with an empty one (so always `Some`).
fn made_object(value: &mut Value) -> Option<&mut Map<String, Value>> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut()
}

fn unescape(part: &str) -> String {
    part.replace("~1", "/").replace("~0", "~")
}

/// What kind of JSON value `value` is, for error messages: `a string`, `an object`, `null`, ….
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_read_nested_fields_and_array_elements() {
        let o = Object::parse(r#"{"spec":{"volumes":[{"name":"a"},{"name":"b/c"}]}}"#).unwrap();
        assert_eq!(o.str_at("/spec/volumes/1/name"), Some("b/c"));
        assert_eq!(o.array_at("/spec/volumes").len(), 2);
        assert!(o.pointer("/spec/missing").is_none());
    }

    #[test]
    fn labels_are_created_and_removed_in_place() {
        let mut o =
            Object::parse(r#"{"kind":"PersistentVolumeClaim","metadata":{"name":"x"},"extra":1}"#)
                .unwrap();
        assert_eq!(o.label("a"), None);
        o.set_label("a", "1");
        assert_eq!(o.label("a"), Some("1"));
        assert_eq!(o.remove_label("a"), Some("1".into()));
        assert!(!o.has_label("a"));
        assert_eq!(o.pointer("/extra"), Some(&Value::from(1)));
    }

    #[test]
    fn set_creates_intermediate_objects_and_refuses_to_cross_scalars() {
        let mut o = Object::parse(r#"{"spec":{"x":1}}"#).unwrap();
        o.set("/spec/template/spec/domain/firmware/uuid", Value::from("u"))
            .unwrap();
        assert_eq!(
            o.str_at("/spec/template/spec/domain/firmware/uuid"),
            Some("u")
        );
        assert!(o.set("/spec/x/y", Value::from(1)).is_err());
        assert_eq!(o.remove("/spec/x"), Some(Value::from(1)));
    }

    #[test]
    fn parse_rejects_non_objects_with_a_clear_message() {
        assert_eq!(
            Object::parse("[1]").unwrap_err(),
            "expected a JSON object, got an array"
        );
        assert!(Object::parse("{").unwrap_err().starts_with("invalid JSON"));
    }
}
