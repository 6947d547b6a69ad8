//! `velero-wasm diff`: what a change of modules does to a real backup, before it serves one. Every
//! backup, item-block and restore action of two module sets (`--old`, `--new`) runs over every item of
//! a backup (a Velero backup archive or a directory of manifests), with the backup's items as the
//! cluster; the items whose results differ are reported per action, with JSON-pointer differences.
//! Actions present in one set only are named, and so is what could not be compared (delete actions).
//!
//! ```text
//! velero-wasm diff BACKUP [--old SET] --new SET [--backup FILE] [--restore FILE]
//!                  [--trusted-keys FILE|DIR] [--json]
//! ```
//!
//! A SET is `stock`, a module directory (as `--modules` takes), or a YAML file of module ConfigMaps as
//! `module pack` writes them; either adds to or replaces the stock modules by name. Exit 0 when every
//! result is the same, 1 when one differs, 2 on bad input.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use futures::StreamExt;
use serde_json::{json, Value};

use super::diff_archive;
use super::failure::{Failure, EXIT_FAILED, EXIT_OK};
use super::module_args::read_trusted_keys;
use super::restore_input::{mapped_namespace, reset_for_restore};
use super::text::{table, wrap, Column};
use crate::action::compare::{self, Comparison};
use crate::action::{ActionKind, BackupRequest, ItemRef, RestoreRequest};
use crate::capabilities::{Clock, Environment, Services};
use crate::cluster::fixture::FixtureCluster;
use crate::config::Config;
use crate::documents::read_object;
use crate::modules::{StockChoice, TrustedKeys};
use crate::plan::{self, ModuleConfig};
use crate::runtime::{calls, ActionEntry, Lane, Runtime};

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// The backup: a Velero backup archive (the backup's .tar.gz from object storage), or a file or
    /// directory of manifests (JSON or YAML, as `run --cluster` reads them).
    #[arg(value_name = "BACKUP")]
    source: PathBuf,

    /// The module set results are compared against: `stock`, a module directory, or a YAML file of
    /// module ConfigMaps (`module pack`). Directory and ConfigMap modules add to or replace the stock
    /// modules by name.
    #[arg(long, value_name = "SET", default_value = "stock")]
    old: String,

    /// The candidate module set, given as --old is.
    #[arg(long, value_name = "SET")]
    new: String,

    /// The velero.io/v1 Backup the actions see (default: one named velero-wasm-diff in namespace
    /// velero, with an empty spec).
    #[arg(long, value_name = "FILE")]
    backup: Option<PathBuf>,

    /// The velero.io/v1 Restore restore actions see (default: one named velero-wasm-diff in the
    /// Backup's namespace, restoring that Backup, with no other spec). Each item is given to them as
    /// `run` gives it: as backed up, then with what Velero removes before restore actions run.
    #[arg(long, value_name = "FILE")]
    restore: Option<PathBuf>,

    /// Public keys (a .pub file or a directory of them): every module beyond the stock ones, in both
    /// sets, must be signed by one of them.
    #[arg(long, value_name = "FILE|DIR")]
    trusted_keys: Option<PathBuf>,

    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the command; returns the exit status.
pub(crate) async fn diff(args: DiffArgs, config: &Config) -> u8 {
    match execute(&args, config).await {
        Ok(report) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report.json()).unwrap_or_default()
                );
            } else {
                let shown = report.text(super::text::width(config));
                print!("{}", super::text::printable(&shown));
            }
            if report.differences() > 0 {
                EXIT_FAILED
            } else {
                EXIT_OK
            }
        }
        Err(failure) => {
            eprintln!(
                "velero-wasm diff: {}",
                super::text::printable(&failure.message)
            );
            failure.code
        }
    }
}

/// One side of the comparison: the set as named, and its loaded runtime.
struct Side {
    name: String,
    runtime: Runtime,
}

/// Reads the inputs, loads both sets, runs every applicable action of each over every item.
async fn execute(args: &DiffArgs, config: &Config) -> Result<Report, Failure> {
    let started = Instant::now();
    let trusted = read_trusted_keys(args.trusted_keys.as_deref())?;
    let source =
        diff_archive::read(&args.source).map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let backup = read_backup(args)?;
    let restore = read_restore(args, &backup)?;
    // The clusters the actions read hold the items' text, shared with the list of items: nothing is
    // written to disk, so nothing is left behind however the run ends.
    let start = SystemTime::now();
    let cluster = FixtureCluster::of_items(
        source
            .items
            .iter()
            .map(|i| (i.from.as_str(), &i.identity, &i.text)),
        Clock::fixed(start),
    )
    .map_err(|e| Failure::bad_input(format!("{}: {e}", args.source.display())))?;
    let format_version = source.format_version.clone();
    let at_once = source
        .memory
        .comparisons_at_once(std::thread::available_parallelism().map_or(2, |n| n.get() * 2));
    tracing::debug!(
        items = source.items.len(),
        held_bytes = source.memory.held(),
        per_comparison_bytes = source.memory.per_comparison(),
        at_once,
        "the backup's items, within the memory diff takes for them"
    );
    let items = items_of(source);
    let sides = load_sides(args, trusted, cluster, start, &backup, config).await?;
    let (old_name, new_name) = (sides[0].name.clone(), sides[1].name.clone());
    let all = every_action(&sides);
    let progress = Progress::new(items.len());
    let mut actions: Vec<ActionReport> = all
        .iter()
        .map(|(name, kind)| ActionReport {
            name: name.clone(),
            kind: *kind,
            in_old: sides[0].runtime.action(name).is_some(),
            in_new: sides[1].runtime.action(name).is_some(),
            applied: 0,
            differing: Vec::new(),
        })
        .collect();
    // Items run in parallel, a few per core as far as the memory bound for items has room for their
    // comparisons (diff_memory), each on its own task; results are taken in item order.
    let (sides, names) = (
        Arc::new(sides),
        Arc::new(all.into_keys().collect::<Vec<_>>()),
    );
    let subjects = Arc::new(Subjects {
        backup: backup.to_string(),
        restore,
    });
    let mut results = futures::stream::iter(items.iter().cloned())
        .map(|(identity, text)| {
            let (sides, names, subjects) = (sides.clone(), names.clone(), subjects.clone());
            tokio::spawn(
                async move { compare_item(&sides, &names, identity, &text, &subjects).await },
            )
        })
        .buffered(at_once);
    let mut done = 0;
    while let Some(result) = results.next().await {
        let compared =
            result.map_err(|e| Failure::failed(format!("a comparison task failed: {e}")))?;
        for (report, compared) in actions.iter_mut().zip(compared) {
            match compared {
                Compared::NotApplied => {}
                Compared::Same => report.applied += 1,
                Compared::Different(difference) => {
                    report.applied += 1;
                    report.differing.push(*difference);
                }
            }
        }
        done += 1;
        progress.show(done);
    }
    progress.finish();
    Ok(Report {
        old: old_name,
        new: new_name,
        source: args.source.display().to_string(),
        format_version,
        items: items.len(),
        actions,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Every action of either set, by name, with its kind (the new set's when the sets disagree).
fn every_action(sides: &[Side]) -> BTreeMap<String, ActionKind> {
    sides
        .iter()
        .flat_map(|s| {
            s.runtime
                .catalog()
                .actions()
                .map(|a| (a.info().name.clone(), a.info().kind))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Why diff does not compare the actions of `kind`, if it does not.
fn not_compared(kind: ActionKind) -> Option<&'static str> {
    match kind {
        ActionKind::Delete => Some(
            "a delete action's work is what it deletes from the cluster when a backup is deleted, \
             not a result diff can compare",
        ),
        _ => None,
    }
}

/// The Backup and the Restore every action sees, as JSON text.
struct Subjects {
    backup: String,
    restore: Value,
}

/// `--backup`, or a Backup made up for the run; it must be a Backup.
fn read_backup(args: &DiffArgs) -> Result<Value, Failure> {
    let backup = match &args.backup {
        Some(path) => read_object(path).map_err(|e| Failure::bad_input(format!("--backup {e}")))?,
        None => synthetic_backup(),
    };
    if backup["kind"] != "Backup" {
        return Err(Failure::bad_input(format!(
            "--backup: is a {}, not a velero.io/v1 Backup",
            backup["kind"]
        )));
    }
    Ok(backup)
}

/// `--restore`, or a Restore of the Backup made up for the run; it must be a Restore.
fn read_restore(args: &DiffArgs, backup: &Value) -> Result<Value, Failure> {
    let restore = match &args.restore {
        Some(path) => {
            read_object(path).map_err(|e| Failure::bad_input(format!("--restore {e}")))?
        }
        None => json!({
            "apiVersion": "velero.io/v1",
            "kind": "Restore",
            "metadata": {"name": "velero-wasm-diff", "namespace": backup["metadata"]["namespace"]},
            "spec": {"backupName": backup["metadata"]["name"]}
        }),
    };
    if restore["kind"] != "Restore" {
        return Err(Failure::bad_input(format!(
            "--restore: is a {}, not a velero.io/v1 Restore",
            restore["kind"]
        )));
    }
    Ok(restore)
}

/// The items in a stable order (their identities are unique: the cluster refused duplicates), each
/// with its identity and its JSON text.
fn items_of(source: diff_archive::BackupItems) -> Vec<(ItemRef, Arc<str>)> {
    let mut items = source.items;
    items.sort_unstable_by_key(|item| {
        let id = &item.identity;
        (id.group_resource(), id.namespace.clone(), id.name.clone())
    });
    items.into_iter().map(|i| (i.identity, i.text)).collect()
}

/// The old and the new module set, each loaded over its own copy of `cluster` (the items' text
/// shared, writes its own), with one fixed clock and Velero in the backup's namespace.
async fn load_sides(
    args: &DiffArgs,
    trusted: Option<TrustedKeys>,
    cluster: FixtureCluster,
    start: SystemTime,
    backup: &Value,
    config: &Config,
) -> Result<Vec<Side>, Failure> {
    let namespace = backup
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("velero")
        .to_string();
    let copy = cluster.copy(Clock::fixed(start));
    let mut sides = Vec::new();
    for ((flag, set), cluster) in [("old", &args.old), ("new", &args.new)]
        .into_iter()
        .zip([cluster, copy])
    {
        let clock = Clock::fixed(start);
        let environment = Environment::from_config(config).with_velero_namespace(&namespace);
        let mut services = Services::new(Arc::new(cluster), clock, environment);
        services.reads_at_once = crate::capabilities::kube::reads_at_once(config);
        let runtime = load_set(flag, set, trusted.clone(), services, config).await?;
        sides.push(Side {
            name: set.clone(),
            runtime,
        });
    }
    Ok(sides)
}

/// What one action made of one item in the two sets.
enum Compared {
    /// The action does not apply to the item in either set (or neither set has it, or diff does not
    /// compare its kind).
    NotApplied,
    Same,
    Different(Box<Difference>),
}

/// What one set made of one item with one action.
#[derive(PartialEq)]
enum Outcome {
    /// The set has no such action.
    Missing,
    /// The set's action does not apply to the item (its applies_to).
    NotApplied,
    /// Its result, as compared.
    Result(Value),
}

impl Outcome {
    /// Why there is no result to compare, if there is none: a difference's cause.
    fn cause(&self) -> Option<&'static str> {
        match self {
            Outcome::Missing => Some("missing-action"),
            Outcome::NotApplied => Some("applies-to"),
            Outcome::Result(_) => None,
        }
    }
}

/// Runs every action of `names` of both sets on one item: one [`Compared`] per name, in order.
async fn compare_item(
    sides: &[Side],
    names: &[String],
    identity: ItemRef,
    item: &str,
    subjects: &Subjects,
) -> Vec<Compared> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let (a, b) = tokio::join!(
            outcome(&sides[0], name, &identity, item, subjects),
            outcome(&sides[1], name, &identity, item, subjects),
        );
        out.push(match (a, b) {
            (a, b) if a.cause().is_some() && b.cause().is_some() => Compared::NotApplied,
            (a, b) if a == b => Compared::Same,
            (a, b) => {
                let cause = match (a.cause(), b.cause()) {
                    (Some(why), _) => Some(("old", why)),
                    (_, Some(why)) => Some(("new", why)),
                    _ => None,
                };
                let value = |o: Outcome| match o {
                    Outcome::Result(v) => v,
                    _ => Value::Null,
                };
                Compared::Different(Box::new(Difference {
                    item: identity.clone(),
                    patch: Comparison::of(&value(a), &value(b)).patch,
                    cause,
                }))
            }
        });
    }
    out
}

/// The Backup the actions see when `--backup` is not given.
fn synthetic_backup() -> Value {
    json!({
        "apiVersion": "velero.io/v1",
        "kind": "Backup",
        "metadata": {"name": "velero-wasm-diff", "namespace": "velero"},
        "spec": {}
    })
}

/// Loads one module set: the stock modules, with a directory's or a ConfigMap file's modules over
/// them. A module of the set that cannot be used is bad input: the comparison would be of something
/// else than what was asked.
async fn load_set(
    flag: &str,
    set: &str,
    trusted_keys: Option<TrustedKeys>,
    services: Services,
    config: &Config,
) -> Result<Runtime, Failure> {
    let bad = |message: String| Failure::bad_input(format!("--{flag} {set}: {message}"));
    // A directory and a ConfigMap file load alike, as `--modules` loads them.
    let directory = if set == "stock" {
        None
    } else {
        let path = Path::new(set);
        std::fs::metadata(path).map_err(|e| {
            bad(format!(
                "cannot be read ({e}); give `stock`, a module directory or a module ConfigMap YAML file"
            ))
        })?;
        Some(path.to_path_buf())
    };
    let runtime = Runtime::new(services)
        .map_err(|e| Failure::failed(format!("{e:#}")))?
        .with_compile_cache(super::module_args::compile_cache(config))
        .with_compile_budget(crate::runtime::CompileBudget::from_config(config))
        .with_compile_watch(super::compile_progress::watch());
    let modules = ModuleConfig {
        directory,
        last_good: None,
        stock: StockChoice::parse("all").map_err(|e| Failure::failed(e.to_string()))?,
        trusted_keys,
        configmaps: None,
        floor: None,
    };
    let problems = plan::load_modules(&runtime, &modules)
        .await
        .map_err(|e| bad(format!("cannot be read: {e}")))?;
    let broken: Vec<String> = problems
        .iter()
        .filter(|p| p.broken)
        .map(|p| p.message.clone())
        .collect();
    if !broken.is_empty() {
        return Err(bad(format!(
            "does not load as given:\n  {}",
            broken.join("\n  ")
        )));
    }
    for warning in problems {
        eprintln!("velero-wasm diff: --{flag}: warning: {warning}");
    }
    Ok(runtime)
}

/// What one action of one set makes of an item, as compared: for a backup action the output item
/// and additional items (and the operation's post-operation items for backup-v2), for an item-block
/// action the related items, for a restore action the output item, additional items and
/// `skipRestore`, or the error. A restore action gets the item as `run` gives it (as backed up, then
/// reset as Velero resets it) and applies in the namespace the Restore maps it to.
async fn outcome(
    side: &Side,
    name: &str,
    identity: &ItemRef,
    item: &str,
    subjects: &Subjects,
) -> Outcome {
    let Some(entry): Option<ActionEntry> = side.runtime.action(name) else {
        return Outcome::Missing;
    };
    let kind = entry.info().kind;
    if not_compared(kind).is_some() {
        return Outcome::Missing;
    }
    let namespace = match kind.takes_backup() {
        true => identity.namespace.clone(),
        false => mapped_namespace(&subjects.restore, &identity.namespace),
    };
    if entry
        .module
        .applies_to(entry.index)
        .check(identity, &namespace)
        .is_err()
    {
        return Outcome::NotApplied;
    }
    let runtime = &side.runtime;
    Outcome::Result(match kind {
        ActionKind::Backup | ActionKind::BackupV2 => {
            let request = BackupRequest {
                item: item.to_string(),
                backup: subjects.backup.clone(),
            };
            let result = runtime.backup(&entry, identity.clone(), request).await;
            compare::backup_result(kind, &result)
        }
        ActionKind::Restore | ActionKind::RestoreV2 => {
            let backed_up: Value = serde_json::from_str(item).unwrap_or(Value::Null);
            let request = RestoreRequest {
                item_from_backup: item.to_string(),
                item: reset_for_restore(backed_up, &subjects.restore, identity).to_string(),
                restore: subjects.restore.to_string(),
            };
            let result = runtime.restore(&entry, identity.clone(), request).await;
            compare::restore_result(kind, &result)
        }
        ActionKind::ItemBlock => {
            let call = calls::RelatedItems {
                item: identity.clone(),
                text: item.to_string(),
                backup: subjects.backup.clone(),
                // `diff` records nothing (its runtime has no records).
                answers_velero: false,
            };
            let result = runtime.call(Lane::Serving, &entry, call).await;
            compare::related_result(&result)
        }
        ActionKind::Delete => return Outcome::Missing,
    })
}

/// Items done out of the total, on stderr when it is a terminal.
struct Progress {
    total: usize,
    shown: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            shown: std::io::stderr().is_terminal(),
        }
    }

    fn show(&self, done: usize) {
        if self.shown {
            eprint!("\rvelero-wasm diff: {done}/{} items", self.total);
        }
    }

    fn finish(&self) {
        if self.shown {
            eprintln!();
        }
    }
}

/// One item whose results differ.
struct Difference {
    item: ItemRef,
    /// The JSON Patch (RFC 6902) from the old result to the new.
    patch: Value,
    /// When one set made no result: which (`old`, `new`) and why (`missing-action`, `applies-to`).
    cause: Option<(&'static str, &'static str)>,
}

impl Difference {
    /// The cause in words, for the table.
    fn cause_text(&self, report: &Report) -> Option<String> {
        let (set, why) = self.cause?;
        let named = if set == "old" {
            &report.old
        } else {
            &report.new
        };
        Some(match why {
            "missing-action" => format!("--{set} {named} has no such action"),
            _ => format!("--{set} {named}'s action does not apply to this item (its applies_to)"),
        })
    }
}

/// What one action did over the backup.
struct ActionReport {
    name: String,
    kind: ActionKind,
    in_old: bool,
    in_new: bool,
    /// Items it applied to, in either set.
    applied: usize,
    differing: Vec<Difference>,
}

/// The whole comparison.
struct Report {
    old: String,
    new: String,
    source: String,
    format_version: Option<String>,
    items: usize,
    actions: Vec<ActionReport>,
    seconds: f64,
}

impl ActionReport {
    /// Why it was not compared, if it was not.
    fn not_compared(&self) -> Option<&'static str> {
        not_compared(self.kind)
    }
}

impl Report {
    fn differences(&self) -> usize {
        self.actions.iter().map(|a| a.differing.len()).sum()
    }

    /// The actions only the old (`old`) or only the new set has.
    fn only_in(&self, old: bool) -> Vec<&ActionReport> {
        self.actions
            .iter()
            .filter(|a| a.in_old == old && a.in_new != old)
            .collect()
    }

    fn json(&self) -> Value {
        let actions: Vec<Value> = self
            .actions
            .iter()
            .map(|a| {
                json!({
                    "action": a.name,
                    "kind": a.kind,
                    "inOld": a.in_old,
                    "inNew": a.in_new,
                    "compared": a.not_compared().is_none(),
                    "items": a.applied,
                    "differing": a.differing.iter().map(|d| {
                        let mut difference = json!({
                            "groupResource": d.item.group_resource(),
                            "namespace": d.item.namespace,
                            "name": d.item.name,
                            "patch": d.patch,
                        });
                        if let Some((set, why)) = d.cause {
                            difference["cause"] = json!({"set": set, "why": why});
                        }
                        difference
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let names = |list: Vec<&ActionReport>| -> Vec<String> {
            list.iter().map(|a| a.name.clone()).collect()
        };
        let not_compared: Vec<Value> = self
            .actions
            .iter()
            .filter_map(|a| {
                a.not_compared()
                    .map(|why| json!({"action": a.name, "kind": a.kind, "why": why}))
            })
            .collect();
        json!({
            "backup": self.source,
            "formatVersion": self.format_version,
            "old": self.old,
            "new": self.new,
            "items": self.items,
            "differences": self.differences(),
            "onlyInOld": names(self.only_in(true)),
            "onlyInNew": names(self.only_in(false)),
            "notCompared": not_compared,
            "seconds": (self.seconds * 1000.0).round() / 1000.0,
            "actions": actions,
        })
    }

    fn text(&self, width: usize) -> String {
        let mut out = wrap(
            &format!(
                "{} items of {}; --old {} against --new {}",
                self.items, self.source, self.old, self.new
            ),
            width,
            2,
        );
        out.push('\n');
        let mut rows = vec![["ACTION", "KIND", "ITEMS", "DIFFER", "IN"]
            .map(String::from)
            .to_vec()];
        for a in &self.actions {
            let sets = match (a.in_old, a.in_new) {
                (true, true) => "both",
                (true, false) => "old only",
                (false, true) => "new only",
                (false, false) => "",
            };
            let (items, differ) = match a.not_compared() {
                Some(_) => ("-".to_string(), "-".to_string()),
                None => (a.applied.to_string(), a.differing.len().to_string()),
            };
            rows.push(vec![
                a.name.clone(),
                a.kind.to_string(),
                items,
                differ,
                sets.into(),
            ]);
        }
        use Column::{Fixed, Number, Wraps};
        out.push_str(&table(&rows, &[Wraps, Fixed, Number, Number, Fixed], width));
        for a in self.actions.iter().filter(|a| !a.differing.is_empty()) {
            out.push('\n');
            out.push_str(&wrap(&format!("{}:", a.name), width, 2));
            // An action one set lacks differs on every item it applies to, for that one reason.
            if a.in_old != a.in_new {
                let (set, named) = match a.in_old {
                    true => ("new", &self.new),
                    false => ("old", &self.old),
                };
                out.push_str(&wrap(
                    &format!(
                        "  --{set} {named} has no such action: its result on {} item{} is compared with nothing",
                        a.differing.len(),
                        if a.differing.len() == 1 { "" } else { "s" }
                    ),
                    width,
                    4,
                ));
                continue;
            }
            for d in &a.differing {
                out.push_str(&wrap(&format!("  {}", d.item), width, 4));
                match d.cause_text(self) {
                    Some(cause) => out.push_str(&wrap(&format!("    {cause}"), width, 6)),
                    None => {
                        for line in compare::patch_lines(&d.patch) {
                            out.push_str(&wrap(&format!("    {line}"), width, 6));
                        }
                    }
                }
            }
        }
        out.push('\n');
        for (old, flag, named) in [(true, "--old", &self.old), (false, "--new", &self.new)] {
            let only = self.only_in(old);
            if !only.is_empty() {
                let list: Vec<String> = only
                    .iter()
                    .map(|a| format!("{} ({})", a.name, a.kind))
                    .collect();
                out.push_str(&wrap(
                    &format!("only in {flag} {named}: {}", list.join(", ")),
                    width,
                    2,
                ));
            }
        }
        for a in self.actions.iter() {
            if let Some(why) = a.not_compared() {
                out.push_str(&wrap(
                    &format!("not compared: {} ({}): {why}", a.name, a.kind),
                    width,
                    2,
                ));
            }
        }
        let total = self.differences();
        out.push_str(&format!(
            "{}: {total} differing result{} in {:.2}s\n",
            if total == 0 { "identical" } else { "different" },
            if total == 1 { "" } else { "s" },
            self.seconds
        ));
        out
    }
}
