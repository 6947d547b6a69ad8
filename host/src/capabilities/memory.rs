//! Guest linear memory: each call's cap (the manifest's `memory`), and one budget for the whole
//! process, so that many calls at their caps at once cannot grow the process without bound.
//!
//! Every store's limiter reserves what its memories grow by from the [`MemoryBudget`] and gives it
//! back when the store is dropped. Growth the budget cannot cover fails that call's growth, like its
//! own cap does. What the host holds of the answers it reads for a guest draws on the same budget
//! ([`AnswerAccount`]), so that the guests' memories and the host's copies of their answers together
//! stay within it: by default half of the container's memory limit, the other half left to Velero's
//! own server and to what the plugin holds besides (docs/limits.md has the arithmetic).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use wasmtime::ResourceLimiter;

use crate::answer_charge::{AnswerCharge, AnswerRefusal};

/// The variable that sets the process's budget (`2GiB`, `512MiB`, or bytes).
pub(crate) use crate::config::VELERO_WASM_MEMORY_BUDGET as BUDGET_VARIABLE;

/// The budget when neither [`BUDGET_VARIABLE`] nor a cgroup memory limit says otherwise.
pub(crate) const DEFAULT_BUDGET: u64 = 2 << 30;

/// The part of the cgroup's memory limit the budget is by default: a quarter. In Velero's container
/// (512 MiB unless the admin raised it) the rest is Velero's own server and what the plugin holds
/// besides its calls: the engine, the compiled modules, the instance pool's resident pages, the
/// gRPC and HTTP buffers, about 140 MiB with 64 calls at once (`make memory`, debug build).
pub(crate) const CGROUP_SHARE: u64 = 4;

/// Bytes the process's calls may hold at once: their guests' linear memory and what the host holds of
/// the answers it reads for them.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

/// The process's budget, read once.
static PROCESS: OnceLock<MemoryBudget> = OnceLock::new();

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: u64) -> MemoryBudget {
        MemoryBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// The process's budget: [`BUDGET_VARIABLE`] of the configuration the edge gave
    /// [`MemoryBudget::configure_process`] (an unusable value is reported and ignored), else a quarter
    /// ([`CGROUP_SHARE`]) of the cgroup's memory limit, else [`DEFAULT_BUDGET`]. The budget is one counter for every store
    /// of the process, hence a static; only its limit comes from the configuration.
    pub(crate) fn process() -> &'static MemoryBudget {
        PROCESS.get_or_init(|| MemoryBudget::process_limit(None))
    }

    /// Sets the process's budget from `config` ([`BUDGET_VARIABLE`]), once, before any call uses it:
    /// the plugin and the CLI call this at start, after logging starts (an unusable value is a
    /// warning). A process that never calls it (a test, a benchmark) has the default budget.
    pub(crate) fn configure_process(config: &crate::config::Config) -> &'static MemoryBudget {
        PROCESS.get_or_init(|| MemoryBudget::process_limit(config.memory_budget()))
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
            limit.unwrap_or_else(|| {
                cgroup_limit().map_or(DEFAULT_BUDGET, |limit| limit / CGROUP_SHARE)
            }),
        )
    }

    /// The budget, in bytes.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes reserved now.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` of the budget if it has them left.
    pub(crate) fn reserve(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    /// Gives back `bytes` taken with [`MemoryBudget::reserve`].
    pub(crate) fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The memory limit the process runs under: the smallest v2 `memory.max` or v1
/// `memory.limit_in_bytes` of its own cgroup and of every cgroup above it, as `/proc/self/cgroup`
/// names them, if any is set. The root's files alone said "no limit" for a process moved into a
/// cgroup of its own (`make memory`; a container without a cgroup namespace), so the budget was
/// 2 GiB in a 512 MiB cgroup.
pub(crate) fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    cgroup_limit_of(&own, |path| std::fs::read_to_string(path).ok())
}

/// [`cgroup_limit`] for a process whose `/proc/self/cgroup` says `own`, reading files with `read`.
fn cgroup_limit_of(own: &str, read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    let mut files: Vec<PathBuf> = Vec::new();
    for line in own.lines() {
        // hierarchy-id:controllers:path; v2's one line has no controllers.
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (mount, file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else {
            continue;
        };
        // The cgroup and each one above it, up to the mount's root (in a cgroup namespace, or when the
        // mount shows only the process's own cgroup, the path's ancestors are where the limit is).
        let mut at = Some(Path::new(path));
        while let Some(dir) = at {
            let relative = dir.strip_prefix("/").unwrap_or(dir);
            files.push(Path::new(mount).join(relative).join(file));
            at = dir.parent();
        }
    }
    if files.is_empty() {
        files = vec![
            PathBuf::from("/sys/fs/cgroup/memory.max"),
            PathBuf::from("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        ];
    }
    files
        .iter()
        .filter_map(|file| read(file))
        .filter_map(|text| text.trim().parse::<u64>().ok())
        // v1 writes "no limit" as a number near 2^63 (v2 as `max`, which does not parse).
        .filter(|&limit| limit < 1 << 50)
        .min()
}

/// Why a call's memory could not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Over the module's own cap.
    Cap,
    /// Over what the process's budget had left.
    Budget,
}

/// The memory cap of one call, remembering whether the guest ran into it, and what it holds of the
/// process's budget.
pub(crate) struct MemoryCap {
    limit: u64,
    budget: &'static MemoryBudget,
    reserved: u64,
    /// The size the guest asked for when it was refused, and why.
    pub(crate) refused: Option<(u64, Refusal)>,
}

impl MemoryCap {
    /// A cap of `limit` bytes, drawing on `budget`.
    pub(crate) fn new(limit: u64, budget: &'static MemoryBudget) -> MemoryCap {
        MemoryCap {
            limit,
            budget,
            reserved: 0,
            refused: None,
        }
    }

    /// The cap, in bytes.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// The process budget this cap draws on.
    pub(crate) fn budget(&self) -> &'static MemoryBudget {
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

/// What the host may hold of the answers it reads for one of a guest's imports (a `kube` get, list or
/// read-all, a write's result, a view's listing made for it; an HTTP answer): the answer's bytes at
/// most the module's memory limit, what the guest could take anyway; and what the host really holds
/// for them, reserved from the process's [`MemoryBudget`]: the body's buffer as it grows (with the one
/// it replaces while it moves), the text parsed out of it, a list's items, a view's copy. Without it
/// a read-all of 64 answers of 15 MiB held a gigabyte for modules of 64 MiB, and 64 concurrent gets
/// of 15 MiB each, charged only the bytes read, took the plugin past 512 MiB. The capability sets it
/// around each backend call ([`crate::answer_charge::scope`]), the clients charge it without knowing
/// it is this, and the capability keeps it until the guest has the answers (its next import, or the
/// end of the call): then what it held goes back to the budget.
#[derive(Debug)]
pub(crate) struct AnswerAccount {
    limit: u64,
    taken: AtomicU64,
    held: AtomicU64,
    budget: &'static MemoryBudget,
}

impl AnswerAccount {
    /// An account of `limit` bytes (the module's memory limit), drawing on `budget`.
    pub(crate) fn new(limit: u64, budget: &'static MemoryBudget) -> AnswerAccount {
        AnswerAccount {
            limit,
            taken: AtomicU64::new(0),
            held: AtomicU64::new(0),
            budget,
        }
    }

    /// Charges `bytes` more of answer against the module's memory, or says why they may not be held.
    pub(crate) fn take(&self, bytes: u64) -> Result<(), AnswerRefusal> {
        let limit = self.limit;
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                taken.checked_add(bytes).filter(|&total| total <= limit)
            })
            .map(|_| ())
            .map_err(|_| AnswerRefusal::Cap {
                limit_mib: limit >> 20,
            })
    }

    /// Reserves `bytes` the host holds for the answers from the process's budget, or says that the
    /// budget cannot cover them.
    pub(crate) fn hold(&self, bytes: u64) -> Result<(), AnswerRefusal> {
        if !self.budget.reserve(bytes) {
            return Err(AnswerRefusal::Budget {
                budget_mib: self.budget.limit >> 20,
            });
        }
        self.held.fetch_add(bytes, Ordering::AcqRel);
        Ok(())
    }

    /// Gives back `bytes` of what [`AnswerAccount::hold`] reserved (at most what it holds).
    pub(crate) fn release(&self, bytes: u64) {
        let released = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(held.saturating_sub(bytes))
            })
            .map_or(0, |held| held.min(bytes));
        self.budget.release(released);
    }

    /// Bytes of answer charged so far.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> u64 {
        self.taken.load(Ordering::Acquire)
    }

    /// Bytes held from the process's budget now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }
}

impl AnswerCharge for AnswerAccount {
    fn take(&self, bytes: u64) -> Result<(), AnswerRefusal> {
        AnswerAccount::take(self, bytes)
    }

    fn hold(&self, bytes: u64) -> Result<(), AnswerRefusal> {
        AnswerAccount::hold(self, bytes)
    }

    fn release(&self, bytes: u64) {
        AnswerAccount::release(self, bytes)
    }
}

impl Drop for AnswerAccount {
    fn drop(&mut self) {
        self.budget.release(*self.held.get_mut());
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
        account.hold(40 << 20).unwrap();
        assert_eq!(
            account.take(30 << 20),
            Err(AnswerRefusal::Cap { limit_mib: 64 })
        );
        // A call at its cap elsewhere leaves too little of the budget for this one's answers.
        let mut other = MemoryCap::new(64 << 20, budget);
        assert!(other.memory_growing(0, 50 << 20, None).unwrap());
        assert_eq!(
            account.hold(20 << 20),
            Err(AnswerRefusal::Budget { budget_mib: 100 })
        );
        assert_eq!(account.taken(), 40 << 20);
        assert_eq!(budget.used(), 90 << 20);
        // A buffer the host freed goes back at once, never more than was held.
        account.release(10 << 20);
        assert_eq!((account.held(), budget.used()), (30 << 20, 80 << 20));
        account.release(1 << 30);
        assert_eq!((account.held(), budget.used()), (0, 50 << 20));
        account.hold(5 << 20).unwrap();
        drop(account);
        assert_eq!(budget.used(), 50 << 20);
    }

    #[test]
    fn the_limit_is_the_process_s_own_cgroup_s_or_one_above_it() {
        let files = |entries: &'static [(&'static str, &'static str)]| {
            move |path: &Path| {
                entries
                    .iter()
                    .find(|(name, _)| Path::new(name) == path)
                    .map(|(_, text)| text.to_string())
            }
        };
        // cgroup v1 (`make memory` moves the process into a cgroup of its own): the root says no
        // limit, the process's cgroup says 512 MiB.
        let v1 = "12:pids:/x\n4:memory:/velero-wasm-memory-7\n1:cpu,cpuacct:/x\n0::/\n";
        let v1_files = files(&[
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/velero-wasm-memory-7/memory.limit_in_bytes",
                "536870912\n",
            ),
        ]);
        assert_eq!(cgroup_limit_of(v1, v1_files), Some(512 << 20));
        // cgroup v2, a pod's container under a pod-level limit that is lower.
        let v2 = "0::/kubepods/pod1/ctr\n";
        let v2_files = files(&[
            ("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n"),
            ("/sys/fs/cgroup/kubepods/pod1/memory.max", "1073741824\n"),
            ("/sys/fs/cgroup/kubepods/memory.max", "max\n"),
        ]);
        assert_eq!(cgroup_limit_of(v2, v2_files), Some(1 << 30));
        // In a cgroup namespace the process's cgroup is the mount's root.
        let namespaced = files(&[("/sys/fs/cgroup/memory.max", "536870912\n")]);
        assert_eq!(cgroup_limit_of("0::/\n", namespaced), Some(512 << 20));
        // Nothing readable, or no limit anywhere: none.
        assert_eq!(cgroup_limit_of(v2, files(&[])), None);
        assert_eq!(cgroup_limit_of("", v1_files), None);
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
