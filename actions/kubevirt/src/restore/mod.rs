//! The restore actions (docs/kubevirt.md#s6), one file each; [`identity`] holds the edits the VM and VMI actions
//! share.

pub mod identity;
pub mod network_attachment_definition;
pub mod operations;
pub mod pod;
pub mod pvc;
pub mod virtualmachine;
pub mod virtualmachineinstance;
pub mod volumesnapshot;

use velero_wasm_sdk::Object;

use crate::messages;

/// The Restore argument as an object; `null` is upstream's `input object nil!`.
pub fn parse_restore(restore: &str) -> Result<Object, String> {
    if restore.trim() == "null" {
        return Err(messages::INPUT_NIL.to_string());
    }
    Object::parse(restore)
        .map_err(|e| format!("the Restore is not a velero.io/v1 Restore object: {e}"))
}
