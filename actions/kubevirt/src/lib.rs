//! The `kubevirt` component: kubevirt/kubevirt-velero-plugin's backup, restore and item-block actions
//! for KubeVirt virtual machines, as one wasm component (behaviour, and what differs from upstream and
//! why: this crate's README).
//!
//! [`lib.rs`](self) only describes the actions and dispatches calls; the logic takes a [`Context`] (the
//! cluster and the mode), so it runs natively in unit tests against a `FakeCluster`.

pub mod backup;
pub mod catalog;
pub mod context;
pub mod fields;
pub mod filter_names;
pub mod glob;
pub mod go_json;
pub mod go_zero_values;
pub mod graph;
pub mod item_block;
pub mod keys;
pub mod messages;
pub mod mode;
pub mod namespace_filters;
pub mod policy_yaml;
pub mod read_ahead;
pub mod resource_policy;
pub mod resources;
pub mod restore;
pub mod restore_possible;
pub mod scope;
#[cfg(test)]
mod test_objects;
pub mod uid_label;
pub mod workload;

use velero_wasm_sdk::{BackupResponse, ResourceId, RestoreResponse};

pub use context::Context;
pub use mode::Mode;

use backup::volumesnapshot::PvcUids;
use backup::{parse_backup, parse_item};
use restore::parse_restore;

/// Runs the backup action named `action` on `item` (JSON) for `backup` (JSON).
pub fn run_backup(
    ctx: &Context,
    action: &str,
    item: &str,
    backup: &str,
) -> Result<BackupResponse, String> {
    let item = parse_item(item)?;
    match action {
        catalog::BACKUP_PVC => Ok(backup::pvc::backup(&item)),
        catalog::BACKUP_DATAVOLUME => {
            parse_backup(backup)?;
            backup::datavolume::backup(ctx, &item)
        }
        catalog::BACKUP_VOLUMESNAPSHOT => {
            parse_backup(backup)?;
            backup::volumesnapshot::backup(ctx, &mut PvcUids::new(), &item)
        }
        catalog::BACKUP_VIRTUALMACHINE => {
            backup::virtualmachine::backup(ctx, &item, &parse_backup(backup)?)
        }
        catalog::BACKUP_VIRTUALMACHINEINSTANCE => {
            backup::virtualmachineinstance::backup(ctx, &item, &parse_backup(backup)?)
        }
        other => Err(unknown(other, ctx.mode)),
    }
}

/// [`run_backup`] as the component runs it on the host: the VM backup action first sends the reads it
/// will make as one batch ([`read_ahead`], docs/read-views.md#s2), then runs against their answers.
/// The logic and its answers are the same; a VM that a check refuses after its VMI was read may have
/// had its other objects read in vain (reads only), which is why the native tests, which assert
/// upstream's exact calls, run [`run_backup`].
pub fn run_backup_reading_ahead(
    cluster: &dyn velero_wasm_sdk::Cluster,
    mode: Mode,
    action: &str,
    item: &str,
    backup: &str,
) -> Result<BackupResponse, String> {
    let reads = match (action, parse_item(item), parse_backup(backup)) {
        (catalog::BACKUP_VIRTUALMACHINE, Ok(vm), Ok(backup)) => {
            read_ahead::vm_backup_reads(mode, &vm, &backup)
        }
        _ => Vec::new(),
    };
    let ahead = read_ahead::ReadAhead::new(cluster, reads);
    run_backup(&Context::new(&ahead, mode), action, item, backup)
}

/// A backup action's answer as extended mode gives it to Velero: without the additional items that
/// an item-block action of this module named before in the same backup as related items, for
/// another item (`named`: the host's `named-items`). Velero has those already: it put them in an
/// item block or left them out by the backup's filters, and would only read each again from the API
/// server to find that. Upstream mode names everything, as upstream does.
pub fn without_named_before(
    mode: Mode,
    mut response: BackupResponse,
    named: impl FnOnce(&[ResourceId]) -> Vec<bool>,
) -> BackupResponse {
    if mode.extended() {
        response.additional_items =
            velero_wasm_sdk::named_items::leave_out(response.additional_items, named);
    }
    response
}

/// Runs the restore action named `action` on `item` (JSON, as Velero hands it over) for `restore` (JSON).
pub fn run_restore(
    ctx: &Context,
    action: &str,
    item: &str,
    restore: &str,
) -> Result<RestoreResponse, String> {
    let item = parse_item(item)?;
    let restore = parse_restore(restore)?;
    match action {
        catalog::RESTORE_VM => restore::virtualmachine::restore(ctx, &item, &restore),
        catalog::RESTORE_VMI => restore::virtualmachineinstance::restore(ctx, &item, &restore),
        catalog::RESTORE_POD => Ok(restore::pod::restore()),
        catalog::RESTORE_PVC => Ok(restore::pvc::restore(ctx.mode, &item)),
        catalog::RESTORE_VOLUMESNAPSHOT => Ok(restore::volumesnapshot::restore(ctx.mode, &item)),
        catalog::RESTORE_NAD => {
            restore::network_attachment_definition::restore(ctx.mode, &item, &restore)
        }
        catalog::RESTORE_OPERATION if ctx.extended() => Ok(restore::operations::restore(&item)),
        other => Err(unknown(other, ctx.mode)),
    }
}

/// Runs the item-block action named `action` on `item` (JSON) for `backup` (JSON, read only for its
/// label selectors): the objects Velero backs up in the item's block. Only an item that is not a Kubernetes object fails (see [`item_block`]).
pub fn run_related_items(
    ctx: &Context,
    action: &str,
    item: &str,
    backup: &str,
) -> Result<Vec<ResourceId>, String> {
    let item = parse_item(item)?;
    let owners = || item_block::Owners::of(backup);
    match action {
        catalog::BLOCK_VM => Ok(item_block::vm_related(ctx, &item)),
        catalog::BLOCK_VMI if ctx.extended() => Ok(item_block::vmi_related(ctx, &item, owners())),
        catalog::BLOCK_LAUNCHER_POD if ctx.extended() => {
            Ok(item_block::pod_related(&item, owners()))
        }
        other => Err(unknown(other, ctx.mode)),
    }
}

fn unknown(action: &str, mode: Mode) -> String {
    format!("the kubevirt component has no action {action} in mode {mode:?}")
}

mod component {
    use velero_wasm_sdk::{
        config, export_plugin, ActionInfo, BackupRequest, HostCluster, Plugin, RestoreRequest,
    };
    use velero_wasm_sdk::{BackupResponse, ResourceId, RestoreResponse};

    use velero_wasm_sdk::named_items::named_before;

    use crate::{
        catalog, run_backup_reading_ahead, run_related_items, run_restore, without_named_before,
        Context, Mode,
    };

    struct KubeVirt;

    fn mode() -> Result<Mode, String> {
        Mode::parse(config::get("mode").as_deref())
    }

    impl Plugin for KubeVirt {
        fn describe() -> Vec<ActionInfo> {
            // A bad setting is reported by every call; until then, describe what extended mode offers.
            catalog::describe(mode().unwrap_or_default())
        }

        fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
            let mode = mode()?;
            let response = run_backup_reading_ahead(
                &HostCluster,
                mode,
                action,
                &request.item,
                &request.backup,
            )?;
            Ok(without_named_before(mode, response, named_before))
        }

        fn restore(action: &str, request: RestoreRequest) -> Result<RestoreResponse, String> {
            run_restore(
                &Context::new(&HostCluster, mode()?),
                action,
                &request.item,
                &request.restore,
            )
        }

        fn related_items(
            action: &str,
            item: &str,
            backup: &str,
        ) -> Result<Vec<ResourceId>, String> {
            run_related_items(&Context::new(&HostCluster, mode()?), action, item, backup)
        }
    }

    export_plugin!(KubeVirt);
}

#[cfg(test)]
mod named_before_tests {
    use super::*;

    #[test]
    fn extended_mode_leaves_out_what_was_named_before_and_upstream_mode_does_not() {
        let shared = ResourceId::new(
            "instancetype.kubevirt.io",
            "virtualmachineclusterinstancetypes",
            "",
            "u1.medium",
        );
        let own = ResourceId::new("kubevirt.io", "virtualmachineinstances", "ns", "vm2");
        let response = BackupResponse::unchanged().additional(vec![own.clone(), shared.clone()]);
        let named = |items: &[ResourceId]| -> Vec<bool> {
            items.iter().map(|i| i.name == "u1.medium").collect()
        };
        let extended = without_named_before(Mode::Extended, response.clone(), named);
        assert_eq!(extended.additional_items, std::slice::from_ref(&own));
        let upstream = without_named_before(Mode::Upstream, response.clone(), named);
        assert_eq!(upstream.additional_items, [own, shared]);
    }
}
