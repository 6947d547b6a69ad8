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
//!
//! Velero builds blocks in the order it lists items, and pods come first (then PVCs, PVs and the
//! rest of the core group, then the other API groups): a related item already in an earlier block
//! stays there. So a running VM's launcher pod and disks are in the pod's block before Velero reaches
//! the VM, and every additional item a backup action names that is not in the current block costs
//! Velero's server a GET of its own (docs/benchmarks.md#velero). Extended mode therefore starts the
//! VM's block at the pod: [`pod_related`] names the pod's owner, a VMI's block names the VM that owns
//! it, and the VM's block its graph, so the whole graph is one block whichever item Velero reaches
//! first.

use velero_wasm_sdk::{log, Object, ResourceId};

use crate::context::Context;
use crate::fields::text;
use crate::graph::{self, Graph};
use crate::resources::{id, PODS, VIRTUAL_MACHINES, VIRTUAL_MACHINE_INSTANCES};
use crate::workload::owner_of_kind;

/// `block-vm-action`: the VM's backup graph (upstream's, or extended mode's with the followers).
pub fn vm_related(ctx: &Context, vm: &Object) -> Vec<ResourceId> {
    found(graph::vm_backup_graph(ctx, vm), "VirtualMachine", vm)
}

/// `block-vmi-action` (extended mode): the VMI's backup graph. Upstream groups only VMs; a standalone
/// VMI has a launcher pod with the same freeze hooks, and an owned VMI may reach Velero before its
/// VM, so every VMI groups its own graph: whichever of VM and VMI comes first takes the pod and the
/// disks into its block.
///
/// After the graph comes the VM that owns the VMI, if one does (its `ownerReferences`; nothing is
/// read), so that a block started at the launcher pod or the VMI also holds the VM and, through its
/// own block action, the rest of the VM's graph.
pub fn vmi_related(ctx: &Context, vmi: &Object) -> Vec<ResourceId> {
    let mut related = found(
        graph::vmi_backup_graph(ctx, vmi),
        "VirtualMachineInstance",
        vmi,
    );
    if let Some(vm) = kubevirt_owner(vmi, "VirtualMachine") {
        related.push(id(VIRTUAL_MACHINES, vmi.namespace(), vm));
    }
    related
}

/// `block-launcher-pod-action` (extended mode): a virt-launcher pod's VMI, and a hotplug-disk pod's
/// launcher pod, named from the pod's `ownerReferences` (nothing is read). Velero reaches pods before
/// any other item, so this is where a running VM's block starts: Velero then runs the VMI's block
/// action, which names the rest of the graph and the VM.
pub fn pod_related(pod: &Object) -> Vec<ResourceId> {
    let ns = pod.namespace();
    if let Some(vmi) = kubevirt_owner(pod, "VirtualMachineInstance") {
        return vec![id(VIRTUAL_MACHINE_INSTANCES, ns, vmi)];
    }
    owner_of_kind(pod, "Pod")
        .filter(|o| text(o, "/apiVersion") == "v1")
        .map(|o| text(o, "/name"))
        .filter(|name| !name.is_empty())
        .map(|name| vec![id(PODS, ns, name)])
        .unwrap_or_default()
}

/// The name of `object`'s owner of `kind` in the `kubevirt.io` group, when it names one.
fn kubevirt_owner<'a>(object: &'a Object, kind: &str) -> Option<&'a str> {
    owner_of_kind(object, kind)
        .filter(|o| text(o, "/apiVersion").starts_with("kubevirt.io/"))
        .map(|o| text(o, "/name"))
        .filter(|name| !name.is_empty())
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
