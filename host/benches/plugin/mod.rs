//! What the benchmarks share to drive the plugin as Velero does: the handshake line, a channel over
//! its socket (both as the integration tests reach the plugin: `tests/support/plugin_socket.rs`), a
//! clean stop, and the figures read from /proc.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use velero_wasm::plugin::proto::plugin::grpc_controller_client::GrpcControllerClient;

#[path = "../../../tests/support/plugin_socket.rs"]
mod plugin_socket;
pub use plugin_socket::connect;

/// Reads the go-plugin handshake line from a started plugin's stdout; its socket.
pub fn socket_of(child: &mut Child) -> PathBuf {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    plugin_socket::socket_of_handshake(&line).expect("a handshake line")
}

/// Asks the plugin to shut down, as Velero does, and waits for it.
pub async fn stop(mut child: Child, socket: &Path) {
    let _ = GrpcControllerClient::new(connect(socket).await)
        .shutdown(velero_wasm::plugin::proto::plugin::Empty {})
        .await;
    let _ = child.wait();
}

/// A duration in milliseconds, two decimals.
#[allow(dead_code)]
pub fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A field of /proc/PID/status in KiB (`VmRSS`, `VmHWM`), 0 where /proc cannot tell.
#[allow(dead_code)]
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The stock kubevirt component with its manifest set to `mode = "upstream"`, replacing the stock one.
#[allow(dead_code)]
pub fn upstream_kubevirt(root: &Path, work: &Path) -> PathBuf {
    let dir = work.join("modules");
    std::fs::create_dir_all(&dir).unwrap();
    let wasm = std::fs::read(Path::new(env!("VELERO_WASM_TEST_COMPONENTS")).join("kubevirt.wasm"))
        .unwrap();
    let stock = std::fs::read_to_string(root.join("actions/kubevirt/kubevirt.toml")).unwrap();
    assert!(stock.contains("mode = \"extended\""));
    let manifest = format!(
        "sha256 = \"{}\"\n{}",
        velero_wasm::modules::sha256_hex(&wasm),
        stock.replace("mode = \"extended\"", "mode = \"upstream\"")
    );
    std::fs::write(dir.join("kubevirt.wasm"), &wasm).unwrap();
    std::fs::write(dir.join("kubevirt.toml"), manifest).unwrap();
    dir
}

/// Where a benchmark's plugin finds its modules, state, cluster and home.
#[allow(dead_code)]
pub struct Env {
    pub modules: PathBuf,
    pub state: PathBuf,
    pub kubeconfig: PathBuf,
    pub home: PathBuf,
}

/// Starts the plugin as Velero does; returns it, its socket and the time to the handshake line.
/// Read views are off: every Execute here repeats one VM of one backup, which a read view would
/// answer without a request, and these rows measure the reads themselves (read views: `--bench scale`).
#[allow(dead_code)]
pub fn start(env: &Env) -> (Child, PathBuf, Duration) {
    start_binary(Path::new(env!("CARGO_BIN_EXE_velero-wasm")), env, false)
}

/// [`start`] of another build of the plugin (a baseline to compare with, side by side), with read
/// views on (as Velero runs it) or off.
#[allow(dead_code)]
pub fn start_binary(binary: &Path, env: &Env, views: bool) -> (Child, PathBuf, Duration) {
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(["--log-level=info", "--features=EnableCSI"])
        .env("VELERO_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "2")
        .env("VELERO_WASM_MODULES", &env.modules)
        .env("VELERO_WASM_STATE_DIR", &env.state)
        .env("VELERO_WASM_READ_VIEWS", if views { "on" } else { "off" })
        .env("KUBECONFIG", &env.kubeconfig)
        .env("HOME", &env.home)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = socket_of(&mut child);
    let elapsed = started.elapsed();
    (child, socket, elapsed)
}
