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
//! on-failure = "refuse"                # when a new version of it cannot be loaded: "last-good"
//!                                      # (default), "stock" or "refuse" its actions
//!                                      # (docs/modules.md#s2-3)
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
//! [settings-schema.mode]               # the settings the module reads, declared once as
//! type = "string"                      # JSON Schema: checked at load (modules::settings_schema)
//! enum = ["upstream", "extended"]
//! description = "which upstream behaviour to follow"
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use velero_wasm_grant::GrantText;
pub use velero_wasm_grant::{parse_byte_size, KubeRule, NamespaceRule, Verbs, MAX_MEMORY};
pub(crate) use velero_wasm_grant::{Grant, Limits};

use super::failure_policy::FailurePolicy;
use super::settings_schema::{self, SettingsSchema, SpecText};

/// A module's manifest, as typed values: read once, then never parsed again.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// Lower-case hex sha256 of the module's bytes.
    pub(crate) sha256: Option<String>,
    /// The module's version, which rollback protection compares (see `modules::version_floor`).
    pub(crate) version: Option<semver::Version>,
    /// One line for people.
    pub(crate) description: String,
    /// Per-call limits.
    pub limits: Limits,
    /// What the module may do.
    pub grant: Grant,
    /// Settings the module reads through the `config` capability, typed as written (the module
    /// reads them as text: `settings_schema::to_text`).
    pub settings: BTreeMap<String, serde_json::Value>,
    /// The settings the module declares (`[settings-schema]`); empty: not checked.
    pub settings_schema: SettingsSchema,
    /// `read-views = false`: the module's reads always go to the API server (docs/read-views.md).
    pub(crate) no_read_views: bool,
    /// `on-failure`: what serves when a new version of the module cannot be loaded (see
    /// [`super::failure_policy`]); `None` when the manifest does not say.
    pub(crate) on_failure: Option<FailurePolicy>,
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
    settings: BTreeMap<String, serde_json::Value>,
    #[serde(default, rename = "settings-schema")]
    settings_schema: BTreeMap<String, SpecText>,
    #[serde(default = "read_views_default", rename = "read-views")]
    read_views: bool,
    #[serde(default, rename = "on-failure")]
    on_failure: Option<String>,
}

/// The longest `version` a manifest may carry, in bytes: real versions, pre-release and build
/// metadata included, take tens. The version floor holds every record it keeps, and every record the
/// cluster's Secret offers it, to the same bound, so that each fits the file it is read back from.
pub(crate) const MAX_VERSION: usize = 256;

/// Reads may be answered from read views unless a manifest says otherwise.
fn read_views_default() -> bool {
    true
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

impl From<velero_wasm_grant::Invalid> for ManifestError {
    fn from(e: velero_wasm_grant::Invalid) -> ManifestError {
        ManifestError::Invalid {
            field: e.field,
            problem: e.problem,
        }
    }
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
                if v.len() > MAX_VERSION {
                    return Err(invalid(
                        "version",
                        format!(
                            "{} bytes is longer than the {MAX_VERSION} bytes a version may have: not a version",
                            v.len()
                        ),
                    ));
                }
                semver::Version::parse(v).map_err(|e| {
                    invalid(
                        "version",
                        format!("{v:?} is not a semantic version (like \"1.4.0\"): {e}"),
                    )
                })
            })
            .transpose()?;
        raw.limits.check()?;
        let grant = Grant::read(raw.grant)?;
        let settings_schema = SettingsSchema::from_text(raw.settings_schema)
            .map_err(|e| invalid(format!("settings-schema.{}", e.key), e.problem.to_string()))?;
        settings_schema
            .check(&raw.settings)
            .map_err(|e| invalid(format!("settings.{}", e.key), e.problem.to_string()))?;
        let on_failure = raw
            .on_failure
            .as_deref()
            .map(|p| FailurePolicy::parse(p).map_err(|e| invalid("on-failure", e)))
            .transpose()?;
        Ok(Manifest {
            sha256: raw.sha256,
            version,
            description: raw.description,
            limits: raw.limits,
            grant,
            settings: raw.settings,
            settings_schema,
            no_read_views: !raw.read_views,
            on_failure,
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

fn settings<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, serde_json::Value>, D::Error> {
    let raw = BTreeMap::<String, toml::Value>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| (k, settings_schema::toml_to_json(v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        assert_eq!(m.settings["retries"], 3);
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

    /// A version longer than [`MAX_VERSION`] is not one, however valid its semver: the floor could
    /// not read back a record holding it, and the module would stay refused.
    #[test]
    fn a_version_longer_than_the_bound_is_refused() {
        let longest = format!("1.0.0-{}", "a".repeat(MAX_VERSION - 6));
        let m = Manifest::parse(&format!("version = \"{longest}\"")).unwrap();
        assert_eq!(m.version.unwrap().to_string(), longest);
        let e = Manifest::parse(&format!("version = \"{longest}a\""))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "version: 257 bytes is longer than the 256 bytes a version may have: not a version"
        );
    }

    /// Issue 44: bounds, a pattern and a nested object, checked when the manifest loads, each error
    /// naming the key (with the path inside it) and the rule; a list is never a string.
    #[test]
    fn settings_are_checked_against_a_json_schema_at_load() {
        let schema = r#"
            [settings-schema.retries]
            type = "integer"
            minimum = 1
            maximum = 10
            [settings-schema.label-key]
            type = "string"
            pattern = "^[a-z./-]+$"
            [settings-schema.limits]
            type = "object"
            properties.cpu = { type = "integer", minimum = 1 }
            properties.memory = { type = "string", pattern = "^[0-9]+Mi$" }
        "#;
        let parse = |settings: &str| Manifest::parse(&format!("[settings]\n{settings}\n{schema}"));
        let m = parse("retries = 3\nlabel-key = \"example.io/x\"\nlimits = { cpu = 2 }").unwrap();
        assert_eq!(m.settings["limits"]["cpu"], 2);
        for (settings, says) in [
            ("retries = 0", "settings.retries: 0 is less than the minimum of 1 (rule: minimum = 1)"),
            ("retries = 11", "settings.retries: 11 is greater than the maximum of 10 (rule: maximum = 10)"),
            ("label-key = \"A\"", "settings.label-key: \"A\" does not match \"^[a-z./-]+$\" (rule: pattern = \"^[a-z./-]+$\")"),
            ("label-key = [\"a\", \"b\"]", "settings.label-key: [\"a\",\"b\"] is not of type \"string\" (rule: type = \"string\")"),
            ("limits = { cpu = 0 }", "settings.limits.cpu: 0 is less than the minimum of 1 (rule: minimum = 1)"),
            ("limits = { memory = \"1Gi\" }", "settings.limits.memory: \"1Gi\" does not match"),
            ("limits = { cpus = 1 }", "settings.limits.cpus: no property \"cpus\"; did you mean \"cpu\"?"),
        ] {
            let e = parse(settings).unwrap_err().to_string();
            assert!(e.starts_with(says), "{settings}: {e}");
        }
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
