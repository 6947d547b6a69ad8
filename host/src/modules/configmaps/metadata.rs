//! What a module ConfigMap's metadata says: the label naming its module ([`LABEL`]), the shadow
//! label, the annotations the plugin writes or reads on it, its name and its other fields.

use serde_json::Value;

/// The label key module ConfigMaps carry (its value is the module's name).
pub const LABEL: &str = "velero-wasm.io/module";
/// The label that makes a module ConfigMap a shadow (value `"true"`): its module is called after the
/// serving module of the same name, on the same input, and compared with it; it never serves
/// (`crate::shadow`). Removing the label promotes it.
pub const SHADOW_LABEL: &str = "velero-wasm.io/shadow";
/// The annotation in which the plugin writes what became of a module ConfigMap (serving, shadowing,
/// refused, falling back) with a field manager of its own (the plan's `configmap_state`).
pub const STATUS_ANNOTATION: &str = "velero-wasm.io/status";

/// The module a listed ConfigMap's label names.
pub(super) fn labelled_module(item: &Value) -> Option<String> {
    item.pointer("/metadata/labels")?
        .get(LABEL)?
        .as_str()
        .map(str::to_string)
}

/// A ConfigMap's status annotation ([`STATUS_ANNOTATION`]), as written.
pub(super) fn status_of(item: &Value) -> Option<String> {
    item.pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A ConfigMap's failure-policy annotation, as written (checked where it is used).
pub(super) fn on_failure_of(item: &Value) -> Option<String> {
    item.pointer("/metadata/annotations")
        .and_then(|a| a.get(crate::modules::failure_policy::ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A `metadata` field of a ConfigMap, empty when it has none.
pub(super) fn field_of(item: &Value, name: &str) -> String {
    item.pointer(&format!("/metadata/{name}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Whether a module ConfigMap is labelled a shadow ([`SHADOW_LABEL`] `"true"`).
pub(crate) fn is_shadow(item: &Value) -> bool {
    item.pointer("/metadata/labels")
        .and_then(|l| l.get(SHADOW_LABEL))
        .and_then(Value::as_str)
        == Some("true")
}

pub(super) fn name_of(item: &Value) -> &str {
    item.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}
