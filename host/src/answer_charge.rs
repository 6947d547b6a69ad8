//! The account a client charges the answers it reads to, as their bytes arrive. A capability sets
//! one around each backend call it makes for a guest's import ([`scope`]); the clients that read
//! answers (the API server client of `cluster/`, the HTTP transport) charge it ([`charge`]) without
//! knowing whose it is. The account the capabilities set, the module's memory limit drawing on the
//! process's budget, is `AnswerAccount` (`capabilities/memory.rs`).

use std::future::Future;
use std::sync::Arc;

/// What the answers read for one call are charged to: the clients see this much of an account.
pub trait AnswerCharge: Send + Sync {
    /// Charges `bytes` more of answer, or says why they may not be held.
    fn take(&self, bytes: u64) -> Result<(), AnswerRefusal>;
}

/// Why an answer could not be read further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerRefusal {
    /// The answers of this import would not fit the module's memory.
    #[error("the answers would take more than the module's memory limit of {limit_mib} MiB; not read further")]
    Cap {
        /// The module's memory limit, in MiB.
        limit_mib: u64,
    },
    /// The process's budget is held by other calls.
    #[error("the process's memory budget of {budget_mib} MiB for all calls is in use; the answer was not read further")]
    Budget {
        /// The process's budget, in MiB.
        budget_mib: u64,
    },
}

tokio::task_local! {
    /// The account of the guest import a backend call is made for, set by the capability around the
    /// call ([`scope`]) and charged by the clients as bytes arrive ([`charge`]).
    static CALL_ANSWERS: Arc<dyn AnswerCharge>;
}

/// Runs `call` (a backend call made for a guest's import) with `account` as the account its answers
/// are charged to.
pub async fn scope<T>(account: Arc<dyn AnswerCharge>, call: impl Future<Output = T>) -> T {
    CALL_ANSWERS.scope(account, call).await
}

/// Charges `bytes` of answer that just arrived to the account of the guest import being served, if
/// any (a client used outside a guest's call, such as the plugin's own reads, has none).
pub fn charge(bytes: usize) -> Result<(), AnswerRefusal> {
    CALL_ANSWERS
        .try_with(|account| account.take(bytes as u64))
        .unwrap_or(Ok(()))
}
