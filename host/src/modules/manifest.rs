//! The manifest beside each module (`<name>.toml` next to `<name>.wasm`): the module's sha256, its
//! grant, its limits and its settings. Validated once at load, with errors that name the file and field.
//!
//! ```toml
//! sha256 = "9f2c…"                     # of <name>.wasm; required for modules outside the binary
//! version = "1.4.0"                    # semver; with trusted keys, a host never serves a lower
//!                                      # version of a module than it has served (docs/modules.md)
//! description = "KubeVirt VM backup and restore"
//! read-views = false                   # never answer this module's reads from a backup's read view
//!                                      # (default true; docs/read-views.md)
//!
//! [limits]
//! timeout = "30s"                      # per call (default 30s)
//! memory = "256MiB"                    # linear memory cap (default 256MiB, at most 1GiB)
//! output = "64MiB"                     # largest item a call may return (default 64MiB)
//! http-timeout = "10s"                 # one outbound HTTP exchange (default 10s; never past `timeout`)
//! http-response = "1MiB"               # largest HTTP answer body (default 1MiB)
//! capability-calls = 1000              # kube, http, environment, random and signing calls per call
//!                                      # (default 1000)
//!
//! [[grant.kube]]
//! resources = ["pods", "persistentvolumeclaims"]   # `resource.group`, or "*"
//! verbs = ["get", "list"]                          # get list create update patch delete, or "*"
//! namespaces = ["@item"]                           # names or globs; "*" is every namespace and
//!                                                  # cluster scope; "@item" is the item's namespace;
//!                                                  # "@velero" is the namespace Velero runs in; ""
//!                                                  # is cluster scope (not with `list`)
//!
//! [grant]
//! http = ["sts.amazonaws.com", "*.blob.core.windows.net", "http://127.0.0.1:9000"]
//!                                      # HTTPS hosts, *.suffix wildcards, or an exact
//!                                      # http(s)://host:port (see capabilities::http)
//! env = ["AZURE_TENANT_ID", "AZURE_*"] # environment variables the module may read (names, or
//!                                      # prefixes ending in *)
//! env-files = ["AWS_WEB_IDENTITY_TOKEN_FILE"]
//!                                      # variables whose file (≤ 1 MiB) the module may read
//!
//! [settings]
//! mode = "extended"                    # scalars, arrays and tables (see settings_schema)
//!
//! [settings-schema.mode]               # the settings the module reads, declared once:
//! values = ["upstream", "extended"]    # checked at load (modules::settings_schema)
//! description = "which upstream behaviour to follow"
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::action::Verb;
use crate::capabilities::kube::resources;
use crate::capabilities::EnvGrant;

use super::settings_schema::{self, SettingsSchema, SpecText};

/// The largest memory cap a manifest may ask for; the engine reserves slots of this size.
pub const MAX_MEMORY: u64 = 1 << 30;

/// A module's manifest, as typed values: read once, then never parsed again.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// Lower-case hex sha256 of the module's bytes.
    pub sha256: Option<String>,
    /// The module's version, which rollback protection compares (see `modules::version_floor`).
    pub version: Option<semver::Version>,
    /// One line for people.
    pub description: String,
    /// Per-call limits.
    pub limits: Limits,
    /// What the module may do.
    pub grant: Grant,
    /// Settings the module reads through the `config` capability, as it reads them (text).
    pub settings: BTreeMap<String, String>,
    /// The settings the module declares (`[settings-schema]`); empty: not checked.
    pub settings_schema: SettingsSchema,
    /// `read-views = false`: the module's reads always go to the API server (docs/read-views.md).
    pub no_read_views: bool,
}

/// A manifest as TOML gives it, before its kube rules are read ([`Manifest::parse`] checks and types
/// them, with errors that name the field).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestText {
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    grant: GrantText,
    #[serde(default, deserialize_with = "settings")]
    settings: BTreeMap<String, String>,
    #[serde(default, rename = "settings-schema")]
    settings_schema: BTreeMap<String, SpecText>,
    #[serde(default = "read_views_default", rename = "read-views")]
    read_views: bool,
}

/// Reads may be answered from read views unless a manifest says otherwise.
fn read_views_default() -> bool {
    true
}

/// `[grant]` as TOML gives it.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantText {
    #[serde(default)]
    kube: Vec<KubeRuleText>,
    #[serde(default)]
    http: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default, rename = "env-files")]
    env_files: Vec<String>,
}

/// One `[[grant.kube]]` as TOML gives it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KubeRuleText {
    resources: Vec<String>,
    verbs: Vec<String>,
    namespaces: Vec<String>,
}

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock deadline of one call.
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// Linear-memory cap in bytes.
    #[serde(default = "default_memory", deserialize_with = "byte_size")]
    pub memory: u64,
    /// Largest item (in bytes) a call may return.
    #[serde(default = "default_output", deserialize_with = "byte_size")]
    pub output: u64,
    /// Time allowed for one outbound HTTP exchange.
    #[serde(
        rename = "http-timeout",
        default = "default_http_timeout",
        deserialize_with = "duration"
    )]
    pub http_timeout: Duration,
    /// Largest body of an HTTP answer, in bytes.
    #[serde(
        rename = "http-response",
        default = "default_http_response",
        deserialize_with = "byte_size"
    )]
    pub http_response: u64,
    /// Capability calls that do work for the guest (kube, http, environment, random, signing) one
    /// call may make: one module cannot keep the cluster or the network busy for the others.
    #[serde(rename = "capability-calls", default = "default_capability_calls")]
    pub capability_calls: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: default_timeout(),
            memory: default_memory(),
            output: default_output(),
            http_timeout: default_http_timeout(),
            http_response: default_http_response(),
            capability_calls: default_capability_calls(),
        }
    }
}

/// The default of `[limits] capability-calls`.
pub const DEFAULT_CAPABILITY_CALLS: u32 = 1000;

fn default_capability_calls() -> u32 {
    DEFAULT_CAPABILITY_CALLS
}

fn default_http_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_http_response() -> u64 {
    1 << 20
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_memory() -> u64 {
    256 << 20
}

fn default_output() -> u64 {
    64 << 20
}

/// What a module may do beyond computing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// Kubernetes access rules; a call must match one.
    pub kube: Vec<KubeRule>,
    /// Hosts the module may reach: HTTPS host names, `*.suffix` wildcards, or an exact
    /// `http(s)://host:port` (the only way to allow plain HTTP).
    pub http: Vec<String>,
    /// Environment variables the module may read: names, or prefixes ending in `*`.
    pub env: Vec<String>,
    /// Environment variables whose value names a file the module may read (at most 1 MiB).
    pub env_files: Vec<String>,
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

/// A manifest that does not parse or says something impossible.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not valid TOML, or a field of the wrong type or unknown.
    #[error("{0}")]
    Syntax(String),
    /// A field with a value out of range.
    #[error("{field}: {problem}")]
    Invalid {
        /// Dotted path of the field.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl Manifest {
    /// Parses manifest text into typed values, checking each field once.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let raw: ManifestText = toml::from_str(text)
            .map_err(|e| ManifestError::Syntax(e.to_string().trim_end().to_string()))?;
        if let Some(sha) = &raw.sha256 {
            check_sha256(sha)?;
        }
        let version = raw
            .version
            .as_deref()
            .map(|v| {
                semver::Version::parse(v).map_err(|e| {
                    invalid(
                        "version",
                        format!("{v:?} is not a semantic version (like \"1.4.0\"): {e}"),
                    )
                })
            })
            .transpose()?;
        check_limits(&raw.limits)?;
        let kube = raw
            .grant
            .kube
            .into_iter()
            .enumerate()
            .map(|(i, rule)| kube_rule(i, rule))
            .collect::<Result<_, _>>()?;
        let grant = Grant {
            kube,
            http: raw.grant.http,
            env: raw.grant.env,
            env_files: raw.grant.env_files,
        };
        check_entries(&grant)?;
        let settings_schema = SettingsSchema::from_text(raw.settings_schema)
            .map_err(|e| invalid(format!("settings-schema.{}", e.key), e.problem))?;
        settings_schema
            .check(&raw.settings)
            .map_err(|e| invalid(format!("settings.{}", e.key), e.problem))?;
        Ok(Manifest {
            sha256: raw.sha256,
            version,
            description: raw.description,
            limits: raw.limits,
            grant,
            settings: raw.settings,
            settings_schema,
            no_read_views: !raw.read_views,
        })
    }
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ManifestError {
    ManifestError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

fn check_sha256(sha: &str) -> Result<(), ManifestError> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if sha.len() != 64 || !sha.bytes().all(hex) {
        return Err(invalid("sha256", "must be 64 lower-case hex digits"));
    }
    Ok(())
}

/// `[limits]`: within what the engine can give.
fn check_limits(limits: &Limits) -> Result<(), ManifestError> {
    if limits.timeout.is_zero() {
        return Err(invalid("limits.timeout", "must be more than zero"));
    }
    if limits.memory < 1 << 20 || limits.memory > MAX_MEMORY {
        return Err(invalid("limits.memory", "must be between 1MiB and 1GiB"));
    }
    if limits.output == 0 {
        return Err(invalid("limits.output", "must be more than zero"));
    }
    if limits.http_timeout.is_zero() {
        return Err(invalid("limits.http-timeout", "must be more than zero"));
    }
    if limits.capability_calls == 0 {
        return Err(invalid("limits.capability-calls", "must be more than zero"));
    }
    if limits.http_response == 0 {
        return Err(invalid("limits.http-response", "must be more than zero"));
    }
    Ok(())
}

/// One `[[grant.kube]]` rule, the `i`th, checked and typed.
fn kube_rule(i: usize, raw: KubeRuleText) -> Result<KubeRule, ManifestError> {
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

/// `[grant]`'s HTTP and environment entries.
fn check_entries(grant: &Grant) -> Result<(), ManifestError> {
    for (i, host) in grant.http.iter().enumerate() {
        crate::capabilities::http::HostRule::parse(host)
            .map_err(|problem| invalid(format!("grant.http[{i}]"), problem))?;
    }
    for (i, name) in grant.env.iter().enumerate() {
        EnvGrant::check_entry(name, true)
            .map_err(|problem| invalid(format!("grant.env[{i}]"), problem))?;
    }
    for (i, name) in grant.env_files.iter().enumerate() {
        EnvGrant::check_entry(name, false)
            .map_err(|problem| invalid(format!("grant.env-files[{i}]"), problem))?;
    }
    Ok(())
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

impl fmt::Display for Grant {
    /// One line for people: `get,list pods,persistentvolumeclaims in @item; http sts.amazonaws.com`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.kube.iter().map(KubeRule::to_string).collect();
        if !self.http.is_empty() {
            parts.push(format!("http {}", self.http.join(",")));
        }
        if !self.env.is_empty() {
            parts.push(format!("env {}", self.env.join(",")));
        }
        if !self.env_files.is_empty() {
            parts.push(format!("env-files {}", self.env_files.join(",")));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration like \"30s\" or \"2m\": {e}"
        ))
    })
}

fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(n),
        Size::Text(text) => parse_byte_size(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a size like \"64MiB\""))
        }),
    }
}

/// Parses `512KiB`, `64MiB`, `1GiB`, `100KB`, `1000` (bytes).
pub fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "Ki" => 1 << 10,
        "MiB" | "Mi" => 1 << 20,
        "GiB" | "Gi" => 1 << 30,
        "KB" | "K" => 1_000,
        "MB" | "M" => 1_000_000,
        "GB" | "G" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor)
}

fn settings<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw = BTreeMap::<String, toml::Value>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| (k, settings_schema::toml_to_text(v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_manifest_parses() {
        let m = Manifest::parse(
            r#"
            sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
            [limits]
            timeout = "2m"
            memory = "64MiB"
            capability-calls = 50
            [[grant.kube]]
            resources = ["pods"]
            verbs = ["get", "list"]
            namespaces = ["@item"]
            [grant]
            http = ["*.blob.core.windows.net"]
            env = ["AZURE_*"]
            env-files = ["AZURE_FEDERATED_TOKEN_FILE"]
            [settings]
            mode = "extended"
            retries = 3
            "#,
        )
        .unwrap();
        assert_eq!(m.limits.timeout, Duration::from_secs(120));
        assert_eq!(m.limits.memory, 64 << 20);
        assert_eq!(m.limits.output, 64 << 20);
        assert_eq!(m.limits.capability_calls, 50);
        assert_eq!(m.settings["retries"], "3");
        assert_eq!(
            m.grant.to_string(),
            "get,list pods in @item; http *.blob.core.windows.net; env AZURE_*; env-files AZURE_FEDERATED_TOKEN_FILE"
        );
    }

    #[test]
    fn defaults_apply_to_an_empty_manifest() {
        let m = Manifest::parse("").unwrap();
        assert_eq!(m.limits, Limits::default());
        assert!(m.grant.kube.is_empty());
    }

    #[test]
    fn errors_name_the_field() {
        let e = Manifest::parse("[limits]\nmemory = \"2GiB\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.memory"), "{e}");
        let e = Manifest::parse(
            "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[\"watch\"]\nnamespaces=[\"*\"]",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("grant.kube[0].verbs") && e.contains("watch"),
            "{e}"
        );
        let e = Manifest::parse("[limits]\ntimeout = \"soon\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("timeout") && e.contains("soon"), "{e}");
        let e = Manifest::parse("grnat = 1").unwrap_err().to_string();
        assert!(e.contains("grnat"), "{e}");
        let e = Manifest::parse("sha256 = \"abc\"").unwrap_err().to_string();
        assert!(e.contains("sha256"), "{e}");
        let e = Manifest::parse("[grant]\nhttp = [\"ftp://x:1\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("grant.http[0]") && e.contains("ftp"), "{e}");
        let e = Manifest::parse("[limits]\ncapability-calls = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.capability-calls"), "{e}");
        let e = Manifest::parse("[limits]\nhttp-response = \"0\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.http-response"), "{e}");
        let e = Manifest::parse("[grant]\nenv = [\"PATH\", \"A B\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("grant.env[1]") && e.contains("A B"), "{e}");
        let e = Manifest::parse("[grant]\nenv-files = [\"AWS_*\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("grant.env-files[0]"), "{e}");
        let e = Manifest::parse(
            "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[\"get\"]\nnamespaces=[\"@velro\"]",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("grant.kube[0].namespaces") && e.contains("@velro"),
            "{e}"
        );
        for verbs in ["\"list\"", "\"get\", \"list\"", "\"*\""] {
            let e = Manifest::parse(&format!(
                "[[grant.kube]]\nresources=[\"pods\"]\nverbs=[{verbs}]\nnamespaces=[\"\"]"
            ))
            .unwrap_err()
            .to_string();
            assert!(
                e.starts_with(
                    "grant.kube[0].namespaces: \"\" (cluster scope) cannot go with the verb list"
                ) && e.contains("write \"*\""),
                "{e}"
            );
        }
        let e = Manifest::parse(
            "[settings]\nstorage-class = {}\n[settings-schema.storage-classes]\ntype = \"map\"",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("settings.storage-class: ")
                && e.contains("did you mean \"storage-classes\""),
            "{e}"
        );
        let e = Manifest::parse("[settings-schema.x]\ntype = \"integer\"\ndefault = \"y\"")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("settings-schema.x: "), "{e}");
    }

    fn kube_rule_error(resources: &str, verbs: &str, namespaces: &str) -> String {
        Manifest::parse(&format!(
            "[[grant.kube]]\nresources = [{resources}]\nverbs = [{verbs}]\nnamespaces = [{namespaces}]"
        ))
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn a_kind_where_a_resource_is_meant_is_an_error_that_names_the_resource() {
        for (written, fix) in [
            ("PersistentVolume", "persistentvolumes"),
            ("Pod", "pods"),
            ("pod", "pods"),
            ("VirtualMachine.kubevirt.io", "virtualmachines.kubevirt.io"),
            ("deployments", "deployments.apps"),
        ] {
            let e = kube_rule_error(&format!("\"{written}\""), "\"get\"", "\"*\"");
            assert!(
                e.starts_with("grant.kube[0].resources: ")
                    && e.contains(&format!("{written:?}"))
                    && e.ends_with(&format!("write {fix:?}")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_namespace_rule_on_a_cluster_scoped_resource_is_an_error_that_says_what_to_write() {
        for namespaces in ["\"@item\"", "\"@velero\"", "\"apps\", \"@item\""] {
            let e = kube_rule_error("\"pods\", \"persistentvolumes\"", "\"get\"", namespaces);
            assert!(
                e.starts_with("grant.kube[0].namespaces: persistentvolumes is cluster-scoped")
                    && e.contains("Write \"\" (cluster scope)")
                    && e.contains("a rule of its own"),
                "{e}"
            );
        }
        let e = kube_rule_error("\"pods\"", "\"get\"", "\"\"");
        assert!(
            e.starts_with("grant.kube[0].namespaces: pods is namespaced"),
            "{e}"
        );
        // What can match: "" or "*" for cluster-scoped resources; resources of unknown scope pass.
        for ok in [
            "resources = [\"persistentvolumes\"]\nverbs = [\"get\"]\nnamespaces = [\"\"]",
            "resources = [\"persistentvolumes\", \"pods\"]\nverbs = [\"list\"]\nnamespaces = [\"*\"]",
            "resources = [\"nodes\", \"pods\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\", \"\"]",
            "resources = [\"widgets.example.io\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]",
            "resources = [\"widgets.example.io\"]\nverbs = [\"get\"]\nnamespaces = [\"\"]",
        ] {
            Manifest::parse(&format!("[[grant.kube]]\n{ok}")).unwrap();
        }
    }

    #[test]
    fn an_unknown_verb_is_an_error_that_says_what_to_write() {
        for (verb, fix) in [
            ("watch", "write \"list\" or \"get\""),
            ("Get", "write \"get\""),
            ("get,list", "write [\"get\", \"list\"]"),
            ("deletecollection", "write \"delete\""),
            ("apply", "write \"patch\""),
        ] {
            let e = kube_rule_error("\"pods\"", &format!("{verb:?}"), "\"*\"");
            assert!(
                e.starts_with(&format!(
                    "grant.kube[0].verbs: {verb:?} is not a verb modules have"
                )) && e.ends_with(fix),
                "{e}"
            );
        }
        let e = kube_rule_error("\"pods\"", "\"frobnicate\"", "\"*\"");
        assert!(
            e.ends_with("the verbs are get, list, create, update, patch, delete or \"*\""),
            "{e}"
        );
    }

    #[test]
    fn cluster_scope_is_shown_as_cluster() {
        let m = Manifest::parse(
            "[[grant.kube]]\nresources = [\"nodes\"]\nverbs = [\"get\"]\nnamespaces = [\"\"]\n\
             [[grant.kube]]\nresources = [\"widgets.example.io\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\", \"\"]",
        )
        .unwrap();
        assert_eq!(
            m.grant.to_string(),
            "get nodes (cluster); get widgets.example.io in @item,(cluster)"
        );
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_byte_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_byte_size("100KB"), Some(100_000));
        assert_eq!(parse_byte_size("42"), Some(42));
        assert_eq!(parse_byte_size("1 MiB"), Some(1 << 20));
        assert_eq!(parse_byte_size("lots"), None);
    }
}
