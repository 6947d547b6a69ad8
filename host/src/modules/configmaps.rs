//! Module ConfigMaps read through the API: at each plugin start the host lists the ConfigMaps labelled
//! [`LABEL`] in Velero's namespace, writes each into its own directory of the state directory
//! (`configmaps/<uid>-<resourceVersion>/`, the files side by side as in a module directory) and loads
//! them with the directory loader, so a module is validated the same way whichever way it came. No
//! Deployment change and no kubelet delay: the next plugin process Velero starts serves the new
//! version.
//!
//! - **Layout**: `binaryData` (or `data`) holds `<name>.wasm` (or `<name>.wasm.gz`, see
//!   [`compression`]), `<name>.toml` and optionally `<name>.sig`; the label's value is `<name>`. A
//!   manifest without a component is a stock override. Or `data` holds one key, `<name>.oci`, naming
//!   an OCI artifact (`registry/repo:tag@sha256:…`): it is pulled ([`oci`](super::oci)) when its
//!   directory is first written, and the module's files come from it.
//! - **Cache**: a directory is written once per uid and resourceVersion (to a temporary name, then
//!   renamed, so one that exists is complete); a later process with the same ConfigMap reuses it.
//! - **Bounds**: the list is read within [`LIST_TIMEOUT`] and at most [`MAX_LIST_BYTES`]; a ConfigMap
//!   holding more than [`MAX_CONFIGMAP_BYTES`], or a key that is not `<name>.wasm|toml|sig`, is a
//!   problem reported for that ConfigMap, never a failure of the others.
//! - **Fallback**: the ConfigMaps of the last successful list are recorded ([`LISTING`]); when the API
//!   server cannot be reached or refuses the list, those are loaded, with a warning. When it answers
//!   but the list is larger than [`MAX_LIST_BYTES`] or slower than [`LIST_TIMEOUT`] (junk labelled
//!   as modules can do both), each ConfigMap of the last list is read by name first, and one deleted
//!   or changed since is not served: a deleted module must not stay in service for as long as
//!   someone keeps the list large.
//! - **Pruning**: a directory that is in neither the current list and has not been used for
//!   [`PRUNE_AFTER`] is removed (a process that started just before an update may still be reading
//!   the one it listed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde_json::Value;

use super::compression::{self, COMPRESSED_EXTENSION};
use super::identity::valid_module_name;
use super::last_good::LastGood;
use super::oci::{self, BlobStore, PullSettings};
use super::source::Origin;
use crate::backend::Backend;
use crate::cluster::live::LazyCluster;
use crate::cluster::{ApiResource, KubeApi, KubeCall, KubeError, ListOptions};
use crate::config::Config;

/// The label key module ConfigMaps carry (its value is the module's name).
pub const LABEL: &str = "velero-wasm.io/module";
/// The label that makes a module ConfigMap a shadow (value `"true"`): its module is called after the
/// serving module of the same name, on the same input, and compared with it; it never serves
/// (`crate::shadow`). Removing the label promotes it.
pub const SHADOW_LABEL: &str = "velero-wasm.io/shadow";
/// The annotation in which the plugin writes what became of a module ConfigMap (serving, shadowing,
/// refused, falling back) with a field manager of its own (the plan's `configmap_state`).
pub const STATUS_ANNOTATION: &str = "velero-wasm.io/status";
/// The environment variable that turns the channel on, off, or leaves it to the environment.
pub(crate) const SWITCH_ENV: &str = "VELERO_WASM_CONFIGMAPS";
/// The most a module ConfigMap may hold, its files decoded (the API server's object limit).
pub(crate) const MAX_CONFIGMAP_BYTES: u64 = 1 << 20;
/// The most the list of module ConfigMaps may take, all pages together.
pub(crate) const MAX_LIST_BYTES: u64 = 64 << 20;
/// How long connecting and listing may take at start (Velero's calls wait for the modules).
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an unused cached ConfigMap directory is kept after it left the list.
pub(crate) const PRUNE_AFTER: Duration = Duration::from_secs(600);
/// The file, in the cache, naming the ConfigMaps of the last successful list.
pub(crate) const LISTING: &str = "listing.json";

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
        match config.var(SWITCH_ENV).as_deref().map(str::trim) {
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

/// The module a listed ConfigMap's label names.
fn labelled_module(item: &Value) -> Option<String> {
    item.pointer("/metadata/labels")?
        .get(LABEL)?
        .as_str()
        .map(str::to_string)
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
async fn list_within(
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
            let pulled = pull_artifacts(cache, &later, cluster, namespace, config).await;
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

/// Lists the module ConfigMaps of `namespace` (bounded by [`MAX_LIST_BYTES`]; the caller bounds the
/// time).
pub(crate) async fn list(
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

/// One module ConfigMap, written out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cached {
    /// The ConfigMap's name.
    pub configmap: String,
    /// The module its label names (empty in a listing written by an earlier version).
    #[serde(default)]
    pub(crate) module: String,
    /// Its uid (empty in a listing written by an earlier version).
    #[serde(default)]
    pub(crate) uid: String,
    /// Its resourceVersion.
    #[serde(rename = "resourceVersion")]
    pub(crate) resource_version: String,
    /// The directory holding its files (`<uid>-<resourceVersion>`, inside the cache).
    pub dir: PathBuf,
    /// Labelled [`SHADOW_LABEL`]: its module is a shadow, not served.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) shadow: bool,
    /// Its annotation [`ANNOTATION`](super::failure_policy::ANNOTATION) as written: the module's
    /// failure policy when no manifest of it can be trusted (kept in the listing, for when the list
    /// cannot be read).
    #[serde(default, rename = "onFailure", skip_serializing_if = "Option::is_none")]
    pub(crate) on_failure: Option<String>,
    /// Its annotation [`STATUS_ANNOTATION`] as listed: what the plugin last wrote of its state (not
    /// kept in the listing: a ConfigMap of the last list is not written to).
    #[serde(skip)]
    pub(crate) status: Option<String>,
}

impl Cached {
    /// Where its modules come from, for people.
    pub(crate) fn origin(&self) -> Origin {
        Origin::ConfigMap {
            name: self.configmap.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
        }
    }
}

/// A ConfigMap that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The ConfigMap's name.
    pub(crate) configmap: String,
    /// The module it was meant to hold, when its label says.
    pub module: Option<String>,
    /// The ConfigMap's uid, when it has one (a module's last good version stands in for a broken
    /// ConfigMap only if it came from the same object, see `plan::load_modules`).
    pub(crate) uid: Option<String>,
    /// What is wrong, naming the ConfigMap.
    pub message: String,
    /// The ConfigMap was labelled a shadow: the module it names serves as before.
    pub(crate) shadow: bool,
    /// Its annotation [`STATUS_ANNOTATION`] as listed (none for a ConfigMap of the last list).
    pub(crate) status: Option<String>,
}

/// What reading the module ConfigMaps gave: the directories to load, in order, and what to report.
#[derive(Debug, Clone, Default)]
pub struct ConfigMapModules {
    /// The ConfigMaps to load, by name.
    pub configmaps: Vec<Cached>,
    /// ConfigMaps left out.
    pub problems: Vec<Problem>,
    /// Where the last good version of each ConfigMap module is kept.
    pub(crate) last_good: Option<LastGood>,
    /// Directories written by this process.
    pub written: usize,
    /// Directories an earlier process had written, used as they were.
    pub cached: usize,
    /// Old directories removed.
    pub(crate) pruned: usize,
    /// Set when the API could not be used and the last listed ConfigMaps are loaded instead.
    pub(crate) fallback: Option<String>,
    /// The annotation [`ANNOTATION`](super::failure_policy::ANNOTATION) of each listed ConfigMap that
    /// has one, by uid, those that could not be used too: what a module whose ConfigMap cannot be
    /// used falls back on is the ConfigMap's to say when no manifest of it can be trusted.
    pub(crate) on_failure: BTreeMap<String, String>,
}

impl ConfigMapModules {
    /// These ConfigMaps and `other`'s, as one list.
    fn merged(mut self, other: ConfigMapModules) -> ConfigMapModules {
        self.configmaps.extend(other.configmaps);
        self.configmaps
            .sort_by(|a, b| a.configmap.cmp(&b.configmap));
        self.problems.extend(other.problems);
        self.on_failure.extend(other.on_failure);
        self.written += other.written;
        self.cached += other.cached;
        self.pruned += other.pruned;
        self
    }

    /// Only the ConfigMaps (and problems, and annotations) of `modules`: a later loading step sees,
    /// and reports, nothing of the ConfigMaps an earlier one loaded.
    pub(crate) fn only(&self, modules: &BTreeSet<String>) -> ConfigMapModules {
        let of = |module: &str| modules.contains(module);
        let configmaps: Vec<Cached> = self
            .configmaps
            .iter()
            .filter(|c| of(&c.module))
            .cloned()
            .collect();
        let problems: Vec<Problem> = self
            .problems
            .iter()
            .filter(|p| p.module.as_deref().is_some_and(of))
            .cloned()
            .collect();
        let uids: BTreeSet<&str> = configmaps
            .iter()
            .map(|c| c.uid.as_str())
            .chain(problems.iter().filter_map(|p| p.uid.as_deref()))
            .collect();
        let on_failure = self
            .on_failure
            .iter()
            .filter(|(uid, _)| uids.contains(uid.as_str()))
            .map(|(uid, policy)| (uid.clone(), policy.clone()))
            .collect();
        ConfigMapModules {
            configmaps,
            problems,
            last_good: self.last_good.clone(),
            written: self.written,
            cached: self.cached,
            pruned: self.pruned,
            fallback: self.fallback.clone(),
            on_failure,
        }
    }

    /// Every module these ConfigMaps (those that could not be used too) name.
    pub(crate) fn modules(&self) -> BTreeSet<String> {
        self.configmaps
            .iter()
            .map(|c| c.module.clone())
            .chain(self.problems.iter().filter_map(|p| p.module.clone()))
            .collect()
    }
}

/// The ConfigMap cache of a state directory.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    dir: PathBuf,
}

impl Cache {
    /// The cache under `state` (`<state>/configmaps`).
    pub fn new(state: &Path) -> Cache {
        Cache {
            root: state.to_path_buf(),
            dir: state.join("configmaps"),
        }
    }

    /// Where it is.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store of last good ConfigMap modules that goes with it.
    pub(crate) fn last_good(&self) -> LastGood {
        LastGood::for_directory(&self.root, &self.dir)
    }

    /// Writes out the ConfigMaps of a list (those not already written), records the list, and prunes
    /// old directories. Fails only when the cache directory cannot be used.
    pub fn materialise(&self, items: &[Value]) -> Result<ConfigMapModules, CacheError> {
        self.materialise_pulled(items, &Pulls::new())
    }

    /// [`Cache::materialise`], with the artifacts pulled for the ConfigMaps that name one (by the
    /// directory they are written to; see [`pull_artifacts`]).
    pub(crate) fn materialise_pulled(
        &self,
        items: &[Value],
        pulled: &Pulls,
    ) -> Result<ConfigMapModules, CacheError> {
        let items: Vec<&Value> = items.iter().collect();
        self.record(self.write_all(&items, pulled)?)
    }

    /// Writes out the ConfigMaps of `items` not already written (those naming an artifact with
    /// what `pulled` holds for them), without recording them as a list.
    fn write_all(&self, items: &[&Value], pulled: &Pulls) -> Result<ConfigMapModules, CacheError> {
        crate::state::private_dir(&self.root, &self.dir)?;
        let mut out = ConfigMapModules {
            last_good: Some(self.last_good()),
            ..ConfigMapModules::default()
        };
        let mut sorted: Vec<&Value> = items.to_vec();
        sorted.sort_by_key(|cm| name_of(cm).to_string());
        for item in sorted {
            let configmap = name_of(item).to_string();
            if let Some(policy) = on_failure_of(item) {
                out.on_failure.insert(field_of(item, "uid"), policy);
            }
            let module = item
                .pointer("/metadata/labels")
                .and_then(|l| l.get(LABEL))
                .and_then(Value::as_str)
                .map(str::to_string);
            let shadow = is_shadow(item);
            let problem = |message: &dyn std::fmt::Display| Problem {
                configmap: configmap.clone(),
                status: status_of(item),
                shadow,
                module: module.clone(),
                uid: item
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                message: format!("ConfigMap {configmap}: {message}"),
            };
            let files = match files_of(item, module.as_deref()) {
                Ok(files) => files,
                Err(why) => {
                    out.problems.push(problem(&why));
                    continue;
                }
            };
            match self.write(item, module.as_deref().unwrap_or(""), &files, pulled) {
                Ok((cached, written)) => {
                    if written {
                        out.written += 1;
                    } else {
                        out.cached += 1;
                    }
                    out.configmaps.push(cached);
                }
                Err(why) => out.problems.push(problem(&why)),
            }
        }
        Ok(out)
    }

    /// Records `out`'s ConfigMaps as the last successful list and prunes the directories of
    /// earlier ones.
    fn record(&self, mut out: ConfigMapModules) -> Result<ConfigMapModules, CacheError> {
        let listing = serde_json::to_vec_pretty(&out.configmaps).unwrap_or_default();
        crate::state::write_atomically(&self.dir.join(LISTING), &listing).map_err(|source| {
            CacheError::Record {
                dir: self.dir.clone(),
                source,
            }
        })?;
        out.pruned = self.prune(&out.configmaps);
        Ok(out)
    }

    /// The ConfigMaps of the last successful list, as written then (those still there).
    pub fn last_listing(&self) -> Result<Vec<Cached>, CacheError> {
        crate::state::private_dir(&self.root, &self.dir)?;
        let path = self.dir.join(LISTING);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(CacheError::Unreadable { path, source }),
        };
        let listed: Vec<Cached> =
            serde_json::from_slice(&text).map_err(|source| CacheError::Invalid { path, source })?;
        Ok(listed
            .into_iter()
            .filter(|c| c.dir.parent() == Some(self.dir.as_path()) && c.dir.is_dir())
            .collect())
    }

    /// Writes one ConfigMap's files, unless a complete directory for its uid and resourceVersion is
    /// there already. Returns it and whether it was written now.
    fn write(
        &self,
        item: &Value,
        module: &str,
        files: &[(String, Vec<u8>)],
        pulled: &Pulls,
    ) -> Result<(Cached, bool), WriteError> {
        let dir = self.dir_of(item)?;
        let (uid, version) = (field_of(item, "uid"), field_of(item, "resourceVersion"));
        let cached = Cached {
            configmap: name_of(item).to_string(),
            module: module.to_string(),
            uid: uid.clone(),
            resource_version: version,
            dir: dir.clone(),
            shadow: is_shadow(item),
            on_failure: on_failure_of(item),
            status: status_of(item),
        };
        if dir.is_dir() {
            // Used again: not pruned while in use.
            if let Ok(handle) = std::fs::File::open(&dir) {
                let _ = handle.set_modified(SystemTime::now());
            }
            return Ok((cached, false));
        }
        // A ConfigMap naming an artifact is written with the artifact's files.
        let files = if is_artifact(files) {
            match pulled.get(&dir) {
                Some(Ok(files)) => files.as_slice(),
                Some(Err(why)) => return Err(WriteError::Pull(why.clone())),
                None => return Err(WriteError::NotPulled),
            }
        } else {
            files
        };
        let tmp = self.dir.join(format!(
            ".{uid}-{}.tmp{}",
            cached.resource_version,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        let written = (|| -> std::io::Result<()> {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
            for (key, bytes) in files {
                std::fs::write(tmp.join(key), bytes)?;
            }
            std::fs::rename(&tmp, &dir)
        })();
        match written {
            Ok(()) => Ok((cached, true)),
            // Another process wrote the same version first: use its directory.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok((cached, false))
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Err(WriteError::Write { dir, source: e })
            }
        }
    }

    /// The directory a ConfigMap is written to: `<uid>-<resourceVersion>`, or why it has none.
    fn dir_of(&self, item: &Value) -> Result<PathBuf, WriteError> {
        let field = |name: &str| {
            let value = item
                .pointer(&format!("/metadata/{name}"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if value.is_empty()
                || value.len() > 128
                || !value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                Err(WriteError::DirName {
                    field: name.to_string(),
                    value: value.to_string(),
                })
            } else {
                Ok(value.to_string())
            }
        };
        let (uid, version) = (field("uid")?, field("resourceVersion")?);
        Ok(self.dir.join(format!("{uid}-{version}")))
    }

    /// The pull `item` needs: it names an artifact and its directory is not written yet.
    fn pull_wanted(&self, item: &Value) -> Option<Wanted> {
        let module = labelled_module(item)?;
        let files = files_of(item, Some(&module)).ok()?;
        let dir = self.dir_of(item).ok()?;
        if dir.is_dir() || !is_artifact(&files) {
            return None;
        }
        Some(Wanted {
            dir,
            reference: String::from_utf8_lossy(&files[0].1).trim().to_string(),
            module,
            configmap: name_of(item).to_string(),
        })
    }

    /// Removes directories not in `keep` that have not been used for [`PRUNE_AFTER`].
    fn prune(&self, keep: &[Cached]) -> usize {
        let keep: BTreeSet<&Path> = keep.iter().map(|c| c.dir.as_path()).collect();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut pruned = 0;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let old = entry
                .metadata()
                .ok()
                .filter(|m| m.is_dir())
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > PRUNE_AFTER);
            if old && !keep.contains(path.as_path()) && std::fs::remove_dir_all(&path).is_ok() {
                pruned += 1;
            }
        }
        pruned
    }
}

/// A ConfigMap's status annotation ([`STATUS_ANNOTATION`]), as written.
fn status_of(item: &Value) -> Option<String> {
    item.pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS_ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A ConfigMap's failure-policy annotation, as written (checked where it is used).
fn on_failure_of(item: &Value) -> Option<String> {
    item.pointer("/metadata/annotations")
        .and_then(|a| a.get(super::failure_policy::ANNOTATION))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A `metadata` field of a ConfigMap, empty when it has none.
fn field_of(item: &Value, name: &str) -> String {
    item.pointer(&format!("/metadata/{name}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// A pull a listed ConfigMap needs ([`Cache::pull_wanted`]).
struct Wanted {
    /// The directory its files are written to.
    dir: PathBuf,
    /// The module its label names.
    module: String,
    /// The artifact it names.
    reference: String,
    /// The ConfigMap's name.
    configmap: String,
}

/// Whether a ConfigMap's files name an OCI artifact (`<name>.oci`) instead of holding the module.
fn is_artifact(files: &[(String, Vec<u8>)]) -> bool {
    files
        .iter()
        .any(|(key, _)| key.ends_with(&format!(".{}", oci::EXTENSION)))
}

/// The files pulled for ConfigMaps that name an artifact, by the directory each is written to (or
/// why its pull failed).
pub(crate) type Pulls = BTreeMap<PathBuf, Result<Vec<(String, Vec<u8>)>, PullError>>;

/// Pulls the artifacts the listed ConfigMaps name (those whose directory is not written yet), all
/// within [`oci::PULL_TIMEOUT`], with the settings of `config` and the credentials of the Secrets
/// its [`oci::PULL_SECRETS_ENV`] names.
pub(crate) async fn pull_artifacts(
    cache: &Cache,
    items: &[&Value],
    cluster: &LazyCluster,
    namespace: &str,
    config: &Config,
) -> Pulls {
    let wanted: Vec<(PathBuf, String, String, String)> = items
        .iter()
        .filter_map(|item| cache.pull_wanted(item))
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
    let store = BlobStore::new(&cache.root);
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
    let names = config.var(oci::PULL_SECRETS_ENV).unwrap_or_default();
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

/// Why the module ConfigMap cache cannot be used (then no ConfigMap module is loaded from it).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache directory is not private.
    #[error(transparent)]
    PrivateDir(#[from] crate::state::PrivateDirError),
    /// The list could not be recorded.
    #[error("cannot record the list in {}: {source}", dir.display())]
    Record {
        /// The cache directory.
        dir: PathBuf,
        /// Why the write failed.
        #[source]
        source: std::io::Error,
    },
    /// The recorded list cannot be read.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The list's file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The recorded list is not a list.
    #[error("{}: {source}", path.display())]
    Invalid {
        /// The list's file.
        path: PathBuf,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
}

/// Why one ConfigMap's files cannot be written to the cache.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// Its uid or resourceVersion cannot name a directory.
    #[error("metadata.{field} {value:?} is not usable as a directory name")]
    DirName {
        /// `uid` or `resourceVersion`.
        field: String,
        /// Its value.
        value: String,
    },
    /// The artifact it names could not be pulled.
    #[error(transparent)]
    Pull(PullError),
    /// The artifact it names was not pulled (it was not wanted when the pulls were made).
    #[error("its OCI artifact was not pulled")]
    NotPulled,
    /// The files could not be written.
    #[error("cannot be written to {}: {source}", dir.display())]
    Write {
        /// Its directory.
        dir: PathBuf,
        /// Why the write failed.
        #[source]
        source: std::io::Error,
    },
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

/// Whether a module ConfigMap is labelled a shadow ([`SHADOW_LABEL`] `"true"`).
pub(crate) fn is_shadow(item: &Value) -> bool {
    item.pointer("/metadata/labels")
        .and_then(|l| l.get(SHADOW_LABEL))
        .and_then(Value::as_str)
        == Some("true")
}

fn name_of(item: &Value) -> &str {
    item.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The files of a module ConfigMap (`data` as text, `binaryData` decoded), checked: keys
/// `<module>.wasm|toml|sig` only, none in both sections, at most [`MAX_CONFIGMAP_BYTES`] in all as
/// stored; a component stored compressed (`<module>.wasm.gz`) comes out expanded, as `<module>.wasm`.
/// `module` is the value of its [`LABEL`]. The host and `velero-wasm module verify` both check a
/// ConfigMap with it, so that verify passes exactly what the host would load.
pub(crate) fn files_of(
    item: &Value,
    module: Option<&str>,
) -> Result<Vec<(String, Vec<u8>)>, FilesError> {
    let module = match module {
        Some(m) if valid_module_name(m) => m,
        Some(m) => return Err(FilesError::Label(m.to_string())),
        None => return Err(FilesError::NoLabel),
    };
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut keys: Vec<&String> = Vec::new();
    let mut total: u64 = 0;
    for (section, binary) in [("data", false), ("binaryData", true)] {
        let Some(entries) = item.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (key, value) in entries {
            let allowed = ["wasm", COMPRESSED_EXTENSION, "toml", "sig", oci::EXTENSION]
                .map(|ext| format!("{module}.{ext}"));
            if !allowed.contains(key) {
                return Err(FilesError::Key {
                    section,
                    key: key.clone(),
                    allowed: allowed.join(", "),
                });
            }
            if keys.contains(&key) {
                return Err(FilesError::Both(key.clone()));
            }
            keys.push(key);
            let text = value.as_str().unwrap_or("");
            let bytes = if binary {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|source| FilesError::NotBase64 {
                        key: key.clone(),
                        source,
                    })?
            } else {
                text.as_bytes().to_vec()
            };
            total += bytes.len() as u64;
            if total > MAX_CONFIGMAP_BYTES {
                return Err(FilesError::TooLarge);
            }
            let (key, bytes) = compression::expanded(key, bytes)?;
            if files.iter().any(|(k, _)| *k == key) {
                return Err(FilesError::Twice(key));
            }
            files.push((key, bytes));
        }
    }
    if is_artifact(&files) {
        if files.len() > 1 {
            return Err(FilesError::ArtifactAndFiles(module.to_string()));
        }
        if let Err(why) = oci::Reference::parse(&String::from_utf8_lossy(&files[0].1)) {
            return Err(FilesError::Reference {
                module: module.to_string(),
                why,
            });
        }
        return Ok(files);
    }
    if !files.iter().any(|(k, _)| k.ends_with(".toml")) {
        return Err(FilesError::NoManifest(module.to_string()));
    }
    Ok(files)
}

/// Why a module ConfigMap's files are not a module's (see [`files_of`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    /// Its label is not a module name.
    #[error("label {LABEL}={0:?} is not a module name (lower-case letters, digits and '-', starting with a letter)")]
    Label(String),
    /// It has no label naming a module.
    #[error("label {LABEL} does not name a module")]
    NoLabel,
    /// A key that is not one of the module's files.
    #[error("{section} key {key:?} is not one of {allowed}")]
    Key {
        /// `data` or `binaryData`.
        section: &'static str,
        /// The key.
        key: String,
        /// The keys allowed, comma-separated.
        allowed: String,
    },
    /// A key in both sections.
    #[error("key {0:?} is in both data and binaryData")]
    Both(String),
    /// A binaryData value that is not base64.
    #[error("binaryData key {key:?} is not base64: {source}")]
    NotBase64 {
        /// The key.
        key: String,
        /// What the decoder said.
        #[source]
        source: base64::DecodeError,
    },
    /// More than a ConfigMap may hold.
    #[error(
        "holds more than {MAX_CONFIGMAP_BYTES} bytes (1 MiB), the most a module ConfigMap may hold"
    )]
    TooLarge,
    /// A compressed component that does not expand.
    #[error(transparent)]
    Packed(#[from] compression::KeyExpandError),
    /// The component both as it is and compressed.
    #[error("it holds {0} both as it is and compressed")]
    Twice(String),
    /// An artifact reference beside files.
    #[error("it names an OCI artifact ({0}.{ext}) and holds files as well: the component, manifest and signature come from the artifact, so it must hold {0}.{ext} alone", ext = oci::EXTENSION)]
    ArtifactAndFiles(String),
    /// An artifact reference that does not parse.
    #[error("{module}.{ext}: {why}", ext = oci::EXTENSION)]
    Reference {
        /// The module.
        module: String,
        /// What the parser said.
        why: oci::ReferenceError,
    },
    /// No manifest.
    #[error("it has no {0}.toml")]
    NoManifest(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(configmap: &str, module: &str, uid: &str) -> Cached {
        Cached {
            configmap: configmap.into(),
            module: module.into(),
            uid: uid.into(),
            resource_version: "1".into(),
            dir: PathBuf::new(),
            shadow: false,
            on_failure: None,
            status: None,
        }
    }

    #[test]
    fn only_keeps_the_annotations_of_the_configmaps_it_keeps() {
        let all = ConfigMapModules {
            configmaps: vec![
                cached("inline", "inline", "uid-a"),
                cached("pulled", "pulled", "uid-b"),
            ],
            problems: vec![Problem {
                configmap: "broken".into(),
                module: Some("broken".into()),
                uid: Some("uid-c".into()),
                message: "ConfigMap broken: no manifest".into(),
                shadow: false,
                status: None,
            }],
            on_failure: [("uid-a", "bogus"), ("uid-b", "stock"), ("uid-c", "refuse")]
                .map(|(uid, policy)| (uid.to_string(), policy.to_string()))
                .into(),
            ..ConfigMapModules::default()
        };
        let later = all.only(&BTreeSet::from([
            "pulled".to_string(),
            "broken".to_string(),
        ]));
        let names: Vec<&str> = later
            .configmaps
            .iter()
            .map(|c| c.configmap.as_str())
            .collect();
        assert_eq!(names, ["pulled"]);
        assert_eq!(later.problems.len(), 1);
        // The inline ConfigMap's annotation was read (and, being no policy, reported) by the step
        // that loaded it: a later step does not report it again.
        let uids: Vec<&str> = later.on_failure.keys().map(String::as_str).collect();
        assert_eq!(uids, ["uid-b", "uid-c"]);
    }
}
