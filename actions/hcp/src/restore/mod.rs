//! The restore action (docs/hcp.md#s5): the Backup behind the Restore, the HyperShift gate, then a dispatch on
//! the item's kind (docs/hcp.md#s5-2): pods are skipped, so is the etcd StatefulSet under `etcdSnapshot`, and the
//! HostedCluster and HostedControlPlane get the signed snapshot URL their etcd restores from (docs/hcp.md#s5-3).

pub mod azure;
pub mod credentials;
pub mod s3;
pub mod sign;

use hypershift::apis::BACKUPS;
use hypershift::gate::{gate, Gate};
use hypershift::platform;
use serde_json::{json, Value};
use velero_wasm_sdk::{log, Object};

use crate::backup::hosted::{check_shape, RESTORED_FROM_BACKUP, SNAPSHOT_URL};
use crate::config::PluginConfig;
use crate::context::Context;

/// The largest `restoreSnapshotURL` HyperShift's CRD accepts.
pub const MAX_URL: usize = 1024;

/// What the action does with an item.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Restored unchanged (the reason is for the log).
    PassThrough(String),
    /// Restored as changed.
    Changed(Object),
    /// Not restored.
    Skip(String),
}

/// Runs the restore action on `item` (JSON) for `restore` (JSON).
pub fn restore(ctx: Context, item: &str, restore: &str) -> Result<Outcome, String> {
    let mut item = Object::parse(item).map_err(|e| format!("the item is not an object: {e}"))?;
    let restore =
        Object::parse(restore).map_err(|e| format!("the restore is not an object: {e}"))?;
    if !concerns(&item) {
        return Ok(Outcome::PassThrough(format!(
            "nothing to do for {} {}",
            item.kind(),
            item.name()
        )));
    }
    let backup_name = restore.str_at("/spec/backupName").unwrap_or("");
    let backup = ctx
        .cluster
        .get(BACKUPS, restore.namespace(), backup_name)
        .map_err(|e| format!("fail to get backup for restore: {}", e.message()))?;
    if let Gate::PassThrough(why) = gate(ctx.cluster, &backup) {
        return Ok(Outcome::PassThrough(why));
    }
    if backup.pointer("/spec/includedNamespaces").is_none() {
        return Err("included namespaces from backup object is nil".into());
    }
    match item.kind() {
        "HostedControlPlane" => {
            check_shape(&item, "HostedControlPlane")?;
            platform::validate(platform::of(&item))
                .map_err(|e| format!("error checking platform configuration: {e}"))?;
            match inject(&ctx, &backup, &mut item, "HostedControlPlane")? {
                true => Ok(Outcome::Changed(item)),
                false => Ok(Outcome::PassThrough("no snapshot URL to inject".into())),
            }
        }
        "HostedCluster" => {
            check_shape(&item, "HostedCluster")?;
            item.set_annotation(RESTORED_FROM_BACKUP, "");
            inject(&ctx, &backup, &mut item, "HostedCluster")?;
            Ok(Outcome::Changed(item))
        }
        "Pod" => Ok(Outcome::Skip(
            "pods of a hosted control plane are recreated by HyperShift".into(),
        )),
        "StatefulSet" if item.name() == "etcd" => {
            let config = PluginConfig::read(ctx.cluster, &ctx.velero_namespace()?)?;
            if config.restore_uses_etcd_snapshot() {
                Ok(Outcome::Skip(
                    "etcd is restored from the etcd snapshot".into(),
                ))
            } else {
                Ok(Outcome::PassThrough(
                    "etcd is restored from its volumes".into(),
                ))
            }
        }
        other => Ok(Outcome::PassThrough(format!("nothing to do for a {other}"))),
    }
}

/// Whether the action may do anything with `item` (docs/hcp.md#s5-2): HostedControlPlanes, HostedClusters, pods
/// and the `etcd` StatefulSet. Every other resource of the 69 is restored as it is, without reading
/// the Backup (upstream reads it, and the CRD, for each).
pub fn concerns(item: &Object) -> bool {
    match item.kind() {
        "HostedControlPlane" | "HostedCluster" | "Pod" => true,
        "StatefulSet" => item.name() == "etcd",
        _ => false,
    }
}

/// Sets `spec.etcd.managed.storage.restoreSnapshotURL` to the signed snapshot URL, when the item has
/// a snapshot URL and managed etcd. Returns whether it changed the item.
fn inject(ctx: &Context, backup: &Object, item: &mut Object, kind: &str) -> Result<bool, String> {
    let url = item.annotation(SNAPSHOT_URL).unwrap_or("").to_string();
    if url.is_empty() {
        return Ok(false);
    }
    if item
        .pointer("/spec/etcd/managed")
        .is_none_or(Value::is_null)
    {
        // Upstream signs first and may fail an item it would not change; there is nothing to inject.
        log::info(
            "etcd is not managed: the snapshot URL is not injected",
            &[("url", &url)],
        );
        return Ok(false);
    }
    let signed = sign::sign(ctx, backup, item.name(), &url)?;
    item.set(
        "/spec/etcd/managed/storage/restoreSnapshotURL",
        json!([signed]),
    )
    .map_err(|e| format!("error converting item to {kind}: {e}"))?;
    Ok(true)
}

#[cfg(test)]
mod tests;
