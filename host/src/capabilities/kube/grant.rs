//! A module's Kubernetes grant, compiled from its manifest: a call is allowed when one rule covers its
//! verb, its resource and its namespace.

use crate::action::Verb;
use crate::glob;
use crate::modules::{KubeRule, NamespaceRule};

/// The Kubernetes calls a module may make: its manifest's rules, typed when the manifest was read.
#[derive(Debug, Clone, Default)]
pub struct KubeGrant {
    rules: Vec<KubeRule>,
}

impl KubeGrant {
    /// The grant of a manifest's rules (resources compared without case).
    pub fn new(rules: &[KubeRule]) -> KubeGrant {
        let rules = rules
            .iter()
            .map(|r| KubeRule {
                resources: r.resources.iter().map(|s| s.to_ascii_lowercase()).collect(),
                ..r.clone()
            })
            .collect();
        KubeGrant { rules }
    }

    /// Whether `verb` on `group_resource` (`resource.group`) in `namespace` ("" for cluster scope or all
    /// namespaces) is allowed, for a call on an item in `item_namespace`, with Velero in
    /// `velero_namespace` ("" when unknown: `@velero` then allows nothing).
    pub fn allows(
        &self,
        verb: Verb,
        group_resource: &str,
        namespace: &str,
        item_namespace: Option<&str>,
        velero_namespace: &str,
    ) -> bool {
        let group_resource = group_resource.to_ascii_lowercase();
        self.rules.iter().any(|rule| {
            rule.verbs.allows(verb)
                && rule
                    .resources
                    .iter()
                    .any(|r| r == "*" || *r == group_resource)
                && rule.namespaces.iter().any(|n| match n {
                    NamespaceRule::Any => true,
                    NamespaceRule::Item => {
                        item_namespace.is_some_and(|item| !item.is_empty() && item == namespace)
                    }
                    NamespaceRule::Velero => {
                        !velero_namespace.is_empty() && velero_namespace == namespace
                    }
                    // A list that names no namespace would list a namespaced resource in every
                    // namespace (manifests refuse "" with `list`).
                    NamespaceRule::Cluster => namespace.is_empty() && verb != Verb::List,
                    NamespaceRule::Pattern(p) => {
                        !namespace.is_empty() && glob::matches(p, namespace)
                    }
                })
        })
    }
}

/// The manifest rule that would allow a call the grant refused, as the TOML to add (its keys on one
/// line, so that a denial stays one line): the namespace is written as `@item` when it is the item's,
/// `@velero` when it is Velero's, "" for a call on a cluster-scoped object, and "*" for a list that
/// names no namespace.
pub fn rule_allowing(
    verb: Verb,
    group_resource: &str,
    namespace: &str,
    item_namespace: Option<&str>,
    velero_namespace: &str,
) -> String {
    let namespace = if namespace.is_empty() {
        if verb == Verb::List {
            "*"
        } else {
            ""
        }
    } else if item_namespace.is_some_and(|item| item == namespace) {
        "@item"
    } else if velero_namespace == namespace {
        "@velero"
    } else {
        namespace
    };
    format!(
        "[[grant.kube]] resources = [{:?}] verbs = [{:?}] namespaces = [{namespace:?}]",
        group_resource.to_ascii_lowercase(),
        verb.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::{Manifest, Verbs};

    fn grant(resources: &[&str], verbs: &[&str], namespaces: &[&str]) -> KubeGrant {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        KubeGrant::new(&[KubeRule {
            resources: s(resources),
            verbs: Verbs::parse(&s(verbs)).unwrap(),
            namespaces: namespaces.iter().map(|n| NamespaceRule::read(n)).collect(),
        }])
    }

    #[test]
    fn a_verb_that_is_not_one_is_an_error_naming_its_rule() {
        let rule = |verbs: &str| {
            format!(
                "[[grant.kube]]\nresources = [\"pods\"]\nverbs = [{verbs}]\nnamespaces = [\"*\"]\n"
            )
        };
        let manifest = format!("{}{}", rule("\"get\""), rule("\"get\", \"watch\""));
        let e = Manifest::parse(&manifest).unwrap_err().to_string();
        assert!(
            e.starts_with("grant.kube[1].verbs: \"watch\" is not a verb modules have"),
            "{e}"
        );
        let manifest = Manifest::parse(&rule("\"get\", \"patch\"")).unwrap();
        let grant = KubeGrant::new(&manifest.grant.kube);
        assert!(grant.allows(Verb::Patch, "pods", "ns", None, ""));
        assert!(!grant.allows(Verb::Delete, "pods", "ns", None, ""));
    }

    #[test]
    fn verbs_resources_and_namespaces_must_all_match() {
        let g = grant(
            &["pods", "datavolumes.cdi.kubevirt.io"],
            &["get", "list"],
            &["*"],
        );
        assert!(g.allows(Verb::Get, "pods", "ns", None, ""));
        assert!(g.allows(Verb::List, "datavolumes.cdi.kubevirt.io", "", None, ""));
        assert!(!g.allows(Verb::Delete, "pods", "ns", None, ""));
        assert!(!g.allows(Verb::Get, "secrets", "ns", None, ""));
        assert!(!g.allows(Verb::Get, "datavolumes", "ns", None, ""));
    }

    #[test]
    fn item_namespace_confines_calls_to_the_item() {
        let g = grant(&["pods"], &["*"], &["@item"]);
        assert!(g.allows(Verb::List, "pods", "vm-workloads", Some("vm-workloads"), ""));
        assert!(!g.allows(Verb::List, "pods", "kube-system", Some("vm-workloads"), ""));
        assert!(!g.allows(Verb::List, "pods", "", Some("vm-workloads"), ""));
        assert!(!g.allows(Verb::List, "pods", "", Some(""), ""));
        assert!(!g.allows(Verb::List, "pods", "ns", None, ""));
    }

    #[test]
    fn namespace_patterns_and_cluster_scope() {
        let g = grant(
            &["hostedcontrolplanes.hypershift.openshift.io"],
            &["get"],
            &["clusters-*"],
        );
        assert!(g.allows(
            Verb::Get,
            "hostedcontrolplanes.hypershift.openshift.io",
            "clusters-prod",
            None,
            ""
        ));
        assert!(!g.allows(
            Verb::Get,
            "hostedcontrolplanes.hypershift.openshift.io",
            "",
            None,
            ""
        ));
        let g = grant(&["nodes"], &["get"], &[""]);
        assert!(g.allows(Verb::Get, "nodes", "", None, ""));
        assert!(!g.allows(Verb::Get, "nodes", "ns", None, ""));
        // A list without a namespace would list a namespaced resource everywhere: "" never allows it.
        let g = grant(&["pods", "nodes"], &["*"], &[""]);
        assert!(!g.allows(Verb::List, "pods", "", None, ""));
        assert!(!g.allows(Verb::List, "nodes", "", None, ""));
        assert!(g.allows(Verb::Delete, "nodes", "", None, ""));
        let g = grant(&["pods", "nodes"], &["list"], &["*"]);
        assert!(g.allows(Verb::List, "pods", "", None, ""));
        assert!(g.allows(Verb::List, "nodes", "", None, ""));
    }

    #[test]
    fn velero_namespace_confines_calls_to_velero_s_namespace() {
        let g = grant(&["secrets"], &["get"], &["@velero"]);
        assert!(g.allows(Verb::Get, "secrets", "openshift-adp", None, "openshift-adp"));
        assert!(g.allows(
            Verb::Get,
            "secrets",
            "openshift-adp",
            Some("clusters"),
            "openshift-adp"
        ));
        assert!(!g.allows(
            Verb::Get,
            "secrets",
            "clusters",
            Some("clusters"),
            "openshift-adp"
        ));
        assert!(!g.allows(Verb::Get, "secrets", "", None, "openshift-adp"));
        assert!(!g.allows(Verb::Get, "secrets", "", None, ""));
        assert!(!g.allows(Verb::Get, "secrets", "velero", None, ""));
    }

    #[test]
    fn the_rule_that_allows_a_denied_call_is_what_the_grant_then_allows() {
        for (verb, resource, namespace, item, velero, rule) in [
            (
                Verb::Get,
                "persistentvolumes",
                "",
                Some("apps"),
                "velero",
                r#"[[grant.kube]] resources = ["persistentvolumes"] verbs = ["get"] namespaces = [""]"#,
            ),
            (
                Verb::List,
                "nodes",
                "",
                None,
                "velero",
                r#"[[grant.kube]] resources = ["nodes"] verbs = ["list"] namespaces = ["*"]"#,
            ),
            (
                Verb::Create,
                "Secrets",
                "apps",
                Some("apps"),
                "velero",
                r#"[[grant.kube]] resources = ["secrets"] verbs = ["create"] namespaces = ["@item"]"#,
            ),
            (
                Verb::Get,
                "configmaps",
                "velero",
                Some("apps"),
                "velero",
                r#"[[grant.kube]] resources = ["configmaps"] verbs = ["get"] namespaces = ["@velero"]"#,
            ),
            (
                Verb::Delete,
                "secrets",
                "hypershift",
                Some("apps"),
                "velero",
                r#"[[grant.kube]] resources = ["secrets"] verbs = ["delete"] namespaces = ["hypershift"]"#,
            ),
        ] {
            let text = rule_allowing(verb, resource, namespace, item, velero);
            assert_eq!(text, rule);
            // The suggestion, as a manifest, grants the call it was made for.
            let toml = text.replacen("]] ", "]]\n", 1).replace("] ", "]\n");
            let manifest = Manifest::parse(&toml).unwrap();
            let grant = KubeGrant::new(&manifest.grant.kube);
            assert!(
                grant.allows(verb, resource, namespace, item, velero),
                "{toml}"
            );
        }
    }

    #[test]
    fn no_rules_allow_nothing() {
        assert!(!KubeGrant::default().allows(Verb::Get, "pods", "ns", None, "ns"));
    }
}
