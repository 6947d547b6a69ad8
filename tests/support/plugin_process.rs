//! The `velero-wasm` binary started as Velero's plugin manager starts it (the cookie, a socket
//! directory, the process's environment), a gRPC channel to its socket, and a clean Shutdown. For
//! tests that need a plugin process per step, as Velero starts one per reconcile.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};
use velero_wasm::plugin::proto::plugin::grpc_controller_client::GrpcControllerClient;
use velero_wasm::plugin::proto::plugin::Empty;

/// A running plugin process; killed if dropped without [`PluginProcess::shutdown`].
pub struct PluginProcess {
    child: Child,
    socket: PathBuf,
    _socket_dir: tempfile::TempDir,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl PluginProcess {
    /// Starts the binary with Velero's environment plus `env`, and waits for its handshake.
    pub fn start(env: &[(&str, &str)]) -> PluginProcess {
        let socket_dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_velero-wasm"));
        command
            .args(["--log-level", "debug"])
            .env("VELERO_PLUGIN", "hello")
            .env("PLUGIN_PROTOCOL_VERSIONS", "2")
            .env("PLUGIN_UNIX_SOCKET_DIR", socket_dir.path())
            .env_remove("VELERO_WASM_MODULES")
            .env_remove("VELERO_WASM_KINDS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("start velero-wasm");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        {
            let (mut pipe, sink) = (child.stderr.take().unwrap(), stderr.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
        let (line_tx, line_rx) = std::sync::mpsc::channel();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = out.read_line(&mut first);
            let _ = line_tx.send(first);
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        let handshake = match line_rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if !line.is_empty() => line.trim_end().to_string(),
            _ => panic!(
                "no handshake; stderr: {}",
                String::from_utf8_lossy(&stderr.lock().unwrap())
            ),
        };
        let socket = PathBuf::from(handshake.split('|').nth(3).expect("a socket path"));
        PluginProcess {
            child,
            socket,
            _socket_dir: socket_dir,
            stderr,
        }
    }

    /// A connection to the socket, as go-plugin makes it.
    pub async fn channel(&self) -> Channel {
        let path = self.socket.clone();
        Endpoint::try_from("http://unused")
            .unwrap()
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
            }))
            .await
            .unwrap()
    }

    /// Shutdown, as Velero ends a plugin; returns the process's stderr.
    pub async fn shutdown(mut self) -> String {
        let _ = GrpcControllerClient::new(self.channel().await)
            .shutdown(Empty {})
            .await;
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
