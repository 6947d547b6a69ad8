//! The `http` capability: outbound requests to the hosts a module's grant lists, nothing else.
//!
//! A grant entry (`[grant] http` in the manifest) is one of:
//!
//! | entry | allows |
//! |---|---|
//! | `sts.amazonaws.com` | `https://sts.amazonaws.com` (port 443) |
//! | `*.blob.core.windows.net` | HTTPS on port 443 to any name ending in `.blob.core.windows.net` |
//! | `https://minio.internal:9443` | HTTPS to exactly that host and port |
//! | `http://127.0.0.1:8080` | plain HTTP to exactly that host and port (a loopback test server, an on-prem MinIO) |
//!
//! Plain HTTP is never implied: it needs an `http://` entry naming the port. Host names compare
//! without regard to case. Each request is capped ([`MAX_REQUEST_BODY`], the module's `http-response`
//! limit on the answer) and timed (`http-timeout`, never past the call's deadline). Redirects are not
//! followed. Logs name the module, method, host, status and sizes, never header values or bodies.
//!
//! Everything above is decided here; the [`Exchange`] itself goes to the `Backend<Exchange>` of the
//! host's services: the network (directly, or through the environment's proxy: [`crate::network`]), or a
//! recording or replay of it ([`transport`] says how exchanges are recorded). A request the capability
//! refuses never reaches the backend.

mod target;
pub(crate) mod transport;

use std::time::Duration;

use super::budget::WorkBudget;
use super::call_id::CallId;
use super::grants::ModuleCaps;
use crate::backend::Backend;
use crate::bindings::velero_wasm::plugin::http::{Error, Host, Request, Response};
use target::{target, Target};
pub(crate) use transport::{Answer, Exchange, ExchangeError, NetworkTransport};

/// How long before the call's deadline an outbound request is given up.
const DEADLINE_MARGIN: Duration = Duration::from_millis(50);

/// The largest request body a module may send.
pub(crate) const MAX_REQUEST_BODY: usize = 1 << 20;

const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"];

/// What the `http` capability sees of a call: who calls, the module's grant (its HTTP grant, whether
/// it is a shadow), where exchanges go, and the work budget it charges (and whose deadline it keeps).
pub(crate) struct HttpView<'a> {
    pub(super) call: &'a CallId,
    pub(super) caps: &'a ModuleCaps,
    pub(super) backend: &'a std::sync::Arc<dyn Backend<Exchange>>,
    pub(super) budget: &'a mut WorkBudget,
    /// The module's memory limit, which what the host holds of an answer must fit.
    pub(super) memory_limit: u64,
    /// The process's budget, which it is charged to while held.
    pub(super) memory_budget: &'static super::memory::MemoryBudget,
    /// The account of the call's last import, kept until its next one or the call's end (see
    /// `KubeView`'s).
    pub(super) last_answers: &'a mut Option<std::sync::Arc<super::memory::AnswerAccount>>,
}

/// The `http` import's host functions take an [`HttpView`] of the call.
pub(super) struct HttpHost;

impl wasmtime::component::HasData for HttpHost {
    type Data<'a> = HttpView<'a>;
}

impl HttpView<'_> {
    async fn send_request(&mut self, request: Request) -> Result<Response, Error> {
        let target = target(&request.url)?;
        let origin = target.origin();
        let method = self.check_request(&target, &origin, &request)?;
        let headers = sendable_headers(request.headers)?;
        let body_len = request.body.len();
        let grant = &self.caps.http;
        let timeout = self.request_timeout();
        let max_response = grant.max_response;
        let exchange = Exchange {
            method: method.clone(),
            url: request.url,
            headers,
            body: request.body,
            max_response,
            timeout,
        };
        let started = std::time::Instant::now();
        let answers = std::sync::Arc::new(super::memory::AnswerAccount::new(
            self.memory_limit,
            self.memory_budget,
        ));
        // The body stays held until the guest has it: until its next import or the call's end.
        *self.last_answers = Some(answers.clone());
        let outcome = crate::answer_charge::scope(answers, self.backend.call(exchange))
            .await
            .and_then(|answer| {
                // A replayed answer meets the module's limit of today, not the recorded run's.
                if answer.body.len() as u64 > max_response {
                    Err(transport::too_large(&origin, max_response))
                } else {
                    Ok(answer)
                }
            });
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match &outcome {
            Ok(answer) => tracing::debug!(
                module = &*self.call.module, action = self.call.action.as_str(), %method, %origin,
                status = answer.status, sent = body_len, received = answer.body.len(), elapsed_ms, "http request"
            ),
            Err(error) => tracing::debug!(
                module = &*self.call.module, action = self.call.action.as_str(), %method, %origin,
                elapsed_ms, "http request failed: {error}"
            ),
        }
        outcome.map(Response::from).map_err(Error::from)
    }

    /// Checks a request against the module's grant and the host's limits: its origin, its method (a
    /// shadow sends GET and HEAD only), its body's size. Returns the method, upper-cased.
    fn check_request(
        &self,
        target: &Target,
        origin: &str,
        request: &Request,
    ) -> Result<String, Error> {
        if !self
            .caps
            .http
            .allows(&target.scheme, &target.host, target.port)
        {
            let origin = crate::shown::shown(origin);
            super::call_id::warn_unless_shadow!(self.call, module = &*self.call.module, action = self.call.action.as_str(), %origin, "http request denied by the module's grant");
            crate::metrics::note_denied();
            return Err(Error::Denied(format!(
                "{origin} is not in the HTTP grant of module {} (manifest [grant] http)",
                self.call.module
            )));
        }
        let method = request.method.to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            return Err(Error::Invalid(format!(
                "method {:?} is not one of {}",
                request.method,
                METHODS.join(", ")
            )));
        }
        if self.caps.shadow && !matches!(method.as_str(), "GET" | "HEAD") {
            return Err(Error::Denied(format!(
                "module {} runs as a shadow, which may send GET and HEAD requests only, not {method}",
                self.call.module
            )));
        }
        if request.body.len() > MAX_REQUEST_BODY {
            return Err(Error::TooLarge(format!(
                "request body of {} bytes, over the limit of {MAX_REQUEST_BODY} bytes",
                request.body.len()
            )));
        }
        Ok(method)
    }

    /// The grant's timeout, ending a little before the call's deadline so that the module can still
    /// report the timeout.
    fn request_timeout(&self) -> Duration {
        let mut timeout = self.caps.http.timeout;
        if let Some(deadline) = self.budget.deadline() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            timeout = timeout.min(left.saturating_sub(DEADLINE_MARGIN));
        }
        timeout
    }
}

/// The guest's headers as sent: `Host` and `Content-Length` are the host's to write; a name or value
/// HTTP cannot carry is refused.
fn sendable_headers(guest: Vec<(String, String)>) -> Result<Vec<(String, String)>, Error> {
    let mut headers = Vec::with_capacity(guest.len());
    for (name, value) in guest {
        if name.eq_ignore_ascii_case("host") || name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        let valid_name = hyper::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Error::Invalid(format!("header name {name:?} is not valid")))?;
        hyper::header::HeaderValue::from_str(&value).map_err(|_| {
            Error::Invalid(format!("the value of header {valid_name} is not valid"))
        })?;
        headers.push((name, value));
    }
    Ok(headers)
}

impl From<Answer> for Response {
    fn from(answer: Answer) -> Response {
        Response {
            status: answer.status,
            headers: answer.headers,
            body: answer.body,
        }
    }
}

impl From<ExchangeError> for Error {
    fn from(e: ExchangeError) -> Error {
        match e {
            ExchangeError::Timeout(m) => Error::Timeout(m),
            ExchangeError::TooLarge(m) => Error::TooLarge(m),
            ExchangeError::Transport(m) => Error::Transport(m),
            ExchangeError::Invalid(m) => Error::Invalid(m),
        }
    }
}

impl Host for HttpView<'_> {
    async fn send(&mut self, request: Request) -> Result<Response, Error> {
        self.budget
            .charge()
            .map_err(|e| Error::Denied(e.to_string()))?;
        self.send_request(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::target::origin_of;
    use super::*;
    use crate::capabilities::grants::HttpGrant;
    use velero_wasm_grant::HostRule;

    fn grant(entries: &[&str]) -> HttpGrant {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        HttpGrant::new(&entries, 1 << 20, Duration::from_secs(1))
    }

    #[test]
    fn entries_allow_exactly_what_they_say() {
        let g = grant(&[
            "sts.amazonaws.com",
            "*.blob.core.windows.net",
            "http://127.0.0.1:8080",
            "https://minio.local:9443",
        ]);
        assert!(g.allows("https", "sts.amazonaws.com", 443));
        assert!(g.allows("https", "STS.amazonaws.com", 443));
        assert!(!g.allows("http", "sts.amazonaws.com", 80));
        assert!(!g.allows("https", "sts.amazonaws.com", 8443));
        assert!(!g.allows("https", "evil-sts.amazonaws.com", 443));
        assert!(g.allows("https", "acct.blob.core.windows.net", 443));
        assert!(!g.allows("https", "blob.core.windows.net", 443));
        assert!(!g.allows("https", "acct.blob.core.windows.net.evil.io", 443));
        assert!(g.allows("http", "127.0.0.1", 8080));
        assert!(!g.allows("http", "127.0.0.1", 8081));
        assert!(!g.allows("https", "127.0.0.1", 8080));
        assert!(g.allows("https", "minio.local", 9443));
        assert!(!g.allows("https", "minio.local", 443));
    }

    #[test]
    fn bad_entries_are_refused() {
        for bad in [
            "",
            "*",
            "*.com.",
            "ftp://x:1",
            "http://x:port",
            "a b",
            "*.*.io",
            "http://:80",
            "host/path",
        ] {
            assert!(HostRule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            HostRule::parse("http://Local").unwrap(),
            HostRule::Origin {
                scheme: "http".into(),
                host: "local".into(),
                port: 80
            }
        );
    }

    #[test]
    fn messages_show_the_origin_only() {
        assert_eq!(
            origin_of("https://u:p@acct.blob.core.windows.net/c/b?sig=secret"),
            "https://acct.blob.core.windows.net"
        );
        assert_eq!(origin_of("http://127.0.0.1:9/x"), "http://127.0.0.1:9");
    }
}
