//! The Kubernetes resource types this component reads or names, and how it names one object as a
//! Velero additional item (`ResourceIdentifier`).

use velero_wasm_sdk::{Api, ResourceId};

/// `virtualmachines.kubevirt.io`.
pub const VIRTUAL_MACHINES: Api = Api::new("kubevirt.io", "v1", "virtualmachines");
/// `virtualmachineinstances.kubevirt.io`.
pub const VIRTUAL_MACHINE_INSTANCES: Api = Api::new("kubevirt.io", "v1", "virtualmachineinstances");
/// `virtualmachineinstancereplicasets.kubevirt.io`.
pub const VIRTUAL_MACHINE_INSTANCE_REPLICA_SETS: Api =
    Api::new("kubevirt.io", "v1", "virtualmachineinstancereplicasets");
/// `virtualmachineinstancepresets.kubevirt.io` (deprecated presets).
pub const VIRTUAL_MACHINE_INSTANCE_PRESETS: Api =
    Api::new("kubevirt.io", "v1", "virtualmachineinstancepresets");
/// `virtualmachinepools.pool.kubevirt.io`.
pub const VIRTUAL_MACHINE_POOLS: Api =
    Api::new("pool.kubevirt.io", "v1alpha1", "virtualmachinepools");
/// `datavolumes.cdi.kubevirt.io`.
pub const DATA_VOLUMES: Api = Api::new("cdi.kubevirt.io", "v1beta1", "datavolumes");
/// `datasources.cdi.kubevirt.io`.
pub const DATA_SOURCES: Api = Api::new("cdi.kubevirt.io", "v1beta1", "datasources");
/// `persistentvolumeclaims`.
pub const PERSISTENT_VOLUME_CLAIMS: Api = Api::new("", "v1", "persistentvolumeclaims");
/// `pods`.
pub const PODS: Api = Api::new("", "v1", "pods");
/// `secrets`.
pub const SECRETS: Api = Api::new("", "v1", "secrets");
/// `configmaps`.
pub const CONFIG_MAPS: Api = Api::new("", "v1", "configmaps");
/// `serviceaccounts`.
pub const SERVICE_ACCOUNTS: Api = Api::new("", "v1", "serviceaccounts");
/// `controllerrevisions.apps`.
pub const CONTROLLER_REVISIONS: Api = Api::new("apps", "v1", "controllerrevisions");
/// `volumesnapshots.snapshot.storage.k8s.io`.
pub const VOLUME_SNAPSHOTS: Api = Api::new("snapshot.storage.k8s.io", "v1", "volumesnapshots");
/// `network-attachment-definitions.k8s.cni.cncf.io` (Multus).
pub const NETWORK_ATTACHMENT_DEFINITIONS: Api =
    Api::new("k8s.cni.cncf.io", "v1", "network-attachment-definitions");
/// `virtualmachineinstancetypes.instancetype.kubevirt.io` (namespaced).
pub const INSTANCETYPES: Api = Api::new(
    "instancetype.kubevirt.io",
    "v1beta1",
    "virtualmachineinstancetypes",
);
/// `virtualmachineclusterinstancetypes.instancetype.kubevirt.io` (cluster-scoped).
pub const CLUSTER_INSTANCETYPES: Api = Api::new(
    "instancetype.kubevirt.io",
    "v1beta1",
    "virtualmachineclusterinstancetypes",
);
/// `virtualmachinepreferences.instancetype.kubevirt.io` (namespaced).
pub const PREFERENCES: Api = Api::new(
    "instancetype.kubevirt.io",
    "v1beta1",
    "virtualmachinepreferences",
);
/// `virtualmachineclusterpreferences.instancetype.kubevirt.io` (cluster-scoped).
pub const CLUSTER_PREFERENCES: Api = Api::new(
    "instancetype.kubevirt.io",
    "v1beta1",
    "virtualmachineclusterpreferences",
);

/// The additional item naming object `namespace/name` of type `api` ("" namespace: cluster-scoped).
pub fn id(api: Api, namespace: &str, name: &str) -> ResourceId {
    ResourceId::new(api.group, api.resource, namespace, name)
}
