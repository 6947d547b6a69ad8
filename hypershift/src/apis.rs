//! The resource types the HyperShift components call (docs/hcp.md#s7).

use velero_wasm_sdk::Api;

/// `customresourcedefinitions.apiextensions.k8s.io` (cluster-scoped).
pub const CUSTOM_RESOURCE_DEFINITIONS: Api =
    Api::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
/// `hostedcontrolplanes.hypershift.openshift.io`.
pub const HOSTED_CONTROL_PLANES: Api =
    Api::new("hypershift.openshift.io", "v1beta1", "hostedcontrolplanes");
/// `hostedclusters.hypershift.openshift.io`.
pub const HOSTED_CLUSTERS: Api = Api::new("hypershift.openshift.io", "v1beta1", "hostedclusters");
/// `hcpetcdbackups.hypershift.openshift.io`.
pub const HCP_ETCD_BACKUPS: Api = Api::new("hypershift.openshift.io", "v1beta1", "hcpetcdbackups");
/// `clusterdeployments.hive.openshift.io`.
pub const CLUSTER_DEPLOYMENTS: Api = Api::new("hive.openshift.io", "v1", "clusterdeployments");
/// `configmaps`.
pub const CONFIG_MAPS: Api = Api::new("", "v1", "configmaps");
/// `secrets`.
pub const SECRETS: Api = Api::new("", "v1", "secrets");
/// `backups.velero.io`.
pub const BACKUPS: Api = Api::new("velero.io", "v1", "backups");
/// `backupstoragelocations.velero.io`.
pub const BACKUP_STORAGE_LOCATIONS: Api = Api::new("velero.io", "v1", "backupstoragelocations");

/// The CRD whose presence marks a HyperShift management cluster (the gate, docs/hcp.md#s3-1).
pub const HOSTED_CONTROL_PLANE_CRD: &str = "hostedcontrolplanes.hypershift.openshift.io";
/// The CRD the `etcdSnapshot` method needs (docs/hcp.md#s4-4-1).
pub const HCP_ETCD_BACKUP_CRD: &str = "hcpetcdbackups.hypershift.openshift.io";
/// The API group of HyperShift's resources.
pub const GROUP: &str = "hypershift.openshift.io";
