//! What the plugin protocol costs: the binary is started as Velero starts it, and calls are timed over
//! its Unix socket — an empty gRPC round trip (health check), AppliesTo (gRPC and the action registry,
//! no wasm) and Execute (gRPC and one wasm call on a 4 KiB item). Also the time from exec to the
//! handshake line. Prints a table; asserts nothing.
//!
//! `cargo bench -p velero-wasm --bench grpc`

// A benchmark stops at what it did not expect: the workspace's unwrap lints are for the host's code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod plugin;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::{BackupItemActionAppliesToRequest, ExecuteRequest};

const WARM_UP: usize = 200;
const CALLS: usize = 2000;
const STARTS: usize = 5;

fn main() {
    let modules = modules_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let (child, socket, elapsed) = start(&modules);
        starts.push(elapsed);
        runtime.block_on(plugin::stop(child, &socket));
    }

    let (child, socket, _) = start(&modules);
    let item = configmap(4096);
    let rows = runtime.block_on(async {
        let channel = plugin::connect(&socket).await;
        let health = HealthClient::new(channel.clone());
        let bia = BackupItemActionClient::new(channel.clone());
        let action = "test.velero-wasm.io/backup-v1".to_string();
        let empty = time(|| {
            let mut health = health.clone();
            async move {
                health
                    .check(HealthCheckRequest {
                        service: "plugin".into(),
                    })
                    .await
                    .unwrap();
            }
        })
        .await;
        let applies_to = time(|| {
            let (mut bia, plugin) = (bia.clone(), action.clone());
            async move {
                bia.applies_to(BackupItemActionAppliesToRequest { plugin })
                    .await
                    .unwrap();
            }
        })
        .await;
        let execute = time(|| {
            let (mut bia, plugin, item) = (bia.clone(), action.clone(), item.clone());
            async move {
                let request = ExecuteRequest {
                    plugin,
                    item,
                    backup: backup(),
                };
                let answer = bia.execute(request).await.unwrap().into_inner();
                assert_eq!(answer.item.len(), 4096);
            }
        })
        .await;
        vec![
            ("empty round trip (health check)", empty),
            ("AppliesTo (registry, no wasm)", applies_to),
            ("Execute (wasm, 4 KiB item)", execute),
        ]
    });
    runtime.block_on(plugin::stop(child, &socket));

    starts.sort();
    println!("velero-wasm gRPC benchmark: {CALLS} calls each after {WARM_UP} warm-up calls, one connection, one at a time");
    println!(
        "profile: {}\n",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!(
        "{:<36} {:>10} {:>10} {:>12}",
        "", "median", "p99", "vs empty"
    );
    let base = rows[0].1.median;
    for (name, t) in &rows {
        println!(
            "{name:<36} {:>10} {:>10} {:>11.1}×",
            micros(t.median),
            micros(t.p99),
            t.median.as_secs_f64() / base.as_secs_f64()
        );
    }
    println!(
        "\nwasm Execute over gRPC − empty round trip (median): {}",
        micros(rows[2].1.median.saturating_sub(base))
    );
    println!(
        "start-up, exec to handshake line, {STARTS} starts with the test module: median {:.1} ms, max {:.1} ms",
        starts[STARTS / 2].as_secs_f64() * 1000.0,
        starts[STARTS - 1].as_secs_f64() * 1000.0
    );
}

struct Timing {
    median: Duration,
    p99: Duration,
}

async fn time<F, Fut>(mut call: F) -> Timing
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARM_UP {
        call().await;
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        call().await;
        samples.push(started.elapsed());
    }
    samples.sort();
    Timing {
        median: samples[CALLS / 2],
        p99: samples[CALLS * 99 / 100],
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// The `kinds` test component with a manifest, in a directory of its own.
fn modules_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("grpc-bench-modules");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let wasm =
        std::fs::read(Path::new(env!("VELERO_WASM_TEST_COMPONENTS")).join("kinds.wasm")).unwrap();
    std::fs::write(dir.join("kinds.wasm"), &wasm).unwrap();
    let manifest = format!("sha256 = \"{}\"\n", velero_wasm::modules::sha256_hex(&wasm));
    std::fs::write(dir.join("kinds.toml"), manifest).unwrap();
    dir
}

/// Starts the plugin as Velero does; returns it, its socket and the time to the handshake line.
fn start(modules: &Path) -> (Child, PathBuf, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_velero-wasm"))
        .args(["--log-level", "error"])
        .env("VELERO_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "2")
        .env("VELERO_WASM_MODULES", modules)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let socket = plugin::socket_of(&mut child);
    let elapsed = started.elapsed();
    (child, socket, elapsed)
}

/// A ConfigMap of exactly `size` bytes of JSON.
fn configmap(size: usize) -> Vec<u8> {
    let head = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"shop"},"data":{"k":""#;
    let tail = r#""}}"#;
    let mut json = head.to_string();
    json.push_str(&"x".repeat(size - head.len() - tail.len()));
    json.push_str(tail);
    json.into_bytes()
}

fn backup() -> Vec<u8> {
    br#"{"metadata":{"name":"nightly","namespace":"velero"},"spec":{},"status":{"phase":"InProgress"}}"#.to_vec()
}
