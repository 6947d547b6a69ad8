//! The wasmtime engine: the component model, epoch interruption (ticked by a background thread), and
//! the pooling allocator, sized for [`MAX_CONCURRENT_CALLS`] instances of at most
//! [`MAX_MEMORY`](crate::modules::MAX_MEMORY) bytes of memory each.

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::modules::MAX_MEMORY;

/// Calls that run at once; more wait for a slot.
pub const MAX_CONCURRENT_CALLS: u32 = 64;

/// How often the epoch advances. A running guest yields to the async runtime at every tick, which is
/// what lets a call's deadline end a guest that never returns.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Builds the engine. Falls back to on-demand allocation where the pool's virtual-memory reservation
/// is refused (e.g. under a tight `ulimit -v`).
pub(crate) fn new_engine() -> wasmtime::Result<Engine> {
    let mut config = base_config();
    let mut pool = PoolingAllocationConfig::new();
    // Each running call may hold one nested instance: the signing module serving its `signing` import.
    let instances = MAX_CONCURRENT_CALLS * 2;
    pool.total_component_instances(instances)
        .total_core_instances(instances * 16)
        .total_memories(instances * 2)
        .total_tables(instances * 16)
        .total_stacks(instances)
        .max_memories_per_module(2)
        .max_memory_size(MAX_MEMORY as usize)
        // Reset a used memory by memset up to 1 MiB instead of madvise: no page faults on the next
        // instantiation, no TLB shootdowns (`make bench`: 10 µs per fresh instance instead of 30).
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = match Engine::new(&config) {
        Ok(engine) => engine,
        Err(e) => {
            tracing::info!(
                "the pooling allocator is unavailable ({e}); allocating instances on demand"
            );
            Engine::new(&base_config())?
        }
    };
    start_epoch_ticker(&engine)
        .map_err(|e| wasmtime::format_err!("cannot start the epoch thread: {e}"))?;
    Ok(engine)
}

fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // One function at a time: each compiling thread holds its function's intermediate forms, and
    // a compile is held to the compile budget by one estimate whatever the node's cores (a 12 MB
    // componentize-js component peaked 78 MiB higher compiled on 2 threads; docs/limits.md).
    config.parallel_compilation(false);
    config
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until the engine is dropped.
fn start_epoch_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("epoch-ticker".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            match weak.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => break,
            }
        })?;
    Ok(())
}
