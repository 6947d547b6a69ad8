//! The actions this component provides: upstream's names and selectors (its eleven item actions and
//! its VM item-block action), so replacing the upstream plugin image with velero-wasm is the whole
//! migration, plus extended mode's own.

use velero_wasm_sdk::{ActionInfo, Kind, Selector, Verb};

use crate::mode::Mode;
use crate::restore::operations::OPERATION_RESOURCES;

/// Backup: PVC and DataVolume population state.
pub const BACKUP_DATAVOLUME: &str = "kubevirt-velero-plugin/backup-datavolume-action";
/// Backup: PVC UID label.
pub const BACKUP_PVC: &str = "kubevirt-velero-plugin/backup-pvc-action";
/// Backup: VirtualMachine.
pub const BACKUP_VIRTUALMACHINE: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
/// Backup: VirtualMachineInstance.
pub const BACKUP_VIRTUALMACHINEINSTANCE: &str =
    "kubevirt-velero-plugin/backup-virtualmachineinstance-action";
/// Backup: VolumeSnapshot source-PVC UID label.
pub const BACKUP_VOLUMESNAPSHOT: &str = "kubevirt-velero-plugin/backup-volumesnapshot-action";
/// Item block: a VM with its backup graph (Velero 1.15 and later).
pub const BLOCK_VM: &str = "kubevirt-velero-plugin/block-vm-action";
/// Item block: a VMI with its backup graph and its VM (extended mode only).
pub const BLOCK_VMI: &str = "kubevirt-velero-plugin/block-vmi-action";
/// Item block: a launcher pod with its VMI, a hotplug pod with its launcher pod (extended mode only).
pub const BLOCK_LAUNCHER_POD: &str = "kubevirt-velero-plugin/block-launcher-pod-action";
/// Restore: map the namespace in a NetworkAttachmentDefinition's `netAttachDefName` (upstream #431).
pub const RESTORE_NAD: &str = "kubevirt-velero-plugin/restore-nad-action";
/// Upstream's selector for it: the CRD's singular resource name, which Velero resolves by discovery.
pub const NETWORK_ATTACHMENT_DEFINITION: &str = "network-attachment-definition";
/// Restore: skip KubeVirt operation requests (extended mode only).
pub const RESTORE_OPERATION: &str = "kubevirt-velero-plugin/restore-operation-action";
/// Restore: skip launcher and hotplug pods.
pub const RESTORE_POD: &str = "kubevirt-velero-plugin/restore-pod-action";
/// Restore: PVCs.
pub const RESTORE_PVC: &str = "kubevirt-velero-plugin/restore-pvc-action";
/// Restore: VirtualMachine.
pub const RESTORE_VM: &str = "kubevirt-velero-plugin/restore-vm-action";
/// Restore: VirtualMachineInstance.
pub const RESTORE_VMI: &str = "kubevirt-velero-plugin/restore-vmi-action";
/// Restore: VolumeSnapshot.
pub const RESTORE_VOLUMESNAPSHOT: &str = "kubevirt-velero-plugin/restore-volumesnapshot-action";

/// The pod restore action's label selector.
pub const LAUNCHER_AND_HOTPLUG_PODS: &str = "kubevirt.io in (virt-launcher, hotplug-disk)";

const GET: &[Verb] = &[Verb::Get];
const LIST: &[Verb] = &[Verb::List];
const GET_LIST: &[Verb] = &[Verb::Get, Verb::List];
/// Every read is in the namespace of the item being processed (the grant's `@item`).
const ITEM: &[&str] = &["@item"];

/// Every action, sorted by name as upstream's plugin server lists them. Extended mode adds
/// [`BLOCK_LAUNCHER_POD`], [`BLOCK_VMI`] and [`RESTORE_OPERATION`].
pub fn describe(mode: Mode) -> Vec<ActionInfo> {
    let mut actions = vec![
        ActionInfo::new(BACKUP_DATAVOLUME, Kind::Backup)
            .applies_to(Selector::resources(&["PersistentVolumeClaim", "DataVolume"]))
            .description("marks DataVolumes and their PVCs as populated or still importing, for CDI after a restore")
            .needs_kube_in("datavolumes.cdi.kubevirt.io", GET, ITEM),
        ActionInfo::new(BACKUP_PVC, Kind::Backup)
            .applies_to(Selector::resources(&["PersistentVolumeClaim"]))
            .description("labels each PVC with its UID (velero.kubevirt.io/pvc-uid) for selective restores"),
        ActionInfo::new(BACKUP_VIRTUALMACHINE, Kind::Backup)
            .applies_to(Selector::resources(&["VirtualMachine"]))
            .description("checks a VM can be backed up safely and restored, and backs up everything it needs")
            .needs_kube_in("virtualmachineinstances.kubevirt.io", GET, ITEM)
            .needs_kube_in("datavolumes.cdi.kubevirt.io", GET, ITEM)
            .needs_kube_in("persistentvolumeclaims", GET_LIST, ITEM)
            .needs_kube_in("pods", LIST, ITEM),
        ActionInfo::new(BACKUP_VIRTUALMACHINEINSTANCE, Kind::Backup)
            .applies_to(Selector::resources(&["VirtualMachineInstance"]))
            .description("marks owned VMIs to be skipped at restore, checks the launcher pod, backs up what a VMI needs")
            .needs_kube_in("virtualmachines.kubevirt.io", GET, ITEM)
            .needs_kube_in("datavolumes.cdi.kubevirt.io", GET, ITEM)
            .needs_kube_in("persistentvolumeclaims", GET_LIST, ITEM)
            .needs_kube_in("pods", LIST, ITEM),
        ActionInfo::new(BACKUP_VOLUMESNAPSHOT, Kind::Backup)
            .applies_to(Selector::resources(&["VolumeSnapshot"]))
            .description("labels each VolumeSnapshot with the UID of its source PVC")
            .needs_kube_in("persistentvolumeclaims", LIST, ITEM),
        ActionInfo::new(BLOCK_VM, Kind::ItemBlock)
            .applies_to(Selector::resources(&["virtualmachines.kubevirt.io"]))
            .description("puts a VM's VMI, launcher pod, disks and what else it needs in its item block, so the pod's freeze hooks run around the disks' backup")
            .needs_kube_in("pods", LIST, ITEM)
            .needs_kube_in("persistentvolumeclaims", LIST, ITEM),
        ActionInfo::new(RESTORE_NAD, Kind::Restore)
            .applies_to(Selector::resources(&[NETWORK_ATTACHMENT_DEFINITION]))
            .description("maps the namespace in a NetworkAttachmentDefinition's netAttachDefName on a restore with namespaceMapping"),
        ActionInfo::new(RESTORE_POD, Kind::Restore)
            .applies_to(Selector::resources(&["Pod"]).labels(LAUNCHER_AND_HOTPLUG_PODS))
            .description("skips virt-launcher and hotplug pods: KubeVirt recreates them"),
        ActionInfo::new(RESTORE_PVC, Kind::Restore)
            .applies_to(Selector::resources(&["PersistentVolumeClaim"]))
            .description("skips PVCs of unfinished imports and restores the user's pvc-uid label"),
        ActionInfo::new(RESTORE_VM, Kind::Restore)
            .applies_to(Selector::resources(&["VirtualMachine"]))
            .description("applies the Restore's run-strategy, MAC and firmware-UUID labels; restores what a VM needs first")
            .needs_kube_in("persistentvolumeclaims", LIST, ITEM),
        ActionInfo::new(RESTORE_VMI, Kind::Restore)
            .applies_to(Selector::resources(&["VirtualMachineInstance"]))
            .description("skips owned VMIs, removes KubeVirt's reserved labels, restores what a standalone VMI needs first")
            .needs_kube_in("persistentvolumeclaims", LIST, ITEM),
        ActionInfo::new(RESTORE_VOLUMESNAPSHOT, Kind::Restore)
            .applies_to(Selector::resources(&["VolumeSnapshot"]))
            .description("restores the user's pvc-uid label of a VolumeSnapshot"),
    ];
    if mode.extended() {
        actions.push(
            ActionInfo::new(BLOCK_LAUNCHER_POD, Kind::ItemBlock)
                .applies_to(Selector::resources(&["pods"]).labels(LAUNCHER_AND_HOTPLUG_PODS))
                .description("starts a running VM's item block at its launcher pod (the first item Velero reaches): the pod's VMI, and through it the VM and its graph"),
        );
        actions.push(
            ActionInfo::new(BLOCK_VMI, Kind::ItemBlock)
                .applies_to(Selector::resources(&["virtualmachineinstances.kubevirt.io"]))
                .description("puts a VMI's launcher pod, disks, VM and what else it needs in its item block, so the pod's freeze hooks run around the disks' backup")
                .needs_kube_in("pods", LIST, ITEM)
                .needs_kube_in("persistentvolumeclaims", LIST, ITEM),
        );
        actions.push(
            ActionInfo::new(RESTORE_OPERATION, Kind::Restore)
                .applies_to(Selector::resources(&OPERATION_RESOURCES))
                .description("skips KubeVirt operation requests (migrations, snapshots, restores, exports, clones, CBT backups and their trackers)"),
        );
    }
    actions.sort_by(|a, b| a.name.cmp(&b.name));
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(mode: Mode) -> Vec<String> {
        describe(mode).into_iter().map(|a| a.name).collect()
    }

    #[test]
    fn checklist_109_upstream_lists_exactly_its_twelve_actions_sorted() {
        assert_eq!(
            names(Mode::Upstream),
            [
                BACKUP_DATAVOLUME,
                BACKUP_PVC,
                BACKUP_VIRTUALMACHINE,
                BACKUP_VIRTUALMACHINEINSTANCE,
                BACKUP_VOLUMESNAPSHOT,
                BLOCK_VM,
                RESTORE_NAD,
                RESTORE_POD,
                RESTORE_PVC,
                RESTORE_VM,
                RESTORE_VMI,
                RESTORE_VOLUMESNAPSHOT,
            ]
        );
        let actions = describe(Mode::Upstream);
        let backups = actions
            .iter()
            .filter(|a| matches!(a.kind, Kind::Backup))
            .count();
        let restores = actions
            .iter()
            .filter(|a| matches!(a.kind, Kind::Restore))
            .count();
        assert_eq!((backups, restores), (5, 6));
        let block = actions.iter().find(|a| a.name == BLOCK_VM).unwrap();
        assert!(matches!(block.kind, Kind::ItemBlock));
        assert_eq!(
            block.applies_to.included_resources,
            ["virtualmachines.kubevirt.io"]
        );
        let nad = actions.iter().find(|a| a.name == RESTORE_NAD).unwrap();
        assert_eq!(
            nad.applies_to.included_resources,
            ["network-attachment-definition"]
        );
        let pod = actions.iter().find(|a| a.name == RESTORE_POD).unwrap();
        assert_eq!(pod.applies_to.included_resources, ["Pod"]);
        assert_eq!(pod.applies_to.label_selector, LAUNCHER_AND_HOTPLUG_PODS);
        let dv = actions
            .iter()
            .find(|a| a.name == BACKUP_DATAVOLUME)
            .unwrap();
        assert_eq!(
            dv.applies_to.included_resources,
            ["PersistentVolumeClaim", "DataVolume"]
        );
    }

    #[test]
    fn extended_adds_the_pod_and_vmi_item_blocks_and_the_operation_skipper() {
        let names = names(Mode::Extended);
        assert_eq!(names.len(), 15);
        assert!(names.contains(&BLOCK_LAUNCHER_POD.to_string()));
        assert!(names.contains(&BLOCK_VMI.to_string()));
        let pod = describe(Mode::Extended)
            .into_iter()
            .find(|a| a.name == BLOCK_LAUNCHER_POD)
            .unwrap();
        assert!(matches!(pod.kind, Kind::ItemBlock));
        assert_eq!(pod.applies_to.included_resources, ["pods"]);
        assert_eq!(pod.applies_to.label_selector, LAUNCHER_AND_HOTPLUG_PODS);
        assert!(names.contains(&RESTORE_OPERATION.to_string()));
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
}
