//! Label and annotation keys the actions read and write (docs/kubevirt.md#s3). Upstream spells them this way;
//! users' selectors and KubeVirt/CDI depend on the exact strings.

/// Backup label: present → skip the "restore possible" volume checks.
pub const METADATA_BACKUP: &str = "velero.kubevirt.io/metadataBackup";
/// Restore label: its value becomes the VM's `spec.runStrategy`.
pub const RESTORE_RUN_STRATEGY: &str = "velero.kubevirt.io/restore-run-strategy";
/// Restore label: present → remove the interfaces' MAC addresses.
pub const CLEAR_MAC_ADDRESS: &str = "velero.kubevirt.io/clear-mac-address";
/// Restore label: present → give the VM a new firmware UUID.
pub const GENERATE_NEW_FIRMWARE_UUID: &str = "velero.kubevirt.io/generate-new-firmware-uuid";
/// Velero's own exclusion label; only the value `"true"` excludes.
pub const EXCLUDE_FROM_BACKUP: &str = "velero.io/exclude-from-backup";
/// Velero (after 1.18): an annotation on a backup action's output item that drops the item.
pub const SKIP_FROM_BACKUP: &str = "velero.io/skip-from-backup";
/// PVC / VolumeSnapshot label: the PVC's UID, for selective restores.
pub const PVC_UID: &str = "velero.kubevirt.io/pvc-uid";
/// PVC annotation: a user's own `pvc-uid` label value, saved at backup and put back at restore.
pub const ORIGINAL_PVC_UID: &str = "velero.kubevirt.io/original-pvc-uid";
/// VolumeSnapshot annotation: same as [`ORIGINAL_PVC_UID`], for VolumeSnapshots.
pub const ORIGINAL_VOLUMESNAPSHOT_UID: &str = "velero.kubevirt.io/original-volumesnapshot-uid";
/// DataVolume annotation: the PVC is already populated, CDI must not import again.
pub const PRE_POPULATED: &str = "cdi.kubevirt.io/storage.prePopulated";
/// PVC annotation: the PVC holds the data of this DataVolume.
pub const POPULATED_FOR: &str = "cdi.kubevirt.io/storage.populatedFor";
/// PVC annotation: its DataVolume was still importing; restore skips the PVC.
pub const IN_PROGRESS: &str = "kvp.kubevirt.io/storage.inprogress";
/// VMI annotation: the VMI is recreated by its owner; restore skips it.
pub const IS_OWNED: &str = "cdi.kubevirt.io/velero.isOwned";
/// Pod label naming KubeVirt's pod roles (`virt-launcher`, `hotplug-disk`).
pub const KUBEVIRT_POD_ROLE: &str = "kubevirt.io";
/// Launcher pod annotation: the name of the VMI the pod runs.
pub const DOMAIN: &str = "kubevirt.io/domain";
/// Pod label virt-controller gives a launcher pod: the VMI's host name, which is the VMI's name unless
/// its spec sets `hostname` (or the name is longer than a host name may be).
pub const VM_NAME: &str = "vm.kubevirt.io/name";
/// PVC label marking the backend storage (persistent TPM / EFI) of a VM or VMI.
pub const PERSISTENT_STATE_FOR: &str = "persistent-state-for";
/// VMI annotation prefix recording an applied VirtualMachineInstancePreset (`<prefix><preset name>`).
pub const APPLIED_PRESET_PREFIX: &str = "virtualmachinepreset.kubevirt.io/";

/// VMI labels KubeVirt reserves for itself; restore removes them (docs/kubevirt.md#s3).
pub const RESTRICTED_VMI_LABELS: [&str; 6] = [
    "kubevirt.io/created-by",
    "kubevirt.io/migrationJobUID",
    "kubevirt.io/nodeName",
    "kubevirt.io/migrationTargetNodeName",
    "kubevirt.io/schedulable",
    "kubevirt.io/install-strategy",
];
