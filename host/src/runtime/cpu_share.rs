//! A call's CPU share: the processor time it may use, whatever its deadline. Shadow calls get one
//! (`VELERO_WASM_SHADOW_CPU`, docs/modules.md#s8): a shadow that spins stops once it has used its
//! share, not only at its deadline.
//!
//! The time is the thread's CPU clock read around every poll of the call's future ([`Metered`]): the
//! guest's code and the host's work for it (instantiation, capability calls, a nested signing call),
//! never another task's, on whichever thread polls it. The epoch callback, which interrupts a running
//! guest every [`EPOCH_TICK`](super::EPOCH_TICK), asks [`CpuShare::spent`] and stops the guest then.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// The CPU time one call may use, and what it used so far.
#[derive(Debug)]
pub(crate) struct CpuShare {
    share: Duration,
    meter: Mutex<Meter>,
}

#[derive(Debug, Default)]
struct Meter {
    /// CPU time of the polls that ended.
    used: Duration,
    /// The thread's CPU clock when the poll under way began.
    polling_since: Option<Duration>,
}

impl CpuShare {
    /// A call that may use `share` of CPU time.
    pub(crate) fn new(share: Duration) -> Arc<CpuShare> {
        Arc::new(CpuShare {
            share,
            meter: Mutex::new(Meter::default()),
        })
    }

    /// The share.
    pub(crate) fn share(&self) -> Duration {
        self.share
    }

    /// The CPU time used so far, the poll under way included.
    pub(crate) fn used(&self) -> Duration {
        let meter = self.meter();
        let current = meter
            .polling_since
            .map(|since| thread_cpu().saturating_sub(since))
            .unwrap_or_default();
        meter.used + current
    }

    /// Whether the call has used its share.
    pub(crate) fn spent(&self) -> bool {
        self.used() >= self.share
    }

    /// `future`, its CPU time counted against this share.
    pub(crate) fn metered<F: Future>(self: &Arc<Self>, future: F) -> Metered<F> {
        Metered {
            inner: Box::pin(future),
            share: self.clone(),
        }
    }

    fn meter(&self) -> std::sync::MutexGuard<'_, Meter> {
        self.meter.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A future whose polls are timed on the polling thread's CPU clock ([`CpuShare::metered`]).
pub(crate) struct Metered<F> {
    inner: Pin<Box<F>>,
    share: Arc<CpuShare>,
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let start = thread_cpu();
        self.share.meter().polling_since = Some(start);
        let poll = self.inner.as_mut().poll(cx);
        let spent = thread_cpu().saturating_sub(start);
        let mut meter = self.share.meter();
        meter.polling_since = None;
        meter.used += spent;
        poll
    }
}

/// The CPU time of the calling thread so far.
fn thread_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that burns CPU for `rounds` polls, yielding between them.
    struct Spin {
        rounds: u32,
    }

    impl Future for Spin {
        type Output = u64;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            self.rounds -= 1;
            if self.rounds == 0 {
                return Poll::Ready(x);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn only_the_metered_future_s_polls_are_counted() {
        let share = CpuShare::new(Duration::from_secs(3600));
        share.metered(Spin { rounds: 3 }).await;
        let after_metered = share.used();
        assert!(after_metered > Duration::ZERO);
        assert!(!share.spent());
        // Work outside the metered future is not the call's.
        Spin { rounds: 3 }.await;
        assert_eq!(share.used(), after_metered);
    }

    #[tokio::test]
    async fn a_share_is_spent_once_its_time_is_used() {
        let share = CpuShare::new(Duration::from_nanos(1));
        assert!(!share.spent());
        share.metered(Spin { rounds: 1 }).await;
        assert!(share.spent());
        assert_eq!(share.share(), Duration::from_nanos(1));
    }
}
