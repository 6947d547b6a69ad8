//! Guest linear memory: each call's cap (the manifest's `memory`), and one budget for the whole
//! process, so that many calls at their caps at once cannot grow the process without bound.
//!
//! Every store's limiter reserves what its memories grow by from the [`MemoryBudget`] and gives it
//! back when the store is dropped. Growth the budget cannot cover fails that call's growth, like its
//! own cap does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use wasmtime::ResourceLimiter;

use crate::answer_charge::{AnswerCharge, AnswerRefusal};

/// The variable that sets the process's budget (`2GiB`, `512MiB`, or bytes).
pub const BUDGET_VARIABLE: &str = "VELERO_WASM_MEMORY_BUDGET";

/// The budget when neither [`BUDGET_VARIABLE`] nor a cgroup memory limit says otherwise.
pub const DEFAULT_BUDGET: u64 = 2 << 30;

/// Bytes of guest linear memory the process's calls may hold at once.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

/// The process's budget, read once.
static PROCESS: OnceLock<MemoryBudget> = OnceLock::new();

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// The process's budget: [`BUDGET_VARIABLE`] of the configuration the edge gave
    /// [`MemoryBudget::configure_process`] (an unusable value is reported and ignored), else half of
    /// the cgroup's memory limit, else [`DEFAULT_BUDGET`]. The budget is one counter for every store
    /// of the process, hence a static; only its limit comes from the configuration.
    pub fn process() -> &'static MemoryBudget {
        PROCESS.get_or_init(|| MemoryBudget::process_limit(None))
    }

    /// Sets the process's budget from `config` ([`BUDGET_VARIABLE`]), once, before any call uses it:
    /// the plugin and the CLI call this at start, after logging starts (an unusable value is a
    /// warning). A process that never calls it (a test, a benchmark) has the default budget.
    pub fn configure_process(config: &crate::config::Config) -> &'static MemoryBudget {
        PROCESS.get_or_init(|| MemoryBudget::process_limit(config.var(BUDGET_VARIABLE)))
    }

    /// The budget `text` ([`BUDGET_VARIABLE`]'s value) sets, else the cgroup's or the default.
    fn process_limit(text: Option<String>) -> MemoryBudget {
        let limit = match text {
            Some(text) => match velero_wasm_grant::parse_byte_size(&text) {
                Some(bytes) => Some(bytes),
                None => {
                    tracing::warn!(
                        "{BUDGET_VARIABLE}={text:?} is not a size like \"2GiB\"; using the default"
                    );
                    None
                }
            },
            None => None,
        };
        MemoryBudget::new(
            limit.unwrap_or_else(|| cgroup_limit().map_or(DEFAULT_BUDGET, |limit| limit / 2)),
        )
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn reserve(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The memory limit of the cgroup the process runs in (v2 `memory.max`, v1
/// `memory.limit_in_bytes`), if there is one.
pub(crate) fn cgroup_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .and_then(|text| text.trim().parse::<u64>().ok())
    // v1 writes "no limit" as a number near 2^63.
    .filter(|&limit| limit < 1 << 50)
}

/// Why a call's memory could not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over the module's own cap.
    Cap,
    /// Over what the process's budget had left.
    Budget,
}

/// The memory cap of one call, remembering whether the guest ran into it, and what it holds of the
/// process's budget.
pub struct MemoryCap {
    limit: u64,
    budget: &'static MemoryBudget,
    reserved: u64,
    /// The size the guest asked for when it was refused, and why.
    pub refused: Option<(u64, Refusal)>,
}

impl MemoryCap {
    /// A cap of `limit` bytes, drawing on `budget`.
    pub fn new(limit: u64, budget: &'static MemoryBudget) -> MemoryCap {
        MemoryCap {
            limit,
            budget,
            reserved: 0,
            refused: None,
        }
    }

    /// The cap, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The process budget this cap draws on.
    pub fn budget(&self) -> &'static MemoryBudget {
        self.budget
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        self.budget.release(self.reserved);
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let desired = desired as u64;
        if desired > self.limit {
            self.refused = Some((desired, Refusal::Cap));
            return Err(wasmtime::format_err!(
                "memory limit of {} MiB exceeded (the guest asked for {} MiB)",
                self.limit >> 20,
                desired >> 20
            ));
        }
        let growth = desired.saturating_sub(current as u64);
        if !self.budget.reserve(growth) {
            self.refused = Some((desired, Refusal::Budget));
            return Err(wasmtime::format_err!(
                "the process's memory budget of {} MiB for all calls is used up (the guest asked for {} MiB)",
                self.budget.limit >> 20,
                desired >> 20
            ));
        }
        self.reserved += growth;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// What the host may hold of the answers it reads for one of a guest's imports at once (a `kube` get,
/// list or read-all, a write's result, a view's listing made for it): at most the module's memory
/// limit, what the guest could take anyway, and every byte also reserved from the process's
/// [`MemoryBudget`] while held. Without it a read-all of 64 answers of 15 MiB each, or 64 concurrent
/// gets, held a gigabyte for modules of 64 MiB and the process was killed. The bytes are charged as
/// they arrive, before they are kept, and given back to the budget when the account is dropped (once
/// the answers are the guest's). The capability sets it around each backend call
/// ([`crate::answer_charge::scope`]); the clients charge it without knowing it is this.
#[derive(Debug)]
pub struct AnswerAccount {
    limit: u64,
    taken: AtomicU64,
    budget: &'static MemoryBudget,
}

impl AnswerAccount {
    /// An account of `limit` bytes (the module's memory limit), drawing on `budget`.
    pub fn new(limit: u64, budget: &'static MemoryBudget) -> AnswerAccount {
        AnswerAccount {
            limit,
            taken: AtomicU64::new(0),
            budget,
        }
    }

    /// Charges `bytes` more of answer, or says why they may not be held.
    pub fn take(&self, bytes: u64) -> Result<(), AnswerRefusal> {
        let limit = self.limit;
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                taken.checked_add(bytes).filter(|&total| total <= limit)
            })
            .map_err(|_| AnswerRefusal::Cap {
                limit_mib: limit >> 20,
            })?;
        if !self.budget.reserve(bytes) {
            self.taken.fetch_sub(bytes, Ordering::AcqRel);
            return Err(AnswerRefusal::Budget {
                budget_mib: self.budget.limit >> 20,
            });
        }
        Ok(())
    }

    /// Bytes charged so far.
    pub fn taken(&self) -> u64 {
        self.taken.load(Ordering::Acquire)
    }
}

impl AnswerCharge for AnswerAccount {
    fn take(&self, bytes: u64) -> Result<(), AnswerRefusal> {
        AnswerAccount::take(self, bytes)
    }
}

impl Drop for AnswerAccount {
    fn drop(&mut self) {
        self.budget.release(*self.taken.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_held_within_the_module_s_memory_and_the_process_budget() {
        let budget = leaked(100 << 20);
        let account = AnswerAccount::new(64 << 20, budget);
        account.take(40 << 20).unwrap();
        assert_eq!(
            account.take(30 << 20),
            Err(AnswerRefusal::Cap { limit_mib: 64 })
        );
        // A call at its cap elsewhere leaves too little of the budget for this one's answers.
        let mut other = MemoryCap::new(64 << 20, budget);
        assert!(other.memory_growing(0, 50 << 20, None).unwrap());
        assert_eq!(
            account.take(20 << 20),
            Err(AnswerRefusal::Budget { budget_mib: 100 })
        );
        assert_eq!(account.taken(), 40 << 20);
        assert_eq!(budget.used(), 90 << 20);
        drop(account);
        assert_eq!(budget.used(), 50 << 20);
    }

    fn leaked(limit: u64) -> &'static MemoryBudget {
        Box::leak(Box::new(MemoryBudget::new(limit)))
    }

    #[test]
    fn calls_share_the_budget_and_give_it_back() {
        let budget = leaked(100 << 20);
        let mut a = MemoryCap::new(64 << 20, budget);
        let mut b = MemoryCap::new(64 << 20, budget);
        assert!(a.memory_growing(0, 60 << 20, None).unwrap());
        assert!(b.memory_growing(0, 30 << 20, None).unwrap());
        assert!(b.memory_growing(30 << 20, 50 << 20, None).is_err());
        assert_eq!(b.refused, Some((50 << 20, Refusal::Budget)));
        assert_eq!(budget.used(), 90 << 20);
        drop(a);
        assert_eq!(budget.used(), 30 << 20);
        assert!(b.memory_growing(30 << 20, 64 << 20, None).unwrap());
        assert!(b.memory_growing(64 << 20, 65 << 20, None).is_err());
        assert_eq!(b.refused, Some((65 << 20, Refusal::Cap)));
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
