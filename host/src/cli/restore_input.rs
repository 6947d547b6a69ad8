//! What Velero does to an item from a backup before restore actions see it, for the commands that
//! call restore actions on items as backed up (`run`, `diff`): one implementation, so that both
//! give an action the same input.

use serde_json::Value;

use crate::action::ItemRef;

/// The namespace Velero restores an item into (`spec.namespaceMapping`), which is the one it matches
/// restore actions' selectors against.
pub(super) fn mapped_namespace(restore: &Value, namespace: &str) -> String {
    restore
        .pointer("/spec/namespaceMapping")
        .and_then(|m| m.get(namespace))
        .and_then(Value::as_str)
        .unwrap_or(namespace)
        .to_string()
}

/// What Velero does to an item before restore actions see it (`resetMetadataAndStatus`): server-set
/// metadata goes, and the status too unless the Restore restores this resource's status.
pub(super) fn reset_for_restore(mut item: Value, restore: &Value, identity: &ItemRef) -> Value {
    if let Some(metadata) = item.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "generateName",
            "selfLink",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "ownerReferences",
        ] {
            metadata.remove(field);
        }
    }
    let list = |name: &str| -> Vec<String> {
        restore
            .pointer(&format!("/spec/restoreStatus/{name}"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_lowercase))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (included, excluded) = (list("includedResources"), list("excludedResources"));
    let names = [
        identity.group_resource(),
        identity.resource(),
        identity.kind.to_lowercase(),
    ];
    let named = |l: &[String]| l.iter().any(|r| r == "*" || names.contains(r));
    let keep_status = named(&included) && !excluded.iter().any(|r| names.contains(r));
    if !keep_status {
        if let Some(map) = item.as_object_mut() {
            map.remove("status");
        }
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn restore_reset_removes_server_fields_and_status() {
        let item = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "1", "ownerReferences": [], "labels": {"x": "y"}},
            "status": {"phase": "Bound"}});
        let identity = ItemRef::parse(&item.to_string()).unwrap();
        let out = reset_for_restore(item.clone(), &json!({}), &identity);
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
        let keep = reset_for_restore(
            item,
            &json!({"spec": {"restoreStatus": {"includedResources": ["persistentvolumeclaims"]}}}),
            &identity,
        );
        assert_eq!(keep["status"]["phase"], "Bound");
    }

    #[test]
    fn restores_match_in_the_mapped_namespace() {
        let restore = json!({"spec": {"namespaceMapping": {"vm-workloads": "vm-workloads-dr"}}});
        assert_eq!(
            mapped_namespace(&restore, "vm-workloads"),
            "vm-workloads-dr"
        );
        assert_eq!(mapped_namespace(&restore, "other"), "other");
    }
}
