//! Read views and `kube.read-all` (docs/read-views.md) through the runtime, with the stock kubevirt
//! component on the KubeVirt fixture cluster: answers are the same with and without them, a second VM
//! of the same backup reads nothing more, the reads of one call are in flight together (a VM in a
//! backup of its own, its resource policy and a DataVolume gone included), a module that
//! opts out is never served from a view, and a component built against WIT 0.1.0 still runs. A cold
//! plugin's first Execute, against the loopback API server, discovers each group version once.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use velero_wasm::action::{BackupOutcome, BackupRequest, ItemRef};
use velero_wasm::backend::Backend;
use velero_wasm::modules::scan_directory;
use velero_wasm::runtime::Runtime;
use velero_wasm::FixtureCluster;
use velero_wasm::{Bounds, ReadViews};
use velero_wasm::{Clock, Environment, Services};
use velero_wasm::{KubeAnswer, KubeApi, KubeCall, KubeError};

const ACTION: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";

/// The fixture cluster, counting the calls that reach it and the most that were in flight at once.
/// No call is answered until [`QUIET`] has passed without another arriving: reads sent without
/// waiting for an answer are all in flight together however slowly a busy machine sends them, and
/// a read that waits for another's answer arrives after the others were answered.
struct Counting {
    inner: FixtureCluster,
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    last_arrival: std::sync::Mutex<Instant>,
}

/// How long the API server hears nothing more before [`Counting`] answers.
const QUIET: Duration = Duration::from_millis(250);

#[async_trait]
impl Backend<KubeCall> for Counting {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        *self.last_arrival.lock().unwrap() = Instant::now();
        loop {
            let quiet_from = *self.last_arrival.lock().unwrap() + QUIET;
            if Instant::now() >= quiet_from {
                break;
            }
            tokio::time::sleep_until(quiet_from.into()).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.inner.call(call).await
    }
}

fn fixtures() -> std::path::PathBuf {
    support::root().join("tests/fixtures/kubevirt")
}

/// A runtime with the kubevirt component (stock manifest, `extra` appended), views on or off.
async fn host(views: bool, extra: &str) -> (Runtime, Arc<Counting>, tempfile::TempDir) {
    let manifest =
        std::fs::read_to_string(support::root().join("actions/kubevirt/kubevirt.toml")).unwrap();
    let manifest = format!("{extra}\n{manifest}");
    let modules = support::module_dir("kubevirt", "kubevirt", &manifest);
    let inner = FixtureCluster::load(&[fixtures().join("cluster")], Clock::System).unwrap();
    serve(inner, modules, views).await
}

/// A runtime serving the modules of `modules` over `inner`, counted, with views on or off.
async fn serve(
    inner: FixtureCluster,
    modules: tempfile::TempDir,
    views: bool,
) -> (Runtime, Arc<Counting>, tempfile::TempDir) {
    let backend = Arc::new(Counting {
        inner,
        calls: AtomicUsize::new(0),
        in_flight: AtomicUsize::new(0),
        most_in_flight: AtomicUsize::new(0),
        last_arrival: std::sync::Mutex::new(Instant::now()),
    });
    let mut services = Services::new(
        backend.clone(),
        Clock::System,
        // Velero's namespace, where a Backup's resource policy ConfigMap lives.
        Environment::from_config(&velero_wasm::config::Config::from_env())
            .with_velero_namespace("velero"),
    );
    if views {
        services.views = Some(ReadViews::new(Bounds::default()));
    }
    let runtime = Runtime::new(services).unwrap();
    let scan = scan_directory(modules.path(), None).unwrap();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert!(runtime.load_all(scan.modules).await.is_empty());
    (runtime, backend, modules)
}

fn file(path: &str) -> String {
    std::fs::read_to_string(fixtures().join(path)).unwrap()
}

/// The nightly backup with `uid`.
fn backup(uid: &str) -> String {
    let mut backup: Value = serde_json::from_str(&file("velero/backup-nightly.json")).unwrap();
    backup["metadata"]["uid"] = Value::from(uid);
    backup.to_string()
}

async fn execute(runtime: &Runtime, vm: &str, backup: &str) -> BackupOutcome {
    attempt(runtime, vm, backup).await.unwrap()
}

/// An Execute of the VM backup action on fixture `vm`: the item and additional items, or the error.
async fn attempt(
    runtime: &Runtime,
    vm: &str,
    backup: &str,
) -> Result<BackupOutcome, velero_wasm::runtime::CallError> {
    let item = file(&format!("cluster/{vm}.json"));
    let entry = runtime.resolve(ACTION).unwrap();
    let id = ItemRef::parse(&item).unwrap();
    let request = BackupRequest {
        item,
        backup: backup.to_string(),
    };
    runtime.backup(&entry, id, request).await
}

fn described(outcome: &BackupOutcome) -> (String, Vec<String>) {
    (
        outcome.item.clone(),
        outcome
            .additional_items
            .iter()
            .map(ToString::to_string)
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_reads_each_resource_of_a_namespace_once_and_answers_as_without_views() {
    let (plain, plain_calls, _m1) = host(false, "").await;
    let (viewed, viewed_calls, _m2) = host(true, "").await;
    let nightly = backup("b-1");
    // The last VM reports that it runs but has no VMI: the error is the same too.
    for vm in ["vm-fedora-web-01", "vm-win2k22-sql", "vm-rhel9-cache-02"] {
        let shown =
            |r: Result<BackupOutcome, _>| r.as_ref().map(described).map_err(ToString::to_string);
        let expected = shown(attempt(&plain, vm, &nightly).await);
        assert_eq!(
            shown(attempt(&viewed, vm, &nightly).await),
            expected,
            "{vm}"
        );
    }
    let plain_reads = plain_calls.calls.load(Ordering::SeqCst);
    let viewed_reads = viewed_calls.calls.load(Ordering::SeqCst);
    assert!(plain_reads >= 6, "{plain_reads}");
    // One list per resource read in the namespace (VMIs, PVCs, DataVolumes, pods), whatever the VMs.
    assert!(
        viewed_reads <= 4,
        "{viewed_reads} calls with views, {plain_reads} without"
    );
    let stats = viewed.services().views.as_ref().unwrap().stats();
    assert_eq!(stats.misses as usize, viewed_reads);
    assert!(stats.hits > 0 && stats.bytes > 0, "{stats:?}");

    // The same VM again: nothing more is read for this backup; another backup reads afresh.
    execute(&viewed, "vm-fedora-web-01", &nightly).await;
    assert_eq!(viewed_calls.calls.load(Ordering::SeqCst), viewed_reads);
    execute(&viewed, "vm-fedora-web-01", &backup("b-2")).await;
    assert!(viewed_calls.calls.load(Ordering::SeqCst) > viewed_reads);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reads_of_one_vm_are_in_flight_together() {
    let (plain, calls, _m) = host(false, "").await;
    let outcome = execute(&plain, "vm-fedora-web-01", &backup("b-1")).await;
    assert!(!outcome.additional_items.is_empty());
    // The VMI, two PVCs, the launcher pods and the backend PVCs: sent as one batch.
    assert!(calls.calls.load(Ordering::SeqCst) >= 5);
    assert_eq!(
        calls.most_in_flight.load(Ordering::SeqCst),
        calls.calls.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_in_a_backup_of_its_own_waits_for_the_api_server_once() {
    // The Backup names a resource policy (read in extended mode) and the VM a DataVolume that is
    // gone (its PVC is read instead): neither read may wait for another's answer.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.json"),
        serde_json::to_string(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "policy", "namespace": "velero"},
            "data": {"policy.yaml": "version: v1\nvolumePolicies: []\n"}}))
        .unwrap(),
    )
    .unwrap();
    let mut vm: Value = serde_json::from_str(&file("cluster/vm-fedora-web-01.json")).unwrap();
    vm["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "imported", "dataVolume": {"name": "web-content"}}));
    for views in [false, true] {
        let manifest =
            std::fs::read_to_string(support::root().join("actions/kubevirt/kubevirt.toml"))
                .unwrap();
        let modules = support::module_dir("kubevirt", "kubevirt", &manifest);
        let inner = FixtureCluster::load(
            &[fixtures().join("cluster"), dir.path().to_path_buf()],
            Clock::System,
        )
        .unwrap();
        let (runtime, calls, _m) = serve(inner, modules, views).await;
        let mut nightly: Value = serde_json::from_str(&backup("b-own")).unwrap();
        nightly["spec"]["resourcePolicy"] =
            serde_json::json!({"kind": "configmap", "name": "policy"});
        let entry = runtime.resolve(ACTION).unwrap();
        let item = vm.to_string();
        let outcome = runtime
            .backup(
                &entry,
                ItemRef::parse(&item).unwrap(),
                BackupRequest {
                    item,
                    backup: nightly.to_string(),
                },
            )
            .await
            .unwrap();
        assert!(!outcome.additional_items.is_empty());
        // The policy, the VMI, the DataVolume and the PVC behind it, the PVCs, the launcher pods and
        // the backend PVCs (with views: one listing per resource), all in flight together.
        let sent = calls.calls.load(Ordering::SeqCst);
        assert!(
            sent >= if views { 5 } else { 8 },
            "views {views}: {sent} calls"
        );
        assert_eq!(
            calls.most_in_flight.load(Ordering::SeqCst),
            sent,
            "views {views}: a read waited for another's answer"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_opts_out_is_never_served_from_a_view() {
    let (plain, plain_calls, _m1) = host(false, "").await;
    let (opted_out, calls, _m2) = host(true, "read-views = false").await;
    let nightly = backup("b-1");
    for _ in 0..2 {
        execute(&plain, "vm-fedora-web-01", &nightly).await;
        execute(&opted_out, "vm-fedora-web-01", &nightly).await;
    }
    assert_eq!(
        calls.calls.load(Ordering::SeqCst),
        plain_calls.calls.load(Ordering::SeqCst)
    );
    let stats = opted_out.services().views.as_ref().unwrap().stats();
    assert_eq!((stats.hits, stats.misses, stats.views), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_built_against_wit_0_1_0_still_runs() {
    // The names a component built against 0.1.0 imports and exports: the same text, 0 for the patch.
    let dir = support::module_dir("misbehave", "misbehave", "");
    let path = dir.path().join("misbehave.wasm");
    let wasm = std::fs::read(&path).unwrap();
    let (new, old) = (b"velero-wasm:plugin/", b"@0.1.2");
    let mut rewritten = wasm.clone();
    let mut renamed = 0;
    let mut at = 0;
    while let Some(found) = rewritten[at..]
        .windows(new.len())
        .position(|w| w == new)
        .map(|p| p + at)
    {
        let end = (found + 64).min(rewritten.len());
        if let Some(v) = rewritten[found..end]
            .windows(old.len())
            .position(|w| w == old)
        {
            rewritten[found + v + old.len() - 1] = b'0';
            renamed += 1;
        }
        at = found + new.len();
    }
    assert!(renamed > 2, "{renamed}");
    let sha: String = {
        use sha2::Digest;
        sha2::Sha256::digest(&rewritten)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    std::fs::write(&path, &rewritten).unwrap();
    std::fs::write(
        dir.path().join("misbehave.toml"),
        format!("sha256 = \"{sha}\"\n[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n"),
    )
    .unwrap();
    let runtime = Runtime::new(Services::new(
        Arc::new(FixtureCluster::empty(Clock::System)),
        Clock::System,
        // Velero's namespace, where a Backup's resource policy ConfigMap lives.
        Environment::from_config(&velero_wasm::config::Config::from_env())
            .with_velero_namespace("velero"),
    ))
    .unwrap();
    let scan = scan_directory(dir.path(), None).unwrap();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert!(runtime.load_all(scan.modules).await.is_empty());
    let item =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"}}"#;
    let entry = runtime.resolve("test.velero-wasm.io/echo").unwrap();
    let outcome = runtime
        .backup(
            &entry,
            ItemRef::parse(item).unwrap(),
            BackupRequest {
                item: item.to_string(),
                backup: "{}".to_string(),
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.item, item);
}

/// A writer module and a reader module (the misbehave component twice, under two domains) in one
/// runtime with views on, on a fixture cluster with ConfigMap `app` in `shop`.
async fn writer_and_reader() -> (Runtime, Arc<Counting>, tempfile::TempDir) {
    let grant = |verbs: &str, domain: &str| {
        format!(
            "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [{verbs}]\nnamespaces = [\"@item\"]\n\n[settings]\ndomain = \"{domain}\"\n"
        )
    };
    let modules = support::module_dir("misbehave", "reader", &grant("\"get\", \"list\"", "r.test"));
    support::add_module(
        modules.path(),
        "misbehave",
        "writer",
        &grant("\"get\", \"list\", \"create\", \"patch\"", "w.test"),
    );
    let inner = FixtureCluster::empty(Clock::System);
    let app = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "shop"}, "data": {"k": "v"}});
    inner.create(&configmaps(), "shop", app).await.unwrap();
    serve(inner, modules, true).await
}

fn configmaps() -> velero_wasm::ApiResource {
    velero_wasm::ApiResource::new("", "v1", "configmaps")
}

/// Runs `action` on ConfigMap `shop/app` for the backup `uid`: the item it returns.
async fn on_app(runtime: &Runtime, action: &str, uid: &str) -> Value {
    let item = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"},"data":{"k":"v"}}"#;
    let entry = runtime.resolve(action).unwrap();
    let request = BackupRequest {
        item: item.to_string(),
        backup: serde_json::json!({"metadata": {"name": "nightly", "uid": uid}}).to_string(),
    };
    let outcome = runtime
        .backup(&entry, ItemRef::parse(item).unwrap(), request)
        .await
        .unwrap();
    serde_json::from_str(&outcome.item).unwrap_or(Value::Null)
}

/// How many ConfigMaps the reader's `list` action saw in `shop`.
async fn listed(runtime: &Runtime, uid: &str) -> String {
    let item = on_app(runtime, "r.test/list", uid).await;
    item["metadata"]["annotations"]["test.velero-wasm.io/listed"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_the_host_by_one_module_ends_another_modules_view_of_it() {
    let (runtime, backend, _modules) = writer_and_reader().await;
    assert_eq!(listed(&runtime, "b-1").await, "1");
    let after_first = backend.calls.load(Ordering::SeqCst);
    // A ConfigMap made behind the host's back: the reader's view is live and still shows one.
    let other = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "other", "namespace": "shop"}});
    backend
        .inner
        .create(&configmaps(), "shop", other)
        .await
        .unwrap();
    assert_eq!(listed(&runtime, "b-1").await, "1");
    assert_eq!(backend.calls.load(Ordering::SeqCst), after_first);
    let hits = runtime.services().views.as_ref().unwrap().stats().hits;
    assert!(hits >= 1, "{hits}");
    // The writer (whose own reads of ConfigMaps never come from a view) creates and patches
    // app-copy through the host, for a backup of its own: the reader's next read lists afresh and
    // sees all three.
    on_app(&runtime, "w.test/write", "b-2").await;
    assert_eq!(listed(&runtime, "b-1").await, "3");
    let copy = backend
        .inner
        .get(&configmaps(), "shop", "app-copy")
        .await
        .unwrap();
    assert_eq!(copy["metadata"]["labels"]["copied"], "true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_s_first_execute_discovers_each_group_version_once() {
    use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
    use velero_wasm::plugin::proto::generated::ExecuteRequest;

    let server = support::apiserver::ApiServer::start(&[&fixtures().join("cluster")]);
    // Long enough that every first user of a group version asks before any discovery answers: the
    // PVCs and the launcher pods (both core/v1) are listed at once, beside the VMIs.
    server.set_latency(Duration::from_millis(200));
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::create_dir_all(path("state")).unwrap();
    server.write_kubeconfig(&dir.path().join("kubeconfig"));
    let (kubeconfig, state, home) = (path("kubeconfig"), path("state"), path("home"));
    let plugin = support::plugin::Plugin::start_with(
        "/plugins/velero-wasm",
        &["--log-level", "info"],
        &[
            ("KUBECONFIG", &kubeconfig),
            ("VELERO_WASM_STATE_DIR", &state),
            ("VELERO_WASM_READ_VIEWS", "on"),
            ("HOME", &home),
        ],
        |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        },
    );
    let answer = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: ACTION.into(),
            item: file("cluster/vm-fedora-web-01.json").into_bytes(),
            backup: backup("b-cold").into_bytes(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.additional_items.is_empty());
    plugin.shutdown().await;

    let requests = server.requests();
    // A group version's discovery: `/api/<version>` or `/apis/<group>/<version>`.
    let discovery = |p: &str| {
        let segments: Vec<&str> = p.trim_start_matches('/').split('/').collect();
        matches!(segments.as_slice(), ["api", _] | ["apis", _, _])
    };
    let mut sent: Vec<&str> = requests
        .iter()
        .map(|r| r.path.as_str())
        .filter(|p| discovery(p))
        .collect();
    assert!(sent.contains(&"/api/v1"), "{requests:#?}");
    sent.sort_unstable();
    let before = sent.len();
    sent.dedup();
    assert_eq!(before, sent.len(), "a discovery sent twice: {requests:#?}");
}
