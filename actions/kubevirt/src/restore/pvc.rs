//! `kubevirt-velero-plugin/restore-pvc-action` (docs/kubevirt.md#s6-4): skips PVCs whose DataVolume was still
//! importing at backup (CDI imports again from the restored DataVolume) and undoes the UID label.

use velero_wasm_sdk::{Object, RestoreResponse};

use crate::keys;
use crate::uid_label;

/// Runs the action on a PVC. `populatedFor` stays: CDI needs it to adopt the restored PVC.
pub fn restore(item: &Object) -> RestoreResponse {
    if item.annotation(keys::IN_PROGRESS).is_some() {
        return RestoreResponse::skip();
    }
    let mut pvc = item.clone();
    if uid_label::undo(&mut pvc, keys::ORIGINAL_PVC_UID) {
        RestoreResponse::with_item(&pvc)
    } else {
        RestoreResponse::unchanged()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn run(metadata: Value) -> (bool, Option<Object>) {
        let pvc = Object::from_value(
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata}),
        )
        .unwrap();
        let out = restore(&pvc);
        assert!(out.additional_items.is_empty());
        (
            out.skip_restore,
            out.item.map(|i| Object::parse(&i).unwrap()),
        )
    }

    #[test]
    fn checklist_103_an_in_progress_pvc_is_skipped() {
        let (skip, _) = run(
            json!({"name": "pvc", "annotations": {"kvp.kubevirt.io/storage.inprogress": "pvc"}}),
        );
        assert!(skip);
    }

    #[test]
    fn checklist_104_the_uid_label_is_removed() {
        let (skip, pvc) = run(
            json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u", "other-label": "other-value"}}),
        );
        assert!(!skip);
        assert_eq!(
            pvc.unwrap().pointer("/metadata/labels"),
            Some(&json!({"other-label": "other-value"}))
        );
    }

    #[test]
    fn checklist_105_a_users_value_comes_back() {
        let (_, pvc) = run(
            json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u", "other-label": "v"},
                                  "annotations": {"velero.kubevirt.io/original-pvc-uid": "original-user-uid-value"}}),
        );
        let pvc = pvc.unwrap();
        assert_eq!(
            pvc.pointer("/metadata/labels"),
            Some(
                &json!({"velero.kubevirt.io/pvc-uid": "original-user-uid-value", "other-label": "v"})
            )
        );
        assert_eq!(pvc.annotation(keys::ORIGINAL_PVC_UID), None);
    }

    #[test]
    fn checklist_106_without_the_label_nothing_changes() {
        assert_eq!(
            run(json!({"name": "p", "labels": {"existing-label": "x"}})),
            (false, None)
        );
        assert_eq!(run(json!({"name": "p"})), (false, None));
        let (_, stray) =
            run(json!({"name": "p", "annotations": {"velero.kubevirt.io/original-pvc-uid": "x"}}));
        assert_eq!(stray, None);
    }

    #[test]
    fn checklist_107_populated_for_is_kept() {
        let (skip, pvc) = run(
            json!({"name": "p", "labels": {"velero.kubevirt.io/pvc-uid": "u"},
                                     "annotations": {"cdi.kubevirt.io/storage.populatedFor": "d"}}),
        );
        let pvc = pvc.unwrap();
        assert!(!skip);
        assert_eq!(pvc.annotation(keys::POPULATED_FOR), Some("d"));
        assert!(!pvc.has_label(keys::PVC_UID));
    }
}
