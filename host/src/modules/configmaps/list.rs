//! Listing the module ConfigMaps: whether they are read at all ([`Switch`]), in which namespace
//! ([`namespace_of`]), and the list itself, bounded in time ([`LIST_TIMEOUT`]) and size
//! ([`MAX_LIST_BYTES`]).

use std::time::Duration;

use serde_json::Value;

use super::metadata::LABEL;
use crate::backend::Backend;
use crate::cluster::live::LazyCluster;
use crate::cluster::{ApiResource, KubeApi, KubeCall, KubeError, ListOptions};
use crate::config::Config;

/// The environment variable that turns the channel on, off, or leaves it to the environment.
pub(crate) use crate::config::VELERO_WASM_CONFIGMAPS as SWITCH_ENV;

/// The most the list of module ConfigMaps may take, all pages together.
pub(crate) const MAX_LIST_BYTES: u64 = 64 << 20;
/// How long connecting and listing may take at start (Velero's calls wait for the modules).
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether module ConfigMaps are read: [`SWITCH_ENV`] `on`, `off`, or `auto` (unset: in a pod,
/// where `KUBERNETES_SERVICE_HOST` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Switch {
    /// Read them, with whatever cluster configuration there is (in-cluster, `KUBECONFIG`).
    On,
    /// Never.
    Off,
    /// In a pod only.
    Auto,
}

impl Switch {
    /// The switch `config` sets; an unknown value is an error (and means `auto`).
    pub(crate) fn from_config(config: &Config) -> (Switch, Option<String>) {
        match config.configmaps().as_deref().map(str::trim) {
            None | Some("") | Some("auto") => (Switch::Auto, None),
            Some("on") | Some("true") | Some("1") => (Switch::On, None),
            Some("off") | Some("false") | Some("0") => (Switch::Off, None),
            Some(other) => (
                Switch::Auto,
                Some(format!(
                    "{SWITCH_ENV}={other:?} is not on, off or auto; taken as auto"
                )),
            ),
        }
    }

    /// Whether to read module ConfigMaps, for a process that runs in a pod or not
    /// ([`Config::in_pod`]).
    pub(crate) fn enabled(self, in_pod: bool) -> bool {
        match self {
            Switch::On => true,
            Switch::Off => false,
            Switch::Auto => in_pod,
        }
    }
}

/// Velero's namespace: `velero_namespace`, else the one the cluster configuration names (`None`
/// when it cannot be had within [`LIST_TIMEOUT`]): where the module ConfigMaps are listed, and
/// where what became of each is written on it, and where the version floor's Secret is.
pub(crate) async fn namespace_of(cluster: &LazyCluster, velero_namespace: &str) -> Option<String> {
    let namespace = tokio::time::timeout(LIST_TIMEOUT, async {
        match velero_namespace {
            "" => cluster.default_namespace().await,
            namespace => Ok(namespace.to_string()),
        }
    });
    match namespace.await {
        Ok(Ok(namespace)) => Some(namespace),
        _ => None,
    }
}

/// The module ConfigMaps of `namespace` listed within [`LIST_TIMEOUT`], or why not and whether the
/// API server answered.
pub(super) async fn list_within(
    cluster: &LazyCluster,
    namespace: Option<&str>,
) -> Result<Vec<Value>, (String, bool)> {
    let listed = match namespace {
        Some(namespace) => tokio::time::timeout(LIST_TIMEOUT, list(cluster, namespace))
            .await
            .map_err(|_| {
                format!(
                    "cannot list the module ConfigMaps: no answer within {} s",
                    LIST_TIMEOUT.as_secs()
                )
            }),
        None => Err(format!(
            "cannot list the module ConfigMaps: no cluster to ask within {} s",
            LIST_TIMEOUT.as_secs()
        )),
    };
    match listed {
        Ok(Ok(items)) => Ok(items),
        Ok(Err(KubeError::TooLarge(_))) => Err((
            format!(
                "the module ConfigMaps take more than {} MiB, the most read at start (remove the ConfigMaps labelled {LABEL} that are not modules)",
                MAX_LIST_BYTES >> 20
            ),
            true,
        )),
        Ok(Err(e)) => Err((format!("cannot list the module ConfigMaps: {e}"), false)),
        Err(why) => Err((why, true)),
    }
}

/// Lists the module ConfigMaps of `namespace` (bounded by [`MAX_LIST_BYTES`]; the caller bounds the
/// time).
pub(super) async fn list(
    backend: &dyn Backend<KubeCall>,
    namespace: &str,
) -> Result<Vec<Value>, KubeError> {
    let mut options = ListOptions::parse(LABEL, "")?;
    options.max_bytes = Some(MAX_LIST_BYTES);
    backend
        .list(
            &ApiResource::new("", "v1", "configmaps"),
            namespace,
            &options,
        )
        .await
}
