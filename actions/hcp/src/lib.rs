//! The `hcp` component: openshift/hypershift-oadp-plugin's backup and restore actions for HyperShift
//! hosted control planes, as one wasm component (behaviour: `docs/hcp.md`;
//! what differs from upstream and why: this crate's README).
//!
//! * [`backup`]: the HyperShift gate, HostedControlPlane discovery, the per-kind edits and the etcd
//!   snapshot ([`etcd`]): an `HCPEtcdBackup` whose completion is waited for inside Execute
//!   (`etcd-wait = "blocking"`) or tracked as an asynchronous operation (`"async"`, the default).
//! * [`restore`]: pods and the etcd StatefulSet skipped, the snapshot URL signed (by the `signing`
//!   module, through the `signing` import) and injected into the HostedCluster and HostedControlPlane.
//!
//! [`lib.rs`](self) dispatches; the logic takes a [`Context`] (cluster, environment, clock, signer,
//! settings), so it runs natively in unit tests against fakes.

pub mod backup;
pub mod bsl;
pub mod catalog;
pub mod config;
pub mod context;
pub mod etcd;
pub mod restore;
pub mod settings;
#[cfg(test)]
mod testing;

pub use context::Context;

use velero_wasm_sdk::{BackupResponse, OperationProgress, RestoreResponse};

/// Runs the backup action.
pub fn run_backup(
    ctx: Context,
    action: &str,
    item: &str,
    backup: &str,
) -> Result<BackupResponse, String> {
    if action != catalog::BACKUP {
        return Err(unknown(action));
    }
    Ok(match backup::backup(ctx, item, backup)? {
        backup::Outcome::PassThrough(why) => {
            velero_wasm_sdk::log::debug("unchanged", &[("reason", &why)]);
            BackupResponse::unchanged()
        }
        backup::Outcome::Changed(item) | backup::Outcome::Excluded(item) => {
            BackupResponse::with_item(&item)
        }
        backup::Outcome::Started {
            item,
            operation_id,
            post_operation_items,
        } => BackupResponse {
            item: Some(item.to_json()),
            additional_items: Vec::new(),
            operation_id: Some(operation_id),
            post_operation_items,
        },
    })
}

/// Runs the restore action.
pub fn run_restore(
    ctx: Context,
    action: &str,
    item: &str,
    restore: &str,
) -> Result<RestoreResponse, String> {
    if action != catalog::RESTORE {
        return Err(unknown(action));
    }
    Ok(match restore::restore(ctx, item, restore)? {
        restore::Outcome::PassThrough(why) => {
            velero_wasm_sdk::log::debug("unchanged", &[("reason", &why)]);
            RestoreResponse::unchanged()
        }
        restore::Outcome::Changed(item) => RestoreResponse::with_item(&item),
        restore::Outcome::Skip(why) => {
            velero_wasm_sdk::log::debug("skipped", &[("reason", &why)]);
            RestoreResponse::skip()
        }
    })
}

/// The progress of an etcd snapshot operation.
pub fn run_progress(
    ctx: Context,
    action: &str,
    operation_id: &str,
) -> Result<OperationProgress, String> {
    if action != catalog::BACKUP {
        return Err(format!(
            "operation ID {} is invalid: action {action} starts no operations",
            etcd::operation::shown_id(operation_id)
        ));
    }
    etcd::operation::progress(&ctx, operation_id)
}

/// Cancels an etcd snapshot operation (best effort).
pub fn run_cancel(ctx: Context, action: &str, operation_id: &str) -> Result<(), String> {
    if action != catalog::BACKUP {
        return Ok(());
    }
    etcd::operation::cancel(&ctx, operation_id)
}

fn unknown(action: &str) -> String {
    format!("the hcp component has no action {action}")
}

mod component {
    use velero_wasm_sdk::{
        export_plugin, ActionInfo, BackupRequest, BackupResponse, HostClock, HostCluster,
        HostConfig, HostEnvironment, HostSigner, OperationProgress, Plugin, RestoreRequest,
        RestoreResponse,
    };

    use crate::catalog;
    use crate::context::Context;
    use crate::settings::Settings;

    struct Hcp;

    fn with_context<R>(f: impl FnOnce(Context) -> Result<R, String>) -> Result<R, String> {
        let settings = Settings::read(&HostConfig)?;
        f(Context {
            cluster: &HostCluster,
            env: &HostEnvironment,
            clock: &HostClock,
            signer: &HostSigner,
            settings: &settings,
        })
    }

    impl Plugin for Hcp {
        fn describe() -> Vec<ActionInfo> {
            // A bad setting is reported by every call; until then, describe the default.
            catalog::describe(Settings::read(&HostConfig).unwrap_or_default().etcd_wait)
        }
        fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
            with_context(|ctx| crate::run_backup(ctx, action, &request.item, &request.backup))
        }

        fn restore(action: &str, request: RestoreRequest) -> Result<RestoreResponse, String> {
            with_context(|ctx| crate::run_restore(ctx, action, &request.item, &request.restore))
        }

        fn progress(
            action: &str,
            operation_id: &str,
            _backup: &str,
        ) -> Result<OperationProgress, String> {
            with_context(|ctx| crate::run_progress(ctx, action, operation_id))
        }

        fn cancel(action: &str, operation_id: &str, _backup: &str) -> Result<(), String> {
            with_context(|ctx| crate::run_cancel(ctx, action, operation_id))
        }
    }

    export_plugin!(Hcp);
}
