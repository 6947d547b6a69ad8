//! Putting in service what each source holds: the stock modules, a directory scan (or a
//! ConfigMap's copy) and its overrides of stock modules, the chosen ConfigMaps, and shadows.

use std::collections::BTreeMap;

use futures::future::join_all;

use super::choose::ConfigMapPlan;
use super::fallback::{fall_back, open_last_good, record_trigger, refuse, serving};
use super::policy::{outcome_of, Sources, ANNOTATION_SOURCE, MANIFEST_SOURCE};
use super::problem::{Broken, LoadProblem, Remark};
use super::rollback::{serve, shadow};
use crate::modules::configmaps::{Cached, ConfigMapModules};
use crate::modules::{
    chosen_stock_modules, stock_override, DirectoryScan, FailurePolicy, LastGood, ModuleSource,
    Origin, OverrideFile, StockChoice,
};
use crate::runtime::Runtime;

/// Loads the stock modules `choice` names, concurrently (the work is reading, checking and mapping
/// compiled code, one module per core); returns their sources, which a manifest without a
/// component overrides.
pub(super) async fn load_stock(
    runtime: &Runtime,
    choice: &StockChoice,
    problems: &mut Vec<LoadProblem>,
) -> BTreeMap<String, ModuleSource> {
    let mut stock = BTreeMap::new();
    for source in chosen_stock_modules(choice) {
        match source {
            Ok(source) => {
                stock.insert(source.name.clone(), source);
            }
            Err(problem) => problems.push(LoadProblem::not_served(problem.to_string())),
        }
    }
    let loads = join_all(stock.values().map(|source| runtime.load(source.clone()))).await;
    for loaded in loads {
        match loaded {
            Ok(loaded) => {
                problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning));
                problems.extend(loaded.deprecations.into_iter().map(LoadProblem::deprecated));
            }
            Err(e) => problems.push(LoadProblem::not_served(e.to_string())),
        }
    }
    stock
}

/// Loads the modules of the ConfigMaps `plan` chose, the one a call waits for first; a module
/// whose ConfigMap cannot be used falls back to its last good version, or to what already serves.
pub(super) async fn load_configmap_modules(
    runtime: &Runtime,
    configmaps: &ConfigMapModules,
    plan: ConfigMapPlan<'_>,
    sources: Sources<'_>,
    settle: &(dyn Fn(&str) + Sync),
    problems: &mut Vec<LoadProblem>,
) {
    let ConfigMapPlan {
        mut chosen,
        early_broken,
        ..
    } = plan;
    let last_good = open_last_good(configmaps.last_good.as_ref(), problems);
    for broken in early_broken {
        let name = broken.module.clone();
        fall_back(runtime, vec![broken], last_good, sources, problems).await;
        settle(&name);
    }
    while !chosen.is_empty() {
        let names: Vec<&str> = chosen.iter().map(|(c, _)| c.module.as_str()).collect();
        let (cached, scan) = chosen.remove(runtime.loading().next(&names));
        let from = cached.origin();
        // Whatever loading it finds is about this ConfigMap.
        let before = problems.len();
        let broken: Vec<Broken> = load_scan(
            runtime,
            scan,
            last_good,
            sources,
            &|_: &OverrideFile| from.clone(),
            problems,
        )
        .await
        .into_iter()
        .map(|b| Broken {
            configmap: Some(cached.uid.clone()),
            ..b
        })
        .collect();
        fall_back(runtime, broken, last_good, sources, problems).await;
        of_configmap(&mut problems[before..], &cached.uid);
        settle(&cached.module);
    }
}

/// Marks `problems` as about the ConfigMap of uid `uid`, those not already about one.
pub(super) fn of_configmap(problems: &mut [LoadProblem], uid: &str) {
    for problem in problems.iter_mut().filter(|p| p.configmap.is_none()) {
        *problem = std::mem::take(problem).of_configmap(uid);
    }
}

/// Loads what a shadow ConfigMap holds as shadows ([`Runtime::load_shadow`]); what cannot be loaded is
/// reported, and the module it would shadow serves as before.
pub(super) async fn load_shadows(
    runtime: &Runtime,
    cached: &Cached,
    scan: DirectoryScan,
    sources: Sources<'_>,
    problems: &mut Vec<LoadProblem>,
) {
    let before = problems.len();
    shadows_of(runtime, cached, scan, sources, problems).await;
    of_configmap(&mut problems[before..], &cached.uid);
}

/// [`load_shadows`], its problems not yet marked as about the ConfigMap.
async fn shadows_of(
    runtime: &Runtime,
    cached: &Cached,
    scan: DirectoryScan,
    sources: Sources<'_>,
    problems: &mut Vec<LoadProblem>,
) {
    let (stock, floor) = (sources.stock, sources.floor);
    let origin = cached.origin();
    for (_, problem) in scan.problems {
        problems.push(LoadProblem::about_shadow(format!(
            "shadow {problem}; no shadow is loaded from it"
        )));
    }
    let mut sources = Vec::new();
    for module in scan.modules {
        sources.push(Ok(module));
    }
    for file in scan.overrides {
        sources.push(match stock.get(&file.name) {
            Some(base) => stock_override::apply(base, &file.text, origin.clone())
                .map(|mut source| {
                    source.signature = file.signature.clone();
                    source
                })
                .map_err(|why| format!("override of module {} refused: {why}", file.name)),
            None => Err(format!(
                "a manifest without its component ({}.wasm), and no stock module is named {}",
                file.name, file.name
            )),
        });
    }
    for source in sources {
        let source = match source {
            Ok(source) => source,
            Err(why) => {
                problems.push(LoadProblem::about_shadow(format!(
                    "shadow {origin}: {why}; no shadow is loaded from it"
                )));
                continue;
            }
        };
        let name = source.name.clone();
        match shadow(runtime, floor, source).await {
            Ok(loaded) => {
                problems.extend(loaded.warnings.into_iter().map(LoadProblem::about_shadow));
                problems.extend(loaded.deprecations.into_iter().map(|d| LoadProblem {
                    remark: Remark::DeprecatedSettingsSchema,
                    ..LoadProblem::about_shadow(d)
                }));
                let (served, _) = serving(runtime, &name);
                if !served {
                    problems.push(LoadProblem::about_shadow(format!(
                        "shadow {origin}: no module {name} serves, so the shadow is never called"
                    )));
                }
                tracing::info!(module = %name, origin = %origin, "shadow module loaded");
            }
            Err(e) => problems.push(LoadProblem::about_shadow(format!(
                "shadow {e}; no shadow is loaded from it"
            ))),
        }
    }
}

/// Loads what a directory scan found (remembering each module that loads) and its overrides.
/// Returns the modules that could not be used, with the reason, for [`fall_back`].
pub(super) async fn load_scan(
    runtime: &Runtime,
    scan: DirectoryScan,
    last_good: Option<&LastGood>,
    sources: Sources<'_>,
    override_origin: &(dyn Fn(&OverrideFile) -> Origin + Sync),
    problems: &mut Vec<LoadProblem>,
) -> Vec<Broken> {
    let mut broken: Vec<Broken> = scan
        .problems
        .into_iter()
        .map(|(path, problem)| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let shown = path.display().to_string();
            let message = if shown.is_empty() || problem.contains(&shown) {
                problem
            } else {
                format!("{shown}: {problem}")
            };
            Broken {
                module: name,
                message,
                configmap: None,
                stated: None,
            }
        })
        .collect();
    let kept: Vec<ModuleSource> = scan.modules.clone();
    let loads = join_all(
        scan.modules
            .into_iter()
            .map(|module| serve(runtime, sources.floor, module)),
    )
    .await;
    for (loaded, kept) in loads.into_iter().zip(kept) {
        match loaded {
            Ok(loaded) => {
                problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning));
                problems.extend(loaded.deprecations.into_iter().map(LoadProblem::deprecated));
                // A version that serves replaces whatever a failure policy did under its name.
                runtime.set_policy(&kept.name, None);
                if let Some(store) = last_good {
                    if let Err(e) = store.remember(&kept) {
                        problems.push(LoadProblem::warning(format!(
                            "module {}: cannot keep a copy in {}: {e}",
                            kept.name,
                            store.dir().display()
                        )));
                    }
                }
            }
            Err(e) => broken.push(Broken {
                module: kept.name.clone(),
                message: e.to_string(),
                configmap: None,
                stated: kept
                    .manifest
                    .on_failure
                    .filter(|_| sources.stated_by_operator(kept.signature.as_ref())),
            }),
        }
    }
    for file in scan.overrides {
        load_override(runtime, file, sources, override_origin, problems).await;
    }
    broken
}

/// Loads the stock module `file` overrides (a manifest without a component) with the override's
/// manifest; a refusal goes to `problems`, saying what serves instead.
pub(super) async fn load_override(
    runtime: &Runtime,
    file: OverrideFile,
    sources: Sources<'_>,
    override_origin: &(dyn Fn(&OverrideFile) -> Origin + Sync),
    problems: &mut Vec<LoadProblem>,
) {
    let from = override_origin(&file);
    let Some(base) = sources.stock.get(&file.name) else {
        let (served, now) = serving(runtime, &file.name);
        problems.push(LoadProblem {
            message: format!(
                "{from}: a manifest without its component ({}.wasm), and no stock module is named {}; {now}",
                file.name, file.name
            ),
            broken: true,
            served,
            ..LoadProblem::default()
        });
        return;
    };
    let refused = match stock_override::apply(base, &file.text, from.clone()) {
        Ok(source) => {
            let source = ModuleSource {
                signature: file.signature.clone(),
                ..source
            };
            match serve(runtime, sources.floor, source).await {
                Ok(loaded) => {
                    problems.extend(loaded.warnings.into_iter().map(LoadProblem::warning));
                    problems.extend(loaded.deprecations.into_iter().map(LoadProblem::deprecated));
                    runtime.set_policy(&file.name, None);
                    return;
                }
                Err(e) => e.to_string(),
            }
        }
        Err(why) => why.to_string(),
    };
    let problem = format!("override {from} of module {} refused: {refused}", file.name);
    // Its policy: the override's own (when its manifest reads and is the operator's), or its
    // ConfigMap's annotation. No last good copy is kept of an override: last-good serves stock.
    let manifest = crate::modules::Manifest::parse(&file.text).ok();
    let stated = manifest
        .and_then(|m| m.on_failure)
        .filter(|_| sources.stated_by_operator(file.signature.as_ref()))
        .map(|p| (p, MANIFEST_SOURCE));
    let annotation = sources.annotation(&from).map(|p| (p, ANNOTATION_SOURCE));
    let (policy, stated_in) = FailurePolicy::strictest(stated.into_iter().chain(annotation));
    let (served, now, outcome) = match policy {
        FailurePolicy::Refuse => {
            refuse(
                runtime,
                sources.floor,
                &file.name,
                &problem,
                stated_in,
                None,
            )
            .await
        }
        _ => {
            let (served, now) = serving(runtime, &file.name);
            (served, now, outcome_of(served, false))
        }
    };
    let message = format!("{problem}; {now}");
    record_trigger(runtime, &file.name, policy, stated_in, outcome, &message);
    problems.push(LoadProblem {
        message,
        broken: true,
        served,
        refused: policy == FailurePolicy::Refuse && !served,
        ..LoadProblem::default()
    });
}
