//! Choosing one copy of each module among the module ConfigMaps (and one shadow), from what their
//! copies hold.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::problem::{Broken, LoadProblem};
use crate::modules::configmaps::{Cached, ConfigMapModules};
use crate::modules::{scan_directory, DirectoryScan, TrustedKeys};

/// The module ConfigMaps' copies as read: the one copy of each module that is to serve, the one to
/// shadow it, and the modules none of whose ConfigMaps could be used (each falls back).
#[derive(Default)]
pub(super) struct ConfigMapPlan<'a> {
    pub(super) chosen: Vec<(&'a Cached, DirectoryScan)>,
    pub(super) shadows: Vec<(&'a Cached, DirectoryScan)>,
    pub(super) early_broken: Vec<Broken>,
}

/// Reads the copies of the module ConfigMaps and chooses one per module (and one shadow per
/// module); what cannot be used goes to `problems`, naming its ConfigMap.
pub(super) fn plan_configmaps<'a>(
    configmaps: &'a ConfigMapModules,
    trusted: Option<&TrustedKeys>,
    problems: &mut Vec<LoadProblem>,
) -> ConfigMapPlan<'a> {
    let mut early_broken: Vec<Broken> = Vec::new();
    let mut scanned = Vec::new();
    let mut shadow_scanned = Vec::new();
    for cached in &configmaps.configmaps {
        let origin = cached.origin();
        let mut scan = match scan_directory(&cached.dir, trusted) {
            Ok(scan) => scan,
            Err(e) => {
                problems.push(
                    LoadProblem::not_served(format!(
                        "{origin}: its copy {} cannot be read: {e}",
                        cached.dir.display()
                    ))
                    .of_configmap(&cached.uid),
                );
                continue;
            }
        };
        for module in &mut scan.modules {
            module.origin = origin.clone();
        }
        for (path, problem) in &mut scan.problems {
            let file = path.file_name().map(PathBuf::from).unwrap_or_default();
            *problem = format!("{origin}: {}: {problem}", file.display());
            *path = file;
        }
        if cached.shadow {
            shadow_scanned.push((cached, scan));
        } else {
            scanned.push((cached, scan));
        }
    }
    let chosen = one_per_module(scanned, trusted.is_some(), problems);
    let before = problems.len();
    let shadows = one_per_module(shadow_scanned, trusted.is_some(), problems);
    for problem in &mut problems[before..] {
        problem.shadow = true;
    }
    for problem in &configmaps.problems {
        let uid = problem.uid.as_deref().unwrap_or_default();
        if problem.shadow {
            // The module it would shadow serves as before.
            problems.push(
                LoadProblem::about_shadow(format!(
                    "{}; no shadow is loaded from it",
                    problem.message
                ))
                .of_configmap(uid),
            );
            continue;
        }
        let chosen_instead = problem
            .module
            .as_ref()
            .and_then(|m| chosen.iter().find(|(c, _)| c.module == *m));
        match (&problem.module, chosen_instead) {
            (Some(_), Some((instead, _))) => problems.push(
                LoadProblem {
                    message: format!(
                        "{}; ConfigMap {} holds the module instead",
                        problem.message, instead.configmap
                    ),
                    broken: true,
                    served: true,
                    ..LoadProblem::default()
                }
                .of_configmap(uid),
            ),
            (Some(name), None) => early_broken.push(Broken {
                module: name.clone(),
                message: problem.message.clone(),
                configmap: Some(problem.uid.clone().unwrap_or_default()),
                stated: None,
            }),
            (None, _) => {
                problems.push(LoadProblem::not_served(problem.message.clone()).of_configmap(uid))
            }
        }
    }
    ConfigMapPlan {
        chosen,
        shadows,
        early_broken,
    }
}

/// One ConfigMap for each module its label names, the others reported as left out. Without trusted
/// keys the first by name serves; with them, the ConfigMaps whose module verified come first, the
/// highest `version` among them, so that an unsigned ConfigMap (or an older signed one) cannot keep a
/// signed module out by sorting before it.
pub(super) fn one_per_module<'a>(
    scanned: Vec<(&'a Cached, DirectoryScan)>,
    trusted: bool,
    problems: &mut Vec<LoadProblem>,
) -> Vec<(&'a Cached, DirectoryScan)> {
    type Rank = (bool, Option<semver::Version>);
    let rank = |scan: &DirectoryScan| -> Rank {
        let usable =
            scan.problems.is_empty() && !(scan.modules.is_empty() && scan.overrides.is_empty());
        let version = scan
            .modules
            .first()
            .and_then(|m| m.manifest.version.clone())
            .or_else(|| {
                let text = &scan.overrides.first()?.text;
                crate::modules::Manifest::parse(text).ok()?.version
            });
        (usable, version)
    };
    let mut chosen: Vec<(&'a Cached, DirectoryScan)> = Vec::new();
    let mut left_out: Vec<(&'a Cached, Option<String>)> = Vec::new();
    for (cached, scan) in scanned {
        let same = chosen
            .iter()
            .position(|(c, _)| !c.module.is_empty() && c.module == cached.module);
        let Some(at) = same else {
            chosen.push((cached, scan));
            continue;
        };
        if trusted && rank(&scan) > rank(&chosen[at].1) {
            let (first, first_scan) = std::mem::replace(&mut chosen[at], (cached, scan));
            left_out.push((first, first_scan.problems.first().map(|(_, p)| p.clone())));
        } else {
            left_out.push((cached, scan.problems.first().map(|(_, p)| p.clone())));
        }
    }
    for (cached, why) in left_out {
        let serving = chosen
            .iter()
            .find(|(c, _)| c.module == cached.module)
            .map(|(c, _)| c.configmap.as_str())
            .unwrap_or_default();
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        problems.push(
            LoadProblem {
                message: format!(
                    "ConfigMap {}: module {} is already in ConfigMap {serving}; this one is left out{why}",
                    cached.configmap, cached.module
                ),
                broken: true,
                served: true,
                ..LoadProblem::default()
            }
            .of_configmap(&cached.uid),
        );
    }
    chosen
}

/// The module names a directory scan stands for: its modules, overrides and refused files.
pub(super) fn scan_names(scan: &DirectoryScan) -> BTreeSet<String> {
    scan.modules
        .iter()
        .map(|m| m.name.clone())
        .chain(scan.overrides.iter().map(|o| o.name.clone()))
        .chain(
            scan.problems
                .iter()
                .filter_map(|(path, _)| Some(path.file_stem()?.to_string_lossy().into_owned())),
        )
        .collect()
}
