//! `kubevirt-velero-plugin/backup-virtualmachineinstance-action` (docs/kubevirt.md#s5-5): marks VMIs that their
//! owner recreates so the restore skips them, refuses backups that would catch a running guest's disks
//! unfrozen or could not restore a standalone VMI, and names everything the VMI needs.

use velero_wasm_sdk::{BackupResponse, Object};

use crate::context::Context;
use crate::fields::text;
use crate::graph::{self, launcher};
use crate::keys;
use crate::messages::{self, LauncherOutside};
use crate::resources::VIRTUAL_MACHINES;
use crate::restore_possible::restore_blocker;
use crate::scope::{self, excluded_by_label, Scope};
use crate::workload::{
    has_claim_volumes, owner_of_kind, owners, vmi_paused, vmi_phase_without_guest, vmi_spec,
    volumes,
};

/// Who recreates a VMI after a restore.
enum Ownership {
    /// Nobody: the VMI itself must be restored.
    Standalone,
    /// A VirtualMachine (`name`).
    VirtualMachine(String),
    /// Another controller (a VirtualMachineInstanceReplicaSet, …).
    Controller,
}

/// Upstream: any owner reference means "owned by the VM of the same name" (docs/kubevirt.md#s8-8). Extended:
/// only a `VirtualMachine` owner is looked up (by its own name); other owners are controllers that
/// recreate the VMI from their template.
fn ownership(ctx: &Context, vmi: &Object) -> Ownership {
    if owners(vmi).is_empty() {
        return Ownership::Standalone;
    }
    if !ctx.extended() {
        return Ownership::VirtualMachine(vmi.name().to_string());
    }
    match owner_of_kind(vmi, "VirtualMachine") {
        Some(owner) => Ownership::VirtualMachine(text(owner, "/name").to_string()),
        None => Ownership::Controller,
    }
}

/// Runs the action on a VirtualMachineInstance.
pub fn backup(ctx: &Context, vmi: &Object, backup: &Object) -> Result<BackupResponse, String> {
    let scope = Scope::read(ctx, backup)?;
    let ownership = ownership(ctx, vmi);
    if let Ownership::VirtualMachine(vm_name) = &ownership {
        if !scope.in_backup(&scope::VIRTUAL_MACHINES)
            || vm_left_out_by_policy(&scope, vmi.namespace(), vm_name)
            || vm_excluded(ctx, vmi, vm_name)?
        {
            return Ok(left_to_its_vm(ctx, vmi));
        }
    }
    if must_check_launcher(ctx, vmi) {
        check_launcher(ctx, &scope, vmi)?;
    }
    let mut out = vmi.clone();
    match ownership {
        Ownership::VirtualMachine(_) | Ownership::Controller => {
            out.set_annotation(keys::IS_OWNED, "true")
        }
        Ownership::Standalone if !scope.metadata_backup() => {
            let never = |_: &serde_json::Value| false;
            if let Some(blocker) =
                restore_blocker(ctx, &scope, vmi.namespace(), volumes(vmi_spec(vmi)), &never)?
            {
                return Err(messages::vmi_not_restorable(ctx.mode, vmi, &blocker));
            }
        }
        Ownership::Standalone => {}
    }
    let additional = graph::vmi_backup(ctx, vmi)?;
    Ok(BackupResponse::with_item(&out).additional(additional))
}

/// The resource policy (extended mode, Velero 1.18.3+) keeps the VM out: its name globs drop it, or
/// the namespace's filters have no entry for VMs, so Velero never collects it (nothing returns a VM as
/// an additional item of its VMI). Label selectors are not predicted (docs/kubevirt.md#s4-1).
fn vm_left_out_by_policy(scope: &Scope, namespace: &str, vm_name: &str) -> bool {
    scope.never_collects(&scope::VIRTUAL_MACHINES, namespace)
        || scope.drops_name(&scope::VIRTUAL_MACHINES, namespace, vm_name)
}

fn vm_excluded(ctx: &Context, vmi: &Object, vm_name: &str) -> Result<bool, String> {
    let ns = vmi.namespace();
    let vm = ctx.cluster.get(VIRTUAL_MACHINES, ns, vm_name).map_err(|e| {
        messages::kube_error(ctx.mode, &e, || {
            format!("VirtualMachineInstance {ns}/{} is owned by VirtualMachine {ns}/{vm_name}, which cannot be read", vmi.name())
        })
    })?;
    Ok(excluded_by_label(&vm))
}

/// The VMI's VM is out of the backup. Upstream stores the VMI unchanged (docs/kubevirt.md#s8-1), so a restore
/// creates it standalone or collides with the one the restored VM starts. Extended marks it owned,
/// so the restore skips it, and asks Velero versions that can to leave it out of the backup.
fn left_to_its_vm(ctx: &Context, vmi: &Object) -> BackupResponse {
    if !ctx.extended() {
        return BackupResponse::unchanged();
    }
    let mut out = vmi.clone();
    out.set_annotation(keys::IS_OWNED, "true");
    out.set_annotation(keys::SKIP_FROM_BACKUP, "true");
    BackupResponse::with_item(&out)
}

/// Upstream checks the launcher pod of every VMI that is not paused (docs/kubevirt.md#s5-5 step 3). Extended
/// skips VMIs whose phase has no guest (Pending, Succeeded, Failed; docs/kubevirt.md#s8-7) and VMIs without
/// DataVolume or PVC volumes, whose backup has no disk to freeze.
fn must_check_launcher(ctx: &Context, vmi: &Object) -> bool {
    if vmi_paused(vmi) {
        return false;
    }
    !ctx.extended() || (!vmi_phase_without_guest(vmi) && has_claim_volumes(vmi_spec(vmi)))
}

fn check_launcher(ctx: &Context, scope: &Scope, vmi: &Object) -> Result<(), String> {
    if !scope.in_backup(&scope::PODS) && scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
        return Err(messages::launcher_not_in_backup(
            ctx.mode,
            vmi,
            &LauncherOutside::PodsNotInBackup,
        ));
    }
    match launcher::launcher_pod(ctx, vmi.namespace(), vmi.name())? {
        None => Err(messages::launcher_not_found(ctx.mode, vmi)),
        Some(pod) if excluded_by_label(&pod) => Err(messages::launcher_not_in_backup(
            ctx.mode,
            vmi,
            &LauncherOutside::PodExcludedByLabel(pod.name().to_string()),
        )),
        Some(pod) if scope.drops_name(&scope::PODS, vmi.namespace(), pod.name()) => {
            Err(messages::launcher_not_in_backup(
                ctx.mode,
                vmi,
                &LauncherOutside::PodLeftOutByPolicy {
                    pod: pod.name().to_string(),
                    policy: scope.policy().to_string(),
                },
            ))
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests;
