//! The Backup's resource policy (docs/kubevirt.md#s4-1): the `includeExcludePolicy` (Velero v1.17.0 and
//! later) and the `namespacedFilterPolicies` (v1.18.3 and later) of the ConfigMap that
//! `Backup.spec.resourcePolicy` names. Extended mode reads it so that its scope predictions match what
//! Velero keeps; upstream's plugin never reads it, and `mode = "upstream"` does not.

use serde::Deserialize;
use velero_wasm_sdk::Object;

use crate::context::Context;
use crate::namespace_filters::{NamespaceFilters, PolicyEntry};
use crate::resources::CONFIG_MAPS;

/// The namespace-scoped lists of a policy's `includeExcludePolicy` (the only ones that can name the
/// resources the plugin asks about; the cluster-scoped lists never do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IncludeExcludePolicy {
    /// `includedNamespaceScopedResources`.
    #[serde(default)]
    pub included_namespace_scoped_resources: Vec<String>,
    /// `excludedNamespaceScopedResources`.
    #[serde(default)]
    pub excluded_namespace_scoped_resources: Vec<String>,
}

/// The parts of Velero's `ResourcePolicies` document the plugin uses; other keys are ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    version: Option<String>,
    include_exclude_policy: Option<IncludeExcludePolicy>,
    namespaced_filter_policies: Option<Vec<PolicyEntry>>,
}

/// What a policy says about the resources the plugin asks about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `namespace/name` of the ConfigMap, for messages (empty when parsed from text alone).
    pub source: String,
    /// The `includeExcludePolicy`, if any.
    pub include_exclude: Option<IncludeExcludePolicy>,
    /// The `namespacedFilterPolicies` (empty when none).
    pub namespace_filters: NamespaceFilters,
}

/// Parses the policy document (the YAML of the ConfigMap's one data key). Velero accepts only
/// `version: v1`, and refuses a policy whose globs do not compile.
pub fn parse(yaml: &str) -> Result<Policy, String> {
    let document: Document = crate::policy_yaml::parse(yaml)
        .map_err(|e| e.to_string())
        .and_then(|tree| serde_json::from_value(tree).map_err(|e| e.to_string()))
        .map_err(|e| format!("its YAML does not parse: {e}"))?;
    match document.version.as_deref() {
        Some("v1") => {}
        Some(other) => {
            return Err(format!(
                "its version is {other:?}; Velero reads only version v1"
            ))
        }
        None => return Err("it has no version; Velero reads only version: v1".into()),
    }
    let namespace_filters =
        NamespaceFilters::compile(document.namespaced_filter_policies.unwrap_or_default())
            .map_err(|e| format!("its namespacedFilterPolicies hold an {e}"))?;
    Ok(Policy {
        source: String::new(),
        include_exclude: document.include_exclude_policy,
        namespace_filters,
    })
}

/// The name of the resource policy ConfigMap the Backup names (in its own namespace), if it names
/// one: what [`read`] reads, and what the VM backup reads ahead with the rest.
pub fn config_map_name(backup: &Object) -> Option<&str> {
    let kind = backup
        .str_at("/spec/resourcePolicy/kind")
        .unwrap_or_default();
    let name = backup
        .str_at("/spec/resourcePolicy/name")
        .unwrap_or_default();
    (kind.eq_ignore_ascii_case("configmap") && !name.is_empty()).then_some(name)
}

/// Reads the policy the Backup names, if any, as Velero does: `spec.resourcePolicy.kind` is
/// `configmap` (any case), the ConfigMap lives in the Backup's namespace and has exactly one data key.
/// `Ok(None)`: the Backup names no policy. An unreadable or malformed policy is
/// an error: Velero validated it when the backup started, so failing now means the grant, the
/// ConfigMap or its contents changed, and a prediction from the spec alone could call a VM safe to
/// back up when its launcher pod or disks are left out.
pub fn read(ctx: &Context, backup: &Object) -> Result<Option<Policy>, String> {
    let Some(name) = config_map_name(backup) else {
        return Ok(None);
    };
    let namespace = backup.namespace();
    let wrap = |why: String| {
        format!(
            "cannot read the resource policy ConfigMap {namespace}/{name} of backup {}: {why}; the kubevirt \
             module reads it to know whether the VM's pods, PVCs and DataVolumes are in the backup \
             (docs/kubevirt.md#s4-1). Fix the ConfigMap, or set mode = \"upstream\" to ignore policies",
            backup.name()
        )
    };
    let config_map = ctx
        .cluster
        .get(CONFIG_MAPS, namespace, name)
        .map_err(|e| wrap(e.to_string()))?;
    let data = config_map
        .pointer("/data")
        .and_then(|d| d.as_object())
        .filter(|d| d.len() == 1)
        .ok_or_else(|| wrap("it must have exactly one data key, as Velero requires".into()))?;
    let yaml = data
        .values()
        .next()
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let mut policy = parse(yaml).map_err(wrap)?;
    policy.source = format!("{namespace}/{name}");
    Ok(Some(policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_namespace_scoped_lists_and_ignores_the_rest() {
        let yaml = "version: v1\nvolumePolicies: []\nincludeExcludePolicy:\n  includedClusterScopedResources: [storageclasses]\n  includedNamespaceScopedResources: [pods, pvc]\n  excludedNamespaceScopedResources: [virtualmachineinstances]\nnamespacedFilterPolicies: []\n";
        let p = parse(yaml).unwrap().include_exclude.unwrap();
        assert_eq!(p.included_namespace_scoped_resources, ["pods", "pvc"]);
        assert_eq!(
            p.excluded_namespace_scoped_resources,
            ["virtualmachineinstances"]
        );
    }

    #[test]
    fn a_policy_of_volume_policies_only_filters_nothing() {
        assert_eq!(
            parse("version: v1\nvolumePolicies: []\n").unwrap(),
            Policy::default()
        );
    }

    #[test]
    fn reads_namespaced_filter_policies_as_velero_writes_them() {
        let yaml = "version: v1
namespacedFilterPolicies:
  - namespaces: [vm-workloads, \"team-*\"]
    resourceFilters:
      - kinds: [persistentvolumeclaims]
        names: [\"web-*\"]
        excludedNames:
          - web-scratch
        labelSelector:
          matchExpressions:
            - {key: tier, operator: In, values: [gold]}
      - kinds: []
";
        let p = parse(yaml).unwrap();
        assert_eq!(p.include_exclude, None);
        let f = &p.namespace_filters;
        let pvcs = &crate::scope::PERSISTENT_VOLUME_CLAIMS;
        assert!(f.drops_name(pvcs, "team-a", "db-root"));
        assert!(!f.drops_name(pvcs, "vm-workloads", "web-root"));
        assert!(f.drops_name(pvcs, "vm-workloads", "web-scratch"));
        assert!(!f.never_collects(&crate::scope::PODS, "vm-workloads"));
    }

    #[test]
    fn a_glob_velero_refuses_is_an_error() {
        let e = parse(
            "version: v1\nnamespacedFilterPolicies:\n- namespaces: [n]\n  resourceFilters:\n  - kinds: [pods]\n    names: [\"[a\"]\n",
        )
        .unwrap_err();
        assert!(
            e.contains("namespacedFilterPolicies") && e.contains("[a"),
            "{e}"
        );
    }

    #[test]
    fn wrong_versions_and_bad_yaml_are_errors() {
        assert!(parse("version: v2\n").unwrap_err().contains("v2"));
        assert!(parse("volumePolicies: []\n")
            .unwrap_err()
            .contains("no version"));
        assert!(parse("version: v1\nincludeExcludePolicy: [").is_err());
        assert!(parse(
            "version: v1\nincludeExcludePolicy:\n  includedNamespaceScopedResources: pods\n"
        )
        .is_err());
    }

    /// A policy whose namespaces are one flow sequence over `lines` lines (about 10 bytes each).
    fn spread_flow_sequence(lines: usize) -> String {
        let mut yaml = String::from(
            "version: v1\nnamespacedFilterPolicies:\n- resourceFilters:\n  - kinds: [pods]\n    names: [\"keep-*\"]\n  namespaces: [\n",
        );
        for n in 0..lines {
            yaml.push_str(&format!("    ns-{n},\n"));
        }
        yaml.push_str("    last]\n");
        yaml
    }

    /// Bytes scanned for the end of flow collections while parsing `yaml`.
    fn flow_work(yaml: &str) -> usize {
        let before = crate::policy_yaml::FLOW_BYTES_SCANNED.with(|c| c.get());
        let policy = parse(yaml).unwrap();
        let pods = &crate::scope::PODS;
        assert!(policy.namespace_filters.drops_name(pods, "ns-7", "other"));
        assert!(!policy.namespace_filters.drops_name(pods, "last", "keep-1"));
        crate::policy_yaml::FLOW_BYTES_SCANNED.with(|c| c.get()) - before
    }

    /// A flow sequence spread over many lines is read in time linear in its size (issue 43: 1 MiB
    /// over 100,000 lines took the whole 30 s of a VM call when every line rescanned the ones before).
    #[test]
    fn a_flow_sequence_over_many_lines_is_read_in_linear_work() {
        let small = spread_flow_sequence(10_000);
        let small_work = flow_work(&small);
        assert!(
            small_work <= 2 * small.len(),
            "{small_work} bytes scanned for a {}-byte document",
            small.len()
        );
        let large = spread_flow_sequence(100_000);
        assert!(large.len() >= 1 << 20, "{}", large.len());
        let large_work = flow_work(&large);
        assert!(
            large_work <= 2 * large.len() && large_work <= 12 * small_work,
            "{large_work} bytes scanned for {} bytes, {small_work} for {}",
            large.len(),
            small.len()
        );
    }
}
