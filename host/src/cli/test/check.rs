//! Checking a case's outcome against its expectations: why it does not meet them, each reason with
//! what differs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::suite::{Expect, Id};
use crate::cli::failure::{Failure, EXIT_BAD_INPUT};
use crate::cli::text::cut;

/// At most this many differing lines are shown per expectation.
const MAX_DIFF_LINES: usize = 12;

/// A case's result.
///
/// `pub(super)`, fields too: the runner makes it, `--update` marks it updated, the table and the
/// JUnit report show it.
pub(super) struct Outcome {
    pub(super) name: String,
    pub(super) time: Duration,
    /// Why the case failed, one entry per expectation that does not hold; empty when it passed.
    pub(super) reasons: Vec<String>,
    /// The expectation `--update` would write, when the case failed and can be updated.
    pub(super) observed: Option<String>,
    /// The expected item file `--update` rewrites, with the item observed.
    pub(super) item_file: Option<(PathBuf, Value)>,
    pub(super) updated: bool,
}

/// Why the output of a case does not meet its expectations (empty: it does).
///
/// `pub(super)`: the runner checks each case with it.
pub(super) fn check(expect: &Expect, result: &Result<Value, Failure>, dir: &Path) -> Vec<String> {
    let output = match outcome(expect, result) {
        Ok(output) => output,
        Err(reasons) => return reasons,
    };
    let mut reasons = Vec::new();
    item_lists(expect, output, &mut reasons);
    items_included(expect, output, &mut reasons);
    scalars(expect, output, &mut reasons);
    pointers(expect, output, &mut reasons);
    item_file(expect, output, dir, &mut reasons);
    cluster_writes(expect, output, &mut reasons);
    reasons
}

/// The output to check further, or why the run's success or failure is not the one expected (empty:
/// it failed as expected, and there is nothing more to check).
fn outcome<'a>(
    expect: &Expect,
    result: &'a Result<Value, Failure>,
) -> Result<&'a Value, Vec<String>> {
    match (result, &expect.error) {
        (Err(failure), Some(text)) if failure.message.contains(text.as_str()) => Err(vec![]),
        (Err(failure), Some(text)) => Err(vec![format!(
            "error: expected a message containing {text:?}, got:\n  {}",
            failure.message
        )]),
        (Err(failure), None) => {
            let what = if failure.code == EXIT_BAD_INPUT {
                "bad input"
            } else {
                "the run failed"
            };
            Err(vec![format!("{what}: {}", failure.message)])
        }
        (Ok(_), Some(text)) => Err(vec![format!(
            "error: expected a failure containing {text:?}, the run succeeded"
        )]),
        (Ok(output), None) => Ok(output),
    }
}

/// The item lists a case states whole: the same items in the same order.
fn item_lists(expect: &Expect, output: &Value, reasons: &mut Vec<String>) {
    for (key, expected) in [
        ("additionalItems", &expect.additional_items),
        ("relatedItems", &expect.related_items),
        ("postOperationItems", &expect.post_operation_items),
    ] {
        if let Some(expected) = expected {
            let observed = ids(output, key);
            if &observed != expected {
                reasons.push(format!("{key} differ:\n{}", diff(expected, &observed)));
            }
        }
    }
}

/// `additionalItemsInclude`: the items named are among the additional items, in that order.
fn items_included(expect: &Expect, output: &Value, reasons: &mut Vec<String>) {
    let Some(expected) = &expect.additional_items_include else {
        return;
    };
    let observed = ids(output, "additionalItems");
    // Each expected item is looked for after the last one found; one not found there is
    // missing, and the search for the next goes on from the same place.
    let mut from = 0;
    let mut missing: Vec<&Id> = Vec::new();
    for id in expected {
        match observed[from..].iter().position(|o| o == id) {
            Some(at) => from += at + 1,
            None => missing.push(id),
        }
    }
    if !missing.is_empty() {
        let lines: Vec<String> = missing.iter().map(|id| format!("  - {id}")).collect();
        reasons.push(format!(
            "additionalItemsInclude: not among the {} additional items, in this order:\n{}",
            observed.len(),
            lines.join("\n")
        ));
    }
}

/// The single fields of the output a case states.
fn scalars(expect: &Expect, output: &Value, reasons: &mut Vec<String>) {
    let scalars = [
        ("skipRestore", expect.skip_restore.map(Value::Bool)),
        (
            "operationId",
            expect.operation_id.clone().map(Value::String),
        ),
        (
            "waitForAdditionalItems",
            expect.wait_for_additional_items.map(Value::Bool),
        ),
        (
            "additionalItemsTimeout",
            expect.additional_items_timeout.clone().map(Value::String),
        ),
    ];
    for (key, expected) in scalars {
        let Some(expected) = expected else {
            continue;
        };
        let observed = scalar(output, key);
        if observed.as_ref() != Some(&expected) {
            reasons.push(format!(
                "{key}: expected {}, got {}",
                compact(&expected),
                shown(observed.as_ref())
            ));
        }
    }
}

/// `pointers`: values at JSON pointers into the returned item.
fn pointers(expect: &Expect, output: &Value, reasons: &mut Vec<String>) {
    let Some(pointers) = &expect.pointers else {
        return;
    };
    let item = output.get("item").unwrap_or(&Value::Null);
    for (pointer, expected) in pointers {
        let observed = item.pointer(pointer);
        if observed != Some(expected) {
            reasons.push(format!(
                "pointers: {pointer}:\n  expected {}\n  got      {}",
                compact(expected),
                shown(observed)
            ));
        }
    }
}

/// `item`: the returned item is the one in the file named (relative to the suite's directory).
fn item_file(expect: &Expect, output: &Value, dir: &Path, reasons: &mut Vec<String>) {
    let Some(file) = &expect.item else {
        return;
    };
    let observed = output.get("item").unwrap_or(&Value::Null);
    match crate::documents::read_object(&dir.join(file)) {
        Err(e) => reasons.push(format!("item: {e}")),
        Ok(expected) if &expected != observed => reasons.push(format!(
            "item differs from {}:\n{}",
            file.display(),
            bounded_differences(&expected, observed).join("\n")
        )),
        Ok(_) => {}
    }
}

/// `clusterWrites`: the writes made, in order, each with the fields its expectation names.
fn cluster_writes(expect: &Expect, output: &Value, reasons: &mut Vec<String>) {
    let Some(expected) = &expect.cluster_writes else {
        return;
    };
    let observed: Vec<Value> = output
        .get("clusterWrites")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let matches =
        |want: &Map<String, Value>, got: &Value| want.iter().all(|(k, v)| got.get(k) == Some(v));
    let same = expected.len() == observed.len()
        && expected.iter().zip(&observed).all(|(w, g)| matches(w, g));
    if same {
        return;
    }
    let want: Vec<String> = expected.iter().map(compact_map).collect();
    // A write is shown by the fields its expectation names, so one that matches shows as
    // the same line; a write no expectation stands for, by its usual fields.
    let got: Vec<String> = observed
        .iter()
        .enumerate()
        .map(|(n, g)| match expected.get(n) {
            Some(w) if matches(w, g) => compact_map(w),
            Some(w) => compact_map(&project(g, w.keys().map(String::as_str))),
            None => write_summary(g),
        })
        .collect();
    let mut text = diff_lines(&want, &got);
    // Lines cut to fit can look alike though a field differs: name where it does.
    for (n, (w, g)) in expected.iter().zip(&observed).enumerate() {
        if matches(w, g) || got[n] != want[n] {
            continue;
        }
        let got = project(g, w.keys().map(String::as_str));
        let lines = bounded_differences(&Value::Object(w.clone()), &Value::Object(got));
        text.push_str(&format!("\n  #{} differs at:\n{}", n + 1, lines.join("\n")));
    }
    reasons.push(format!("clusterWrites differ:\n{text}"));
}

/// The [`differences`] between two values, at most [`MAX_DIFF_LINES`] of them and a line saying how
/// many more there are.
fn bounded_differences(expected: &Value, observed: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    differences("", expected, observed, &mut lines);
    let more = lines.len().saturating_sub(MAX_DIFF_LINES);
    lines.truncate(MAX_DIFF_LINES);
    if more > 0 {
        lines.push(format!("  … {more} more"));
    }
    lines
}

/// A value of a run's output as a case states it: `null` (no operation, Velero's default timeout) is
/// `""`; absent (the action's kind has no such field) is `None`.
///
/// `pub(super)`: `--update` writes the value observed.
pub(super) fn scalar(output: &Value, key: &str) -> Option<Value> {
    match output.get(key)? {
        Value::Null => Some(Value::String(String::new())),
        value => Some(value.clone()),
    }
}

/// Where two JSON values differ, one line per JSON pointer: `- path: expected` and `+ path: got`.
fn differences(path: &str, expected: &Value, observed: &Value, lines: &mut Vec<String>) {
    match (expected, observed) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, w) in want {
                let at = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match got.get(key) {
                    Some(g) => differences(&at, w, g, lines),
                    None => lines.push(format!("  - {at}: {}", compact(w))),
                }
            }
            for (key, g) in got.iter().filter(|(k, _)| !want.contains_key(*k)) {
                let at = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                lines.push(format!("  + {at}: {}", compact(g)));
            }
        }
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => {
            for (n, (w, g)) in want.iter().zip(got).enumerate() {
                differences(&format!("{path}/{n}"), w, g, lines);
            }
        }
        (w, g) if w != g => {
            let at = if path.is_empty() { "/" } else { path };
            lines.push(format!("  - {at}: {}", compact(w)));
            lines.push(format!("  + {at}: {}", compact(g)));
        }
        _ => {}
    }
}

/// A value as a short line of JSON, or `nothing` when absent.
fn shown(value: Option<&Value>) -> String {
    value.map(compact).unwrap_or_else(|| "nothing".into())
}

/// A value as JSON on one line, cut to fit the table.
fn compact(value: &Value) -> String {
    cut(&value.to_string(), 80)
}

fn compact_map(map: &Map<String, Value>) -> String {
    compact(&Value::Object(map.clone()))
}

/// A cluster write as one line: the fields a suite usually names.
fn write_summary(write: &Value) -> String {
    compact_map(&project(write, ["verb", "kind", "namespace", "name"]))
}

/// The fields of a write named by `keys` that it has, in that order.
fn project<'k>(write: &Value, keys: impl IntoIterator<Item = &'k str>) -> Map<String, Value> {
    keys.into_iter()
        .filter_map(|key| write.get(key).map(|v| (key.to_string(), v.clone())))
        .collect()
}

/// The identifiers under `key` in a run's output.
///
/// `pub(super)`: `--update` writes the items observed.
pub(super) fn ids(output: &Value, key: &str) -> Vec<Id> {
    output
        .get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| serde_json::from_value::<Id>(v.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What differs between the expected and the observed list: `-` lines only expected, `+` lines
/// only observed, each with its position, found through their longest common subsequence.
fn diff(expected: &[Id], observed: &[Id]) -> String {
    let want: Vec<String> = expected.iter().map(Id::to_string).collect();
    let got: Vec<String> = observed.iter().map(Id::to_string).collect();
    diff_lines(&want, &got)
}

fn diff_lines(want: &[String], got: &[String]) -> String {
    let (n, m) = (want.len(), got.len());
    // common[i][j]: the longest common subsequence of want[i..] and got[j..].
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if want[i] == got[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let mut lines = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && want[i] == got[j] {
            i += 1;
            j += 1;
        } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
            lines.push(format!("  - #{} {}", i + 1, want[i]));
            i += 1;
        } else {
            lines.push(format!("  + #{} {}", j + 1, got[j]));
            j += 1;
        }
    }
    let more = lines.len().saturating_sub(MAX_DIFF_LINES);
    lines.truncate(MAX_DIFF_LINES);
    if more > 0 {
        lines.push(format!("  … {more} more"));
    }
    lines.push(format!("  ({n} expected, {m} observed)"));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_differences_are_listed_by_json_pointer() {
        let want =
            serde_json::json!({"metadata": {"labels": {"a/b": "x", "gone": "y"}}, "spec": [1, 2]});
        let got =
            serde_json::json!({"metadata": {"labels": {"a/b": "z", "new": 1}}, "spec": [1, 3]});
        let mut lines = Vec::new();
        differences("", &want, &got, &mut lines);
        assert_eq!(
            lines,
            [
                "  - /metadata/labels/a~1b: \"x\"",
                "  + /metadata/labels/a~1b: \"z\"",
                "  - /metadata/labels/gone: \"y\"",
                "  + /metadata/labels/new: 1",
                "  - /spec/1: 2",
                "  + /spec/1: 3",
            ]
        );
    }

    #[test]
    fn a_moved_item_shows_as_removed_and_added() {
        let id = |n: &str| Id {
            group: String::new(),
            resource: "pods".into(),
            namespace: "ns".into(),
            name: n.into(),
        };
        let d = diff(&[id("a"), id("b"), id("c")], &[id("a"), id("c"), id("b")]);
        assert!(
            d.contains("- #") && d.contains("+ #") && d.contains("(3 expected, 3 observed)"),
            "{d}"
        );
    }
}
