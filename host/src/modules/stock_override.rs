//! Stock overrides: a manifest alone (`<name>.toml`, no `<name>.wasm`) named after a stock module
//! changes that module's `[settings]` and `[limits]` and may narrow, never widen, its grant; the
//! component stays the binary's own.
//!
//! - `[settings]`: each key given replaces the stock value of that key; the others keep theirs.
//! - `[limits]`: each limit given replaces the stock one (validated like any manifest's).
//! - `[grant]`: each of `kube`, `http`, `env`, `env-files` that is given replaces the stock list, and
//!   must be *covered* by it (see [`widening`]); one that is not given keeps the stock list.
//! - `sha256`: optional; when given it must be the stock component's, which ties the override to one
//!   build of the binary.
//!
//! An override that widens the grant, does not parse, or names no stock module is refused, and the
//! stock module serves unchanged.

use std::sync::Arc;

use velero_wasm_grant::HostRule;

use super::manifest::{Grant, KubeRule, Manifest, ManifestError, NamespaceRule};
use super::source::{ModuleSource, Origin};
use crate::action::Verb;

/// The stock module `stock` with the override manifest `text` (from `from`) applied, or why it is
/// refused.
pub fn apply(stock: &ModuleSource, text: &str, from: Origin) -> Result<ModuleSource, Refused> {
    let manifest = Manifest::parse(text)?;
    let table: toml::Table = toml::from_str(text)?;
    if let Some(sha) = &manifest.sha256 {
        if *sha != stock.sha256 {
            return Err(Refused::OtherBuild {
                sha256: sha.clone(),
                stock: stock.sha256.clone(),
            });
        }
    }
    let section = |name: &str| table.get(name).and_then(toml::Value::as_table);
    let given =
        |section_name: &str, key: &str| section(section_name).is_some_and(|t| t.contains_key(key));

    let mut merged = stock.manifest.clone();
    for (key, value) in &manifest.settings {
        merged.settings.insert(key.clone(), value.clone());
    }
    // Checked against what the stock module declares, so that a misspelt key is refused here and
    // not silently ignored.
    merged.settings_schema.check(&merged.settings)?;
    let (ours, theirs) = (&mut merged.limits, &manifest.limits);
    if given("limits", "timeout") {
        ours.timeout = theirs.timeout;
    }
    if given("limits", "memory") {
        ours.memory = theirs.memory;
    }
    if given("limits", "output") {
        ours.output = theirs.output;
    }
    if given("limits", "http-timeout") {
        ours.http_timeout = theirs.http_timeout;
    }
    if given("limits", "http-response") {
        ours.http_response = theirs.http_response;
    }
    if given("limits", "capability-calls") {
        ours.capability_calls = theirs.capability_calls;
    }
    if let Some(why) = widening(&stock.manifest.grant, &manifest.grant) {
        return Err(Refused::Widens {
            module: stock.name.clone(),
            why,
        });
    }
    let grant = &mut merged.grant;
    if given("grant", "kube") {
        grant.kube = manifest.grant.kube.clone();
    }
    if given("grant", "http") {
        grant.http = manifest.grant.http.clone();
    }
    if given("grant", "env") {
        grant.env = manifest.grant.env.clone();
    }
    if given("grant", "env-files") {
        grant.env_files = manifest.grant.env_files.clone();
    }
    if !manifest.description.is_empty() {
        merged.description = manifest.description.clone();
    }
    merged.version = manifest.version.clone();
    // What serves when this override cannot be used is the override's to say (the stock manifest
    // states none).
    merged.on_failure = manifest.on_failure;
    Ok(ModuleSource {
        name: stock.name.clone(),
        wasm: stock.wasm.clone(),
        sha256: stock.sha256.clone(),
        manifest: merged,
        manifest_text: Arc::from(text),
        // The override's own signature was checked when its file was read.
        signature: None,
        origin: Origin::Override(Box::new(from)),
    })
}

/// Why an override is refused (the stock module then serves unchanged).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The text is not TOML.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// It pins another build's component.
    #[error("sha256 {sha256} is not the stock component's ({stock}): this override was written for another build")]
    OtherBuild {
        /// The sha256 it pins.
        sha256: String,
        /// The stock component's.
        stock: String,
    },
    /// A setting the stock module does not declare, or of the wrong type.
    #[error(transparent)]
    Setting(#[from] super::settings_schema::SettingError),
    /// It allows something the stock grant does not.
    #[error(
        "it widens the grant of the stock module {module}: {why}; an override may only narrow it"
    )]
    Widens {
        /// The stock module.
        module: String,
        /// The first entry not covered (see [`widening`]).
        why: String,
    },
}

/// The first entry of `wanted` that `stock` does not cover, said for people; `None` when every entry
/// is covered (the override narrows or keeps the grant).
///
/// Covered means: every Kubernetes call a rule of `wanted` allows is allowed by one rule of `stock`,
/// checked combination by combination (each resource × verb × namespace of the rule): the resource
/// is named by that stock rule (or it says `*`; `*` itself is covered only by `*`), the verb likewise
/// (`*` is the six verbs), and the namespace is `*` in the stock rule, or the same entry (`@item`,
/// `@velero`, `""`, a glob), or a name the stock rule's glob matches. An HTTP entry is covered by the
/// same entry, a host by a `*.suffix` it matches, a `*.suffix` by a shorter one it ends with, and
/// `https://host:443` is the host. An `env` name is covered by the same name or a stock prefix `P*`
/// it starts with (a prefix `Q*` by a `P*` that `Q` starts with); `env-files` names only by
/// themselves.
pub fn widening(stock: &Grant, wanted: &Grant) -> Option<String> {
    for (i, rule) in wanted.kube.iter().enumerate() {
        let verbs = rule.verbs.each();
        for resource in &rule.resources {
            for &verb in &verbs {
                for namespace in &rule.namespaces {
                    if !stock
                        .kube
                        .iter()
                        .any(|s| kube_covers(s, resource, verb, namespace))
                    {
                        return Some(format!(
                            "grant.kube[{i}] allows {verb} on {resource} in {}, which no stock rule allows",
                            match namespace {
                                NamespaceRule::Cluster => "cluster scope (\"\")",
                                other => other.as_str(),
                            }
                        ));
                    }
                }
            }
        }
    }
    for (i, entry) in wanted.http.iter().enumerate() {
        let Ok(want) = HostRule::parse(entry) else {
            return Some(format!("grant.http[{i}] {entry:?} is not a valid entry"));
        };
        let covered = stock
            .http
            .iter()
            .filter_map(|s| HostRule::parse(s).ok())
            .any(|s| http_covers(&s, &want));
        if !covered {
            return Some(format!(
                "grant.http[{i}] {entry:?} is not covered by the stock grant ({})",
                list(&stock.http)
            ));
        }
    }
    for (i, entry) in wanted.env.iter().enumerate() {
        if !stock.env.iter().any(|s| env_covers(s, entry)) {
            return Some(format!(
                "grant.env[{i}] {entry:?} is not covered by the stock grant ({})",
                list(&stock.env)
            ));
        }
    }
    for (i, entry) in wanted.env_files.iter().enumerate() {
        if !stock.env_files.contains(entry) {
            return Some(format!(
                "grant.env-files[{i}] {entry:?} is not in the stock grant ({})",
                list(&stock.env_files)
            ));
        }
    }
    None
}

fn list(entries: &[String]) -> String {
    if entries.is_empty() {
        "none".to_string()
    } else {
        entries.join(", ")
    }
}

fn kube_covers(stock: &KubeRule, resource: &str, verb: Verb, namespace: &NamespaceRule) -> bool {
    stock
        .resources
        .iter()
        .any(|s| s == "*" || s.eq_ignore_ascii_case(resource))
        && stock.verbs.allows(verb)
        && stock.namespaces.iter().any(|s| match (s, namespace) {
            (NamespaceRule::Any, _) => true,
            (s, wanted) if s == wanted => true,
            // A name (not a glob) that the stock glob matches.
            (NamespaceRule::Pattern(glob), NamespaceRule::Pattern(name)) => {
                !name.contains(['*', '?']) && velero_wasm_grant::glob::matches(glob, name)
            }
            _ => false,
        })
}

fn http_covers(stock: &HostRule, wanted: &HostRule) -> bool {
    // A bare host is HTTPS on 443: compare as origins.
    let origin = |rule: &HostRule| match rule {
        HostRule::Exact(host) => Some(("https".to_string(), host.clone(), 443)),
        HostRule::Origin { scheme, host, port } => Some((scheme.clone(), host.clone(), *port)),
        HostRule::Suffix(_) => None,
    };
    match (origin(stock), origin(wanted), stock, wanted) {
        (Some(s), Some(w), _, _) => s == w,
        (None, Some((scheme, host, port)), HostRule::Suffix(suffix), _) => {
            scheme == "https"
                && port == 443
                && host.len() > suffix.len()
                && host.ends_with(suffix.as_str())
        }
        (None, None, HostRule::Suffix(s), HostRule::Suffix(w)) => w.ends_with(s.as_str()),
        _ => false,
    }
}

fn env_covers(stock: &str, wanted: &str) -> bool {
    match (stock.strip_suffix('*'), wanted.strip_suffix('*')) {
        (None, None) => stock == wanted,
        (None, Some(_)) => false,
        (Some(prefix), None) => wanted.starts_with(prefix),
        (Some(prefix), Some(wanted_prefix)) => wanted_prefix.starts_with(prefix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> Grant {
        Manifest::parse(text).unwrap().grant
    }

    #[test]
    fn narrowing_is_allowed_and_widening_names_the_rule() {
        let stock = grant(
            r#"
            [[grant.kube]]
            resources = ["pods", "persistentvolumeclaims"]
            verbs = ["get", "list"]
            namespaces = ["@item", "clusters-*"]
            [grant]
            http = ["*.blob.core.windows.net", "sts.amazonaws.com"]
            env = ["AZURE_*"]
            env-files = ["AWS_WEB_IDENTITY_TOKEN_FILE"]
            "#,
        );
        let narrower = grant(
            r#"
            [[grant.kube]]
            resources = ["pods"]
            verbs = ["get"]
            namespaces = ["@item", "clusters-prod"]
            [grant]
            http = ["acct.blob.core.windows.net", "https://sts.amazonaws.com:443"]
            env = ["AZURE_TENANT_ID", "AZURE_CLIENT_*"]
            env-files = []
            "#,
        );
        assert_eq!(widening(&stock, &narrower), None);
        for (text, says) in [
            (
                "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[\"delete\"]\nnamespaces=[\"@item\"]",
                "grant.kube[0] allows delete on pods in @item",
            ),
            (
                "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[\"*\"]\nnamespaces=[\"@item\"]",
                "grant.kube[0] allows create on pods",
            ),
            (
                "[[grant.kube]]\nresources=[\"*\"]\nverbs=[\"get\"]\nnamespaces=[\"@item\"]",
                "allows get on * in @item",
            ),
            (
                "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[\"get\"]\nnamespaces=[\"clusters-*x\"]",
                "in clusters-*x",
            ),
            (
                "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[\"get\"]\nnamespaces=[\"@velero\"]",
                "in @velero",
            ),
            ("[grant]\nhttp = [\"*.core.windows.net\"]", "grant.http[0]"),
            ("[grant]\nhttp = [\"http://sts.amazonaws.com:443\"]", "grant.http[0]"),
            ("[grant]\nenv = [\"AZ*\"]", "grant.env[0]"),
            ("[grant]\nenv-files = [\"AZURE_FEDERATED_TOKEN_FILE\"]", "grant.env-files[0]"),
        ] {
            let why = widening(&stock, &grant(text)).unwrap_or_default();
            assert!(why.contains(says), "{text}: {why}");
        }
    }
}
