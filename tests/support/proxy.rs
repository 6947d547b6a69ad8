// Shared by several test binaries; each uses a part of it.
#![allow(dead_code)]

//! A forward proxy for tests, as a corporate proxy behaves for HTTPS: it answers `CONNECT host:port`
//! and then relays bytes. Every name it is asked for leads to one loopback port (the proxy does the
//! name resolution, so the client never needs to resolve `sts.proxied.test`). It records each CONNECT
//! and can demand credentials.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One CONNECT request as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// `host:port` asked for.
    pub authority: String,
    /// The `Proxy-Authorization` header, if sent.
    pub authorization: Option<String>,
}

/// A running proxy; it stops accepting when dropped.
pub struct ConnectProxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Connect>>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl ConnectProxy {
    /// A proxy that tunnels every CONNECT to `upstream`; with `required`, only requests whose
    /// `Proxy-Authorization` equals it (others get 407).
    pub async fn start(upstream: SocketAddr, required: Option<&str>) -> ConnectProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let required = required.map(str::to_string);
        let accepting = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let (log, required) = (log.clone(), required.clone());
                tokio::spawn(async move {
                    let _ = tunnel(client, upstream, log, required).await;
                });
            }
        });
        ConnectProxy {
            addr,
            seen,
            accepting,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every CONNECT so far.
    pub fn connects(&self) -> Vec<Connect> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn tunnel(
    mut client: tokio::net::TcpStream,
    upstream: SocketAddr,
    log: Arc<Mutex<Vec<Connect>>>,
    required: Option<String>,
) -> std::io::Result<()> {
    // The request head, up to the blank line (a CONNECT has no body).
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if client.read(&mut byte).await? == 0 || head.len() > 16 * 1024 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let authority = match request_line.split(' ').collect::<Vec<_>>()[..] {
        ["CONNECT", authority, _] => authority.to_string(),
        _ => {
            client
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                .await?;
            return Ok(());
        }
    };
    let authorization = lines.find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim().to_string())
    });
    log.lock().unwrap().push(Connect {
        authority,
        authorization: authorization.clone(),
    });
    if required.is_some() && authorization != required {
        client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm=\"test\"\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    }
    let mut server = tokio::net::TcpStream::connect(upstream).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}
