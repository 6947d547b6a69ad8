//! `kubevirt-velero-plugin/restore-operation-action` (extended mode only; docs/kubevirt.md#s9-11–#s9-15): KubeVirt
//! objects that are requests for an operation are not restored, because creating them again runs the
//! operation again on the restored VM — a migration (VirtualMachineInstanceMigration), a new snapshot
//! (VirtualMachineSnapshot, and its content), a KubeVirt restore over the restored VM
//! (VirtualMachineRestore), a new export server with fresh tokens (VirtualMachineExport), a clone
//! (VirtualMachineClone), a new changed-block-tracking backup into the backup application's target
//! (VirtualMachineBackup). Their trackers (VirtualMachineBackupTracker) are not restored either: a
//! tracker's checkpoint belongs to the source VM's disks, which the restore replaced, and the backup
//! application that owns it creates a new one (kubevirt-velero-plugin #450, open; docs/kubevirt.md#s9-18).

use velero_wasm_sdk::{log, Object, RestoreResponse};

/// The resources this action applies to, as `resource.group`.
pub const OPERATION_RESOURCES: [&str; 8] = [
    "virtualmachineinstancemigrations.kubevirt.io",
    "virtualmachinesnapshots.snapshot.kubevirt.io",
    "virtualmachinesnapshotcontents.snapshot.kubevirt.io",
    "virtualmachinerestores.snapshot.kubevirt.io",
    "virtualmachineexports.export.kubevirt.io",
    "virtualmachineclones.clone.kubevirt.io",
    "virtualmachinebackups.backup.kubevirt.io",
    "virtualmachinebackuptrackers.backup.kubevirt.io",
];

/// Runs the action: always skips the item.
pub fn restore(item: &Object) -> RestoreResponse {
    log::info(
        "not restoring a KubeVirt operation request: restoring it would run the operation again",
        &[
            ("kind", item.kind()),
            ("namespace", item.namespace()),
            ("name", item.name()),
        ],
    );
    RestoreResponse::skip()
}
