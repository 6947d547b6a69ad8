//! The host's outbound HTTP clients, shared by every request it sends: one hyper client (connection
//! pool, TLS roots) and one more that tunnels HTTPS through the proxy of the environment
//! ([`super::proxy`]), built on first use.

use std::sync::OnceLock;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::proxy::{Proxy, ProxyRules};

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
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        let proxy = self
            .rules
            .route(request.uri())
            .map_err(|e| format!("{what}: {e}"))?;
        match proxy {
            None => self
                .direct
                .request(request)
                .await
                .map_err(|e| format!("{what}: {}", error_chain(&e))),
            Some(proxy) => {
                tracing::debug!(proxy = proxy.name(), "{what} through the proxy");
                self.through(&proxy).request(request).await.map_err(|e| {
                    format!(
                        "{what} (through the proxy {}): {}",
                        proxy.name(),
                        error_chain(&e)
                    )
                })
            }
        }
    }
}

/// Sends one request the way every outbound request of the host is sent (the same TLS roots, the
/// environment's proxy for HTTPS): the `http` capability's transport sends modules' requests with it,
/// and the OCI registry client its own, so that registries are reached exactly as modules reach their
/// hosts. The caller bounds the time and the answer; an error is its message, naming `what`.
pub async fn send(
    request: hyper::Request<Full<Bytes>>,
    what: &str,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    network().send(request, what).await
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
