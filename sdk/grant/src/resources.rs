//! The Kubernetes resources the host knows without asking a cluster: the built-in ones (and the CSI
//! snapshot resources Velero relies on), with their kind and scope. Manifests are checked against it
//! when a module loads, so that a kind written where a resource is meant, a resource without its group,
//! or a namespace rule on a cluster-scoped resource is an error then rather than a denied call later.

/// One known resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownResource {
    /// Plural resource name.
    pub resource: &'static str,
    /// API group, "" for core.
    pub group: &'static str,
    /// The kind of its objects.
    pub kind: &'static str,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
}

impl KnownResource {
    /// `resource.group` (`resource` alone for the core group), as grants name it.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

const fn known(
    resource: &'static str,
    group: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> KnownResource {
    KnownResource {
        resource,
        group,
        kind,
        namespaced,
    }
}

const NAMESPACED: bool = true;
const CLUSTER: bool = false;

/// Every known resource.
pub const KNOWN: &[KnownResource] = &[
    known("pods", "", "Pod", NAMESPACED),
    known("services", "", "Service", NAMESPACED),
    known("configmaps", "", "ConfigMap", NAMESPACED),
    known("secrets", "", "Secret", NAMESPACED),
    known(
        "persistentvolumeclaims",
        "",
        "PersistentVolumeClaim",
        NAMESPACED,
    ),
    known("serviceaccounts", "", "ServiceAccount", NAMESPACED),
    known("endpoints", "", "Endpoints", NAMESPACED),
    known("events", "", "Event", NAMESPACED),
    known(
        "replicationcontrollers",
        "",
        "ReplicationController",
        NAMESPACED,
    ),
    known("resourcequotas", "", "ResourceQuota", NAMESPACED),
    known("limitranges", "", "LimitRange", NAMESPACED),
    known("podtemplates", "", "PodTemplate", NAMESPACED),
    known("persistentvolumes", "", "PersistentVolume", CLUSTER),
    known("namespaces", "", "Namespace", CLUSTER),
    known("nodes", "", "Node", CLUSTER),
    known("componentstatuses", "", "ComponentStatus", CLUSTER),
    known("deployments", "apps", "Deployment", NAMESPACED),
    known("statefulsets", "apps", "StatefulSet", NAMESPACED),
    known("daemonsets", "apps", "DaemonSet", NAMESPACED),
    known("replicasets", "apps", "ReplicaSet", NAMESPACED),
    known(
        "controllerrevisions",
        "apps",
        "ControllerRevision",
        NAMESPACED,
    ),
    known("jobs", "batch", "Job", NAMESPACED),
    known("cronjobs", "batch", "CronJob", NAMESPACED),
    known(
        "horizontalpodautoscalers",
        "autoscaling",
        "HorizontalPodAutoscaler",
        NAMESPACED,
    ),
    known(
        "poddisruptionbudgets",
        "policy",
        "PodDisruptionBudget",
        NAMESPACED,
    ),
    known("ingresses", "networking.k8s.io", "Ingress", NAMESPACED),
    known(
        "networkpolicies",
        "networking.k8s.io",
        "NetworkPolicy",
        NAMESPACED,
    ),
    known(
        "ingressclasses",
        "networking.k8s.io",
        "IngressClass",
        CLUSTER,
    ),
    known("roles", "rbac.authorization.k8s.io", "Role", NAMESPACED),
    known(
        "rolebindings",
        "rbac.authorization.k8s.io",
        "RoleBinding",
        NAMESPACED,
    ),
    known(
        "clusterroles",
        "rbac.authorization.k8s.io",
        "ClusterRole",
        CLUSTER,
    ),
    known(
        "clusterrolebindings",
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        CLUSTER,
    ),
    known("storageclasses", "storage.k8s.io", "StorageClass", CLUSTER),
    known(
        "volumeattachments",
        "storage.k8s.io",
        "VolumeAttachment",
        CLUSTER,
    ),
    known("csidrivers", "storage.k8s.io", "CSIDriver", CLUSTER),
    known("csinodes", "storage.k8s.io", "CSINode", CLUSTER),
    known(
        "csistoragecapacities",
        "storage.k8s.io",
        "CSIStorageCapacity",
        NAMESPACED,
    ),
    known(
        "volumesnapshots",
        "snapshot.storage.k8s.io",
        "VolumeSnapshot",
        NAMESPACED,
    ),
    known(
        "volumesnapshotcontents",
        "snapshot.storage.k8s.io",
        "VolumeSnapshotContent",
        CLUSTER,
    ),
    known(
        "volumesnapshotclasses",
        "snapshot.storage.k8s.io",
        "VolumeSnapshotClass",
        CLUSTER,
    ),
    known(
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        CLUSTER,
    ),
    known(
        "apiservices",
        "apiregistration.k8s.io",
        "APIService",
        CLUSTER,
    ),
    known(
        "mutatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        CLUSTER,
    ),
    known(
        "validatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        CLUSTER,
    ),
    known(
        "priorityclasses",
        "scheduling.k8s.io",
        "PriorityClass",
        CLUSTER,
    ),
    known("runtimeclasses", "node.k8s.io", "RuntimeClass", CLUSTER),
    known("leases", "coordination.k8s.io", "Lease", NAMESPACED),
    known(
        "endpointslices",
        "discovery.k8s.io",
        "EndpointSlice",
        NAMESPACED,
    ),
    known(
        "certificatesigningrequests",
        "certificates.k8s.io",
        "CertificateSigningRequest",
        CLUSTER,
    ),
];

/// The known resource named `resource.group` (lower case), if any.
pub fn lookup(group_resource: &str) -> Option<&'static KnownResource> {
    KNOWN.iter().find(|k| {
        let (resource, group) = group_resource
            .split_once('.')
            .unwrap_or((group_resource, ""));
        k.resource == resource && k.group == group
    })
}

/// Whether `group_resource` is known to be cluster-scoped (`None`: not known either way).
pub fn is_namespaced(group_resource: &str) -> Option<bool> {
    lookup(group_resource).map(|k| k.namespaced)
}

/// What a grant should say instead of `written`, when `written` is recognisably not a resource: a kind
/// (`PersistentVolume`), a singular (`pod`), a resource without its group (`deployments`) or with the
/// pseudo-group `core`. `None` when `written` looks like a resource (known or not).
pub fn correction(written: &str) -> Option<(String, &'static str)> {
    let (name, group) = written.split_once('.').unwrap_or((written, ""));
    if written.chars().any(|c| c.is_ascii_uppercase()) {
        // A kind, perhaps with its group: `PersistentVolume`, `VirtualMachine.kubevirt.io`.
        let group = group.to_ascii_lowercase();
        let resource = KNOWN
            .iter()
            .find(|k| k.kind.eq_ignore_ascii_case(name) && (group.is_empty() || k.group == group))
            .map(KnownResource::group_resource)
            .unwrap_or_else(|| {
                let plural = plural_of(name);
                if group.is_empty() {
                    plural
                } else {
                    format!("{plural}.{group}")
                }
            });
        return Some((
            resource,
            "is a kind; grants name resources: plural, lower case, `resource.group`",
        ));
    }
    if group == "core" {
        return Some((
            name.to_string(),
            "names the core group, which grants write as no group",
        ));
    }
    if let Some(k) = KNOWN
        .iter()
        .find(|k| k.kind.eq_ignore_ascii_case(name) && (group.is_empty() || k.group == group))
    {
        if k.resource != name {
            return Some((
                k.group_resource(),
                "is the singular; grants name resources by their plural",
            ));
        }
    }
    if group.is_empty() {
        if let Some(k) = KNOWN
            .iter()
            .find(|k| k.resource == name && !k.group.is_empty())
        {
            return Some((
                k.group_resource(),
                "is not in the core group: a resource outside it needs its group, `resource.group`",
            ));
        }
    }
    None
}

/// The plural resource name Kubernetes gives a kind (`NetworkPolicy` → `networkpolicies`), by the
/// English rules the API machinery uses, with its few irregular kinds.
pub fn plural_of(kind: &str) -> String {
    let word = kind.to_ascii_lowercase();
    match word.as_str() {
        "endpoints" | "endpointslices" => return word,
        "" => return word,
        _ => {}
    }
    if word.ends_with('s')
        || word.ends_with('x')
        || word.ends_with('z')
        || word.ends_with("ch")
        || word.ends_with("sh")
    {
        return format!("{word}es");
    }
    if let Some(stem) = word.strip_suffix('y') {
        if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) {
            return format!("{stem}ies");
        }
    }
    format!("{word}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_singulars_and_missing_groups_are_corrected() {
        for (written, fix) in [
            ("PersistentVolume", "persistentvolumes"),
            ("Pod", "pods"),
            ("StorageClass", "storageclasses.storage.k8s.io"),
            ("VirtualMachine.kubevirt.io", "virtualmachines.kubevirt.io"),
            ("pod", "pods"),
            ("persistentvolumeclaim", "persistentvolumeclaims"),
            ("deployments", "deployments.apps"),
            ("deployment", "deployments.apps"),
            (
                "customresourcedefinitions",
                "customresourcedefinitions.apiextensions.k8s.io",
            ),
            ("pods.core", "pods"),
        ] {
            assert_eq!(
                correction(written).map(|(f, _)| f),
                Some(fix.to_string()),
                "{written}"
            );
        }
        for fine in [
            "pods",
            "endpoints",
            "deployments.apps",
            "virtualmachines.kubevirt.io",
            "widgets.example.io",
            "*",
        ] {
            assert_eq!(correction(fine), None, "{fine}");
        }
    }

    #[test]
    fn scope_is_known_for_built_in_resources_only() {
        assert_eq!(is_namespaced("persistentvolumes"), Some(false));
        assert_eq!(is_namespaced("storageclasses.storage.k8s.io"), Some(false));
        assert_eq!(is_namespaced("pods"), Some(true));
        assert_eq!(is_namespaced("deployments.apps"), Some(true));
        assert_eq!(is_namespaced("deployments"), None);
        assert_eq!(is_namespaced("virtualmachines.kubevirt.io"), None);
    }
}
