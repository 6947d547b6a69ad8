//! The module plan: which component serves each module name, from every source and under every
//! policy of docs/modules.md. Stock modules first, then the module directory, then the module
//! ConfigMaps (each later source replaces a module of the same name), overrides of stock modules,
//! signatures and trusted keys, the last good copies, each module's failure policy, and shadows
//! last. The runtime only compiles what the plan gives it and swaps what serves; the plugin and
//! the CLI put their modules in service through this one place. Once they serve, each module
//! ConfigMap is told what became of it ([`configmap_state`], written by [`configmap_report`]).

mod choose;
pub(crate) mod configmap_report;
pub(crate) mod configmap_state;
mod fallback;
mod load;
mod policy;
mod problem;
mod rollback;
pub(crate) mod startup;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::modules::configmaps::ConfigMapModules;
use crate::modules::{
    scan_directory, FailurePolicy, LastGood, ModuleSource, Origin, OverrideFile, StockChoice,
    TrustedKeys, VersionFloor,
};
use crate::runtime::Runtime;
use choose::{plan_configmaps, scan_names, ConfigMapPlan};
use fallback::{fall_back, open_last_good, record_policies};
use load::{load_configmap_modules, load_scan, load_shadows, load_stock};
use policy::{annotated_policies, Sources};
pub(crate) use problem::LoadProblem;

/// The stock modules in service, with what was worth reporting about them
/// ([`load_stock_modules`]); later sources fall back to them.
#[derive(Debug, Default)]
pub(crate) struct StockInService {
    sources: BTreeMap<String, ModuleSource>,
    problems: Vec<LoadProblem>,
}

/// Where a host's modules come from, beyond the stock ones.
#[derive(Debug, Clone, Default)]
pub struct ModuleConfig {
    /// The module directory (`--modules`, `VELERO_WASM_MODULES`): adds modules, replaces stock ones by name.
    pub directory: Option<PathBuf>,
    /// Where the last good version of each directory module is kept, for when an update is broken.
    pub last_good: Option<LastGood>,
    /// Which stock modules load (`VELERO_WASM_STOCK`, `--stock`).
    pub stock: StockChoice,
    /// The keys a module that is not stock must be signed by (`VELERO_WASM_TRUSTED_KEYS`,
    /// `--trusted-keys`); none: signatures are checked when present, not required.
    pub trusted_keys: Option<TrustedKeys>,
    /// The module ConfigMaps read through the API (already written out), loaded after the directory.
    pub configmaps: Option<ConfigMapModules>,
    /// Rollback protection: a module signed by a trusted key is refused below the version this floor
    /// has seen served, and each one that serves raises it ([`VersionFloor`]).
    pub floor: Option<VersionFloor>,
}

/// Loads the stock modules `config.stock` chooses (concurrently: the work is reading, checking
/// and mapping compiled code, one module per core), then those of the module directory, then
/// those of the module ConfigMaps: each later source replaces a module of the same name (stock <
/// directory < ConfigMap). A module whose signature is refused (`config.trusted_keys`) cannot be
/// used. A module that cannot be used falls back to its last good version from the same source, if
/// one was remembered, else to what already serves under its name (a stock module, or the
/// directory's). A manifest without a component overrides the stock module of its name. Returns
/// what is worth reporting; fails only when the directory itself cannot be read.
///
/// Every source is read before any module beyond the stock ones compiles, and [`Runtime::loading`]
/// then knows which modules are still to come: a call to another module need not wait for them,
/// and the ConfigMap module a call waits for compiles next.
pub async fn load_modules(
    runtime: &Runtime,
    config: &ModuleConfig,
) -> Result<Vec<LoadProblem>, std::io::Error> {
    let stock = load_stock_modules(runtime, &config.stock).await;
    load_beyond_stock(runtime, config, stock).await
}

/// Puts the stock modules `choice` names in service (the first step of [`load_modules`]),
/// so that they can serve while the other sources are still read: a plugin does this before it
/// lists the module ConfigMaps and pulls the artifacts they name.
pub(crate) async fn load_stock_modules(runtime: &Runtime, choice: &StockChoice) -> StockInService {
    let mut problems = Vec::new();
    let sources = load_stock(runtime, choice, &mut problems).await;
    StockInService { sources, problems }
}

/// The rest of [`load_modules`] once `stock` ([`load_stock_modules`] of
/// `config.stock`) serves: the module directory, then the module ConfigMaps.
pub(crate) async fn load_beyond_stock(
    runtime: &Runtime,
    config: &ModuleConfig,
    stock: StockInService,
) -> Result<Vec<LoadProblem>, std::io::Error> {
    let mut staged = Staged::new(runtime, config, stock);
    let claimed = config
        .configmaps
        .as_ref()
        .map(ConfigMapModules::modules)
        .unwrap_or_default();
    staged.directory(&claimed).await?;
    if let Some(configmaps) = &config.configmaps {
        staged.configmaps(configmaps, &BTreeSet::new()).await;
    }
    Ok(staged.finish())
}

/// [`load_beyond_stock`] one source at a time, as each arrives: a plugin puts the module directory
/// and the ConfigMaps that need no pull in service while the artifacts others name are pulled. The
/// steps go in this order: [`Staged::directory`], then [`Staged::configmaps`] once or more (each
/// time for other modules), then [`Staged::finish`].
pub(crate) struct Staged<'a> {
    runtime: &'a Runtime,
    /// The directory, its last good store, the trusted keys and the floor (not its ConfigMaps,
    /// which each step is given).
    config: &'a ModuleConfig,
    stock: BTreeMap<String, ModuleSource>,
    /// The failure policies ConfigMaps state in their annotation, by uid, of every step so far.
    annotations: BTreeMap<String, FailurePolicy>,
    problems: Vec<LoadProblem>,
}

impl<'a> Staged<'a> {
    /// Loading beyond `stock`, with the sources `config` names.
    pub(crate) fn new(
        runtime: &'a Runtime,
        config: &'a ModuleConfig,
        stock: StockInService,
    ) -> Staged<'a> {
        Staged {
            runtime,
            config,
            stock: stock.sources,
            annotations: BTreeMap::new(),
            problems: stock.problems,
        }
    }

    fn sources(&self) -> Sources<'_> {
        Sources {
            stock: &self.stock,
            trusted: self.config.trusted_keys.as_ref(),
            annotations: &self.annotations,
            floor: self.config.floor.as_ref(),
        }
    }

    /// Puts the module directory's modules in service. Those of a module in `claimed` (named by a
    /// module ConfigMap, which replaces it) stay awaited: calls to them wait for the ConfigMaps.
    /// Fails only when the directory itself cannot be read.
    pub(crate) async fn directory(
        &mut self,
        claimed: &BTreeSet<String>,
    ) -> Result<(), std::io::Error> {
        let Some(dir) = &self.config.directory else {
            self.runtime.loading().known(claimed.clone());
            return Ok(());
        };
        let scan = scan_directory(dir, self.config.trusted_keys.as_ref())?;
        let from_directory = scan_names(&scan);
        self.runtime
            .loading()
            .known(from_directory.union(claimed).cloned().collect());
        let mut problems = std::mem::take(&mut self.problems);
        let last_good = open_last_good(self.config.last_good.as_ref(), &mut problems);
        let sources = self.sources();
        let broken = load_scan(
            self.runtime,
            scan,
            last_good,
            sources,
            &|o: &OverrideFile| Origin::File(o.path.clone()),
            &mut problems,
        )
        .await;
        fall_back(self.runtime, broken, last_good, sources, &mut problems).await;
        for name in from_directory.difference(claimed) {
            self.runtime.loading().settled(name);
        }
        self.problems = problems;
        Ok(())
    }

    /// Puts the modules of `configmaps` in service (their shadows too); the modules in `to_come`
    /// come with a later step, so calls to them keep waiting.
    pub(crate) async fn configmaps(
        &mut self,
        configmaps: &ConfigMapModules,
        to_come: &BTreeSet<String>,
    ) {
        let mut problems = std::mem::take(&mut self.problems);
        self.annotations
            .extend(annotated_policies(configmaps, &mut problems));
        let trusted = self.config.trusted_keys.as_ref();
        let ConfigMapPlan {
            chosen,
            shadows,
            early_broken,
        } = plan_configmaps(configmaps, trusted, &mut problems);
        // A module with a shadow is settled once its shadow is loaded too: the shadow sees every call.
        let shadowed: BTreeSet<String> = shadows.iter().map(|(c, _)| c.module.clone()).collect();
        let runtime = self.runtime;
        runtime.loading().known(
            chosen
                .iter()
                .map(|(cached, _)| cached.module.clone())
                .chain(early_broken.iter().map(|b| b.module.clone()))
                .chain(shadowed.iter().cloned())
                .chain(to_come.iter().cloned())
                .collect(),
        );
        let settle = |name: &str| {
            if !shadowed.contains(name) {
                runtime.loading().settled(name);
            }
        };
        let sources = self.sources();
        let plan = ConfigMapPlan {
            chosen,
            shadows: Vec::new(),
            early_broken,
        };
        load_configmap_modules(runtime, configmaps, plan, sources, &settle, &mut problems).await;
        for (cached, scan) in shadows {
            load_shadows(runtime, cached, scan, sources, &mut problems).await;
            runtime.loading().settled(&cached.module);
        }
        self.problems = problems;
    }

    /// Records the failure policy in force for each module in service; what was worth reporting.
    pub(crate) fn finish(self) -> Vec<LoadProblem> {
        record_policies(self.runtime, &self.annotations);
        self.problems
    }
}
