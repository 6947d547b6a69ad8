//! Where the `http` capability's checked requests go: an [`HttpTransport`]. The capability decides
//! what may be sent (grant, method, headers, sizes, the time allowed); a transport only exchanges it:
//! over the network ([`NetworkTransport`], directly or through the environment's proxy), or through a
//! recording or a replay ([`super::record`]).

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::origin;
use super::proxy::{Proxy, ProxyRules};

/// One request, as the capability has checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// Upper-case method, one the capability allows.
    pub method: String,
    /// The absolute URL, as the module gave it; its origin is granted.
    pub url: String,
    /// Valid header names and values, in the module's order; never `host` or `content-length`.
    pub headers: Vec<(String, String)>,
    /// Request body, within the capability's cap.
    pub body: Vec<u8>,
    /// The largest answer body to accept.
    pub max_response: u64,
    /// How long the whole exchange may take.
    pub timeout: Duration,
}

/// The answer, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status code.
    pub status: u16,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

/// Why an exchange brought no answer (the WIT `error` variants a transport can give).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    /// No complete answer within the time allowed.
    #[error("{0}")]
    Timeout(String),
    /// The answer is larger than allowed.
    #[error("{0}")]
    TooLarge(String),
    /// Connection, TLS or protocol failure.
    #[error("{0}")]
    Transport(String),
    /// The request could not be built.
    #[error("{0}")]
    Invalid(String),
}

/// Sends checked requests and brings their answers back.
#[async_trait]
pub trait HttpTransport: Send + Sync {
    /// Exchanges one request for its answer, within `exchange`'s limits.
    async fn exchange(&self, exchange: Exchange) -> Result<Answer, ExchangeError>;
}

/// The network: one hyper client for every module (connection pool, TLS roots), and one more that
/// tunnels HTTPS through the proxy of the environment ([`super::proxy`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct NetworkTransport;

type Direct = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;
type Tunneled = Client<hyper_rustls::HttpsConnector<Tunnel<HttpConnector>>, Full<Bytes>>;

/// The clients every module's requests share, built on first use.
struct Network {
    rules: ProxyRules,
    direct: Direct,
    /// Through the proxy (the environment names one for HTTPS), built when first needed.
    tunneled: OnceLock<Tunneled>,
}

fn network() -> &'static Network {
    static NETWORK: OnceLock<Network> = OnceLock::new();
    NETWORK.get_or_init(|| {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        Network {
            rules: ProxyRules::from_env(),
            direct: client(tls().https_or_http().enable_http1().wrap_connector(http)),
            tunneled: OnceLock::new(),
        }
    })
}

/// TLS with the system's roots (`SSL_CERT_FILE`/`SSL_CERT_DIR` replace them, as for OpenSSL), or
/// Mozilla's (webpki-roots) where the system has none.
fn tls() -> hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsSchemes> {
    match hyper_rustls::HttpsConnectorBuilder::new().with_native_roots() {
        Ok(native) => native,
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
    }
}

fn client<C>(connector: C) -> Client<C, Full<Bytes>>
where
    C: hyper_util::client::legacy::connect::Connect + Clone,
{
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

impl Network {
    /// The client through `proxy`.
    fn through(&self, proxy: &Proxy) -> &Tunneled {
        self.tunneled.get_or_init(|| {
            let mut tunnel = Tunnel::new(proxy.origin.clone(), HttpConnector::new());
            if let Some(authorization) = &proxy.authorization {
                tunnel = tunnel.with_auth(authorization.clone());
            }
            client(tls().https_only().enable_http1().wrap_connector(tunnel))
        })
    }

    /// Sends `request` directly or through the proxy its URL goes through.
    async fn send(
        &self,
        request: hyper::Request<Full<Bytes>>,
        what: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ExchangeError> {
        let proxy = self
            .rules
            .route(request.uri())
            .map_err(|e| ExchangeError::Transport(format!("{what}: {e}")))?;
        match proxy {
            None => self
                .direct
                .request(request)
                .await
                .map_err(|e| ExchangeError::Transport(format!("{what}: {}", error_chain(&e)))),
            Some(proxy) => {
                tracing::debug!(proxy = proxy.name(), "{what} through the proxy");
                self.through(&proxy).request(request).await.map_err(|e| {
                    ExchangeError::Transport(format!(
                        "{what} (through the proxy {}): {}",
                        proxy.name(),
                        error_chain(&e)
                    ))
                })
            }
        }
    }
}

/// The error of an answer over `limit` bytes.
pub(super) fn too_large(origin: &str, limit: u64) -> ExchangeError {
    ExchangeError::TooLarge(format!("the answer of {origin} is over the module's limit of {limit} bytes (manifest [limits] http-response)"))
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

#[async_trait]
impl HttpTransport for NetworkTransport {
    async fn exchange(&self, exchange: Exchange) -> Result<Answer, ExchangeError> {
        let origin = origin(&exchange.url);
        let Exchange {
            method,
            url,
            headers,
            body,
            max_response,
            timeout,
        } = exchange;
        let mut builder = hyper::Request::builder()
            .method(method.as_str())
            .uri(url.as_str());
        for (name, value) in &headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ExchangeError::Invalid(format!("request to {origin}: {e}")))?;
        let exchange = async {
            let response = network()
                .send(request, &format!("{method} {origin}"))
                .await?;
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
                        ExchangeError::Transport(format!(
                            "{method} {origin}: reading the answer: {e}"
                        ))
                    }
                })?;
            Ok(Answer {
                status,
                headers,
                body: body.to_bytes().to_vec(),
            })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ExchangeError::Timeout(format!(
                "{method} {origin}: no complete answer within {}",
                humantime::format_duration(timeout)
            ))),
        }
    }
}
