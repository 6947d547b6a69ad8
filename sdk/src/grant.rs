//! A module's Kubernetes grant as the host applies it, for [`FakeCluster`](crate::FakeCluster): a call
//! is allowed when one `[[grant.kube]]` rule of the manifest covers its verb, its resource and its
//! namespace; a refused call gets the error the host gives the guest, word for word.

/// The Kubernetes calls a module may make: the `[[grant.kube]]` rules of its manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeGrant {
    module: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    resources: Vec<String>,
    /// `None`: every verb (`"*"`).
    verbs: Option<Vec<String>>,
    namespaces: Vec<String>,
}

/// The verbs a grant may name (checked when a manifest is read, in native builds only).
#[cfg(not(target_arch = "wasm32"))]
const VERBS: [&str; 6] = ["get", "list", "create", "update", "patch", "delete"];

impl KubeGrant {
    /// The grant of the manifest `text` of module `module` (the name its denials give). Fails, saying
    /// where, when the manifest is not TOML or a `[[grant.kube]]` rule is malformed; the host checks
    /// the rest of the manifest when it loads the module (`velero-wasm actions --modules DIR`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_manifest(module: &str, text: &str) -> Result<KubeGrant, String> {
        let manifest: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| format!("manifest of module {module}: {e}"))?;
        let rules = match manifest.get("grant").and_then(|g| g.get("kube")) {
            None => &Vec::new(),
            Some(toml::Value::Array(rules)) => rules,
            Some(_) => {
                return Err(format!(
                    "manifest of module {module}: grant.kube must be [[grant.kube]] tables"
                ))
            }
        };
        let rules = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let list = |key: &str| -> Result<Vec<String>, String> {
                    let field = format!("manifest of module {module}: grant.kube[{i}].{key}");
                    let values = rule
                        .get(key)
                        .and_then(toml::Value::as_array)
                        .ok_or_else(|| format!("{field}: must be a list of strings"))?;
                    values
                        .iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .ok_or_else(|| format!("{field}: must be a list of strings"))
                        })
                        .collect()
                };
                let resources = list("resources")?;
                let verbs = list("verbs")?;
                if let Some(v) = verbs.iter().find(|v| *v != "*" && !VERBS.contains(&v.as_str())) {
                    return Err(format!(
                        "manifest of module {module}: grant.kube[{i}].verbs: {v:?} is not one of get, list, create, update, patch, delete or \"*\""
                    ));
                }
                Ok(Rule {
                    resources: resources
                        .iter()
                        .map(|r| r.to_ascii_lowercase())
                        .collect(),
                    verbs: (!verbs.iter().any(|v| v == "*")).then_some(verbs),
                    namespaces: list("namespaces")?,
                })
            })
            .collect::<Result<Vec<Rule>, String>>()?;
        Ok(KubeGrant {
            module: module.to_string(),
            rules,
        })
    }

    /// Whether `verb` on `group_resource` (`resource.group`) in `namespace` ("" for cluster scope, or
    /// a list across all namespaces) is allowed, for an item in `item_namespace` (what `@item` means;
    /// `None`: no item) with Velero in `velero_namespace` (what `@velero` means; "": unknown).
    pub fn allows(
        &self,
        verb: &str,
        group_resource: &str,
        namespace: &str,
        item_namespace: Option<&str>,
        velero_namespace: &str,
    ) -> bool {
        let group_resource = group_resource.to_ascii_lowercase();
        self.rules.iter().any(|rule| {
            rule.verbs
                .as_ref()
                .is_none_or(|verbs| verbs.iter().any(|v| v == verb))
                && rule
                    .resources
                    .iter()
                    .any(|r| r == "*" || *r == group_resource)
                && rule.namespaces.iter().any(|n| match n.as_str() {
                    "*" => true,
                    "@item" => item_namespace.is_some_and(|i| !i.is_empty() && i == namespace),
                    "@velero" => !velero_namespace.is_empty() && velero_namespace == namespace,
                    "" => namespace.is_empty() && verb != "list",
                    pattern => !namespace.is_empty() && glob(pattern, namespace),
                })
        })
    }

    /// The message of the `denied` error the host gives for a call this grant refuses: who may not do
    /// what, and the manifest rule that would allow it.
    pub fn denial(
        &self,
        verb: &str,
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
        let rule_namespace = if namespace.is_empty() {
            if verb == "list" {
                "*"
            } else {
                ""
            }
        } else if item_namespace == Some(namespace) {
            "@item"
        } else if velero_namespace == namespace {
            "@velero"
        } else {
            namespace
        };
        format!(
            "permission denied: module {} is not granted {verb} on {group_resource} {scope}; the manifest rule that allows it: [[grant.kube]] resources = [{:?}] verbs = [{verb:?}] namespaces = [{rule_namespace:?}]",
            self.module,
            group_resource.to_ascii_lowercase()
        )
    }
}

/// Wildcard matching with `*` (any run of characters) and `?` (one character), as grants use it.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
        sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
        [[grant.kube]]
        resources = ["persistentvolumeclaims", "DataVolumes.cdi.kubevirt.io"]
        verbs = ["get", "list"]
        namespaces = ["@item"]
        [[grant.kube]]
        resources = ["customresourcedefinitions.apiextensions.k8s.io"]
        verbs = ["get"]
        namespaces = [""]
        [[grant.kube]]
        resources = ["secrets"]
        verbs = ["*"]
        namespaces = ["@velero", "clusters-*"]
        [settings]
        mode = "extended"
    "#;

    #[test]
    fn rules_match_as_the_host_matches_them() {
        let g = KubeGrant::from_manifest("m", MANIFEST).unwrap();
        let item = Some("apps");
        assert!(g.allows("get", "persistentvolumeclaims", "apps", item, "velero"));
        assert!(g.allows(
            "list",
            "datavolumes.cdi.kubevirt.io",
            "apps",
            item,
            "velero"
        ));
        assert!(!g.allows("list", "persistentvolumeclaims", "other", item, "velero"));
        assert!(!g.allows("list", "persistentvolumeclaims", "", item, "velero"));
        assert!(!g.allows("delete", "persistentvolumeclaims", "apps", item, "velero"));
        assert!(!g.allows("get", "persistentvolumeclaims", "apps", None, "velero"));
        assert!(g.allows(
            "get",
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            item,
            ""
        ));
        assert!(!g.allows(
            "list",
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            item,
            ""
        ));
        assert!(g.allows("delete", "secrets", "velero", item, "velero"));
        assert!(g.allows("create", "secrets", "clusters-prod", item, "velero"));
        assert!(!g.allows("create", "secrets", "velero", item, ""));
        assert!(!KubeGrant::default().allows("get", "pods", "apps", item, "velero"));
    }

    #[test]
    fn a_denial_names_the_rule_that_would_allow_the_call() {
        let g = KubeGrant::from_manifest("kubevirt", MANIFEST).unwrap();
        assert_eq!(
            g.denial("get", "persistentvolumes", "", Some("apps"), "velero"),
            r#"permission denied: module kubevirt is not granted get on persistentvolumes cluster-wide; the manifest rule that allows it: [[grant.kube]] resources = ["persistentvolumes"] verbs = ["get"] namespaces = [""]"#
        );
        assert!(g
            .denial("list", "pods", "apps", Some("apps"), "velero")
            .ends_with(r#"verbs = ["list"] namespaces = ["@item"]"#));
        assert!(g
            .denial("list", "nodes", "", None, "velero")
            .ends_with(r#"verbs = ["list"] namespaces = ["*"]"#));
    }

    #[test]
    fn malformed_rules_are_errors_that_say_where() {
        let e = KubeGrant::from_manifest(
            "m",
            "[[grant.kube]]\nresources = [\"pods\"]\nverbs = [\"watch\"]\nnamespaces = [\"*\"]",
        )
        .unwrap_err();
        assert!(
            e.contains("grant.kube[0].verbs") && e.contains("watch"),
            "{e}"
        );
        let e = KubeGrant::from_manifest("m", "[[grant.kube]]\nresources = \"pods\"").unwrap_err();
        assert!(e.contains("grant.kube[0].resources"), "{e}");
        assert!(KubeGrant::from_manifest("m", "[grant").is_err());
        assert_eq!(
            KubeGrant::from_manifest("m", "").unwrap(),
            KubeGrant {
                module: "m".into(),
                rules: vec![]
            }
        );
    }

    #[test]
    fn wildcards() {
        assert!(glob("clusters-*", "clusters-prod"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(!glob("abc", "abcd"));
    }
}
