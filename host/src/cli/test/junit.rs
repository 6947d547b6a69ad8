//! `--junit FILE`: the results as JUnit XML for CI, one test suite per suite file.

use std::path::Path;
use std::time::Duration;

use super::check::Outcome;
use crate::cli::text::cut;

/// The longest JUnit failure message (CI systems show it on one line; the description has it all).
const MAX_JUNIT_MESSAGE: usize = 500;

/// Writes the JUnit XML report to `path`.
///
/// `pub(super)`: the entry writes it after the last suite (`--junit FILE`).
pub(super) fn write_junit(report: &quick_junit::Report, path: &Path) -> anyhow::Result<()> {
    let xml = report.to_string()?;
    crate::cli::output_file::replace(path, xml.as_bytes())?;
    Ok(())
}

/// One JUnit test suite: the suite file, a test case per case.
///
/// `pub(super)`: the entry adds one per suite file to the report.
pub(super) fn junit_suite(file: &Path, outcomes: &[Outcome]) -> quick_junit::TestSuite {
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
