//! Every error text the component returns. Each starts with upstream's exact wording, so log searches
//! written for kubevirt-velero-plugin still match; in extended mode a `: …` tail says what is wrong and
//! which resource must be included in the backup, and how.

use velero_wasm_sdk::{KubeError, Object};

use crate::mode::Mode;

/// The Backup argument is `null` (unreachable through Velero).
pub const BACKUP_NIL: &str = "backup object nil!";
/// The item or Restore argument is `null` (unreachable through Velero).
pub const INPUT_NIL: &str = "input object nil!";

const METADATA_ONLY_HINT: &str = "or, to back up only the VM definition without its disks, \
     create the backup with the label velero.kubevirt.io/metadataBackup=true";

fn with_guidance(mode: Mode, upstream: &str, guidance: impl FnOnce() -> String) -> String {
    match mode {
        Mode::Upstream => upstream.to_string(),
        Mode::Extended => format!("{upstream}: {}", guidance()),
    }
}

fn who(object: &Object) -> String {
    format!("{}/{}", object.namespace(), object.name())
}

/// Why a running VM cannot be backed up safely (docs/kubevirt.md#s5-4 step 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsafeVm {
    /// `virtualmachineinstances` are not in the backup's scope.
    VmisNotInBackup,
    /// The VMI carries `velero.io/exclude-from-backup=true`.
    VmiExcludedByLabel,
    /// PVCs are in scope but pods are not, so no freeze hooks run.
    PodsNotInBackup,
    /// The name globs of the resource policy (named) leave the VMI out (extended mode, Velero 1.18.3+).
    VmiLeftOutByPolicy(String),
}

/// The guidance for an object a resource policy's name globs leave out.
fn policy_guidance(policy: &str, resource: &str, namespace: &str) -> String {
    format!(
        "the names/excludedNames of the namespacedFilterPolicies entry for {resource} in namespace {namespace} of \
         resource policy ConfigMap {policy} leave it out; let that filter keep the name"
    )
}

/// `VM cannot be safely backed up`.
pub fn unsafe_vm(mode: Mode, vm: &Object, why: UnsafeVm) -> String {
    with_guidance(mode, "VM cannot be safely backed up", || {
        let vm_id = who(vm);
        match why {
            UnsafeVm::VmisNotInBackup => format!(
                "VirtualMachine {vm_id} is running and the backup does not include virtualmachineinstances.kubevirt.io; \
                 include virtualmachineinstances.kubevirt.io and pods in the backup (velero backup create \
                 --include-resources, or drop them from --exclude-resources), or stop the VM before the backup"
            ),
            UnsafeVm::VmiExcludedByLabel => format!(
                "VirtualMachine {vm_id} is running and its VirtualMachineInstance {vm_id} is labelled \
                 velero.io/exclude-from-backup=true; remove that label, or stop the VM before the backup"
            ),
            UnsafeVm::PodsNotInBackup => format!(
                "VirtualMachine {vm_id} is running and the backup includes persistentvolumeclaims but not pods, so \
                 the virt-launcher pod's freeze hooks would not run and its disks would be captured unfrozen; \
                 include pods in the backup, exclude persistentvolumeclaims as well, or stop the VM before the backup"
            ),
            UnsafeVm::VmiLeftOutByPolicy(policy) => format!(
                "VirtualMachine {vm_id} is running and its VirtualMachineInstance {vm_id} would be left out of the \
                 backup: {}, or stop the VM before the backup",
                policy_guidance(&policy, "virtualmachineinstances", vm.namespace())
            ),
        }
    })
}

/// Which volume makes a restore impossible, and why (docs/kubevirt.md#s4-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// The volume's DataVolume carries `velero.io/exclude-from-backup=true`.
    DataVolumeExcludedByLabel {
        /// Volume name.
        volume: String,
        /// DataVolume name.
        name: String,
    },
    /// DataVolumes are not in the backup's scope.
    DataVolumesNotInBackup {
        /// Volume name.
        volume: String,
        /// DataVolume name.
        name: String,
    },
    /// PVCs are not in the backup's scope.
    PvcsNotInBackup {
        /// Volume name.
        volume: String,
        /// PVC name.
        claim: String,
        /// The volume names a DataVolume that no longer exists (so its PVC must carry the data).
        via_datavolume: bool,
    },
    /// The PVC carries `velero.io/exclude-from-backup=true`.
    PvcExcludedByLabel {
        /// Volume name.
        volume: String,
        /// PVC name.
        claim: String,
        /// As for [`Blocker::PvcsNotInBackup`].
        via_datavolume: bool,
    },
    /// The resource policy's name globs leave the DataVolume out (extended mode, Velero 1.18.3+).
    DataVolumeLeftOutByPolicy {
        /// Volume name.
        volume: String,
        /// DataVolume name.
        name: String,
        /// `namespace/name` of the policy ConfigMap.
        policy: String,
    },
    /// The resource policy's name globs leave the PVC out (extended mode, Velero 1.18.3+).
    PvcLeftOutByPolicy {
        /// Volume name.
        volume: String,
        /// PVC name.
        claim: String,
        /// As for [`Blocker::PvcsNotInBackup`].
        via_datavolume: bool,
        /// `namespace/name` of the policy ConfigMap.
        policy: String,
    },
}

impl Blocker {
    fn explain(&self, namespace: &str) -> String {
        let claim_source = |volume: &str, claim: &str, via_datavolume: bool| {
            if via_datavolume {
                format!(
                    "volume {volume:?} uses DataVolume {namespace}/{claim}, which no longer exists, so its PVC \
                     {namespace}/{claim} holds the data"
                )
            } else {
                format!("volume {volume:?} uses PVC {namespace}/{claim}")
            }
        };
        match self {
            Blocker::DataVolumeExcludedByLabel { volume, name } => format!(
                "volume {volume:?} uses DataVolume {namespace}/{name}, which is labelled \
                 velero.io/exclude-from-backup=true; remove that label, {METADATA_ONLY_HINT}"
            ),
            Blocker::DataVolumesNotInBackup { volume, name } => format!(
                "volume {volume:?} uses DataVolume {namespace}/{name} and the backup does not include \
                 datavolumes.cdi.kubevirt.io; include datavolumes.cdi.kubevirt.io and persistentvolumeclaims in the \
                 backup, {METADATA_ONLY_HINT}"
            ),
            Blocker::PvcsNotInBackup { volume, claim, via_datavolume } => format!(
                "{} and the backup does not include persistentvolumeclaims; include persistentvolumeclaims in the \
                 backup, {METADATA_ONLY_HINT}",
                claim_source(volume, claim, *via_datavolume)
            ),
            Blocker::PvcExcludedByLabel { volume, claim, via_datavolume } => format!(
                "{}, and that PVC is labelled velero.io/exclude-from-backup=true; remove that label, {METADATA_ONLY_HINT}",
                claim_source(volume, claim, *via_datavolume)
            ),
            Blocker::DataVolumeLeftOutByPolicy { volume, name, policy } => format!(
                "volume {volume:?} uses DataVolume {namespace}/{name}, and {}, {METADATA_ONLY_HINT}",
                policy_guidance(policy, "datavolumes.cdi.kubevirt.io", namespace)
            ),
            Blocker::PvcLeftOutByPolicy { volume, claim, via_datavolume, policy } => format!(
                "{}, and {}, {METADATA_ONLY_HINT}",
                claim_source(volume, claim, *via_datavolume),
                policy_guidance(policy, "persistentvolumeclaims", namespace)
            ),
        }
    }
}

/// `VM would not be restored correctly` (VM action).
pub fn vm_not_restorable(mode: Mode, vm: &Object, blocker: &Blocker) -> String {
    with_guidance(mode, "VM would not be restored correctly", || {
        format!(
            "VirtualMachine {}: {}",
            who(vm),
            blocker.explain(vm.namespace())
        )
    })
}

/// `VM has DataVolume or PVC volumes and DataVolumes/PVCs is not included in the backup` (VMI action).
pub fn vmi_not_restorable(mode: Mode, vmi: &Object, blocker: &Blocker) -> String {
    with_guidance(
        mode,
        "VM has DataVolume or PVC volumes and DataVolumes/PVCs is not included in the backup",
        || {
            format!(
                "VirtualMachineInstance {}: {}",
                who(vmi),
                blocker.explain(vmi.namespace())
            )
        },
    )
}

/// Why a running VMI's launcher pod will be missing from the backup (docs/kubevirt.md#s5-5 step 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LauncherOutside {
    /// PVCs are in scope but pods are not.
    PodsNotInBackup,
    /// The launcher pod (named) carries `velero.io/exclude-from-backup=true`.
    PodExcludedByLabel(String),
    /// The resource policy's name globs leave the launcher pod out (extended mode, Velero 1.18.3+).
    PodLeftOutByPolicy {
        /// Pod name.
        pod: String,
        /// `namespace/name` of the policy ConfigMap.
        policy: String,
    },
}

/// `VM is running but launcher pod is not included in the backup`.
pub fn launcher_not_in_backup(mode: Mode, vmi: &Object, why: &LauncherOutside) -> String {
    with_guidance(
        mode,
        "VM is running but launcher pod is not included in the backup",
        || {
            match why {
        LauncherOutside::PodsNotInBackup => format!(
            "VirtualMachineInstance {} is running and the backup includes persistentvolumeclaims but not pods, so \
             the virt-launcher pod's freeze hooks would not run and its disks would be captured unfrozen; include \
             pods in the backup, or exclude persistentvolumeclaims as well",
            who(vmi)
        ),
        LauncherOutside::PodExcludedByLabel(pod) => format!(
            "the virt-launcher pod {}/{pod} of VirtualMachineInstance {} is labelled \
             velero.io/exclude-from-backup=true; remove that label so that Velero runs the pod's freeze hooks",
            vmi.namespace(),
            who(vmi)
        ),
        LauncherOutside::PodLeftOutByPolicy { pod, policy } => format!(
            "the virt-launcher pod {}/{pod} of VirtualMachineInstance {} would be left out of the backup: {}, so \
             that Velero runs the pod's freeze hooks",
            vmi.namespace(),
            who(vmi),
            policy_guidance(policy, "pods", vmi.namespace())
        ),
    }
        },
    )
}

/// `pod for running VMI not found`.
pub fn launcher_not_found(mode: Mode, vmi: &Object) -> String {
    with_guidance(mode, "pod for running VMI not found", || {
        format!(
            "no pod labelled kubevirt.io=virt-launcher with annotation kubevirt.io/domain={} in namespace {}; \
             if VirtualMachineInstance {} is starting, migrating or stopping, run the backup again once it has settled",
            vmi.name(),
            vmi.namespace(),
            who(vmi)
        )
    })
}

/// The launcher-pod LIST failed (upstream's wording in both modes: it already names the VMI).
pub fn launcher_list_failed(namespace: &str, name: &str, cause: &KubeError) -> String {
    format!(
        "failed to get launcher pod from VMI {namespace}/{name}: {}",
        cause.message()
    )
}

/// A DataVolume GET failed with something other than NotFound (upstream's wording).
pub fn datavolume_get_failed(namespace: &str, name: &str, cause: &KubeError) -> String {
    format!("failed to get DV {namespace}/{name}: {}", cause.message())
}

/// A VolumeSnapshot's source PVC does not exist.
pub fn snapshot_source_missing(mode: Mode, snapshot: &Object, claim: &str) -> String {
    let namespace = snapshot.namespace();
    with_guidance(
        mode,
        &format!("PVC {claim} not found in namespace {namespace}"),
        || {
            format!(
            "VolumeSnapshot {} names it in spec.source.persistentVolumeClaimName; the PVC was deleted or renamed \
             after the snapshot was taken, so the snapshot cannot be labelled with its UID",
            who(snapshot)
        )
        },
    )
}

/// The backend-storage PVC LIST failed at backup (extended mode only; upstream swallows it).
pub fn backend_list_failed(namespace: &str, name: &str, cause: &KubeError) -> String {
    format!(
        "failed to list the backend-storage PVCs (persistent TPM/EFI state) of {namespace}/{name}: {}; without them \
         the restored VM would lose its TPM and EFI variables",
        cause.message()
    )
}

/// A Kubernetes error returned as an action error: upstream returns the API message alone; extended
/// mode says what was being read and why.
pub fn kube_error(mode: Mode, cause: &KubeError, context: impl FnOnce() -> String) -> String {
    with_guidance(mode, cause.message(), context)
}

/// Several graph errors, in Kubernetes' aggregate format (`[a, b]`); one error alone is itself.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm() -> Object {
        Object::from_value(
            json!({"kind": "VirtualMachine", "metadata": {"name": "vm1", "namespace": "ns"}}),
        )
        .unwrap()
    }

    #[test]
    fn upstream_mode_returns_upstream_text_exactly() {
        assert_eq!(
            unsafe_vm(Mode::Upstream, &vm(), UnsafeVm::PodsNotInBackup),
            "VM cannot be safely backed up"
        );
        let b = Blocker::DataVolumesNotInBackup {
            volume: "root".into(),
            name: "d".into(),
        };
        assert_eq!(
            vm_not_restorable(Mode::Upstream, &vm(), &b),
            "VM would not be restored correctly"
        );
        assert_eq!(
            vmi_not_restorable(Mode::Upstream, &vm(), &b),
            "VM has DataVolume or PVC volumes and DataVolumes/PVCs is not included in the backup"
        );
        assert_eq!(
            launcher_not_found(Mode::Upstream, &vm()),
            "pod for running VMI not found"
        );
        assert_eq!(
            launcher_not_in_backup(Mode::Upstream, &vm(), &LauncherOutside::PodsNotInBackup),
            "VM is running but launcher pod is not included in the backup"
        );
    }

    #[test]
    fn extended_mode_keeps_the_upstream_prefix_and_names_the_fix() {
        let m = unsafe_vm(Mode::Extended, &vm(), UnsafeVm::VmisNotInBackup);
        assert!(
            m.starts_with("VM cannot be safely backed up: VirtualMachine ns/vm1"),
            "{m}"
        );
        assert!(
            m.contains("include virtualmachineinstances.kubevirt.io and pods"),
            "{m}"
        );
        let b = Blocker::PvcExcludedByLabel {
            volume: "data".into(),
            claim: "p".into(),
            via_datavolume: false,
        };
        let m = vm_not_restorable(Mode::Extended, &vm(), &b);
        assert!(m.starts_with("VM would not be restored correctly: "), "{m}");
        assert!(
            m.contains("PVC ns/p")
                && m.contains("remove that label")
                && m.contains("metadataBackup"),
            "{m}"
        );
    }

    #[test]
    fn aggregates_follow_kubernetes() {
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }
}
