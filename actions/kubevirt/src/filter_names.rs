//! The resources whose Backup filters the plugin reads, with every name Velero resolves to each
//! (plural, singular, short names, group): what [`crate::scope`] and [`crate::namespace_filters`]
//! compare filter entries against.

/// A resource the plugin asks about, with every name Velero would resolve to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// The string upstream passes to its scope helpers (`datavolume` is singular there).
    pub upstream: &'static str,
    /// Plural name.
    pub plural: &'static str,
    /// Singular name (the kind, lower-cased).
    pub singular: &'static str,
    /// API group ("" for core).
    pub group: &'static str,
    /// Short names from API discovery.
    pub short: &'static [&'static str],
}

/// `virtualmachineinstances.kubevirt.io`.
pub const VIRTUAL_MACHINE_INSTANCES: Resource = Resource {
    upstream: "virtualmachineinstances",
    plural: "virtualmachineinstances",
    singular: "virtualmachineinstance",
    group: "kubevirt.io",
    short: &["vmi", "vmis"],
};
/// `virtualmachines.kubevirt.io`.
pub const VIRTUAL_MACHINES: Resource = Resource {
    upstream: "virtualmachines",
    plural: "virtualmachines",
    singular: "virtualmachine",
    group: "kubevirt.io",
    short: &["vm", "vms"],
};
/// `pods`.
pub const PODS: Resource = Resource {
    upstream: "pods",
    plural: "pods",
    singular: "pod",
    group: "",
    short: &["po"],
};
/// `persistentvolumeclaims`.
pub const PERSISTENT_VOLUME_CLAIMS: Resource = Resource {
    upstream: "persistentvolumeclaims",
    plural: "persistentvolumeclaims",
    singular: "persistentvolumeclaim",
    group: "",
    short: &["pvc"],
};
/// `datavolumes.cdi.kubevirt.io` (upstream asks for the singular `datavolume`).
pub const DATA_VOLUMES: Resource = Resource {
    upstream: "datavolume",
    plural: "datavolumes",
    singular: "datavolume",
    group: "cdi.kubevirt.io",
    short: &["dv", "dvs"],
};
