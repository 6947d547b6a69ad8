//! The suite file's format: a suite, its cases, their settings and expectations; reading one and
//! checking what serde cannot.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cli::suite_layout;
use crate::modules::StockChoice;

/// The largest suite file read.
const MAX_SUITE: u64 = 4 << 20;

/// A suite file.
///
/// `pub(super)`, fields too: the entry reads its module directory, the runner runs its cases,
/// `--update` compares it before and after a rewrite.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Suite {
    /// A module directory, as `run --modules`.
    pub(super) modules: Option<PathBuf>,
    /// The stock modules, as `run --stock` (default: all).
    pub(super) stock: Option<String>,
    pub(super) cases: Vec<Case>,
}

/// One case: the inputs of one `run`, and what must hold of its output.
///
/// `pub(super)`, fields too: the runner makes a `run` of it, `--update` rebuilds one with a new
/// `expect:` (every field named).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Case {
    pub(super) name: String,
    pub(super) action: String,
    pub(super) item: PathBuf,
    pub(super) backup: Option<PathBuf>,
    pub(super) restore: Option<PathBuf>,
    pub(super) item_from_backup: Option<PathBuf>,
    #[serde(default)]
    pub(super) cluster: Paths,
    pub(super) replay: Option<PathBuf>,
    pub(super) now: Option<String>,
    pub(super) velero_namespace: Option<String>,
    /// Settings of the action's module for this case, each over the manifest's.
    #[serde(default)]
    pub(super) settings: BTreeMap<String, Setting>,
    #[serde(default)]
    pub(super) expect: Expect,
}

/// A setting's value: YAML's scalars, passed to the module as text, and lists and maps, passed as
/// JSON (as a manifest's are).
///
/// `pub(super)`: the type of [`Case::settings`], which the runner passes to `run`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum Setting {
    Text(String),
    Flag(bool),
    Integer(i64),
    Number(f64),
    Structured(serde_json::Value),
}

impl Setting {
    /// The value typed, as the module's settings schema checks it (a list is never a string).
    ///
    /// `pub(super)`: the runner passes the settings to `run`.
    pub(super) fn json(&self) -> serde_json::Value {
        match self {
            Setting::Text(s) => serde_json::Value::String(s.clone()),
            Setting::Flag(b) => serde_json::Value::Bool(*b),
            Setting::Integer(n) => serde_json::Value::from(*n),
            Setting::Number(x) => serde_json::Value::from(*x),
            Setting::Structured(value) => value.clone(),
        }
    }
}

/// One path or a list of them.
///
/// `pub(super)`: the type of [`Case::cluster`], which the runner passes to `run`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum Paths {
    #[default]
    None,
    One(PathBuf),
    Many(Vec<PathBuf>),
}

impl Paths {
    /// The paths given (none, one or several).
    ///
    /// `pub(super)`: the runner passes them to `run`.
    pub(super) fn list(&self) -> Vec<PathBuf> {
        match self {
            Paths::None => Vec::new(),
            Paths::One(p) => vec![p.clone()],
            Paths::Many(ps) => ps.clone(),
        }
    }
}

/// What must hold of a case's output; every key is optional, all given must hold.
///
/// `pub(super)`, fields too: checked against the output, and written back, in other files.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Expect {
    /// The run fails and its message contains this.
    pub(super) error: Option<String>,
    /// Exactly these additional items, in this order.
    pub(super) additional_items: Option<Vec<Id>>,
    /// These additional items, in this order, among others.
    pub(super) additional_items_include: Option<Vec<Id>>,
    /// Exactly these related items (item-block actions), in this order.
    pub(super) related_items: Option<Vec<Id>>,
    /// JSON pointer into the returned item -> the value there.
    pub(super) pointers: Option<Map<String, Value>>,
    /// Whether the restore action tells Velero to skip the item.
    pub(super) skip_restore: Option<bool>,
    /// The operation id a v2 action returned (`""` when it started none).
    pub(super) operation_id: Option<String>,
    /// Exactly these post-operation items (backup-v2), in this order.
    pub(super) post_operation_items: Option<Vec<Id>>,
    /// Whether the restore-v2 action asks Velero to wait for its additional items.
    pub(super) wait_for_additional_items: Option<bool>,
    /// How long Velero waits for them, as `run` prints it (`""`: Velero's default).
    pub(super) additional_items_timeout: Option<String>,
    /// The writes the action made, in order: each given field must equal the write's.
    pub(super) cluster_writes: Option<Vec<Map<String, Value>>>,
    /// The returned item equals the object in this file (JSON or YAML).
    pub(super) item: Option<PathBuf>,
}

impl Expect {
    /// The keys given, in the order they are written back by `--update`.
    ///
    /// `pub(super)`: `--update` writes these keys.
    pub(super) fn keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        let given = [
            ("error", self.error.is_some()),
            ("additionalItems", self.additional_items.is_some()),
            (
                "additionalItemsInclude",
                self.additional_items_include.is_some(),
            ),
            ("relatedItems", self.related_items.is_some()),
            ("skipRestore", self.skip_restore.is_some()),
            ("operationId", self.operation_id.is_some()),
            ("postOperationItems", self.post_operation_items.is_some()),
            (
                "waitForAdditionalItems",
                self.wait_for_additional_items.is_some(),
            ),
            (
                "additionalItemsTimeout",
                self.additional_items_timeout.is_some(),
            ),
            ("pointers", self.pointers.is_some()),
            ("item", self.item.is_some()),
            ("clusterWrites", self.cluster_writes.is_some()),
        ];
        for (key, present) in given {
            if present {
                keys.push(key);
            }
        }
        keys
    }
}

/// A Kubernetes object as Velero names it: `{group, resource, namespace, name}`.
///
/// `pub(super)`, fields too: the checks compare and show lists of them, `--update` writes them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Id {
    #[serde(default)]
    pub(super) group: String,
    pub(super) resource: String,
    #[serde(default)]
    pub(super) namespace: String,
    pub(super) name: String,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        write!(f, "{resource} {}/{}", self.namespace, self.name)
    }
}

/// Reads and checks a suite file; the error names the file (and the line, for YAML errors).
///
/// `pub(super)`: the entry reads every suite named before any case runs.
pub(super) fn load(path: &Path) -> anyhow::Result<(Suite, String)> {
    let at = path.display();
    let bytes = crate::regular_file::read(path, MAX_SUITE).map_err(|e| anyhow!("{at}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow!("{at}: cannot be read: it is not UTF-8 text ({e})"))?;
    crate::yaml_events::check(&text, crate::documents::MAX_YAML_DEPTH)
        .map_err(|e| anyhow!("{at}: invalid YAML{e}"))?;
    let suite = parse(&text).with_context(|| at.to_string())?;
    Ok((suite, text))
}

/// For serde's "unknown field `x`, expected one of `a`, `b`": the nearest key, if one is near, and
/// where the format is written down.
fn unknown_key_hint(error: &str) -> String {
    let Some(rest) = error.split("unknown field `").nth(1) else {
        return String::new();
    };
    let Some((key, expected)) = rest.split_once('`') else {
        return String::new();
    };
    let keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match crate::modules::settings_schema::nearest(key, &keys) {
        Some(near) => format!(" (did you mean `{near}`? the suite format: docs/suites.md)"),
        None => " (the suite format: docs/suites.md)".to_string(),
    }
}

/// Parses a suite and checks what serde cannot: unique names, one of backup and restore.
///
/// `pub(super)`: `--update` reads the rewritten suite back before writing it.
pub(super) fn parse(text: &str) -> anyhow::Result<Suite> {
    let suite: Suite = serde_norway::from_str(text)
        .map_err(|e| anyhow!("invalid suite: {e}{}", unknown_key_hint(&e.to_string())))?;
    if let Some(stock) = &suite.stock {
        StockChoice::parse(stock).map_err(|e| anyhow!("stock: {e}"))?;
    }
    // Each case's line, found in one pass over the file (the suite parsed, so its syntax is valid).
    let layout = suite_layout::cases(text).unwrap_or_default();
    let mut names = HashSet::new();
    for (n, case) in suite.cases.iter().enumerate() {
        let line = layout
            .get(n)
            .map(|c| format!("line {}: ", c.line))
            .unwrap_or_default();
        let which = format!("{line}case {} ({:?})", n + 1, case.name);
        if case.name.trim().is_empty() {
            return Err(anyhow!("{which}: the name is empty"));
        }
        if !names.insert(case.name.as_str()) {
            return Err(anyhow!(
                "{which}: another case has this name; names must be unique"
            ));
        }
        match (&case.backup, &case.restore) {
            (Some(_), Some(_)) => return Err(anyhow!("{which}: give backup or restore, not both")),
            (None, None) => return Err(anyhow!("{which}: give backup: FILE or restore: FILE")),
            _ => {}
        }
        if case.replay.is_some() && !matches!(case.cluster, Paths::None) {
            return Err(anyhow!("{which}: give cluster or replay, not both"));
        }
    }
    Ok(suite)
}

/// `pub(super)`: `--update`'s tests rewrite the same suite.
#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_named_with_the_nearest_one() {
        let e = parse("cases:\n  - name: a\n    action: x/y\n    item: i.json\n    setting: {}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown field `setting`") && e.contains("did you mean `settings`?"),
            "{e}"
        );
        let e = parse("cases: []\nmodlues: m\n").unwrap_err().to_string();
        assert!(e.contains("did you mean `modules`?"), "{e}");
    }

    /// A suite with comments, shared with `--update`'s tests (hence `pub(in crate::cli::test)`).
    pub(in crate::cli::test) const SUITE: &str = "\
# a comment that stays
cases:
  - name: first
    action: a
    item: i.json
    backup: b.json
    expect:
      additionalItems:
        - {group: \"\", resource: pods, namespace: ns, name: old}
    # a comment after the case

  - name: second
    action: a
    item: i.json
    backup: b.json
";

    #[test]
    fn unknown_keys_and_duplicate_names_are_refused_with_the_line() {
        let typo = SUITE.replace("expect:", "expcet:");
        let e = parse(&typo).unwrap_err().to_string();
        assert!(e.contains("expcet") && e.contains("line"), "{e}");
        let twice = SUITE.replace("name: second", "name: first");
        let e = parse(&twice).unwrap_err().to_string();
        assert!(e.contains("line 12") && e.contains("unique"), "{e}");
    }

    #[test]
    fn parsing_a_suite_reads_its_text_a_bounded_number_of_times() {
        // Lines are found in one pass: 16,000 cases parse in the time of a unit test (they took
        // over five minutes when each case's line was searched for from the top).
        let mut text = String::from("cases:\n");
        for n in 0..16_000 {
            text.push_str(&format!(
                "  - name: case {n}\n    action: a\n    item: i.json\n    backup: b.json\n    expect:\n      skipRestore: false\n"
            ));
        }
        let suite = parse(&text).unwrap();
        assert_eq!(suite.cases.len(), 16_000);
        let duplicate = format!(
            "{text}  - name: case 7\n    action: a\n    item: i.json\n    backup: b.json\n"
        );
        let e = parse(&duplicate).unwrap_err().to_string();
        assert!(e.starts_with("line 96002: case 16001"), "{e}");
    }
}
