//! How the signing flows reach remote services: one request, one whole answer. The component sends
//! through the host's `http` capability; native tests use a fake.

/// One HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// Absolute URL.
    pub url: String,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

/// One HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body.
    pub body: Vec<u8>,
}

/// Sends requests. An `Err` is a failure to get an answer (denied, timeout, transport), not an error
/// status.
pub trait Transport {
    /// Sends one request and returns the whole answer.
    fn send(&self, request: Request) -> Result<Response, String>;
}

impl<F: Fn(Request) -> Result<Response, String>> Transport for F {
    fn send(&self, request: Request) -> Result<Response, String> {
        self(request)
    }
}

/// `application/x-www-form-urlencoded` body of sorted pairs.
pub fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
    crate::encode::sorted_query(pairs).into_bytes()
}
