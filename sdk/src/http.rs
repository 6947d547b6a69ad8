//! Outbound HTTPS to the hosts the module's grant lists (`wit/http.wit`): [`Http`] is the capability
//! as a trait, [`HostHttp`] the host's, and [`FakeHttp`] canned answers by URL for native unit tests,
//! which records every request.
//!
//! ```
//! use velero_wasm_sdk::http::{FakeHttp, Http, Request};
//!
//! /// The body of a GET, or why there is none.
//! fn fetch(http: &dyn Http, url: &str) -> Result<Vec<u8>, String> {
//!     let request = Request { method: "GET".into(), url: url.into(), headers: vec![], body: vec![] };
//!     let response = http.send(&request).map_err(|e| e.message().to_string())?;
//!     match response.status {
//!         200 => Ok(response.body),
//!         status => Err(format!("{url} answered {status}")),
//!     }
//! }
//!
//! let http = FakeHttp::new()
//!     .answer("https://api.example.com/status", 200, b"green")
//!     .answer("https://api.example.com/", 404, b"");
//! assert_eq!(fetch(&http, "https://api.example.com/status").unwrap(), b"green");
//! assert!(fetch(&http, "https://api.example.com/other").unwrap_err().contains("404"));
//! assert!(fetch(&http, "https://elsewhere.example/").unwrap_err().contains("not granted"));
//! assert_eq!(http.requests().len(), 3);
//! ```

use std::cell::RefCell;

pub use crate::bindings::velero_wasm::plugin::http::{Error, Request, Response};

/// The `http` capability, so that logic calling a remote service runs against a [`FakeHttp`] in
/// native unit tests.
pub trait Http {
    /// Sends one request; an `Err` is a failure to get an answer (denied, timeout, too large,
    /// transport), not an error status.
    fn send(&self, request: &Request) -> Result<Response, Error>;
}

/// The host's `http` capability. Outside a wasm32 build (native unit tests) there is no host: every
/// request fails with [`Error::Transport`] saying so.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostHttp;

impl Http for HostHttp {
    fn send(&self, request: &Request) -> Result<Response, Error> {
        send(request)
    }
}

/// Canned answers by URL prefix for native unit tests: the first prefix given that a request's URL
/// starts with answers it; a URL no prefix matches is denied, as the host denies a host outside the
/// grant. Every request is recorded.
#[derive(Debug, Default)]
pub struct FakeHttp {
    answers: Vec<(String, Result<Response, Error>)>,
    requests: RefCell<Vec<Request>>,
}

impl FakeHttp {
    /// No answers: every request is denied.
    pub fn new() -> FakeHttp {
        FakeHttp::default()
    }

    /// Requests to URLs starting with `prefix` get `status` and `body`.
    pub fn answer(mut self, prefix: &str, status: u16, body: &[u8]) -> FakeHttp {
        let response = Response {
            status,
            headers: Vec::new(),
            body: body.to_vec(),
        };
        self.answers.push((prefix.to_string(), Ok(response)));
        self
    }

    /// Requests to URLs starting with `prefix` fail with `error` (a timeout, a transport error).
    pub fn fail(mut self, prefix: &str, error: Error) -> FakeHttp {
        self.answers.push((prefix.to_string(), Err(error)));
        self
    }

    /// Every request sent, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.borrow().clone()
    }
}

impl Http for FakeHttp {
    fn send(&self, request: &Request) -> Result<Response, Error> {
        self.requests.borrow_mut().push(request.clone());
        self.answers
            .iter()
            .find(|(prefix, _)| request.url.starts_with(prefix.as_str()))
            .map(|(_, answer)| answer.clone())
            .unwrap_or_else(|| {
                Err(Error::Denied(format!(
                    "{} {}: the host is not granted (no answer for it in this FakeHttp)",
                    request.method, request.url
                )))
            })
    }
}

impl Error {
    /// The message, without the variant.
    pub fn message(&self) -> &str {
        match self {
            Error::Denied(m)
            | Error::Timeout(m)
            | Error::TooLarge(m)
            | Error::Transport(m)
            | Error::Invalid(m) => m,
        }
    }
}

/// Sends one request through the host.
pub fn send(request: &Request) -> Result<Response, Error> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::http::send(request);
    #[cfg(not(target_arch = "wasm32"))]
    Err(Error::Transport(crate::no_host(&format!(
        "{} {}",
        request.method, request.url
    ))))
}
