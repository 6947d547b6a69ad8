//! The item-block actions (Velero 1.15 and later). Velero runs a pod's backup hooks only for the pods
//! of the item block it is backing up, and the items a backup action returns as additional items are
//! not part of that block. So the VM's backup graph — above all the virt-launcher pod, whose hooks
//! freeze and thaw the guest's filesystems, and the disks' PVCs — is returned here as related items,
//! in the same order as the backup action's additional items; Velero then backs them up in one block
//! with the pod's pre hooks before and its post hooks after.
//!
//! Related items are a grouping hint: the backup action of the same item still makes every check and
//! fails the item when something is wrong. So a lookup that fails here (the launcher-pod or
//! backend-PVC LIST, a VM without `spec.template`) is logged as a warning and the rest of the graph is
//! returned; a VMI that is gone or a launcher pod not created yet is simply not found. Only what the
//! action cannot work with at all is an error: an item that is not a Kubernetes object, and a bad
//! `mode` setting.
//!
//! The Backup is not read: Velero adds a related item to the block only if the backup includes it.

use velero_wasm_sdk::{log, Object, ResourceId};

use crate::context::Context;
use crate::graph::{self, Graph};

/// `block-vm-action`: the VM's backup graph (upstream's, or extended mode's with the followers).
pub fn vm_related(ctx: &Context, vm: &Object) -> Vec<ResourceId> {
    found(graph::vm_backup_graph(ctx, vm), "VirtualMachine", vm)
}

/// `block-vmi-action` (extended mode): the VMI's backup graph. Upstream groups only VMs; a standalone
/// VMI has a launcher pod with the same freeze hooks, and an owned VMI may reach Velero before its
/// VM, so every VMI groups its own graph: whichever of VM and VMI comes first takes the pod and the
/// disks into its block.
pub fn vmi_related(ctx: &Context, vmi: &Object) -> Vec<ResourceId> {
    found(
        graph::vmi_backup_graph(ctx, vmi),
        "VirtualMachineInstance",
        vmi,
    )
}

/// The items of `graph`, after a warning for each lookup that failed.
fn found(graph: Graph, kind: &str, item: &Object) -> Vec<ResourceId> {
    for failure in &graph.failures {
        log::warn(
            &format!(
                "the item block of {kind} {}/{} misses what could not be read; the backup action reports it \
                 too, and the launcher pod's freeze hooks may not run around the disks' backup",
                item.namespace(),
                item.name()
            ),
            &[("error", failure)],
        );
    }
    graph.items
}

#[cfg(test)]
mod tests;
