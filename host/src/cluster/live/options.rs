//! Where the cluster's address and credentials come from ([`ClusterOptions`]), resolved as kubectl
//! resolves them, and why no client could be built from them ([`ConnectError`]).

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::config::Config;

/// Where the cluster's address and credentials come from.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// A kubeconfig file (`--kubeconfig`); `None` resolves as kubectl does.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig (`--context`); `None` is its current context.
    pub context: Option<String>,
    /// The process's configuration, which says whether it runs in a pod (`KUBERNETES_SERVICE_HOST`)
    /// and where kubectl's files are (`KUBECONFIG`, `HOME`). The default is an empty one.
    pub config: Config,
}

impl ClusterOptions {
    /// kubectl's defaults, as the process's `config` names them.
    pub(crate) fn new(config: Config) -> ClusterOptions {
        ClusterOptions {
            kubeconfig: None,
            context: None,
            config,
        }
    }

    /// Whether there is any configuration to connect with: explicit options, a pod's service account
    /// (`KUBERNETES_SERVICE_HOST`), `KUBECONFIG`, or `~/.kube/config`.
    pub(crate) fn is_configured(&self) -> bool {
        let cluster = self.config.cluster();
        self.kubeconfig.is_some()
            || self.context.is_some()
            || cluster.in_pod
            || cluster.kubeconfig
            || cluster
                .home
                .is_some_and(|home| home.join(".kube/config").exists())
    }

    /// The client configuration `self` names: an explicit `--kubeconfig`/`--context` wins; otherwise
    /// the in-cluster service account when `KUBERNETES_SERVICE_HOST` is set; otherwise `KUBECONFIG`
    /// or `~/.kube/config`.
    pub(super) async fn kube_config(&self) -> Result<kube::Config, ConnectError> {
        let options = self;
        let explicit = options.kubeconfig.is_some() || options.context.is_some();
        let config = if !explicit && options.config.cluster().service_host_present {
            kube::Config::incluster().map_err(ConnectError::InCluster)?
        } else {
            let kube_options = KubeConfigOptions {
                context: options.context.clone(),
                ..KubeConfigOptions::default()
            };
            let kubeconfig_error = |source| ConnectError::Kubeconfig {
                path: options.kubeconfig.clone(),
                source,
            };
            match &options.kubeconfig {
                Some(path) => {
                    let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
                    kube::Config::from_custom_kubeconfig(file, &kube_options).await
                }
                None => kube::Config::from_kubeconfig(&kube_options).await,
            }
            .map_err(kubeconfig_error)?
        };
        Ok(config)
    }
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig is missing, unreadable, or names no usable cluster or context.
    #[error("kubeconfig{}: {source}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Kubeconfig {
        /// The file, when one was named.
        path: Option<PathBuf>,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Running in a pod, but its service account cannot be used.
    #[error("in-cluster configuration (KUBERNETES_SERVICE_HOST is set): {0}")]
    InCluster(#[source] kube::config::InClusterError),
    /// The configuration is readable but no client can be made from it (e.g. bad certificates).
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}
