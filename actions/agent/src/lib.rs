//! The `agent` component: the Agent-platform task of openshift/hypershift-oadp-plugin (behaviour:
//! docs/hcp.md#s4-5; what differs and why: this crate's README).
//!
//! One backup action on ClusterDeployments (`hive.openshift.io`). When the backup is a HyperShift
//! backup (the gate, docs/hcp.md#s3-1) whose first HostedControlPlane (#s3-2) runs on the `Agent` platform, it
//! updates the live ClusterDeployment with `spec.preserveOnDelete` false (the key removed) and stores
//! the item unchanged. Upstream does this inside its one backup action; here it is a module of its
//! own, so that the write grant on ClusterDeployments lives only in this module's manifest.

use hypershift::apis::CLUSTER_DEPLOYMENTS;
use hypershift::discovery;
use hypershift::gate::{gate, Gate};
use velero_wasm_sdk::{log, Cluster, Object};

/// The action's name.
pub const BACKUP: &str = "hypershift-oadp-plugin/agent-backup-item-action";

/// What the action did to the live ClusterDeployment (the item itself is always stored unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing: not a HyperShift backup, no HostedControlPlane, or not the Agent platform.
    PassThrough(String),
    /// `spec.preserveOnDelete` was set to false on the live object.
    Updated,
}

fn task_error(e: String) -> String {
    format!("error performing migration tasks for agent platform: {e}")
}

/// Runs the action on `item` (a ClusterDeployment, JSON) for `backup` (JSON).
pub fn backup(cluster: &dyn Cluster, item: &str, backup: &str) -> Result<Outcome, String> {
    let item = Object::parse(item).map_err(|e| format!("the item is not an object: {e}"))?;
    let backup = Object::parse(backup).map_err(|e| format!("the backup is not an object: {e}"))?;
    if item.kind() != "ClusterDeployment" {
        return Ok(Outcome::PassThrough(format!("a {}", item.kind())));
    }
    if let Gate::PassThrough(why) = gate(cluster, &backup) {
        return Ok(Outcome::PassThrough(why));
    }
    let hcp = discovery::hosted_control_plane(cluster, &backup)
        .map_err(|e| format!("error getting HCP namespace: {e}"))?;
    let Some(hcp) = hcp else {
        return Ok(Outcome::PassThrough(
            "no HostedControlPlane in the backup's namespaces".into(),
        ));
    };
    let platform = hypershift::platform::of(&hcp);
    if platform != "Agent" {
        return Ok(Outcome::PassThrough(format!("platform {platform:?}")));
    }
    let mut live = item;
    match live.pointer("/spec") {
        None | Some(serde_json::Value::Object(_)) => {}
        Some(_) => {
            return Err(task_error(
                "error converting item to ClusterDeployment: spec is not an object".into(),
            ))
        }
    }
    // `false` is Hive's default, and its JSON omits it: the key goes.
    live.remove("/spec/preserveOnDelete");
    log::info(
        "setting preserveOnDelete to false on the live ClusterDeployment (Agent platform)",
        &[("clusterDeployment", live.name())],
    );
    let namespace = live.namespace().to_string();
    cluster
        .update(CLUSTER_DEPLOYMENTS, &namespace, &live)
        .map_err(|e| {
            task_error(format!(
                "error updating ClusterDeployment resource with PreserveOnDelete option: {}",
                e.message()
            ))
        })?;
    Ok(Outcome::Updated)
}

mod component {
    use velero_wasm_sdk::{
        export_plugin, ActionInfo, BackupRequest, BackupResponse, HostCluster, Kind, Plugin,
        Selector, Verb,
    };

    use crate::{backup, Outcome, BACKUP};

    struct Agent;

    impl Plugin for Agent {
        fn describe() -> Vec<ActionInfo> {
            vec![ActionInfo::new(BACKUP, Kind::Backup)
                .applies_to(Selector::resources(&["clusterdeployments.hive.openshift.io"]))
                .description(
                    "Agent platform: sets preserveOnDelete false on the live ClusterDeployment of a HyperShift backup",
                )
                .needs_kube("customresourcedefinitions.apiextensions.k8s.io", &[Verb::Get])
                .needs_kube("hostedcontrolplanes.hypershift.openshift.io", &[Verb::List])
                .needs_kube("clusterdeployments.hive.openshift.io", &[Verb::Update])]
        }

        fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
            if action != BACKUP {
                return Err(format!("the agent component has no action {action}"));
            }
            match backup(&HostCluster, &request.item, &request.backup)? {
                Outcome::PassThrough(why) => {
                    velero_wasm_sdk::log::debug("nothing to do", &[("reason", &why)])
                }
                Outcome::Updated => {}
            }
            Ok(BackupResponse::unchanged())
        }
    }

    export_plugin!(Agent);
}

#[cfg(test)]
mod tests;
