//! The process's configuration, read once at the edge (`main.rs`) and passed down: no file of the
//! library below the edge reads the environment, and none but this one and the `environment`
//! capability looks a variable up by name (tests/config_once.rs checks both).
//!
//! [`Config`] is the process's environment as it was at start. The names of the variables the host
//! reads are constants here ([`VARIABLES`] lists the `VELERO_WASM_*` ones, and a test holds it to
//! docs/operation.md's table); the rooms that use a name in a message re-export the constant under
//! their own name. Settings reach the rooms typed, one way throughout: **a method of [`Config`] per
//! room (or per setting), defined here, returns what that room reads** — a value (`Option<PathBuf>`,
//! `bool`, text) or, for a room with several settings, a `…Settings` struct defined here
//! ([`StateDirSettings`], [`HandshakeSettings`], [`ShadowSettings`], [`ReadViewSettings`],
//! [`OciSettings`], [`ClusterSettings`], [`MetricsSettings`]). The room's one constructor from the
//! configuration (`shadow::Budget::from_config`, `ReadViews::from_config`, …) calls that method and
//! never a name. The `…Settings` structs have no `Debug`: as with [`Config`], their values can be
//! credentials (an endpoint's user and password) and are never shown. Each method reads its
//! variables exactly as the code that used them read them before (the same filtering of empty
//! values, the same defaults); values whose unusable text is reported (a size, a duration, a kind)
//! are handed over as text and parsed where they always were, after logging has started, so every
//! message and its level stay the same:
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
//! | any variable a module's grant names | the `environment` capability, the only user of [`Config::var`] |
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

    /// The value of `name` when it is set and valid UTF-8 (as `std::env::var(name).ok()` was). Only
    /// for variables named at run time (the `environment` capability's grants); a setting of the host
    /// has its own method.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars
            .get(OsStr::new(name))
            .and_then(|v| v.to_str())
            .map(str::to_string)
    }

    /// The value of `name` when it is set, whatever its bytes (as `std::env::var_os(name)` was).
    fn var_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// `name` as a path when it is set and not empty (how every directory or file variable is read).
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// Whether `name` is set to something (not empty).
    fn is_set(&self, name: &str) -> bool {
        self.var_os(name).is_some_and(|v| !v.is_empty())
    }

    /// Whether the process runs in a pod: `KUBERNETES_SERVICE_HOST` is set and not empty (what
    /// decides in-cluster credentials and, by default, reading module ConfigMaps).
    pub fn in_pod(&self) -> bool {
        self.is_set(KUBERNETES_SERVICE_HOST)
    }

    /// The home directory (`HOME`), when set and not empty.
    pub fn home(&self) -> Option<PathBuf> {
        self.path(HOME)
    }

    /// The go-plugin magic cookie (`VELERO_PLUGIN`), whatever its bytes: `main.rs` runs the plugin
    /// when it is `hello`.
    pub fn velero_plugin(&self) -> Option<&OsStr> {
        self.var_os(VELERO_PLUGIN)
    }

    /// What go-plugin's client set for the handshake (`plugin::handshake`).
    pub fn handshake(&self) -> HandshakeSettings {
        HandshakeSettings {
            cookie: self.var(VELERO_PLUGIN),
            client_cert: self.var(PLUGIN_CLIENT_CERT),
            socket_dir: self.var(PLUGIN_UNIX_SOCKET_DIR),
            tmpdir: self.var(TMPDIR),
            socket_group: self.var(PLUGIN_UNIX_SOCKET_GROUP),
            multiplex_grpc: self.var(PLUGIN_MULTIPLEX_GRPC),
            protocol_versions: self.var(PLUGIN_PROTOCOL_VERSIONS),
        }
    }

    /// The directories the state directory may be (`state::default_dir` picks).
    pub fn state_dir(&self) -> StateDirSettings {
        StateDirSettings {
            state_dir: self.path(VELERO_WASM_STATE_DIR),
            scratch_dir: self.path(VELERO_SCRATCH_DIR),
            xdg_cache_home: self.path(XDG_CACHE_HOME),
            home: self.path(HOME),
        }
    }

    /// The directory of extra modules ([`VELERO_WASM_MODULES`]), when set and not empty.
    pub fn modules_dir(&self) -> Option<PathBuf> {
        self.path(VELERO_WASM_MODULES)
    }

    /// The kinds to list to Velero ([`VELERO_WASM_KINDS`]) as text, parsed (and reported) by the plugin.
    pub fn kinds(&self) -> Option<String> {
        self.var(VELERO_WASM_KINDS)
    }

    /// The stock modules to load ([`VELERO_WASM_STOCK`]) as text; unset is empty.
    pub fn stock(&self) -> String {
        self.var(VELERO_WASM_STOCK).unwrap_or_default()
    }

    /// The trusted keys ([`VELERO_WASM_TRUSTED_KEYS`]), when set and not empty.
    pub fn trusted_keys(&self) -> Option<PathBuf> {
        self.path(VELERO_WASM_TRUSTED_KEYS)
    }

    /// [`VELERO_WASM_TRUSTED_KEYS`] as set, even empty: what the test runner passes on as the flag's
    /// value (`velero-wasm test`).
    pub fn trusted_keys_as_set(&self) -> Option<PathBuf> {
        self.var_os(VELERO_WASM_TRUSTED_KEYS).map(PathBuf::from)
    }

    /// The memory budget of all calls ([`VELERO_WASM_MEMORY_BUDGET`]) as text, parsed (and
    /// reported) by `capabilities::memory`.
    pub fn memory_budget(&self) -> Option<String> {
        self.var(VELERO_WASM_MEMORY_BUDGET)
    }

    /// The compile memory budget ([`VELERO_WASM_COMPILE_MEMORY`]) as text, parsed (and reported) by
    /// `runtime::compile_budget`.
    pub fn compile_memory(&self) -> Option<String> {
        self.var(VELERO_WASM_COMPILE_MEMORY)
    }

    /// The shadows' budget (`VELERO_WASM_SHADOW_*`) as text, parsed (and reported) by `shadow`.
    pub fn shadow(&self) -> ShadowSettings {
        ShadowSettings {
            calls: self.var(VELERO_WASM_SHADOW_CALLS),
            timeout: self.var(VELERO_WASM_SHADOW_TIMEOUT),
            cpu: self.var(VELERO_WASM_SHADOW_CPU),
            nice: self.var(VELERO_WASM_SHADOW_NICE),
            memory: self.var(VELERO_WASM_SHADOW_MEMORY),
            idle: self.var(VELERO_WASM_SHADOW_IDLE),
        }
    }

    /// The read views' and `read-all`'s settings as text, parsed (and reported) by
    /// `capabilities::kube`.
    pub fn read_views(&self) -> ReadViewSettings {
        ReadViewSettings {
            switch: self.var(VELERO_WASM_READ_VIEWS),
            budget: self.var(VELERO_WASM_READ_VIEW_BUDGET),
            batch: self.var(VELERO_WASM_READ_BATCH).unwrap_or_default(),
        }
    }

    /// Whether module ConfigMaps are read ([`VELERO_WASM_CONFIGMAPS`]) as text, parsed (and
    /// reported) by `modules::configmaps`.
    pub fn configmaps(&self) -> Option<String> {
        self.var(VELERO_WASM_CONFIGMAPS)
    }

    /// How modules are pulled from OCI registries (`VELERO_WASM_OCI_*`) as text, parsed by
    /// `modules::oci` and `modules::configmaps`.
    pub fn oci(&self) -> OciSettings {
        OciSettings {
            plain_http: self.var(VELERO_WASM_OCI_PLAIN_HTTP).unwrap_or_default(),
            tags: self.var(VELERO_WASM_OCI_TAGS),
            registries: self.var(VELERO_WASM_OCI_REGISTRIES),
            pull_secrets: self.var(VELERO_WASM_OCI_PULL_SECRETS).unwrap_or_default(),
        }
    }

    /// Whether the module ConfigMaps' state is reported ([`VELERO_WASM_CONFIGMAP_STATE`]) as text,
    /// read by `plan::configmap_report`.
    pub fn configmap_state(&self) -> Option<String> {
        self.var(VELERO_WASM_CONFIGMAP_STATE)
    }

    /// The pod's name (`HOSTNAME`); unset is empty.
    pub fn hostname(&self) -> String {
        self.var(HOSTNAME).unwrap_or_default()
    }

    /// What says where the cluster is (`cluster::live`).
    pub fn cluster(&self) -> ClusterSettings {
        ClusterSettings {
            in_pod: self.in_pod(),
            service_host_present: self.var_os(KUBERNETES_SERVICE_HOST).is_some(),
            kubeconfig: self.is_set(KUBECONFIG),
            home: self.var_os(HOME).map(PathBuf::from),
        }
    }

    /// Whether and where metrics are exported (`metrics`).
    pub fn metrics(&self) -> MetricsSettings {
        MetricsSettings {
            endpoint: self.var(OTEL_EXPORTER_OTLP_ENDPOINT),
            metrics_endpoint: self.var(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT),
            service_name_set: self.var_os(OTEL_SERVICE_NAME).is_some(),
        }
    }

    /// Velero's namespace as Velero's CLI reads it (`VELERO_NAMESPACE`): set and not empty.
    pub fn velero_namespace(&self) -> Option<String> {
        self.var(VELERO_NAMESPACE).filter(|n| !n.is_empty())
    }

    /// The terminal's width (`COLUMNS`) as text.
    pub fn columns(&self) -> Option<String> {
        self.var(COLUMNS)
    }

    /// The cargo to build Rust modules with (`CARGO`, as cargo sets it for the commands it runs).
    pub fn cargo(&self) -> Option<&OsStr> {
        self.var_os(CARGO)
    }

    /// The componentize-py to build Python modules with (`COMPONENTIZE_PY`).
    pub fn componentize_py(&self) -> Option<&OsStr> {
        self.var_os(COMPONENTIZE_PY)
    }

    /// The componentize-js to build JavaScript modules with (`COMPONENTIZE_JS`).
    pub fn componentize_js(&self) -> Option<&OsStr> {
        self.var_os(COMPONENTIZE_JS)
    }

    /// The directory of the docker config (`DOCKER_CONFIG`), else `$HOME/.docker`, as set (even empty).
    pub fn docker_config_dir(&self) -> Option<PathBuf> {
        self.var_os(DOCKER_CONFIG)
            .map(PathBuf::from)
            .or_else(|| self.var_os(HOME).map(|h| PathBuf::from(h).join(".docker")))
    }

    /// The token file of IRSA (`AWS_WEB_IDENTITY_TOKEN_FILE`), as set (even empty).
    pub fn aws_web_identity_token_file(&self) -> Option<&OsStr> {
        self.var_os(AWS_WEB_IDENTITY_TOKEN_FILE)
    }
}

/// What go-plugin's client set for the handshake, as text ([`Config::handshake`]).
#[derive(Clone, Default)]
pub struct HandshakeSettings {
    /// `VELERO_PLUGIN`, the magic cookie.
    pub cookie: Option<String>,
    /// `PLUGIN_CLIENT_CERT` (go-plugin's automatic mTLS).
    pub client_cert: Option<String>,
    /// `PLUGIN_UNIX_SOCKET_DIR`.
    pub socket_dir: Option<String>,
    /// `TMPDIR` (where the socket goes without `PLUGIN_UNIX_SOCKET_DIR`).
    pub tmpdir: Option<String>,
    /// `PLUGIN_UNIX_SOCKET_GROUP`.
    pub socket_group: Option<String>,
    /// `PLUGIN_MULTIPLEX_GRPC`.
    pub multiplex_grpc: Option<String>,
    /// `PLUGIN_PROTOCOL_VERSIONS`.
    pub protocol_versions: Option<String>,
}

/// The directories the state directory may be, each when set and not empty ([`Config::state_dir`]).
#[derive(Clone, Default)]
pub struct StateDirSettings {
    /// [`VELERO_WASM_STATE_DIR`].
    pub state_dir: Option<PathBuf>,
    /// `VELERO_SCRATCH_DIR` (Velero's scratch volume).
    pub scratch_dir: Option<PathBuf>,
    /// `XDG_CACHE_HOME`.
    pub xdg_cache_home: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
}

/// The shadows' budget as text, each as set ([`Config::shadow`]).
#[derive(Clone, Default)]
pub struct ShadowSettings {
    /// [`VELERO_WASM_SHADOW_CALLS`].
    pub calls: Option<String>,
    /// [`VELERO_WASM_SHADOW_TIMEOUT`].
    pub timeout: Option<String>,
    /// [`VELERO_WASM_SHADOW_CPU`].
    pub cpu: Option<String>,
    /// [`VELERO_WASM_SHADOW_NICE`].
    pub nice: Option<String>,
    /// [`VELERO_WASM_SHADOW_MEMORY`].
    pub memory: Option<String>,
    /// [`VELERO_WASM_SHADOW_IDLE`].
    pub idle: Option<String>,
}

/// The read views' and `read-all`'s settings as text ([`Config::read_views`]).
#[derive(Clone, Default)]
pub struct ReadViewSettings {
    /// [`VELERO_WASM_READ_VIEWS`], as set.
    pub switch: Option<String>,
    /// [`VELERO_WASM_READ_VIEW_BUDGET`], as set.
    pub budget: Option<String>,
    /// [`VELERO_WASM_READ_BATCH`]; unset is empty.
    pub batch: String,
}

/// How modules are pulled from OCI registries, as text ([`Config::oci`]).
#[derive(Clone, Default)]
pub struct OciSettings {
    /// [`VELERO_WASM_OCI_PLAIN_HTTP`]; unset is empty.
    pub plain_http: String,
    /// [`VELERO_WASM_OCI_TAGS`], as set.
    pub tags: Option<String>,
    /// [`VELERO_WASM_OCI_REGISTRIES`], as set.
    pub registries: Option<String>,
    /// [`VELERO_WASM_OCI_PULL_SECRETS`]; unset is empty.
    pub pull_secrets: String,
}

/// What says where the cluster is ([`Config::cluster`]).
#[derive(Clone, Default)]
pub struct ClusterSettings {
    /// `KUBERNETES_SERVICE_HOST` is set and not empty ([`Config::in_pod`]).
    pub in_pod: bool,
    /// `KUBERNETES_SERVICE_HOST` is set, even empty (what picks in-cluster credentials).
    pub service_host_present: bool,
    /// `KUBECONFIG` is set and not empty.
    pub kubeconfig: bool,
    /// `HOME`, as set (even empty).
    pub home: Option<PathBuf>,
}

/// Whether and where metrics are exported ([`Config::metrics`]).
#[derive(Clone, Default)]
pub struct MetricsSettings {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, as set.
    pub endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, as set.
    pub metrics_endpoint: Option<String>,
    /// `OTEL_SERVICE_NAME` is set (even empty).
    pub service_name_set: bool,
}

/// Directory of extra modules (also `--modules`).
pub const VELERO_WASM_MODULES: &str = "VELERO_WASM_MODULES";
/// The stock modules to load (also `--stock`).
pub const VELERO_WASM_STOCK: &str = "VELERO_WASM_STOCK";
/// The keys modules beyond the stock ones must be signed by (also `--trusted-keys`).
pub const VELERO_WASM_TRUSTED_KEYS: &str = "VELERO_WASM_TRUSTED_KEYS";
/// Whether module ConfigMaps are read: `auto`, `on` or `off`.
pub const VELERO_WASM_CONFIGMAPS: &str = "VELERO_WASM_CONFIGMAPS";
/// The environment variable that turns the writing of the module ConfigMaps' state off (`off`); on
/// by default.
pub const VELERO_WASM_CONFIGMAP_STATE: &str = "VELERO_WASM_CONFIGMAP_STATE";
/// The memory compiles of modules may take at once.
pub const VELERO_WASM_COMPILE_MEMORY: &str = "VELERO_WASM_COMPILE_MEMORY";
/// Where state is kept between processes.
pub const VELERO_WASM_STATE_DIR: &str = "VELERO_WASM_STATE_DIR";
/// The kinds to list to Velero.
pub const VELERO_WASM_KINDS: &str = "VELERO_WASM_KINDS";
/// The memory all calls together may hold at once.
pub const VELERO_WASM_MEMORY_BUDGET: &str = "VELERO_WASM_MEMORY_BUDGET";
/// Whether reads are kept per backup (read views).
pub const VELERO_WASM_READ_VIEWS: &str = "VELERO_WASM_READ_VIEWS";
/// The memory the read views may hold.
pub const VELERO_WASM_READ_VIEW_BUDGET: &str = "VELERO_WASM_READ_VIEW_BUDGET";
/// Set to `off`, makes `read-all` send its reads one after another instead of at once: to measure
/// what batching gains (host/benches/scale.rs). The answers are the same.
pub const VELERO_WASM_READ_BATCH: &str = "VELERO_WASM_READ_BATCH";
/// The shadows' calls at once.
pub const VELERO_WASM_SHADOW_CALLS: &str = "VELERO_WASM_SHADOW_CALLS";
/// A shadow call's deadline.
pub const VELERO_WASM_SHADOW_TIMEOUT: &str = "VELERO_WASM_SHADOW_TIMEOUT";
/// A shadow call's CPU time.
pub const VELERO_WASM_SHADOW_CPU: &str = "VELERO_WASM_SHADOW_CPU";
/// The priority of the shadows' thread.
pub const VELERO_WASM_SHADOW_NICE: &str = "VELERO_WASM_SHADOW_NICE";
/// The memory the shadows may hold.
pub const VELERO_WASM_SHADOW_MEMORY: &str = "VELERO_WASM_SHADOW_MEMORY";
/// How long the shadows' thread waits idle before it stops.
pub const VELERO_WASM_SHADOW_IDLE: &str = "VELERO_WASM_SHADOW_IDLE";
/// The docker-config Secrets pull credentials come from.
pub const VELERO_WASM_OCI_PULL_SECRETS: &str = "VELERO_WASM_OCI_PULL_SECRETS";
/// The registries reached over plain HTTP.
pub const VELERO_WASM_OCI_PLAIN_HTTP: &str = "VELERO_WASM_OCI_PLAIN_HTTP";
/// The registries references may name.
pub const VELERO_WASM_OCI_REGISTRIES: &str = "VELERO_WASM_OCI_REGISTRIES";
/// `resolve`: a tag without a digest is resolved once.
pub const VELERO_WASM_OCI_TAGS: &str = "VELERO_WASM_OCI_TAGS";

/// Every `VELERO_WASM_*` variable the host reads, with what it sets: the list docs/operation.md's
/// table of variables must show (a test holds them together).
pub const VARIABLES: &[(&str, &str)] = &[
    (VELERO_WASM_MODULES, "directory of extra modules"),
    (VELERO_WASM_STOCK, "the stock modules to load"),
    (VELERO_WASM_TRUSTED_KEYS, "keys modules must be signed by"),
    (VELERO_WASM_CONFIGMAPS, "whether module ConfigMaps are read"),
    (
        VELERO_WASM_CONFIGMAP_STATE,
        "whether ConfigMaps' state is reported",
    ),
    (VELERO_WASM_COMPILE_MEMORY, "the compiles' memory budget"),
    (VELERO_WASM_STATE_DIR, "where state is kept"),
    (VELERO_WASM_KINDS, "the kinds listed to Velero"),
    (VELERO_WASM_MEMORY_BUDGET, "the calls' memory budget"),
    (VELERO_WASM_READ_VIEWS, "whether reads are kept per backup"),
    (
        VELERO_WASM_READ_VIEW_BUDGET,
        "the read views' memory budget",
    ),
    (
        VELERO_WASM_READ_BATCH,
        "whether read-all sends its reads at once",
    ),
    (VELERO_WASM_SHADOW_CALLS, "the shadows' calls at once"),
    (VELERO_WASM_SHADOW_TIMEOUT, "a shadow call's deadline"),
    (VELERO_WASM_SHADOW_CPU, "a shadow call's CPU time"),
    (VELERO_WASM_SHADOW_NICE, "the shadows' priority"),
    (VELERO_WASM_SHADOW_MEMORY, "the shadows' memory budget"),
    (VELERO_WASM_SHADOW_IDLE, "the shadows' idle time"),
    (VELERO_WASM_OCI_PULL_SECRETS, "Secrets of pull credentials"),
    (VELERO_WASM_OCI_PLAIN_HTTP, "registries over plain HTTP"),
    (VELERO_WASM_OCI_REGISTRIES, "registries references may name"),
    (VELERO_WASM_OCI_TAGS, "whether tags are resolved"),
];

/// The go-plugin magic cookie's variable.
pub const VELERO_PLUGIN: &str = "VELERO_PLUGIN";
/// Velero's namespace (Velero's Deployment and CLI).
pub const VELERO_NAMESPACE: &str = "VELERO_NAMESPACE";
const PLUGIN_CLIENT_CERT: &str = "PLUGIN_CLIENT_CERT";
const PLUGIN_UNIX_SOCKET_DIR: &str = "PLUGIN_UNIX_SOCKET_DIR";
const PLUGIN_UNIX_SOCKET_GROUP: &str = "PLUGIN_UNIX_SOCKET_GROUP";
const PLUGIN_MULTIPLEX_GRPC: &str = "PLUGIN_MULTIPLEX_GRPC";
const PLUGIN_PROTOCOL_VERSIONS: &str = "PLUGIN_PROTOCOL_VERSIONS";
const TMPDIR: &str = "TMPDIR";
const VELERO_SCRATCH_DIR: &str = "VELERO_SCRATCH_DIR";
const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
const HOME: &str = "HOME";
const HOSTNAME: &str = "HOSTNAME";
const KUBERNETES_SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
const KUBECONFIG: &str = "KUBECONFIG";
/// The standard variable for the collector's base URL (`/v1/metrics` is appended).
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard variable for the full URL metrics are posted to (wins over
/// [`OTEL_EXPORTER_OTLP_ENDPOINT`]).
pub const OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
const COLUMNS: &str = "COLUMNS";
const CARGO: &str = "CARGO";
const COMPONENTIZE_PY: &str = "COMPONENTIZE_PY";
const COMPONENTIZE_JS: &str = "COMPONENTIZE_JS";
const DOCKER_CONFIG: &str = "DOCKER_CONFIG";
const AWS_WEB_IDENTITY_TOKEN_FILE: &str = "AWS_WEB_IDENTITY_TOKEN_FILE";

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

    /// The `VELERO_WASM_*` names in `text`.
    fn names_in(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("VELERO_WASM_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.push(name);
        }
        names
    }

    #[test]
    fn the_variables_are_those_of_the_operation_guide_s_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operation.md");
        let guide = std::fs::read_to_string(path).unwrap();
        // The table of variables: its header, then its rows, up to the first line that is no row.
        let mut lines = guide
            .lines()
            .skip_while(|l| !l.starts_with("| Variable | Meaning |"));
        assert!(lines.next().is_some(), "{path} has a table of variables");
        let documented: std::collections::BTreeSet<String> = lines
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|row| names_in(row.split('|').nth(1).unwrap_or("")))
            .collect();
        let read: std::collections::BTreeSet<String> =
            VARIABLES.iter().map(|(name, _)| name.to_string()).collect();
        assert_eq!(
            read.len(),
            VARIABLES.len(),
            "VARIABLES names each variable once"
        );
        let undocumented: Vec<_> = read.difference(&documented).collect();
        assert!(
            undocumented.is_empty(),
            "read by the host but not in {path}'s table of variables: {undocumented:?}"
        );
        let unknown: Vec<_> = documented.difference(&read).collect();
        assert!(
            unknown.is_empty(),
            "in {path}'s table of variables but not in config::VARIABLES: {unknown:?}"
        );
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
