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
//! The Backup is read only for its label selectors: Velero adds a related item to the block only if
//! the backup's namespace and resource filters, its resource policy and the item's
//! `velero.io/exclude-from-backup` label let it, but it applies the Backup's `labelSelector` and
//! `orLabelSelectors` only when it lists items, never to a related item.
//!
//! Velero builds blocks in the order it lists items, and pods come first (then PVCs, PVs and the
//! rest of the core group, then the other API groups): a related item already in an earlier block
//! stays there. So a running VM's launcher pod and disks are in the pod's block before Velero reaches
//! the VM, and every additional item a backup action names that is not in the current block costs
//! Velero's server a GET of its own (docs/benchmarks.md#velero). Extended mode therefore starts the
//! VM's block at the pod: [`pod_related`] names the pod's owner, a VMI's block names the VM that owns
//! it, and the VM's block its graph, so the VM's own objects are one block. Naming an owner points up
//! the graph, and an owner pulled into a block escapes the label selectors: a backup selecting by
//! labels would gain VMs it left out. So owners are named only for a Backup without label selectors
//! ([`Owners`]).

use velero_wasm_sdk::{log, Object, ResourceId};

use crate::backup::parse_backup;
use crate::context::Context;
use crate::fields::text;
use crate::graph::{self, Graph};
use crate::resources::{id, PODS, VIRTUAL_MACHINES, VIRTUAL_MACHINE_INSTANCES};
use crate::workload::owners;

/// Whether the item-block actions may name an item's owners for this Backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owners {
    /// The Backup selects by no label: an owner in a block is what Velero backs up anyway.
    Named,
    /// The Backup has a `labelSelector` or `orLabelSelectors` (or cannot be read): Velero would not
    /// check an owner in a block against them, so none is named.
    Left,
}

impl Owners {
    /// Reads the Backup (JSON, as Velero hands it over) for its label selectors. A Backup that cannot
    /// be read leaves owners out: grouping is a hint, and leaving it out never adds an item.
    pub fn of(backup: &str) -> Owners {
        let Ok(backup) = parse_backup(backup) else {
            return Owners::Left;
        };
        let selects = |pointer: &str| {
            backup
                .pointer(pointer)
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        };
        if selects("/spec/labelSelector") || selects("/spec/orLabelSelectors") {
            Owners::Left
        } else {
            Owners::Named
        }
    }
}

/// `block-vm-action`: the VM's backup graph (upstream's, or extended mode's with the followers).
pub fn vm_related(ctx: &Context, vm: &Object) -> Vec<ResourceId> {
    found(graph::vm_backup_graph(ctx, vm), "VirtualMachine", vm)
}

/// `block-vmi-action` (extended mode): the VMI's backup graph. Upstream groups only VMs; a standalone
/// VMI has a launcher pod with the same freeze hooks, and Velero may reach an owned VMI before its VM
/// (when its launcher pod is gone), so every VMI groups its own graph.
///
/// After the graph comes the VM that owns the VMI, if one does (its `ownerReferences`; nothing is
/// read) and `owners` allows it, so that a block started at the launcher pod or the VMI also holds
/// the VM and, through its own block action, the rest of the VM's graph.
pub fn vmi_related(ctx: &Context, vmi: &Object, owners: Owners) -> Vec<ResourceId> {
    let mut related = found(
        graph::vmi_backup_graph(ctx, vmi),
        "VirtualMachineInstance",
        vmi,
    );
    if owners == Owners::Named {
        if let Some(vm) = owner_named(vmi, "VirtualMachine", KUBEVIRT) {
            related.push(id(VIRTUAL_MACHINES, vmi.namespace(), vm));
        }
    }
    related
}

/// `block-launcher-pod-action` (extended mode): a virt-launcher pod's VMI, and a hotplug-disk pod's
/// launcher pod, named from the pod's `ownerReferences` (nothing is read), when `owners` allows it.
/// Velero reaches pods before any other item, so this is where a running VM's block starts: Velero
/// then runs the VMI's block action, which names the rest of the graph and the VM.
pub fn pod_related(pod: &Object, owners: Owners) -> Vec<ResourceId> {
    if owners == Owners::Left {
        return Vec::new();
    }
    let ns = pod.namespace();
    if let Some(vmi) = owner_named(pod, "VirtualMachineInstance", KUBEVIRT) {
        return vec![id(VIRTUAL_MACHINE_INSTANCES, ns, vmi)];
    }
    owner_named(pod, "Pod", CORE)
        .map(|name| vec![id(PODS, ns, name)])
        .unwrap_or_default()
}

/// KubeVirt's API group, as an owner reference's `apiVersion` starts.
const KUBEVIRT: &str = "kubevirt.io/";
/// The core group's only version, an owner reference's whole `apiVersion`.
const CORE: &str = "v1";

/// The name of `object`'s first owner of `kind` whose `apiVersion` is `api` (or, for a group ending in
/// `/`, starts with it), when it names one.
fn owner_named<'a>(object: &'a Object, kind: &str, api: &str) -> Option<&'a str> {
    owners(object)
        .iter()
        .filter(|o| text(o, "/kind") == kind)
        .filter(|o| {
            let version = text(o, "/apiVersion");
            if api.ends_with('/') {
                version.starts_with(api)
            } else {
                version == api
            }
        })
        .map(|o| text(o, "/name"))
        .find(|name| !name.is_empty())
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
