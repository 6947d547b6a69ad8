//! Whether an action applies to an item, by Velero's rules for a `ResourceSelector`
//! (`pkg/plugin/framework/action_resolver.go`): resources and namespaces by include/exclude globs,
//! cluster-scoped items only when no namespace is excluded, labels by the label selector.
//!
//! Velero resolves resource names through API discovery; without a cluster we accept the forms that
//! resolution accepts and that can be derived from the item itself: plural (`pods`), singular or kind
//! (`pod`, `Pod`), each optionally qualified by the group (`deployments.apps`). Short names (`po`) are
//! not known without discovery and never match. A CRD may spell its resource names with hyphens where
//! its kind has none (Multus: kind `NetworkAttachmentDefinition`, resource
//! `network-attachment-definitions`, singular `network-attachment-definition`), so an entry also
//! matches with its hyphens removed.

use label_selector::{LabelSelector, ParseError};
use serde::{Deserialize, Serialize};

use super::item::ItemRef;
use velero_wasm_grant::glob::matches as glob;

/// Which items an action applies to (Velero's `ResourceSelector`). Empty lists mean "all".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// Namespaces to include.
    pub included_namespaces: Vec<String>,
    /// Namespaces to exclude.
    pub excluded_namespaces: Vec<String>,
    /// Resources to include (plural, kind, or `resource.group`).
    pub included_resources: Vec<String>,
    /// Resources to exclude.
    pub excluded_resources: Vec<String>,
    /// A Kubernetes label selector string.
    pub label_selector: String,
}

/// A selector whose label part does not parse.
#[derive(Debug, thiserror::Error)]
#[error("label selector {selector:?} does not parse: {source}")]
pub struct SelectorError {
    /// The selector string.
    pub(crate) selector: String,
    /// The parse error.
    #[source]
    pub(crate) source: ParseError,
}

/// A selector ready for matching.
#[derive(Debug, Clone)]
pub struct AppliesTo {
    selector: Selector,
    labels: LabelSelector,
}

impl AppliesTo {
    /// Prepares a selector; fails if its label selector does not parse (Velero would fail the backup).
    pub fn new(selector: &Selector) -> Result<AppliesTo, SelectorError> {
        let labels =
            LabelSelector::parse(&selector.label_selector).map_err(|source| SelectorError {
                selector: selector.label_selector.clone(),
                source,
            })?;
        Ok(AppliesTo {
            selector: selector.clone(),
            labels,
        })
    }

    /// `Ok` when the selector matches the item, seen in `namespace` (for restores, the target
    /// namespace after Velero's namespace mapping); otherwise the reason it does not.
    pub fn check(&self, item: &ItemRef, namespace: &str) -> Result<(), NoMatch> {
        let s = &self.selector;
        let resource = Forms::of(item);
        if s.excluded_resources
            .iter()
            .any(|p| p != "*" && resource.matches(p))
        {
            return Err(NoMatch::ExcludedResource {
                resource: item.group_resource(),
                excluded: s.excluded_resources.clone(),
            });
        }
        let included = s.included_resources.is_empty()
            || s.included_resources
                .iter()
                .any(|p| p == "*" || resource.matches(p));
        if !included {
            return Err(NoMatch::ResourceNotIncluded {
                resource: item.group_resource(),
                included: s.included_resources.clone(),
            });
        }
        if namespace.is_empty() {
            let all = s.included_namespaces.is_empty() || s.included_namespaces == ["*"];
            if !all || !s.excluded_namespaces.is_empty() {
                return Err(NoMatch::ClusterScoped);
            }
        } else {
            if s.excluded_namespaces
                .iter()
                .any(|p| p != "*" && glob(p, namespace))
            {
                return Err(NoMatch::ExcludedNamespace {
                    namespace: namespace.to_string(),
                    excluded: s.excluded_namespaces.clone(),
                });
            }
            let included = s.included_namespaces.is_empty()
                || s.included_namespaces
                    .iter()
                    .any(|p| p == "*" || glob(p, namespace));
            if !included {
                return Err(NoMatch::NamespaceNotIncluded {
                    namespace: namespace.to_string(),
                    included: s.included_namespaces.clone(),
                });
            }
        }
        if !self
            .labels
            .matches_with(|k| item.labels.get(k).map(String::as_str))
        {
            return Err(NoMatch::Labels {
                selector: s.label_selector.clone(),
            });
        }
        Ok(())
    }
}

/// Why a selector does not match an item.
#[derive(Debug, thiserror::Error)]
pub enum NoMatch {
    /// Its resource is excluded.
    #[error("{resource} is in excludedResources {excluded:?}")]
    ExcludedResource {
        /// `resource.group` of the item.
        resource: String,
        /// The selector's excluded resources.
        excluded: Vec<String>,
    },
    /// Its resource is not among those included.
    #[error("{resource} is not in includedResources {included:?}")]
    ResourceNotIncluded {
        /// `resource.group` of the item.
        resource: String,
        /// The selector's included resources.
        included: Vec<String>,
    },
    /// A cluster-scoped item, and a selector that names namespaces.
    #[error("the item is cluster-scoped and the selector restricts namespaces")]
    ClusterScoped,
    /// Its namespace is excluded.
    #[error("namespace {namespace} is in excludedNamespaces {excluded:?}")]
    ExcludedNamespace {
        /// The namespace the item is seen in.
        namespace: String,
        /// The selector's excluded namespaces.
        excluded: Vec<String>,
    },
    /// Its namespace is not among those included.
    #[error("namespace {namespace} is not in includedNamespaces {included:?}")]
    NamespaceNotIncluded {
        /// The namespace the item is seen in.
        namespace: String,
        /// The selector's included namespaces.
        included: Vec<String>,
    },
    /// Its labels do not match.
    #[error("its labels do not match the selector {selector:?}")]
    Labels {
        /// The selector's label selector.
        selector: String,
    },
}

/// The names a resource entry may use for the item's resource.
struct Forms {
    group: String,
    names: [String; 2],
}

impl Forms {
    fn of(item: &ItemRef) -> Forms {
        Forms {
            group: item.group().to_ascii_lowercase(),
            names: [item.resource(), item.kind.to_ascii_lowercase()],
        }
    }

    fn matches(&self, pattern: &str) -> bool {
        let pattern = pattern.to_ascii_lowercase();
        let name_matches = |p: &str| {
            let joined = p.replace('-', "");
            self.names.iter().any(|n| glob(p, n) || glob(&joined, n))
        };
        if name_matches(&pattern) {
            return true;
        }
        // `resource.group` (the group may itself contain dots: `virtualmachines.kubevirt.io`).
        match pattern.split_once('.') {
            Some((name, group)) => name_matches(name) && glob(group, &self.group),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(api_version: &str, kind: &str, ns: &str, labels: &[(&str, &str)]) -> ItemRef {
        ItemRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: "x".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn sel(f: impl FnOnce(&mut Selector)) -> AppliesTo {
        let mut s = Selector::default();
        f(&mut s);
        AppliesTo::new(&s).unwrap()
    }

    #[test]
    fn hyphenated_crd_resource_names_match_their_kind() {
        let nad = item(
            "k8s.cni.cncf.io/v1",
            "NetworkAttachmentDefinition",
            "ns",
            &[],
        );
        for entry in [
            "network-attachment-definition",
            "network-attachment-definitions",
            "network-attachment-definitions.k8s.cni.cncf.io",
        ] {
            let a = sel(|s| s.included_resources = vec![entry.into()]);
            assert!(a.check(&nad, "ns").is_ok(), "{entry}");
        }
        let other =
            sel(|s| s.included_resources = vec!["network-attachment-definitions.other.io".into()]);
        assert!(other.check(&nad, "ns").is_err());
        let pods = sel(|s| s.included_resources = vec!["network-attachment-definition".into()]);
        assert!(pods.check(&item("v1", "Pod", "ns", &[]), "ns").is_err());
    }

    #[test]
    fn empty_selector_applies_to_everything() {
        let a = sel(|_| {});
        assert!(a.check(&item("v1", "Pod", "ns", &[]), "ns").is_ok());
        assert!(a.check(&item("v1", "Node", "", &[]), "").is_ok());
    }

    #[test]
    fn resources_match_by_plural_kind_and_group() {
        let a = sel(|s| s.included_resources = vec!["VirtualMachine".into()]);
        assert!(a
            .check(&item("kubevirt.io/v1", "VirtualMachine", "ns", &[]), "ns")
            .is_ok());
        assert!(a
            .check(
                &item("kubevirt.io/v1", "VirtualMachineInstance", "ns", &[]),
                "ns"
            )
            .is_err());
        let a = sel(|s| s.included_resources = vec!["virtualmachines.kubevirt.io".into()]);
        assert!(a
            .check(&item("kubevirt.io/v1", "VirtualMachine", "ns", &[]), "ns")
            .is_ok());
        assert!(a
            .check(&item("other.io/v1", "VirtualMachine", "ns", &[]), "ns")
            .is_err());
        let a = sel(|s| s.included_resources = vec!["persistentvolumeclaims".into()]);
        assert!(a
            .check(&item("v1", "PersistentVolumeClaim", "ns", &[]), "ns")
            .is_ok());
    }

    #[test]
    fn excludes_win_and_star_includes_all() {
        let a = sel(|s| {
            s.included_resources = vec!["*".into()];
            s.excluded_resources = vec!["secrets".into()];
        });
        assert!(a.check(&item("v1", "ConfigMap", "ns", &[]), "ns").is_ok());
        assert!(a.check(&item("v1", "Secret", "ns", &[]), "ns").is_err());
    }

    #[test]
    fn any_excluded_namespace_disables_cluster_scoped_items() {
        let a = sel(|s| s.excluded_namespaces = vec!["kube-system".into()]);
        assert!(a
            .check(&item("v1", "Pod", "default", &[]), "default")
            .is_ok());
        assert!(a
            .check(&item("v1", "Pod", "kube-system", &[]), "kube-system")
            .is_err());
        assert!(a
            .check(&item("v1", "PersistentVolume", "", &[]), "")
            .is_err());
        let a = sel(|s| s.included_namespaces = vec!["prod-*".into()]);
        assert!(a
            .check(&item("v1", "Pod", "prod-eu", &[]), "prod-eu")
            .is_ok());
        assert!(a.check(&item("v1", "Pod", "dev", &[]), "dev").is_err());
    }

    #[test]
    fn labels_must_match() {
        let a = sel(|s| s.label_selector = "kubevirt.io in (virt-launcher, hotplug-disk)".into());
        assert!(a
            .check(
                &item("v1", "Pod", "ns", &[("kubevirt.io", "virt-launcher")]),
                "ns"
            )
            .is_ok());
        assert!(a.check(&item("v1", "Pod", "ns", &[]), "ns").is_err());
    }

    #[test]
    fn a_bad_label_selector_is_an_error() {
        let s = Selector {
            label_selector: "a in (".into(),
            ..Selector::default()
        };
        assert!(AppliesTo::new(&s).is_err());
    }
}
