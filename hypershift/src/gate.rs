//! The HyperShift gate (docs/hcp.md#s3-1): whether a Backup is a HyperShift backup at all. Every other backup
//! passes through the components untouched.

use velero_wasm_sdk::{log, Cluster, Object};

use crate::apis::{CUSTOM_RESOURCE_DEFINITIONS, HOSTED_CONTROL_PLANE_CRD};

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// A HyperShift backup: the components do their work.
    Proceed,
    /// Not one: return the item unchanged. The reason is for the log.
    PassThrough(String),
}

/// Substrings of an included resource that mark a HyperShift backup without asking the cluster.
const HYPERSHIFT_RESOURCES: [&str; 3] = ["hostedcluster", "hostedcontrolplane", "nodepool"];

/// Decides for `backup` (for a restore: the Backup it restores). In order: no included namespaces →
/// pass through; an included resource containing `hostedcluster`, `hostedcontrolplane` or `nodepool`
/// → proceed; otherwise proceed iff the HostedControlPlane CRD exists (a read error passes through).
pub fn gate(cluster: &dyn Cluster, backup: &Object) -> Gate {
    if backup.array_at("/spec/includedNamespaces").is_empty() {
        return Gate::PassThrough("no namespaces provided".into());
    }
    let named = backup
        .array_at("/spec/includedResources")
        .iter()
        .filter_map(|r| r.as_str())
        .any(|r| HYPERSHIFT_RESOURCES.iter().any(|h| r.contains(h)));
    if named {
        return Gate::Proceed;
    }
    match cluster.get(CUSTOM_RESOURCE_DEFINITIONS, "", HOSTED_CONTROL_PLANE_CRD) {
        Ok(_) => Gate::Proceed,
        Err(e) if e.is_not_found() => {
            Gate::PassThrough(format!("CRD {HOSTED_CONTROL_PLANE_CRD} not found"))
        }
        Err(e) => {
            log::info(
                "cannot read the HostedControlPlane CRD: treating the backup as not HyperShift",
                &[("error", e.message())],
            );
            Gate::PassThrough(format!(
                "CRD {HOSTED_CONTROL_PLANE_CRD} unreadable: {}",
                e.message()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use velero_wasm_sdk::{FakeCluster, KubeAnswer, KubeError};

    use super::*;

    fn backup(spec: serde_json::Value) -> Object {
        Object::from_value(json!({"metadata": {"name": "b"}, "spec": spec})).unwrap()
    }

    fn crd() -> Object {
        Object::from_value(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": HOSTED_CONTROL_PLANE_CRD}}),
        )
        .unwrap()
    }

    #[test]
    fn upstream_unit_cases() {
        let with_crd = FakeCluster::new().with(CUSTOM_RESOURCE_DEFINITIONS, crd());
        let without = FakeCluster::new();
        // CRD present with resources [hostedcontrolplanes, hostedclusters]: proceed (without asking).
        let named = backup(
            json!({"includedNamespaces": ["clusters"], "includedResources": ["hostedcontrolplanes", "hostedclusters"]}),
        );
        assert_eq!(gate(&with_crd, &named), Gate::Proceed);
        assert!(with_crd.calls().is_empty(), "{:?}", with_crd.calls());
        // CRD absent with [secrets, configmaps]: do nothing.
        let plain = backup(
            json!({"includedNamespaces": ["clusters"], "includedResources": ["secrets", "configmaps"]}),
        );
        assert!(matches!(gate(&without, &plain), Gate::PassThrough(_)));
        assert_eq!(without.calls().len(), 1);
        // No namespaces: do nothing, without asking.
        let none = backup(json!({"includedResources": ["hostedclusters"]}));
        assert_eq!(
            gate(&with_crd, &none),
            Gate::PassThrough("no namespaces provided".into())
        );
        // No resources and no CRD: do nothing; with the CRD: proceed.
        let all = backup(json!({"includedNamespaces": ["clusters"]}));
        assert!(matches!(gate(&without, &all), Gate::PassThrough(_)));
        assert_eq!(gate(&with_crd, &all), Gate::Proceed);
    }

    #[test]
    fn substrings_count_and_group_suffixes_too() {
        let c = FakeCluster::new();
        for r in [
            "nodepools",
            "hostedclusters.hypershift.openshift.io",
            "hostedcontrolplane",
        ] {
            let b = backup(json!({"includedNamespaces": ["a"], "includedResources": [r]}));
            assert_eq!(gate(&c, &b), Gate::Proceed, "{r}");
        }
        let b =
            backup(json!({"includedNamespaces": ["a"], "includedResources": ["HostedClusters"]}));
        assert!(
            matches!(gate(&c, &b), Gate::PassThrough(_)),
            "case-sensitive"
        );
    }

    struct Unreadable;
    impl Cluster for Unreadable {
        fn call(&self, _: velero_wasm_sdk::KubeCall<'_>) -> Result<KubeAnswer, KubeError> {
            Err(KubeError::Forbidden("crds is forbidden".into()))
        }
    }

    #[test]
    fn a_crd_read_error_passes_through() {
        let b = backup(json!({"includedNamespaces": ["a"]}));
        let Gate::PassThrough(why) = gate(&Unreadable, &b) else {
            panic!("proceeded")
        };
        assert!(why.contains("crds is forbidden"), "{why}");
    }
}
