//! One request to the API server and its answer: the HTTP stack it goes through ([`Transport`]), the
//! rate limit and the retries before it, its answer read up to a cap ([`MAX_ANSWER_BYTES`],
//! [`MAX_ERROR_BYTES`]) and checked to be JSON, and the error an answer with a failing status is.

use http_body_util::BodyExt;
use tower::ServiceExt;

use super::throttle::{self, RateLimit, TokenBucket, MAX_RETRIES};
use crate::answer_charge::{self, AnswerBody};
use crate::cluster::json::Json;
use crate::cluster::vocabulary::KubeError;

/// The most bytes of one answer that is not a list page: an object, a write's result or a group
/// version's discovery. The API server keeps objects of at most about 1.5 MiB (etcd's request limit)
/// and the largest discovery documents are a few hundred KiB; anything longer is a broken or hostile
/// server, and reading it whole could exhaust the process.
pub const MAX_ANSWER_BYTES: u64 = 16 << 20;
/// The most bytes of an error answer's body that are read: a `Status` is a few hundred bytes, and of
/// any other text only the first KiB reaches the message.
pub const MAX_ERROR_BYTES: u64 = 64 << 10;

/// The HTTP stack requests go through: kube's base-URI, authentication (tokens, refreshed ones
/// included) and extra-header layers over a hyper connection pool with rustls (client certificates
/// and the cluster's CA are in its TLS configuration). `kube::Client` would add a request buffer (one
/// more task hand-off per request) and a tracing layer that logs every 5xx answer at error level, a
/// line Velero counts against the backup even when the request is retried and succeeds.
type Transport = tower::util::BoxCloneSyncService<
    http::Request<kube::client::Body>,
    http::Response<hyper::body::Incoming>,
    tower::BoxError,
>;

/// The API server one client sends its requests to: its HTTP stack, its URL and the client-side rate
/// limit (if any) in front of it.
pub(super) struct ApiServer {
    transport: Transport,
    /// The server's URL, for error messages.
    server: String,
    limiter: Option<TokenBucket>,
}

impl ApiServer {
    /// The API server `config` names, with no rate limit of our own. Nothing is sent yet.
    pub(super) fn new(config: &kube::Config) -> Result<ApiServer, kube::Error> {
        let server = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        Ok(ApiServer {
            transport: transport(config)?,
            server,
            limiter: None,
        })
    }

    /// Puts a client-side rate limit in front of every request (`None`: no limit of our own).
    pub(super) fn with_rate_limit(mut self, limit: Option<RateLimit>) -> ApiServer {
        self.limiter = limit.map(|l| TokenBucket::new(l.qps, f64::from(l.burst.max(1))));
        self
    }

    /// Sends one request, after the rate limit (if any) allows it, and reads a JSON answer. A `429`
    /// (or `503`) with `Retry-After` is sent again after that wait, unless the wait would end past the
    /// call's deadline.
    pub(super) async fn send(&self, request: http::Request<Vec<u8>>) -> Result<Json, KubeError> {
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let bytes = self
            .send_capped(request, MAX_ANSWER_BYTES)
            .await?
            .ok_or_else(|| {
                KubeError::Other(format!(
                    "{method} {}{uri}: the API server's answer is longer than {} MiB; it was not read further",
                    self.server,
                    MAX_ANSWER_BYTES >> 20
                ))
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Json::null());
        }
        // The text parsed out of the body is a copy, held until the guest has it (the body is freed
        // once it is made).
        answer_charge::hold(bytes.len()).map_err(|refused| {
            KubeError::TooLarge(format!("{method} {}{uri}: {refused}", self.server))
        })?;
        Json::parse(&bytes).map_err(|e| {
            KubeError::Other(format!(
                "{method} {}{uri}: the API server's answer is not JSON: {e}",
                self.server
            ))
        })
    }

    /// Like [`send`](Self::send), reading at most `max` bytes of the answer: `None` when it is longer.
    /// Returns the answer as it came. An error's body is read up to [`MAX_ERROR_BYTES`] at most.
    pub(super) async fn send_capped(
        &self,
        request: http::Request<Vec<u8>>,
        max: u64,
    ) -> Result<Option<AnswerBody>, KubeError> {
        let (parts, body) = request.into_parts();
        let (method, uri) = (&parts.method, &parts.uri);
        let mut retries = 0;
        loop {
            if let Some(limiter) = &self.limiter {
                limiter.acquire().await;
            }
            tracing::debug!(%method, %uri, "kube request");
            let mut request = http::Request::new(kube::client::Body::from(body.clone()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = uri.clone();
            *request.headers_mut() = parts.headers.clone();
            let response = self.transport.clone().oneshot(request).await.map_err(|e| {
                KubeError::Other(format!("{method} {}{uri}: {}", self.server, chain(&*e)))
            })?;
            let status = response.status();
            if let Some(wait) = throttle::retry_after_of(&response) {
                if retries < MAX_RETRIES {
                    retries += 1;
                    throttle::wait_to_retry(&self.server, method, uri, status, wait).await?;
                    continue;
                }
            }
            let (head, mut incoming) = response.into_parts();
            let failed = head.status.is_client_error() || head.status.is_server_error();
            let max = if failed {
                max.min(MAX_ERROR_BYTES)
            } else {
                max
            };
            // Read frame by frame, so that an answer past `max` is never held whole; the buffer is
            // charged as it grows, to the account of the guest's import it is read for (if any).
            let mut bytes = AnswerBody::new();
            let mut complete = true;
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| {
                    KubeError::Other(format!(
                        "{method} {}{uri}: reading the answer: {e}",
                        self.server
                    ))
                })?;
                if let Ok(data) = frame.into_data() {
                    if (bytes.len() + data.len()) as u64 > max {
                        complete = false;
                        break;
                    }
                    if let Err(refused) = bytes.extend(&data) {
                        return Err(KubeError::TooLarge(format!(
                            "{method} {}{uri}: {refused}",
                            self.server
                        )));
                    }
                }
            }
            if failed {
                return Err(answer_error(
                    method,
                    &self.server,
                    uri,
                    head.status,
                    &bytes,
                    retries,
                ));
            }
            return Ok(complete.then_some(bytes));
        }
    }
}

/// The HTTP stack of `config` (see [`Transport`]). Connections have `TCP_NODELAY` and the
/// configuration's connect timeout; a request is bounded by its call's deadline.
fn transport(config: &kube::Config) -> Result<Transport, kube::Error> {
    use kube::client::ConfigExt;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let connector = config.rustls_https_connector_with_connector(http)?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(client);
    Ok(Transport::new(service))
}

/// An error and its causes, `: `-separated (hyper's own message alone says little).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Makes rustls use *ring* unless the process already chose a provider: with both *ring* and aws-lc-rs
/// compiled in (another dependency may bring the latter), rustls cannot pick one by itself.
pub(super) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing one is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The WIT error of an HTTP status code.
fn by_code(code: u16, message: String) -> KubeError {
    match code {
        404 => KubeError::NotFound(message),
        409 => KubeError::Conflict(message),
        401 | 403 => KubeError::Forbidden(message),
        400 | 422 => KubeError::Invalid(message),
        _ => KubeError::Other(message),
    }
}

/// The error of an answer with a 4xx/5xx status: the message of its `Status` body, else its text.
fn answer_error(
    method: &http::Method,
    server: &str,
    uri: &http::Uri,
    code: http::StatusCode,
    body: &[u8],
    retries: u32,
) -> KubeError {
    let from_status = serde_json::from_slice::<kube::core::Status>(body)
        .ok()
        .map(|s| s.message)
        .filter(|m| !m.is_empty());
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let mut message = match from_status {
        Some(message) => message,
        None if !text.is_empty() && text.len() <= 1024 => {
            format!("{method} {server}{uri}: HTTP {code}: {text}")
        }
        None => format!("{method} {server}{uri}: HTTP {code}"),
    };
    if retries > 0 {
        message.push_str(&format!(" (after {retries} retries)"));
    }
    by_code(code.as_u16(), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_wit_errors() {
        let err = |code: u16| {
            let status = kube::core::Status::failure("boom", "Reason").with_code(code);
            answer_error(
                &http::Method::GET,
                "https://k8s",
                &http::Uri::from_static("/x"),
                http::StatusCode::from_u16(code).unwrap(),
                &serde_json::to_vec(&status).unwrap(),
                0,
            )
        };
        assert_eq!(err(404), KubeError::NotFound("boom".into()));
        assert_eq!(err(409), KubeError::Conflict("boom".into()));
        assert_eq!(err(401), KubeError::Forbidden("boom".into()));
        assert_eq!(err(403), KubeError::Forbidden("boom".into()));
        assert_eq!(err(400), KubeError::Invalid("boom".into()));
        assert_eq!(err(422), KubeError::Invalid("boom".into()));
        assert_eq!(err(500), KubeError::Other("boom".into()));
        assert_eq!(err(429), KubeError::Other("boom".into()));
        // An answer that is no Status keeps its text, and the request it answered.
        let plain = answer_error(
            &http::Method::GET,
            "https://k8s",
            &http::Uri::from_static("/x"),
            http::StatusCode::BAD_GATEWAY,
            b"upstream down\n",
            2,
        );
        assert_eq!(
            plain,
            KubeError::Other(
                "GET https://k8s/x: HTTP 502 Bad Gateway: upstream down (after 2 retries)".into()
            )
        );
    }
}
