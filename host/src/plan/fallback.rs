//! What serves when a module cannot be used: its failure policy (last good copy, stock, or refuse)
//! applied and recorded for `status` and `actions`.

use std::collections::BTreeMap;

use super::policy::{
    configmap_uid, outcome_of, Sources, ANNOTATION_SOURCE, LAST_GOOD_SOURCE, MANIFEST_SOURCE,
    REFUSING,
};
use super::problem::{Broken, LoadProblem};
use super::rollback::serve;
use crate::modules::failure_policy::{PolicyState, Triggered};
use crate::modules::{FailurePolicy, LastGood, ModuleSource, Origin, VersionFloor};
use crate::runtime::Runtime;

/// Records the failure policy in force for each module in service that is not stock and whose
/// policy did not trigger: its manifest's, or its ConfigMap's annotation, the stricter
/// ([`FailurePolicy::strictest`]), else the default.
pub(super) fn record_policies(runtime: &Runtime, annotations: &BTreeMap<String, FailurePolicy>) {
    let catalog = runtime.catalog();
    for module in catalog.modules() {
        if module.origin == Origin::Stock || catalog.policy(&module.name).is_some() {
            continue;
        }
        let annotation = configmap_uid(&module.origin)
            .and_then(|uid| annotations.get(uid))
            .map(|p| (*p, ANNOTATION_SOURCE));
        let stated = module.on_failure.map(|p| (p, MANIFEST_SOURCE));
        let (policy, from) = FailurePolicy::strictest(stated.into_iter().chain(annotation));
        runtime.set_policy(
            &module.name,
            Some(PolicyState {
                policy: policy.to_string(),
                from: from.to_string(),
                triggered: None,
            }),
        );
    }
}

/// Records that module `name`'s failure policy (stated in `from`) triggered: what it led to and
/// why, for `status` and `actions`.
pub(super) fn record_trigger(
    runtime: &Runtime,
    name: &str,
    policy: FailurePolicy,
    from: &str,
    outcome: &str,
    cause: &str,
) {
    runtime.set_policy(
        name,
        Some(PolicyState {
            policy: policy.to_string(),
            from: from.to_string(),
            triggered: Some(Triggered {
                outcome: outcome.to_string(),
                cause: cause.to_string(),
            }),
        }),
    );
}

/// The last good store, if it can be trusted (a store that cannot is reported, then not used).
pub(super) fn open_last_good<'a>(
    store: Option<&'a LastGood>,
    problems: &mut Vec<LoadProblem>,
) -> Option<&'a LastGood> {
    let store = store?;
    match store.open() {
        Ok(()) => Some(store),
        Err(why) => {
            problems.push(LoadProblem::warning(format!(
                "not keeping last good versions of modules: {why}"
            )));
            None
        }
    }
}

/// Applies each broken module's failure policy ([`FailurePolicy`]): puts its last good version
/// in service (`last-good`, the default, which without one leaves what serves under its name),
/// leaves what serves under its name (`stock`), or refuses its actions (`refuse`); says which.
pub(super) async fn fall_back(
    runtime: &Runtime,
    broken: Vec<Broken>,
    last_good: Option<&LastGood>,
    sources: Sources<'_>,
    problems: &mut Vec<LoadProblem>,
) {
    let trusted = sources.trusted;
    for Broken {
        module: name,
        message: problem,
        configmap,
        stated,
    } in broken
    {
        // With trusted keys, a remembered version stands in for a broken update of the ConfigMap
        // it came from, never for another: a signed module whose ConfigMap was deleted stays
        // deleted, whatever junk is labelled with its name afterwards.
        let other_object = match (trusted, &configmap, last_good) {
            (Some(_), Some(uid), Some(store)) => match store.came_from(&name) {
                Some(kept) if &kept == uid => None,
                kept => Some((kept, uid.clone())),
            },
            _ => None,
        };
        // The copy that may stand in, or why none may.
        let recalled: Result<ModuleSource, String> = match (last_good, other_object) {
            (Some(_), Some((kept, uid))) => Err(format!(
                "its last good version came from another ConfigMap object (uid {}), not this one (uid {uid}), so it does not stand in for it",
                kept.as_deref().unwrap_or("unrecorded")
            )),
            (Some(store), None) => store.recall(&name, trusted).map_err(|why| why.to_string()),
            (None, _) => Err(
                "no earlier copy that loaded is kept to fall back on (the plugin keeps one in its state directory)".to_string(),
            ),
        };
        // The policy: the strictest that the failed version's manifest (when it is the
        // operator's), the ConfigMap's annotation and the last good copy's manifest state.
        let annotation = configmap
            .as_ref()
            .and_then(|uid| sources.annotations.get(uid))
            .map(|p| (*p, ANNOTATION_SOURCE));
        let kept = recalled
            .as_ref()
            .ok()
            .and_then(|copy| copy.manifest.on_failure)
            .map(|p| (p, LAST_GOOD_SOURCE));
        let stated_here = stated.map(|p| (p, MANIFEST_SOURCE));
        let (policy, stated_in) =
            FailurePolicy::strictest(stated_here.into_iter().chain(annotation).chain(kept));
        let (served, fallback, outcome) = match policy {
            FailurePolicy::LastGood => {
                let (served, fallback) = match recalled {
                    Ok(previous) => {
                        let sha = previous.sha256.clone();
                        match serve(runtime, sources.floor, previous).await {
                            Ok(_) => (
                                true,
                                format!("serving its last good version (sha256 {sha}) instead"),
                            ),
                            Err(e) => stock_fallback(
                                runtime,
                                &name,
                                &format!("its last good version does not load either: {e}"),
                            ),
                        }
                    }
                    Err(why) => stock_fallback(runtime, &name, &why),
                };
                let copy = served && fallback.starts_with("serving its last good");
                (served, fallback, outcome_of(served, copy))
            }
            FailurePolicy::Stock => {
                let (served, fallback) = stock_fallback(
                    runtime,
                    &name,
                    &format!(
                        "its failure policy is stock ({stated_in}), so no kept copy stands in"
                    ),
                );
                (served, fallback, outcome_of(served, false))
            }
            FailurePolicy::Refuse => {
                refuse(
                    runtime,
                    sources.floor,
                    &name,
                    &problem,
                    stated_in,
                    recalled.ok(),
                )
                .await
            }
        };
        let message = format!("{problem}; {fallback}");
        record_trigger(runtime, &name, policy, stated_in, outcome, &message);
        problems.push(
            LoadProblem {
                message,
                broken: true,
                served,
                refused: outcome == REFUSING,
                ..LoadProblem::default()
            }
            .of_configmap(configmap.as_deref().unwrap_or_default()),
        );
    }
}

/// Refuses the actions of module `name` (failure policy `refuse`, stated in `stated_in`) because
/// of `problem`: the module that lists them — its last good `copy` when one may stand in (its own
/// actions), else what serves under its name — stays in service, and every call of them fails
/// with the reason, so the items they are given fail rather than go to a module the operator
/// did not choose. Returns whether anything serves (never), what was done, and the outcome.
pub(super) async fn refuse(
    runtime: &Runtime,
    floor: Option<&VersionFloor>,
    name: &str,
    problem: &str,
    stated_in: &str,
    copy: Option<ModuleSource>,
) -> (bool, String, &'static str) {
    let mut lists = String::new();
    if let Some(copy) = copy {
        let sha = copy.sha256.clone();
        match serve(runtime, floor, copy).await {
            Ok(_) => lists = format!("its last good version (sha256 {sha})"),
            Err(e) => {
                tracing::debug!(module = name, "its last good version does not load: {e}")
            }
        }
    }
    let why = format!(
        "module {name} cannot be loaded and its failure policy is refuse ({stated_in}): {problem}"
    );
    match runtime.catalog().modules().find(|m| &*m.name == name) {
        Some(module) => {
            module.refuse(&why);
            if lists.is_empty() {
                lists = module.origin.to_string();
            }
            (
                false,
                format!(
                    "refusing its actions (failure policy refuse, {stated_in}): each item they are given fails with this reason; the actions are those of {lists}"
                ),
                REFUSING,
            )
        }
        None => (
            false,
            format!(
                "its failure policy is refuse ({stated_in}), but no module {name} is in service whose actions could be refused: Velero is not told of its actions"
            ),
            "not served",
        ),
    }
}

pub(super) fn stock_fallback(runtime: &Runtime, name: &str, why: &str) -> (bool, String) {
    let (served, now) = serving(runtime, name);
    (served, format!("{why}: {now}"))
}

/// Whether a module of this name is in service, and which, for people.
pub(super) fn serving(runtime: &Runtime, name: &str) -> (bool, String) {
    match runtime.catalog().modules().find(|m| &*m.name == name) {
        Some(m) if m.origin == Origin::Stock => (true, format!("serving the stock module {name}")),
        Some(m) => (true, format!("serving module {name} from {}", m.origin)),
        None => (false, format!("module {name} is not served")),
    }
}
