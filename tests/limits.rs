//! Work the host does for a module counts against that module's call: logging, lists, capability
//! calls, selectors, memory and slots are bounded by the call's limits (and the process's memory
//! budget). Each overstep fails its own call with an error that names the module, the action, the
//! item and the limit; the host writes bounded lines, and the next call succeeds on the same process.
//!
//! The module is the test component `misbehave` (`tests/components/misbehave`), driven over Velero's
//! plugin protocol (a process started as Velero starts it) or through `velero-wasm run`.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::apiserver::ApiServer;
use support::plugin::Plugin;
use support::run::Run;
use support::{module_dir, stderr, write};
use tonic::transport::Channel;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::{self as g};

const T: &str = "test.velero-wasm.io/";

const ITEM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"},"data":{"k":"v"}}"#;

const BACKUP: &str =
    r#"{"metadata":{"name":"nightly","namespace":"velero","uid":"b-1"},"spec":{}}"#;

/// The manifest of the misbehaving module: `limits` then a grant on ConfigMaps of the item's namespace.
fn manifest(limits: &str) -> String {
    format!(
        "[limits]\n{limits}\n\n[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\", \"list\"]\nnamespaces = [\"@item\"]\n\n[settings]\ntarget = \"settings\"\n"
    )
}

/// A plugin process serving `modules`, with `env` beside.
fn plugin(modules: &Path, env: &[(&str, &str)]) -> Plugin {
    let dir = modules.display().to_string();
    let mut env = env.to_vec();
    env.push(("VELERO_WASM_MODULES", &dir));
    Plugin::start_as(support::plugin::binary(), &["--log-level", "info"], &env)
}

async fn execute(c: &Channel, action: &str) -> Result<g::ExecuteResponse, tonic::Status> {
    BackupItemActionClient::new(c.clone())
        .execute(g::ExecuteRequest {
            plugin: action.to_string(),
            item: ITEM.as_bytes().to_vec(),
            backup: BACKUP.as_bytes().to_vec(),
        })
        .await
        .map(|r| r.into_inner())
}

/// The next call on the same process succeeds.
async fn assert_still_serving(c: &Channel, action: &str) {
    let answer = execute(c, action)
        .await
        .unwrap_or_else(|e| panic!("the host must keep serving: {}", e.message()));
    assert_eq!(
        answer.item,
        ITEM.as_bytes(),
        "echo returns the item unchanged"
    );
}

/// Runs `velero-wasm run` on the item with the fixture cluster of `files`.
fn run(modules: &Path, case: &str, cluster: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let files = tempfile::tempdir().unwrap();
    let item = write(files.path(), "item.json", ITEM);
    let backup = write(files.path(), "backup.json", BACKUP);
    let action = format!("{T}{case}");
    Run::new(&action)
        .item(&item)
        .path("--backup", &backup)
        .cluster(&[cluster])
        .modules(modules)
        .envs(env)
        .output()
}

/// A fixture cluster directory: the `settings` ConfigMap of the item's namespace, and `extra` objects.
fn cluster(extra: &[Value]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop"}}),
    ];
    objects.extend_from_slice(extra);
    write(
        dir.path(),
        "objects.json",
        &Value::Array(objects).to_string(),
    );
    dir
}

/// `n` ConfigMaps of the item's namespace, each with `size` bytes of data.
fn configmaps(n: usize, size: usize) -> Vec<Value> {
    let data = "d".repeat(size);
    (0..n)
        .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:05}"), "namespace": "shop"}, "data": {"blob": data}}))
        .collect()
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_line_of_1000_fields_of_4_kib_stays_under_64_kib_says_fields_were_dropped_and_takes_no_longer_than_the_call(
) {
    let modules = module_dir("misbehave", "misbehave", &manifest("timeout = \"5s\""));
    let plugin = plugin(modules.path(), &[]);
    let c = plugin.channel().await;
    let started = Instant::now();
    execute(&c, &format!("{T}log-fields"))
        .await
        .unwrap_or_else(|e| panic!("{}", e.message()));
    // A hang detector, not a speed test: before the fix this took over a minute.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the call took {:?}, past its 5 s deadline",
        started.elapsed()
    );
    assert_still_serving(&c, &format!("{T}echo")).await;
    let session = plugin.shutdown().await;
    let logged = session.log_lines();
    let line = logged
        .iter()
        .find(|l| l["@message"] == "one line with 1000 fields")
        .expect("the guest's line is logged");
    assert_eq!(line["@level"], "error");
    assert_eq!(line["module"], "misbehave");
    let dropped: usize = line["droppedFields"].as_str().unwrap().parse().unwrap();
    let kept = line.keys().filter(|k| k.starts_with("field")).count();
    assert!(dropped > 900 && kept > 0, "kept {kept}, dropped {dropped}");
    assert_eq!(kept + dropped, 1000);
    assert!(line["field0"].as_str().unwrap().len() == 4 << 10);

    // The command line writes the same bounded line.
    let cluster = cluster(&[]);
    let out = run(modules.path(), "log-fields", cluster.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stderr(&out);
    let line = lines(&text)
        .into_iter()
        .find(|l| l.contains("one line with 1000 fields"))
        .expect("the line is on stderr");
    assert!(line.len() < 64 << 10, "{} bytes", line.len());
    assert!(line.contains("droppedFields="), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_logs_40_mib_writes_at_most_its_log_budget_and_says_so_once() {
    let modules = module_dir("misbehave", "misbehave", &manifest("timeout = \"10s\""));
    let plugin = plugin(modules.path(), &[]);
    let c = plugin.channel().await;
    execute(&c, &format!("{T}log-flood"))
        .await
        .unwrap_or_else(|e| panic!("{}", e.message()));
    assert_still_serving(&c, &format!("{T}echo")).await;
    let session = plugin.shutdown().await;
    assert!(
        session.stderr.len() < 2 << 20,
        "{} bytes of stderr for one call",
        session.stderr.len()
    );
    let logged = session.log_lines();
    let warnings: Vec<_> = logged
        .iter()
        .filter(|l| {
            l["@message"]
                .as_str()
                .unwrap()
                .starts_with("the module logged more than 1024 KiB in one call; dropping the rest")
        })
        .collect();
    assert_eq!(warnings.len(), 1, "said once");
    assert_eq!(warnings[0]["@level"], "warn");
    assert_eq!(warnings[0]["action"], format!("{T}log-flood"));
    assert_eq!(warnings[0]["name"], "app");

    let cluster = cluster(&[]);
    let out = run(modules.path(), "log-flood", cluster.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.len() < 2 << 20, "{} bytes of stderr", text.len());
    assert!(lines(&text).iter().all(|l| l.len() < 64 << 10));
    assert_eq!(text.matches("dropping the rest").count(), 1, "said once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_past_its_capability_calls_fails_naming_the_limit_and_the_next_call_succeeds() {
    let modules = module_dir(
        "misbehave",
        "misbehave",
        &manifest("timeout = \"10s\"\ncapability-calls = 100"),
    );
    let server = ApiServer::start(&[cluster(&[]).path()]);
    let kubeconfig_dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    // Read views off: this counts the module's own GETs of `settings` to show that the calls past
    // the limit never reach the cluster; with a view they would all be answered from one namespace
    // list (docs/read-views.md), and a count of zero would show nothing.
    let plugin = plugin(
        modules.path(),
        &[
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_READ_VIEWS", "off"),
        ],
    );
    let c = plugin.channel().await;
    server.clear_requests();
    // The module ignores the refusals and returns success: the call fails all the same.
    let status = execute(&c, &format!("{T}kube-calls")).await.unwrap_err();
    assert_eq!(
        status.message(),
        format!("module misbehave, action {T}kube-calls on item configmaps shop/app: made more than 100 capability calls (kube, http, environment, random, signing) in one call, its limit (manifest [limits] capability-calls)")
    );
    let reads = server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/configmaps/settings"))
        .count();
    assert_eq!(
        reads, 100,
        "the calls past the limit never reach the cluster"
    );
    assert_still_serving(&c, &format!("{T}echo")).await;
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_list_larger_than_the_modules_memory_stops_at_the_page_that_passes_it_and_fails_the_call()
{
    // 1000 ConfigMaps of 16 KiB: the first page of 500 is already more than the module's 4 MiB.
    let objects = cluster(&configmaps(1000, 16 << 10));
    let modules = module_dir(
        "misbehave",
        "misbehave",
        &manifest("timeout = \"20s\"\nmemory = \"4MiB\""),
    );
    let server = ApiServer::start(&[objects.path()]);
    let kubeconfig_dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    // Read views on (the default): the view's namespace list is bounded by the module's memory
    // limit as its own list is, and is this very list (docs/read-views.md).
    let plugin = plugin(
        modules.path(),
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let c = plugin.channel().await;
    server.clear_requests();
    let status = execute(&c, &format!("{T}list")).await.unwrap_err();
    assert_eq!(
        status.message(),
        format!("module misbehave, action {T}list on item configmaps shop/app: list of configmaps returned more than 4194304 bytes, the module's memory limit (manifest [limits] memory)")
    );
    let pages = server
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/namespaces/shop/configmaps"))
        .count();
    assert_eq!(pages, 1, "no page is read past the limit");
    assert_still_serving(&c, &format!("{T}echo")).await;
    plugin.shutdown().await;

    // The fixture cluster of `run` gives the same error.
    let out = run(modules.path(), "list", objects.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "list of configmaps returned more than 4194304 bytes, the module's memory limit"
        ),
        "{}",
        stderr(&out)
    );

    // A list within the limit is read to its last page.
    let small = cluster(&configmaps(600, 64));
    let out = run(modules.path(), "list", small.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        support::stdout_json(&out)["item"]["metadata"]["annotations"]["test.velero-wasm.io/listed"],
        "601"
    );
}

#[test]
fn selectors_of_10_000_terms_are_refused_as_invalid_before_any_matching() {
    let modules = module_dir("misbehave", "misbehave", &manifest("timeout = \"5s\""));
    let objects = cluster(&configmaps(2000, 16));
    for (case, problem) in [
        ("field-selector", "Invalid(\"the field selector is "),
        ("label-selector", "Invalid(\"label selector \\\"k0!=v,"),
    ] {
        let started = Instant::now();
        let out = run(modules.path(), case, objects.path(), &[]);
        assert!(started.elapsed() < Duration::from_secs(20), "{case} hangs");
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(problem), "{case}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("bytes long, more than the 8192 allowed"),
            "{case}: {}",
            stderr(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn growth_past_the_process_memory_budget_fails_that_call_and_the_budget_is_given_back() {
    let modules = module_dir(
        "misbehave",
        "misbehave",
        &manifest("timeout = \"10s\"\nmemory = \"64MiB\""),
    );
    let plugin = plugin(modules.path(), &[("VELERO_WASM_MEMORY_BUDGET", "24MiB")]);
    let c = plugin.channel().await;
    let status = execute(&c, &format!("{T}memory-bomb")).await.unwrap_err();
    assert!(
        status.message().starts_with(&format!("module misbehave, action {T}memory-bomb on item configmaps shop/app: could not grow its memory to ")),
        "{}",
        status.message()
    );
    assert!(
        status.message().ends_with("MiB: the process's memory budget of 24 MiB for all calls at once is used up (VELERO_WASM_MEMORY_BUDGET)"),
        "{}",
        status.message()
    );
    // Every call gives back what it held: many more calls than the budget could hold at once succeed.
    for _ in 0..20 {
        assert_still_serving(&c, &format!("{T}echo")).await;
    }
    let again = execute(&c, &format!("{T}memory-bomb")).await.unwrap_err();
    assert!(
        again.message().contains("memory budget of 24 MiB"),
        "{}",
        again.message()
    );
    assert_still_serving(&c, &format!("{T}echo")).await;
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_finds_every_slot_taken_fails_at_its_own_deadline_and_the_next_one_runs() {
    // The same component twice: `slow.test` hangs for its 6 s deadline, `fast.test` has 1 s.
    let modules = tempfile::tempdir().unwrap();
    support::add_module(
        modules.path(),
        "misbehave",
        "slow",
        "[limits]\ntimeout = \"6s\"\n[settings]\ndomain = \"slow.test\"\n",
    );
    support::add_module(
        modules.path(),
        "misbehave",
        "fast",
        "[limits]\ntimeout = \"1s\"\n[settings]\ndomain = \"fast.test\"\n",
    );
    let plugin = plugin(modules.path(), &[]);
    let mut channels = Vec::new();
    for _ in 0..4 {
        channels.push(plugin.channel().await);
    }
    let hung: Vec<_> = (0..velero_wasm::runtime::MAX_CONCURRENT_CALLS as usize)
        .map(|i| {
            let c = channels[i % channels.len()].clone();
            tokio::spawn(async move { execute(&c, "slow.test/sleep").await })
        })
        .collect();
    // Let the hung calls take every slot.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let c = &channels[0];
    let started = Instant::now();
    let status = execute(c, "fast.test/echo").await.unwrap_err();
    let waited = started.elapsed();
    assert_eq!(
        status.message(),
        "module fast, action fast.test/echo on item configmaps shop/app: found no free slot within its deadline of 1s: all 64 calls that may run at once were busy"
    );
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
    for call in hung {
        let status = call.await.unwrap().unwrap_err();
        assert!(
            status
                .message()
                .ends_with("did not finish within its deadline of 6s"),
            "{}",
            status.message()
        );
    }
    assert_still_serving(c, "fast.test/echo").await;
    plugin.shutdown().await;
}
