//! The table people read: a row per case, why it failed, and the tally on the last line.

use super::check::Outcome;
use crate::cli::text::cut;
use crate::config::Config;

/// The narrowest the table gets, whatever the terminal: room for a case's name and a reason's words.
const MIN_WIDTH: usize = 60;

/// How many cases passed, failed, and failed but had their expectations rewritten.
///
/// `pub(super)`: the entry counts every case, and its exit status is whether one failed (hence
/// `failed` is `pub(super)` too).
#[derive(Default)]
pub(super) struct Tally {
    passed: usize,
    pub(super) failed: usize,
    updated: usize,
}

impl Tally {
    /// Counts one case.
    ///
    /// `pub(super)`: the entry counts each case as its row is printed.
    pub(super) fn count(&mut self, outcome: &Outcome) {
        if outcome.reasons.is_empty() {
            self.passed += 1;
        } else if outcome.updated {
            self.updated += 1;
        } else {
            self.failed += 1;
        }
    }

    /// The last line of the run.
    ///
    /// `pub(super)`: the entry prints it after the last suite.
    pub(super) fn summary(&self) -> String {
        let mut summary = format!("{} passed, {} failed", self.passed, self.failed);
        if self.updated > 0 {
            summary.push_str(&format!(", {} updated", self.updated));
        }
        summary
    }
}

/// One row of the table: the case, its result, its time; then why it failed.
///
/// `pub(super)`: the entry prints a row per case.
pub(super) fn print_row(outcome: &Outcome, config: &Config) {
    let result = match (outcome.reasons.is_empty(), outcome.updated) {
        (true, _) => "ok",
        (false, true) => "UPDATED",
        (false, false) => "FAIL",
    };
    let time = format!("{:.2} s", outcome.time.as_secs_f64());
    // The terminal's width (`COLUMNS`, the tty's, else 100).
    let width = crate::cli::text::width(config).max(MIN_WIDTH);
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
