//! The module plan: which component serves each module name, from every source and under every
//! policy of docs/modules.md. Stock modules first, then the module directory, then the module
//! ConfigMaps (each later source replaces a module of the same name), overrides of stock modules,
//! signatures and trusted keys, the last good copies, each module's failure policy, and shadows
//! last. The runtime only compiles what the plan gives it and swaps what serves; the plugin and
//! the CLI put their modules in service through this one place.

mod choose;
mod fallback;
mod load;
mod policy;
mod problem;
mod rollback;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::modules::configmaps::ConfigMapModules;
use crate::modules::{
    scan_directory, LastGood, ModuleSource, Origin, OverrideFile, StockChoice, TrustedKeys,
    VersionFloor,
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
    let StockInService {
        sources: stock,
        mut problems,
    } = stock;
    let trusted = config.trusted_keys.as_ref();
    let annotations = config
        .configmaps
        .as_ref()
        .map(|c| annotated_policies(c, &mut problems))
        .unwrap_or_default();
    let sources = Sources {
        stock: &stock,
        trusted,
        annotations: &annotations,
        floor: config.floor.as_ref(),
    };

    // Read every source first: which modules are still to come.
    let directory = match &config.directory {
        Some(dir) => Some(scan_directory(dir, trusted)?),
        None => None,
    };
    let ConfigMapPlan {
        chosen,
        shadows,
        early_broken,
    } = config
        .configmaps
        .as_ref()
        .map(|configmaps| plan_configmaps(configmaps, trusted, &mut problems))
        .unwrap_or_default();
    let from_configmaps: BTreeSet<String> = chosen
        .iter()
        .map(|(cached, _)| cached.module.clone())
        .chain(early_broken.iter().map(|b| b.module.clone()))
        .collect();
    let from_directory: BTreeSet<String> = directory.as_ref().map(scan_names).unwrap_or_default();
    // A module with a shadow is settled once its shadow is loaded too: the shadow sees every call.
    let shadowed: BTreeSet<String> = shadows.iter().map(|(c, _)| c.module.clone()).collect();
    let settle = |name: &str| {
        if !shadowed.contains(name) {
            runtime.loading().settled(name);
        }
    };
    runtime.loading().known(
        from_directory
            .union(&from_configmaps)
            .chain(&shadowed)
            .cloned()
            .collect(),
    );

    if let (Some(scan), Some(_)) = (directory, &config.directory) {
        let last_good = open_last_good(config.last_good.as_ref(), &mut problems);
        let broken = load_scan(
            runtime,
            scan,
            last_good,
            sources,
            &|o: &OverrideFile| Origin::File(o.path.clone()),
            &mut problems,
        )
        .await;
        fall_back(runtime, broken, last_good, sources, &mut problems).await;
        for name in from_directory.difference(&from_configmaps) {
            settle(name);
        }
    }
    if let Some(configmaps) = &config.configmaps {
        let plan = ConfigMapPlan {
            chosen,
            shadows: Vec::new(),
            early_broken,
        };
        load_configmap_modules(runtime, configmaps, plan, sources, &settle, &mut problems).await;
    }
    record_policies(runtime, &annotations);
    for (cached, scan) in shadows {
        load_shadows(runtime, cached, scan, sources, &mut problems).await;
        runtime.loading().settled(&cached.module);
    }
    Ok(problems)
}
