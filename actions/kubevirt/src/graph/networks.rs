//! The NetworkAttachmentDefinitions of a VM's Multus networks (docs/kubevirt.md#s4-10). Upstream follows
//! them since kubevirt-velero-plugin #426 (June 2026, also on its release-v0.9 branch as #428), after
//! the access credentials of every VM and VMI graph, backup and restore alike. Without them a VM restored
//! into a new namespace or cluster has no network to attach to and does not start.

use serde_json::Value;
use velero_wasm_sdk::ResourceId;

use crate::fields::{list, set, text};
use crate::resources::{id, NETWORK_ATTACHMENT_DEFINITIONS};

/// One NetworkAttachmentDefinition per network with a `multus.networkName`, in network order: a bare
/// name lives in `namespace` (the item's), `ns/name` names another namespace. As upstream, the name is
/// split at the first `/` only, and a network whose `networkName` is empty names nothing.
pub fn network_items(namespace: &str, spec: &Value) -> Vec<ResourceId> {
    list(spec, "/networks")
        .iter()
        .filter(|network| set(network, "/multus").is_some())
        .map(|network| text(network, "/multus/networkName"))
        .filter(|name| !name.is_empty())
        .map(|name| {
            let (nad_namespace, nad_name) = name.split_once('/').unwrap_or((namespace, name));
            id(NETWORK_ATTACHMENT_DEFINITIONS, nad_namespace, nad_name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::names;
    use serde_json::json;

    #[test]
    fn checklist_114_multus_networks_name_their_definitions_in_order() {
        let spec = json!({"networks": [
            {"name": "default", "pod": {}},
            {"name": "storage", "multus": {"networkName": "vlan200"}},
            {"name": "shared", "multus": {"networkName": "netops/backbone"}},
            {"name": "odd", "multus": {"networkName": "a/b/c"}},
            {"name": "unnamed", "multus": {"networkName": ""}},
            {"name": "null", "multus": null}
        ]});
        assert_eq!(
            names(&network_items("vm-workloads", &spec)),
            [
                "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/vlan200",
                "network-attachment-definitions.k8s.cni.cncf.io netops/backbone",
                "network-attachment-definitions.k8s.cni.cncf.io a/b/c"
            ]
        );
    }

    #[test]
    fn a_spec_without_networks_names_nothing() {
        assert!(network_items("ns", &json!({})).is_empty());
        assert!(network_items("ns", &json!({"networks": "not a list"})).is_empty());
    }
}
