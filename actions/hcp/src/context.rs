//! What every call runs with: the cluster, the host's environment and clock, the signer and the
//! module's settings. Each capability is the SDK's trait, so that the logic runs natively in unit
//! tests against the SDK's fakes (`testing::Fakes` gathers them).

use velero_wasm_sdk::{Clock, Cluster, Environment, Signer};

use crate::settings::Settings;

/// Everything a call can reach.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// Kubernetes.
    pub cluster: &'a dyn Cluster,
    /// Velero's namespace, environment variables, token files.
    pub env: &'a dyn Environment,
    /// Time.
    pub clock: &'a dyn Clock,
    /// URL signing.
    pub signer: &'a dyn Signer,
    /// The module's settings.
    pub settings: &'a Settings,
}

impl Context<'_> {
    /// Velero's namespace, where the plugin's ConfigMap, the BackupStorageLocations and their
    /// credential Secrets live; an error when the host does not know it.
    pub fn velero_namespace(&self) -> Result<String, String> {
        let namespace = self.env.velero_namespace();
        if namespace.is_empty() {
            Err(
                "error getting current namespace: the namespace Velero runs in is unknown \
                 (set VELERO_NAMESPACE on the Velero deployment)"
                    .into(),
            )
        } else {
            Ok(namespace)
        }
    }

    /// Wall-clock seconds since the Unix epoch.
    pub fn unix_now(&self) -> i64 {
        self.clock.now().seconds
    }
}
