//! What a velero-wasm module may do, as its manifest says: `[limits]` and `[grant]` (Kubernetes rules
//! of resources × verbs × namespaces, HTTP origins, environment variables), read and checked with
//! errors that name the field and say what to write, and the one evaluation of a Kubernetes call
//! against a grant with the one text of its denial.
//!
//! The host reads every manifest with it and checks every call with it; the SDK's `FakeCluster` applies
//! the same grant in a module's native unit tests, so the two cannot drift apart. It depends on nothing
//! of either.

pub mod env;
pub mod glob;
pub mod http;
pub mod kube;
pub mod limits;
pub mod resources;
mod verb;

use std::fmt;

use serde::Deserialize;

pub use env::EnvGrant;
pub use http::HostRule;
pub use kube::{denial, rule_allowing, KubeGrant, KubeRule, KubeRuleText, NamespaceRule, Verbs};
pub use limits::{parse_byte_size, Limits, DEFAULT_CAPABILITY_CALLS, MAX_MEMORY};
pub use verb::Verb;

/// A field of a manifest with a value that cannot be used: which field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Invalid {
    /// Dotted path of the field (`grant.kube[0].verbs`).
    pub field: String,
    /// What is wrong with it, and what to write.
    pub problem: String,
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// `[grant]` as TOML gives it.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantText {
    /// `[[grant.kube]]`.
    #[serde(default)]
    pub kube: Vec<KubeRuleText>,
    /// `http`.
    #[serde(default)]
    pub http: Vec<String>,
    /// `env`.
    #[serde(default)]
    pub env: Vec<String>,
    /// `env-files`.
    #[serde(default, rename = "env-files")]
    pub env_files: Vec<String>,
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

impl Grant {
    /// `[grant]` as TOML gave it, checked and typed: each kube rule in turn, then the HTTP and
    /// environment entries.
    pub fn read(text: GrantText) -> Result<Grant, Invalid> {
        let kube = text
            .kube
            .into_iter()
            .enumerate()
            .map(|(i, rule)| KubeRule::read(i, rule))
            .collect::<Result<_, _>>()?;
        let grant = Grant {
            kube,
            http: text.http,
            env: text.env,
            env_files: text.env_files,
        };
        check_entries(&grant)?;
        Ok(grant)
    }
}

/// `[grant]`'s HTTP and environment entries.
fn check_entries(grant: &Grant) -> Result<(), Invalid> {
    for (i, host) in grant.http.iter().enumerate() {
        HostRule::parse(host).map_err(|problem| invalid(format!("grant.http[{i}]"), problem))?;
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
