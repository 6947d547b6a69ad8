//! The process's configuration, read once at the edge (`main.rs`) and passed down: no file of the
//! library below the edge reads the environment (tests/config_once.rs checks it).
//!
//! [`Config`] is the process's environment as it was at start, with one accessor per setting the
//! library reads. Each accessor reads its variable exactly as the code that used it read it before
//! (the same filtering of empty values, the same defaults); values whose unusable text is reported
//! (a size, a duration, a kind) are handed over as text and parsed where they always were, after
//! logging has started, so every message and its level stay the same:
//!
//! | variables | read by |
//! |---|---|
//! | `VELERO_PLUGIN`, `PLUGIN_*`, `TMPDIR` | `plugin::handshake`, `plugin::main` |
//! | `VELERO_WASM_KINDS`, `VELERO_WASM_STOCK`, `VELERO_WASM_MODULES`, `VELERO_WASM_TRUSTED_KEYS` | `plugin`, `cli` |
//! | `VELERO_WASM_STATE_DIR`, `VELERO_SCRATCH_DIR`, `XDG_CACHE_HOME`, `HOME` | [`crate::state::default_dir`] |
//! | `VELERO_WASM_MEMORY_BUDGET`, `VELERO_WASM_SHADOW_*` | `capabilities::memory`, `shadow::Budget` |
//! | `VELERO_WASM_READ_VIEWS`, `VELERO_WASM_READ_VIEW_BUDGET`, `VELERO_WASM_READ_BATCH` | `capabilities::kube` |
//! | `VELERO_WASM_COMPILE_MEMORY` | `runtime::compile_budget` |
//! | `VELERO_NAMESPACE` | the `environment` capability, `cli` |
//! | `KUBERNETES_SERVICE_HOST`, `KUBECONFIG`, `HOME` | `cluster::live`, `modules::configmaps` |
//! | `VELERO_WASM_CONFIGMAPS`, `VELERO_WASM_OCI_*` | `modules::configmaps`, `modules::oci` |
//! | `VELERO_WASM_CONFIGMAP_STATE`, `HOSTNAME` | `plan::configmap_report` |
//! | `OTEL_EXPORTER_OTLP_*ENDPOINT`, `OTEL_SERVICE_NAME` | `metrics` |
//! | `COLUMNS`, `CARGO`, `COMPONENTIZE_PY`, `COMPONENTIZE_JS`, `DOCKER_CONFIG`, `AWS_WEB_IDENTITY_TOKEN_FILE` | `cli` |
//! | any variable a module's grant names | the `environment` capability ([`Config::var`]) |
//!
//! Some values used to be read again at each use (a guest's `environment` call, each OCI pull's
//! `VELERO_WASM_OCI_PULL_SECRETS`, whether the process runs in a pod): they are now read from this
//! snapshot, which is the same thing, since nothing in the process changes its environment.
//! Flags are the CLI's and the handshake's to parse; clap also reads the variables that stand for a
//! flag (`VELERO_WASM_MODULES` for `--modules`, …) as it parses. Libraries the host uses still read
//! their own variables themselves, as they document: kube-rs's kubeconfig loader (`KUBECONFIG`,
//! `HOME`), the OpenTelemetry exporter (`OTEL_*`), hyper-util's proxy matcher (`HTTPS_PROXY`,
//! `NO_PROXY`, …) and the system's TLS roots (`SSL_CERT_FILE`, `SSL_CERT_DIR`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::Arc;

/// The process's configuration: its environment as read once at start. Cheap to clone (shared), so
/// every layer that needs a setting can hold one.
#[derive(Clone, Default)]
pub struct Config {
    vars: Arc<BTreeMap<OsString, OsString>>,
}

impl std::fmt::Debug for Config {
    // Values can be credentials: only the names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("variables", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Config {
    /// The configuration of this process: its environment, read now. Called once, by `main.rs`.
    pub fn from_env() -> Config {
        Config {
            vars: Arc::new(std::env::vars_os().collect()),
        }
    }

    /// A configuration of these variables only, as if they were the environment (for tests).
    pub fn from_vars<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Config {
        Config {
            vars: Arc::new(
                vars.into_iter()
                    .map(|(k, v)| (OsString::from(k.into()), OsString::from(v.into())))
                    .collect(),
            ),
        }
    }

    /// The value of `name` when it is set and valid UTF-8 (as `std::env::var(name).ok()` was).
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars
            .get(OsStr::new(name))
            .and_then(|v| v.to_str())
            .map(str::to_string)
    }

    /// The value of `name` when it is set, whatever its bytes (as `std::env::var_os(name)` was).
    pub fn var_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// `name` as a path when it is set and not empty (how every directory or file variable is read).
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// Whether `name` is set to something (not empty).
    pub fn is_set(&self, name: &str) -> bool {
        self.var_os(name).is_some_and(|v| !v.is_empty())
    }

    /// Whether the process runs in a pod: `KUBERNETES_SERVICE_HOST` is set and not empty (what
    /// decides in-cluster credentials and, by default, reading module ConfigMaps).
    pub fn in_pod(&self) -> bool {
        self.is_set("KUBERNETES_SERVICE_HOST")
    }

    /// The home directory (`HOME`), when set and not empty.
    pub fn home(&self) -> Option<PathBuf> {
        self.path("HOME")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_reads_as_the_environment_would() {
        let config = Config::from_vars([("A", "x"), ("EMPTY", "")]);
        assert_eq!(config.var("A").as_deref(), Some("x"));
        assert_eq!(config.var("EMPTY").as_deref(), Some(""));
        assert_eq!(config.var("MISSING"), None);
        assert!(config.is_set("A"));
        assert!(!config.is_set("EMPTY"));
        assert_eq!(config.path("EMPTY"), None);
        assert_eq!(config.path("A"), Some(PathBuf::from("x")));
    }

    #[test]
    fn the_debug_form_shows_names_and_never_values() {
        let config = Config::from_vars([("TOKEN", "secret")]);
        let shown = format!("{config:?}");
        assert!(
            shown.contains("TOKEN") && !shown.contains("secret"),
            "{shown}"
        );
    }
}
