//! Whether a module's grant covers what its actions say they need (`describe`'s `needs`), checked when
//! the module loads: an uncovered need is a warning that says what to add to the manifest, so that
//! `build`, `actions` and `test` catch a grant that would deny calls on some item before Velero does.
//!
//! A kube need that says where its calls go (`pods in @item`) is checked namespace by namespace: `@item`
//! is covered by a rule with `@item` or `*`, or by patterns that match every namespace the action
//! applies to (its `included-namespaces`); `@velero` by `@velero` or `*`; cluster scope by "" or `*`;
//! a name by `*`, the same name or a glob that matches it; `*` only by `*`.

use crate::action::{Need, Selector, Verb};
use crate::capabilities::HttpGrant;
use crate::modules::{Grant, KubeRule, NamespaceRule};

/// Why `grant` does not cover `need` of an action that applies to `applies_to`, with what to write;
/// `None` when it does.
pub(crate) fn uncovered(grant: &Grant, need: &Need, applies_to: &Selector) -> Option<String> {
    match need {
        Need::Kube {
            resource,
            verbs,
            namespaces,
        } => {
            for verb in verbs {
                let rules: Vec<&KubeRule> = grant
                    .kube
                    .iter()
                    .filter(|rule| allows(rule, *verb, resource))
                    .collect();
                if rules.is_empty() {
                    return Some(format!(
                        "no [[grant.kube]] rule allows {verb} on {resource}"
                    ));
                }
                for namespace in namespaces {
                    if !rules.iter().any(|r| covers(r, namespace, applies_to)) {
                        return Some(namespace_hint(
                            verb, resource, namespace, &rules, applies_to,
                        ));
                    }
                }
            }
            None
        }
        Need::Http(host) => {
            let http = HttpGrant::new(&grant.http, 0, std::time::Duration::ZERO);
            if grant.http.iter().any(|h| h == host) || http.allows("https", host, 443) {
                None
            } else {
                Some(format!("grant.http does not name {host}"))
            }
        }
    }
}

fn allows(rule: &KubeRule, verb: Verb, resource: &str) -> bool {
    rule.verbs.allows(verb)
        && rule
            .resources
            .iter()
            .any(|r| r == "*" || r.eq_ignore_ascii_case(resource))
}

/// Whether one rule's namespaces cover calls to `namespace` (as a need writes it).
fn covers(rule: &KubeRule, namespace: &str, applies_to: &Selector) -> bool {
    let has = |wanted: &NamespaceRule| rule.namespaces.iter().any(|n| n == wanted);
    if has(&NamespaceRule::Any) {
        return true;
    }
    let patterns = || {
        rule.namespaces.iter().filter_map(|n| match n {
            NamespaceRule::Pattern(p) => Some(p.as_str()),
            _ => None,
        })
    };
    match namespace {
        "*" => false,
        "@item" => {
            // Patterns cover the item's namespace only when the action applies to namespaces they
            // all match: with no included-namespaces (or "*"), an item can be in any namespace.
            has(&NamespaceRule::Item)
                || (!applies_to.included_namespaces.is_empty()
                    && applies_to.included_namespaces.iter().all(|included| {
                        included != "*"
                            && patterns().any(|p| {
                                p == included || velero_wasm_grant::glob::matches(p, included)
                            })
                    }))
        }
        "@velero" => has(&NamespaceRule::Velero),
        "" => has(&NamespaceRule::Cluster),
        name => patterns().any(|p| p == name || velero_wasm_grant::glob::matches(p, name)),
    }
}

/// What to write when the resource and verb are granted but not where the calls go.
fn namespace_hint(
    verb: &Verb,
    resource: &str,
    namespace: &str,
    rules: &[&KubeRule],
    applies_to: &Selector,
) -> String {
    let granted: Vec<String> = rules
        .iter()
        .flat_map(|r| r.namespaces.iter())
        .map(|n| match n.as_str() {
            "" => "(cluster)".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    let (meaning, write) = match namespace {
        "@item" => {
            let scope = if applies_to.included_namespaces.is_empty() {
                "any namespace (the action applies to every namespace)".to_string()
            } else {
                applies_to.included_namespaces.join(", ")
            };
            (
                format!("the item's namespace, which can be {scope}"),
                "\"@item\"".to_string(),
            )
        }
        "@velero" => (
            "the namespace Velero runs in".to_string(),
            "\"@velero\"".to_string(),
        ),
        "" => ("cluster scope".to_string(), "\"\"".to_string()),
        "*" => ("every namespace".to_string(), "\"*\"".to_string()),
        name => (format!("namespace {name}"), format!("{name:?}")),
    };
    format!(
        "{verb} on {resource} is granted only in {}, and its calls go to {meaning}: add {write} to the namespaces of the rule that grants it",
        granted.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::Manifest;

    fn grant(namespaces: &str) -> Grant {
        Manifest::parse(&format!(
            "[[grant.kube]]\nresources = [\"persistentvolumeclaims\"]\nverbs = [\"get\", \"list\"]\nnamespaces = [{namespaces}]"
        ))
        .unwrap()
        .grant
    }

    fn need(namespaces: &str) -> Need {
        Need::kube(
            &format!("persistentvolumeclaims in {namespaces}"),
            vec![Verb::Get],
        )
    }

    fn in_namespaces(included: &[&str]) -> Selector {
        Selector {
            included_namespaces: included.iter().map(|s| s.to_string()).collect(),
            ..Selector::default()
        }
    }

    #[test]
    fn a_grant_in_one_namespace_does_not_cover_the_items_namespace() {
        let all = Selector::default();
        let why = uncovered(&grant("\"kube-system\""), &need("@item"), &all).unwrap();
        assert_eq!(
            why,
            "get on persistentvolumeclaims is granted only in \"kube-system\", and its calls go to the item's namespace, which can be any namespace (the action applies to every namespace): add \"@item\" to the namespaces of the rule that grants it"
        );
        assert!(uncovered(&grant("\"@item\""), &need("@item"), &all).is_none());
        assert!(uncovered(&grant("\"*\""), &need("@item"), &all).is_none());
        // Patterns that match every namespace the action applies to do cover it.
        let prod = in_namespaces(&["prod-a", "prod-*"]);
        assert!(uncovered(&grant("\"prod-*\""), &need("@item"), &prod).is_none());
        let why = uncovered(
            &grant("\"prod-*\""),
            &need("@item"),
            &in_namespaces(&["prod-a", "dev"]),
        )
        .unwrap();
        assert!(why.contains("can be prod-a, dev"), "{why}");
    }

    #[test]
    fn named_namespaces_velero_and_cluster_scope() {
        let all = Selector::default();
        assert!(uncovered(&grant("\"kube-*\""), &need("kube-system"), &all).is_none());
        assert!(uncovered(&grant("\"default\""), &need("kube-system"), &all).is_some());
        assert!(uncovered(&grant("\"@velero\""), &need("@velero"), &all).is_none());
        let why = uncovered(&grant("\"@item\""), &need("@velero"), &all).unwrap();
        assert!(
            why.ends_with("add \"@velero\" to the namespaces of the rule that grants it"),
            "{why}"
        );
        assert!(uncovered(&grant("\"@item\""), &need("*"), &all).is_some());
        assert!(uncovered(&grant("\"*\""), &need("*"), &all).is_none());
    }

    #[test]
    fn a_need_that_does_not_say_where_is_checked_by_resource_and_verb() {
        let all = Selector::default();
        let bare = Need::kube("persistentvolumeclaims", vec![Verb::List]);
        assert!(uncovered(&grant("\"kube-system\""), &bare, &all).is_none());
        let delete = Need::kube("persistentvolumeclaims", vec![Verb::Delete]);
        assert_eq!(
            uncovered(&grant("\"*\""), &delete, &all).unwrap(),
            "no [[grant.kube]] rule allows delete on persistentvolumeclaims"
        );
    }

    #[test]
    fn the_wit_form_names_the_namespaces() {
        assert_eq!(
            Need::kube("secrets in @velero, (cluster)", vec![Verb::Get]),
            Need::Kube {
                resource: "secrets".into(),
                verbs: vec![Verb::Get],
                namespaces: vec!["@velero".into(), "".into()],
            }
        );
        assert_eq!(
            Need::kube("secrets in @velero,(cluster)", vec![Verb::Get]).to_string(),
            "get secrets in @velero,(cluster)"
        );
    }
}
