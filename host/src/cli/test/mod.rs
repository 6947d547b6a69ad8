//! `velero-wasm test [SUITE...]`: cases written as data (YAML), each run the way `velero-wasm run`
//! runs one action on one item, its output checked against the case's expectations. A table for
//! people, `--junit FILE` for CI, `--update` to take the observed output as the new expectation.
//! The format is described in `docs/suites.md`.
//!
//! Exit status: 0 when every case passes, 1 when one fails, 2 when a suite cannot be read.
//!
//! One file per concern, each importing only those listed before it: [`suite`] (the file format and
//! its reading), [`check`] (a case's outcome against its expectations), [`update`] (`--update`'s
//! rewrite of the suite file), [`runner`] (a suite's cases run), [`report`] (the table) and [`junit`]
//! (the XML for CI).

mod check;
mod junit;
mod report;
mod runner;
mod suite;
mod update;

use std::path::{Path, PathBuf};

use super::build_freshness::stale_reason;
use super::failure::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::config::Config;
use junit::{junit_suite, write_junit};
use report::{print_row, Tally};
use runner::run_and_update;
use suite::{load, Suite};

/// The suite read when none is named: where `velero-wasm new` puts it.
const DEFAULT_SUITE: &str = "tests/suite.yaml";

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
