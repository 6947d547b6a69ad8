//! Memory for compiling modules, apart from the calls' budget: a compile of a large component (a
//! JavaScript or Python interpreter with its module) takes hundreds of MiB for a minute, and several
//! at once killed the plugin, which shares Velero's container (512 MiB by default) with Velero's own
//! server. Each compile reserves its estimate ([`estimate`]) before it starts and waits while the
//! compiles already running leave too little; a module whose estimate alone is over the budget is
//! refused, with a message that says so. Reading a compiled module from the cache reserves nothing.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The variable that sets the budget (`256MiB`, `1GiB`, or bytes).
pub use crate::config::VELERO_WASM_COMPILE_MEMORY as BUDGET_VARIABLE;

/// The budget when [`BUDGET_VARIABLE`] does not set one and the process runs under no cgroup memory
/// limit (a workstation's CLI), as the calls' budget: an interpreter module (a componentize-js
/// component is estimated at about 470 MiB) compiles.
pub const DEFAULT_BUDGET: u64 = 2 << 30;

/// What a cgroup's memory limit keeps from the compiles when [`BUDGET_VARIABLE`] does not set the
/// budget, besides the calls' own budget (a quarter of the limit, `capabilities::memory`): Velero's
/// own server and the plugin process itself (the engine, the stock modules, the instance pool, gRPC
/// and HTTP buffers), so that compiles, calls and both of those together stay within the limit. A
/// 512 MiB container (Velero's default) leaves compiles 128 MiB; 1 GiB, 512 MiB.
pub const LEFT_BESIDE_COMPILES: u64 = 256 << 20;

/// The least the budget a cgroup leaves is: the stock modules' size of compile.
const LEAST: u64 = 64 << 20;

/// The default budget: three quarters of the cgroup's memory limit (the calls have the fourth) less
/// [`LEFT_BESIDE_COMPILES`], at least 64 MiB; else [`DEFAULT_BUDGET`].
pub fn default_limit() -> u64 {
    crate::capabilities::memory::cgroup_limit().map_or(DEFAULT_BUDGET, beside_calls)
}

/// [`default_limit`] under a cgroup memory limit of `limit` bytes.
fn beside_calls(limit: u64) -> u64 {
    (limit - limit / 4)
        .saturating_sub(LEFT_BESIDE_COMPILES)
        .max(LEAST)
}

/// What a compile takes whatever the module (the translation's tables, the object being written,
/// the instance `describe` runs in), measured for the smallest stock module.
const BASE: u64 = 48 << 20;

/// What a compile takes per byte of function bodies (a core module's code section), measured: a
/// componentize-js component's 9.2 MB of code took 46 bytes a byte at its peak.
const PER_CODE_BYTE: u64 = 48;

/// The memory compiling `wasm` is estimated to take at its peak: [`BASE`] and [`PER_CODE_BYTE`] for
/// each byte of the function bodies of every core module in it. A component that cannot be parsed is
/// counted by its length (wasmtime refuses it soon after).
pub fn estimate(wasm: &[u8]) -> u64 {
    BASE.saturating_add(PER_CODE_BYTE.saturating_mul(code_bytes(wasm)))
}

/// The bytes of function bodies in `wasm`, nested modules and components included.
fn code_bytes(wasm: &[u8]) -> u64 {
    let mut code = 0u64;
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(wasmparser::Payload::CodeSectionStart { size, .. }) => {
                code = code.saturating_add(u64::from(size));
            }
            Ok(_) => {}
            Err(_) => return wasm.len() as u64,
        }
    }
    code
}

/// The compiles of one process, held to a budget of memory.
#[derive(Debug)]
pub struct CompileBudget {
    limit_mib: u32,
    held: Mutex<Held>,
    /// Told when a reservation is given back.
    freed: Condvar,
}

/// What the compiles under way hold, and the most they held at once, in MiB.
#[derive(Debug, Default)]
struct Held {
    now: u32,
    peak: u32,
    /// Compiles waiting for room.
    waiting: u32,
}

impl Held {
    fn fits(&self, wanted: u32, limit: u32) -> bool {
        u64::from(self.now) + u64::from(wanted) <= u64::from(limit)
    }
}

/// A compile's reservation, given back when dropped.
pub(crate) struct Reservation<'a> {
    mib: u32,
    budget: &'a CompileBudget,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.held();
        held.now = held.now.saturating_sub(self.mib);
        drop(held);
        self.budget.freed.notify_all();
    }
}

/// A module whose compile is estimated to take more than the whole budget.
#[derive(Debug, Clone, thiserror::Error)]
#[error("too big to compile within the compile memory budget: compiling its {component_mib} MiB component ({code_mib} MiB of code) is estimated to take {estimate_mib} MiB, over the {budget_mib} MiB of {BUDGET_VARIABLE} (a larger memory limit for Velero's container raises the budget: docs/limits.md)")]
pub struct OverBudget {
    /// The component's size, MiB rounded up.
    pub component_mib: u64,
    /// Its function bodies, MiB rounded up.
    pub code_mib: u64,
    /// The estimate, MiB rounded up.
    pub estimate_mib: u64,
    /// The budget, MiB.
    pub budget_mib: u32,
}

impl CompileBudget {
    /// A budget of `limit` bytes (rounded down to MiB; at least 1 MiB).
    pub fn new(limit: u64) -> CompileBudget {
        CompileBudget {
            limit_mib: u32::try_from(limit >> 20).unwrap_or(u32::MAX).max(1),
            held: Mutex::default(),
            freed: Condvar::new(),
        }
    }

    /// The budget [`BUDGET_VARIABLE`] of `config` sets, else the default ([`default_limit`]); an
    /// unusable value is a warning and the default.
    pub fn from_config(config: &crate::config::Config) -> CompileBudget {
        let limit = match config.compile_memory() {
            None => default_limit(),
            Some(text) => match velero_wasm_grant::parse_byte_size(&text) {
                Some(bytes) if bytes >= 1 << 20 => bytes,
                _ => {
                    tracing::warn!(
                        "{BUDGET_VARIABLE}={text:?} is not a size of 1MiB or more like \"320MiB\"; using the default, {} MiB",
                        default_limit() >> 20
                    );
                    default_limit()
                }
            },
        };
        CompileBudget::new(limit)
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> u64 {
        u64::from(self.limit_mib) << 20
    }

    /// The most the compiles of this process reserved at once, in bytes: what the budget let through.
    pub fn peak(&self) -> u64 {
        u64::from(self.held().peak) << 20
    }

    /// The counts; a panic elsewhere while they were held leaves them whole (each update is one
    /// assignment), so a poisoned lock is used as it is.
    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves the estimate of compiling `wasm`, waiting (blocking this thread: compiles run on
    /// blocking threads) while the compiles under way leave too little of the budget.
    pub(crate) fn reserve(&self, wasm: &[u8]) -> Result<Reservation<'_>, OverBudget> {
        let estimate = estimate(wasm);
        let estimate_mib = estimate.div_ceil(1 << 20);
        let over = || OverBudget {
            component_mib: (wasm.len() as u64).div_ceil(1 << 20),
            code_mib: code_bytes(wasm).div_ceil(1 << 20),
            estimate_mib,
            budget_mib: self.limit_mib,
        };
        let wanted = match u32::try_from(estimate_mib) {
            Ok(wanted) if wanted <= self.limit_mib => wanted,
            _ => return Err(over()),
        };
        let mut held = self.held();
        if !held.fits(wanted, self.limit_mib) {
            tracing::debug!(
                estimate_mib,
                held_mib = held.now,
                "a compile waits for the compile memory budget"
            );
        }
        held.waiting += 1;
        while !held.fits(wanted, self.limit_mib) {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        held.waiting -= 1;
        held.now += wanted;
        held.peak = held.peak.max(held.now);
        Ok(Reservation {
            mib: wanted,
            budget: self,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubevirt() -> Vec<u8> {
        crate::modules::stock_modules()
            .into_iter()
            .flatten()
            .find(|m| m.name == "kubevirt")
            .map(|m| m.wasm.to_vec())
            .unwrap()
    }

    #[test]
    fn a_container_s_limit_is_shared_by_the_calls_the_compiles_and_what_is_left_beside_them() {
        const MIB: u64 = 1 << 20;
        assert_eq!(beside_calls(512 * MIB), 128 * MIB);
        assert_eq!(beside_calls(1024 * MIB), 512 * MIB);
        // The calls' quarter, the compiles' budget and what is left beside them make the limit.
        for limit in [512 * MIB, 1024 * MIB, 2048 * MIB] {
            assert_eq!(
                limit / 4 + beside_calls(limit) + LEFT_BESIDE_COMPILES,
                limit
            );
        }
        // A small limit still lets the stock modules' size of module compile.
        assert_eq!(beside_calls(256 * MIB), LEAST);
        // The stock kubevirt module compiles in Velero's default container; an interpreter does not.
        assert!(estimate(&kubevirt()) <= beside_calls(512 * MIB));
    }

    #[test]
    fn the_estimate_counts_code_not_data() {
        let wasm = kubevirt();
        let code = code_bytes(&wasm);
        assert!(
            code > 0 && code < wasm.len() as u64,
            "{code} of {}",
            wasm.len()
        );
        assert_eq!(estimate(&wasm), BASE + PER_CODE_BYTE * code);
        assert_eq!(
            code_bytes(b"not wasm"),
            8,
            "unparsable: counted by its length"
        );
    }

    #[test]
    fn a_compile_over_the_whole_budget_is_refused_with_the_figures() {
        let budget = CompileBudget::new(32 << 20);
        let wasm = kubevirt();
        let Err(over) = budget.reserve(&wasm) else {
            panic!(
                "a compile estimated at {} MiB passed 32 MiB",
                estimate(&wasm) >> 20
            )
        };
        let text = over.to_string();
        assert!(
            text.starts_with("too big to compile within the compile memory budget"),
            "{text}"
        );
        assert!(
            text.contains("over the 32 MiB of VELERO_WASM_COMPILE_MEMORY"),
            "{text}"
        );
        assert_eq!(budget.peak(), 0, "nothing was reserved");
    }

    #[test]
    fn compiles_beyond_the_budget_wait_for_the_ones_under_way() {
        let wasm = kubevirt();
        let one = estimate(&wasm);
        // Room for one compile and a half.
        let budget = std::sync::Arc::new(CompileBudget::new(one + one / 2));
        let first = budget.reserve(&wasm).unwrap();
        let (sent, received) = std::sync::mpsc::channel();
        let second = std::thread::spawn({
            let (budget, wasm) = (budget.clone(), wasm.clone());
            move || {
                let reservation = budget.reserve(&wasm).map(|_| ());
                sent.send(reservation).unwrap();
            }
        });
        // The second waits while the first holds its reservation…
        while budget.held().waiting == 0 {
            std::thread::yield_now();
        }
        assert!(received.try_recv().is_err(), "the second compile went on");
        // …and goes on once it is given back.
        drop(first);
        received.recv().unwrap().unwrap();
        second.join().unwrap();
        assert_eq!(
            budget.peak(),
            one.div_ceil(1 << 20) << 20,
            "never two at once"
        );
    }
}

/// The budget as the runtime applies it: loads of modules that are not stock ones.
#[cfg(test)]
mod runtime_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::capabilities::{Clock, Environment, Services};
    use crate::modules::{ModuleSource, Origin};
    use crate::runtime::{CompileWatch, Runtime};

    /// Counts the compiles under way, and the most at once.
    #[derive(Default)]
    struct InFlight {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl CompileWatch for InFlight {
        fn started(&self, _: &str, _: usize) {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
        }
        fn finished(&self, _: &str) {
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn runtime(budget: u64, watch: Arc<InFlight>) -> Runtime {
        let services = Services::new(
            Arc::new(crate::cluster::NoCluster::default()),
            Clock::System,
            Environment::from_config(&crate::config::Config::from_vars::<String, String>([])),
        );
        Runtime::new(services)
            .unwrap()
            .with_compile_budget(CompileBudget::new(budget))
            .with_compile_watch(Some(watch))
    }

    /// Stock module `name`'s component, as a module of a directory (not stock: held to the budget).
    fn module(name: &str) -> ModuleSource {
        let stock = crate::modules::stock_modules()
            .into_iter()
            .flatten()
            .find(|m| m.name == name)
            .unwrap();
        let manifest = format!("sha256 = \"{}\"\n", crate::modules::sha256_hex(&stock.wasm));
        ModuleSource::new(
            &format!("{name}-copy"),
            stock.wasm.to_vec(),
            &manifest,
            Origin::File(format!("{name}-copy.wasm").into()),
        )
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn modules_loaded_at_once_compile_one_at_a_time_when_one_fills_the_budget() {
        let (kubevirt, agent) = (module("kubevirt"), module("agent"));
        let larger =
            (estimate(&kubevirt.wasm).max(estimate(&agent.wasm))).next_multiple_of(1 << 20);
        let watch = Arc::new(InFlight::default());
        let runtime = runtime(larger, watch.clone());
        let (a, b) = tokio::join!(runtime.load(kubevirt), runtime.load(agent));
        a.unwrap();
        b.unwrap();
        assert_eq!(
            watch.most.load(Ordering::SeqCst),
            1,
            "two compiles ran at once"
        );
        assert!(runtime.compile_budget().peak() <= larger);
    }

    #[tokio::test]
    async fn a_module_too_big_for_the_budget_is_refused_saying_so() {
        let watch = Arc::new(InFlight::default());
        let runtime = runtime(16 << 20, watch.clone());
        let problem = runtime
            .load(module("kubevirt"))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            problem.contains("too big to compile within the compile memory budget")
                && problem.contains("over the 16 MiB of VELERO_WASM_COMPILE_MEMORY"),
            "{problem}"
        );
        assert_eq!(watch.most.load(Ordering::SeqCst), 0, "it was compiled");
        assert!(runtime.catalog().modules().next().is_none());
    }
}
