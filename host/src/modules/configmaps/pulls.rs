//! The OCI artifacts module ConfigMaps name, pulled ([`pull_artifacts`]) with the credentials of the
//! pull Secrets in Velero's namespace, and why one was not ([`PullError`], [`SecretError`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::list::LIST_TIMEOUT;
use crate::cluster::live::LazyCluster;
use crate::cluster::{ApiResource, KubeApi, KubeError};
use crate::config::Config;
use crate::modules::oci::{self, BlobStore, PullSettings};

/// A pull a listed ConfigMap needs ([`Cache::pull_wanted`](super::disk_cache::Cache::pull_wanted)).
pub(super) struct Wanted {
    /// The directory its files are written to.
    pub(super) dir: PathBuf,
    /// The module its label names.
    pub(super) module: String,
    /// The artifact it names.
    pub(super) reference: String,
    /// The ConfigMap's name.
    pub(super) configmap: String,
}

/// The files pulled for ConfigMaps that name an artifact, by the directory each is written to (or
/// why its pull failed).
pub(super) type Pulls = BTreeMap<PathBuf, Result<Vec<(String, Vec<u8>)>, PullError>>;

/// Pulls the artifacts the listed ConfigMaps name (those whose directory is not written yet), all
/// within [`oci::PULL_TIMEOUT`], with the settings of `config` and the credentials of the Secrets
/// its [`oci::PULL_SECRETS_ENV`] names. `wanted` are the pulls the listed ConfigMaps need
/// ([`Cache::pull_wanted`](super::disk_cache::Cache::pull_wanted)); the blobs are kept in `state`.
pub(super) async fn pull_artifacts(
    wanted: Vec<Wanted>,
    state: &Path,
    cluster: &LazyCluster,
    namespace: &str,
    config: &Config,
) -> Pulls {
    let wanted: Vec<(PathBuf, String, String, String)> = wanted
        .into_iter()
        .map(|w| (w.dir, w.module, w.reference, w.configmap))
        .collect();
    let mut pulls = Pulls::new();
    if wanted.is_empty() {
        return pulls;
    }
    let mut settings = PullSettings::from_config(config);
    let mut secret_problem = None;
    match pull_secrets(cluster, namespace, config).await {
        Ok(configs) => settings.docker_configs = configs,
        Err(why) => secret_problem = Some(why),
    }
    let store = BlobStore::new(state);
    let all = futures::future::join_all(
        wanted
            .iter()
            .map(|(_, module, reference, _)| oci::pull(module, reference, &store, &settings)),
    );
    let outcomes: Vec<Option<Result<oci::Pulled, oci::OciError>>> =
        match tokio::time::timeout(oci::PULL_TIMEOUT, all).await {
            Ok(outcomes) => outcomes.into_iter().map(Some).collect(),
            Err(_) => wanted.iter().map(|_| None).collect(),
        };
    for ((dir, module, reference, configmap), outcome) in wanted.into_iter().zip(outcomes) {
        let outcome = match outcome {
            Some(Ok(pulled)) => {
                tracing::info!(
                    configmap,
                    module,
                    reference = %pulled.pinned,
                    fetched = pulled.fetched,
                    "module pulled"
                );
                Ok(pulled.files)
            }
            Some(Err(why)) => Err(PullError::Failed {
                reference,
                why: std::sync::Arc::new(why),
                secret: secret_problem.as_ref().map(ToString::to_string),
            }),
            None => Err(PullError::TimedOut {
                reference,
                after: oci::PULL_TIMEOUT,
            }),
        };
        pulls.insert(dir, outcome);
    }
    pulls
}

/// The docker configs of the Secrets [`oci::PULL_SECRETS_ENV`] names, in Velero's namespace.
async fn pull_secrets(
    cluster: &LazyCluster,
    namespace: &str,
    config: &Config,
) -> Result<Vec<Vec<u8>>, SecretError> {
    let names = config.oci().pull_secrets;
    let api = ApiResource::new("", "v1", "secrets");
    let mut configs = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let secret = format!("{namespace}/{name}");
        let got = tokio::time::timeout(LIST_TIMEOUT, cluster.get(&api, namespace, name))
            .await
            .map_err(|_| SecretError::NoAnswer {
                secret: secret.clone(),
                within: LIST_TIMEOUT,
            })?
            .map_err(|source| SecretError::Unreadable {
                secret: secret.clone(),
                source,
            })?;
        let data = [".dockerconfigjson", ".dockercfg"]
            .iter()
            .find_map(|key| got.get("data")?.get(*key))
            .and_then(Value::as_str)
            .ok_or_else(|| SecretError::NoConfig(secret.clone()))?;
        let config = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|source| SecretError::NotBase64 { secret, source })?;
        configs.push(config);
    }
    Ok(configs)
}

/// Why the artifact a ConfigMap names was not pulled.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum PullError {
    /// The pull failed; `secret` says why the pull Secrets could not be read, if they could not.
    #[error("cannot pull {reference}: {why}{}", secret.as_ref().map(|s| format!(" ({s})")).unwrap_or_default())]
    Failed {
        /// The artifact's reference.
        reference: String,
        /// Why the pull failed (shared: a pull's outcome is kept and handed out again).
        #[source]
        why: std::sync::Arc<oci::OciError>,
        /// Why the pull Secrets were not used.
        secret: Option<String>,
    },
    /// The pulls took longer than their bound.
    #[error("cannot pull {reference}: the pulls took longer than {} s", after.as_secs())]
    TimedOut {
        /// The artifact's reference.
        reference: String,
        /// The bound.
        after: Duration,
    },
}

/// Why a pull Secret gives no docker config.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    /// The API server did not answer in time.
    #[error("pull Secret {secret}: no answer within {} s", within.as_secs())]
    NoAnswer {
        /// `namespace/name`.
        secret: String,
        /// The bound.
        within: Duration,
    },
    /// The Secret cannot be read.
    #[error("pull Secret {secret} cannot be read: {source}")]
    Unreadable {
        /// `namespace/name`.
        secret: String,
        /// What the API server said.
        #[source]
        source: KubeError,
    },
    /// It holds no docker config.
    #[error("pull Secret {0} holds no .dockerconfigjson")]
    NoConfig(String),
    /// Its docker config is not base64.
    #[error("pull Secret {secret}: .dockerconfigjson is not base64: {source}")]
    NotBase64 {
        /// `namespace/name`.
        secret: String,
        /// What the decoder said.
        #[source]
        source: base64::DecodeError,
    },
}
