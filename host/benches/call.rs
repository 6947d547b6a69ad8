//! What one wasm call costs: `make bench` prints median and p99 of
//!
//! - instantiate + call: the served path (`Runtime::backup`: fresh store and instance, call, checks),
//! - a call on a reused instance (what a fresh instance per item costs, by difference),
//! - the same JSON work in native Rust (parse a 4 KiB item, set a label, serialize),
//!
//! measured in one run on this machine, with their ratios.

// A benchmark stops at what it did not expect: the workspace's unwrap lints are for the host's code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::Digest;
use velero_wasm::action::{BackupRequest, ItemRef};
use velero_wasm::modules::scan_directory;
use velero_wasm::runtime::Runtime;
use velero_wasm::NoCluster;
use velero_wasm::{Clock, Services};

const ACTION: &str = "test.velero-wasm.io/label";
const WARMUP: usize = 300;
const SAMPLES: usize = 3000;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

/// A Pod-like item of about 4 KiB.
fn item() -> String {
    let mut annotations = serde_json::Map::new();
    let mut n = 0;
    let mut object = json!({});
    while object.to_string().len() < 4096 {
        annotations.insert(
            format!("example.io/annotation-{n}"),
            Value::String("x".repeat(40)),
        );
        n += 1;
        object = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "shop", "uid": "6f1c2b9e-8a7d-4c1f-9e2b-1a2b3c4d5e6f",
                         "labels": {"app": "web", "tier": "frontend"}, "annotations": annotations},
            "spec": {"containers": [{"name": "web", "image": "registry.example.io/web:1.2.3",
                     "ports": [{"containerPort": 8080}], "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}]},
            "status": {"phase": "Running"}
        });
    }
    object.to_string()
}

fn native(item: &str) -> String {
    let mut value: Value = serde_json::from_str(item).expect("json");
    value["metadata"]["labels"]["velero-wasm.io/seen"] = Value::String("true".into());
    value.to_string()
}

async fn runtime() -> (Runtime, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let wasm = std::fs::read(format!(
        "{}/misbehave.wasm",
        env!("VELERO_WASM_TEST_COMPONENTS")
    ))
    .expect("component");
    let sha: String = sha2::Sha256::digest(&wasm)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(dir.path().join("bench.wasm"), &wasm).expect("write");
    std::fs::write(
        dir.path().join("bench.toml"),
        format!("sha256 = \"{sha}\"\n"),
    )
    .expect("write");
    let runtime = Runtime::new(Services::new(
        Arc::new(NoCluster::default()),
        Clock::System,
        velero_wasm::Environment::from_config(&velero_wasm::config::Config::from_env()),
    ))
    .expect("runtime");
    let errors = runtime
        .load_all(scan_directory(dir.path(), None).expect("scan").modules)
        .await;
    assert!(errors.is_empty(), "{errors:?}");
    (runtime, dir)
}

struct Stats {
    median: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    Stats {
        median: samples[samples.len() / 2],
        p99: samples[samples.len() * 99 / 100],
    }
}

async fn run() {
    let item = item();
    let request = BackupRequest {
        item: item.clone(),
        backup: r#"{"metadata":{"name":"nightly","namespace":"velero"}}"#.into(),
    };
    let expected = native(&item);

    let (runtime, _dir) = runtime().await;
    let entry = runtime.resolve(ACTION).expect("the action is loaded");
    let id = ItemRef::parse(&request.item).expect("the item is an object");
    let mut fresh = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let start = Instant::now();
        let outcome = runtime
            .backup(&entry, id.clone(), request.clone())
            .await
            .expect("call");
        let elapsed = start.elapsed();
        assert_eq!(
            outcome.item, expected,
            "wasm and native must do the same work"
        );
        if i >= WARMUP {
            fresh.push(elapsed);
        }
    }

    let mut warm = runtime.warm_instance(ACTION).await.expect("instance");
    let mut reused = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let start = Instant::now();
        let out = warm.backup(&request).await.expect("call");
        let elapsed = start.elapsed();
        assert_eq!(out, expected);
        if i >= WARMUP {
            reused.push(elapsed);
        }
    }

    let mut natives = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let start = Instant::now();
        let out = std::hint::black_box(native(std::hint::black_box(&item)));
        let elapsed = start.elapsed();
        assert_eq!(out, expected);
        if i >= WARMUP {
            natives.push(elapsed);
        }
    }

    let (fresh, reused, natives) = (stats(fresh), stats(reused), stats(natives));
    let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    let ratio = |d: Duration| format!("{:.1}×", d.as_secs_f64() / natives.median.as_secs_f64());
    println!();
    println!(
        "velero-wasm call benchmark: {}-byte item, {SAMPLES} calls each after {WARMUP} warm-up calls",
        item.len()
    );
    println!(
        "machine: {}, {} cores",
        cpu_model(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    println!();
    println!(
        "{:<40} {:>10} {:>10} {:>12}",
        "", "median", "p99", "vs native"
    );
    for (name, s) in [
        ("instantiate + call (every served call)", &fresh),
        ("call on a reused instance", &reused),
        ("native Rust, same JSON work", &natives),
    ] {
        println!(
            "{name:<40} {:>10} {:>10} {:>12}",
            us(s.median),
            us(s.p99),
            ratio(s.median)
        );
    }
    println!();
    println!(
        "wasm overhead per served call (median, instantiate + call − native): {}   target ≤ 30 µs",
        us(fresh.median.saturating_sub(natives.median))
    );
    println!(
        "fresh instance per call costs (median, instantiate + call − reused): {}",
        us(fresh.median.saturating_sub(reused.median))
    );
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
