//! How often requests may go to the API server: the client-side rate limit Velero may set
//! ([`RateLimit`], a [`TokenBucket`] in front of every request), and the waits a `429` or `503` asks
//! for ([`retry_after_of`]), never past the deadline of the call a request is made for
//! ([`CALL_DEADLINE`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cluster::vocabulary::KubeError;

/// The most times one request is sent again after `429 Too Many Requests` (client-go's limit).
pub(super) const MAX_RETRIES: u32 = 10;
/// How long a retried request waits when the server's answer names no `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// A retry must leave this much of the call's time, so the module can still act on the error.
const DEADLINE_MARGIN: Duration = Duration::from_millis(50);

tokio::task_local! {
    /// The deadline of the module call a Kubernetes request is made for (set by the capability around
    /// each backend call): waits for a `Retry-After` never go past it.
    pub(crate) static CALL_DEADLINE: tokio::time::Instant;
}

/// A client-side rate limit: `qps` requests a second, `burst` at once after an idle spell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RateLimit {
    /// Sustained requests per second.
    pub(crate) qps: f64,
    /// Requests allowed at once (at least 1).
    pub(crate) burst: u32,
}

impl RateLimit {
    /// `velero server`'s default `--client-qps`, used when only `--client-burst` is given.
    pub(crate) const VELERO_QPS: f64 = 20.0;
    /// `velero server`'s default `--client-burst`, used when only `--client-qps` is given.
    pub(crate) const VELERO_BURST: u32 = 30;

    /// The limit Velero's server runs with, from the values of its `--client-qps` and `--client-burst`
    /// (each optional): `None` when neither is given (no limit of our own) or the rate is not positive,
    /// as in client-go. A value that does not parse is an error naming the flag.
    pub(crate) fn from_flags(
        qps: Option<&str>,
        burst: Option<&str>,
    ) -> Result<Option<RateLimit>, BadFlag> {
        if qps.is_none() && burst.is_none() {
            return Ok(None);
        }
        let qps = match qps {
            None => Self::VELERO_QPS,
            Some(text) => text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|q| q.is_finite())
                .ok_or_else(|| BadFlag {
                    flag: "--client-qps",
                    value: text.to_string(),
                    expected: "a number",
                })?,
        };
        let burst = match burst {
            None => Self::VELERO_BURST,
            Some(text) => text
                .trim()
                .parse::<i64>()
                .map_err(|_| BadFlag {
                    flag: "--client-burst",
                    value: text.to_string(),
                    expected: "a whole number",
                })?
                .clamp(1, i64::from(u32::MAX)) as u32,
        };
        Ok((qps > 0.0).then_some(RateLimit { qps, burst }))
    }
}

/// A rate-limit flag of Velero's whose value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}={value:?} is not {expected}")]
pub(crate) struct BadFlag {
    /// The flag.
    pub(crate) flag: &'static str,
    /// Its value.
    pub(crate) value: String,
    /// What it should be.
    pub(crate) expected: &'static str,
}

/// Waits `wait` before sending a request again, or fails when that would end too close to (or past)
/// the call's deadline.
pub(super) async fn wait_to_retry(
    server: &str,
    method: &http::Method,
    uri: &http::Uri,
    status: http::StatusCode,
    wait: Duration,
) -> Result<(), KubeError> {
    let now = tokio::time::Instant::now();
    // Outside a module call (no deadline), a wait of more than a minute is not worth it either.
    let left = CALL_DEADLINE
        .try_with(|deadline| deadline.saturating_duration_since(now))
        .unwrap_or(Duration::from_secs(60));
    if wait.saturating_add(DEADLINE_MARGIN) > left {
        return Err(KubeError::Other(format!(
            "{method} {}{uri}: the API server answered {status} and asks to retry after {} s, \
             past the call's deadline ({} ms left); not retried",
            server,
            wait.as_secs(),
            left.as_millis()
        )));
    }
    tracing::debug!(%method, %uri, status = status.as_u16(), wait_ms = wait.as_millis() as u64,
        "the API server asks to retry later; waiting");
    tokio::time::sleep(wait).await;
    Ok(())
}

/// How long to wait before sending a request again: a `429` waits its `Retry-After` (in seconds;
/// [`DEFAULT_RETRY_AFTER`] when absent or not a number), a `503` only when it names one. Other answers
/// are not retried.
pub(super) fn retry_after_of<B>(response: &http::Response<B>) -> Option<Duration> {
    let named = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    match response.status() {
        http::StatusCode::TOO_MANY_REQUESTS => Some(named.unwrap_or(DEFAULT_RETRY_AFTER)),
        http::StatusCode::SERVICE_UNAVAILABLE => named,
        _ => None,
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up; each request takes one, waiting
/// for it when none is left. Shared by every module of the process.
pub(super) struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub(super) fn new(rate: f64, burst: f64) -> TokenBucket {
        TokenBucket {
            rate,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token at `now`; returns how long the caller must wait before using it.
    pub(crate) fn reserve(&self, now: Instant) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = *state;
        let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate)
            .min(self.burst);
        let left = refilled - 1.0;
        *state = (left, now.max(last));
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.rate)
        }
    }

    /// Waits for a token.
    pub(crate) async fn acquire(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            tracing::debug!(
                wait_ms = wait.as_millis() as u64,
                "kube client-side rate limit"
            );
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let bucket = TokenBucket::new(10.0, 3.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        // The fourth waits one interval, the fifth two: reservations queue up.
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
        assert_eq!(bucket.reserve(t0), Duration::from_millis(200));
        // After a long idle spell the bucket is full again, but never fuller than the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(later), Duration::ZERO);
        }
        assert!(bucket.reserve(later) > Duration::ZERO);
    }

    #[test]
    fn only_too_many_requests_and_unavailable_with_a_wait_are_retried() {
        let answer = |code: u16, retry_after: Option<&str>| {
            let mut response = http::Response::builder().status(code);
            if let Some(value) = retry_after {
                response = response.header("Retry-After", value);
            }
            retry_after_of(&response.body(()).unwrap())
        };
        assert_eq!(answer(429, Some("3")), Some(Duration::from_secs(3)));
        assert_eq!(answer(429, None), Some(DEFAULT_RETRY_AFTER));
        assert_eq!(answer(429, Some("soon")), Some(DEFAULT_RETRY_AFTER));
        assert_eq!(answer(503, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(answer(503, None), None);
        assert_eq!(answer(500, Some("2")), None);
        assert_eq!(answer(200, Some("2")), None);
    }
}
