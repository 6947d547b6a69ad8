//! The `namespacedFilterPolicies` of a Backup's resource policy (Velero v1.18.3 and later;
//! docs/kubevirt.md#s4-1), reduced to what decides whether the plugin's objects land in the backup: per
//! namespace, which kinds Velero collects itself, and the name globs it applies to every item of a
//! kind, additional items included. Label selectors are not read (docs/upstream.md#velero).

use serde::Deserialize;

use crate::filter_names::Resource;
use crate::glob::{is_namespace_glob, Glob, GlobError};

/// One `namespacedFilterPolicies` entry as written (other keys, label selectors among them, are
/// ignored).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEntry {
    /// Exact namespace names and namespace globs.
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
    /// The resource filters of those namespaces.
    #[serde(default)]
    pub resource_filters: Option<Vec<FilterEntry>>,
}

/// One `resourceFilters` entry as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterEntry {
    /// Resource names as Velero resolves them; empty or `["*"]` is the catch-all.
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
    /// Name globs to keep (empty: every name).
    #[serde(default)]
    pub names: Option<Vec<String>>,
    /// Name globs to drop.
    #[serde(default)]
    pub excluded_names: Option<Vec<String>>,
}

/// The compiled policies, in the order written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceFilters {
    policies: Vec<NamespacePolicy>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct NamespacePolicy {
    namespaces: Vec<String>,
    filters: Vec<Filter>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Filter {
    kinds: Vec<String>,
    names: Vec<Glob>,
    excluded_names: Vec<Glob>,
}

impl Filter {
    fn catch_all(&self) -> bool {
        self.kinds.is_empty() || self.kinds == ["*"]
    }

    /// Velero's name check for the filter (an includes/excludes set of globs): an excluded match
    /// drops the name; otherwise an empty include list, a `*` entry or an include match keeps it.
    fn keeps_name(&self, name: &str) -> bool {
        if self.excluded_names.iter().any(|g| g.matches(name)) {
            return false;
        }
        self.names.is_empty()
            || self
                .names
                .iter()
                .any(|g| g.as_str() == "*" || g.matches(name))
    }
}

impl NamespaceFilters {
    /// Compiles the policies; a glob Velero's validation would refuse is an error.
    pub fn compile(entries: Vec<PolicyEntry>) -> Result<NamespaceFilters, GlobError> {
        let globs = |patterns: Option<Vec<String>>| -> Result<Vec<Glob>, GlobError> {
            patterns
                .unwrap_or_default()
                .iter()
                .map(|p| Glob::new(p))
                .collect()
        };
        let mut policies = Vec::new();
        for entry in entries {
            let mut filters = Vec::new();
            for f in entry.resource_filters.unwrap_or_default() {
                filters.push(Filter {
                    kinds: f.kinds.unwrap_or_default(),
                    names: globs(f.names)?,
                    excluded_names: globs(f.excluded_names)?,
                });
            }
            let namespaces = entry.namespaces.unwrap_or_default();
            for pattern in namespaces.iter().filter(|p| is_namespace_glob(p)) {
                Glob::new(pattern)?;
            }
            policies.push(NamespacePolicy {
                namespaces,
                filters,
            });
        }
        Ok(NamespaceFilters { policies })
    }

    /// No policy at all (the Backup's filters alone decide).
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The policy that governs `namespace`, as Velero picks it: one that lists the namespace exactly,
    /// else the first namespace glob, in the order written, that matches. Velero keys its map by the
    /// pattern string, so a pattern listed twice resolves to the last policy listing it (its
    /// validation refuses that; kept for fidelity).
    fn policy_for(&self, namespace: &str) -> Option<&NamespacePolicy> {
        let last_listing = |pattern: &str| {
            self.policies
                .iter()
                .rev()
                .find(|p| p.namespaces.iter().any(|n| n == pattern))
        };
        last_listing(namespace).or_else(|| {
            self.policies
                .iter()
                .flat_map(|p| p.namespaces.iter())
                .filter(|n| is_namespace_glob(n))
                .find(|n| Glob::new(n).is_ok_and(|g| g.matches(namespace)))
                .and_then(|pattern| last_listing(pattern))
        })
    }

    /// The filter for `resource` in `namespace`: `None` when no policy governs the namespace,
    /// `Some(None)` when one does but has neither an entry for the resource nor a catch-all.
    fn filter_for(&self, resource: &Resource, namespace: &str) -> Option<Option<&Filter>> {
        let policy = self.policy_for(namespace)?;
        let specific = policy
            .filters
            .iter()
            .rev()
            .find(|f| !f.catch_all() && f.kinds.iter().any(|k| names_resource(k, resource)));
        Some(specific.or_else(|| policy.filters.iter().rev().find(|f| f.catch_all())))
    }

    /// Velero drops an object of `resource` named `name` in `namespace` by its filter's name globs.
    /// It checks them on every namespaced item it backs up, its own and those actions return.
    pub fn drops_name(&self, resource: &Resource, namespace: &str, name: &str) -> bool {
        matches!(self.filter_for(resource, namespace), Some(Some(f)) if !f.keeps_name(name))
    }

    /// Velero's own collection never lists `resource` in `namespace`: a policy governs the namespace
    /// and has neither an entry for the resource nor a catch-all. (An action may still return such
    /// objects as additional items, and those are backed up.)
    pub fn never_collects(&self, resource: &Resource, namespace: &str) -> bool {
        matches!(self.filter_for(resource, namespace), Some(None))
    }
}

/// Whether a `kinds` entry resolves to `resource` the way Velero's discovery does: short names as
/// written, plural or singular names in any case; an entry with a `.` is not resolved and counts only
/// when it reads exactly `<plural>.<group>`.
fn names_resource(kind: &str, resource: &Resource) -> bool {
    if kind.contains('.') {
        return !resource.group.is_empty()
            && kind == format!("{}.{}", resource.plural, resource.group);
    }
    let lower = kind.to_lowercase();
    resource.short.contains(&kind) || lower == resource.plural || lower == resource.singular
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter_names::{DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS, PODS, VIRTUAL_MACHINES};
    use serde_json::json;

    fn filters(policies: serde_json::Value) -> NamespaceFilters {
        NamespaceFilters::compile(serde_json::from_value(policies).unwrap()).unwrap()
    }

    #[test]
    fn names_and_excluded_names_apply_to_the_kind_they_name() {
        let f = filters(json!([{"namespaces": ["vm-workloads"], "resourceFilters": [
            {"kinds": ["persistentvolumeclaims"], "names": ["web-*"], "excludedNames": ["web-scratch"]},
            {"kinds": ["pods"]}]}]));
        let ns = "vm-workloads";
        assert!(!f.drops_name(&PERSISTENT_VOLUME_CLAIMS, ns, "web-root"));
        assert!(f.drops_name(&PERSISTENT_VOLUME_CLAIMS, ns, "db-root"));
        assert!(f.drops_name(&PERSISTENT_VOLUME_CLAIMS, ns, "web-scratch"));
        assert!(
            !f.drops_name(&PODS, ns, "anything"),
            "no name lists: every name"
        );
        assert!(!f.drops_name(&PERSISTENT_VOLUME_CLAIMS, "elsewhere", "db-root"));
    }

    #[test]
    fn an_unlisted_kind_is_not_collected_but_keeps_every_name() {
        let f = filters(json!([{"namespaces": ["vm-workloads"], "resourceFilters": [
            {"kinds": ["pvc"], "names": ["web-*"]}]}]));
        assert!(f.never_collects(&VIRTUAL_MACHINES, "vm-workloads"));
        assert!(!f.drops_name(&VIRTUAL_MACHINES, "vm-workloads", "db"));
        assert!(!f.never_collects(&PERSISTENT_VOLUME_CLAIMS, "vm-workloads"));
        assert!(!f.never_collects(&VIRTUAL_MACHINES, "elsewhere"));
    }

    #[test]
    fn a_catch_all_collects_every_kind_and_a_specific_entry_wins_over_it() {
        for catch_all in [json!({"kinds": []}), json!({"kinds": ["*"]}), json!({})] {
            let f = filters(json!([{"namespaces": ["vm-workloads"], "resourceFilters": [
                catch_all, {"kinds": ["dv"], "excludedNames": ["scratch-*"]}]}]));
            assert!(!f.never_collects(&VIRTUAL_MACHINES, "vm-workloads"));
            assert!(f.drops_name(&DATA_VOLUMES, "vm-workloads", "scratch-1"));
            assert!(!f.drops_name(&PODS, "vm-workloads", "scratch-1"));
        }
    }

    #[test]
    fn kinds_resolve_like_velero_discovery() {
        for (kind, resolves) in [
            ("pvc", true),
            ("PVC", false),
            ("PersistentVolumeClaims", true),
            ("persistentvolumeclaim", true),
            ("persistentvolumeclaims.", false),
        ] {
            assert_eq!(
                names_resource(kind, &PERSISTENT_VOLUME_CLAIMS),
                resolves,
                "{kind}"
            );
        }
        assert!(names_resource("datavolumes.cdi.kubevirt.io", &DATA_VOLUMES));
        assert!(!names_resource("datavolume.cdi.kubevirt.io", &DATA_VOLUMES));
        assert!(!names_resource(
            "DataVolumes.cdi.kubevirt.io",
            &DATA_VOLUMES
        ));
        assert!(names_resource("VirtualMachine", &VIRTUAL_MACHINES));
        assert!(names_resource("vms", &VIRTUAL_MACHINES));
    }

    #[test]
    fn an_exact_namespace_wins_over_globs_and_the_first_matching_glob_wins() {
        let f = filters(json!([
            {"namespaces": ["team-*"], "resourceFilters": [{"kinds": ["pods"], "names": ["a-*"]}]},
            {"namespaces": ["team-?"], "resourceFilters": [{"kinds": ["pods"], "names": ["b-*"]}]},
            {"namespaces": ["team-1"], "resourceFilters": [{"kinds": ["pods"], "names": ["c-*"]}]}]));
        assert!(!f.drops_name(&PODS, "team-1", "c-x") && f.drops_name(&PODS, "team-1", "a-x"));
        assert!(!f.drops_name(&PODS, "team-2", "a-x") && f.drops_name(&PODS, "team-2", "b-x"));
        assert!(!f.drops_name(&PODS, "team-blue", "a-x"));
        assert!(!f.drops_name(&PODS, "other", "z"));
    }

    #[test]
    fn a_namespace_written_with_braces_only_is_an_exact_name() {
        let f = filters(json!([{"namespaces": ["{a,b}"], "resourceFilters": [
            {"kinds": ["pods"], "names": ["x"]}]}]));
        assert!(!f.drops_name(&PODS, "a", "y"));
        assert!(f.drops_name(&PODS, "{a,b}", "y"));
    }

    #[test]
    fn a_star_in_names_keeps_everything_and_bad_globs_are_errors() {
        let f = filters(json!([{"namespaces": ["n"], "resourceFilters": [
            {"kinds": ["pods"], "names": ["*"], "excludedNames": ["tmp-*"]}]}]));
        assert!(!f.drops_name(&PODS, "n", "launcher"));
        assert!(f.drops_name(&PODS, "n", "tmp-1"));
        for bad in [
            json!([{"namespaces": ["n"], "resourceFilters": [{"kinds": ["pods"], "names": ["[a"]}]}]),
            json!([{"namespaces": ["n-["], "resourceFilters": [{"kinds": ["pods"]}]}]),
        ] {
            assert!(NamespaceFilters::compile(serde_json::from_value(bad).unwrap()).is_err());
        }
    }
}
