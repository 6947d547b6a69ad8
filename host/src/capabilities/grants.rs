//! What one module is allowed and configured to do: its grants (Kubernetes, HTTP, environment), its
//! settings, and whether it is a shadow; built once when the module loads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use velero_wasm_grant::{EnvGrant, HostRule, KubeGrant};

/// What one module is allowed and configured to do, built once when the module loads.
#[derive(Debug)]
pub(crate) struct ModuleCaps {
    /// Module name.
    pub(crate) module: Arc<str>,
    /// Kubernetes grant.
    pub(crate) kube: KubeGrant,
    /// HTTP grant and limits.
    pub(crate) http: HttpGrant,
    /// Environment variables and variable-named files.
    pub(crate) env: EnvGrant,
    /// Settings from the manifest.
    pub(crate) settings: BTreeMap<String, String>,
    /// Whether the module's reads may be answered from a backup's read view (manifest `read-views`).
    pub(crate) read_views: bool,
    /// A shadow module (`crate::shadow`): it reads within its grant but never writes, so that trying
    /// a candidate changes nothing in the cluster or beyond it.
    pub(crate) shadow: bool,
}

/// A module's HTTP grant and limits.
#[derive(Debug, Clone, Default)]
pub struct HttpGrant {
    rules: Vec<HostRule>,
    /// Largest answer body, in bytes.
    pub(crate) max_response: u64,
    /// Time allowed for one exchange.
    pub(crate) timeout: Duration,
}

impl HttpGrant {
    /// The grant of a manifest's `[grant] http` entries (already validated at load; an invalid entry
    /// allows nothing) with its limits.
    pub fn new(entries: &[String], max_response: u64, timeout: Duration) -> HttpGrant {
        HttpGrant {
            rules: entries
                .iter()
                .filter_map(|e| HostRule::parse(e).ok())
                .collect(),
            max_response,
            timeout,
        }
    }

    /// Whether a request to `scheme://host:port` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        self.rules.iter().any(|r| r.allows(scheme, &host, port))
    }
}
