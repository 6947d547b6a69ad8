//! The `clock` capability. The system clock by default; a virtual clock for reproducible runs
//! (`run --now`), where time starts at a fixed instant and moves only when the guest sleeps, and a
//! sleep returns at once; a stepped clock for recording (`run --record`), virtual time whose sleeps
//! also really wait, so a replay on a virtual clock reads the same times. WASI's clocks (what
//! `std::time` reads) show the same time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use crate::bindings::velero_wasm::plugin::clock::Host;
use crate::bindings::{timestamp, wit_types::Timestamp};

/// The deadline of a call whose timeout is too long to be one: 30 years from its start.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// The time limit of one call.
#[derive(Clone, Copy, Debug)]
pub struct TimeLimit {
    /// When the host ends the call (real time).
    pub(crate) deadline: tokio::time::Instant,
    /// The module's `limits.timeout`.
    pub(crate) timeout: Duration,
    /// The clock's monotonic reading when the call began.
    pub(crate) started: u64,
}

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
        /// Whether a sleep really waits (a stepped clock) or returns at once.
        waits: bool,
    },
}

impl Clock {
    /// A virtual clock starting at `start`.
    pub fn fixed(start: SystemTime) -> Clock {
        Clock::Virtual {
            start,
            slept: Arc::new(AtomicU64::new(0)),
            waits: false,
        }
    }

    /// A stepped clock starting at `start`: time moves only by the guest's sleeps, as on a virtual
    /// clock, but sleeps really wait (for recording against a live cluster).
    pub(crate) fn stepped(start: SystemTime) -> Clock {
        Clock::Virtual {
            start,
            slept: Arc::new(AtomicU64::new(0)),
            waits: true,
        }
    }

    /// Wall-clock time.
    pub(crate) fn now(&self) -> SystemTime {
        match self {
            Clock::System => SystemTime::now(),
            Clock::Virtual { start, slept, .. } => {
                *start + Duration::from_nanos(slept.load(Ordering::Relaxed))
            }
        }
    }

    /// Monotonic nanoseconds.
    pub(crate) fn monotonic(&self) -> u64 {
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
    pub(crate) async fn sleep(&self, duration: Duration) {
        match self {
            Clock::System => tokio::time::sleep(duration).await,
            Clock::Virtual { slept, waits, .. } => {
                if *waits {
                    tokio::time::sleep(duration).await;
                }
                let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
                slept.fetch_add(nanos, Ordering::Relaxed);
                // Let the call's deadline and other tasks run even if the guest sleeps in a loop.
                tokio::task::yield_now().await;
            }
        }
    }

    /// What is left of a call's time limit, as this clock sees it: real time on the system clock;
    /// on a virtual clock the limit less the guest's sleeps since the call began, so that a run at
    /// `--now` and a replay see what the recording saw.
    pub fn remaining(&self, limit: &TimeLimit) -> Duration {
        match self {
            Clock::System => limit
                .deadline
                .saturating_duration_since(tokio::time::Instant::now()),
            Clock::Virtual { .. } => limit.timeout.saturating_sub(Duration::from_nanos(
                self.monotonic().saturating_sub(limit.started),
            )),
        }
    }

    /// The time limit of a call that starts now and may take `timeout`. A timeout too long to be a
    /// deadline (a manifest may say `timeout = "300000000000y"`) ends in 30 years, like tokio's timers.
    pub fn limit(&self, timeout: Duration) -> TimeLimit {
        let now = tokio::time::Instant::now();
        TimeLimit {
            deadline: now.checked_add(timeout).unwrap_or_else(|| now + FAR_FUTURE),
            timeout,
            started: self.monotonic(),
        }
    }

    /// Makes WASI's clocks show this clock's time (only the virtual clock needs to).
    pub(crate) fn install(&self, wasi: &mut WasiCtxBuilder) {
        if let Clock::Virtual { .. } = self {
            wasi.wall_clock(self.clone()).monotonic_clock(self.clone());
        }
    }
}

/// A fixture cluster stamps what it creates with this clock's time.
impl crate::cluster::fixture::Now for Clock {
    fn now(&self) -> SystemTime {
        Clock::now(self)
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

/// What the `clock` capability sees of a call: the host's clock, and the call's time limit (the work
/// budget's), which `remaining` reads.
pub(crate) struct ClockView<'a> {
    pub(super) clock: &'a Clock,
    pub(super) limit: Option<TimeLimit>,
}

/// The `clock` import's host functions take a [`ClockView`] of the call.
pub(super) struct ClockHost;

impl wasmtime::component::HasData for ClockHost {
    type Data<'a> = ClockView<'a>;
}

impl Host for ClockView<'_> {
    fn now(&mut self) -> Timestamp {
        timestamp(self.clock.now())
    }

    fn monotonic(&mut self) -> u64 {
        self.clock.monotonic()
    }

    async fn sleep(&mut self, nanoseconds: u64) {
        self.clock.sleep(Duration::from_nanos(nanoseconds)).await
    }

    fn remaining(&mut self) -> u64 {
        let left = self.limit.map(|limit| self.clock.remaining(&limit));
        left.map_or(u64::MAX, |left| {
            u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_too_long_for_a_deadline_gives_a_far_deadline_not_a_panic() {
        // A manifest may ask for any duration humantime reads; the `manifest` fuzz target tries many.
        let manifest = crate::modules::Manifest::parse("[limits]\ntimeout = \"300000000000y\"\n")
            .expect("a long timeout is a valid manifest");
        for clock in [Clock::System, Clock::fixed(UNIX_EPOCH)] {
            let limit = clock.limit(manifest.limits.timeout);
            assert_eq!(limit.timeout, manifest.limits.timeout);
            let left = limit
                .deadline
                .saturating_duration_since(tokio::time::Instant::now());
            assert!(left > FAR_FUTURE - Duration::from_secs(60), "{left:?}");
        }
    }

    #[tokio::test]
    async fn virtual_time_moves_only_by_sleeping() {
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let clock = Clock::fixed(start);
        assert_eq!(clock.now(), start);
        clock.sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.now(), start + Duration::from_secs(90));
        assert_eq!(clock.monotonic(), 90_000_000_000);
    }

    #[tokio::test]
    async fn on_a_virtual_clock_a_call_s_remaining_time_shrinks_by_its_sleeps_only() {
        let clock = Clock::fixed(UNIX_EPOCH);
        clock.sleep(Duration::from_secs(5)).await; // before the call: not counted
        let limit = clock.limit(Duration::from_secs(120));
        assert_eq!(clock.remaining(&limit), Duration::from_secs(120));
        clock.sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.remaining(&limit), Duration::from_secs(30));
        clock.sleep(Duration::from_secs(60)).await;
        assert_eq!(clock.remaining(&limit), Duration::ZERO);
    }

    #[tokio::test]
    async fn on_the_system_clock_a_call_s_remaining_time_is_real() {
        let clock = Clock::System;
        let limit = clock.limit(Duration::from_secs(60));
        clock.sleep(Duration::from_millis(20)).await;
        let left = clock.remaining(&limit);
        assert!(left <= Duration::from_millis(59_980), "{left:?}");
        assert!(left > Duration::from_secs(50), "{left:?}");
    }

    #[tokio::test]
    async fn stepped_time_really_waits_but_reads_like_virtual_time() {
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let clock = Clock::stepped(start);
        let before = Instant::now();
        clock.sleep(Duration::from_millis(30)).await;
        assert!(before.elapsed() >= Duration::from_millis(30));
        assert_eq!(clock.now(), start + Duration::from_millis(30));
        assert_eq!(clock.monotonic(), 30_000_000);
    }
}
