//! The Kubernetes part of a grant: `[[grant.kube]]` rules as a manifest writes them, checked when
//! they are read, and the one evaluation of a call against them, with the one denial text.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::resources;
use crate::{glob, invalid, Invalid, Verb};

/// One `[[grant.kube]]` as TOML gives it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeRuleText {
    /// `resources`, as written.
    pub resources: Vec<String>,
    /// `verbs`, as written.
    pub verbs: Vec<String>,
    /// `namespaces`, as written.
    pub namespaces: Vec<String>,
}

/// One Kubernetes access rule: any of these verbs on any of these resources in any of these namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeRule {
    /// `resource.group` (`pods`, `datavolumes.cdi.kubevirt.io`) or `*`.
    pub resources: Vec<String>,
    /// The verbs, or `*`.
    pub verbs: Verbs,
    /// Where its calls may go. A list that names no namespace also lists a namespaced resource in
    /// every namespace, so cluster scope ("") does not go with `list` (write "*" for that).
    pub namespaces: Vec<NamespaceRule>,
}

/// The verbs of a kube rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verbs {
    /// `*`: the six verbs of the `kube` capability.
    Any,
    /// These verbs, as the rule lists them.
    Only(Vec<Verb>),
}

impl Verbs {
    /// Reads a rule's `verbs` ("*" among them is every verb); an unknown verb is an error that says
    /// what to write.
    pub fn parse(entries: &[String]) -> Result<Verbs, String> {
        if entries.is_empty() {
            return Err("must name at least one verb".into());
        }
        let mut verbs = Vec::with_capacity(entries.len());
        for entry in entries {
            match entry.as_str() {
                "*" => return Ok(Verbs::Any),
                text => verbs.push(Verb::from_name(text).ok_or_else(|| unknown_verb(text))?),
            }
        }
        Ok(Verbs::Only(verbs))
    }

    /// Whether `verb` is one of them.
    pub fn allows(&self, verb: Verb) -> bool {
        match self {
            Verbs::Any => true,
            Verbs::Only(verbs) => verbs.contains(&verb),
        }
    }

    /// Each verb they stand for.
    pub fn each(&self) -> Vec<Verb> {
        match self {
            Verbs::Any => Verb::ALL.to_vec(),
            Verbs::Only(verbs) => verbs.clone(),
        }
    }
}

impl Serialize for Verbs {
    /// As a manifest writes them: `["*"]`, or the verbs.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Verbs::Any => ["*"].serialize(s),
            Verbs::Only(verbs) => verbs.serialize(s),
        }
    }
}

impl fmt::Display for Verbs {
    /// `*`, or the verbs separated by commas.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verbs::Any => f.write_str("*"),
            Verbs::Only(verbs) => {
                let names: Vec<&str> = verbs.iter().map(|v| v.as_str()).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

/// One entry of a kube rule's `namespaces`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceRule {
    /// `*`: every namespace, and cluster scope.
    Any,
    /// `@item`: the namespace of the item being processed.
    Item,
    /// `@velero`: the namespace Velero runs in.
    Velero,
    /// "": cluster scope, calls that name no namespace (on cluster-scoped objects).
    Cluster,
    /// A namespace name or glob.
    Pattern(String),
}

impl NamespaceRule {
    /// Reads one entry as written (a manifest refuses other `@` tokens before this).
    pub fn read(entry: &str) -> NamespaceRule {
        match entry {
            "*" => NamespaceRule::Any,
            "@item" => NamespaceRule::Item,
            "@velero" => NamespaceRule::Velero,
            "" => NamespaceRule::Cluster,
            name => NamespaceRule::Pattern(name.to_string()),
        }
    }

    /// The entry as a manifest writes it.
    pub fn as_str(&self) -> &str {
        match self {
            NamespaceRule::Any => "*",
            NamespaceRule::Item => "@item",
            NamespaceRule::Velero => "@velero",
            NamespaceRule::Cluster => "",
            NamespaceRule::Pattern(name) => name,
        }
    }
}

impl Serialize for NamespaceRule {
    /// As a manifest writes it.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for KubeRule {
    /// `get,list pods,persistentvolumeclaims in @item`; cluster scope ("") is `(cluster)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.verbs, self.resources.join(","))?;
        let cluster = |n: &NamespaceRule| *n == NamespaceRule::Cluster;
        if self.namespaces.iter().all(cluster) {
            return f.write_str("(cluster)");
        }
        let namespaces: Vec<&str> = self
            .namespaces
            .iter()
            .map(|n| if cluster(n) { "(cluster)" } else { n.as_str() })
            .collect();
        write!(f, "in {}", namespaces.join(","))
    }
}

impl KubeRule {
    /// One `[[grant.kube]]` rule, the `i`th, checked and typed; the error names the field
    /// (`grant.kube[i].verbs`) and says what to write.
    pub fn read(i: usize, raw: KubeRuleText) -> Result<KubeRule, Invalid> {
        let field = |name: &str| format!("grant.kube[{i}].{name}");
        if raw.resources.is_empty() {
            return Err(invalid(
                field("resources"),
                "must name at least one resource",
            ));
        }
        for r in &raw.resources {
            if r.is_empty() || r.contains(char::is_whitespace) || r.contains('/') {
                return Err(invalid(
                    field("resources"),
                    format!("{r:?} is not `resource.group` or \"*\""),
                ));
            }
            if let Some((fix, why)) = resources::correction(r) {
                return Err(invalid(
                    field("resources"),
                    format!("{r:?} {why}: write {fix:?}"),
                ));
            }
        }
        let verbs = Verbs::parse(&raw.verbs).map_err(|problem| invalid(field("verbs"), problem))?;
        if raw.namespaces.is_empty() {
            return Err(invalid(
                field("namespaces"),
                "must name at least one namespace, \"*\", \"@item\" or \"@velero\"",
            ));
        }
        if verbs.allows(Verb::List) && raw.namespaces.iter().any(String::is_empty) {
            let verb = if raw.verbs.iter().any(|v| v == "list") {
                "list"
            } else {
                "list (in \"*\")"
            };
            return Err(invalid(
                field("namespaces"),
                format!(
                    "\"\" (cluster scope) cannot go with the verb {verb}: a list that names no namespace also lists a namespaced resource in every namespace. To list across all namespaces (or a cluster-scoped resource), write \"*\"; to list in some namespaces, name them in a rule of their own and keep \"\" for the other verbs"
                ),
            ));
        }
        for n in &raw.namespaces {
            if n.starts_with('@') && !matches!(n.as_str(), "@item" | "@velero") {
                return Err(invalid(
                    field("namespaces"),
                    format!("{n:?} is not a namespace: the tokens are \"@item\" and \"@velero\""),
                ));
            }
        }
        let rule = KubeRule {
            resources: raw.resources,
            verbs,
            namespaces: raw
                .namespaces
                .iter()
                .map(|n| NamespaceRule::read(n))
                .collect(),
        };
        if let Some(problem) = scope_mismatch(&rule) {
            return Err(invalid(field("namespaces"), problem));
        }
        Ok(rule)
    }
}

/// The error for a verb grants do not have, with what to write instead.
fn unknown_verb(verb: &str) -> String {
    const VERBS: &str = "get, list, create, update, patch, delete or \"*\"";
    let lower = verb.to_ascii_lowercase();
    let fix = match lower.trim() {
        v @ ("get" | "list" | "create" | "update" | "patch" | "delete") if v != verb => {
            format!("verbs are lower case without spaces: write {v:?}")
        }
        v if v.contains([',', ' ']) => format!(
            "one verb a string: write [{}]",
            v.split([',', ' '])
                .filter(|w| !w.is_empty())
                .map(|w| format!("{w:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "watch" => {
            "modules cannot watch (a call reads what is there now): write \"list\" or \"get\""
                .into()
        }
        "deletecollection" => "modules delete one object at a time: write \"delete\"".into(),
        "apply" => "modules change objects with a merge patch: write \"patch\"".into(),
        "read" => "write \"get\" and \"list\"".into(),
        "write" => {
            "write \"create\", \"update\", \"patch\" or \"delete\", those the module uses".into()
        }
        "all" => "write \"*\"".into(),
        _ => return format!("{verb:?} is not a verb modules have: the verbs are {VERBS}"),
    };
    format!("{verb:?} is not a verb modules have ({VERBS}); {fix}")
}

/// A rule whose namespaces can never match the calls on one of its resources, as far as the host knows
/// the resource's scope: a cluster-scoped resource is called with no namespace, so only "" and "*"
/// match it; a namespaced one always names one (or, to list everywhere, none: matched by "*" only).
fn scope_mismatch(rule: &KubeRule) -> Option<String> {
    use NamespaceRule::{Any, Cluster};
    let matches_cluster_scope = rule.namespaces.iter().any(|n| matches!(n, Cluster | Any));
    let matches_a_namespace = rule.namespaces.iter().any(|n| *n != Cluster);
    for r in &rule.resources {
        match resources::is_namespaced(r) {
            Some(false) if !matches_cluster_scope => {
                let written = rule
                    .namespaces
                    .iter()
                    .map(|n| format!("{:?}", n.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Some(format!(
                    "{r} is cluster-scoped: its calls name no namespace, so {written} never matches them. Write \"\" (cluster scope) for get, create, update, patch and delete, or \"*\" to list it; if the rule's other resources need these namespaces, give {r} a rule of its own"
                ));
            }
            Some(true) if !matches_a_namespace => {
                return Some(format!(
                    "{r} is namespaced: its calls name a namespace, so \"\" (cluster scope) never matches them. Name the namespaces, or write \"@item\", \"@velero\" or \"*\"; if the rule's other resources are cluster-scoped, give {r} a rule of its own"
                ));
            }
            _ => {}
        }
    }
    None
}

/// The Kubernetes calls a module may make: its manifest's rules, typed when the manifest was read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

/// The message of the `denied` error a module gets for a call its grant refuses: who may not do what,
/// and the manifest rule that would allow it ([`rule_allowing`]). The host and the SDK's fake cluster
/// both give this text, word for word.
pub fn denial(
    module: &str,
    verb: Verb,
    group_resource: &str,
    namespace: &str,
    item_namespace: Option<&str>,
    velero_namespace: &str,
) -> String {
    let scope = if namespace.is_empty() {
        "cluster-wide".to_string()
    } else {
        format!("in namespace {namespace}")
    };
    format!(
        "permission denied: module {module} is not granted {verb} on {group_resource} {scope}; the manifest rule that allows it: {}",
        rule_allowing(
            verb,
            group_resource,
            namespace,
            item_namespace,
            velero_namespace
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grant of a manifest's text, as the host reads it.
    #[derive(Debug)]
    struct Manifest {
        grant: crate::Grant,
    }

    impl Manifest {
        fn parse(text: &str) -> Result<Manifest, String> {
            #[derive(serde::Deserialize)]
            struct Text {
                #[serde(default)]
                grant: crate::GrantText,
            }
            let text: Text = toml::from_str(text).map_err(|e| e.to_string())?;
            let grant = crate::Grant::read(text.grant).map_err(|e| e.to_string())?;
            Ok(Manifest { grant })
        }
    }

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
    fn a_denial_names_the_module_the_call_and_the_rule() {
        assert_eq!(
            denial(
                "kubevirt",
                Verb::Get,
                "persistentvolumes",
                "",
                Some("apps"),
                "velero"
            ),
            r#"permission denied: module kubevirt is not granted get on persistentvolumes cluster-wide; the manifest rule that allows it: [[grant.kube]] resources = ["persistentvolumes"] verbs = ["get"] namespaces = [""]"#
        );
        assert!(
            denial("m", Verb::List, "pods", "apps", Some("apps"), "velero")
                .contains("not granted list on pods in namespace apps;")
        );
    }

    #[test]
    fn no_rules_allow_nothing() {
        assert!(!KubeGrant::default().allows(Verb::Get, "pods", "ns", None, "ns"));
    }
}
