//! Which HostedControlPlane a backup is about (docs/hcp.md#s3-2), and its HostedCluster (#s3-3).
//!
//! Upstream caches the HostedControlPlane for the plugin's lifetime. A component keeps nothing between
//! calls, so each call lists again: one LIST per included namespace up to the first that has one.

use velero_wasm_sdk::{Cluster, KubeError, Object};

use crate::apis::{HOSTED_CLUSTERS, HOSTED_CONTROL_PLANES};
use crate::namespaces::{included, Included};

/// Lists `api` objects that `entry` covers: in its namespace, or (a pattern) across namespaces.
fn list_covered(
    cluster: &dyn Cluster,
    api: velero_wasm_sdk::Api,
    entry: &Included,
) -> Result<Vec<Object>, KubeError> {
    match entry {
        Included::Name(namespace) => cluster.list(api, namespace, ""),
        Included::Pattern(_) => Ok(cluster
            .list(api, "", "")?
            .into_iter()
            .filter(|o| entry.covers(o.namespace()))
            .collect()),
    }
}

/// The first HostedControlPlane (list order) of the first included namespace that has one; `None`
/// when none has. A LIST error is `error getting HostedControlPlane: <err>`.
pub fn hosted_control_plane(
    cluster: &dyn Cluster,
    backup: &Object,
) -> Result<Option<Object>, String> {
    for entry in included(backup) {
        let found = list_covered(cluster, HOSTED_CONTROL_PLANES, &entry)
            .map_err(|e| format!("error getting HostedControlPlane: {}", e.message()))?;
        if let Some(first) = found.into_iter().next() {
            return Ok(Some(first));
        }
    }
    Ok(None)
}

/// The HostedCluster whose `<namespace>-<name>` is `hcp_namespace`, searched in the included namespaces
/// other than `hcp_namespace`, in order. LIST errors do not stop the search; they are returned beside
/// the answer (the caller only logs them).
pub fn hosted_cluster(
    cluster: &dyn Cluster,
    backup: &Object,
    hcp_namespace: &str,
) -> (Option<Object>, Vec<String>) {
    let mut errors = Vec::new();
    for entry in included(backup) {
        if entry == Included::Name(hcp_namespace.to_string()) {
            continue;
        }
        match list_covered(cluster, HOSTED_CLUSTERS, &entry) {
            Ok(found) => {
                let hit = found.into_iter().find(|hc| {
                    hc.namespace() != hcp_namespace
                        && format!("{}-{}", hc.namespace(), hc.name()) == hcp_namespace
                });
                if hit.is_some() {
                    return (hit, errors);
                }
            }
            Err(e) => errors.push(format!("listing HostedClusters: {}", e.message())),
        }
    }
    (None, errors)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use velero_wasm_sdk::FakeCluster;

    use super::*;

    fn object(kind: &str, namespace: &str, name: &str) -> Object {
        Object::from_value(
            json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace}}),
        )
        .unwrap()
    }

    fn backup(namespaces: &[&str]) -> Object {
        Object::from_value(
            json!({"metadata": {"name": "b"}, "spec": {"includedNamespaces": namespaces}}),
        )
        .unwrap()
    }

    #[test]
    fn the_first_namespace_with_a_control_plane_gives_its_first() {
        let c = FakeCluster::new()
            .with(
                HOSTED_CONTROL_PLANES,
                object("HostedControlPlane", "clusters-b", "b"),
            )
            .with(
                HOSTED_CONTROL_PLANES,
                object("HostedControlPlane", "clusters-a", "a2"),
            )
            .with(
                HOSTED_CONTROL_PLANES,
                object("HostedControlPlane", "clusters-a", "a1"),
            );
        let found = hosted_control_plane(&c, &backup(&["clusters", "clusters-a", "clusters-b"]))
            .unwrap()
            .unwrap();
        assert_eq!((found.namespace(), found.name()), ("clusters-a", "a2"));
        let listed: Vec<_> = c.calls().iter().map(|c| c.namespace.clone()).collect();
        assert_eq!(listed, ["clusters", "clusters-a"], "stops at the first hit");
        assert!(hosted_control_plane(&c, &backup(&["apps"]))
            .unwrap()
            .is_none());
    }

    #[test]
    fn patterns_list_across_namespaces() {
        let c = FakeCluster::new()
            .with(
                HOSTED_CONTROL_PLANES,
                object("HostedControlPlane", "other", "x"),
            )
            .with(
                HOSTED_CONTROL_PLANES,
                object("HostedControlPlane", "clusters-a", "a"),
            );
        let found = hosted_control_plane(&c, &backup(&["clusters-*"]))
            .unwrap()
            .unwrap();
        assert_eq!(found.name(), "a");
        assert_eq!(c.calls()[0].namespace, "");
    }

    #[test]
    fn list_errors_are_reported() {
        let c = FakeCluster::new().failing_list(HOSTED_CONTROL_PLANES);
        let e = hosted_control_plane(&c, &backup(&["clusters"])).unwrap_err();
        assert!(e.starts_with("error getting HostedControlPlane: "), "{e}");
    }

    #[test]
    fn the_hosted_cluster_is_found_by_its_control_plane_namespace() {
        let c = FakeCluster::new()
            .with(
                HOSTED_CLUSTERS,
                object("HostedCluster", "clusters", "other"),
            )
            .with(
                HOSTED_CLUSTERS,
                object("HostedCluster", "clusters", "my-cluster"),
            );
        let (hc, errors) = hosted_cluster(
            &c,
            &backup(&["clusters-my-cluster", "clusters"]),
            "clusters-my-cluster",
        );
        assert_eq!(hc.unwrap().name(), "my-cluster");
        assert!(errors.is_empty());
        let listed: Vec<_> = c.calls().iter().map(|c| c.namespace.clone()).collect();
        assert_eq!(listed, ["clusters"], "the HCP namespace itself is skipped");
        let failing = FakeCluster::new().failing_list(HOSTED_CLUSTERS);
        let (hc, errors) = hosted_cluster(&failing, &backup(&["a", "b"]), "clusters-x");
        assert!(hc.is_none());
        assert_eq!(errors.len(), 2);
    }
}
