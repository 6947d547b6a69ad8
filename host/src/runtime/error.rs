//! What can go wrong in a call, and in loading a module.

use std::time::Duration;

use crate::action::ActionKind;

/// Why a call did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No loaded module provides the action.
    #[error("no loaded module provides an action named {0:?}")]
    UnknownAction(String),
    /// The action exists, but is of a kind that has no such call.
    #[error("action {action} is a {kind} action: it has no {call} call")]
    WrongKind {
        /// The action.
        action: String,
        /// Its kind.
        kind: ActionKind,
        /// The call asked for.
        call: &'static str,
    },
    /// No loaded module exports `velero-wasm:plugin/signing`.
    #[error(
        "no loaded module exports velero-wasm:plugin/signing (the stock module is named signing)"
    )]
    NoSigner,
    /// The action ran and returned an error: its message, verbatim.
    #[error("{0}")]
    Action(String),
    /// The module misbehaved: this call failed, the host goes on serving.
    #[error("module {module}, action {action}{item}: {fault}")]
    Fault {
        /// Module name.
        module: String,
        /// Action name.
        action: String,
        /// `" on item <resource.group ns/name>"`, or "".
        item: String,
        /// What happened.
        fault: Fault,
    },
}

impl CallError {
    /// The module of call `id` misbehaved.
    pub(super) fn fault(id: &crate::capabilities::CallId, fault: Fault) -> CallError {
        CallError::Fault {
            module: id.module.to_string(),
            action: id.action.clone(),
            item: id.on_item(),
            fault,
        }
    }
}

impl crate::metrics::FailureKind for CallError {
    fn failure_kind(&self, denied: bool) -> &'static str {
        match self {
            CallError::Action(_) if denied => "denied",
            CallError::Action(_) => "action",
            CallError::Fault { fault, .. } => match fault {
                Fault::Trap(_) | Fault::Exit(_) | Fault::Instantiate(_) => "trap",
                Fault::Timeout(_) | Fault::NoSlot { .. } => "deadline",
                Fault::Memory { .. } | Fault::MemoryBudget { .. } => "memory",
                Fault::Limit(_) => "limit",
                Fault::Output(_) => "output",
            },
            CallError::UnknownAction(_) | CallError::WrongKind { .. } | CallError::NoSigner => {
                "unavailable"
            }
        }
    }
}

/// How a module misbehaved.
#[derive(Debug, thiserror::Error)]
pub enum Fault {
    /// The guest trapped (a Rust panic, an out-of-bounds access, …).
    #[error("trapped: {0}")]
    Trap(String),
    /// The call ran past its deadline and was stopped.
    #[error("did not finish within its deadline of {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// The guest asked for more memory than its cap.
    #[error("exceeded its memory limit of {limit_mib} MiB")]
    Memory {
        /// The cap, in MiB.
        limit_mib: u64,
    },
    /// Growing the guest's memory would have taken the process past its memory budget for all calls.
    #[error("could not grow its memory to {asked_mib} MiB: the process's memory budget of {budget_mib} MiB for all calls at once is used up (VELERO_WASM_MEMORY_BUDGET)")]
    MemoryBudget {
        /// What the guest asked for, in MiB.
        asked_mib: u64,
        /// The process's budget, in MiB.
        budget_mib: u64,
    },
    /// Work the host did for the guest ran into one of the call's limits (the message says which).
    #[error("{0}")]
    Limit(String),
    /// Every slot was taken by other calls until this call's deadline.
    #[error("found no free slot within its deadline of {}: all {slots} calls that may run at once were busy", humantime::format_duration(*.timeout))]
    NoSlot {
        /// The call's deadline.
        timeout: Duration,
        /// How many calls may run at once.
        slots: u32,
    },
    /// The guest called `exit`.
    #[error("exited with status {0} instead of returning")]
    Exit(i32),
    /// The guest returned something Velero cannot use.
    #[error("returned {0}")]
    Output(String),
    /// The module could not be instantiated.
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
}

/// Why a module was not loaded (the modules loaded before it stay in service).
#[derive(Debug, thiserror::Error)]
#[error("module {module} ({origin}): {problem}")]
pub struct LoadError {
    /// Module name.
    pub module: String,
    /// Where it came from.
    pub origin: String,
    /// What is wrong.
    pub problem: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::FailureKind;

    #[test]
    fn failures_are_counted_by_kind() {
        let fault = |fault| CallError::Fault {
            module: "m".into(),
            action: "a".into(),
            item: String::new(),
            fault,
        };
        let cases = [
            (CallError::Action("no".into()), false, "action"),
            (CallError::Action("no".into()), true, "denied"),
            (fault(Fault::Trap("panic".into())), true, "trap"),
            (fault(Fault::Exit(1)), false, "trap"),
            (
                fault(Fault::Timeout(Duration::from_secs(2))),
                false,
                "deadline",
            ),
            (fault(Fault::Memory { limit_mib: 64 }), false, "memory"),
            (fault(Fault::Limit("calls".into())), false, "limit"),
            (fault(Fault::Output("junk".into())), false, "output"),
        ];
        for (error, denied, kind) in cases {
            assert_eq!(error.failure_kind(denied), kind, "{error}");
        }
    }
}
