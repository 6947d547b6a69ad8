//! `kubevirt-velero-plugin/restore-pod-action` (spec §6.3): virt-launcher and hotplug attachment pods
//! are never restored; KubeVirt recreates them when the VM runs. They were backed up only so that Velero
//! ran their freeze hooks.

use velero_wasm_sdk::RestoreResponse;

/// Runs the action (the selector already limited it to `kubevirt.io in (virt-launcher, hotplug-disk)`).
pub fn restore() -> RestoreResponse {
    RestoreResponse::skip()
}
