//! `kubevirt-velero-plugin/restore-pod-action` (docs/kubevirt.md#s6-3): virt-launcher and hotplug attachment pods
//! are never restored; KubeVirt recreates them when the VM runs. They were backed up only so that Velero
//! ran their freeze hooks.

use velero_wasm_sdk::RestoreResponse;

/// Runs the action (the selector already limited it to `kubevirt.io in (virt-launcher, hotplug-disk)`).
pub fn restore() -> RestoreResponse {
    RestoreResponse::skip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checklist_102_launcher_and_hotplug_pods_are_always_skipped() {
        let out = restore();
        assert!(out.skip_restore && out.item.is_none() && out.additional_items.is_empty());
        // Which pods reach the action is the selector's business: `catalog` tests the selector text,
        // tests/kubevirt.rs that the host applies it (a pod without KubeVirt labels is not matched).
    }
}
