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
//! Extended mode also merges the `includeExcludePolicy` of the Backup's resource policy the way Velero
//! (v1.17.0+) does: the Backup's own lists win, and a policy entry counts only when they do not name it;
//! and it keeps the policy's `namespacedFilterPolicies` (v1.18.3+) to tell which objects Velero drops by
//! name and which kinds it never collects in a namespace.

use velero_wasm_sdk::Object;

use crate::context::Context;
pub use crate::filter_names::{
    Resource, DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS, PODS, VIRTUAL_MACHINES,
    VIRTUAL_MACHINE_INSTANCES,
};
use crate::keys;
use crate::mode::Mode;
use crate::namespace_filters::NamespaceFilters;
use crate::resource_policy::{self, IncludeExcludePolicy};

/// Every resource the plugin asks about, to tell whether two filter entries name the same one.
const KNOWN: [Resource; 5] = [
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    PODS,
    PERSISTENT_VOLUME_CLAIMS,
    DATA_VOLUMES,
];

/// The resource filters of one Backup, and its `metadataBackup` label.
#[derive(Debug, Clone)]
pub struct Scope {
    included: Vec<String>,
    excluded: Vec<String>,
    mode: Mode,
    metadata_backup: bool,
    filters: NamespaceFilters,
    policy: String,
}

fn strings(backup: &Object, pointer: &str) -> Vec<String> {
    backup
        .array_at(pointer)
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// The resource policy ConfigMap [`Scope::read`] reads for `backup` in `mode` (extended mode only):
/// so that it can be read ahead with the VM's own objects.
pub fn policy_config_map(mode: Mode, backup: &Object) -> Option<&str> {
    if !mode.extended() {
        return None;
    }
    resource_policy::config_map_name(backup)
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
            filters: NamespaceFilters::default(),
            policy: String::new(),
        }
    }

    /// The filters of a Backup as Velero applies them: in extended mode, with the `includeExcludePolicy`
    /// of the resource policy the Backup names merged in (read through the cluster; see
    /// [`resource_policy::read`] for why an unreadable policy is an error). Upstream mode reads only the
    /// spec, as kubevirt-velero-plugin does.
    pub fn read(ctx: &Context, backup: &Object) -> Result<Scope, String> {
        let scope = Scope::of(backup, ctx.mode);
        if !ctx.extended() {
            return Ok(scope);
        }
        let Some(policy) = resource_policy::read(ctx, backup)? else {
            return Ok(scope);
        };
        let mut scope = match &policy.include_exclude {
            Some(include_exclude) => scope.with_policy(include_exclude),
            None => scope,
        };
        scope.filters = policy.namespace_filters;
        scope.policy = policy.source;
        Ok(scope)
    }

    /// Velero (v1.18.3+) drops the object of `resource` named `name` in `namespace` by the name globs
    /// of the resource policy's namespace filter; it checks them on additional items too. Always
    /// false in upstream mode, which reads no policy.
    pub fn drops_name(&self, resource: &Resource, namespace: &str, name: &str) -> bool {
        self.filters.drops_name(resource, namespace, name)
    }

    /// Velero's own collection never lists `resource` in `namespace` (a namespace filter policy
    /// without an entry for it or a catch-all), so only an action could bring such objects in.
    pub fn never_collects(&self, resource: &Resource, namespace: &str) -> bool {
        self.filters.never_collects(resource, namespace)
    }

    /// `namespace/name` of the resource policy ConfigMap whose filters were read (empty if none).
    pub fn policy(&self) -> &str {
        &self.policy
    }

    /// Velero's `CombineWithPolicy` for the namespace-scoped lists: the policy's excludes first, then its
    /// includes, each added only when neither list (as it stands, policy entries added so far
    /// included) already names it. So the Backup's lists take precedence, and a policy that excludes
    /// and includes the same resource excludes it.
    pub fn with_policy(mut self, policy: &IncludeExcludePolicy) -> Scope {
        for entry in &policy.excluded_namespace_scoped_resources {
            if !self.names(entry) {
                self.excluded.push(entry.clone());
            }
        }
        for entry in &policy.included_namespace_scoped_resources {
            if !self.names(entry) {
                self.included.push(entry.clone());
            }
        }
        self
    }

    /// Whether the include or exclude list already names `entry`: `*` names everything, and two
    /// entries are the same when they resolve to the same known resource or, for resources the plugin
    /// does not ask about, read the same.
    fn names(&self, entry: &str) -> bool {
        let entry_lower = entry.trim().to_lowercase();
        self.included.iter().chain(&self.excluded).any(|listed| {
            let listed_lower = listed.trim().to_lowercase();
            listed_lower == "*"
                || listed_lower == entry_lower
                || KNOWN
                    .iter()
                    .any(|r| velero_matches(listed, r) && velero_matches(entry, r))
        })
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

    fn policy(included: &[&str], excluded: &[&str]) -> IncludeExcludePolicy {
        IncludeExcludePolicy {
            included_namespace_scoped_resources: included.iter().map(|s| s.to_string()).collect(),
            excluded_namespace_scoped_resources: excluded.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn policy_lists_apply_when_the_spec_names_nothing() {
        let s = extended(json!({})).with_policy(&policy(&["vm", "pvc"], &[]));
        assert!(s.in_backup(&VIRTUAL_MACHINES) && s.in_backup(&PERSISTENT_VOLUME_CLAIMS));
        assert!(
            !s.in_backup(&PODS),
            "a policy include list limits like a spec one"
        );
        let s = extended(json!({})).with_policy(&policy(&[], &["pods"]));
        assert!(!s.in_backup(&PODS) && s.in_backup(&PERSISTENT_VOLUME_CLAIMS));
    }

    #[test]
    fn the_spec_wins_over_the_policy() {
        // The spec includes pods: the policy's exclusion of pods is skipped.
        let s = extended(json!({"includedNamespaceScopedResources": ["pods", "pvc"]}))
            .with_policy(&policy(&[], &["po"]));
        assert!(s.in_backup(&PODS));
        // The spec excludes PVCs: the policy's inclusion of them is skipped.
        let s = extended(json!({"excludedNamespaceScopedResources": ["persistentvolumeclaims"]}))
            .with_policy(&policy(&["pvc", "pods"], &[]));
        assert!(!s.in_backup(&PERSISTENT_VOLUME_CLAIMS));
        assert!(s.in_backup(&PODS) && !s.in_backup(&VIRTUAL_MACHINES));
        // `*` in the spec names everything: the policy adds nothing.
        let s = extended(json!({"includedNamespaceScopedResources": ["*"]}))
            .with_policy(&policy(&[], &["pods"]));
        assert!(s.in_backup(&PODS));
    }

    #[test]
    fn a_policy_that_excludes_and_includes_a_resource_excludes_it() {
        let s = extended(json!({})).with_policy(&policy(&["pods", "vmi"], &["pod"]));
        assert!(!s.in_backup(&PODS));
        assert!(s.in_backup(&VIRTUAL_MACHINE_INSTANCES));
    }

    #[test]
    fn policy_entries_of_other_groups_do_not_count() {
        let s = extended(json!({})).with_policy(&policy(&[], &["pods.metrics.k8s.io"]));
        assert!(s.in_backup(&PODS));
    }

    mod read {
        use super::*;
        use crate::resources::CONFIG_MAPS;
        use velero_wasm_sdk::{Cluster, FakeCluster};

        const MANIFEST: &str = include_str!("../kubevirt.toml");

        fn with_policy(b: serde_json::Value) -> Object {
            let mut o = backup(json!({"resourcePolicy": {"kind": "configmap", "name": "policy"}}));
            o.set("/metadata/namespace", json!("velero")).unwrap();
            if !b.is_null() {
                o.set("/spec/includedNamespaceScopedResources", b).unwrap();
            }
            o
        }

        fn cluster(data: serde_json::Value) -> FakeCluster {
            let cm = Object::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "policy", "namespace": "velero"}, "data": data}))
            .unwrap();
            FakeCluster::new()
                .with(CONFIG_MAPS, cm)
                .with_manifest("kubevirt", MANIFEST)
                .unwrap()
                .item_namespace("vm-workloads")
                .velero_namespace("velero")
        }

        fn read(c: &FakeCluster, mode: Mode, b: &Object) -> Result<Scope, String> {
            Scope::read(&Context::new(c as &dyn Cluster, mode), b)
        }

        const EXCLUDE_PODS: &str =
            "version: v1\nincludeExcludePolicy:\n  excludedNamespaceScopedResources: [pods]\n";

        #[test]
        fn extended_mode_reads_the_policy_through_the_manifest_grant() {
            let c = cluster(json!({"policy.yaml": EXCLUDE_PODS}));
            let s = read(&c, Mode::Extended, &with_policy(json!(null))).unwrap();
            assert!(!s.in_backup(&PODS) && s.in_backup(&PERSISTENT_VOLUME_CLAIMS));
            assert_eq!(c.calls().len(), 1);
        }

        #[test]
        fn upstream_mode_never_reads_it() {
            let c = cluster(json!({"policy.yaml": EXCLUDE_PODS}));
            let s = read(&c, Mode::Upstream, &with_policy(json!(null))).unwrap();
            assert!(s.in_backup(&PODS));
            assert!(c.calls().is_empty());
        }

        #[test]
        fn a_backup_without_a_configmap_policy_reads_nothing() {
            let c = cluster(json!({"policy.yaml": EXCLUDE_PODS}));
            let mut b = with_policy(json!(null));
            b.set("/spec/resourcePolicy/kind", json!("secret")).unwrap();
            assert!(read(&c, Mode::Extended, &b).unwrap().in_backup(&PODS));
            assert!(read(&c, Mode::Extended, &backup(json!({})))
                .unwrap()
                .in_backup(&PODS));
            assert!(c.calls().is_empty());
        }

        #[test]
        fn unreadable_or_malformed_policies_fail_with_the_configmap_named() {
            for data in [
                json!({}),
                json!({"a": EXCLUDE_PODS, "b": EXCLUDE_PODS}),
                json!({"policy.yaml": "version: v9\n"}),
                json!({"policy.yaml": "version: v1\nincludeExcludePolicy: {"}),
            ] {
                let e = read(
                    &cluster(data.clone()),
                    Mode::Extended,
                    &with_policy(json!(null)),
                )
                .unwrap_err();
                assert!(
                    e.contains("velero/policy") && e.contains("mode = \"upstream\""),
                    "{data}: {e}"
                );
            }
            let mut b = with_policy(json!(null));
            b.set("/spec/resourcePolicy/name", json!("missing"))
                .unwrap();
            let e = read(&cluster(json!({})), Mode::Extended, &b).unwrap_err();
            assert!(e.contains("velero/missing"), "{e}");
        }

        #[test]
        fn a_backup_in_another_namespace_is_denied_by_the_grant() {
            let c = cluster(json!({"policy.yaml": EXCLUDE_PODS}));
            let mut b = with_policy(json!(null));
            b.set("/metadata/namespace", json!("elsewhere")).unwrap();
            let e = read(&c, Mode::Extended, &b).unwrap_err();
            assert!(e.contains("elsewhere/policy"), "{e}");
        }
    }
}
