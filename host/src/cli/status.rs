//! `velero-wasm status`: the operator's view of what the plugin processes serve and what their shadow
//! modules did, read from the state directory they share (`crate::shadow::status_files`).
//!
//! ```text
//! velero-wasm status [--state-dir DIR] [--json]
//! ```
//!
//! Each module: name, role (serving or shadow), version, source, signature. Each shadow: calls
//! compared, same, differing (by kind), faults, dropped, summed over every plugin process of the last
//! week, and the last item whose result differed with its JSON Patch. Exit 0; 1 when no plugin
//! process has written a status there; 2 when the directory cannot be read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use super::failure::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::text::{table, wrap, Column};
use crate::action::compare::patch_lines;
use crate::modules::failure_policy::PolicyState;
use crate::shadow::status_files::{self, ModuleStatus};
use crate::shadow::Tally;

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// The plugin's state directory (default: as the plugin finds it: $VELERO_WASM_STATE_DIR, else
    /// $VELERO_SCRATCH_DIR/velero-wasm, …). In the Velero pod:
    /// `kubectl -n velero exec deploy/velero -- /plugins/velero-wasm status`.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// Print the status as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// Runs the command; returns the exit status.
pub(crate) fn status(args: StatusArgs, config: &crate::config::Config) -> u8 {
    let Some(state) = args
        .state_dir
        .clone()
        .or_else(|| crate::state::default_dir(config))
    else {
        eprintln!("velero-wasm status: no state directory: give --state-dir, or set VELERO_WASM_STATE_DIR");
        return EXIT_BAD_INPUT;
    };
    let dir = state.join(status_files::DIR);
    let read = match status_files::read(&dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "velero-wasm status: no plugin process has written its status in {} yet",
                dir.display()
            );
            return EXIT_FAILED;
        }
        Err(e) => {
            eprintln!("velero-wasm status: {}: {e}", dir.display());
            return EXIT_BAD_INPUT;
        }
    };
    for problem in &read.problems {
        eprintln!(
            "velero-wasm status: warning: {}",
            super::text::printable(&problem.to_string())
        );
    }
    let Some(modules) = &read.modules else {
        eprintln!(
            "velero-wasm status: no plugin process has written its status in {} yet",
            dir.display()
        );
        return EXIT_FAILED;
    };
    let mut shadows: BTreeMap<String, Tally> = BTreeMap::new();
    for process in &read.processes {
        for (module, tally) in &process.shadows {
            shadows.entry(module.clone()).or_default().add(tally);
        }
    }
    if args.json {
        let now = std::time::SystemTime::now();
        let listed: Vec<serde_json::Value> = modules
            .modules
            .iter()
            .map(|m| {
                let mut shown = serde_json::to_value(m).unwrap_or_default();
                // Computed now: the file may have been written days ago.
                shown["signatureExpiresInDays"] = json!(expiry_days(m, now));
                shown
            })
            .collect();
        let report = json!({
            "stateDir": state.display().to_string(),
            "modulesWritten": modules.written,
            "modules": listed,
            "processes": read.processes.len(),
            "shadows": shadows,
            "slots": modules.slots,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        let mut shown = text(
            &modules.modules,
            &modules.written,
            &shadows,
            read.processes.len(),
            super::text::width(config),
        );
        shown.push_str(&slots_text(&modules.slots, super::text::width(config)));
        print!("{}", super::text::printable(&shown));
    }
    EXIT_OK
}

/// The tables, fitting `width`.
fn text(
    modules: &[ModuleStatus],
    written: &str,
    shadows: &BTreeMap<String, Tally>,
    processes: usize,
    width: usize,
) -> String {
    let mut out = modules_table(modules, written, width);
    if shadows.is_empty() {
        let any = modules.iter().any(|m| m.role == "shadow");
        out.push_str(if any {
            "\nshadows: no call compared yet\n"
        } else {
            "\nno shadow modules\n"
        });
        return out;
    }
    out.push_str(&shadows_table(shadows, processes, width));
    out.push_str(&last_events(shadows, width));
    out
}

/// The actions each slot serves until Velero restarts (docs/modules.md#s10), fitting `width`.
fn slots_text(slots: &BTreeMap<String, Vec<String>>, width: usize) -> String {
    use super::text::{table, Column};
    if slots.is_empty() {
        return "\nslots: no action added since Velero listed\n".to_string();
    }
    let mut rows = vec![vec![
        "SLOT".to_string(),
        "SERVES UNTIL VELERO RESTARTS".to_string(),
    ]];
    rows.extend(
        slots
            .iter()
            .map(|(slot, actions)| vec![slot.clone(), actions.join(", ")]),
    );
    format!("\n{}", table(&rows, &[Column::Wraps, Column::Wraps], width))
}

/// Whole days until a module's signature expires, when that is within
/// [`EXPIRY_WARNING_DAYS`](crate::modules::signature::EXPIRY_WARNING_DAYS) of `now` (0: expired).
fn expiry_days(m: &ModuleStatus, now: std::time::SystemTime) -> Option<u64> {
    crate::modules::signature::expiry_warning(m.signature_expires.as_deref()?, now)
}

/// `expires in 3 days`, `expires today`, `expired`: a signature's expiry when it is near.
pub(super) fn expiry_words(days: u64) -> String {
    match days {
        0 => "expired".to_string(),
        1 => "expires within a day".to_string(),
        n => format!("expires in {n} days"),
    }
}

/// A failure policy as a table cell: `refuse (manifest)`, with `TRIGGERED: …` when it did.
pub(super) fn policy_cell(policy: Option<&PolicyState>) -> String {
    match policy {
        None => "-".to_string(),
        Some(p) => match &p.triggered {
            Some(t) => format!("{} ({}), TRIGGERED: {}", p.policy, p.from, t.outcome),
            None => format!("{} ({})", p.policy, p.from),
        },
    }
}

/// The modules loaded: name, role, version, source, signature (with its expiry when near) and
/// failure policy, one a row; long cells wrap. Then, per module, why a policy triggered and which
/// signature is about to expire.
fn modules_table(modules: &[ModuleStatus], written: &str, width: usize) -> String {
    let now = std::time::SystemTime::now();
    let mut out = format!("modules (as loaded at {written}):\n");
    let mut rows = vec![[
        "MODULE",
        "ROLE",
        "VERSION",
        "SOURCE",
        "SIGNATURE",
        "ON FAILURE",
    ]
    .map(String::from)
    .to_vec()];
    let mut notes = String::new();
    for m in modules {
        let mut signature = match (&m.signed_by, m.verified) {
            (Some(key), true) => format!("{key} (verified)"),
            (Some(key), false) => format!("{key} (not verified)"),
            (None, _) => "unsigned".to_string(),
        };
        if let (Some(days), Some(at)) = (expiry_days(m, now), &m.signature_expires) {
            signature.push_str(&format!(", {}", expiry_words(days)));
            notes.push_str(&wrap(
                &format!(
                    "{}: its signature by key {} {} ({at}): sign it again and apply it before then, or the module stops serving",
                    m.name,
                    m.signed_by.as_deref().unwrap_or("-"),
                    expiry_words(days)
                ),
                width,
                2,
            ));
        }
        if let Some(triggered) = m.failure_policy.as_ref().and_then(|p| p.triggered.as_ref()) {
            notes.push_str(&wrap(
                &format!(
                    "{}: failure policy {} triggered ({}): {}",
                    m.name,
                    m.failure_policy
                        .as_ref()
                        .map(|p| p.policy.as_str())
                        .unwrap_or("-"),
                    triggered.outcome,
                    triggered.cause
                ),
                width,
                2,
            ));
        }
        for deprecation in &m.deprecations {
            notes.push_str(&wrap(&format!("{}: {deprecation}", m.name), width, 2));
        }
        rows.push(vec![
            m.name.clone(),
            m.role.clone(),
            m.version.clone().unwrap_or_else(|| "-".to_string()),
            m.source.clone(),
            signature,
            policy_cell(m.failure_policy.as_ref()),
        ]);
    }
    // Only modules that are not stock have a failure policy: without one, no column for it.
    if !modules.iter().any(|m| m.failure_policy.is_some()) {
        for row in &mut rows {
            row.pop();
        }
    }
    use Column::{Fixed, Wraps};
    let columns = [Wraps, Fixed, Wraps, Wraps, Wraps, Wraps];
    out.push_str(&table(&rows, &columns[..rows[0].len()], width));
    if !notes.is_empty() {
        out.push('\n');
        out.push_str(&notes);
    }
    out
}

/// `k=v, k=v` of counts by kind.
fn by_kind(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shadows' tallies, summed over the plugin processes, one shadow a row; every count whole.
fn shadows_table(shadows: &BTreeMap<String, Tally>, processes: usize, width: usize) -> String {
    let mut out = format!(
        "\nshadows ({processes} plugin process{}):\n",
        if processes == 1 { "" } else { "es" }
    );
    let mut rows = vec![[
        "SHADOW",
        "COMPARED",
        "SAME",
        "DIFFER",
        "FAULTS",
        "DROPPED",
        "DIFFERENCES",
    ]
    .map(String::from)
    .to_vec()];
    for (name, t) in shadows {
        rows.push(vec![
            name.clone(),
            t.compared.to_string(),
            t.same.to_string(),
            t.differing.to_string(),
            t.fault_count().to_string(),
            t.dropped_count().to_string(),
            by_kind(&t.differences),
        ]);
    }
    use Column::{Number, Wraps};
    let columns = [Wraps, Number, Number, Number, Number, Number, Wraps];
    out.push_str(&table(&rows, &columns, width));
    out
}

/// Why a shadow's result differed when it made none to compare: the kinds the shadow counts for a
/// call it would not have been given (`crate::shadow`), for which the patch is only "replaced by
/// nothing".
fn without_result(kinds: &[String], action: &str) -> Option<String> {
    if kinds.iter().any(|k| k == "missing-action") {
        Some(format!(
            "the shadow has no action {action}, so it made no result to compare"
        ))
    } else if kinds.iter().any(|k| k == "applies-to") {
        Some(format!(
            "the shadow's {action} does not apply to this item (its applies_to), so it made no result to compare"
        ))
    } else {
        None
    }
}

/// Each shadow's faults and drops by kind, its last difference (the patch, or why there is none)
/// and its last fault, wrapped to `width`, never cut.
fn last_events(shadows: &BTreeMap<String, Tally>, width: usize) -> String {
    let mut out = String::new();
    for (name, t) in shadows {
        if !t.faults.is_empty() || !t.dropped.is_empty() {
            let mut line = format!("{name}:");
            if !t.faults.is_empty() {
                line.push_str(&format!(" faults {}", by_kind(&t.faults)));
            }
            if !t.dropped.is_empty() {
                if !t.faults.is_empty() {
                    line.push(';');
                }
                line.push_str(&format!(" dropped {}", by_kind(&t.dropped)));
            }
            out.push('\n');
            out.push_str(&wrap(&line, width, 2));
        }
        if let Some(d) = &t.last_difference {
            out.push('\n');
            out.push_str(&wrap(
                &format!(
                    "{name}: last difference at {}, {} of {} ({}):",
                    d.at,
                    d.action,
                    d.subject,
                    d.kinds.join(", ")
                ),
                width,
                2,
            ));
            out.push_str(&wrap(&format!("  {}", d.item), width, 4));
            match without_result(&d.kinds, &d.action) {
                Some(why) => out.push_str(&wrap(&format!("    {why}"), width, 6)),
                None => {
                    for line in patch_lines(&d.patch) {
                        out.push_str(&wrap(&format!("    {line}"), width, 6));
                    }
                }
            }
        }
        if let Some(fault) = &t.last_fault {
            out.push('\n');
            out.push_str(&wrap(&format!("{name}: last fault: {fault}"), width, 2));
        }
    }
    out
}
