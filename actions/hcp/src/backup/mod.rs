//! The backup action (docs/hcp.md#s4): after the HyperShift gate, the plugin's configuration and the
//! backup's HostedControlPlane, a dispatch on the item's kind (docs/hcp.md#s4-2). The API group is not checked,
//! as upstream does not.

pub mod hosted;
pub mod workloads;

use hypershift::discovery;
use hypershift::gate::{gate, Gate};
use velero_wasm_sdk::{log, Object, ResourceId};

use crate::config::{Method, PluginConfig};
use crate::context::Context;

/// What the action does with an item.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Stored unchanged (the reason is for the log).
    PassThrough(String),
    /// Stored as changed.
    Changed(Object),
    /// Left out of the backup: the item carries `velero.io/skip-from-backup`, which Velero honours
    /// from 1.18.1 (earlier versions store it unchanged but for that annotation).
    Excluded(Object),
    /// An asynchronous operation started (BackupItemAction v2): the item as changed, the id, and the
    /// items Velero backs up again once the operation has ended.
    Started {
        /// The item to store now.
        item: Object,
        /// The operation id.
        operation_id: String,
        /// The HostedCluster and HostedControlPlane.
        post_operation_items: Vec<ResourceId>,
    },
}

/// What every kind's handling may need.
pub struct Scope<'a> {
    /// What the call can reach.
    pub ctx: Context<'a>,
    /// The Backup.
    pub backup: &'a Object,
    /// Its HostedControlPlane.
    pub hcp: &'a Object,
    /// Velero's namespace.
    pub velero_namespace: &'a str,
    /// The plugin's configuration.
    pub config: &'a PluginConfig,
    /// The etcd backup method.
    pub method: Method,
}

/// Runs the backup action on `item` (JSON) for `backup` (JSON).
pub fn backup(ctx: Context, item: &str, backup: &str) -> Result<Outcome, String> {
    let item = Object::parse(item).map_err(|e| format!("the item is not an object: {e}"))?;
    let backup = Object::parse(backup).map_err(|e| format!("the backup is not an object: {e}"))?;
    if !concerns(&item) {
        return Ok(Outcome::PassThrough(format!(
            "nothing to do for {} {}",
            item.kind(),
            item.name()
        )));
    }
    if let Gate::PassThrough(why) = gate(ctx.cluster, &backup) {
        return Ok(Outcome::PassThrough(why));
    }
    let velero_namespace = ctx.velero_namespace()?;
    let config = PluginConfig::read(ctx.cluster, &velero_namespace)?;
    let method = config.backup_method()?;
    let hcp = discovery::hosted_control_plane(ctx.cluster, &backup)
        .map_err(|e| format!("error getting HCP namespace: {e}"))?;
    let Some(hcp) = hcp else {
        log::debug(
            "no HostedControlPlane in the backup's included namespaces: the item passes through",
            &[],
        );
        return Ok(Outcome::PassThrough(
            "no HostedControlPlane in the backup's included namespaces".into(),
        ));
    };
    let scope = Scope {
        ctx,
        backup: &backup,
        hcp: &hcp,
        velero_namespace: &velero_namespace,
        config: &config,
        method,
    };
    match item.kind() {
        "HostedControlPlane" => hosted::control_plane(&scope, item),
        "HostedCluster" => hosted::cluster(&scope, item),
        "Pod" => Ok(workloads::pod(method, &backup, item)),
        "DataVolume" | "PersistentVolumeClaim" => Ok(workloads::volume(method, item)),
        other => Ok(Outcome::PassThrough(format!("nothing to do for a {other}"))),
    }
}

/// Whether the action may do anything with `item`, whatever the backup and cluster: the kinds of
/// the dispatch table (docs/hcp.md#s4-2) with the names and labels it acts on. Every other item is stored as it
/// is without a single API call (upstream reads the HostedControlPlane CRD for each of them).
pub fn concerns(item: &Object) -> bool {
    match item.kind() {
        "HostedControlPlane" | "HostedCluster" => true,
        "Pod" => item.name().contains("etcd-"),
        "DataVolume" => item.has_label(workloads::RHCOS_LABEL),
        "PersistentVolumeClaim" => {
            item.has_label(workloads::RHCOS_LABEL) || item.name().starts_with("data-etcd-")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
