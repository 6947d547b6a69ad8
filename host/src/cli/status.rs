//! `velero-wasm status`: the operator's view of what the plugin processes serve and what their shadow
//! modules did, read from the state directory they share (`crate::shadow::status`).
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

use super::text::cut;
use super::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::action::compare::patch_lines;
use crate::shadow::status::{self, ModuleStatus};
use crate::shadow::Tally;

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The plugin's state directory (default: as the plugin finds it: $VELERO_WASM_STATE_DIR, else
    /// $VELERO_SCRATCH_DIR/velero-wasm, …). In the Velero pod:
    /// `kubectl -n velero exec deploy/velero -- /plugins/velero-wasm status`.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,

    /// Print the status as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// Widest line of the tables.
const WIDTH: usize = 100;

/// Runs the command; returns the exit status.
pub fn status(args: StatusArgs) -> u8 {
    let Some(state) = args.state_dir.clone().or_else(crate::state::default_dir) else {
        eprintln!("velero-wasm status: no state directory: give --state-dir, or set VELERO_WASM_STATE_DIR");
        return EXIT_BAD_INPUT;
    };
    let dir = state.join(status::DIR);
    let read = match status::read(&dir) {
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
        eprintln!("velero-wasm status: warning: {problem}");
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
        let report = json!({
            "stateDir": state.display().to_string(),
            "modulesWritten": modules.written,
            "modules": modules.modules,
            "processes": read.processes.len(),
            "shadows": shadows,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!(
            "{}",
            text(
                &modules.modules,
                &modules.written,
                &shadows,
                read.processes.len()
            )
        );
    }
    EXIT_OK
}

/// The tables.
fn text(
    modules: &[ModuleStatus],
    written: &str,
    shadows: &BTreeMap<String, Tally>,
    processes: usize,
) -> String {
    let mut out = modules_table(modules, written);
    if shadows.is_empty() {
        let any = modules.iter().any(|m| m.role == "shadow");
        out.push_str(if any {
            "\nshadows: no call compared yet\n"
        } else {
            "\nno shadow modules\n"
        });
        return out;
    }
    out.push_str(&shadows_table(shadows, processes));
    out.push_str(&last_events(shadows));
    out
}

/// The modules loaded: name, role, version, source and signature, one a line.
fn modules_table(modules: &[ModuleStatus], written: &str) -> String {
    let mut out = format!("modules (as loaded at {written}):\n");
    out.push_str(&format!(
        "{:<20} {:<8} {:<10} {:<38} {}\n",
        "MODULE", "ROLE", "VERSION", "SOURCE", "SIGNATURE"
    ));
    for m in modules {
        let signature = match (&m.signed_by, m.verified) {
            (Some(key), true) => format!("{key} (verified)"),
            (Some(key), false) => format!("{key} (not verified)"),
            (None, _) => "unsigned".to_string(),
        };
        let line = format!(
            "{:<20} {:<8} {:<10} {:<38} {}",
            cut(&m.name, 20),
            m.role,
            cut(m.version.as_deref().unwrap_or("-"), 10),
            cut(&m.source, 38),
            signature
        );
        out.push_str(&cut(&line, WIDTH));
        out.push('\n');
    }
    out
}

/// The shadows' tallies, summed over the plugin processes, one shadow a line.
fn shadows_table(shadows: &BTreeMap<String, Tally>, processes: usize) -> String {
    let mut out = format!(
        "\nshadows ({processes} plugin process{}):\n",
        if processes == 1 { "" } else { "es" }
    );
    out.push_str(&format!(
        "{:<20} {:>9} {:>9} {:>9} {:>7} {:>8}  {}\n",
        "SHADOW", "COMPARED", "SAME", "DIFFER", "FAULTS", "DROPPED", "DIFFERENCES"
    ));
    for (name, t) in shadows {
        let kinds: Vec<String> = t
            .differences
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let line = format!(
            "{:<20} {:>9} {:>9} {:>9} {:>7} {:>8}  {}",
            cut(name, 20),
            t.compared,
            t.same,
            t.differing,
            t.fault_count(),
            t.dropped_count(),
            kinds.join(",")
        );
        out.push_str(&cut(&line, WIDTH));
        out.push('\n');
    }
    out
}

/// Each shadow's last difference (with its patch) and last fault.
fn last_events(shadows: &BTreeMap<String, Tally>) -> String {
    let mut out = String::new();
    for (name, t) in shadows {
        if let Some(d) = &t.last_difference {
            out.push_str(&format!(
                "\n{name}: last difference at {}, {} of {}:\n  {}\n",
                d.at, d.action, d.subject, d.item
            ));
            for line in patch_lines(&d.patch) {
                out.push_str(&cut(&format!("    {line}"), WIDTH));
                out.push('\n');
            }
        }
        if let Some(fault) = &t.last_fault {
            out.push_str(&cut(&format!("\n{name}: last fault: {fault}"), WIDTH));
            out.push('\n');
        }
    }
    out
}
