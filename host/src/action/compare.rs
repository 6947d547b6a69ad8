//! Two results of one action on one item, compared: what `velero-wasm diff` reports between two module
//! sets and what a shadow module is checked against its serving module with. A result is turned into
//! one JSON value ([`backup_result`], [`restore_result`], [`related_result`]) and two values are
//! compared as a JSON Patch ([`Comparison`]), with the kinds of difference it holds.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{ActionKind, BackupOutcome, ResourceId, RestoreOutcome};

/// A backup action's result as compared: the output item and additional items (and, for backup-v2,
/// the post-operation items), or the error. The operation id is left out: it is the action's own
/// name for its work, different from one call to the next.
pub(crate) fn backup_result<E: std::fmt::Display>(
    kind: ActionKind,
    result: &Result<BackupOutcome, E>,
) -> Value {
    match result {
        Ok(o) => {
            let mut value = json!({
                "item": item_value(&o.item),
                "additionalItems": id_set(&o.additional_items),
            });
            if kind == ActionKind::BackupV2 {
                value["postOperationItems"] = id_set(&o.post_operation_items);
            }
            value
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// A restore action's result as compared: output item, additional items, `skipRestore` (and, for
/// restore-v2, whether Velero waits for the additional items), or the error.
pub(crate) fn restore_result<E: std::fmt::Display>(
    kind: ActionKind,
    result: &Result<RestoreOutcome, E>,
) -> Value {
    match result {
        Ok(o) => {
            let mut value = json!({
                "item": item_value(&o.item),
                "additionalItems": id_set(&o.additional_items),
                "skipRestore": o.skip_restore,
            });
            if kind == ActionKind::RestoreV2 {
                value["waitForAdditionalItems"] = json!(o.wait_for_additional_items);
            }
            value
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// An item-block action's result as compared: the set of related items, or the error.
pub(crate) fn related_result<E: std::fmt::Display>(result: &Result<Vec<ResourceId>, E>) -> Value {
    match result {
        Ok(items) => json!({"relatedItems": id_set(items)}),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// A delete action's result as compared: done, or the error.
pub(crate) fn delete_result<E: std::fmt::Display>(result: &Result<(), E>) -> Value {
    match result {
        Ok(()) => json!({"deleted": true}),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// The largest item compared field by field. A larger one (up to a module's 64 MiB output limit) is
/// compared by its bytes' sha256 and reported as too large to diff: parsed whole, a 60 MB item took
/// gigabytes, and a shadow's comparison took the plugin process down with it.
pub(crate) const MAX_PARSED_ITEM: usize = 1 << 20;

/// An item as compared: its JSON, its text when it is not JSON, or, past [`MAX_PARSED_ITEM`], its
/// size and sha256 (so equal bytes compare equal and any change shows as a changed digest).
fn item_value(item: &str) -> Value {
    if item.len() > MAX_PARSED_ITEM {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(item.as_bytes());
        let sha256: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        return json!({"tooLargeToDiff": {"bytes": item.len(), "sha256": sha256}});
    }
    serde_json::from_str::<Value>(item).unwrap_or_else(|_| Value::String(item.to_string()))
}

/// Resource ids as compared: an object keyed by Velero's notation (`resource.group ns/name`), so that
/// a difference names the item added or removed rather than a position in a list (order is not
/// compared: Velero backs additional items up whatever their order).
pub(crate) fn id_set(ids: &[ResourceId]) -> Value {
    let sorted: BTreeMap<String, Value> = ids
        .iter()
        .map(|id| (id.to_string(), Value::Bool(true)))
        .collect();
    Value::Object(sorted.into_iter().collect())
}

/// How two results differ: the JSON Patch (RFC 6902) from the first to the second, and the kinds of
/// difference it holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Comparison {
    /// The patch from the old (serving) result to the new (candidate) one; empty when equal.
    pub(crate) patch: Value,
    /// The kinds of difference, in order: `error` (one failed, the other did not), `error-message`
    /// (both failed, differently), or the fields that differ: `item`, `additional-items`,
    /// `post-operation-items`, `related-items`, `skip-restore`, `wait-for-additional-items`.
    pub(crate) kinds: Vec<&'static str>,
}

impl Comparison {
    /// Compares two results made by the functions above.
    pub(crate) fn of(old: &Value, new: &Value) -> Comparison {
        if old == new {
            return Comparison {
                patch: Value::Array(Vec::new()),
                kinds: Vec::new(),
            };
        }
        let patch = serde_json::to_value(json_patch::diff(old, new)).unwrap_or(Value::Null);
        let failed = |v: &Value| v.get("error").is_some();
        let kinds = match (failed(old), failed(new)) {
            (true, true) => vec!["error-message"],
            (false, false) => {
                let mut kinds: Vec<&'static str> = Vec::new();
                for op in patch.as_array().into_iter().flatten() {
                    let path = op["path"].as_str().unwrap_or("");
                    let field = path.trim_start_matches('/').split('/').next().unwrap_or("");
                    let kind = field_kind(field);
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
                kinds
            }
            _ => vec!["error"],
        };
        Comparison { patch, kinds }
    }

    /// Whether the two results are the same.
    pub(crate) fn same(&self) -> bool {
        self.kinds.is_empty()
    }
}

/// The kind of difference a top-level field of a result stands for.
fn field_kind(field: &str) -> &'static str {
    match field {
        "item" => "item",
        "additionalItems" => "additional-items",
        "postOperationItems" => "post-operation-items",
        "relatedItems" => "related-items",
        "skipRestore" => "skip-restore",
        "waitForAdditionalItems" => "wait-for-additional-items",
        "deleted" | "error" => "error",
        _ => "other",
    }
}

/// A JSON pointer as people read it: `~1` and `~0` unescaped (a key may hold `/`).
pub(crate) fn readable_pointer(pointer: &str) -> String {
    pointer.replace("~1", "/").replace("~0", "~")
}

/// A patch's operations one per line (`op pointer value`), as people read them; a set member's
/// value (`true`) says nothing, so only its key is shown.
pub(crate) fn patch_lines(patch: &Value) -> Vec<String> {
    patch
        .as_array()
        .into_iter()
        .flatten()
        .map(|op| {
            let value = op.get("value").filter(|v| **v != Value::Bool(true));
            let line = format!(
                "{:<7} {} {}",
                op["op"].as_str().unwrap_or(""),
                readable_pointer(op["path"].as_str().unwrap_or("")),
                value.map(Value::to_string).unwrap_or_default()
            );
            line.trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pvc(name: &str) -> ResourceId {
        ResourceId {
            group: String::new(),
            resource: "persistentvolumeclaims".into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn outcome(item: &str, additional: Vec<ResourceId>) -> Result<BackupOutcome, String> {
        Ok(BackupOutcome {
            item: item.into(),
            additional_items: additional,
            operation_id: None,
            post_operation_items: Vec::new(),
        })
    }

    #[test]
    fn additional_items_differ_by_name_not_by_position() {
        let (old, new) = (id_set(&[pvc("a"), pvc("b")]), id_set(&[pvc("b")]));
        let patch = serde_json::to_value(json_patch::diff(&old, &new)).unwrap_or_default();
        assert_eq!(
            patch,
            json!([{"op": "remove", "path": "/persistentvolumeclaims ns~1a"}])
        );
        assert_eq!(
            readable_pointer("/persistentvolumeclaims ns~1a"),
            "/persistentvolumeclaims ns/a"
        );
        assert_eq!(id_set(&[pvc("b"), pvc("a")]), old);
    }

    #[test]
    fn kinds_name_the_fields_that_differ_or_the_error() {
        let kind = ActionKind::Backup;
        let a = backup_result(kind, &outcome(r#"{"kind":"Pod","x":1}"#, vec![pvc("a")]));
        let same = backup_result(kind, &outcome(r#"{"x":1,"kind":"Pod"}"#, vec![pvc("a")]));
        assert!(Comparison::of(&a, &same).same());

        let b = backup_result(kind, &outcome(r#"{"kind":"Pod","x":2}"#, vec![]));
        let c = Comparison::of(&a, &b);
        assert_eq!(c.kinds, ["item", "additional-items"]);
        assert_eq!(
            patch_lines(&c.patch),
            [
                "replace /item/x 2",
                "remove  /additionalItems/persistentvolumeclaims ns/a"
            ]
        );

        let failed = backup_result::<String>(kind, &Err("boom".into()));
        assert_eq!(Comparison::of(&a, &failed).kinds, ["error"]);
        assert_eq!(Comparison::of(&failed, &a).kinds, ["error"]);
        let other = backup_result::<String>(kind, &Err("bang".into()));
        assert_eq!(Comparison::of(&failed, &other).kinds, ["error-message"]);
    }

    #[test]
    fn items_past_the_parse_limit_are_compared_by_digest_and_say_so() {
        let kind = ActionKind::Backup;
        let big = |fill: char| {
            let padding: String = std::iter::repeat_n(fill, MAX_PARSED_ITEM).collect();
            format!(r#"{{"kind":"Pod","data":"{padding}"}}"#)
        };
        let a = backup_result(kind, &outcome(&big('a'), vec![]));
        assert!(Comparison::of(&a, &backup_result(kind, &outcome(&big('a'), vec![]))).same());
        // Nothing of the item's text is kept: its size and digest stand for it.
        assert!(a.to_string().len() < 256, "{a}");
        assert_eq!(a["item"]["tooLargeToDiff"]["bytes"], big('a').len());

        let b = backup_result(kind, &outcome(&big('b'), vec![]));
        let c = Comparison::of(&a, &b);
        assert_eq!(c.kinds, ["item"]);
        assert!(
            patch_lines(&c.patch)[0].starts_with("replace /item/tooLargeToDiff/sha256 "),
            "{:?}",
            patch_lines(&c.patch)
        );

        // Just under the limit, an item is still compared field by field.
        let small = format!(r#"{{"kind":"Pod","data":"{}"}}"#, "a".repeat(64));
        let parsed = backup_result(kind, &outcome(&small, vec![]));
        assert_eq!(parsed["item"]["kind"], "Pod");
    }

    #[test]
    fn operation_ids_are_not_compared() {
        let mut first = outcome(r#"{"kind":"Pod"}"#, vec![]).unwrap();
        first.operation_id = Some("op-1".into());
        let mut second = first.clone();
        second.operation_id = Some("op-2".into());
        let kind = ActionKind::BackupV2;
        let (a, b) = (
            backup_result::<String>(kind, &Ok(first)),
            backup_result::<String>(kind, &Ok(second)),
        );
        assert!(Comparison::of(&a, &b).same());
    }
}
