// Shared by several test binaries; each uses a part of it.
#![allow(dead_code)]

//! A loopback HTTP (or HTTPS) server for tests: answers each request with what the test's handler says
//! (status, body, an optional delay) and records every request it received.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// Path and query.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The body as sent (for binary bodies such as protobuf).
    pub bytes: Vec<u8>,
}

impl Received {
    /// The value of a header (names compare without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What to answer.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }
}

type Handler = dyn Fn(&Received) -> Reply + Send + Sync;

/// Answers the requests of one connection with `handler`, recording them in `log`.
async fn serve<IO>(stream: IO, handler: Arc<Handler>, log: Arc<Mutex<Vec<Received>>>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let (handler, log) = (handler.clone(), log.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let seen = Received {
                method: parts.method.to_string(),
                target: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                headers: parts
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.to_string(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect(),
                body: String::from_utf8_lossy(&body).into_owned(),
                bytes: body.to_vec(),
            };
            let reply = handler(&seen);
            log.lock().unwrap().push(seen);
            tokio::time::sleep(reply.delay).await;
            let response = hyper::Response::builder()
                .status(reply.status)
                .body(Full::new(Bytes::from(reply.body)))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The test CA every HTTPS loopback server's certificate chains to (for `SSL_CERT_FILE`).
pub fn test_ca() -> std::path::PathBuf {
    super::root().join("tests/fixtures/tls/ca.pem")
}

fn test_tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = super::root().join("tests/fixtures/tls");
    let certs = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// A running server; it stops accepting connections when dropped (or when the test's runtime ends).
pub struct Loopback {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Loopback {
    /// Starts a server on 127.0.0.1 with a random port.
    pub async fn start(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Loopback {
        Loopback::listen(handler, None).await
    }

    /// Starts an HTTPS server on 127.0.0.1 with a random port, presenting the test certificate of
    /// `tests/fixtures/tls` (for `sts.proxied.test` and `localhost`, signed by its `ca.pem`).
    pub async fn start_tls(
        handler: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Loopback {
        Loopback::listen(handler, Some(test_tls_acceptor())).await
    }

    async fn listen(
        handler: impl Fn(&Received) -> Reply + Send + Sync + 'static,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Loopback {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = received.clone();
        let accepting = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (handler, log, tls) = (handler.clone(), log.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve(stream, handler, log).await,
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                serve(stream, handler, log).await
                            }
                        }
                    }
                });
            }
        });
        Loopback {
            addr,
            received,
            accepting,
        }
    }

    /// `http://127.0.0.1:<port>` (for a server of [`Loopback::start`]).
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        // The listener lives in the accepting task: aborting it closes the port.
        self.accepting.abort();
    }
}
