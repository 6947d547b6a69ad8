//! How a client reaches a started plugin, as go-plugin's client does: the socket named in its
//! handshake line, and a gRPC channel over that Unix socket (h2c, authority "unused"). Shared by the
//! integration tests (`support::plugin`) and the benchmarks (`host/benches/plugin`, by `#[path]`).

use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// The socket of a go-plugin handshake line (`1|2|unix|/path/plugin.sock|grpc|`), if it names one.
pub fn socket_of_handshake(line: &str) -> Option<PathBuf> {
    line.trim_end().split('|').nth(3).map(PathBuf::from)
}

/// A gRPC channel over the plugin's Unix socket.
pub async fn connect(socket: &Path) -> Channel {
    let path = socket.to_path_buf();
    Endpoint::try_from("http://unused")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .unwrap()
}
