//! Guest linear memory: each call's cap (the manifest's `memory`), and one budget for the whole
//! process, so that many calls at their caps at once cannot grow the process without bound.
//!
//! Every store's limiter reserves what its memories grow by from the [`MemoryBudget`] and gives it
//! back when the store is dropped. Growth the budget cannot cover fails that call's growth, like its
//! own cap does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use wasmtime::ResourceLimiter;

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

    /// The process's budget: [`BUDGET_VARIABLE`] if set (an unusable value is reported and ignored),
    /// else half of the cgroup's memory limit, else [`DEFAULT_BUDGET`].
    pub fn process() -> &'static MemoryBudget {
        PROCESS.get_or_init(|| {
            let limit = match std::env::var(BUDGET_VARIABLE) {
                Ok(text) => match velero_wasm_grant::parse_byte_size(&text) {
                    Some(bytes) => Some(bytes),
                    None => {
                        tracing::warn!(
                            "{BUDGET_VARIABLE}={text:?} is not a size like \"2GiB\"; using the default"
                        );
                        None
                    }
                },
                Err(_) => None,
            };
            MemoryBudget::new(limit.unwrap_or_else(|| {
                cgroup_limit().map_or(DEFAULT_BUDGET, |limit| limit / 2)
            }))
        })
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
fn cgroup_limit() -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
