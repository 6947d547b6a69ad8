//! `kubevirt-velero-plugin/backup-pvc-action` (docs/kubevirt.md#s5-2): labels each PVC with its UID, so a user can
//! restore one disk with `--selector velero.kubevirt.io/pvc-uid=<uid>`. A user's own value of that
//! label is saved in an annotation and put back at restore.

use velero_wasm_sdk::{BackupResponse, Object};

use crate::keys;
use crate::uid_label;

/// Runs the action on a PVC. No API call, the Backup is not read.
pub fn backup(item: &Object) -> BackupResponse {
    let uid = item.uid().to_string();
    if uid.is_empty() {
        return BackupResponse::unchanged();
    }
    let mut pvc = item.clone();
    uid_label::apply(&mut pvc, &uid, keys::ORIGINAL_PVC_UID);
    BackupResponse::with_item(&pvc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn run(metadata: Value) -> Option<Object> {
        let pvc = Object::from_value(
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata}),
        )
        .unwrap();
        let out = backup(&pvc);
        assert!(out.additional_items.is_empty());
        out.item.map(|i| Object::parse(&i).unwrap())
    }

    #[test]
    fn checklist_46_the_uid_becomes_a_label() {
        let pvc = run(json!({"name": "p", "uid": "u1"})).unwrap();
        assert_eq!(
            pvc.pointer("/metadata/labels"),
            Some(&json!({"velero.kubevirt.io/pvc-uid": "u1"}))
        );
        assert_eq!(pvc.annotation(keys::ORIGINAL_PVC_UID), None);
    }

    #[test]
    fn checklist_47_other_labels_stay() {
        let pvc = run(json!({"name": "p", "uid": "u2", "labels": {"a": "1", "b": "2"}})).unwrap();
        assert_eq!(
            pvc.pointer("/metadata/labels"),
            Some(&json!({"a": "1", "b": "2", "velero.kubevirt.io/pvc-uid": "u2"}))
        );
    }

    #[test]
    fn checklist_48_a_users_label_value_is_saved() {
        let pvc = run(json!({"name": "p", "uid": "u3", "labels": {"velero.kubevirt.io/pvc-uid": "user", "other": "v"}})).unwrap();
        assert_eq!(
            pvc.pointer("/metadata/labels"),
            Some(&json!({"velero.kubevirt.io/pvc-uid": "u3", "other": "v"}))
        );
        assert_eq!(pvc.annotation(keys::ORIGINAL_PVC_UID), Some("user"));
    }

    #[test]
    fn checklist_49_existing_annotations_stay() {
        let pvc = run(json!({"name": "p", "uid": "u4", "labels": {"velero.kubevirt.io/pvc-uid": "user"}, "annotations": {"x": "y"}})).unwrap();
        assert_eq!(
            pvc.pointer("/metadata/annotations"),
            Some(&json!({"x": "y", "velero.kubevirt.io/original-pvc-uid": "user"}))
        );
    }

    #[test]
    fn checklist_50_the_value_is_saved_even_when_it_equals_the_uid() {
        let pvc = run(
            json!({"name": "p", "uid": "same", "labels": {"velero.kubevirt.io/pvc-uid": "same"}}),
        )
        .unwrap();
        assert_eq!(pvc.label(keys::PVC_UID), Some("same"));
        assert_eq!(pvc.annotation(keys::ORIGINAL_PVC_UID), Some("same"));
    }

    #[test]
    fn checklist_51_no_uid_no_change() {
        assert_eq!(run(json!({"name": "p"})), None);
    }
}
