//! The `clock` capability. The system clock by default; a virtual clock for reproducible runs
//! (`run --now`), where time starts at a fixed instant and moves only when the guest sleeps, and a
//! sleep returns at once. WASI's clocks (what `std::time` reads) show the same time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use super::CallState;
use crate::bindings::velero_wasm::plugin::clock::Host;
use crate::bindings::{timestamp, wit_types::Timestamp};

/// A source of time.
#[derive(Clone, Debug)]
pub enum Clock {
    /// Real time.
    System,
    /// Starts at `start` and advances only by the guest's sleeps (shared by every call of the runtime).
    Virtual {
        /// The instant time starts at.
        start: SystemTime,
        /// Nanoseconds slept so far.
        slept: Arc<AtomicU64>,
    },
}

impl Clock {
    /// A virtual clock starting at `start`.
    pub fn fixed(start: SystemTime) -> Clock {
        Clock::Virtual {
            start,
            slept: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Wall-clock time.
    pub fn now(&self) -> SystemTime {
        match self {
            Clock::System => SystemTime::now(),
            Clock::Virtual { start, slept } => {
                *start + Duration::from_nanos(slept.load(Ordering::Relaxed))
            }
        }
    }

    /// Monotonic nanoseconds.
    pub fn monotonic(&self) -> u64 {
        match self {
            Clock::System => {
                static ORIGIN: OnceLock<Instant> = OnceLock::new();
                let origin = ORIGIN.get_or_init(Instant::now);
                u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
            }
            Clock::Virtual { slept, .. } => slept.load(Ordering::Relaxed),
        }
    }

    /// Waits (really, or by advancing virtual time).
    pub async fn sleep(&self, duration: Duration) {
        match self {
            Clock::System => tokio::time::sleep(duration).await,
            Clock::Virtual { slept, .. } => {
                let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
                slept.fetch_add(nanos, Ordering::Relaxed);
                // Let the call's deadline and other tasks run even if the guest sleeps in a loop.
                tokio::task::yield_now().await;
            }
        }
    }

    /// Makes WASI's clocks show this clock's time (only the virtual clock needs to).
    pub fn install(&self, wasi: &mut WasiCtxBuilder) {
        if let Clock::Virtual { .. } = self {
            wasi.wall_clock(self.clone()).monotonic_clock(self.clone());
        }
    }
}

impl HostWallClock for Clock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        Clock::now(self)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    }
}

impl HostMonotonicClock for Clock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.monotonic()
    }
}

impl Host for CallState {
    fn now(&mut self) -> Timestamp {
        timestamp(self.services.clock.now())
    }

    fn monotonic(&mut self) -> u64 {
        self.services.clock.monotonic()
    }

    async fn sleep(&mut self, nanoseconds: u64) {
        self.services
            .clock
            .sleep(Duration::from_nanos(nanoseconds))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn virtual_time_moves_only_by_sleeping() {
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let clock = Clock::fixed(start);
        assert_eq!(clock.now(), start);
        clock.sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.now(), start + Duration::from_secs(90));
        assert_eq!(clock.monotonic(), 90_000_000_000);
    }
}
