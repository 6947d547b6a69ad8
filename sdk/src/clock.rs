//! Time from the host: [`Clock`] is the `clock` capability as a trait, [`HostClock`] the host's,
//! [`FakeClock`] a virtual clock for native unit tests that moves only when slept on and records the
//! sleeps. The free functions call the host directly.
//!
//! ```
//! use std::time::Duration;
//! use velero_wasm_sdk::clock::{Clock, FakeClock};
//!
//! /// Waits for something in steps of 5 s, but never past the call's deadline.
//! fn wait(clock: &dyn Clock, ready: impl Fn() -> bool) -> Result<(), String> {
//!     while !ready() {
//!         if clock.remaining() < Duration::from_secs(5) {
//!             return Err("not ready before the call's deadline".into());
//!         }
//!         clock.sleep(Duration::from_secs(5));
//!     }
//!     Ok(())
//! }
//!
//! let clock = FakeClock::at(1_778_241_600).with_limit(Duration::from_secs(12));
//! assert!(wait(&clock, || false).is_err());
//! assert_eq!(clock.sleeps(), [Duration::from_secs(5), Duration::from_secs(5)]);
//! assert_eq!(clock.now().to_rfc3339(), "2026-05-08T12:00:10Z");
//! ```

use std::cell::{Cell, RefCell};
use std::time::Duration;

use crate::Timestamp;

/// The `clock` capability, so that logic which waits or reads the time runs against a
/// [`FakeClock`] in native unit tests.
pub trait Clock {
    /// Wall-clock time (the host may fix it, as `velero-wasm run --now` does).
    fn now(&self) -> Timestamp;
    /// Time since an arbitrary point: only differences count.
    fn monotonic(&self) -> Duration;
    /// Waits; the call's deadline still applies.
    fn sleep(&self, duration: Duration);
    /// Time left before the host ends this call (the module's `limits.timeout`).
    fn remaining(&self) -> Duration;
}

/// The host's `clock` capability. Outside a wasm32 build (native unit tests) there is no host: it
/// reads the system clock, sleeps for real and has no deadline.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostClock;

impl Clock for HostClock {
    fn now(&self) -> Timestamp {
        now()
    }
    fn monotonic(&self) -> Duration {
        Duration::from_nanos(monotonic())
    }
    fn sleep(&self, duration: Duration) {
        sleep(duration)
    }
    fn remaining(&self) -> Duration {
        remaining()
    }
}

/// Virtual time for native unit tests: it starts where it is told, moves only by what is slept
/// (sleeps return at once), and records each sleep.
#[derive(Debug, Default)]
pub struct FakeClock {
    start: i64,
    slept: Cell<Duration>,
    sleeps: RefCell<Vec<Duration>>,
    limit: Cell<Option<Duration>>,
}

impl FakeClock {
    /// A clock that reads `seconds` since the Unix epoch until something sleeps.
    pub fn at(seconds: i64) -> FakeClock {
        FakeClock {
            start: seconds,
            ..FakeClock::default()
        }
    }

    /// Gives the call a time limit ([`Clock::remaining`] counts down from it; none by default).
    pub fn with_limit(self, limit: Duration) -> FakeClock {
        self.set_limit(limit);
        self
    }

    /// Sets the call's time limit.
    pub fn set_limit(&self, limit: Duration) {
        self.limit.set(Some(limit));
    }

    /// Time slept so far.
    pub fn slept(&self) -> Duration {
        self.slept.get()
    }

    /// Every sleep, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.borrow().clone()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        let slept = self.slept.get();
        Timestamp {
            seconds: self.start.saturating_add(slept.as_secs() as i64),
            nanoseconds: slept.subsec_nanos(),
        }
    }
    fn monotonic(&self) -> Duration {
        self.slept.get()
    }
    fn sleep(&self, duration: Duration) {
        self.slept.set(self.slept.get().saturating_add(duration));
        self.sleeps.borrow_mut().push(duration);
    }
    fn remaining(&self) -> Duration {
        self.limit.get().map_or(Duration::MAX, |limit| {
            limit.saturating_sub(self.slept.get())
        })
    }
}

/// The current wall-clock time.
pub fn now() -> Timestamp {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::clock::now();
    // Native unit tests: the system clock.
    #[cfg(not(target_arch = "wasm32"))]
    {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp {
            seconds: d.as_secs() as i64,
            nanoseconds: d.subsec_nanos(),
        }
    }
}

/// Nanoseconds since an arbitrary point.
pub fn monotonic() -> u64 {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::clock::monotonic();
    // Native unit tests: since the first call in this process.
    #[cfg(not(target_arch = "wasm32"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let elapsed = START.get_or_init(std::time::Instant::now).elapsed();
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Waits; the call's deadline still applies.
pub fn sleep(duration: Duration) {
    #[cfg(target_arch = "wasm32")]
    {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        crate::bindings::velero_wasm::plugin::clock::sleep(nanos)
    }
    #[cfg(not(target_arch = "wasm32"))]
    std::thread::sleep(duration)
}

/// Time left before the host ends this call (the module's `limits.timeout`): a long wait stops
/// before it, with its own message. Natively (no host, no deadline): [`Duration::MAX`].
pub fn remaining() -> Duration {
    #[cfg(target_arch = "wasm32")]
    return Duration::from_nanos(crate::bindings::velero_wasm::plugin::clock::remaining());
    #[cfg(not(target_arch = "wasm32"))]
    Duration::MAX
}

impl Timestamp {
    /// The time `seconds` after the Unix epoch.
    pub fn from_unix(seconds: i64) -> Timestamp {
        Timestamp {
            seconds,
            nanoseconds: 0,
        }
    }

    /// An RFC 3339 time as Kubernetes writes them (`2026-05-08T12:00:00Z`; a numeric offset and a
    /// fraction are accepted); `None` when it does not parse.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        crate::rfc3339::parse(text)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, as Kubernetes writes times (whole seconds).
    pub fn to_rfc3339(&self) -> String {
        crate::rfc3339::format(self.seconds)
    }
}
