//! Reading optional JSON fields the way Go's decoder sees them: a field that is absent or `null` is
//! unset, a missing string reads as "", a missing list as empty.

use serde_json::Value;

/// The value at `pointer` (`/a/b`) when present and not `null`.
pub fn set<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    value.pointer(pointer).filter(|v| !v.is_null())
}

/// The string at `pointer`, "" when unset or not a string.
pub fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The list at `pointer`, empty when unset or not a list.
pub fn list<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The boolean at `pointer`, `false` when unset or not a boolean.
pub fn flag(value: &Value, pointer: &str) -> bool {
    value
        .pointer(pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_and_absent_are_unset() {
        let v = json!({"a": null, "b": {"c": "x"}, "l": [1], "t": true});
        assert!(set(&v, "/a").is_none());
        assert!(set(&v, "/zz").is_none());
        assert_eq!(text(&v, "/b/c"), "x");
        assert_eq!(text(&v, "/b/d"), "");
        assert_eq!(list(&v, "/l").len(), 1);
        assert!(list(&v, "/b").is_empty());
        assert!(flag(&v, "/t"));
        assert!(!flag(&v, "/b"));
    }
}
