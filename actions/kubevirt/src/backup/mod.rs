//! The five backup actions (docs/kubevirt.md#s5), one file each.

pub mod datavolume;
pub mod pvc;
pub mod virtualmachine;
pub mod virtualmachineinstance;
pub mod volumesnapshot;

use velero_wasm_sdk::Object;

use crate::messages;

/// The Backup argument as an object; `null` is upstream's `backup object nil!`.
pub fn parse_backup(backup: &str) -> Result<Object, String> {
    if backup.trim() == "null" {
        return Err(messages::BACKUP_NIL.to_string());
    }
    Object::parse(backup)
        .map_err(|e| format!("the Backup is not a velero.io/v1 Backup object: {e}"))
}

/// The item as an object.
pub fn parse_item(item: &str) -> Result<Object, String> {
    if item.trim() == "null" {
        return Err(messages::INPUT_NIL.to_string());
    }
    Object::parse(item).map_err(|e| format!("the item is not a Kubernetes object: {e}"))
}
