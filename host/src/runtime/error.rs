//! What can go wrong in a call, and in loading a module.

use std::sync::Arc;
use std::time::Duration;

use crate::action::ActionKind;
use crate::capabilities::Exceeded;

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
    /// The module's actions are refused: its new version could not be loaded and its failure policy
    /// is `refuse` (docs/modules.md#s2-3). The call did not run.
    #[error("module {module}, action {action}{item}: refused: {why}")]
    Refused {
        /// Module name.
        module: String,
        /// Action name.
        action: String,
        /// `" on item <resource.group ns/name>"`, or "".
        item: String,
        /// Why, naming the version that could not be loaded and the policy.
        why: Arc<str>,
    },
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
            CallError::Refused { .. } => "refused",
            CallError::Fault { fault, .. } => match fault {
                Fault::Trap(_) | Fault::Exit(_) | Fault::Instantiate(_) => "trap",
                Fault::Timeout(_) | Fault::NoSlot { .. } => "deadline",
                Fault::CpuShare(_) => "cpu",
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
    Trap(Trapped),
    /// The call ran past its deadline and was stopped.
    #[error("did not finish within its deadline of {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// A shadow call used its CPU share (`VELERO_WASM_SHADOW_CPU`) and was stopped.
    #[error("used its CPU share of {} and was stopped (a shadow's share: VELERO_WASM_SHADOW_CPU)", humantime::format_duration(*.0))]
    CpuShare(Duration),
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
    #[error(transparent)]
    Limit(Exceeded),
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
    Output(#[source] BadOutput),
    /// The module could not be instantiated.
    #[error("could not be instantiated: {0}")]
    Instantiate(#[source] InstantiateError),
}

/// Where and how the guest trapped.
#[derive(Debug)]
pub struct Trapped {
    /// What wasmtime says of the trap.
    pub(crate) cause: String,
    /// The innermost guest function with a name, when the backtrace has one.
    pub(crate) frame: Option<String>,
    /// The message of a Rust panic the guest printed to stderr before trapping.
    pub(crate) panic: Option<String>,
    /// The Python traceback the guest printed to stderr before trapping (an exception its code did not
    /// catch), bounded; shown on the lines after the error's own.
    pub(crate) traceback: Option<String>,
}

impl Trapped {
    /// A trap known only by what wasmtime says of it.
    pub fn new(cause: impl Into<String>) -> Trapped {
        Trapped {
            cause: cause.into(),
            frame: None,
            panic: None,
            traceback: None,
        }
    }
}

impl std::fmt::Display for Trapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(panic) = &self.panic {
            write!(f, "{panic} (")?;
        }
        f.write_str(&self.cause)?;
        if let Some(frame) = &self.frame {
            write!(f, " in {frame}")?;
        }
        if self.panic.is_some() {
            f.write_str(")")?;
        }
        if let Some(traceback) = &self.traceback {
            write!(f, "\n{traceback}")?;
        }
        Ok(())
    }
}

/// What is wrong with what an action returned.
#[derive(Debug, thiserror::Error)]
pub enum BadOutput {
    /// The item is larger than the module's output limit.
    #[error("an item of {len} bytes, over its output limit of {limit} bytes")]
    ItemTooLarge {
        /// Its size.
        len: usize,
        /// The module's `[limits] output`.
        limit: u64,
    },
    /// The item is not a JSON object.
    #[error("an item that is not a JSON object: {0}")]
    NotObject(#[source] serde_json::Error),
    /// The item has no (or an empty) `kind`.
    #[error("an item without a kind")]
    NoKind,
    /// More identifiers than a call may return.
    #[error("{count} {what}, more than the {limit} allowed")]
    TooManyIds {
        /// How many came back.
        count: usize,
        /// How many may.
        limit: usize,
        /// Which list ("additional items", …).
        what: &'static str,
    },
    /// An identifier Velero cannot look up.
    #[error("{what}[{index}] with group {group:?} and resource {resource:?}: use the API group without version and the plural lower-case resource (e.g. \"\" and \"persistentvolumeclaims\")")]
    BadId {
        /// Which list.
        what: &'static str,
        /// Its place in the list.
        index: usize,
        /// The group as returned.
        group: String,
        /// The resource as returned.
        resource: String,
    },
}

/// Why a module could not be instantiated. Cloned: a failure to compile on first use is kept, and
/// every later call of the module sees it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InstantiateError {
    /// Put in service from its cached description without a way to compile it.
    #[error("module {module} was not compiled")]
    NotCompiled {
        /// Module name.
        module: Arc<str>,
    },
    /// Compiled on first use, its exports are not the ones its cached description listed.
    #[error("module {module}: its exports differ from its cached description")]
    ExportsDiffer {
        /// Module name.
        module: Arc<str>,
    },
    /// Compiling on first use failed.
    #[error("module {module}: {source}")]
    Compile {
        /// Module name.
        module: Arc<str>,
        /// What is wrong with its code.
        source: Arc<CompileError>,
    },
    /// The compiling task did not finish.
    #[error("module {module}: compilation was interrupted: {source}")]
    Interrupted {
        /// Module name.
        module: Arc<str>,
        /// Why.
        source: Arc<tokio::task::JoinError>,
    },
    /// An action was called on a module that exports only `signing`.
    #[error("the module does not export velero-wasm:plugin/actions")]
    NoActions,
    /// wasmtime could not instantiate it.
    #[error("{0}")]
    Wasmtime(#[source] Cause),
}

/// What is wrong with a module's code, found when compiling and linking it.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The bytes are not a component.
    #[error("not a valid WebAssembly component: {0}")]
    NotComponent(#[source] Cause),
    /// It imports an interface the host does not provide.
    #[error("imports something velero-wasm does not provide (components may import velero-wasm:plugin/* and the wasi:* interfaces std needs): {0}")]
    Imports(#[source] Cause),
    /// It exports neither interface.
    #[error(
        "exports neither {} nor {}: a module must export one of them, or both",
        crate::bindings::ACTIONS,
        crate::capabilities::signing::INTERFACE
    )]
    NoExports,
    /// Compiling it would take more memory than the compile budget holds.
    #[error(transparent)]
    OverBudget(#[from] super::compile_budget::OverBudget),
    /// It exports an interface under its name, but not as the WIT package defines it.
    #[error("does not export {interface} as the WIT package defines it: {source}")]
    Export {
        /// The interface.
        interface: &'static str,
        /// wasmtime's type check.
        source: Cause,
    },
}

/// A wasmtime error kept as the cause of one of ours: shown with its chain, shared between the
/// calls that see it.
#[derive(Debug, Clone)]
pub struct Cause(Arc<wasmtime::Error>);

impl From<wasmtime::Error> for Cause {
    fn from(error: wasmtime::Error) -> Cause {
        Cause(Arc::new(error))
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let error: &(dyn std::error::Error + Send + Sync) = (*self.0).as_ref();
        error.source()
    }
}

/// Why a module was not loaded (the modules loaded before it stay in service).
#[derive(Debug, thiserror::Error)]
#[error("module {module} ({origin}): {problem}")]
pub struct LoadError {
    /// Module name.
    pub(crate) module: String,
    /// Where it came from.
    pub(crate) origin: String,
    /// What is wrong.
    pub(crate) problem: String,
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
            (fault(Fault::Trap(Trapped::new("panic"))), true, "trap"),
            (fault(Fault::Exit(1)), false, "trap"),
            (
                fault(Fault::Timeout(Duration::from_secs(2))),
                false,
                "deadline",
            ),
            (fault(Fault::Memory { limit_mib: 64 }), false, "memory"),
            (
                fault(Fault::Limit(Exceeded::CapabilityCalls { max: 1 })),
                false,
                "limit",
            ),
            (fault(Fault::Output(BadOutput::NoKind)), false, "output"),
        ];
        for (error, denied, kind) in cases {
            assert_eq!(error.failure_kind(denied), kind, "{error}");
        }
    }
}
