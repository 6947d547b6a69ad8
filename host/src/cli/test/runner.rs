//! Running a suite: each case as `velero-wasm run` runs one action on one item, its output checked,
//! and with `--update` the expectations of those that failed rewritten.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::check::{check, Outcome};
use super::suite::{Case, Suite};
use super::update::{observed_expectation, update};
use crate::cli::failure::Failure;
use crate::cli::module_args::ModuleArgs;
use crate::cli::run::{self, RunArgs};
use crate::config::Config;
use crate::modules::StockChoice;

/// Runs a suite's cases and, with `--update`, rewrites the expectations of those that failed.
///
/// `pub(super)`: the entry runs each suite with it.
pub(super) async fn run_and_update(
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
            trusted_keys: config.trusted_keys_as_set(),
        },
        // Checked for the suite as it is read (`load_all`); checked again per case, as `run` does.
        stale: Default::default(),
        offline: true,
    })
}
