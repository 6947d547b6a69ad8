//! The account a client charges the answers it reads to, as their bytes arrive. A capability sets
//! one around each backend call it makes for a guest's import ([`scope`]); the clients that read
//! answers (the API server client of `cluster/`, the HTTP transport) charge it without knowing whose
//! it is: the answer's bytes against the module's memory ([`charge`]), and what the host holds of it
//! meanwhile (the body's buffer as it grows, its parsed copy: [`AnswerBody`], [`hold`]) against the
//! process's budget. The account the capabilities set, the module's memory limit drawing on the
//! process's budget, is `AnswerAccount` (`capabilities/memory.rs`).

use std::future::Future;
use std::sync::Arc;

use crate::heap_cost::allocation;

/// What the answers read for one call are charged to: the clients see this much of an account.
pub trait AnswerCharge: Send + Sync {
    /// Charges `bytes` more of answer (what the guest will receive), or says why they may not be
    /// held.
    fn take(&self, bytes: u64) -> Result<(), AnswerRefusal>;

    /// Reserves `bytes` the host now holds for the answers (a buffer, a parsed copy) from the
    /// process's budget, until [`AnswerCharge::release`] or the account's end.
    fn hold(&self, bytes: u64) -> Result<(), AnswerRefusal>;

    /// Gives back `bytes` of what [`AnswerCharge::hold`] reserved: memory the host freed.
    fn release(&self, bytes: u64);
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

/// The account of the guest import being served, if any (a client used outside a guest's call, such
/// as the plugin's own reads, has none).
fn current() -> Option<Arc<dyn AnswerCharge>> {
    CALL_ANSWERS.try_with(Arc::clone).ok()
}

/// Charges `bytes` of answer that just arrived to the account of the guest import being served, if
/// any.
pub fn charge(bytes: usize) -> Result<(), AnswerRefusal> {
    CALL_ANSWERS
        .try_with(|account| account.take(bytes as u64))
        .unwrap_or(Ok(()))
}

/// Holds, on the account of the guest import being served (if any), what an allocation of `bytes`
/// takes (as the allocator rounds it) until the account ends: a copy of an answer the host made and
/// keeps until the guest has it (the text parsed out of a body, a list's items, a view's object).
pub fn hold(bytes: usize) -> Result<(), AnswerRefusal> {
    CALL_ANSWERS
        .try_with(|account| account.hold(allocation(bytes as u64)))
        .unwrap_or(Ok(()))
}

/// Gives back what [`hold`] reserved for an allocation of `bytes` the host freed.
pub fn release(bytes: usize) {
    let _ = CALL_ANSWERS.try_with(|account| account.release(allocation(bytes as u64)));
}

/// An answer's body as it arrives: its bytes are charged to the module's memory, and its buffer,
/// as it really grows, to the process's budget: a grown buffer is held together with the one it
/// replaces until that one is freed, as the move holds both. Dropping the body gives its buffer back.
/// Outside a guest's import (no account) it is a plain buffer.
pub struct AnswerBody {
    bytes: Vec<u8>,
    account: Option<Arc<dyn AnswerCharge>>,
    held: u64,
}

impl AnswerBody {
    /// An empty body, charged to the account of the guest import being served (if any).
    pub fn new() -> AnswerBody {
        AnswerBody::charged_to(current())
    }

    /// An empty body charged to `account` (none: a plain buffer).
    fn charged_to(account: Option<Arc<dyn AnswerCharge>>) -> AnswerBody {
        AnswerBody {
            bytes: Vec::new(),
            account,
            held: 0,
        }
    }

    /// Appends `data`, or says why it may not be held (nothing is appended then).
    pub fn extend(&mut self, data: &[u8]) -> Result<(), AnswerRefusal> {
        let Some(account) = &self.account else {
            self.bytes.extend_from_slice(data);
            return Ok(());
        };
        account.take(data.len() as u64)?;
        let needed = self.bytes.len() + data.len();
        if needed > self.bytes.capacity() {
            // Doubling, as a Vec grows, and exactly that: the capacity held is the one allocated.
            let capacity = needed.max(self.bytes.capacity().saturating_mul(2));
            let grown = allocation(capacity as u64);
            account.hold(grown)?;
            self.bytes.reserve_exact(capacity - self.bytes.len());
            account.release(self.held);
            self.held = grown;
        }
        self.bytes.extend_from_slice(data);
        Ok(())
    }

    /// The body, its buffer still held on the account until the account ends (the capability keeps
    /// it until the guest has the answer).
    pub fn into_vec(mut self) -> Vec<u8> {
        self.held = 0;
        std::mem::take(&mut self.bytes)
    }

    /// The bytes so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing arrived.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl Default for AnswerBody {
    fn default() -> AnswerBody {
        AnswerBody::new()
    }
}

impl std::ops::Deref for AnswerBody {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for AnswerBody {
    fn drop(&mut self) {
        if let Some(account) = &self.account {
            account.release(self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocation_tally::measure;
    use crate::capabilities::memory::{AnswerAccount, MemoryBudget};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A 15 MiB answer (issue 55's gets) arriving in 16 KiB frames, as hyper hands them over.
    const ANSWER: usize = 15 << 20;
    const FRAME: [u8; 16 << 10] = [b'x'; 16 << 10];

    fn account(limit: u64) -> Arc<AnswerAccount> {
        let budget = Box::leak(Box::new(MemoryBudget::new(limit)));
        Arc::new(AnswerAccount::new(64 << 20, budget))
    }

    /// An account that remembers the most it held at once.
    #[derive(Default)]
    struct Peak {
        taken: AtomicU64,
        held: AtomicU64,
        peak: AtomicU64,
    }

    impl AnswerCharge for Peak {
        fn take(&self, bytes: u64) -> Result<(), AnswerRefusal> {
            self.taken.fetch_add(bytes, Ordering::Relaxed);
            Ok(())
        }
        fn hold(&self, bytes: u64) -> Result<(), AnswerRefusal> {
            let held = self.held.fetch_add(bytes, Ordering::Relaxed) + bytes;
            self.peak.fetch_max(held, Ordering::Relaxed);
            Ok(())
        }
        fn release(&self, bytes: u64) {
            self.held.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_body_holds_what_its_buffer_really_takes_while_it_grows() {
        let account = Arc::new(Peak::default());
        let charged: Arc<dyn AnswerCharge> = account.clone();
        let ((), tally) = measure(|| {
            let mut body = AnswerBody::charged_to(Some(charged));
            while body.len() < ANSWER {
                body.extend(&FRAME).unwrap();
            }
        });
        assert_eq!(account.taken.load(Ordering::Relaxed), ANSWER as u64);
        // Charging the bytes as they arrived (15 MiB) fell short of what the buffer took: a grown
        // buffer and the one it replaces are held at once while it moves.
        assert!(tally.peak > (ANSWER as u64) * 3 / 2, "{tally:?}");
        let peak = account.peak.load(Ordering::Relaxed);
        assert!(peak >= tally.peak, "held {peak} at most, {tally:?}");
        assert_eq!(
            account.held.load(Ordering::Relaxed),
            0,
            "a dropped body gives its buffer back"
        );
    }

    #[test]
    fn a_body_past_the_budget_is_refused_with_the_budget_s_message() {
        let answers = account(8 << 20);
        let mut body = AnswerBody::charged_to(Some(answers.clone()));
        let refused = loop {
            if let Err(refused) = body.extend(&FRAME) {
                break refused;
            }
        };
        assert_eq!(refused, AnswerRefusal::Budget { budget_mib: 8 });
        assert!(answers.held() <= 8 << 20);
        // Kept as the answer (an HTTP body), its buffer stays held until the account ends.
        let held = answers.held();
        let kept = body.into_vec();
        assert_eq!(answers.held(), held);
        drop(kept);
    }
}
