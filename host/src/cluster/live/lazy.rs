//! The live cluster of a plugin process, connected on the first call a module makes
//! ([`LazyCluster`]).

use async_trait::async_trait;

use super::client::LiveCluster;
use super::options::{ClusterOptions, ConnectError};
use super::throttle::RateLimit;
use crate::backend::Backend;
use crate::cluster::vocabulary::{KubeAnswer, KubeCall, KubeError};

/// The live cluster of a plugin process, connected on the first call a module makes rather than at
/// start-up: reading the kubeconfig or the service account and building the client (TLS roots, the
/// connection pool) is then off the path to the handshake, and a process whose actions never call the
/// cluster never does it. A configuration that cannot be used fails every call with the reason (logged
/// once, at error level).
pub(crate) struct LazyCluster {
    options: ClusterOptions,
    rate_limit: Option<RateLimit>,
    cluster: tokio::sync::OnceCell<Result<LiveCluster, Unconnected>>,
}

/// Why a [`LazyCluster`] has no cluster: every call fails with this.
#[derive(Debug, thiserror::Error)]
enum Unconnected {
    /// Nothing says where the cluster is.
    #[error("no Kubernetes configuration: not in a pod (KUBERNETES_SERVICE_HOST unset), no KUBECONFIG, no ~/.kube/config")]
    NotConfigured,
    /// The configuration cannot be used.
    #[error("cannot use the Kubernetes API: {0}")]
    Connect(#[source] ConnectError),
}

impl LazyCluster {
    /// A cluster that will connect as `options` say, with `rate_limit` in front of its requests.
    pub(crate) fn new(options: ClusterOptions, rate_limit: Option<RateLimit>) -> LazyCluster {
        LazyCluster {
            options,
            rate_limit,
            cluster: tokio::sync::OnceCell::new(),
        }
    }

    async fn cluster(&self) -> Result<&LiveCluster, KubeError> {
        let connected = self
            .cluster
            .get_or_init(|| async {
                if !self.options.is_configured() {
                    return Err(Unconnected::NotConfigured);
                }
                match LiveCluster::connect(&self.options).await {
                    Ok(cluster) => Ok(cluster.with_rate_limit(self.rate_limit)),
                    Err(e) => {
                        let unconnected = Unconnected::Connect(e);
                        tracing::error!("{unconnected}");
                        Err(unconnected)
                    }
                }
            })
            .await;
        connected
            .as_ref()
            .map_err(|e| KubeError::Other(e.to_string()))
    }

    /// Connects now rather than at the first call: reads the configuration and builds the client
    /// (TLS and the system's root certificates among it) while Velero is busy with the handshake, so
    /// that the first call of a fresh process does not wait for it. Sends nothing; a configuration
    /// that cannot be used is reported as the first call would report it.
    pub(crate) async fn connect_early(&self) {
        if let Err(e) = self.cluster().await {
            tracing::debug!("not connected ahead of the first call: {e}");
        }
    }

    /// The namespace the configuration names (see [`LiveCluster::default_namespace`]); connects.
    pub(crate) async fn default_namespace(&self) -> Result<String, KubeError> {
        Ok(self.cluster().await?.default_namespace().to_string())
    }
}

#[async_trait]
impl Backend<KubeCall> for LazyCluster {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        self.cluster().await?.call(call).await
    }
}
