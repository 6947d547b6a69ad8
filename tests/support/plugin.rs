//! A plugin process started the way Velero's plugin manager starts one (environment, arguments,
//! handshake on stdout), a gRPC channel to it over its Unix socket, and what it left when it stopped.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tonic::transport::Channel;
use velero_wasm::plugin::proto::generated::plugin_lister_client::PluginListerClient;
use velero_wasm::plugin::proto::generated::{self as g, PluginIdentifier};
use velero_wasm::plugin::proto::plugin::grpc_controller_client::GrpcControllerClient;
use velero_wasm::plugin::proto::plugin::{self as p};

pub use super::run::binary;

/// A running plugin process, started as Velero starts one.
pub struct Plugin {
    pub child: Running,
    pub handshake: String,
    pub socket: PathBuf,
    pub socket_dir: tempfile::TempDir,
    pub stdout: std::thread::JoinHandle<String>,
    pub stderr: Arc<Mutex<Vec<u8>>>,
    pub stderr_reader: std::thread::JoinHandle<()>,
}

/// What a finished process left.
pub struct Session {
    pub stdout_after_handshake: String,
    pub stderr: String,
    pub socket: PathBuf,
    pub socket_dir: tempfile::TempDir,
}

impl Session {
    /// Every stderr line, parsed, after checking it is what Velero's reader requires (docs/plugin-protocol.md#s13-2).
    pub fn log_lines(&self) -> Vec<serde_json::Map<String, Value>> {
        self.stderr
            .lines()
            .map(|line| {
                assert!(line.len() < 64 << 10, "a line under 64 KiB");
                let Ok(Value::Object(o)) = serde_json::from_str::<Value>(line) else {
                    panic!("not a JSON object: {line}")
                };
                assert!(o["@message"].is_string(), "{line}");
                assert!(
                    ["trace", "debug", "info", "warn", "error"]
                        .contains(&o["@level"].as_str().unwrap_or("")),
                    "{line}"
                );
                if let Some(t) = o.get("@timestamp") {
                    assert!(hclog_timestamp(t.as_str().unwrap_or("")), "{line}");
                }
                for key in ["namespace", "name", "resource"] {
                    assert!(o.get(key).is_none_or(Value::is_string), "{key} in {line}");
                }
                o
            })
            .collect()
    }
}

/// `2006-01-02T15:04:05.000000Z07:00`, as Velero's reader parses it.
pub fn hclog_timestamp(t: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd.ddddddZ";
    t.len() == shape.len()
        && t.bytes().zip(shape.bytes()).all(|(c, s)| {
            if s == b'd' {
                c.is_ascii_digit()
            } else {
                c == s
            }
        })
}

impl Plugin {
    /// Starts the binary with `argv[0]` = `arg0`, Velero's environment, `args`, and `env` (which may
    /// name a module directory in `VELERO_WASM_MODULES`).
    pub fn start_as(arg0: &str, args: &[&str], env: &[(&str, &str)]) -> Plugin {
        Plugin::start_with(arg0, args, env, |_| {})
    }

    /// The plugin as it runs in Velero's pod reading module ConfigMaps: against the cluster of
    /// `kubeconfig` (never an in-cluster one), its state in `state`, Velero in `namespace`, at info
    /// level, with `extra` variables besides.
    pub fn reading_configmaps(
        kubeconfig: &Path,
        state: &Path,
        namespace: &str,
        extra: &[(&str, &str)],
    ) -> Plugin {
        let mut env = vec![
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", state.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("VELERO_NAMESPACE", namespace),
        ];
        env.extend_from_slice(extra);
        Plugin::start_with(binary(), &["--log-level", "info"], &env, |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        })
    }

    /// Like [`Plugin::start_as`], with `adjust` applied to the command before it is spawned (a
    /// `pre_exec` that sets limits or the umask of the child, for instance).
    pub fn start_with(
        arg0: &str,
        args: &[&str],
        env: &[(&str, &str)],
        adjust: impl FnOnce(&mut Command),
    ) -> Plugin {
        let socket_dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(binary());
        super::run::hermetic(&mut command)
            .arg0(arg0)
            .args(args)
            .env("VELERO_PLUGIN", "hello")
            .env("PLUGIN_PROTOCOL_VERSIONS", "2")
            .env("PLUGIN_MIN_PORT", "10000")
            .env("PLUGIN_MAX_PORT", "25000")
            .env("PLUGIN_UNIX_SOCKET_DIR", socket_dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        adjust(&mut command);
        let mut child = command.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = {
            let (mut pipe, sink) = (child.stderr.take().unwrap(), stderr.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        let (line_tx, line_rx) = std::sync::mpsc::channel();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let stdout = std::thread::spawn(move || {
            let mut first = String::new();
            let _ = out.read_line(&mut first);
            let _ = line_tx.send(first);
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
            rest
        });
        let handshake = match line_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if !line.is_empty() => line.trim_end_matches('\n').to_string(),
            _ => panic!(
                "no handshake line; stderr: {}",
                String::from_utf8_lossy(&stderr.lock().unwrap())
            ),
        };
        let socket = super::plugin_socket::socket_of_handshake(&handshake)
            .unwrap_or_else(|| panic!("bad handshake {handshake:?}"));
        Plugin {
            child: Running(child),
            handshake,
            socket,
            socket_dir,
            stdout,
            stderr,
            stderr_reader,
        }
    }

    /// A connection over the socket, as go-plugin makes it (h2c, authority "unused").
    pub async fn channel(&self) -> Channel {
        super::plugin_socket::connect(&self.socket).await
    }

    /// ListPlugins' entries for the modules' actions: the slots, which every listing ends each
    /// family's kind with (docs/modules.md#s10), left out; [`Self::list_all`] has them.
    pub async fn list(&self) -> Vec<PluginIdentifier> {
        self.list_all()
            .await
            .into_iter()
            .filter(|p| velero_wasm::action::slot::slot_family(&p.name).is_none())
            .collect()
    }

    /// ListPlugins' whole answer, the slots included.
    pub async fn list_all(&self) -> Vec<PluginIdentifier> {
        PluginListerClient::new(self.channel().await)
            .list_plugins(g::Empty {})
            .await
            .unwrap()
            .into_inner()
            .plugins
    }

    /// ListPlugins as (kind, name) pairs.
    pub async fn listed(&self) -> std::collections::BTreeSet<(String, String)> {
        self.list()
            .await
            .into_iter()
            .map(|p| (p.kind, p.name))
            .collect()
    }

    /// Calls Shutdown, waits for the exit (status 0), and returns what the process left.
    pub async fn shutdown(self) -> Session {
        let (status, _, session) = self.shutdown_and_wait().await;
        assert_eq!(status.code(), Some(0), "{}", session.stderr);
        session
    }

    pub async fn shutdown_and_wait(mut self) -> (ExitStatus, Duration, Session) {
        let mut controller = GrpcControllerClient::new(self.channel().await);
        let asked = Instant::now();
        // Like Velero, ignore the answer: the server may go away before it arrives.
        let _ = controller.shutdown(p::Empty {}).await;
        drop(controller);
        let status = self
            .wait(Duration::from_secs(10))
            .expect("the plugin exits after Shutdown");
        let elapsed = asked.elapsed();
        self.stderr_reader.join().unwrap();
        let stderr = String::from_utf8(self.stderr.lock().unwrap().clone()).unwrap();
        let stdout_after_handshake = self.stdout.join().unwrap();
        (
            status,
            elapsed,
            Session {
                stdout_after_handshake,
                stderr,
                socket: self.socket,
                socket_dir: self.socket_dir,
            },
        )
    }

    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(status) = self.child.0.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.0.kill();
        None
    }
}

/// The child process, killed if a test ends without stopping it.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
