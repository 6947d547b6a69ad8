//! One backup of many VMs, as Velero runs it: the plugin binary started as Velero starts it, with the
//! stock kubevirt module in `mode = "upstream"`, against the test suite's loopback API server
//! (tests/support/apiserver.rs) serving a generated cluster and answering every request after an
//! injected latency, as a real API server a few milliseconds away does.
//!
//! The cluster: `SCALE_VMS` running VMs (default 1000) spread over `SCALE_NAMESPACES` namespaces
//! (default 4), each a copy of the fixture VM `fedora-web-01` with its VMI, launcher and hotplug pods,
//! DataVolume and PVCs, backend-storage PVC, ControllerRevisions and Secrets. The latency is
//! `SCALE_LATENCY_MS` (default 2).
//!
//! For read views (docs/read-views.md) off and on, each with `kube.read-all` batches sent at once or
//! one read after another (`VELERO_WASM_READ_BATCH=off`), with 1 and 8 concurrent callers, each row a
//! fresh plugin process and a backup of its own, every VM is sent once as `Execute`. Prints per row:
//! total time, items/s, API requests sent, Execute p50/p99, peak RSS and the load average at its end;
//! then the machine. Checks that every VM's answer is the same in every row (the only assertion).
//!
//! `cargo bench -p velero-wasm --bench scale`

// A benchmark stops at what it did not expect: the workspace's unwrap lints are for the host's code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../tests/support/apiserver.rs"]
mod apiserver;
mod plugin;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::{ExecuteRequest, ExecuteResponse};

const ACTION: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
/// The fixture VM each generated VM is a copy of.
const TEMPLATE_VM: &str = "fedora-web-01";
const TEMPLATE_NAMESPACE: &str = "vm-workloads";
/// The fixture files of the template VM's objects (besides those naming it, two PVCs it mounts).
const SHARED_PVCS: [&str; 2] = ["web-content", "web-logs"];

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let vms = setting("SCALE_VMS", 1000);
    let namespaces = setting("SCALE_NAMESPACES", 4).max(1);
    let latency = Duration::from_millis(setting("SCALE_LATENCY_MS", 2) as u64);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let fixtures = root.join("tests/fixtures/kubevirt");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scale-bench");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("state")).unwrap();
    let generated = generate(
        &fixtures.join("cluster"),
        &work.join("cluster"),
        vms,
        namespaces,
    );
    let server = apiserver::ApiServer::start(&[&work.join("cluster")]);
    server.write_kubeconfig(&work.join("kubeconfig"));
    let modules = plugin::upstream_kubevirt(root, &work);
    let backup_template: Value = serde_json::from_slice(
        &std::fs::read(fixtures.join("velero/backup-nightly.json")).unwrap(),
    )
    .unwrap();
    let env = Env {
        modules,
        state: work.join("state"),
        kubeconfig: work.join("kubeconfig"),
        home: work.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // A first start compiles the modules into the state directory; the measured ones map them.
    let (child, socket) = start(&env, true, true);
    runtime.block_on(plugin::stop(child, &socket));
    server.set_latency(latency);

    let mut rows = Vec::new();
    let mut reference: Option<Vec<ExecuteResponse>> = None;
    for (views, batching) in [(false, false), (false, true), (true, false), (true, true)] {
        let label = format!(
            "{} | {}",
            if views { "on" } else { "off" },
            if batching { "on" } else { "off" }
        );
        for callers in [1usize, 8] {
            let mut backup = backup_template.clone();
            backup["metadata"]["uid"] = Value::from(format!("scale-{views}-{batching}-{callers}"));
            backup["spec"]["includedNamespaces"] = (0..namespaces).map(namespace).collect();
            let backup = serde_json::to_vec(&backup).unwrap();
            let (child, socket) = start(&env, views, batching);
            let pid = child.id();
            server.clear_requests();
            let row = runtime.block_on(run_backup(&socket, &generated, &backup, callers));
            let requests = server.requests().len();
            let peak = plugin::status_kib(pid, "VmHWM");
            let load = load_average();
            runtime.block_on(plugin::stop(child, &socket));
            match &reference {
                None => reference = Some(row.answers.clone()),
                Some(expected) => {
                    for (i, (a, b)) in expected.iter().zip(&row.answers).enumerate() {
                        assert!(
                            a == b,
                            "VM {} answers differently with read views | batching {label} and {callers} callers:\n{a:?}\n{b:?}",
                            generated[i].0
                        );
                    }
                }
            }
            rows.push(Row {
                label: label.clone(),
                callers,
                total: row.total,
                items: row.items,
                requests,
                samples: row.samples,
                peak,
                load,
            });
        }
    }

    println!(
        "velero-wasm scale benchmark: {ACTION}, one backup of {vms} running VMs in {namespaces} namespaces \
         (kubevirt mode upstream; each VM a copy of {TEMPLATE_VM})"
    );
    println!(
        "loopback API server answering after {} ms; plugin over gRPC, a fresh process per row; profile {}",
        latency.as_millis(),
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    println!();
    println!(
        "| read views | batching | callers | total | items/s | API requests | requests/VM | Execute p50 \
         | Execute p99 | peak RSS | load |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &mut rows {
        row.samples.sort();
        let n = row.samples.len();
        println!(
            "| {} | {} | {:.2} s | {:.0} | {} | {:.2} | {} | {} | {:.1} MiB | {} |",
            row.label,
            row.callers,
            row.total.as_secs_f64(),
            row.items as f64 / row.total.as_secs_f64(),
            row.requests,
            row.requests as f64 / vms as f64,
            plugin::millis(row.samples[n / 2]),
            plugin::millis(row.samples[(n * 99 / 100).min(n - 1)]),
            row.peak as f64 / 1024.0,
            row.load
        );
    }
    println!();
    println!("machine: {}", machine());
    println!(
        "every VM's answer was identical in all {} rows ({} additional items per VM)",
        rows.len(),
        reference
            .as_ref()
            .and_then(|r| r.first())
            .map_or(0, |a| a.additional_items.len())
    );
}

struct Row {
    /// `views | batching`, each on or off.
    label: String,
    callers: usize,
    total: Duration,
    items: usize,
    requests: usize,
    samples: Vec<Duration>,
    peak: u64,
    /// The machine's 1-minute load average when the row ended (the machine may be shared).
    load: String,
}

struct Measured {
    total: Duration,
    items: usize,
    samples: Vec<Duration>,
    /// Per VM, in the order generated.
    answers: Vec<ExecuteResponse>,
}

/// Sends every VM once, `callers` at a time, each caller taking the next VM not yet sent.
async fn run_backup(
    socket: &Path,
    vms: &[(String, Vec<u8>)],
    backup: &[u8],
    callers: usize,
) -> Measured {
    let client = BackupItemActionClient::new(plugin::connect(socket).await);
    let next = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(Mutex::new(BTreeMap::new()));
    let vms: Arc<Vec<(String, Vec<u8>)>> = Arc::new(vms.to_vec());
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (client, next, answers, vms) =
                (client.clone(), next.clone(), answers.clone(), vms.clone());
            let backup = backup.to_vec();
            tokio::spawn(async move {
                let mut samples = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((name, item)) = vms.get(i) else {
                        return samples;
                    };
                    let request = ExecuteRequest {
                        plugin: ACTION.into(),
                        item: item.clone(),
                        backup: backup.clone(),
                    };
                    let sent = Instant::now();
                    let answer = client.clone().execute(request).await;
                    samples.push(sent.elapsed());
                    let answer = answer
                        .unwrap_or_else(|e| panic!("Execute of VM {name} failed: {e}"))
                        .into_inner();
                    answers.lock().unwrap().insert(i, answer);
                }
            })
        })
        .collect();
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    let total = started.elapsed();
    let answers: Vec<ExecuteResponse> = std::mem::take(&mut *answers.lock().unwrap())
        .into_values()
        .collect();
    let items = answers.iter().map(|a| a.additional_items.len()).sum();
    Measured {
        total,
        items,
        samples,
        answers,
    }
}

fn namespace(n: usize) -> String {
    format!("vms-{n}")
}

/// Writes the generated cluster into `dir`: per VM, a copy of each fixture object of the template VM
/// with its names, namespace and uids made its own. Returns each VM's name and item (JSON).
fn generate(fixtures: &Path, dir: &Path, vms: usize, namespaces: usize) -> Vec<(String, Vec<u8>)> {
    std::fs::create_dir_all(dir).unwrap();
    let mut templates = Vec::new();
    let mut uids = Vec::new();
    let mut shared = Vec::new();
    // Names of the template's objects that do not carry the VM's name: each copy gets a suffix.
    let mut renamed: Vec<String> = SHARED_PVCS.iter().map(|s| s.to_string()).collect();
    for entry in std::fs::read_dir(fixtures).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let object: Value = serde_json::from_str(&text).unwrap();
        if object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            != Some(TEMPLATE_NAMESPACE)
        {
            continue;
        }
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let mine = text.contains(TEMPLATE_VM) || SHARED_PVCS.contains(&name);
        if mine && object["kind"] != "VolumeSnapshot" {
            if !name.contains(TEMPLATE_VM) && !renamed.iter().any(|r| r == name) {
                renamed.push(name.to_string());
            }
            if let Some(uid) = object.pointer("/metadata/uid").and_then(Value::as_str) {
                uids.push(uid.to_string());
            }
            templates.push((file, text));
        } else if object["kind"] == "NetworkAttachmentDefinition" {
            shared.push((file, text));
        }
    }
    templates.sort();
    let mut items = Vec::with_capacity(vms);
    for n in 0..namespaces {
        let ns = namespace(n);
        for (file, text) in &shared {
            std::fs::write(
                dir.join(format!("{ns}-{file}")),
                text.replace(TEMPLATE_NAMESPACE, &ns),
            )
            .unwrap();
        }
    }
    for i in 0..vms {
        let ns = namespace(i % namespaces);
        let vm = format!("vm-{i:05}");
        for (file, text) in &templates {
            let mut text = text
                .replace(TEMPLATE_VM, &vm)
                .replace(TEMPLATE_NAMESPACE, &ns);
            for own in &renamed {
                text = text.replace(&format!("\"{own}\""), &format!("\"{own}-{i:05}\""));
            }
            for (k, uid) in uids.iter().enumerate() {
                text = text.replace(uid, &format!("{}{i:08x}{k:04x}", &uid[..24]));
            }
            let out = dir.join(format!("{i:05}-{file}"));
            if file.starts_with("vm-") {
                items.push((vm.clone(), text.clone().into_bytes()));
            }
            std::fs::write(out, text).unwrap();
        }
    }
    assert_eq!(items.len(), vms, "one VM per copy");
    items
}

struct Env {
    modules: PathBuf,
    state: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

/// The CPU model and count, and the kernel.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{model}, {cpus} CPUs, Linux {}", kernel.trim())
}

/// The 1-minute load average, from /proc/loadavg.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Starts the plugin as Velero does, with read views and batches sent at once on or off; returns it
/// and its socket.
fn start(env: &Env, views: bool, batching: bool) -> (Child, PathBuf) {
    let on_off = |on: bool| if on { "on" } else { "off" };
    let mut child = Command::new(env!("CARGO_BIN_EXE_velero-wasm"))
        .args(["--log-level=info", "--features=EnableCSI"])
        .env("VELERO_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "2")
        .env("VELERO_WASM_MODULES", &env.modules)
        .env("VELERO_WASM_STATE_DIR", &env.state)
        .env("VELERO_WASM_READ_VIEWS", on_off(views))
        .env("VELERO_WASM_READ_BATCH", on_off(batching))
        .env("KUBECONFIG", &env.kubeconfig)
        .env("HOME", &env.home)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = plugin::socket_of(&mut child);
    (child, socket)
}
