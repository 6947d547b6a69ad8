//! What became of each module ConfigMap a plugin process read, as an operator reads it on the
//! ConfigMap: serving (by its actions' own names, or through the slot until Velero restarts),
//! shadowing, refused (why), falling back (to its last good copy, to stock, or refusing its
//! actions), each with the remarks loading made on it (docs/modules.md#s11). This file decides the
//! state and how it reads: the Events' reasons and messages and the status annotation's value;
//! [`super::configmap_report`] writes them.
//!
//! The annotation's value is stable: the same outcome gives the same text (no time, no
//! resourceVersion in it), so that a plugin process that finds it already written writes nothing,
//! and the ConfigMap's resourceVersion, which keys the module cache, stays as it is.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::action::slot::{pending, Family, Listed};
use crate::modules::configmaps::ConfigMapModules;
use crate::modules::Origin;
use crate::runtime::{Catalog, LoadedModule};

use super::policy::{REFUSING, SERVING_LAST_GOOD, SERVING_STOCK};
use super::problem::{LoadProblem, Remark};

/// How many hex digits of a component's sha256 the annotation and the messages show.
const SHA256_SHOWN: usize = 12;
/// The most characters of a reason or message kept (an Event's message is meant to be short).
const MAX_TEXT: usize = 1024;
/// The most actions a message names one by one.
const ACTIONS_NAMED: usize = 8;

/// One module ConfigMap as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    /// Its name.
    pub(crate) name: String,
    /// Its uid (the Events' `involvedObject`).
    pub(crate) uid: String,
    /// The module its label names.
    pub(crate) module: String,
    /// Labelled a shadow.
    pub(crate) shadow: bool,
    /// Its status annotation as listed: what a plugin process last wrote.
    pub(crate) status: Option<String>,
}

/// A module in service from a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Served {
    /// Its manifest's version.
    pub(crate) version: Option<String>,
    /// Its component's sha256.
    pub(crate) sha256: String,
    /// Its actions that serve by their own names.
    pub(crate) listed: Vec<String>,
    /// Its actions Velero has not listed yet: they serve through the slot of their kind until
    /// Velero restarts (empty when no listing was kept to tell).
    pub(crate) pending: Vec<Listed>,
}

/// What stands in for a module whose ConfigMap was refused: its failure policy's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Its last good copy serves.
    LastGood,
    /// What serves under its name without it (the stock module) serves.
    Stock,
    /// Its actions are refused: each item they are given fails with the reason.
    Refuse,
}

impl Fallback {
    fn as_str(self) -> &'static str {
        match self {
            Fallback::LastGood => "last-good",
            Fallback::Stock => "stock",
            Fallback::Refuse => "refuse",
        }
    }
}

/// What became of one ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    /// Its module serves.
    Serving(Served),
    /// Its module is the shadow of the module serving under that name.
    Shadowing(Served),
    /// Its module is not used, and nothing of it serves: why.
    Refused(String),
    /// Its module is not used, and its failure policy put something else in its place: what, and
    /// why (which says what serves).
    FallingBack(Fallback, String),
}

/// One ConfigMap, what became of it, and the remarks loading made on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The ConfigMap.
    pub(crate) subject: Subject,
    /// What became of it.
    pub(crate) state: State,
    /// Each remark: its Event reason and text.
    pub(crate) remarks: Vec<(&'static str, String)>,
}

/// An Event's type: `Normal` or `Warning`, as Kubernetes has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// All is as the operator asked.
    Normal,
    /// The operator has something to do.
    Warning,
}

impl EventType {
    /// As an Event's `type`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One Event to record on a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// `Normal` or `Warning`.
    pub(crate) kind: EventType,
    /// The Event's reason, CamelCase.
    pub(crate) reason: &'static str,
    /// What a person reads, and can act on.
    pub(crate) message: String,
}

/// What serves, as far as module ConfigMaps go: by ConfigMap uid, the module in service from it (or
/// why its actions are refused) and the shadow loaded from it; by module name, what its failure
/// policy did when it triggered (its outcome and cause).
#[derive(Debug, Default)]
pub(crate) struct InService {
    pub(crate) serving: BTreeMap<String, Result<Served, String>>,
    pub(crate) shadows: BTreeMap<String, Served>,
    pub(crate) triggered: BTreeMap<String, (String, String)>,
}

impl InService {
    /// What `catalog` serves; the actions Velero has not listed yet from the listing kept from its
    /// last `ListPlugins` (`listed`; `None`, or empty: not known).
    pub(crate) fn of(catalog: &Catalog, listed: Option<&[Listed]>) -> InService {
        let listed = listed.filter(|l| !l.is_empty());
        let mut found = InService::default();
        for module in catalog.modules() {
            if let Some(uid) = configmap_uid(&module.origin) {
                let served = match module.refusal() {
                    Some(why) => Err(why.to_string()),
                    None => Ok(served(module, listed)),
                };
                found.serving.insert(uid.to_string(), served);
            }
        }
        for module in catalog.shadows() {
            if let Some(uid) = configmap_uid(&module.origin) {
                found.shadows.insert(uid.to_string(), served(module, None));
            }
        }
        for (name, policy) in catalog.policies() {
            if let Some(t) = &policy.triggered {
                found
                    .triggered
                    .insert(name.clone(), (t.outcome.clone(), t.cause.clone()));
            }
        }
        found
    }
}

/// Every module ConfigMap `configmaps` holds (a ConfigMap without a uid cannot be addressed and is
/// left out), with what became of it: from what is `in_service`, and the `problems` loading marked
/// as about it.
pub(crate) fn outcomes(
    configmaps: &ConfigMapModules,
    problems: &[LoadProblem],
    in_service: &InService,
) -> Vec<Outcome> {
    let scrub = Scrub::of(configmaps);
    let mut subjects: Vec<Subject> = configmaps
        .configmaps
        .iter()
        .map(|c| Subject {
            name: c.configmap.clone(),
            uid: c.uid.clone(),
            module: c.module.clone(),
            shadow: c.shadow,
            status: c.status.clone(),
        })
        .chain(configmaps.problems.iter().map(|p| Subject {
            name: p.configmap.clone(),
            uid: p.uid.clone().unwrap_or_default(),
            module: p.module.clone().unwrap_or_default(),
            shadow: p.shadow,
            status: p.status.clone(),
        }))
        .filter(|s| !s.uid.is_empty() && !s.name.is_empty())
        .collect();
    subjects.sort_by(|a, b| a.name.cmp(&b.name));
    subjects.dedup_by(|a, b| a.uid == b.uid);
    let mut about: BTreeMap<&str, Vec<&LoadProblem>> = BTreeMap::new();
    for problem in problems {
        if let Some(uid) = &problem.configmap {
            about.entry(uid).or_default().push(problem);
        }
    }
    subjects
        .into_iter()
        .filter_map(|subject| {
            let found = about.remove(subject.uid.as_str()).unwrap_or_default();
            outcome(subject, &found, in_service, &scrub)
        })
        .collect()
}

/// What became of `subject`, given the problems about it; `None` when nothing is known of it (no
/// module of it in service, and loading said nothing).
fn outcome(
    subject: Subject,
    problems: &[&LoadProblem],
    in_service: &InService,
    scrub: &Scrub,
) -> Option<Outcome> {
    // Which problem says why it is not used: the first that made a module unusable (for a shadow,
    // the first that is no mere remark: a shadow's problems never break what serves).
    let (state, why_at) = if subject.shadow {
        match in_service.shadows.get(&subject.uid) {
            Some(served) => (State::Shadowing(served.clone()), None),
            None => {
                let at = problems
                    .iter()
                    .position(|p| p.broken || p.remark == Remark::Other)?;
                (State::Refused(scrub.text(&problems[at].message)), Some(at))
            }
        }
    } else {
        match in_service.serving.get(&subject.uid) {
            Some(Ok(served)) => (State::Serving(served.clone()), None),
            Some(Err(why)) => (State::Refused(scrub.text(why)), None),
            None => {
                let at = problems.iter().position(|p| p.broken)?;
                let why = scrub.text(&problems[at].message);
                let triggered = in_service
                    .triggered
                    .get(&subject.module)
                    .filter(|(_, cause)| *cause == problems[at].message);
                let state = match triggered.map(|(outcome, _)| outcome.as_str()) {
                    Some(SERVING_LAST_GOOD) => State::FallingBack(Fallback::LastGood, why),
                    Some(SERVING_STOCK) => State::FallingBack(Fallback::Stock, why),
                    Some(REFUSING) => State::FallingBack(Fallback::Refuse, why),
                    _ => State::Refused(why),
                };
                (state, Some(at))
            }
        }
    };
    let remarks = problems
        .iter()
        .enumerate()
        .filter(|(i, p)| Some(*i) != why_at && !p.broken)
        .map(|(_, p)| (remark_reason(p.remark), scrub.text(&p.message)))
        .collect();
    Some(Outcome {
        subject,
        state,
        remarks,
    })
}

/// The uid of the ConfigMap a module (or the override of a stock one) came from.
fn configmap_uid(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::ConfigMap { uid, .. } => Some(uid),
        Origin::Override(from) => configmap_uid(from),
        _ => None,
    }
}

/// A module in service, its actions split by whether Velero listed them (`listed`: the kept
/// listing; `None`: not known, all by their own names).
fn served(module: &LoadedModule, listed: Option<&[Listed]>) -> Served {
    let actions: Vec<Listed> = module
        .actions
        .iter()
        .map(|a| (a.kind, a.name.clone()))
        .collect();
    let pending = listed.map(|l| pending(l, &actions)).unwrap_or_default();
    Served {
        version: module.version.clone(),
        sha256: module.sha256.clone(),
        listed: actions
            .into_iter()
            .filter(|a| !pending.contains(a))
            .map(|(_, name)| name)
            .collect(),
        pending,
    }
}

/// The Event reason of a remark.
fn remark_reason(remark: Remark) -> &'static str {
    match remark {
        Remark::DeprecatedSettingsSchema => "DeprecatedSettingsSchema",
        Remark::FailurePolicyAnnotation => "InvalidFailurePolicy",
        Remark::Other => "LoadWarning",
    }
}

/// Takes what changes with each write of a ConfigMap out of a text about it: a ConfigMap's
/// resourceVersion (`ConfigMap NAME@RV`, and `UID-RV`, its cache directory's name), so that the
/// state of a ConfigMap does not change when only its resourceVersion did (as the status
/// annotation's first write makes it).
struct Scrub {
    /// Each pair: what to find, what to put instead.
    pairs: Vec<(String, String)>,
}

impl Scrub {
    fn of(configmaps: &ConfigMapModules) -> Scrub {
        let mut pairs = Vec::new();
        for c in &configmaps.configmaps {
            let rv = &c.resource_version;
            if rv.is_empty() {
                continue;
            }
            pairs.push((
                format!("ConfigMap {}@{rv}", c.configmap),
                format!("ConfigMap {}", c.configmap),
            ));
            if !c.uid.is_empty() {
                pairs.push((format!("{}-{rv}", c.uid), c.uid.clone()));
            }
        }
        Scrub { pairs }
    }

    /// `text` without resourceVersions, at most [`MAX_TEXT`] characters.
    fn text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (from, to) in &self.pairs {
            if text.contains(from.as_str()) {
                text = text.replace(from.as_str(), to);
            }
        }
        shorten(&text)
    }
}

/// `text` cut to [`MAX_TEXT`] characters, with an ellipsis when cut.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `9f2c1a4b5d6e`, the start of a sha256.
fn short_sha(sha256: &str) -> &str {
    sha256.get(..SHA256_SHOWN).unwrap_or(sha256)
}

/// `a, b and 3 more`.
fn named(names: &[String]) -> String {
    let mut shown = names
        .iter()
        .take(ACTIONS_NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > ACTIONS_NAMED {
        shown.push_str(&format!(" and {} more", names.len() - ACTIONS_NAMED));
    }
    shown
}

/// `module NAME (version V, sha256 S)`.
fn module_words(module: &str, served: &Served) -> String {
    let version = served
        .version
        .as_deref()
        .map(|v| format!("version {v}, "))
        .unwrap_or_default();
    format!(
        "module {module} ({version}sha256 {})",
        short_sha(&served.sha256)
    )
}

impl Outcome {
    /// The Events that say it: one for its state, then one per remark.
    pub(crate) fn notes(&self) -> Vec<Note> {
        let module = &self.subject.module;
        let (kind, reason, message) = match &self.state {
            State::Serving(served) if served.pending.is_empty() => (
                EventType::Normal,
                "Serving",
                format!(
                    "{} serves from this ConfigMap: {}",
                    module_words(module, served),
                    actions_words(&served.listed)
                ),
            ),
            State::Serving(served) => {
                let pending: Vec<String> = served.pending.iter().map(|(_, n)| n.clone()).collect();
                let mut slots: Vec<&str> = served.pending.iter().map(|(k, _)| Family::of(*k).slot_name()).collect();
                slots.sort_unstable();
                slots.dedup();
                let by_name = match served.listed.is_empty() {
                    true => String::new(),
                    false => format!(
                        "{} by their own names, and ",
                        named(&served.listed)
                    ),
                };
                (
                    EventType::Normal,
                    "ServingThroughSlot",
                    format!(
                        "{} serves from this ConfigMap: {by_name}{} through {} until Velero \
                         restarts, as Velero has not listed them (it asks a plugin for its actions \
                         once, when its pod starts); restart Velero for them to serve by their own names",
                        module_words(module, served),
                        named(&pending),
                        slots.join(" and ")
                    ),
                )
            }
            State::Shadowing(served) => (
                EventType::Normal,
                "Shadowing",
                format!(
                    "{} is the shadow of the module serving as {module}: each of its calls is made \
                     to the shadow too and the results compared (velero-wasm status shows the \
                     figures); it never serves. Remove the label velero-wasm.io/shadow to promote it",
                    module_words(module, served)
                ),
            ),
            State::Refused(why) if self.subject.shadow => (
                EventType::Warning,
                "Refused",
                format!(
                    "shadow module {module} from this ConfigMap is not loaded: {why}. The module \
                     serving as {module} is untouched; fix the ConfigMap and apply it again"
                ),
            ),
            State::Refused(why) => (
                EventType::Warning,
                "Refused",
                format!(
                    "module {module} from this ConfigMap is not served: {why}. Fix the ConfigMap \
                     and apply it again: the next plugin process (the next backup or restore) reads it"
                ),
            ),
            State::FallingBack(_, why) => (
                EventType::Warning,
                "FallingBack",
                format!(
                    "module {module} from this ConfigMap is refused and its failure policy decides \
                     what serves: {why}. Fix the ConfigMap and apply it again: the next plugin \
                     process (the next backup or restore) reads it"
                ),
            ),
        };
        let mut notes = vec![Note {
            kind,
            reason,
            message: shorten(&message),
        }];
        notes.extend(self.remarks.iter().map(|(reason, text)| Note {
            kind: EventType::Warning,
            reason,
            message: text.clone(),
        }));
        notes
    }

    /// The status annotation's value: one line of JSON, the same for the same outcome (see
    /// docs/modules.md#s11 for its fields).
    pub(crate) fn annotation(&self) -> String {
        let mut out = Map::new();
        let state = match &self.state {
            State::Serving(_) => "serving",
            State::Shadowing(_) => "shadowing",
            State::Refused(_) => "refused",
            State::FallingBack(..) => "falling-back",
        };
        out.insert("state".into(), json!(state));
        out.insert("module".into(), json!(self.subject.module));
        if self.subject.shadow {
            out.insert("shadow".into(), json!(true));
        }
        match &self.state {
            State::Serving(served) | State::Shadowing(served) => {
                if let Some(version) = &served.version {
                    out.insert("version".into(), json!(version));
                }
                out.insert("sha256".into(), json!(short_sha(&served.sha256)));
                if !served.pending.is_empty() {
                    let through = match served.listed.is_empty() {
                        true => "slot",
                        false => "name+slot",
                    };
                    out.insert("through".into(), json!(through));
                }
            }
            State::Refused(why) => {
                out.insert("why".into(), json!(why));
            }
            State::FallingBack(to, why) => {
                out.insert("fallback".into(), json!(to.as_str()));
                out.insert("why".into(), json!(why));
            }
        }
        if !self.remarks.is_empty() {
            let mut reasons: Vec<&str> = self.remarks.iter().map(|(r, _)| *r).collect();
            reasons.sort_unstable();
            reasons.dedup();
            out.insert("remarks".into(), json!(reasons));
        }
        Value::Object(out).to_string()
    }
}

/// `3 actions: a, b, c`, or `no actions` (a module that only signs).
fn actions_words(names: &[String]) -> String {
    match names.len() {
        0 => "no actions".to_string(),
        1 => format!("action {}", names[0]),
        n => format!("{n} actions: {}", named(names)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::ActionKind;
    use crate::modules::configmaps::{Cached, Problem};
    use std::path::PathBuf;

    fn cached(name: &str, module: &str, uid: &str, shadow: bool) -> Cached {
        Cached {
            configmap: name.into(),
            module: module.into(),
            uid: uid.into(),
            resource_version: "417".into(),
            dir: PathBuf::from(format!("/state/configmaps/{uid}-417")),
            shadow,
            on_failure: None,
            status: None,
        }
    }

    fn listing(configmaps: Vec<Cached>, problems: Vec<Problem>) -> ConfigMapModules {
        ConfigMapModules {
            configmaps,
            problems,
            ..ConfigMapModules::default()
        }
    }

    fn problem(uid: &str, message: &str, broken: bool) -> LoadProblem {
        LoadProblem {
            message: message.into(),
            broken,
            served: !broken,
            configmap: Some(uid.into()),
            ..LoadProblem::default()
        }
    }

    fn served(version: Option<&str>, listed: &[&str], pending: &[(ActionKind, &str)]) -> Served {
        Served {
            version: version.map(str::to_string),
            sha256: "9f2c1a4b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081".into(),
            listed: listed.iter().map(|s| s.to_string()).collect(),
            pending: pending.iter().map(|(k, n)| (*k, n.to_string())).collect(),
        }
    }

    fn one(
        configmaps: &ConfigMapModules,
        problems: &[LoadProblem],
        in_service: &InService,
    ) -> Outcome {
        let mut found = outcomes(configmaps, problems, in_service);
        assert_eq!(found.len(), 1, "{found:#?}");
        found.remove(0)
    }

    #[test]
    fn a_configmap_whose_module_serves_says_so_with_version_and_digest_and_the_same_each_time() {
        let configmaps = listing(
            vec![cached("velero-wasm-module-foo", "foo", "u-1", false)],
            vec![],
        );
        let in_service = InService {
            serving: [(
                "u-1".to_string(),
                Ok(served(Some("1.2.0"), &["foo.io/backup"], &[])),
            )]
            .into(),
            ..InService::default()
        };
        let outcome = one(&configmaps, &[], &in_service);
        assert_eq!(
            outcome.annotation(),
            r#"{"state":"serving","module":"foo","version":"1.2.0","sha256":"9f2c1a4b5d6e"}"#
        );
        assert_eq!(
            outcome.notes(),
            [Note {
                kind: EventType::Normal,
                reason: "Serving",
                message: "module foo (version 1.2.0, sha256 9f2c1a4b5d6e) serves from this ConfigMap: action foo.io/backup".into(),
            }]
        );
        // Listed again (the annotation written since): the same state, the same value.
        let mut again = configmaps.clone();
        again.configmaps[0].resource_version = "418".into();
        again.configmaps[0].status = Some(outcome.annotation());
        let later = one(&again, &[], &in_service);
        assert_eq!(later.annotation(), outcome.annotation());
        assert_eq!(later.notes(), outcome.notes());
    }

    #[test]
    fn actions_velero_has_not_listed_serve_through_the_slot_until_velero_restarts() {
        use ActionKind::*;
        let was = [(BackupV2, "foo.io/backup".to_string())];
        // Listed as v2, provided as v1: Velero's v2 service runs it, not pending.
        let now = [
            (Backup, "foo.io/backup".to_string()),
            (Restore, "foo.io/restore".to_string()),
        ];
        assert_eq!(
            pending(&was, &now),
            [(Restore, "foo.io/restore".to_string())]
        );
        assert_eq!(pending(&now, &now), []);

        let configmaps = listing(vec![cached("cm-foo", "foo", "u-1", false)], vec![]);
        let both = served(None, &["foo.io/backup"], &[(Restore, "foo.io/restore")]);
        let in_service = InService {
            serving: [("u-1".to_string(), Ok(both))].into(),
            ..InService::default()
        };
        let outcome = one(&configmaps, &[], &in_service);
        assert_eq!(
            outcome.annotation(),
            r#"{"state":"serving","module":"foo","sha256":"9f2c1a4b5d6e","through":"name+slot"}"#
        );
        let note = &outcome.notes()[0];
        assert_eq!(
            (note.kind, note.reason),
            (EventType::Normal, "ServingThroughSlot")
        );
        assert!(
            note.message.contains("foo.io/backup by their own names, and foo.io/restore through velero-wasm.io/added-restore-actions until Velero restarts"),
            "{}",
            note.message
        );

        let only_new = served(None, &[], &[(ItemBlock, "foo.io/block")]);
        let in_service = InService {
            serving: [("u-1".to_string(), Ok(only_new))].into(),
            ..InService::default()
        };
        let outcome = one(&configmaps, &[], &in_service);
        assert!(
            outcome.annotation().contains(r#""through":"slot""#),
            "{}",
            outcome.annotation()
        );
        assert!(outcome.notes()[0]
            .message
            .contains("foo.io/block through velero-wasm.io/added-item-block-actions"));
    }

    #[test]
    fn a_refused_configmap_says_why_without_its_resource_version() {
        let configmaps = listing(vec![cached("cm-foo", "foo", "u-1", false)], vec![]);
        let why = "ConfigMap cm-foo@417: foo.wasm: sha256 mismatch: the manifest expects 00, the component has 9f; module foo is not served";
        let outcome = one(
            &configmaps,
            &[problem("u-1", why, true)],
            &InService::default(),
        );
        let expected_why = "ConfigMap cm-foo: foo.wasm: sha256 mismatch: the manifest expects 00, the component has 9f; module foo is not served";
        assert_eq!(
            outcome.annotation(),
            serde_json::json!({"state": "refused", "module": "foo", "why": expected_why})
                .to_string()
        );
        let note = &outcome.notes()[0];
        assert_eq!((note.kind, note.reason), (EventType::Warning, "Refused"));
        assert!(
            note.message.starts_with(&format!(
                "module foo from this ConfigMap is not served: {expected_why}. Fix the ConfigMap"
            )),
            "{}",
            note.message
        );
        // A problem about another ConfigMap is not this one's.
        let both = outcomes(
            &listing(
                vec![
                    cached("cm-foo", "foo", "u-1", false),
                    cached("cm-bar", "bar", "u-2", false),
                ],
                vec![],
            ),
            &[problem("u-1", why, true)],
            &InService {
                serving: [("u-2".to_string(), Ok(served(None, &["bar.io/a"], &[])))].into(),
                ..InService::default()
            },
        );
        let states: Vec<(&str, &str)> = both
            .iter()
            .map(|o| (o.subject.name.as_str(), o.notes()[0].reason))
            .collect();
        assert_eq!(states, [("cm-bar", "Serving"), ("cm-foo", "Refused")]);
    }

    #[test]
    fn a_refused_configmap_whose_failure_policy_stands_in_is_falling_back() {
        let configmaps = listing(vec![cached("cm-foo", "foo", "u-1", false)], vec![]);
        let why = "module foo: its signature by key 05ca04d5eb9fffea does not match; serving its last good version (sha256 abc) instead";
        for (outcome, fallback) in [
            (SERVING_LAST_GOOD, "last-good"),
            (SERVING_STOCK, "stock"),
            (REFUSING, "refuse"),
        ] {
            let in_service = InService {
                triggered: [("foo".to_string(), (outcome.to_string(), why.to_string()))].into(),
                ..InService::default()
            };
            let found = one(&configmaps, &[problem("u-1", why, true)], &in_service);
            assert_eq!(
                found.annotation(),
                serde_json::json!({"state": "falling-back", "module": "foo", "fallback": fallback, "why": why}).to_string()
            );
            assert_eq!(found.notes()[0].reason, "FallingBack");
            assert_eq!(found.notes()[0].kind, EventType::Warning);
        }
        // A policy that triggered for another ConfigMap of the module says nothing of this one.
        let in_service = InService {
            triggered: [(
                "foo".to_string(),
                (SERVING_STOCK.to_string(), "other".to_string()),
            )]
            .into(),
            ..InService::default()
        };
        let found = one(&configmaps, &[problem("u-1", why, true)], &in_service);
        assert!(matches!(found.state, State::Refused(_)), "{found:?}");
    }

    #[test]
    fn a_shadow_says_it_shadows_and_its_remarks_show_as_warnings() {
        let configmaps = listing(vec![cached("cm-foo-shadow", "foo", "u-9", true)], vec![]);
        let remark = LoadProblem {
            shadow: true,
            remark: Remark::FailurePolicyAnnotation,
            ..problem("u-9", "shadow ConfigMap cm-foo-shadow: annotation velero-wasm.io/on-failure: \"never\" is not a failure policy", false)
        };
        let in_service = InService {
            shadows: [(
                "u-9".to_string(),
                served(Some("2.0.0"), &["foo.io/backup"], &[]),
            )]
            .into(),
            ..InService::default()
        };
        let outcome = one(&configmaps, std::slice::from_ref(&remark), &in_service);
        assert_eq!(
            outcome.annotation(),
            r#"{"state":"shadowing","module":"foo","shadow":true,"version":"2.0.0","sha256":"9f2c1a4b5d6e","remarks":["InvalidFailurePolicy"]}"#
        );
        let notes = outcome.notes();
        assert_eq!(
            notes.iter().map(|n| (n.kind, n.reason)).collect::<Vec<_>>(),
            [
                (EventType::Normal, "Shadowing"),
                (EventType::Warning, "InvalidFailurePolicy")
            ]
        );
        assert_eq!(notes[1].message, remark.message);

        // Not loaded: refused, the remark still a remark.
        let failed = LoadProblem {
            shadow: true,
            ..problem(
                "u-9",
                "shadow module foo: trapped at load; no shadow is loaded from it",
                false,
            )
        };
        let outcome = one(&configmaps, &[remark, failed], &InService::default());
        assert!(
            matches!(&outcome.state, State::Refused(why) if why.contains("trapped at load")),
            "{outcome:?}"
        );
        let notes = outcome.notes();
        assert_eq!(notes[0].reason, "Refused");
        assert!(notes[0]
            .message
            .starts_with("shadow module foo from this ConfigMap is not loaded"));
        assert_eq!(notes[1].reason, "InvalidFailurePolicy");
    }

    #[test]
    fn a_deprecated_settings_schema_is_a_warning_event_on_a_serving_configmap() {
        let configmaps = listing(vec![cached("cm-foo", "foo", "u-1", false)], vec![]);
        let deprecation = LoadProblem {
            remark: Remark::DeprecatedSettingsSchema,
            ..problem("u-1", "module foo: settings-schema.mode: the old settings vocabulary (values, list, map, items = \"<type>\", no type) is deprecated and was converted; write it as JSON Schema: enum = [\"a\"]", false)
        };
        let in_service = InService {
            serving: [("u-1".to_string(), Ok(served(None, &["foo.io/a"], &[])))].into(),
            ..InService::default()
        };
        let outcome = one(&configmaps, std::slice::from_ref(&deprecation), &in_service);
        assert!(outcome
            .annotation()
            .ends_with(r#""remarks":["DeprecatedSettingsSchema"]}"#));
        let notes = outcome.notes();
        assert_eq!(
            notes[1],
            Note {
                kind: EventType::Warning,
                reason: "DeprecatedSettingsSchema",
                message: deprecation.message,
            }
        );
    }

    #[test]
    fn a_configmap_that_could_not_be_written_out_is_refused_by_its_name() {
        let configmaps = listing(
            vec![],
            vec![Problem {
                configmap: "cm-big".into(),
                module: Some("big".into()),
                uid: Some("u-3".into()),
                message: "ConfigMap cm-big: holds more than 1 MiB".into(),
                shadow: false,
                status: Some("{\"state\":\"serving\"}".into()),
            }],
        );
        let outcome = one(
            &configmaps,
            &[problem(
                "u-3",
                "ConfigMap cm-big: holds more than 1 MiB; module big is not served",
                true,
            )],
            &InService::default(),
        );
        assert_eq!(outcome.subject.name, "cm-big");
        assert_eq!(
            outcome.subject.status.as_deref(),
            Some("{\"state\":\"serving\"}")
        );
        assert!(matches!(outcome.state, State::Refused(_)));
        // Nothing known of a ConfigMap: nothing said.
        let silent = outcomes(
            &listing(vec![cached("cm-x", "x", "u-4", false)], vec![]),
            &[],
            &InService::default(),
        );
        assert_eq!(silent, []);
    }

    #[test]
    fn long_reasons_are_cut() {
        let long = "x".repeat(3000);
        let text = shorten(&long);
        assert_eq!(text.chars().count(), MAX_TEXT + 1);
        assert!(text.ends_with('…'));
    }
}
