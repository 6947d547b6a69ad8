//! `velero-wasm test [SUITE...]`: cases written as data (YAML), each run the way `velero-wasm run`
//! runs one action on one item, its output checked against the case's expectations. A table for
//! people, `--junit FILE` for CI, `--update` to take the observed output as the new expectation.
//! The format is described in `docs/suites.md`.
//!
//! Exit status: 0 when every case passes, 1 when one fails, 2 when a suite cannot be read.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::build_freshness::stale_reason;
use super::failure::{Failure, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::module_args::ModuleArgs;
use super::run::{self, RunArgs};
use super::suite_layout;
use super::text::cut;
use crate::config::Config;
use crate::modules::StockChoice;

/// The suite read when none is named: where `velero-wasm new` puts it.
const DEFAULT_SUITE: &str = "tests/suite.yaml";

/// The largest suite file read.
const MAX_SUITE: u64 = 4 << 20;

/// The narrowest the table gets, whatever the terminal: room for a case's name and a reason's words.
const MIN_WIDTH: usize = 60;
/// The longest JUnit failure message (CI systems show it on one line; the description has it all).
const MAX_JUNIT_MESSAGE: usize = 500;

/// At most this many differing lines are shown per expectation.
const MAX_DIFF_LINES: usize = 12;

/// Arguments of `test`.
#[derive(Debug, clap::Args)]
pub(crate) struct TestArgs {
    /// Suite files (YAML). Default: tests/suite.yaml.
    #[arg(value_name = "SUITE")]
    suites: Vec<PathBuf>,

    /// Also write the results as JUnit XML to FILE (one test suite per suite file).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,

    /// Rewrite the expectations of failing cases with what was observed, keeping the rest of the
    /// file as written. Review the change before committing it.
    #[arg(long)]
    update: bool,
}

/// A suite file.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite {
    /// A module directory, as `run --modules`.
    modules: Option<PathBuf>,
    /// The stock modules, as `run --stock` (default: all).
    stock: Option<String>,
    cases: Vec<Case>,
}

/// One case: the inputs of one `run`, and what must hold of its output.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    action: String,
    item: PathBuf,
    backup: Option<PathBuf>,
    restore: Option<PathBuf>,
    item_from_backup: Option<PathBuf>,
    #[serde(default)]
    cluster: Paths,
    replay: Option<PathBuf>,
    now: Option<String>,
    velero_namespace: Option<String>,
    /// Settings of the action's module for this case, each over the manifest's.
    #[serde(default)]
    settings: BTreeMap<String, Setting>,
    #[serde(default)]
    expect: Expect,
}

/// A setting's value: YAML's scalars, passed to the module as text, and lists and maps, passed as
/// JSON (as a manifest's are).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum Setting {
    Text(String),
    Flag(bool),
    Integer(i64),
    Number(f64),
    Structured(serde_json::Value),
}

impl Setting {
    /// The value typed, as the module's settings schema checks it (a list is never a string).
    fn json(&self) -> serde_json::Value {
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
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(untagged)]
enum Paths {
    #[default]
    None,
    One(PathBuf),
    Many(Vec<PathBuf>),
}

impl Paths {
    fn list(&self) -> Vec<PathBuf> {
        match self {
            Paths::None => Vec::new(),
            Paths::One(p) => vec![p.clone()],
            Paths::Many(ps) => ps.clone(),
        }
    }
}

/// What must hold of a case's output; every key is optional, all given must hold.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    /// The run fails and its message contains this.
    error: Option<String>,
    /// Exactly these additional items, in this order.
    additional_items: Option<Vec<Id>>,
    /// These additional items, in this order, among others.
    additional_items_include: Option<Vec<Id>>,
    /// Exactly these related items (item-block actions), in this order.
    related_items: Option<Vec<Id>>,
    /// JSON pointer into the returned item -> the value there.
    pointers: Option<Map<String, Value>>,
    /// Whether the restore action tells Velero to skip the item.
    skip_restore: Option<bool>,
    /// The operation id a v2 action returned (`""` when it started none).
    operation_id: Option<String>,
    /// Exactly these post-operation items (backup-v2), in this order.
    post_operation_items: Option<Vec<Id>>,
    /// Whether the restore-v2 action asks Velero to wait for its additional items.
    wait_for_additional_items: Option<bool>,
    /// How long Velero waits for them, as `run` prints it (`""`: Velero's default).
    additional_items_timeout: Option<String>,
    /// The writes the action made, in order: each given field must equal the write's.
    cluster_writes: Option<Vec<Map<String, Value>>>,
    /// The returned item equals the object in this file (JSON or YAML).
    item: Option<PathBuf>,
}

impl Expect {
    /// The keys given, in the order they are written back by `--update`.
    fn keys(&self) -> Vec<&'static str> {
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Id {
    #[serde(default)]
    group: String,
    resource: String,
    #[serde(default)]
    namespace: String,
    name: String,
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

impl Id {
    /// The YAML flow mapping `--update` writes.
    fn to_yaml(&self) -> String {
        let mut fields = vec![
            format!("group: {}", yaml_string(&self.group)),
            format!("resource: {}", yaml_string(&self.resource)),
        ];
        if !self.namespace.is_empty() {
            fields.push(format!("namespace: {}", yaml_string(&self.namespace)));
        }
        fields.push(format!("name: {}", yaml_string(&self.name)));
        format!("{{{}}}", fields.join(", "))
    }
}

/// A case's result.
struct Outcome {
    name: String,
    time: Duration,
    /// Why the case failed, one entry per expectation that does not hold; empty when it passed.
    reasons: Vec<String>,
    /// The expectation `--update` would write, when the case failed and can be updated.
    observed: Option<String>,
    /// The expected item file `--update` rewrites, with the item observed.
    item_file: Option<(PathBuf, Value)>,
    updated: bool,
}

/// Runs the command; returns the exit status.
pub(crate) async fn test(args: TestArgs, config: &Config) -> u8 {
    let suites = match load_all(&args) {
        Ok(suites) => suites,
        Err(status) => return status,
    };
    let mut report = quick_junit::Report::new("velero-wasm test");
    let mut tally = Tally::default();
    for (file, suite, text) in &suites {
        println!("{}", file.display());
        let outcomes = run_and_update(file, suite, text, args.update, config).await;
        for outcome in &outcomes {
            print_row(outcome, config);
            tally.count(outcome);
        }
        report.add_test_suite(junit_suite(file, &outcomes));
    }
    println!("{}", tally.summary());
    if let Some(path) = &args.junit {
        if let Err(e) = write_junit(&report, path) {
            eprintln!(
                "velero-wasm test: --junit {}: cannot be written: {e}",
                path.display()
            );
            return EXIT_FAILED;
        }
    }
    if tally.failed > 0 {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// Every suite named (or the default one), read before any case runs so that a typo in the last
/// file is reported at once; the exit status, with the message printed, when one cannot be read.
fn load_all(args: &TestArgs) -> Result<Vec<(PathBuf, Suite, String)>, u8> {
    let files = if args.suites.is_empty() {
        vec![PathBuf::from(DEFAULT_SUITE)]
    } else {
        args.suites.clone()
    };
    let mut suites = Vec::new();
    for file in files {
        match load(&file) {
            Ok((suite, text)) => {
                let dir = file.parent().unwrap_or(Path::new(""));
                let module_dir = suite.modules.as_ref().map(|m| dir.join(m));
                if let Some(reason) = module_dir.as_deref().and_then(stale_reason) {
                    eprintln!("velero-wasm test: {}: {reason}", file.display());
                    return Err(EXIT_BAD_INPUT);
                }
                suites.push((file, suite, text))
            }
            Err(message) => {
                let message = format!("{message:#}");
                // Only when the default suite is not there: a suite that is there but wrong is
                // what the message is about.
                let hint = if args.suites.is_empty() && !file.exists() {
                    " (name the suite files to run)"
                } else {
                    ""
                };
                eprintln!("velero-wasm test: {message}{hint}");
                return Err(EXIT_BAD_INPUT);
            }
        }
    }
    Ok(suites)
}

/// Runs a suite's cases and, with `--update`, rewrites the expectations of those that failed.
async fn run_and_update(
    file: &Path,
    suite: &Suite,
    text: &str,
    update_file: bool,
    config: &Config,
) -> Vec<Outcome> {
    let mut outcomes = run_suite(file, suite, config).await;
    if !update_file {
        return outcomes;
    }
    match update(file, text, suite, &mut outcomes) {
        Ok(n) if n > 0 => println!("  rewrote {n} expectations in {}", file.display()),
        Ok(_) => {}
        Err(message) => {
            eprintln!("velero-wasm test: --update: {message:#}");
            // Nothing was written: the cases still fail.
            for outcome in &mut outcomes {
                outcome.updated = false;
            }
        }
    }
    outcomes
}

/// How many cases passed, failed, and failed but had their expectations rewritten.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    updated: usize,
}

impl Tally {
    fn count(&mut self, outcome: &Outcome) {
        if outcome.reasons.is_empty() {
            self.passed += 1;
        } else if outcome.updated {
            self.updated += 1;
        } else {
            self.failed += 1;
        }
    }

    /// The last line of the run.
    fn summary(&self) -> String {
        let mut summary = format!("{} passed, {} failed", self.passed, self.failed);
        if self.updated > 0 {
            summary.push_str(&format!(", {} updated", self.updated));
        }
        summary
    }
}

/// Writes the JUnit XML report to `path`.
fn write_junit(report: &quick_junit::Report, path: &Path) -> anyhow::Result<()> {
    let xml = report.to_string()?;
    super::output_file::replace(path, xml.as_bytes())?;
    Ok(())
}

/// Reads and checks a suite file; the error names the file (and the line, for YAML errors).
fn load(path: &Path) -> anyhow::Result<(Suite, String)> {
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
fn parse(text: &str) -> anyhow::Result<Suite> {
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

/// Runs every case of a suite, in order.
async fn run_suite(file: &Path, suite: &Suite, config: &Config) -> Vec<Outcome> {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut outcomes = Vec::new();
    for case in &suite.cases {
        let start = Instant::now();
        let result = match run_args(&dir, suite, case, config) {
            Ok(args) => run::execute(args, config).await,
            Err(failure) => Err(failure),
        };
        let time = start.elapsed();
        let reasons = check(&case.expect, &result, &dir);
        let observed = if reasons.is_empty() {
            None
        } else {
            observed_expectation(&case.expect, &result)
        };
        let item_file = match (&observed, &case.expect.item, &result) {
            (Some(_), Some(file), Ok(output)) => output
                .get("item")
                .map(|item| (dir.join(file), item.clone())),
            _ => None,
        };
        outcomes.push(Outcome {
            name: case.name.clone(),
            time,
            reasons,
            observed,
            item_file,
            updated: false,
        });
    }
    outcomes
}

/// The arguments `run` would be given for a case, paths taken from the suite's directory.
fn run_args(dir: &Path, suite: &Suite, case: &Case, config: &Config) -> Result<RunArgs, Failure> {
    let at = |p: &PathBuf| dir.join(p);
    let stock = match &suite.stock {
        Some(text) => StockChoice::parse(text).map_err(|e| Failure::bad_input(e.to_string()))?,
        None => StockChoice::All,
    };
    Ok(RunArgs {
        action: case.action.clone(),
        item: Some(at(&case.item)),
        operation_id: None,
        cancel: false,
        velero_namespace: case.velero_namespace.clone(),
        backup: case.backup.as_ref().map(at),
        restore: case.restore.as_ref().map(at),
        item_from_backup: case.item_from_backup.as_ref().map(at),
        cluster: case.cluster.list().iter().map(at).collect(),
        kubeconfig: None,
        context: None,
        record: None,
        replay: case.replay.as_ref().map(at),
        now: case.now.clone(),
        settings: case
            .settings
            .iter()
            .map(|(key, value)| (key.clone(), value.json()))
            .collect(),
        modules: ModuleArgs {
            modules: suite.modules.as_ref().map(at),
            stock,
            trusted_keys: config.var_os("VELERO_WASM_TRUSTED_KEYS").map(PathBuf::from),
        },
        // Checked for the suite as it is read (`load_all`); checked again per case, as `run` does.
        stale: Default::default(),
        offline: true,
    })
}

/// Why the output of a case does not meet its expectations (empty: it does).
fn check(expect: &Expect, result: &Result<Value, Failure>, dir: &Path) -> Vec<String> {
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
fn scalar(output: &Value, key: &str) -> Option<Value> {
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
fn ids(output: &Value, key: &str) -> Vec<Id> {
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

/// The `expect:` block `--update` writes for a failing case: the keys the case had, with the values
/// observed. None when the failure is not one an expectation can record (bad input).
fn observed_expectation(expect: &Expect, result: &Result<Value, Failure>) -> Option<String> {
    let output = match result {
        Err(failure) if failure.code == EXIT_BAD_INPUT && expect.error.is_none() => return None,
        Err(failure) => return Some(format!("error: {}\n", yaml_string(&failure.message))),
        Ok(output) => output,
    };
    let mut keys: Vec<&str> = expect
        .keys()
        .into_iter()
        .filter(|k| *k != "error")
        .collect();
    if keys.is_empty() {
        keys = ["additionalItems", "relatedItems", "skipRestore"]
            .into_iter()
            .filter(|k| output.get(*k).is_some())
            .collect();
    }
    Some(
        keys.into_iter()
            .map(|key| observed_key(key, expect, output))
            .collect(),
    )
}

/// The lines of `--update`'s expectation for one key, from the run's `output`.
fn observed_key(key: &str, expect: &Expect, output: &Value) -> String {
    match key {
        "additionalItems" | "relatedItems" | "additionalItemsInclude" | "postOperationItems" => {
            observed_items(key, output)
        }
        "skipRestore" | "operationId" | "waitForAdditionalItems" | "additionalItemsTimeout" => {
            // Absent (no longer this kind of action): YAML's null, which the suite reads as no
            // expectation rather than one that can never hold.
            let value = scalar(output, key).unwrap_or(Value::Null);
            format!("{key}: {}\n", yaml_value(&value))
        }
        "pointers" => observed_pointers(expect, output),
        "item" => {
            let file = expect.item.as_deref().unwrap_or(Path::new(""));
            format!("item: {}\n", yaml_string(&file.display().to_string()))
        }
        "clusterWrites" => observed_writes(output),
        _ => String::new(),
    }
}

/// An item list (`additionalItemsInclude` records every additional item, in order).
fn observed_items(key: &str, output: &Value) -> String {
    let source = match key {
        "relatedItems" | "postOperationItems" => key,
        _ => "additionalItems",
    };
    let ids = ids(output, source);
    if ids.is_empty() {
        return format!("{key}: []\n");
    }
    let mut text = format!("{key}:\n");
    for id in ids {
        text.push_str(&format!("  - {}\n", id.to_yaml()));
    }
    text
}

/// The values now at the pointers the case names (a pointer that leads nowhere is left out).
fn observed_pointers(expect: &Expect, output: &Value) -> String {
    let item = output.get("item").unwrap_or(&Value::Null);
    let mut text = "pointers:\n".to_string();
    for pointer in expect.pointers.iter().flat_map(|p| p.keys()) {
        if let Some(value) = item.pointer(pointer) {
            text.push_str(&format!(
                "  {}: {}\n",
                yaml_string(pointer),
                yaml_value(value)
            ));
        }
    }
    text
}

/// The cluster writes made, each by the fields that name it.
fn observed_writes(output: &Value) -> String {
    let writes = output
        .get("clusterWrites")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if writes.is_empty() {
        return "clusterWrites: []\n".to_string();
    }
    let mut text = "clusterWrites:\n".to_string();
    for write in writes {
        let fields: Vec<String> = ["verb", "apiVersion", "kind", "namespace", "name"]
            .iter()
            .filter_map(|k| write.get(*k).map(|v| (k, v)))
            .filter(|(_, v)| v.as_str() != Some(""))
            .map(|(k, v)| format!("{k}: {}", yaml_value(v)))
            .collect();
        text.push_str(&format!("  - {{{}}}\n", fields.join(", ")));
    }
    text
}

/// A string as a YAML scalar: plain when YAML reads it back as that same string, else quoted.
fn yaml_string(text: &str) -> String {
    let plain = !text.is_empty()
        && !text.contains(['\n', '{', '}', '[', ']', ',', '#', '"', '\''])
        && text.trim() == text
        && matches!(serde_norway::from_str::<Value>(text), Ok(Value::String(s)) if s == text);
    if plain {
        text.to_string()
    } else {
        Value::String(text.to_string()).to_string()
    }
}

/// A JSON value as YAML on one line (flow style; JSON's quoted strings are YAML's too).
fn yaml_value(value: &Value) -> String {
    match value {
        Value::String(s) => yaml_string(s),
        other => other.to_string(),
    }
}

/// Rewrites the expectations of the failing cases of one suite file (`--update`); returns how many.
/// Only the bytes of those cases' `expect:` change (found by parsing, see [`suite_layout`]); the new
/// text must read back as the same suite but for those expectations before anything is written.
fn update(
    file: &Path,
    text: &str,
    suite: &Suite,
    outcomes: &mut [Outcome],
) -> anyhow::Result<usize> {
    let observed: Vec<(usize, String)> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(n, o)| o.observed.clone().map(|block| (n, block)))
        .collect();
    let blocks: Vec<(usize, &str)> = observed.iter().map(|(n, b)| (*n, b.as_str())).collect();
    let (new_text, unwritable) =
        rewrite(text, &blocks).with_context(|| file.display().to_string())?;
    let mut count = 0;
    let mut items = Vec::new();
    for &(n, _) in &blocks {
        let outcome = &mut outcomes[n];
        if unwritable.contains(&n) {
            outcome.reasons.push(
                "--update: this case is not written as `key: value` lines (it is a flow mapping or \
                 an alias); update its expect: by hand"
                    .to_string(),
            );
            continue;
        }
        outcome.updated = true;
        count += 1;
        items.extend(outcome.item_file.clone());
    }
    if count == 0 {
        return Ok(0);
    }
    let dir = file.parent().unwrap_or(Path::new(""));
    for (path, _) in &items {
        expectation_file_in(dir, path)?;
    }
    let not_written = |why: String| {
        format!(
            "{}: the rewritten suite would not read back {why}; nothing written",
            file.display()
        )
    };
    let reread = parse(&new_text).map_err(|e| anyhow!(not_written(format!("({e:#})"))))?;
    if let Some(n) = changed_beyond_expectations(suite, &reread, &blocks, &unwritable) {
        return Err(anyhow!(not_written(format!(
            "as the same suite (case {} would change beyond its expect:)",
            n + 1
        ))));
    }
    super::output_file::replace(file, new_text.as_bytes())?;
    for (path, item) in items {
        let json = serde_json::to_string_pretty(&item).unwrap_or_default() + "\n";
        write_no_follow(&path, json.as_bytes())
            .map_err(|e| anyhow!("{}: cannot be written: {e}", path.display()))?;
    }
    Ok(count)
}

/// `text` with the `expect:` of the cases given (by their index) replaced by their new blocks, and
/// the indexes of the cases it cannot rewrite (not written as block mappings).
fn rewrite(text: &str, blocks: &[(usize, &str)]) -> anyhow::Result<(String, Vec<usize>)> {
    let layout = suite_layout::cases(text).map_err(|e| anyhow!("invalid YAML {e}"))?;
    let mut edits = Vec::new();
    let mut unwritable = Vec::new();
    for &(n, block) in blocks {
        match layout.get(n).and_then(|case| case.block.as_ref()) {
            Some(case) => edits.push(case.edit(text, block)),
            None => unwritable.push(n),
        }
    }
    // From the last to the first, so the places of those before stay as they were found.
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut new_text = text.to_string();
    for (range, replacement) in edits {
        new_text.replace_range(range, &replacement);
    }
    Ok((new_text, unwritable))
}

/// The first case of `before` that `after` (the rewritten suite) changes in more than the expectation
/// `--update` wrote for it, if any; the suite's other keys count as case 0.
fn changed_beyond_expectations(
    before: &Suite,
    after: &Suite,
    blocks: &[(usize, &str)],
    unwritable: &[usize],
) -> Option<usize> {
    if (&before.modules, &before.stock) != (&after.modules, &after.stock)
        || before.cases.len() != after.cases.len()
    {
        return Some(0);
    }
    let written = |n: usize| {
        blocks
            .iter()
            .find(|(m, _)| *m == n && !unwritable.contains(&n))
            .map(|(_, block)| serde_norway::from_str::<Option<Expect>>(block))
    };
    before
        .cases
        .iter()
        .zip(&after.cases)
        .enumerate()
        .find_map(|(n, (was, is))| {
            let expect = match written(n) {
                None => was.expect.clone(),
                Some(Ok(expect)) => expect.unwrap_or_default(),
                Some(Err(_)) => return Some(n),
            };
            let same = Case {
                expect,
                ..was.clone()
            };
            (&same != is).then_some(n)
        })
}

/// Checks that `--update` may rewrite `path`, an `expect.item` file of a suite in `dir`: it must lie
/// in the suite's directory or below it (no absolute path, no `..`), and neither it nor a directory
/// on the way may be a symbolic link. Otherwise nothing of the suite is written.
fn expectation_file_in(dir: &Path, path: &Path) -> anyhow::Result<()> {
    let refuse = |why: &str| {
        Err(anyhow!(
            "expect.item {}: {why}; --update writes only files in the suite's directory; nothing written",
            path.display()
        ))
    };
    let Ok(inside) = path.strip_prefix(dir) else {
        return refuse("outside the suite's directory");
    };
    let mut at = dir.to_path_buf();
    for component in inside.components() {
        let std::path::Component::Normal(name) = component else {
            return refuse("outside the suite's directory");
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return refuse(&format!("{} is a symbolic link", at.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes `bytes` to `path`, creating or truncating it, but never through a symbolic link (checked
/// before by [`expectation_file_in`]; `O_NOFOLLOW` closes the gap between the check and the write).
fn write_no_follow(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .write_all(bytes)
}

/// One row of the table: the case, its result, its time; then why it failed.
fn print_row(outcome: &Outcome, config: &Config) {
    let result = match (outcome.reasons.is_empty(), outcome.updated) {
        (true, _) => "ok",
        (false, true) => "UPDATED",
        (false, false) => "FAIL",
    };
    let time = format!("{:.2} s", outcome.time.as_secs_f64());
    // The terminal's width (`COLUMNS`, the tty's, else 100).
    let width = super::text::width(config).max(MIN_WIDTH);
    let name_width = width - 2 - 2 - 7 - 1 - 8;
    println!(
        "  {:<name_width$}  {result:<7} {time:>8}",
        cut(&outcome.name, name_width)
    );
    if outcome.updated {
        return;
    }
    // Wrapped, never cut: the end of a reason is often the rule to add.
    let options = textwrap::Options::new(width - 6).subsequent_indent("  ");
    for reason in &outcome.reasons {
        for line in reason.lines() {
            if line.chars().count() <= width - 6 {
                println!("      {line}");
                continue;
            }
            for piece in textwrap::wrap(line, &options) {
                println!("      {piece}");
            }
        }
    }
}

/// One JUnit test suite: the suite file, a test case per case.
fn junit_suite(file: &Path, outcomes: &[Outcome]) -> quick_junit::TestSuite {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new(file.display().to_string());
    let mut total = Duration::ZERO;
    for outcome in outcomes {
        let status = if outcome.reasons.is_empty() {
            TestCaseStatus::success()
        } else {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            // The first reason on one line (a diff's heading alone says little), the rest in the
            // description.
            let first: Vec<&str> = outcome.reasons[0].lines().map(str::trim).collect();
            status.set_message(cut(&first.join(" "), MAX_JUNIT_MESSAGE));
            status.set_description(outcome.reasons.join("\n"));
            status
        };
        let mut case = TestCase::new(outcome.name.clone(), status);
        case.set_classname(file.display().to_string());
        case.set_time(outcome.time);
        total += outcome.time;
        suite.add_test_case(case);
    }
    suite.set_time(total);
    suite
}

#[cfg(test)]
mod tests {
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

    const SUITE: &str = "\
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
    fn update_replaces_only_the_expect_block_of_the_case() {
        let block =
            "additionalItems:\n  - {group: \"\", resource: pods, namespace: ns, name: new}\n";
        let (out, unwritable) = rewrite(SUITE, &[(0, block)]).unwrap();
        assert!(unwritable.is_empty());
        assert!(
            out.contains("name: new}") && !out.contains("name: old}"),
            "{out}"
        );
        assert!(
            out.contains("# a comment that stays") && out.contains("# a comment after the case")
        );
        let (added, _) = rewrite(SUITE, &[(1, "skipRestore: true\n")]).unwrap();
        assert!(
            added.ends_with("    expect:\n      skipRestore: true\n"),
            "{added}"
        );
        let suite = parse(&added).unwrap();
        assert_eq!(suite.cases[1].expect.skip_restore, Some(true));
        let (both, _) = rewrite(SUITE, &[(0, block), (1, "skipRestore: true\n")]).unwrap();
        assert_eq!(
            parse(&both).unwrap(),
            parse(&added.replace("name: old}", "name: new}")).unwrap()
        );
    }

    /// The attack of issue 26: a block scalar of the first case holds the text of a `- name:` and an
    /// `expect:` of the second. `--update` of the second must change the second, and leave the
    /// first case's text byte for byte.
    #[test]
    fn update_finds_the_case_by_parsing_not_by_text_inside_a_block_scalar() {
        let decoy = concat!(
            "  - name: first\n",
            "    action: a\n",
            "    item: i.json\n",
            "    backup: b.json\n",
            "    settings:\n",
            "      note: |\n",
            "        - name: second\n",
            "          action: a\n",
            "          expect:\n",
            "            skipRestore: false\n",
        );
        let text = format!(
            "cases:\n{decoy}  - name: second\n    action: a\n    item: i.json\n    backup: b.json\n    expect:\n      skipRestore: false\n"
        );
        let suite = parse(&text).unwrap();
        let (out, unwritable) = rewrite(&text, &[(1, "skipRestore: true\n")]).unwrap();
        assert!(unwritable.is_empty());
        assert!(
            out.starts_with(&format!("cases:\n{decoy}")),
            "the first case is as written: {out}"
        );
        let after = parse(&out).unwrap();
        assert_eq!(after.cases[1].expect.skip_restore, Some(true), "{out}");
        assert_eq!(
            changed_beyond_expectations(&suite, &after, &[(1, "skipRestore: true\n")], &[]),
            None
        );
        // What a search of the text would have written is refused before it is written.
        let wrong = text.replacen("skipRestore: false", "skipRestore: true", 1);
        assert_eq!(
            changed_beyond_expectations(
                &suite,
                &parse(&wrong).unwrap(),
                &[(1, "skipRestore: true\n")],
                &[]
            ),
            Some(0)
        );
    }

    #[test]
    fn a_flow_style_case_is_left_to_be_updated_by_hand() {
        let text = "cases:\n  - {name: a, action: a, item: i.json, backup: b.json}\n";
        let (out, unwritable) = rewrite(text, &[(0, "skipRestore: true\n")]).unwrap();
        assert_eq!((out.as_str(), unwritable), (text, vec![0]));
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

    #[test]
    fn strings_are_plain_only_when_yaml_reads_them_back() {
        assert_eq!(yaml_string("pods"), "pods");
        assert_eq!(yaml_string(""), "\"\"");
        assert_eq!(yaml_string("true"), "\"true\"");
        assert_eq!(yaml_string("a: b"), "\"a: b\"");
        assert_eq!(
            yaml_string("/metadata/labels/a~1b"),
            "/metadata/labels/a~1b"
        );
    }

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
