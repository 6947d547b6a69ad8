//! A VM backup as Velero runs it against a real API server: the plugin binary is started as Velero
//! starts it, with the stock kubevirt module (in `mode = "upstream"`: kubevirt-velero-plugin's reads
//! and item set) and a kubeconfig naming a loopback API server that serves the KubeVirt fixture
//! cluster over HTTP (the test suite's server, tests/support/apiserver.rs). Each Execute of the running
//! VM `vm-fedora-web-01` reads the VMI, two PVCs, the virt-launcher pod and the backend PVCs, and
//! returns 15 additional items.
//!
//! Prints: Execute latency with one caller, items a second with 1 and 8 callers, start → handshake and
//! start → first answered call (warm compile cache), and the process's RSS as the items add up.
//! Asserts only that every answer is the expected one.
//!
//! `cargo bench -p velero-wasm --bench online`

// A benchmark stops at what it did not expect: the workspace's unwrap lints are for the host's code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../tests/support/apiserver.rs"]
mod apiserver;
mod plugin;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::plugin_lister_client::PluginListerClient;
use velero_wasm::plugin::proto::generated::{Empty, ExecuteRequest};

const ACTION: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
const ITEMS_PER_CALL: usize = 15;
const WARM_UP: usize = 200;
const CALLS: usize = 2000;
const STARTS: usize = 10;
const THROUGHPUT_FOR: Duration = Duration::from_secs(5);

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let fixtures = root.join("tests/fixtures/kubevirt");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("online-bench");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("state")).unwrap();
    let server = apiserver::ApiServer::start(&[&fixtures.join("cluster")]);
    server.write_kubeconfig(&work.join("kubeconfig"));
    let modules = plugin::upstream_kubevirt(root, &work);
    let item = std::fs::read(fixtures.join("cluster/vm-fedora-web-01.json")).unwrap();
    let backup = std::fs::read(fixtures.join("velero/backup-nightly.json")).unwrap();
    let env = plugin::Env {
        modules,
        state: work.join("state"),
        kubeconfig: work.join("kubeconfig"),
        home: work.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // The first start compiles the modules into the state directory; the timed ones map them.
    let (child, socket, _) = plugin::start(&env);
    runtime.block_on(async {
        first_answer(&socket).await;
        plugin::stop(child, &socket).await
    });
    let (mut handshakes, mut first_calls) = (Vec::new(), Vec::new());
    for _ in 0..STARTS {
        let started = Instant::now();
        let (child, socket, handshake) = plugin::start(&env);
        runtime.block_on(async {
            first_answer(&socket).await;
            first_calls.push(started.elapsed());
            plugin::stop(child, &socket).await
        });
        handshakes.push(handshake);
    }

    let (child, socket, _) = plugin::start(&env);
    let pid = child.id();
    let report = runtime.block_on(async {
        let channel = plugin::connect(&socket).await;
        let call = Call {
            client: BackupItemActionClient::new(channel),
            item: item.clone(),
            backup: backup.clone(),
        };
        for _ in 0..WARM_UP {
            call.execute().await;
        }
        let rss_warm = plugin::status_kib(pid, "VmRSS");
        let mut samples = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let started = Instant::now();
            call.execute().await;
            samples.push(started.elapsed());
        }
        samples.sort();
        let rss_after_calls = plugin::status_kib(pid, "VmRSS");
        let mut rates = Vec::new();
        for callers in [1, 8] {
            let until = Instant::now() + THROUGHPUT_FOR;
            let started = Instant::now();
            let tasks: Vec<_> = (0..callers)
                .map(|_| {
                    let call = call.clone();
                    tokio::spawn(async move {
                        let mut calls = 0usize;
                        while Instant::now() < until {
                            call.execute().await;
                            calls += 1;
                        }
                        calls
                    })
                })
                .collect();
            let mut calls = 0;
            for task in tasks {
                calls += task.await.unwrap();
            }
            let rate = (calls * ITEMS_PER_CALL) as f64 / started.elapsed().as_secs_f64();
            rates.push((callers, rate, calls));
        }
        Report {
            median: samples[CALLS / 2],
            p99: samples[CALLS * 99 / 100],
            rates,
            rss: [
                (WARM_UP, rss_warm),
                (WARM_UP + CALLS, rss_after_calls),
                (0, plugin::status_kib(pid, "VmRSS")),
            ],
        }
    });
    let total_calls = WARM_UP
        + CALLS
        + report
            .rates
            .iter()
            .map(|(_, _, calls)| calls)
            .sum::<usize>();
    runtime.block_on(plugin::stop(child, &socket));

    handshakes.sort();
    first_calls.sort();
    println!(
        "velero-wasm online benchmark: {ACTION} on vm-fedora-web-01 ({ITEMS_PER_CALL} items), kubevirt mode upstream,"
    );
    println!(
        "API server on loopback HTTP (5 reads per Execute); profile {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!();
    println!(
        "Execute, one caller, {CALLS} calls after {WARM_UP}: median {}, p99 {}",
        plugin::millis(report.median),
        plugin::millis(report.p99)
    );
    for (callers, rate, calls) in &report.rates {
        println!(
            "items/s, {callers} caller{} for {} s: {rate:.0} ({calls} calls)",
            if *callers == 1 { "" } else { "s" },
            THROUGHPUT_FOR.as_secs()
        );
    }
    println!(
        "start → handshake, {STARTS} starts (warm compile cache, stock modules + the upstream kubevirt): median {}, max {}",
        plugin::millis(handshakes[STARTS / 2]),
        plugin::millis(handshakes[STARTS - 1])
    );
    println!(
        "start → first answered call (ListPlugins), same starts: median {}, max {}",
        plugin::millis(first_calls[STARTS / 2]),
        plugin::millis(first_calls[STARTS - 1])
    );
    let [(warm, a), (timed, b), (_, c)] = report.rss;
    println!(
        "RSS: {} MiB after {} items, {} MiB after {}, {} MiB after {}",
        mib(a),
        warm * ITEMS_PER_CALL,
        mib(b),
        timed * ITEMS_PER_CALL,
        mib(c),
        total_calls * ITEMS_PER_CALL
    );
}

/// One Execute of the VM backup, as Velero sends it.
#[derive(Clone)]
struct Call {
    client: BackupItemActionClient<Channel>,
    item: Vec<u8>,
    backup: Vec<u8>,
}

impl Call {
    async fn execute(&self) {
        let request = ExecuteRequest {
            plugin: ACTION.into(),
            item: self.item.clone(),
            backup: self.backup.clone(),
        };
        let answer = self
            .client
            .clone()
            .execute(request)
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.additional_items.len(), ITEMS_PER_CALL);
    }
}

struct Report {
    median: Duration,
    p99: Duration,
    rates: Vec<(usize, f64, usize)>,
    rss: [(usize, u64); 3],
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// Connects and waits for ListPlugins, the first call Velero makes of a new plugin process.
async fn first_answer(socket: &Path) {
    let plugins = PluginListerClient::new(plugin::connect(socket).await)
        .list_plugins(Empty {})
        .await
        .unwrap()
        .into_inner()
        .plugins;
    assert!(plugins.iter().any(|p| p.name == ACTION));
}
