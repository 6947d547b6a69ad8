//! A VM backup as Velero runs it against a real API server: the plugin binary is started as Velero
//! starts it, with the stock kubevirt module (in `mode = "upstream"`: kubevirt-velero-plugin's reads
//! and item set) and a kubeconfig naming a loopback API server that serves the KubeVirt fixture
//! cluster over HTTP (the test suite's server, tests/support/apiserver.rs). Each Execute of the running
//! VM `vm-fedora-web-01` reads the VMI, two PVCs, the virt-launcher pod and the backend PVCs, and
//! returns 16 additional items (the Multus NetworkAttachmentDefinition among them).
//!
//! Prints: Execute latency with one caller, items a second with 1 and 8 callers, start → handshake and
//! start → first answered call (warm compile cache), and the process's RSS as the items add up. Then,
//! with read views on as Velero runs the plugin and the API server answering after 0 and 2 ms: a VM
//! in a backup of its own (a new backup per Execute: every read goes to the API server) and the first
//! Execute after a start (process start → handshake → first Execute answered), with the API
//! requests each sent and when they arrived. `ONLINE_BASELINE=<a velero-wasm binary>` runs the
//! first-Execute rows for that build too, start by start alternating with this one;
//! `ONLINE_ROWS=fresh` prints only the read-views rows (a few minutes less).
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
const ITEMS_PER_CALL: usize = 16;
const WARM_UP: usize = 200;
const CALLS: usize = 2000;
const STARTS: usize = 10;
const THROUGHPUT_FOR: Duration = Duration::from_secs(5);
/// Timed Executes of the "a new backup per Execute" rows, after [`FRESH_WARM_UP`].
const FRESH_CALLS: usize = 300;
const FRESH_WARM_UP: usize = 30;
/// Timed starts of the "first Execute after a start" rows, per build and latency.
const FIRST_STARTS: usize = 30;
/// The API latencies of the rows with read views on: loopback, and a cluster's.
const LATENCIES_MS: [u64; 2] = [0, 2];

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
    if std::env::var("ONLINE_ROWS").is_ok_and(|rows| rows == "fresh") {
        let fresh = fresh_rows(&runtime, &server, &env, &work, &item, &backup);
        print_header();
        print_fresh_rows(&fresh);
        return;
    }

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
    let fresh = fresh_rows(&runtime, &server, &env, &work, &item, &backup);

    handshakes.sort();
    first_calls.sort();
    print_header();
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
    println!();
    print_fresh_rows(&fresh);
}

/// What was run, and how the binary was built.
fn print_header() {
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
}

/// A build of the plugin to run: its name in the table and its binary.
struct Build {
    name: &'static str,
    binary: PathBuf,
    env: plugin::Env,
}

/// The rows with read views on, at each latency: a new backup per Execute, and the first Execute
/// after a start of each build.
struct FreshRows {
    latency: Duration,
    /// Sorted times of one Execute, each in a backup of its own.
    per_execute: Vec<Duration>,
    /// What the API server received for one such Execute: each request and its arrival after the first.
    one_execute: Vec<(Duration, String)>,
    /// Per build: sorted start → handshake, sorted start → first Execute answered.
    first: Vec<(&'static str, Vec<Duration>, Vec<Duration>)>,
    /// What the API server received from start to the first Execute answered, for this build's last start.
    first_requests: Vec<(Duration, String)>,
}

fn fresh_rows(
    runtime: &tokio::runtime::Runtime,
    server: &apiserver::ApiServer,
    env: &plugin::Env,
    work: &Path,
    item: &[u8],
    backup: &[u8],
) -> Vec<FreshRows> {
    let mut builds = vec![Build {
        name: "this build",
        binary: PathBuf::from(env!("CARGO_BIN_EXE_velero-wasm")),
        env: plugin::Env {
            modules: env.modules.clone(),
            state: env.state.clone(),
            kubeconfig: env.kubeconfig.clone(),
            home: env.home.clone(),
        },
    }];
    if let Some(baseline) = std::env::var_os("ONLINE_BASELINE") {
        let state = work.join("state-baseline");
        std::fs::create_dir_all(&state).unwrap();
        builds.push(Build {
            name: "baseline",
            binary: PathBuf::from(baseline),
            env: plugin::Env {
                modules: env.modules.clone(),
                state,
                kubeconfig: env.kubeconfig.clone(),
                home: env.home.clone(),
            },
        });
    }
    let backup: serde_json::Value = serde_json::from_slice(backup).unwrap();
    let mut uid = 0u64;
    let mut fresh_backup = move || {
        uid += 1;
        let mut b = backup.clone();
        b["metadata"]["uid"] = format!("bench-fresh-{uid}").into();
        serde_json::to_vec(&b).unwrap()
    };
    // Each build compiles its modules into its state directory once, before anything is timed.
    for build in &builds {
        let (child, socket, _) = plugin::start_binary(&build.binary, &build.env, true);
        runtime.block_on(async {
            first_answer(&socket).await;
            plugin::stop(child, &socket).await
        });
    }
    let mut rows = Vec::new();
    for latency in LATENCIES_MS.map(Duration::from_millis) {
        server.set_latency(latency);
        let (child, socket, _) = plugin::start_binary(&builds[0].binary, &builds[0].env, true);
        let (per_execute, one_execute) = runtime.block_on(async {
            let call = Call {
                client: BackupItemActionClient::new(plugin::connect(&socket).await),
                item: item.to_vec(),
                backup: Vec::new(),
            };
            for _ in 0..FRESH_WARM_UP {
                call.with_backup(fresh_backup()).execute().await;
            }
            let mut samples = Vec::with_capacity(FRESH_CALLS);
            for _ in 0..FRESH_CALLS {
                let call = call.with_backup(fresh_backup());
                let started = Instant::now();
                call.execute().await;
                samples.push(started.elapsed());
            }
            samples.sort();
            server.clear_requests();
            call.with_backup(fresh_backup()).execute().await;
            let one = arrivals(server);
            plugin::stop(child, &socket).await;
            (samples, one)
        });
        let mut first: Vec<_> = builds
            .iter()
            .map(|b| (b.name, Vec::new(), Vec::new()))
            .collect();
        let mut first_requests = Vec::new();
        for _ in 0..FIRST_STARTS {
            for (build, (_, handshakes, answered)) in builds.iter().zip(first.iter_mut()) {
                server.clear_requests();
                let backup = fresh_backup();
                let started = Instant::now();
                let (child, socket, handshake) =
                    plugin::start_binary(&build.binary, &build.env, true);
                runtime.block_on(async {
                    let call = Call {
                        client: BackupItemActionClient::new(plugin::connect(&socket).await),
                        item: item.to_vec(),
                        backup,
                    };
                    call.execute().await;
                    answered.push(started.elapsed());
                    if std::ptr::eq(build, &builds[0]) {
                        first_requests = arrivals(server);
                    }
                    plugin::stop(child, &socket).await
                });
                handshakes.push(handshake);
            }
        }
        for (_, handshakes, answered) in &mut first {
            handshakes.sort();
            answered.sort();
        }
        rows.push(FreshRows {
            latency,
            per_execute,
            one_execute,
            first,
            first_requests,
        });
    }
    server.set_latency(Duration::ZERO);
    rows
}

/// The requests the API server received since it last forgot them: when each arrived after the first.
fn arrivals(server: &apiserver::ApiServer) -> Vec<(Duration, String)> {
    let requests = server.requests();
    let Some(first) = requests.iter().map(|r| r.at).min() else {
        return Vec::new();
    };
    requests
        .iter()
        .map(|r| (r.at - first, format!("{} {}", r.method, r.path)))
        .collect()
}

fn print_fresh_rows(rows: &[FreshRows]) {
    println!(
        "Read views on (as Velero runs the plugin); the API server answers each request after the latency given"
    );
    println!(
        "{:<52} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "row", "latency", "median", "p90", "p99", "max"
    );
    for row in rows {
        let ms = row.latency.as_millis();
        let n = row.per_execute.len();
        println!(
            "{:<52} {:>5} ms {:>10} {:>10} {:>10} {:>10}",
            format!("a new backup per Execute ({FRESH_CALLS} Executes)"),
            ms,
            plugin::millis(row.per_execute[n / 2]),
            plugin::millis(row.per_execute[n * 9 / 10]),
            plugin::millis(row.per_execute[n * 99 / 100]),
            plugin::millis(row.per_execute[n - 1]),
        );
        for (name, handshakes, answered) in &row.first {
            let n = answered.len();
            println!(
                "{:<52} {:>5} ms {:>10} {:>10} {:>10} {:>10}",
                format!("first Execute after a start, {name} ({n} starts)"),
                ms,
                plugin::millis(answered[n / 2]),
                plugin::millis(answered[n * 9 / 10]),
                plugin::millis(answered[n * 99 / 100]),
                plugin::millis(answered[n - 1]),
            );
            println!(
                "{:<52} {:>5} ms {:>10} {:>10} {:>10} {:>10}",
                format!("  of which start → handshake, {name}"),
                ms,
                plugin::millis(handshakes[n / 2]),
                plugin::millis(handshakes[n * 9 / 10]),
                plugin::millis(handshakes[n * 99 / 100]),
                plugin::millis(handshakes[n - 1]),
            );
        }
    }
    for row in rows {
        let ms = row.latency.as_millis();
        let shown = |requests: &[(Duration, String)]| {
            requests
                .iter()
                .map(|(at, what)| format!("+{:.1} {what}", at.as_secs_f64() * 1000.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "at {ms} ms, one Execute in a new backup sent {} requests (ms after the first): {}",
            row.one_execute.len(),
            shown(&row.one_execute)
        );
        println!(
            "at {ms} ms, a start to its first Execute answered sent {} requests: {}",
            row.first_requests.len(),
            shown(&row.first_requests)
        );
    }
}

/// One Execute of the VM backup, as Velero sends it.
#[derive(Clone)]
struct Call {
    client: BackupItemActionClient<Channel>,
    item: Vec<u8>,
    backup: Vec<u8>,
}

impl Call {
    /// The same Execute for another Backup (its JSON).
    fn with_backup(&self, backup: Vec<u8>) -> Call {
        Call {
            client: self.client.clone(),
            item: self.item.clone(),
            backup,
        }
    }

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
