//! What the shadows did: per shadow module (for the status), per backup or restore (for its summary),
//! and which items' differences were already logged.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::compare::{patch_lines, Comparison};
use crate::action::ItemRef;

/// The most (backup, module, action, item) whose difference was logged that are remembered: past it,
/// differences are still counted, but no longer logged.
const MAX_LOGGED: usize = 100_000;

/// The most of a patch a log line quotes, in bytes.
const MAX_PATCH_LOGGED: usize = 16 << 10;

/// How one shadow call ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Same result as the serving module's.
    Same,
    /// A different result.
    Differs(Comparison),
    /// The shadow trapped, ran past its deadline or memory: the failure kind and message.
    Fault(&'static str, String),
    /// Not made (over the shadows' budget, or the shadow went away): why.
    Dropped(&'static str),
}

/// The Backup or Restore a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SubjectKey {
    /// `backup` or `restore`.
    pub(crate) kind: &'static str,
    /// Its `metadata.uid` (empty when it has none).
    pub(crate) uid: String,
    /// Its `metadata.name`.
    pub(crate) name: String,
}

impl SubjectKey {
    /// The subject of kind `kind` whose JSON is `text`.
    pub(crate) fn of(kind: &'static str, text: &str) -> SubjectKey {
        #[derive(Deserialize, Default)]
        struct Meta {
            #[serde(default)]
            uid: String,
            #[serde(default)]
            name: String,
        }
        #[derive(Deserialize, Default)]
        struct Subject {
            #[serde(default)]
            metadata: Meta,
        }
        let subject: Subject = serde_json::from_str(text).unwrap_or_default();
        SubjectKey {
            kind,
            uid: subject.metadata.uid,
            name: subject.metadata.name,
        }
    }
}

/// What one shadow module did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// Calls compared with the serving module's.
    pub compared: u64,
    /// Of those, with the same result.
    pub same: u64,
    /// Of those, with a different result.
    pub differing: u64,
    /// Differing calls by kind of difference (a call may count under several).
    pub differences: BTreeMap<String, u64>,
    /// Calls that failed by a fault, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Calls not made, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// The last call whose result differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_difference: Option<LastDifference>,
    /// The last fault's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fault: Option<String>,
}

impl Tally {
    /// Adds `other`'s counts to these; the later last difference wins. Counts saturate at
    /// `u64::MAX`: they come from status files, which any process of the user may have written.
    pub(crate) fn add(&mut self, other: &Tally) {
        self.compared = self.compared.saturating_add(other.compared);
        self.same = self.same.saturating_add(other.same);
        self.differing = self.differing.saturating_add(other.differing);
        for (into, from) in [
            (&mut self.differences, &other.differences),
            (&mut self.faults, &other.faults),
            (&mut self.dropped, &other.dropped),
        ] {
            for (k, v) in from {
                let count = into.entry(k.clone()).or_default();
                *count = count.saturating_add(*v);
            }
        }
        let later = match (&self.last_difference, &other.last_difference) {
            (Some(mine), Some(theirs)) => theirs.at > mine.at,
            (None, Some(_)) => true,
            _ => false,
        };
        if later {
            self.last_difference = other.last_difference.clone();
        }
        if other.last_fault.is_some() {
            self.last_fault = other.last_fault.clone();
        }
    }

    /// Faults in all.
    pub(crate) fn fault_count(&self) -> u64 {
        saturating_sum(&self.faults)
    }

    /// Dropped calls in all.
    pub(crate) fn dropped_count(&self) -> u64 {
        saturating_sum(&self.dropped)
    }
}

/// The sum of counts by kind, at most `u64::MAX`.
fn saturating_sum(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().fold(0, |sum, n| sum.saturating_add(*n))
}

/// Adds one to a count, which stays at `u64::MAX` once there.
fn bump(count: &mut u64) {
    *count = count.saturating_add(1);
}

/// The last item whose shadow result differed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastDifference {
    /// When (RFC 3339).
    pub at: String,
    /// The action.
    pub action: String,
    /// The item, in Velero's notation (`resource.group ns/name`).
    pub item: String,
    /// `backup <name>` or `restore <name>`.
    pub subject: String,
    /// The kinds of difference.
    pub kinds: Vec<String>,
    /// The JSON Patch from the serving result to the shadow's.
    pub patch: Value,
}

/// One backup's (or restore's) calls, per shadow module.
struct Open {
    last: Instant,
    in_flight: u64,
    modules: BTreeMap<String, Tally>,
}

/// The summary of one backup for one shadow module, logged when its calls went idle.
pub(crate) struct Summary {
    subject: SubjectKey,
    module: String,
    tally: Tally,
    in_flight: u64,
}

impl Summary {
    /// Logs it, at info.
    pub(crate) fn log(&self) {
        let t = &self.tally;
        let join = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        tracing::info!(
            module = self.module.as_str(),
            subject = self.subject.kind,
            name = self.subject.name.as_str(),
            uid = self.subject.uid.as_str(),
            compared = t.compared,
            same = t.same,
            differing = t.differing,
            differences = join(&t.differences),
            faults = join(&t.faults),
            dropped = join(&t.dropped),
            unfinished = self.in_flight,
            "shadow summary of {} {}",
            self.subject.kind,
            self.subject.name
        );
    }
}

/// Everything the shadows did in this process.
#[derive(Default)]
pub(crate) struct Book {
    modules: BTreeMap<String, Tally>,
    open: BTreeMap<SubjectKey, Open>,
    logged: HashSet<(SubjectKey, String, String, String)>,
    dirty: bool,
}

impl Book {
    /// A call of `module`'s shadow for `subject` begins.
    pub(crate) fn started(&mut self, subject: &SubjectKey, module: &str) {
        let open = self.open.entry(subject.clone()).or_insert_with(|| Open {
            last: Instant::now(),
            in_flight: 0,
            modules: BTreeMap::new(),
        });
        open.last = Instant::now();
        open.in_flight += 1;
        open.modules.entry(module.to_string()).or_default();
    }

    /// A call of `module`'s shadow for `subject` ended with `outcome`: counted, and a difference logged
    /// once per item.
    pub(crate) fn finished(
        &mut self,
        subject: &SubjectKey,
        module: &str,
        action: &str,
        item: &ItemRef,
        outcome: Outcome,
    ) {
        self.dirty = true;
        let record = |tally: &mut Tally| match &outcome {
            Outcome::Same => {
                bump(&mut tally.compared);
                bump(&mut tally.same);
            }
            Outcome::Differs(c) => {
                bump(&mut tally.compared);
                bump(&mut tally.differing);
                for kind in &c.kinds {
                    bump(tally.differences.entry(kind.to_string()).or_default());
                }
            }
            Outcome::Fault(kind, message) => {
                bump(tally.faults.entry(kind.to_string()).or_default());
                tally.last_fault = Some(message.clone());
            }
            Outcome::Dropped(why) => bump(tally.dropped.entry(why.to_string()).or_default()),
        };
        record(self.modules.entry(module.to_string()).or_default());
        if let Some(open) = self.open.get_mut(subject) {
            open.last = Instant::now();
            open.in_flight = open.in_flight.saturating_sub(1);
            record(open.modules.entry(module.to_string()).or_default());
        }
        let Outcome::Differs(comparison) = outcome else {
            return;
        };
        let item_name = item.to_string();
        let difference = LastDifference {
            at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            action: action.to_string(),
            item: item_name.clone(),
            subject: format!("{} {}", subject.kind, subject.name),
            kinds: comparison.kinds.iter().map(|k| k.to_string()).collect(),
            patch: comparison.patch,
        };
        let key = (
            subject.clone(),
            module.to_string(),
            action.to_string(),
            item_name,
        );
        if self.logged.len() < MAX_LOGGED && self.logged.insert(key) {
            let patch = difference.patch.to_string();
            let shown = crate::shown::shown_within(&patch, MAX_PATCH_LOGGED);
            tracing::info!(
                module,
                action,
                resource = item.group_resource(),
                namespace = item.namespace.as_str(),
                name = item.name.as_str(),
                subject = subject.kind,
                subject_name = subject.name.as_str(),
                subject_uid = subject.uid.as_str(),
                kinds = difference.kinds.join(","),
                diff = &*shown,
                "shadow result differs: {}",
                patch_lines(&difference.patch).join("; ")
            );
        }
        if let Some(tally) = self.modules.get_mut(module) {
            tally.last_difference = Some(difference);
        }
    }

    /// Takes the summaries of the subjects idle for `idle` with no call in flight (every subject when
    /// `all`), forgetting them.
    pub(crate) fn take_idle(&mut self, idle: Duration, all: bool) -> Vec<Summary> {
        let done: Vec<SubjectKey> = self
            .open
            .iter()
            .filter(|(_, o)| all || (o.in_flight == 0 && o.last.elapsed() >= idle))
            .map(|(k, _)| k.clone())
            .collect();
        let mut summaries = Vec::new();
        for key in done {
            let Some(open) = self.open.remove(&key) else {
                continue;
            };
            self.logged.retain(|(subject, ..)| *subject != key);
            for (module, tally) in open.modules {
                summaries.push(Summary {
                    subject: key.clone(),
                    module,
                    tally,
                    in_flight: open.in_flight,
                });
            }
        }
        summaries
    }

    /// Whether something changed since the last call.
    pub(crate) fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Per shadow module, everything so far.
    pub(crate) fn tallies(&self) -> BTreeMap<String, Tally> {
        self.modules.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str) -> ItemRef {
        ItemRef::parse(&format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns"}}}}"#
        ))
        .unwrap()
    }

    fn differs() -> Outcome {
        Outcome::Differs(Comparison {
            patch: serde_json::json!([{"op": "add", "path": "/item/x", "value": 1}]),
            kinds: vec!["item"],
        })
    }

    #[test]
    fn a_backup_is_summarised_once_idle_and_counts_stay_per_module() {
        let mut book = Book::default();
        let subject = SubjectKey::of("backup", r#"{"metadata":{"name":"b","uid":"u1"}}"#);
        assert_eq!((subject.uid.as_str(), subject.name.as_str()), ("u1", "b"));
        for (i, outcome) in [
            Outcome::Same,
            differs(),
            differs(),
            Outcome::Fault("trap", "boom".into()),
            Outcome::Dropped("busy"),
        ]
        .into_iter()
        .enumerate()
        {
            book.started(&subject, "m");
            book.finished(
                &subject,
                "m",
                "a/b",
                &item(&format!("i{}", i.min(1))),
                outcome,
            );
        }
        // Both differences were of one item: logged once, remembered until the summary.
        assert_eq!(book.logged.len(), 1);
        let tally = &book.tallies()["m"];
        assert_eq!(
            (tally.compared, tally.same, tally.differing),
            (3, 1, 2),
            "{tally:?}"
        );
        assert_eq!(tally.differences["item"], 2);
        assert_eq!((tally.fault_count(), tally.dropped_count()), (1, 1));
        assert_eq!(
            tally.last_difference.as_ref().unwrap().item,
            "configmaps ns/i1"
        );
        assert!(book.take_dirty() && !book.take_dirty());

        book.started(&subject, "m");
        assert!(
            book.take_idle(Duration::ZERO, false).is_empty(),
            "a call in flight"
        );
        book.finished(&subject, "m", "a/b", &item("i9"), Outcome::Same);
        let summaries = book.take_idle(Duration::ZERO, false);
        assert_eq!(summaries.len(), 1);
        assert_eq!(summaries[0].tally.compared, 4);
        assert!(book.logged.is_empty() && book.open.is_empty());
    }

    #[test]
    fn tallies_add_up_and_the_later_difference_wins() {
        let mut a = Tally {
            compared: 2,
            differences: BTreeMap::from([("item".to_string(), 1)]),
            last_difference: Some(LastDifference {
                at: "2026-01-01T00:00:00.000Z".into(),
                action: "a".into(),
                item: "old".into(),
                subject: "backup b".into(),
                kinds: vec![],
                patch: Value::Null,
            }),
            ..Tally::default()
        };
        let mut b = a.clone();
        b.last_difference.as_mut().unwrap().at = "2026-02-01T00:00:00.000Z".into();
        b.last_difference.as_mut().unwrap().item = "new".into();
        a.add(&b);
        assert_eq!(a.compared, 4);
        assert_eq!(a.differences["item"], 2);
        assert_eq!(a.last_difference.unwrap().item, "new");
    }

    #[test]
    fn counts_past_u64_saturate_rather_than_panic() {
        let big = u64::MAX - 1;
        let counts = |n| BTreeMap::from([("x".to_string(), n), ("y".to_string(), n)]);
        let mut a = Tally {
            compared: big,
            same: big,
            differing: big,
            differences: counts(big),
            faults: counts(big),
            dropped: counts(big),
            ..Tally::default()
        };
        assert_eq!((a.fault_count(), a.dropped_count()), (u64::MAX, u64::MAX));
        let b = a.clone();
        a.add(&b);
        assert_eq!(
            (a.compared, a.same, a.differing),
            (u64::MAX, u64::MAX, u64::MAX)
        );
        assert_eq!(a.differences["x"], u64::MAX);
        assert_eq!((a.fault_count(), a.dropped_count()), (u64::MAX, u64::MAX));
    }
}
