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

use std::sync::OnceLock;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::CallState;
use crate::bindings::velero_wasm::plugin::http::{Error, Host, Request, Response};

/// How long before the call's deadline an outbound request is given up.
const DEADLINE_MARGIN: Duration = Duration::from_millis(50);

/// The largest request body a module may send.
pub const MAX_REQUEST_BODY: usize = 1 << 20;

/// One entry of a module's HTTP grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRule {
    /// HTTPS on port 443 to exactly this host.
    Exact(String),
    /// HTTPS on port 443 to any host ending in this suffix (which starts with `.`).
    Suffix(String),
    /// Exactly this scheme, host and port.
    Origin {
        /// `http` or `https`.
        scheme: String,
        /// Host name or IP literal, lower case.
        host: String,
        /// Port.
        port: u16,
    },
}

impl HostRule {
    /// Parses a grant entry; the error says what is wrong with it.
    pub fn parse(entry: &str) -> Result<HostRule, String> {
        let bad = |why: &str| {
            format!("{entry:?} {why}; expected a host name, *.suffix, or http(s)://host:port")
        };
        let valid_host = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
                && !h.starts_with('.')
                && !h.ends_with('.')
        };
        if let Some((scheme, rest)) = entry.split_once("://") {
            if !matches!(scheme, "http" | "https") {
                return Err(bad("has a scheme other than http or https"));
            }
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            let (host, port) = match rest.rsplit_once(':') {
                Some((host, port)) => (
                    host,
                    port.parse::<u16>()
                        .map_err(|_| bad("has an invalid port"))?,
                ),
                None => (rest, if scheme == "http" { 80 } else { 443 }),
            };
            if !valid_host(host) {
                return Err(bad("has an invalid host"));
            }
            return Ok(HostRule::Origin {
                scheme: scheme.to_string(),
                host: host.to_ascii_lowercase(),
                port,
            });
        }
        if let Some(suffix) = entry.strip_prefix("*.") {
            if !valid_host(suffix) || !suffix.contains('.') {
                return Err(bad("is not a valid wildcard"));
            }
            return Ok(HostRule::Suffix(format!(
                ".{}",
                suffix.to_ascii_lowercase()
            )));
        }
        if !valid_host(entry) {
            return Err(bad("is not a valid host name"));
        }
        Ok(HostRule::Exact(entry.to_ascii_lowercase()))
    }

    fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        match self {
            HostRule::Exact(h) => scheme == "https" && port == 443 && host == h,
            HostRule::Suffix(s) => {
                scheme == "https"
                    && port == 443
                    && host.len() > s.len()
                    && host.ends_with(s.as_str())
            }
            HostRule::Origin {
                scheme: s,
                host: h,
                port: p,
            } => scheme == s && host == h && port == *p,
        }
    }
}

/// A module's HTTP grant and limits.
#[derive(Debug, Clone, Default)]
pub struct HttpGrant {
    rules: Vec<HostRule>,
    /// Largest answer body, in bytes.
    pub max_response: u64,
    /// Time allowed for one exchange.
    pub timeout: Duration,
}

impl HttpGrant {
    /// The grant of a manifest's `[grant] http` entries (already validated at load; an invalid entry
    /// allows nothing) with its limits.
    pub fn new(entries: &[String], max_response: u64, timeout: Duration) -> HttpGrant {
        HttpGrant {
            rules: entries
                .iter()
                .filter_map(|e| HostRule::parse(e).ok())
                .collect(),
            max_response,
            timeout,
        }
    }

    /// Whether a request to `scheme://host:port` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        self.rules.iter().any(|r| r.allows(scheme, &host, port))
    }
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client every module's requests share (connection pool, TLS roots), built on first use. Roots
/// are the system's, or Mozilla's (webpki-roots) where the system has none.
fn client() -> &'static HttpsClient {
    static CLIENT: OnceLock<HttpsClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match builder.with_native_roots() {
            Ok(native) => native,
            Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
        };
        let connector = builder.https_or_http().enable_http1().build();
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector)
    })
}

/// The parts of a URL a grant is checked against.
struct Target {
    uri: hyper::Uri,
    scheme: String,
    host: String,
    port: u16,
}

fn target(url: &str) -> Result<Target, Error> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| Error::Invalid(format!("URL {}: {e}", origin_of(url))))?;
    let scheme = uri.scheme_str().unwrap_or("").to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") {
        return Err(Error::Invalid(format!(
            "URL {}: only http and https are supported",
            origin_of(url)
        )));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| Error::Invalid(format!("URL {}: no host", origin_of(url))))?;
    if authority.as_str().contains('@') {
        return Err(Error::Invalid(
            "URLs with user information are not allowed".into(),
        ));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = authority
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Ok(Target {
        uri,
        scheme,
        host,
        port,
    })
}

/// `scheme://host[:port]` of a URL, for messages: never its path or query (which may carry a signature).
fn origin_of(url: &str) -> String {
    let end = url.find("://").map(|i| i + 3).unwrap_or(0);
    let rest = &url[end..];
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..cut];
    let authority = authority
        .rsplit_once('@')
        .map(|(_, a)| a)
        .unwrap_or(authority);
    format!("{}{authority}", &url[..end])
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"];

impl CallState {
    async fn send_request(&mut self, request: Request) -> Result<Response, Error> {
        let target = target(&request.url)?;
        let origin = format!("{}://{}:{}", target.scheme, target.host, target.port);
        let grant = &self.caps.http;
        if !grant.allows(&target.scheme, &target.host, target.port) {
            tracing::warn!(module = &*self.call.module, action = self.call.action.as_str(), %origin, "http request denied by the module's grant");
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
        if request.body.len() > MAX_REQUEST_BODY {
            return Err(Error::TooLarge(format!(
                "request body of {} bytes, over the limit of {MAX_REQUEST_BODY} bytes",
                request.body.len()
            )));
        }
        let mut builder = hyper::Request::builder()
            .method(method.as_str())
            .uri(target.uri.clone());
        for (name, value) in &request.headers {
            if name.eq_ignore_ascii_case("host") || name.eq_ignore_ascii_case("content-length") {
                continue;
            }
            let name = hyper::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Invalid(format!("header name {name:?} is not valid")))?;
            let value = hyper::header::HeaderValue::from_str(value)
                .map_err(|_| Error::Invalid(format!("the value of header {name} is not valid")))?;
            builder = builder.header(name, value);
        }
        let body_len = request.body.len();
        let http_request = builder
            .body(Full::new(Bytes::from(request.body)))
            .map_err(|e| Error::Invalid(format!("request to {origin}: {e}")))?;

        let mut timeout = grant.timeout;
        if let Some(deadline) = self.deadline {
            // End a little before the call's deadline, so the module can still report the timeout.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            timeout = timeout.min(left.saturating_sub(DEADLINE_MARGIN));
        }
        let max_response = grant.max_response;
        let started = std::time::Instant::now();
        let exchange = async {
            let response = client()
                .request(http_request)
                .await
                .map_err(|e| Error::Transport(format!("{method} {origin}: {}", error_chain(&e))))?;
            let status = response.status().as_u16();
            if let Some(length) = response
                .headers()
                .get(hyper::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            {
                if length > max_response {
                    return Err(too_large(&origin, max_response));
                }
            }
            let headers: Vec<(String, String)> = response
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let limit = usize::try_from(max_response).unwrap_or(usize::MAX);
            let body = Limited::new(response.into_body(), limit)
                .collect()
                .await
                .map_err(|e| {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        too_large(&origin, max_response)
                    } else {
                        Error::Transport(format!("{method} {origin}: reading the answer: {e}"))
                    }
                })?;
            Ok(Response {
                status,
                headers,
                body: body.to_bytes().to_vec(),
            })
        };
        let outcome = match tokio::time::timeout(timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::Timeout(format!(
                "{method} {origin}: no complete answer within {}",
                humantime::format_duration(timeout)
            ))),
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match &outcome {
            Ok(response) => tracing::debug!(
                module = &*self.call.module, action = self.call.action.as_str(), %method, %origin,
                status = response.status, sent = body_len, received = response.body.len(), elapsed_ms, "http request"
            ),
            Err(error) => tracing::debug!(
                module = &*self.call.module, action = self.call.action.as_str(), %method, %origin,
                elapsed_ms, "http request failed: {error}"
            ),
        }
        outcome
    }
}

fn too_large(origin: &str, limit: u64) -> Error {
    Error::TooLarge(format!("the answer of {origin} is over the module's limit of {limit} bytes (manifest [limits] http-response)"))
}

/// An error and its sources, `: `-joined (hyper's own message alone says little).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

impl Host for CallState {
    async fn send(&mut self, request: Request) -> Result<Response, Error> {
        self.send_request(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
