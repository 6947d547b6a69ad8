//! Undoing the backup's `velero.kubevirt.io/pvc-uid` label at restore (spec §6.4 step 3, §6.5): a
//! user's own value saved in an annotation comes back; otherwise the label goes.

use velero_wasm_sdk::Object;

use crate::keys;

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
