//! What an action added while Velero runs costs a backup (docs/modules.md#s10): a backup of
//! `SLOT_VMS` VMs (default 100) as Velero runs it against the plugin binary, with the stock kubevirt
//! module in `mode = "upstream"` and the test suite's loopback API server serving the KubeVirt fixture
//! cluster (as `--bench online`: read views off, so every Execute makes its reads).
//!
//! Two rows, each a fresh plugin process per backup, side by side in one run:
//! - *nothing added*: Velero asks the slot's AppliesTo once (it matches nothing), then calls the VM
//!   action once per VM;
//! - *one action added*: a module Velero has not listed (the test component misbehave's `label`
//!   case, applying to VMs) serves through the slot, so each VM also goes through the slot.
//!
//! Prints per row the backup's wall time (median and spread over `SLOT_RUNS` backups, default 5) and
//! the time per VM (median and p99), then the difference and the machine. Asserts only that the
//! added action labelled every VM and that nothing reached it while it was not added.
//!
//! `cargo bench -p velero-wasm --bench slot`

// A benchmark stops at what it did not expect: the workspace's unwrap lints are for the host's code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../tests/support/apiserver.rs"]
mod apiserver;
mod plugin;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use tonic::transport::Channel;
use velero_wasm::plugin::proto::generated::plugin_lister_client::PluginListerClient;
use velero_wasm::plugin::proto::generated::Empty;
use velero_wasm::plugin::proto::v2::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::v2::{BackupItemActionAppliesToRequest, ExecuteRequest};

const ACTION: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
const SLOT: &str = "velero-wasm.io/added-backup-actions";
/// The label the added action sets.
const LABEL: &str = "velero-wasm.io/seen";

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let vms = setting("SLOT_VMS", 100).max(1);
    let runs = setting("SLOT_RUNS", 5).max(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let fixtures = root.join("tests/fixtures/kubevirt");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("slot-bench");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("state")).unwrap();
    let server = apiserver::ApiServer::start(&[&fixtures.join("cluster")]);
    server.write_kubeconfig(&work.join("kubeconfig"));
    let modules = plugin::upstream_kubevirt(root, &work);
    let item = std::fs::read(fixtures.join("cluster/vm-fedora-web-01.json")).unwrap();
    let backup = std::fs::read(fixtures.join("velero/backup-nightly.json")).unwrap();
    let env = plugin::Env {
        modules: modules.clone(),
        state: work.join("state"),
        kubeconfig: work.join("kubeconfig"),
        home: work.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // Velero's start: the plugin lists (and keeps the listing), and compiles kubevirt into the state
    // directory. Then an operator adds a module Velero has not listed.
    let (child, socket, _) = plugin::start(&env);
    runtime.block_on(async {
        let listed = PluginListerClient::new(plugin::connect(&socket).await)
            .list_plugins(Empty {})
            .await
            .unwrap()
            .into_inner()
            .plugins;
        assert!(listed.iter().any(|p| p.name == SLOT));
        plugin::stop(child, &socket).await
    });
    let mut rows = Vec::new();
    for added in [false, true] {
        if added {
            add_labeller(&modules);
        }
        // A first backup compiles what is new; the measured ones map it.
        runtime.block_on(run_backup(&env, &item, &backup, vms.min(2), added));
        let mut totals = Vec::new();
        let mut per_vm = Vec::new();
        for _ in 0..runs {
            let (total, each) = runtime.block_on(run_backup(&env, &item, &backup, vms, added));
            totals.push(total);
            per_vm.extend(each);
        }
        totals.sort();
        per_vm.sort();
        rows.push((added, totals, per_vm));
    }

    println!("A backup of {vms} VMs, kubevirt (upstream mode) against a loopback API server; {runs} backups a row, a plugin process each");
    println!(
        "{:<20} {:>12} {:>22} {:>12} {:>12}",
        "row", "backup p50", "backup min-max", "per VM p50", "per VM p99"
    );
    for (added, totals, per_vm) in &rows {
        println!(
            "{:<20} {:>12} {:>22} {:>12} {:>12}",
            if *added {
                "one action added"
            } else {
                "nothing added"
            },
            plugin::millis(pct(totals, 50)),
            format!(
                "{}-{}",
                plugin::millis(totals[0]),
                plugin::millis(totals[totals.len() - 1])
            ),
            plugin::millis(pct(per_vm, 50)),
            plugin::millis(pct(per_vm, 99)),
        );
    }
    let (base, with) = (pct(&rows[0].1, 50), pct(&rows[1].1, 50));
    println!(
        "an added action costs {} a backup ({:.2} ms a VM: one more gRPC call and one wasm call per VM its selector covers)",
        plugin::millis(with.saturating_sub(base)),
        with.saturating_sub(base).as_secs_f64() * 1000.0 / vms as f64
    );
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| c.lines().find_map(|l| l
                .strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim().to_string())))
            .unwrap_or_default()
    );
}

/// The module an operator adds: misbehave's `label` case alone, applying to VMs, under names the
/// listing Velero holds lacks.
fn add_labeller(modules: &Path) {
    let wasm = std::fs::read(Path::new(env!("VELERO_WASM_TEST_COMPONENTS")).join("misbehave.wasm"))
        .unwrap();
    let manifest = format!(
        "sha256 = \"{}\"\n[settings]\ndomain = \"bench.velero-wasm.io\"\ncases = \"label\"\nresources = \"virtualmachines\"\n",
        velero_wasm::modules::sha256_hex(&wasm)
    );
    std::fs::write(modules.join("labeller.wasm"), &wasm).unwrap();
    std::fs::write(modules.join("labeller.toml"), manifest).unwrap();
}

/// One backup in a fresh plugin process: the slot's AppliesTo, then each VM through the VM action
/// and, when an action is added, through the slot. Returns the backup's time and each VM's.
async fn run_backup(
    env: &plugin::Env,
    item: &[u8],
    backup: &[u8],
    vms: usize,
    added: bool,
) -> (Duration, Vec<Duration>) {
    let (child, socket, _) = plugin::start(env);
    let mut client = BackupItemActionClient::new(plugin::connect(&socket).await);
    let started = Instant::now();
    let selector = client
        .applies_to(BackupItemActionAppliesToRequest {
            plugin: SLOT.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resource_selector
        .unwrap();
    // What Velero does with the selector: it names a resource only when an action is added.
    let slot_applies = !selector
        .included_resources
        .iter()
        .any(|r| r == velero_wasm::action::slot::NOTHING_ADDED);
    assert_eq!(slot_applies, added, "{selector:?}");
    let mut each = Vec::with_capacity(vms);
    for _ in 0..vms {
        let vm = Instant::now();
        let out = execute(&mut client, ACTION, item.to_vec(), backup).await;
        let out = if slot_applies {
            execute(&mut client, SLOT, out, backup).await
        } else {
            out
        };
        each.push(vm.elapsed());
        let labelled =
            serde_json::from_slice::<Value>(&out).unwrap()["metadata"]["labels"][LABEL] == "true";
        assert_eq!(
            labelled, added,
            "the added action labels every VM, and only once added"
        );
    }
    let total = started.elapsed();
    plugin::stop(child, &socket).await;
    (total, each)
}

async fn execute(
    client: &mut BackupItemActionClient<Channel>,
    plugin: &str,
    item: Vec<u8>,
    backup: &[u8],
) -> Vec<u8> {
    client
        .execute(ExecuteRequest {
            plugin: plugin.into(),
            item,
            backup: backup.to_vec(),
        })
        .await
        .unwrap()
        .into_inner()
        .item
}

/// The `p`th percentile of sorted `samples`.
fn pct(samples: &[Duration], p: usize) -> Duration {
    samples[(samples.len() * p / 100).min(samples.len() - 1)]
}
