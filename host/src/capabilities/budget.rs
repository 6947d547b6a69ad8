//! The host's work for a guest in one call, counted and bounded: every capability that works for the
//! guest charges it, and the runtime reads it to stop the call and say why.

use super::clock::TimeLimit;
use super::exceeded::Exceeded;

/// What the host may still do for the guest in this call: capability calls (manifest `[limits]
/// capability-calls`), the call's time limit, and the first limit the call ran into.
#[derive(Debug)]
pub(crate) struct WorkBudget {
    /// Calls of capabilities that do work for the guest (kube, http, environment, random, signing).
    calls: u32,
    /// The most such calls the module may make in one call.
    max_calls: u32,
    /// A limit the call ran into (set by a capability); the call is stopped at the guest's next epoch
    /// tick and fails with it.
    exceeded: Option<Exceeded>,
    /// The call's time limit (outbound requests never wait beyond it; `clock.remaining` reads it).
    limit: Option<TimeLimit>,
}

impl WorkBudget {
    /// A budget of `max_calls` capability calls and no time limit yet.
    pub(crate) fn new(max_calls: u32) -> WorkBudget {
        WorkBudget {
            calls: 0,
            max_calls,
            exceeded: None,
            limit: None,
        }
    }

    /// The budget, ending at `limit`.
    pub(crate) fn until(mut self, limit: TimeLimit) -> WorkBudget {
        self.limit = Some(limit);
        self
    }

    /// Charges one capability call that does work for the guest. Past the module's limit the call is
    /// refused with the message returned here, and the whole call is stopped with it.
    pub(crate) fn charge(&mut self) -> Result<(), Exceeded> {
        self.calls = self.calls.saturating_add(1);
        if self.calls <= self.max_calls {
            return Ok(());
        }
        let exceeded = Exceeded::CapabilityCalls {
            max: self.max_calls,
        };
        self.exceed(exceeded.clone());
        Err(exceeded)
    }

    /// Stops the call at the guest's next epoch tick, failing it with `problem` (the first one wins).
    pub(crate) fn exceed(&mut self, problem: impl Into<Exceeded>) {
        self.exceeded.get_or_insert_with(|| problem.into());
    }

    /// The limit the call ran into, if any.
    pub(crate) fn exceeded(&self) -> Option<&Exceeded> {
        self.exceeded.as_ref()
    }

    /// The real-time deadline of the call, if it has one.
    pub(crate) fn deadline(&self) -> Option<tokio::time::Instant> {
        self.limit.map(|limit| limit.deadline)
    }

    /// The call's time limit, if it has one.
    pub(crate) fn time_limit(&self) -> Option<TimeLimit> {
        self.limit
    }

    /// The time left before the call's limit, as `clock` reads it; `None` without a limit.
    #[cfg(test)]
    pub(crate) fn remaining(&self, clock: &super::clock::Clock) -> Option<std::time::Duration> {
        self.limit.map(|limit| clock.remaining(&limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::clock::Clock;
    use std::time::Duration;

    #[test]
    fn charges_past_the_limit_are_refused_and_the_first_limit_stays() {
        let mut budget = WorkBudget::new(2);
        assert!(budget.charge().is_ok() && budget.charge().is_ok());
        assert_eq!(budget.exceeded(), None);
        let refused = budget.charge().unwrap_err();
        assert_eq!(refused, Exceeded::CapabilityCalls { max: 2 });
        budget.exceed("later".to_string());
        assert_eq!(budget.exceeded(), Some(&refused));
        assert!(budget.charge().is_err());
    }

    #[test]
    fn without_a_limit_no_deadline_and_no_time_left_to_read() {
        let budget = WorkBudget::new(1);
        assert_eq!(budget.deadline(), None);
        assert_eq!(budget.remaining(&Clock::System), None);
        let limit = Clock::System.limit(Duration::from_secs(60));
        let budget = budget.until(limit);
        assert_eq!(budget.deadline(), Some(limit.deadline));
        let left = budget.remaining(&Clock::System).unwrap();
        assert!(
            left <= Duration::from_secs(60) && left > Duration::from_secs(50),
            "{left:?}"
        );
    }
}
