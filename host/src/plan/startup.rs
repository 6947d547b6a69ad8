//! The plugin's start-up loading, once Velero has its socket: the stock modules serve first, the
//! module ConfigMaps are listed while the version floor kept in the cluster is read, the module
//! directory and the ConfigMaps that need no pull go in service while the artifacts others name are
//! pulled, then the pulled ones; the floor goes back to the cluster before calls stop waiting, each
//! module ConfigMap is told what became of it, and what serves from the compile cache compiles last.
//! [`Startup::run`] is the one entry; the plugin is told when every module serves, to do what is
//! Velero's (the kept listing, the retired actions, the status), through a callback.
//!
//! This is also the one driver of the version floor kept in the cluster
//! ([`cluster_floor`]): it is read here before any module beyond the stock ones loads, and written
//! back here once they serve.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::configmap_report;
use super::problem::{LoadProblem, Remark};
use super::{load_stock_modules, ModuleConfig, Staged};
use crate::action::slot::Listed;
use crate::cluster::live::LazyCluster;
use crate::config::Config;
use crate::modules::configmaps::{self, ConfigMapModules};
use crate::modules::signature::TRUSTED_KEYS_ENV;
use crate::modules::{
    self, cluster_floor, LastGood, StockChoice, TrustedKeys, VersionFloor, MODULES_ENV,
};
use crate::runtime::Runtime;

/// What the plugin's start-up loading needs: the plugin builds it once Velero has its socket and
/// runs it on a task of its own ([`Startup::run`]).
pub(crate) struct Startup {
    /// The runtime the modules are put in service in (its loading began: calls wait for it).
    pub(crate) runtime: Arc<Runtime>,
    /// The cluster the module ConfigMaps and the version floor are read from.
    pub(crate) cluster: Arc<LazyCluster>,
    /// The state directory: ConfigMaps written out, last good copies, the version floor.
    pub(crate) state: Option<PathBuf>,
    /// The module directory (`$VELERO_WASM_MODULES`).
    pub(crate) directory: Option<PathBuf>,
    /// The stock modules to load (`$VELERO_WASM_STOCK`).
    pub(crate) stock: StockChoice,
    /// What Velero listed when its pod started, as kept: which actions of a ConfigMap's module
    /// serve through a slot, for what each module ConfigMap is told.
    pub(crate) listed: Option<Vec<Listed>>,
    /// When the process started (the lines on loading and compiling say how long after).
    pub(crate) started: Instant,
    /// The process's configuration (module ConfigMaps, OCI pulls, trusted keys).
    pub(crate) config: Config,
}

impl Startup {
    /// Reads the module ConfigMaps, loads every source, calls `serving` once every module serves
    /// (before calls stop waiting: the plugin tells its dispatch which listed actions are retired
    /// and writes the status there), then compiles what was put in service from the compile cache.
    pub(crate) async fn run(self, serving: impl FnOnce()) {
        let Startup {
            runtime,
            cluster,
            state,
            directory,
            stock,
            listed: kept_listing,
            started,
            config,
        } = self;
        // One floor, read from the cluster into it here, then held to by the module plan.
        let floor = state.as_deref().map(VersionFloor::at);
        // However this task ends, calls stop waiting for it.
        let _finish = FinishLoading(runtime.clone());
        let velero_namespace = runtime
            .services()
            .environment
            .velero_namespace()
            .to_string();
        // The stock modules serve first: once the ConfigMaps are listed, a call to one that no
        // other source replaces runs while the artifacts the ConfigMaps name are still pulled.
        let in_service = load_stock_modules(&runtime, &stock).await;
        let modules = module_config(
            state.as_deref(),
            directory.as_deref(),
            stock,
            floor.clone(),
            &config,
        );
        let (list_tx, list_rx) = tokio::sync::oneshot::channel::<configmaps::Listed>();
        let on_list = |listed: configmaps::Listed| {
            let from_directory = match directory.as_deref() {
                Some(dir) => modules::directory_names(dir),
                None => Some(BTreeSet::new()),
            };
            // Every module these sources may put in service waits; the rest serve as they are.
            if let Some(from_directory) = from_directory {
                runtime.loading().known(
                    listed
                        .labelled
                        .iter()
                        .cloned()
                        .chain(from_directory)
                        .collect(),
                );
            }
            let _ = list_tx.send(listed);
        };
        // While the artifacts are pulled, the directory and the ConfigMaps that need no pull go
        // in service (once the floor they are held to is read).
        let early = async {
            let cluster_floor =
                pull_version_floor(&cluster, &velero_namespace, floor.clone(), &config).await;
            let listed = list_rx.await.ok();
            let mut staged = Staged::new(&runtime, &modules, in_service);
            let mut loaded = Ok(());
            if let Some(listed) = &listed {
                loaded = staged.directory(&listed.labelled).await;
                if loaded.is_ok() {
                    staged.configmaps(&listed.ready, &listed.to_pull).await;
                }
            }
            (cluster_floor, listed, staged, loaded)
        };
        let (configmaps, (cluster_floor, listed, mut staged, mut loaded)) = tokio::join!(
            configmaps::read(
                &cluster,
                &velero_namespace,
                state.as_deref(),
                &config,
                on_list
            ),
            early
        );
        match (&listed, &configmaps) {
            // The directory cannot be read: nothing more loads (as when it is read first).
            _ if loaded.is_err() => {}
            // Listed: what was pulled goes in service now.
            (Some(listed), Some(configmaps)) => {
                staged
                    .configmaps(&configmaps.only(&listed.to_pull), &BTreeSet::new())
                    .await;
            }
            (Some(_), None) => {}
            // Not listed (the channel is off, or the last list serves): every source, in order.
            (None, configmaps) => {
                let claimed = configmaps
                    .as_ref()
                    .map(ConfigMapModules::modules)
                    .unwrap_or_default();
                loaded = staged.directory(&claimed).await;
                if let (Ok(()), Some(configmaps)) = (&loaded, configmaps) {
                    staged.configmaps(configmaps, &BTreeSet::new()).await;
                }
            }
        }
        // When the ConfigMaps that need a pull could not be written, those that need none serve.
        let configmaps_serving = configmaps.as_ref().or(listed.as_ref().map(|l| &l.ready));
        let loaded = loaded.map(|()| staged.finish());
        let state_report = configmap_report::Report {
            cluster: cluster.clone(),
            velero_namespace: velero_namespace.clone(),
            configmaps: configmaps_serving.cloned(),
            problems: loaded.as_ref().map(Vec::clone).unwrap_or_default(),
            catalog: runtime.catalog(),
            listed: kept_listing,
        };
        report_loaded(&runtime, loaded, directory.as_deref(), configmaps_serving);
        let actions = runtime.catalog().actions().count();
        // What is Velero's: the listing it holds, the actions retired, the status.
        serving();
        // Before the modules are all in: `ListPlugins` (never a call to a module already settled)
        // waits for it, so a plugin stopped right after its first list has recorded its floor.
        if let Some((floor, namespace)) = cluster_floor {
            push_version_floor(&cluster, &namespace, &floor).await;
        }
        runtime.loading().finish();
        // What became of each module ConfigMap, written on it: after the modules serve, never
        // in the way of a call.
        state_report.spawn(&config);
        tracing::debug!(
            actions,
            loaded_ms = started.elapsed().as_millis() as u64,
            "modules loaded"
        );
        // Modules put in service from their cached description compile now, in the background,
        // rather than in the first call to each.
        runtime.compile_all().await;
        tracing::debug!(
            compiled_ms = started.elapsed().as_millis() as u64,
            compile_budget_mib = runtime.compile_budget().limit() >> 20,
            compile_peak_reserved_mib = runtime.compile_budget().peak() >> 20,
            "modules compiled"
        );
    }
}

/// With trusted keys, and the cluster read (in a pod, or `VELERO_WASM_CONFIGMAPS=on`), the version
/// floor kept in the cluster read into `floor` ([`cluster_floor`]); with the namespace it is kept in,
/// to write it back once the modules serve. When it cannot be read, the floor is unknown, which
/// refuses signed modules the state directory has no record of: a warning says so.
async fn pull_version_floor(
    cluster: &LazyCluster,
    velero_namespace: &str,
    floor: Option<VersionFloor>,
    config: &Config,
) -> Option<(VersionFloor, String)> {
    let floor = floor?;
    config.trusted_keys()?;
    let (switch, _) = configmaps::Switch::from_config(config);
    if !(switch.enabled(config.in_pod()) || configmaps::Switch::Auto.enabled(config.in_pod())) {
        return None;
    }
    let Some(namespace) = configmaps::namespace_of(cluster, velero_namespace).await else {
        let why = format!(
            "Secret {}: no cluster to ask within {} s",
            cluster_floor::SECRET,
            configmaps::LIST_TIMEOUT.as_secs()
        );
        floor.set_cluster_unknown(Some(why.clone()));
        tracing::warn!("{}", floor_unknown(&why));
        return None;
    };
    if let Some(why) = cluster_floor::pull(cluster, &namespace, &floor).await {
        tracing::warn!("{}", floor_unknown(&why));
    }
    Some((floor, namespace))
}

/// The line about a cluster floor that cannot be read.
fn floor_unknown(why: &str) -> String {
    format!(
        "the version floor kept in the cluster cannot be read: {why}; signed modules this pod's state directory has no record of are refused until it can be (velero-wasm rbac --trusted-keys prints the Role and Secret it needs)"
    )
}

/// Writes the state directory's floor back to the cluster's ([`cluster_floor::push`]); a failure is
/// a warning: the next pod would not know the versions this one served.
async fn push_version_floor(cluster: &LazyCluster, namespace: &str, floor: &VersionFloor) {
    match cluster_floor::push(cluster, namespace, floor).await {
        Ok(pushed) if pushed.raised.is_empty() => {}
        Ok(pushed) => tracing::info!(
            modules = pushed.raised.join(","),
            created = pushed.created,
            "version floor raised in Secret {namespace}/{}",
            cluster_floor::SECRET
        ),
        Err(e) => tracing::warn!(
            "the version served cannot be recorded in the cluster: {e}; after a restart this pod's versions are not held to (velero-wasm rbac --trusted-keys prints the Role and Secret it needs)"
        ),
    }
}

/// Ends loading when dropped, so that a loading task that fails never leaves calls waiting.
struct FinishLoading(Arc<Runtime>);

impl Drop for FinishLoading {
    fn drop(&mut self) {
        self.0.loading().finish();
    }
}

/// Where the plugin's modules come from beyond the stock ones: `$VELERO_WASM_MODULES` (its last good
/// versions kept under the state directory), the trusted keys and the version floor. The module
/// ConfigMaps are given to each step of loading as they arrive.
fn module_config(
    state: Option<&Path>,
    directory: Option<&Path>,
    stock: StockChoice,
    floor: Option<VersionFloor>,
    config: &Config,
) -> ModuleConfig {
    let last_good = match (state, directory) {
        (Some(state), Some(dir)) => Some(LastGood::for_directory(state, dir)),
        _ => None,
    };
    ModuleConfig {
        directory: directory.map(Path::to_path_buf),
        last_good,
        stock,
        trusted_keys: trusted_keys(config),
        configmaps: None,
        floor,
    }
}

/// Logs what loading the modules gave: each problem (an error line when nothing stands in for the
/// module, a warning when an earlier version or another source's module does), then one line
/// naming where each module in service comes from.
fn report_loaded(
    runtime: &Runtime,
    loaded: Result<Vec<LoadProblem>, std::io::Error>,
    directory: Option<&Path>,
    configmaps: Option<&ConfigMapModules>,
) {
    let counts = configmaps
        .map(|c| format!("{} written, {} cached", c.written, c.cached))
        .unwrap_or_else(|| "not read".to_string());
    let mut rejected = Vec::new();
    match loaded {
        Ok(problems) => {
            for problem in problems {
                // A shadow's problem leaves the serving module as it was: not Velero's to count
                // (docs/operation.md#what-velero-counts); `velero-wasm status` lists the shadows loaded.
                if problem.shadow {
                    tracing::info!(shadow = true, "{problem}");
                } else if problem.refused {
                    // A failure policy refused the module: each item its actions are given fails
                    // with the reason, which is what Velero counts (docs/modules.md#s2-3).
                    tracing::info!(refused = true, "{problem}");
                } else if problem.remark == Remark::DeprecatedSettingsSchema {
                    // Said once where the operator looks (the ConfigMap's Events, `velero-wasm
                    // status`), not counted in every backup (Velero starts a process per backup).
                    tracing::info!(deprecated = true, "{problem}");
                } else if problem.served {
                    tracing::warn!("{problem}");
                } else {
                    tracing::error!("{problem}");
                }
                if problem.broken {
                    rejected.push(problem.message);
                }
            }
        }
        Err(e) => {
            let dir = directory.unwrap_or(Path::new(""));
            tracing::error!("{MODULES_ENV}={}: cannot be read: {e}", dir.display());
        }
    }
    let sources: Vec<String> = runtime
        .catalog()
        .modules()
        .map(|m| format!("{}: {}", m.name, m.origin))
        .collect();
    tracing::info!(
        modules = sources.join("; "),
        rejected = rejected.join(" | "),
        configmaps = counts,
        "modules in service"
    );
}

/// The keys of `$VELERO_WASM_TRUSTED_KEYS`, if it is set. Keys that cannot be read are an error line,
/// and then no module that needs a signature loads (rather than every module loading unchecked).
fn trusted_keys(config: &Config) -> Option<TrustedKeys> {
    let path = config.trusted_keys()?;
    Some(match TrustedKeys::load(&path) {
        Ok(keys) => {
            tracing::info!(
                keys = %keys.ids().join(","),
                "{TRUSTED_KEYS_ENV}={}: only modules signed by one of these keys are loaded",
                path.display()
            );
            keys
        }
        Err(e) => {
            tracing::error!(
                "{TRUSTED_KEYS_ENV}: {e}: no module beyond the stock ones can be verified, so none is loaded"
            );
            TrustedKeys::unusable(&path, e.to_string())
        }
    })
}
