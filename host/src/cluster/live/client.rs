//! The live client itself ([`LiveCluster`]): connected as its options say, one API server, one
//! discovery and its verbs behind the call vocabulary's [`Backend`].

use async_trait::async_trait;

use super::api_server::{self, ApiServer};
use super::discovery::DiscoveryCache;
use super::options::{ClusterOptions, ConnectError};
use super::throttle::RateLimit;
use super::verbs::{Verbs, LIST_PAGE_SIZE};
use crate::backend::Backend;
use crate::cluster::vocabulary::{KubeAnswer, KubeCall, KubeError};

/// A live Kubernetes API server.
pub struct LiveCluster {
    api_server: ApiServer,
    discovery: DiscoveryCache,
    page_size: u32,
    /// The namespace the configuration names (the pod's, in a pod; the context's, else `default`).
    default_namespace: String,
}

impl LiveCluster {
    /// Connects as `options` say (see the module docs for the order). Nothing is sent yet: the first
    /// request is the first call a module makes.
    pub async fn connect(options: &ClusterOptions) -> Result<LiveCluster, ConnectError> {
        api_server::install_crypto_provider();
        let config = options.kube_config().await?;
        tracing::info!(server = %config.cluster_url, "connecting to the Kubernetes API server");
        Ok(LiveCluster {
            api_server: ApiServer::new(&config).map_err(ConnectError::Client)?,
            discovery: DiscoveryCache::default(),
            page_size: LIST_PAGE_SIZE,
            default_namespace: config.default_namespace.clone(),
        })
    }

    /// The namespace the configuration names: the pod's service-account namespace in a pod, the
    /// context's namespace (or `default`) with a kubeconfig.
    pub(crate) fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    /// Puts a client-side rate limit in front of every request (`None`: no limit of our own).
    pub(crate) fn with_rate_limit(mut self, limit: Option<RateLimit>) -> LiveCluster {
        self.api_server = self.api_server.with_rate_limit(limit);
        self
    }

    /// Lists in pages of `n` objects instead of [`LIST_PAGE_SIZE`].
    pub fn with_page_size(mut self, n: u32) -> LiveCluster {
        self.page_size = n.max(1);
        self
    }
}

#[async_trait]
impl Backend<KubeCall> for LiveCluster {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        let verbs = Verbs {
            api_server: &self.api_server,
            discovery: &self.discovery,
            page_size: self.page_size,
        };
        verbs.call(call).await
    }
}
