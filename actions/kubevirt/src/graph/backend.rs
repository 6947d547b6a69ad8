//! The backend-storage PVC of a VM or VMI (docs/kubevirt.md#s4-5): KubeVirt keeps persistent TPM and EFI state
//! there, so a restored VM without it loses its TPM keys and EFI variables.

use serde_json::Value;
use velero_wasm_sdk::{log, ResourceId};

use crate::context::Context;
use crate::fields::flag;
use crate::keys;
use crate::messages;
use crate::resources::{id, PERSISTENT_VOLUME_CLAIMS};

/// Whether a VMI spec asks for backend storage: persistent TPM or persistent EFI.
pub fn needs_backend(spec: &Value) -> bool {
    flag(spec, "/domain/devices/tpm/persistent")
        || flag(spec, "/domain/firmware/bootloader/efi/persistent")
}

/// When the lookup runs: a failed LIST matters more at backup (the PVC would be missed) than at
/// restore (the item only orders the restore).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Inside a backup graph.
    Backup,
    /// Inside a restore graph (against the restore target, in the backup-time namespace).
    Restore,
}

/// The backend PVCs of `namespace/name`: every PVC labelled `persistent-state-for=<name>` in list
/// order, or the pre-1.4 name `persistent-state-for-<name>` when none is labelled.
///
/// Upstream treats a failed LIST as "none" (docs/kubevirt.md#s8-5). Extended mode fails the backup instead, and at
/// restore logs a warning before falling back to the old name.
pub fn backend_items(
    ctx: &Context,
    namespace: &str,
    name: &str,
    phase: Phase,
) -> Result<Vec<ResourceId>, String> {
    let selector = format!("{}={name}", keys::PERSISTENT_STATE_FOR);
    let found = match ctx
        .cluster
        .list(PERSISTENT_VOLUME_CLAIMS, namespace, &selector)
    {
        Ok(pvcs) => pvcs,
        Err(e) if ctx.extended() && phase == Phase::Backup => {
            return Err(messages::backend_list_failed(namespace, name, &e))
        }
        Err(e) => {
            if ctx.extended() {
                log::warn(
                    "cannot list backend-storage PVCs; naming the pre-1.4 PVC instead",
                    &[
                        ("namespace", namespace),
                        ("name", name),
                        ("error", e.message()),
                    ],
                );
            }
            Vec::new()
        }
    };
    if found.is_empty() {
        return Ok(vec![id(
            PERSISTENT_VOLUME_CLAIMS,
            namespace,
            &format!("persistent-state-for-{name}"),
        )]);
    }
    Ok(found
        .iter()
        .map(|pvc| id(PERSISTENT_VOLUME_CLAIMS, namespace, pvc.name()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use serde_json::json;
    use velero_wasm_sdk::{FakeCluster, Object};

    fn pvc(name: &str, owner: &str) -> Object {
        Object::from_value(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ns", "labels": {"persistent-state-for": owner}}}))
        .unwrap()
    }

    fn names(items: Vec<ResourceId>) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn checklist_14_15_16_persistent_tpm_or_efi_needs_backend_storage() {
        assert!(needs_backend(
            &json!({"domain": {"devices": {"tpm": {"persistent": true}}}})
        ));
        assert!(needs_backend(
            &json!({"domain": {"firmware": {"bootloader": {"efi": {"persistent": true}}}}})
        ));
        assert!(!needs_backend(
            &json!({"domain": {"devices": {"tpm": {"persistent": false}}}})
        ));
        assert!(!needs_backend(&json!({"domain": {"devices": {"tpm": {}}}})));
        assert!(!needs_backend(
            &json!({"domain": {"firmware": {"bootloader": {"efi": {}}}}})
        ));
    }

    #[test]
    fn checklist_14_a_labelled_pvc_is_found_by_selector() {
        let c = FakeCluster::new()
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("S", "vm1"))
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("T", "other"));
        let items = backend_items(
            &Context::new(&c, Mode::Upstream),
            "ns",
            "vm1",
            Phase::Backup,
        )
        .unwrap();
        assert_eq!(names(items), ["persistentvolumeclaims ns/S"]);
        assert_eq!(c.calls()[0].target, "persistent-state-for=vm1");
    }

    #[test]
    fn checklist_17_no_labelled_pvc_names_the_legacy_one() {
        let c = FakeCluster::new();
        let items = backend_items(
            &Context::new(&c, Mode::Upstream),
            "ns",
            "vm1",
            Phase::Backup,
        )
        .unwrap();
        assert_eq!(
            names(items),
            ["persistentvolumeclaims ns/persistent-state-for-vm1"]
        );
    }

    #[test]
    fn checklist_18_upstream_swallows_a_list_error() {
        let c = FakeCluster::new().failing_list(PERSISTENT_VOLUME_CLAIMS);
        let items = backend_items(
            &Context::new(&c, Mode::Upstream),
            "ns",
            "vm1",
            Phase::Backup,
        )
        .unwrap();
        assert_eq!(
            names(items),
            ["persistentvolumeclaims ns/persistent-state-for-vm1"]
        );
    }

    #[test]
    fn extended_fails_the_backup_on_a_list_error_but_not_the_restore() {
        let c = FakeCluster::new().failing_list(PERSISTENT_VOLUME_CLAIMS);
        let ctx = Context::new(&c, Mode::Extended);
        let e = backend_items(&ctx, "ns", "vm1", Phase::Backup).unwrap_err();
        assert!(e.contains("ns/vm1") && e.contains("TPM"), "{e}");
        let items = backend_items(&ctx, "ns", "vm1", Phase::Restore).unwrap();
        assert_eq!(
            names(items),
            ["persistentvolumeclaims ns/persistent-state-for-vm1"]
        );
    }

    #[test]
    fn checklist_19_several_labelled_pvcs_in_list_order() {
        let c = FakeCluster::new()
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("S1", "vm1"))
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("S2", "vm1"));
        let items = backend_items(
            &Context::new(&c, Mode::Upstream),
            "ns",
            "vm1",
            Phase::Backup,
        )
        .unwrap();
        assert_eq!(
            names(items),
            [
                "persistentvolumeclaims ns/S1",
                "persistentvolumeclaims ns/S2"
            ]
        );
    }
}
