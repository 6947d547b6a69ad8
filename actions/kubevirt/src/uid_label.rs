//! The `velero.kubevirt.io/pvc-uid` label of PVCs and VolumeSnapshots (docs/kubevirt.md#s5-2, #s5-3, #s6-4, #s6-5):
//! set at backup, with a user's own value saved in an annotation; undone at restore.

use velero_wasm_sdk::Object;

use crate::keys;

/// Sets the label to `uid`, first saving a value already there (even one equal to `uid`) in the
/// annotation `saved_in`.
pub fn apply(item: &mut Object, uid: &str, saved_in: &str) {
    if let Some(existing) = item.label(keys::PVC_UID).map(str::to_string) {
        item.set_annotation(saved_in, &existing);
    }
    item.set_label(keys::PVC_UID, uid);
}

/// Restores the label from `saved_in` (the annotation the backup wrote) or removes it. Returns
/// whether anything changed; without the label nothing does, even a stray annotation stays.
pub fn undo(item: &mut Object, saved_in: &str) -> bool {
    if !item.has_label(keys::PVC_UID) {
        return false;
    }
    match item.remove_annotation(saved_in) {
        Some(original) => item.set_label(keys::PVC_UID, &original),
        None => {
            item.remove_label(keys::PVC_UID);
        }
    }
    true
}
