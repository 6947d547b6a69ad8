//! `kubevirt-velero-plugin/restore-volumesnapshot-action` (docs/kubevirt.md#s6-5): undoes the UID label of a
//! VolumeSnapshot; never skips.

use velero_wasm_sdk::{Object, RestoreResponse};

use crate::keys;
use crate::uid_label;

/// Runs the action on a VolumeSnapshot.
pub fn restore(item: &Object) -> RestoreResponse {
    let mut snapshot = item.clone();
    if uid_label::undo(&mut snapshot, keys::ORIGINAL_VOLUMESNAPSHOT_UID) {
        RestoreResponse::with_item(&snapshot)
    } else {
        RestoreResponse::unchanged()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checklist_108_label_removed_or_restored_never_skipped() {
        let vs = Object::from_value(json!({"kind": "VolumeSnapshot", "metadata": {"name": "s",
            "labels": {"velero.kubevirt.io/pvc-uid": "pvc-uid-456", "other-label": "v"}}}))
        .unwrap();
        let out = restore(&vs);
        assert!(!out.skip_restore);
        let item = Object::parse(out.item.as_deref().unwrap()).unwrap();
        assert_eq!(
            item.pointer("/metadata/labels"),
            Some(&json!({"other-label": "v"}))
        );

        let mut saved = vs.clone();
        saved.set_annotation(keys::ORIGINAL_VOLUMESNAPSHOT_UID, "original-user-uid-value");
        let out = restore(&saved);
        assert!(!out.skip_restore);
        let item = Object::parse(out.item.as_deref().unwrap()).unwrap();
        assert_eq!(item.label(keys::PVC_UID), Some("original-user-uid-value"));
        assert_eq!(item.annotation(keys::ORIGINAL_VOLUMESNAPSHOT_UID), None);
    }
}
