//! The actions, under upstream's names (docs/hcp.md#s1-1), and what they apply to (#s1-2).

use velero_wasm_sdk::{ActionInfo, Kind, Selector, Verb};

use crate::settings::EtcdWait;

/// The backup action: every item of every backup (the HyperShift gate makes the rest pass through).
pub const BACKUP: &str = "hypershift-oadp-plugin/backup-item-action";
/// The restore action.
pub const RESTORE: &str = "hypershift-oadp-plugin/restore-item-action";

/// The restore action's included resources: upstream's 69 strings, in its order (singular and plural
/// forms both; Velero resolves each through discovery and keeps unresolvable ones as they are).
pub const RESTORE_RESOURCES: [&str; 69] = [
    // Common (40).
    "hostedclusters",
    "hostedcluster",
    "hostedcontrolplanes",
    "hostedcontrolplane",
    "nodepools",
    "nodepool",
    "hcpetcdbackups",
    "hcpetcdbackup",
    "secrets",
    "secret",
    "configmaps",
    "configmap",
    "persistentvolumes",
    "persistentvolume",
    "persistentvolumeclaims",
    "persistentvolumeclaim",
    "pods",
    "pod",
    "statefulsets",
    "statefulset",
    "deployments",
    "deployment",
    "clusters",
    "cluster",
    "machines",
    "machine",
    "machinedeployments",
    "machinedeployment",
    "machinesets",
    "machineset",
    "serviceaccounts",
    "serviceaccount",
    "roles",
    "role",
    "rolebindings",
    "rolebinding",
    "priorityclasses",
    "priorityclass",
    "poddisruptionbudgets",
    "poddisruptionbudget",
    // AWS (5).
    "awsmachinepools",
    "awsmachines",
    "awsmachinetemplates",
    "awsmanagedmachinepools",
    "awsmanagedmachinepooltemplates",
    // Azure (4).
    "azuremachines",
    "azuremachinetemplates",
    "azuremanagedmachinepools",
    "azuremanagedmachinepooltemplates",
    // IBM PowerVS (4).
    "ibmpowervsmachines",
    "ibmpowervsmachinetemplates",
    "ibmpowervsclusters",
    "ibmpowervsclustertemplates",
    // OpenStack (4).
    "openstackmachines",
    "openstackmachinetemplates",
    "openstackclusters",
    "openstackclustertemplates",
    // KubeVirt (3).
    "kubevirtcluster",
    "kubevirtmachinetemplate",
    "datavolume",
    // Agent (9).
    "agents",
    "agentmachines",
    "agentmachinetemplates",
    "agentmachinepools",
    "agentclusters",
    "nmstateconfigs",
    "nmstateconfig",
    "infraenvs",
    "infraenv",
];

/// Both actions. The backup action is a BackupItemAction v2 when the etcd snapshot is waited for
/// asynchronously, v1 when it is waited for inside Execute.
pub fn describe(wait: EtcdWait) -> Vec<ActionInfo> {
    let backup_kind = match wait {
        EtcdWait::Async => Kind::BackupV2,
        EtcdWait::Blocking => Kind::Backup,
    };
    let backup = ActionInfo::new(BACKUP, backup_kind)
        .description(
            "HyperShift hosted control planes: marks HostedClusters restored-from-backup, takes the etcd snapshot \
             (HCPEtcdBackup) and records its URL, labels or excludes etcd pods and volumes",
        )
        .needs_kube("customresourcedefinitions.apiextensions.k8s.io", &[Verb::Get])
        .needs_kube("configmaps", &[Verb::Get])
        .needs_kube("hostedcontrolplanes.hypershift.openshift.io", &[Verb::List])
        .needs_kube("hostedclusters.hypershift.openshift.io", &[Verb::List])
        .needs_kube("hcpetcdbackups.hypershift.openshift.io", &[Verb::Get, Verb::Create])
        .needs_kube("backupstoragelocations.velero.io", &[Verb::Get])
        .needs_kube("secrets", &[Verb::Get, Verb::Create, Verb::Delete]);
    let restore = ActionInfo::new(RESTORE, Kind::Restore)
        .applies_to(Selector::resources(&RESTORE_RESOURCES))
        .description(
            "HyperShift hosted control planes: skips pods (and the etcd StatefulSet under etcdSnapshot), injects a \
             signed restoreSnapshotURL into HostedClusters and HostedControlPlanes",
        )
        .needs_kube("backups.velero.io", &[Verb::Get])
        .needs_kube("customresourcedefinitions.apiextensions.k8s.io", &[Verb::Get])
        .needs_kube("configmaps", &[Verb::Get])
        .needs_kube("backupstoragelocations.velero.io", &[Verb::Get])
        .needs_kube("secrets", &[Verb::Get]);
    vec![backup, restore]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restore_list_has_upstream_s_groups_and_no_duplicates() {
        let mut sorted = RESTORE_RESOURCES.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 69);
        assert!(!RESTORE_RESOURCES.contains(&"clusterdeployments"));
        assert_eq!(RESTORE_RESOURCES[39], "poddisruptionbudget");
        assert_eq!(RESTORE_RESOURCES[68], "infraenv");
    }

    #[test]
    fn the_backup_kind_follows_the_wait_setting() {
        assert!(matches!(describe(EtcdWait::Async)[0].kind, Kind::BackupV2));
        assert!(matches!(describe(EtcdWait::Blocking)[0].kind, Kind::Backup));
        let backup = &describe(EtcdWait::Async)[0];
        assert!(backup.applies_to.included_resources.is_empty());
        assert!(backup.applies_to.included_namespaces.is_empty());
        assert!(backup.applies_to.label_selector.is_empty());
    }
}
