//! Reading the module ConfigMaps at start ([`read`]): the list written to the cache, those that need
//! no pull first; or, when the list cannot be had, the ConfigMaps of the last one, those the API
//! server no longer confirms left out.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::disk_cache::{Cache, Cached, ConfigMapModules, Problem};
use super::list::{list_within, namespace_of, Switch, LIST_TIMEOUT};
use super::metadata::labelled_module;
use super::pulls::{pull_artifacts, Pulls};
use crate::cluster::live::LazyCluster;
use crate::cluster::{ApiResource, KubeApi, KubeError};
use crate::config::Config;
use crate::modules::oci;

/// The module ConfigMaps of Velero's namespace (`VELERO_NAMESPACE`, else the namespace the cluster
/// configuration names), written out under the state directory; when the API cannot be used within
/// [`LIST_TIMEOUT`], the ConfigMaps of the last successful list, with a warning. `None`
/// when the channel is off (see [`Switch`]) or there is no state directory to write to.
///
/// Once the list is had, before any artifact is pulled, `listed` is given what it holds
/// ([`Listed`]): the modules that need no pull can serve while the pulls go on. What `read`
/// returns holds every listed ConfigMap, those given to `listed` too.
pub(crate) async fn read(
    cluster: &LazyCluster,
    velero_namespace: &str,
    state: Option<&Path>,
    config: &Config,
    listed: impl FnOnce(Listed),
) -> Option<ConfigMapModules> {
    let (switch, bad) = Switch::from_config(config);
    if let Some(bad) = bad {
        tracing::warn!("{bad}");
    }
    if !switch.enabled(config.in_pod()) {
        return None;
    }
    let Some(state) = state else {
        tracing::warn!(
            "module ConfigMaps are not read: no state directory to keep them in (set VELERO_WASM_STATE_DIR)"
        );
        return None;
    };
    let cache = Cache::new(state);
    let namespace = namespace_of(cluster, velero_namespace).await;
    // Whether the API server answers but the list could not be had whole: then someone may be
    // keeping it large or slow, and the last list may name modules deleted since.
    let (why, answering) = match list_within(cluster, namespace.as_deref()).await {
        Ok(items) => {
            let namespace = namespace.as_deref().unwrap_or_default();
            return write_listed(&cache, state, cluster, namespace, &items, config, listed).await;
        }
        Err(not_listed) => not_listed,
    };
    fall_back_to_last(&cache, cluster, namespace.as_deref(), why, answering).await
}

/// What a list of the module ConfigMaps holds, before any artifact is pulled ([`read`]).
#[derive(Debug, Default)]
pub(crate) struct Listed {
    /// Every module a listed ConfigMap labels.
    pub(crate) labelled: BTreeSet<String>,
    /// The modules one of whose ConfigMaps names an artifact not pulled yet.
    pub(crate) to_pull: BTreeSet<String>,
    /// The ConfigMaps of every other module, written out: they need no pull.
    pub(crate) ready: ConfigMapModules,
}

/// The listed ConfigMaps (and the artifacts they name) written to the cache: first those of the
/// modules that need no pull, given to `listed`, then the others once their artifacts are pulled.
async fn write_listed(
    cache: &Cache,
    state: &Path,
    cluster: &LazyCluster,
    namespace: &str,
    items: &[Value],
    config: &Config,
    listed: impl FnOnce(Listed),
) -> Option<ConfigMapModules> {
    let to_pull: BTreeSet<String> = items
        .iter()
        .filter_map(|item| cache.pull_wanted(item))
        .map(|wanted| wanted.module)
        .collect();
    let (later, now): (Vec<&Value>, Vec<&Value>) = items
        .iter()
        .partition(|item| labelled_module(item).is_some_and(|m| to_pull.contains(&m)));
    let written = cache.write_all(&now, &Pulls::new()).inspect(|ready| {
        listed(Listed {
            labelled: items.iter().filter_map(labelled_module).collect(),
            to_pull,
            ready: ready.clone(),
        });
    });
    // Those that need no pull go in service now: a later failure leaves them there.
    let ready_serve = written.is_ok();
    let written = match written {
        Ok(ready) => {
            let wanted = later
                .iter()
                .filter_map(|item| cache.pull_wanted(item))
                .collect();
            let pulled = pull_artifacts(wanted, state, cluster, namespace, config).await;
            cache
                .write_all(&later, &pulled)
                .and_then(|rest| cache.record(ready.merged(rest)))
        }
        Err(e) => Err(e),
    };
    match written {
        Ok(modules) => {
            // Listed and written: the kept OCI blobs no module directory names can go.
            oci::collect::collect_unreferenced(state, cache.dir());
            tracing::debug!(
                namespace,
                configmaps = modules.configmaps.len(),
                written = modules.written,
                cached = modules.cached,
                pruned = modules.pruned,
                "module ConfigMaps read"
            );
            Some(modules)
        }
        Err(why) if ready_serve => {
            tracing::error!(
                "the module ConfigMaps that name an artifact to pull are not loaded: {why}; those that name none serve"
            );
            None
        }
        Err(why) => {
            tracing::error!("module ConfigMaps are not loaded: {why}");
            None
        }
    }
}

/// The ConfigMaps of the last successful list, when this one failed (`why`); those the API server,
/// if `answering`, no longer confirms are not served.
async fn fall_back_to_last(
    cache: &Cache,
    cluster: &LazyCluster,
    namespace: Option<&str>,
    why: String,
    answering: bool,
) -> Option<ConfigMapModules> {
    let last = match cache.last_listing() {
        Ok(last) => last,
        Err(e) => {
            tracing::error!("{why}; the cached ones cannot be used either: {e}");
            return None;
        }
    };
    let (last, problems, why) = match (namespace, answering) {
        (Some(namespace), true) => match still_listed(cluster, namespace, &last).await {
            Some((kept, problems)) => (kept, problems, why),
            // Not one read by name got an answer either: the API server is down (hanging, or
            // failing every request), not slowed by junk. As when it cannot be reached, the last
            // list serves.
            None => (
                last,
                Vec::new(),
                format!(
                    "{why}, and no module ConfigMap of the last list can be read by name either"
                ),
            ),
        },
        _ => (last, Vec::new(), why),
    };
    // The modules the operator last configured serve; nothing in this backup changes: not Velero's
    // to count (docs/operation.md#what-velero-counts).
    tracing::info!(
        configmaps = last.len(),
        "{why}; serving the module ConfigMaps of the last successful list instead"
    );
    Some(ConfigMapModules {
        configmaps: last,
        problems,
        last_good: Some(cache.last_good()),
        fallback: Some(why),
        ..ConfigMapModules::default()
    })
}

/// The ConfigMaps of the last list that are still there, unchanged (each read by name: one object,
/// bounded like any answer), and a problem for each deleted or changed since, or that cannot be read
/// within [`LIST_TIMEOUT`]: the API server answers, so a ConfigMap it does not confirm is not served.
/// `None` when no read got an answer (each ran out of time, or the server could not be reached or
/// failed it to the end of its retries): the API server is then not answering at all, an outage,
/// not a list someone keeps large or slow (that leaves a read of one object by name quick).
async fn still_listed(
    cluster: &LazyCluster,
    namespace: &str,
    last: &[Cached],
) -> Option<(Vec<Cached>, Vec<Problem>)> {
    let api = ApiResource::new("", "v1", "configmaps");
    let mut kept = Vec::new();
    let mut problems = Vec::new();
    let mut answered = last.is_empty();
    let deadline = tokio::time::Instant::now() + LIST_TIMEOUT;
    for cached in last {
        let read =
            tokio::time::timeout_at(deadline, cluster.get(&api, namespace, &cached.configmap))
                .await;
        // Out of time, unreachable, or a 5xx/429 to the end of its retries: no answer.
        answered |= !matches!(read, Err(_) | Ok(Err(KubeError::Other(_))));
        let gone = match read {
            Ok(Ok(now)) => {
                let field = |name: &str| {
                    now.pointer(&format!("/metadata/{name}"))
                        .and_then(Value::as_str)
                };
                let same = field("resourceVersion") == Some(cached.resource_version.as_str())
                    && (cached.uid.is_empty() || field("uid") == Some(cached.uid.as_str()));
                (!same).then(|| "changed since".to_string())
            }
            Ok(Err(KubeError::NotFound(_))) => Some("deleted since".to_string()),
            Ok(Err(e)) => Some(format!(
                "cannot be read ({e}), so not known to be unchanged since"
            )),
            Err(_) => Some(format!(
                "cannot be read within {} s, so not known to be unchanged since",
                LIST_TIMEOUT.as_secs()
            )),
        };
        match gone {
            None => kept.push(cached.clone()),
            // No module named: a last good version must not stand in for it either.
            Some(how) => problems.push(Problem {
                configmap: cached.configmap.clone(),
                status: None,
                shadow: cached.shadow,
                module: None,
                uid: Some(cached.uid.clone()),
                message: format!(
                    "ConfigMap {} (module {}): {how} the last list that could be read; not served",
                    cached.configmap, cached.module
                ),
            }),
        }
    }
    answered.then_some((kept, problems))
}
