//! The Backup's resource policy (docs/kubevirt.md#s4-1): the `includeExcludePolicy` of the ConfigMap that
//! `Backup.spec.resourcePolicy` names. Extended mode reads it so that its scope predictions match what
//! Velero (v1.17.0 and later) keeps; upstream's plugin never reads it, and `mode = "upstream"` does not.

use serde::Deserialize;
use velero_wasm_sdk::Object;

use crate::context::Context;
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
}

/// Parses the policy document (the YAML of the ConfigMap's one data key). Velero accepts only
/// `version: v1`.
pub fn parse(yaml: &str) -> Result<Option<IncludeExcludePolicy>, String> {
    let document: Document = crate::policy_yaml::parse(yaml)
        .map_err(|e| e.to_string())
        .and_then(|tree| serde_json::from_value(tree).map_err(|e| e.to_string()))
        .map_err(|e| format!("its YAML does not parse: {e}"))?;
    match document.version.as_deref() {
        Some("v1") => Ok(document.include_exclude_policy),
        Some(other) => Err(format!(
            "its version is {other:?}; Velero reads only version v1"
        )),
        None => Err("it has no version; Velero reads only version: v1".into()),
    }
}

/// Reads the policy the Backup names, if any, as Velero does: `spec.resourcePolicy.kind` is
/// `configmap` (any case), the ConfigMap lives in the Backup's namespace and has exactly one data key.
/// `Ok(None)`: no policy, or one without `includeExcludePolicy`. An unreadable or malformed policy is
/// an error: Velero validated it when the backup started, so failing now means the grant, the
/// ConfigMap or its contents changed, and a prediction from the spec alone could call a VM safe to
/// back up when its launcher pod or disks are left out.
pub fn read(ctx: &Context, backup: &Object) -> Result<Option<IncludeExcludePolicy>, String> {
    let kind = backup
        .str_at("/spec/resourcePolicy/kind")
        .unwrap_or_default();
    let name = backup
        .str_at("/spec/resourcePolicy/name")
        .unwrap_or_default();
    if !kind.eq_ignore_ascii_case("configmap") || name.is_empty() {
        return Ok(None);
    }
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
    parse(yaml).map_err(wrap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_namespace_scoped_lists_and_ignores_the_rest() {
        let yaml = "version: v1\nvolumePolicies: []\nincludeExcludePolicy:\n  includedClusterScopedResources: [storageclasses]\n  includedNamespaceScopedResources: [pods, pvc]\n  excludedNamespaceScopedResources: [virtualmachineinstances]\nnamespacedFilterPolicies: []\n";
        let p = parse(yaml).unwrap().unwrap();
        assert_eq!(p.included_namespace_scoped_resources, ["pods", "pvc"]);
        assert_eq!(
            p.excluded_namespace_scoped_resources,
            ["virtualmachineinstances"]
        );
    }

    #[test]
    fn a_policy_without_include_exclude_is_no_policy() {
        assert_eq!(parse("version: v1\nvolumePolicies: []\n").unwrap(), None);
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
}
