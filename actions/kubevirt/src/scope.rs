//! Whether a Backup will keep a resource (docs/kubevirt.md#s4-1): the plugin's approximation of Velero's resource
//! filters, used to predict whether the VMI, launcher pod, DataVolumes and PVCs of a VM end up in the
//! backup.
//!
//! Upstream compares each filter entry with a name by the part before its first `.`, case-insensitively,
//! allowing one trailing `s`. That makes `*` match nothing, short names (`pvc`, `vmi`) never match, the
//! group is ignored (`pods.metrics.k8s.io` counts as `pods`), and the scoped filters
//! (`includedNamespaceScopedResources`, …) are not read. `mode: upstream` keeps all of that. `mode:
//! extended` resolves entries the way Velero does: `*` is every resource, plural, singular and short
//! names all match, a group must be the resource's group, and the namespace-scoped filters count.

use velero_wasm_sdk::Object;

use crate::keys;
use crate::mode::Mode;

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

/// The resource filters of one Backup, and its `metadataBackup` label.
#[derive(Debug, Clone)]
pub struct Scope {
    included: Vec<String>,
    excluded: Vec<String>,
    mode: Mode,
    metadata_backup: bool,
}

fn strings(backup: &Object, pointer: &str) -> Vec<String> {
    backup
        .array_at(pointer)
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

impl Scope {
    /// Reads the filters of a `velero.io/v1` Backup.
    pub fn of(backup: &Object, mode: Mode) -> Scope {
        let mut included = strings(backup, "/spec/includedResources");
        let mut excluded = strings(backup, "/spec/excludedResources");
        if mode.extended() {
            // Velero refuses Backups that mix the old and the scoped filters, so a union is exact.
            included.extend(strings(backup, "/spec/includedNamespaceScopedResources"));
            excluded.extend(strings(backup, "/spec/excludedNamespaceScopedResources"));
        }
        Scope {
            included,
            excluded,
            mode,
            metadata_backup: backup.has_label(keys::METADATA_BACKUP),
        }
    }

    /// The Backup's include list names the resource (an empty list includes everything).
    pub fn included(&self, resource: &Resource) -> bool {
        self.included.is_empty() || self.included.iter().any(|e| self.matches(e, resource))
    }

    /// The Backup's exclude list names the resource.
    pub fn excluded(&self, resource: &Resource) -> bool {
        self.excluded.iter().any(|e| self.matches(e, resource))
    }

    /// Included and not excluded: Velero will keep objects of this resource.
    pub fn in_backup(&self, resource: &Resource) -> bool {
        self.included(resource) && !self.excluded(resource)
    }

    /// The Backup carries the `velero.kubevirt.io/metadataBackup` label (any value).
    pub fn metadata_backup(&self) -> bool {
        self.metadata_backup
    }

    fn matches(&self, entry: &str, resource: &Resource) -> bool {
        match self.mode {
            Mode::Upstream => upstream_matches(entry, resource.upstream),
            Mode::Extended => velero_matches(entry, resource),
        }
    }
}

/// Whether an object carries `velero.io/exclude-from-backup=true` (exactly `"true"`; docs/kubevirt.md#s4-2).
pub fn excluded_by_label(object: &Object) -> bool {
    object.label(keys::EXCLUDE_FROM_BACKUP) == Some("true")
}

/// Upstream's comparison: the entry up to its first `.`, equal to `kind` ignoring case, or one of the
/// two equal to the other plus `s`.
pub fn upstream_matches(entry: &str, kind: &str) -> bool {
    let name = entry.split('.').next().unwrap_or_default().to_lowercase();
    let kind = kind.to_lowercase();
    name == kind || name == format!("{kind}s") || kind == format!("{name}s")
}

/// Velero's resolution of a filter entry: `*`, or `name[.group]` where the name is the plural, the
/// singular or a short name and the group (when given) is the resource's.
fn velero_matches(entry: &str, resource: &Resource) -> bool {
    let entry = entry.trim().to_lowercase();
    if entry == "*" {
        return true;
    }
    let (name, group) = entry.split_once('.').unwrap_or((entry.as_str(), ""));
    if !group.is_empty() && group != resource.group {
        return false;
    }
    name == resource.plural || name == resource.singular || resource.short.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn backup(spec: serde_json::Value) -> Object {
        Object::from_value(json!({"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "b"}, "spec": spec}))
            .unwrap()
    }

    fn upstream(spec: serde_json::Value) -> Scope {
        Scope::of(&backup(spec), Mode::Upstream)
    }

    fn extended(spec: serde_json::Value) -> Scope {
        Scope::of(&backup(spec), Mode::Extended)
    }

    /// A resource known to upstream only by the name it asks with (`pod`, `datavolumes`, …).
    fn asked(name: &'static str) -> Resource {
        Resource {
            upstream: name,
            ..PODS
        }
    }

    #[test]
    fn checklist_1_empty_includes_keep_everything() {
        assert!(upstream(json!({"includedResources": []})).in_backup(&PODS));
        assert!(extended(json!({"includedResources": []})).in_backup(&PODS));
    }

    #[test]
    fn checklist_2_includes_name_exactly_what_they_list() {
        let s = upstream(json!({"includedResources": ["pods", "virtualmachines"]}));
        assert!(s.included(&PODS));
        assert!(!s.included(&PERSISTENT_VOLUME_CLAIMS));
    }

    #[test]
    fn checklist_3_matching_ignores_case() {
        let s = upstream(json!({"includedResources": ["DataVolumes"]}));
        assert!(s.included(&asked("datavolumes")));
        assert!(extended(json!({"includedResources": ["DataVolumes"]})).included(&DATA_VOLUMES));
    }

    #[test]
    fn checklist_4_one_trailing_s_is_allowed_either_way() {
        assert!(upstream(json!({"includedResources": ["pod"]})).included(&PODS));
        assert!(upstream(json!({"includedResources": ["pods"]})).included(&asked("pod")));
    }

    #[test]
    fn checklist_5_the_group_is_cut_off_at_the_first_dot() {
        let s = upstream(json!({"includedResources": ["virtualmachine.kubevirt.io"]}));
        assert!(s.included(&VIRTUAL_MACHINES));
    }

    #[test]
    fn checklist_6_plural_entry_matches_the_singular_datavolume_question() {
        assert!(upstream(json!({"includedResources": ["datavolumes"]})).included(&DATA_VOLUMES));
    }

    #[test]
    fn checklist_7_star_matches_nothing_upstream_and_everything_extended() {
        assert!(!upstream(json!({"includedResources": ["*"]})).included(&PODS));
        assert!(extended(json!({"includedResources": ["*"]})).included(&PODS));
    }

    #[test]
    fn checklist_8_short_names_never_match_upstream_and_do_extended() {
        assert!(
            !upstream(json!({"includedResources": ["pvc"]})).included(&PERSISTENT_VOLUME_CLAIMS)
        );
        let s = extended(json!({"includedResources": ["pvc", "vmi", "dv", "po", "vm"]}));
        for r in [
            PERSISTENT_VOLUME_CLAIMS,
            VIRTUAL_MACHINE_INSTANCES,
            DATA_VOLUMES,
            PODS,
            VIRTUAL_MACHINES,
        ] {
            assert!(s.included(&r), "{}", r.plural);
        }
    }

    #[test]
    fn checklist_9_excludes() {
        assert!(!upstream(json!({"excludedResources": []})).excluded(&PODS));
        let s = upstream(json!({"excludedResources": ["virtualmachineinstances.kubevirt.io"]}));
        assert!(s.excluded(&VIRTUAL_MACHINE_INSTANCES));
        let s = extended(json!({"excludedResources": ["virtualmachineinstances.kubevirt.io"]}));
        assert!(s.excluded(&VIRTUAL_MACHINE_INSTANCES));
    }

    #[test]
    fn checklist_10_exclusion_wins() {
        let s = upstream(json!({"includedResources": ["pods"], "excludedResources": ["pods"]}));
        assert!(!s.in_backup(&PODS));
        let s = extended(json!({"includedResources": ["pods"], "excludedResources": ["pods"]}));
        assert!(!s.in_backup(&PODS));
    }

    #[test]
    fn a_foreign_group_counts_upstream_but_not_extended() {
        let spec = json!({"excludedResources": ["pods.metrics.k8s.io"]});
        assert!(upstream(spec.clone()).excluded(&PODS));
        assert!(!extended(spec).excluded(&PODS));
        assert!(
            extended(json!({"excludedResources": ["datavolumes.cdi.kubevirt.io"]}))
                .excluded(&DATA_VOLUMES)
        );
    }

    #[test]
    fn scoped_filters_count_only_in_extended_mode() {
        let spec = json!({"includedNamespaceScopedResources": ["virtualmachines", "persistentvolumeclaims"],
                          "excludedNamespaceScopedResources": ["pods"]});
        let u = upstream(spec.clone());
        assert!(u.in_backup(&PODS) && u.in_backup(&VIRTUAL_MACHINE_INSTANCES));
        let e = extended(spec);
        assert!(!e.in_backup(&PODS));
        assert!(!e.in_backup(&VIRTUAL_MACHINE_INSTANCES));
        assert!(e.in_backup(&PERSISTENT_VOLUME_CLAIMS));
    }

    #[test]
    fn only_the_value_true_excludes() {
        let mut o = backup(json!({}));
        assert!(!excluded_by_label(&o));
        for (value, excluded) in [
            ("true", true),
            ("True", false),
            ("yes", false),
            ("false", false),
            ("", false),
        ] {
            o.set_label(keys::EXCLUDE_FROM_BACKUP, value);
            assert_eq!(excluded_by_label(&o), excluded, "{value:?}");
        }
    }

    #[test]
    fn the_metadata_backup_label_counts_whatever_its_value() {
        let mut b = backup(json!({}));
        assert!(!Scope::of(&b, Mode::Upstream).metadata_backup());
        b.set_label(keys::METADATA_BACKUP, "");
        assert!(Scope::of(&b, Mode::Upstream).metadata_backup());
    }
}
