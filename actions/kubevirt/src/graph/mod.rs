//! The dependency graphs (docs/kubevirt.md#s4-9): the objects Velero must back up (or restore first) together
//! with a VM, a VMI or a DataVolume, in upstream's exact order. Extended mode then appends the
//! [`followers`] upstream misses and drops duplicates and empty names (docs/kubevirt.md#s8-9), so upstream's list
//! is a prefix of the extended one — except for the Multus NetworkAttachmentDefinitions, which upstream
//! appends after the credentials and extended mode (which followed them first) keeps among its followers.

pub mod backend;
pub mod credentials;
pub mod followers;
pub mod launcher;
pub mod networks;
pub mod revisions;
pub mod volumes;

use std::collections::HashSet;

use serde_json::Value;
use velero_wasm_sdk::{Object, ResourceId};

use crate::context::Context;
use crate::fields::list;
use crate::messages;
use crate::mode::Mode;
use crate::resources::{id, PODS, VIRTUAL_MACHINE_INSTANCES};
use crate::workload::{vm_instance_spec, vmi_spec, volumes};
use backend::{backend_items, needs_backend, Phase};

/// A backup graph as far as it could be built, and the lookups that failed on the way. The backup
/// actions fail on any failure ([`Graph::complete`]); the item-block actions use what was found,
/// since the backup action of the same item reports the failure.
#[derive(Debug, Default)]
pub struct Graph {
    /// The items found, in upstream's order (extended mode: followed by the followers, finished).
    pub items: Vec<ResourceId>,
    /// What could not be read, one message per failed lookup, in the order they happened.
    pub failures: Vec<String>,
}

impl Graph {
    /// The items when every lookup succeeded; otherwise the failures in Kubernetes' aggregate format.
    pub fn complete(self) -> Result<Vec<ResourceId>, String> {
        if self.failures.is_empty() {
            Ok(self.items)
        } else {
            Err(messages::aggregate(&self.failures))
        }
    }
}

/// Stands in for the spec of a VM that has none, so that the rest of its graph can still be built.
static NO_SPEC: Value = Value::Null;

/// What a VM needs at backup: its ControllerRevisions, its VMI and launcher pod (when created), its
/// volumes' objects, its backend PVC, its credentials' Secrets.
pub fn vm_backup(ctx: &Context, vm: &Object) -> Result<Vec<ResourceId>, String> {
    vm_instance_spec(vm)?;
    vm_backup_graph(ctx, vm).complete()
}

/// [`vm_backup`] without stopping at a failure: a VM without `spec.template` still names its
/// revisions, VMI, launcher pod and followers; a failed pod or backend LIST leaves that item out.
pub fn vm_backup_graph(ctx: &Context, vm: &Object) -> Graph {
    let mut failures = Vec::new();
    let spec = vm_instance_spec(vm).unwrap_or_else(|e| {
        failures.push(e);
        &NO_SPEC
    });
    let (ns, name) = (vm.namespace(), vm.name());
    let mut items = revisions::revision_items(vm);
    if vm.bool_at("/status/created") {
        items.push(id(VIRTUAL_MACHINE_INSTANCES, ns, name));
        match launcher::launcher_pod(ctx, ns, name) {
            Ok(pod) => items.extend(pod.map(|p| id(PODS, ns, p.name()))),
            Err(e) => failures.push(e),
        }
    }
    instance_items(
        ctx,
        ns,
        name,
        spec,
        Phase::Backup,
        &mut items,
        &mut failures,
    );
    if ctx.extended() {
        items.extend(followers::vm_followers(vm, spec));
    }
    Graph {
        items: finish(ctx.mode, items),
        failures,
    }
}

/// What a VMI needs at backup: its launcher pod, then what its spec refers to.
pub fn vmi_backup(ctx: &Context, vmi: &Object) -> Result<Vec<ResourceId>, String> {
    vmi_backup_graph(ctx, vmi).complete()
}

/// [`vmi_backup`] without stopping at a failure: a failed pod or backend LIST leaves that item out.
pub fn vmi_backup_graph(ctx: &Context, vmi: &Object) -> Graph {
    let spec = vmi_spec(vmi);
    let (ns, name) = (vmi.namespace(), vmi.name());
    let mut items = Vec::new();
    let mut failures = Vec::new();
    match launcher::launcher_pod(ctx, ns, name) {
        Ok(pod) => items.extend(pod.map(|p| id(PODS, ns, p.name()))),
        Err(e) => failures.push(e),
    }
    instance_items(
        ctx,
        ns,
        name,
        spec,
        Phase::Backup,
        &mut items,
        &mut failures,
    );
    if ctx.extended() {
        items.extend(followers::vmi_followers(vmi, spec));
    }
    Graph {
        items: finish(ctx.mode, items),
        failures,
    }
}

/// What a DataVolume needs at backup: its PVC once the import succeeded (upstream assumes the PVC is
/// named like the DataVolume); extended mode adds what the import reads from.
pub fn datavolume_backup(mode: Mode, dv: &Object) -> Vec<ResourceId> {
    let ns = dv.namespace();
    let mut items = Vec::new();
    if dv.str_at("/status/phase") == Some("Succeeded") {
        items.push(id(
            crate::resources::PERSISTENT_VOLUME_CLAIMS,
            ns,
            dv.name(),
        ));
    }
    if mode.extended() {
        let spec = dv.pointer("/spec").unwrap_or(&Value::Null);
        items.extend(followers::datavolume_source_items(ns, spec));
    }
    finish(mode, items)
}

/// What must be restored before a VM: the backup graph without VMI and pod. Velero removed `status`,
/// so the ControllerRevisions come from the `revisionName`s the backup action wrote.
pub fn vm_restore(ctx: &Context, vm: &Object) -> Result<Vec<ResourceId>, String> {
    let spec = vm_instance_spec(vm)?;
    let mut items = revisions::revision_items(vm);
    let mut errors = Vec::new();
    instance_items(
        ctx,
        vm.namespace(),
        vm.name(),
        spec,
        Phase::Restore,
        &mut items,
        &mut errors,
    );
    if !errors.is_empty() {
        return Err(messages::aggregate(&errors));
    }
    if ctx.extended() {
        items.extend(restorable(
            vm.namespace(),
            followers::vm_followers(vm, spec),
        ));
    }
    Ok(finish(ctx.mode, items))
}

/// What must be restored before a standalone VMI.
pub fn vmi_restore(ctx: &Context, vmi: &Object) -> Result<Vec<ResourceId>, String> {
    let spec = vmi_spec(vmi);
    let mut items = Vec::new();
    let mut errors = Vec::new();
    instance_items(
        ctx,
        vmi.namespace(),
        vmi.name(),
        spec,
        Phase::Restore,
        &mut items,
        &mut errors,
    );
    if !errors.is_empty() {
        return Err(messages::aggregate(&errors));
    }
    if ctx.extended() {
        items.extend(restorable(
            vmi.namespace(),
            followers::vmi_followers(vmi, spec),
        ));
    }
    Ok(finish(ctx.mode, items))
}

/// Steps 4–7 of every graph: each volume's objects, the backend PVC if needed, the credentials, and
/// (upstream mode) the Multus networks' NetworkAttachmentDefinitions. Extended mode followed those
/// before upstream did, among its [`followers`], and keeps them there so that its lists do not change.
fn instance_items(
    ctx: &Context,
    ns: &str,
    name: &str,
    spec: &Value,
    phase: Phase,
    items: &mut Vec<ResourceId>,
    errors: &mut Vec<String>,
) {
    for volume in volumes(spec) {
        items.extend(volumes::volume_items(ns, volume));
    }
    if needs_backend(spec) {
        match backend_items(ctx, ns, name, phase) {
            Ok(backend) => items.extend(backend),
            Err(e) => errors.push(e),
        }
    }
    items.extend(credentials::credential_items(
        ns,
        list(spec, "/accessCredentials"),
    ));
    if !ctx.extended() {
        items.extend(networks::network_items(ns, spec));
    }
}

/// At restore Velero can only restore additional items from the backup, under their original
/// namespace; followers in other namespaces (a shared DataSource, a NetworkAttachmentDefinition of
/// another team) would only produce "unable to restore additional item" warnings, so they are left to
/// Velero's normal pass.
fn restorable(namespace: &str, items: Vec<ResourceId>) -> impl Iterator<Item = ResourceId> + '_ {
    items
        .into_iter()
        .filter(move |i| i.namespace.is_empty() || i.namespace == namespace)
}

/// Upstream returns the list as built. Extended mode drops identifiers without a name and keeps the
/// first of duplicates (docs/kubevirt.md#s8-9).
fn finish(mode: Mode, items: Vec<ResourceId>) -> Vec<ResourceId> {
    if !mode.extended() {
        return items;
    }
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|i| !i.name.is_empty())
        .filter(|i| seen.insert(i.to_string()))
        .collect()
}

#[cfg(test)]
mod tests;
