//! `kubevirt-velero-plugin/backup-virtualmachine-action` (docs/kubevirt.md#s5-4): refuses backups that would catch
//! a running VM's disks unfrozen or could not restore it, names everything the VM needs, and pins its
//! instancetype and preference revisions into the spec for the restore.

use serde_json::Value;
use velero_wasm_sdk::{BackupResponse, Object};

use crate::context::Context;
use crate::fields::text;
use crate::go_zero_values::{self, GoType};
use crate::graph::{self, revisions};
use crate::messages::{self, UnsafeVm};
use crate::resources::VIRTUAL_MACHINE_INSTANCES;
use crate::restore_possible::restore_blocker;
use crate::scope::{self, excluded_by_label, Scope};
use crate::workload::{vm_instance_spec, vm_running, volumes};

/// Runs the action on a VirtualMachine.
pub fn backup(ctx: &Context, vm: &Object, backup: &Object) -> Result<BackupResponse, String> {
    let scope = Scope::read(ctx, backup)?;
    let spec = vm_instance_spec(vm)?;
    if vm_running(vm, ctx.extended()) {
        if let Some(why) = unsafe_to_back_up(ctx, &scope, vm)? {
            return Err(messages::unsafe_vm(ctx.mode, vm, why));
        }
    }
    if !scope.metadata_backup() {
        let templates: Vec<&str> = vm
            .array_at("/spec/dataVolumeTemplates")
            .iter()
            .map(|t| text(t, "/metadata/name"))
            .collect();
        let from_template = |volume: &Value| templates.contains(&text(volume, "/dataVolume/name"));
        if let Some(blocker) =
            restore_blocker(ctx, &scope, vm.namespace(), volumes(spec), &from_template)?
        {
            return Err(messages::vm_not_restorable(ctx.mode, vm, &blocker));
        }
    }
    let additional = graph::vm_backup(ctx, vm)?;
    let mut out = vm.clone();
    revisions::copy_revision_names(&mut out)?;
    if !ctx.extended() {
        go_zero_values::write(&mut out, GoType::VirtualMachine);
    }
    Ok(BackupResponse::with_item(&out).additional(additional))
}

/// The safety check for a running VM, in upstream's order: VMIs in scope, the VMI (read) not
/// excluded by label, and pods in scope whenever PVCs are. Extended mode also asks, before the read,
/// whether the resource policy's name globs drop the VMI (docs/kubevirt.md#s4-1).
fn unsafe_to_back_up(
    ctx: &Context,
    scope: &Scope,
    vm: &Object,
) -> Result<Option<UnsafeVm>, String> {
    if !scope.in_backup(&scope::VIRTUAL_MACHINE_INSTANCES) {
        return Ok(Some(UnsafeVm::VmisNotInBackup));
    }
    let (ns, name) = (vm.namespace(), vm.name());
    if scope.drops_name(&scope::VIRTUAL_MACHINE_INSTANCES, ns, name) {
        return Ok(Some(UnsafeVm::VmiLeftOutByPolicy(
            scope.policy().to_string(),
        )));
    }
    let vmi = ctx.cluster.get(VIRTUAL_MACHINE_INSTANCES, ns, name).map_err(|e| {
        messages::kube_error(ctx.mode, &e, || {
            format!(
                "VirtualMachine {ns}/{name} reports that it is running but its VirtualMachineInstance cannot be \
                 read; run the backup again once the VM has settled"
            )
        })
    })?;
    if excluded_by_label(&vmi) {
        return Ok(Some(UnsafeVm::VmiExcludedByLabel));
    }
    if !scope.in_backup(&scope::PODS) && scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
        return Ok(Some(UnsafeVm::PodsNotInBackup));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
