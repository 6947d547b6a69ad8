//! A module's Kubernetes grant as the host applies it, for [`FakeCluster`](crate::FakeCluster): a call
//! is allowed when one `[[grant.kube]]` rule of the manifest covers its verb, its resource and its
//! namespace; a refused call gets the error the host gives the guest, word for word. Rules are read,
//! matched and refused by `velero-wasm-grant`, the crate the host uses for the same.

use velero_wasm_grant::Verb;

/// The Kubernetes calls a module may make: the `[[grant.kube]]` rules of its manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeGrant {
    module: String,
    grant: velero_wasm_grant::KubeGrant,
}

impl KubeGrant {
    /// The grant of the manifest `text` of module `module` (the name its denials give). Fails, saying
    /// where, when the manifest is not TOML or a `[[grant.kube]]` rule is malformed, as the host would;
    /// the host checks the rest of the manifest when it loads the module
    /// (`velero-wasm actions --modules DIR`).
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
                let text = velero_wasm_grant::KubeRuleText {
                    resources: list("resources")?,
                    verbs: list("verbs")?,
                    namespaces: list("namespaces")?,
                };
                velero_wasm_grant::KubeRule::read(i, text)
                    .map_err(|e| format!("manifest of module {module}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(KubeGrant {
            module: module.to_string(),
            grant: velero_wasm_grant::KubeGrant::new(&rules),
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
        Verb::from_name(verb).is_some_and(|verb| {
            self.grant.allows(
                verb,
                group_resource,
                namespace,
                item_namespace,
                velero_namespace,
            )
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
        match Verb::from_name(verb) {
            Some(verb) => velero_wasm_grant::denial(
                &self.module,
                verb,
                group_resource,
                namespace,
                item_namespace,
                velero_namespace,
            ),
            None => format!(
                "permission denied: module {} has no verb {verb:?}",
                self.module
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
        sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
        [[grant.kube]]
        resources = ["persistentvolumeclaims", "datavolumes.cdi.kubevirt.io"]
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
                grant: Default::default()
            }
        );
    }
}
