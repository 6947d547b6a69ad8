//! The live `kube` backend, driven with the real `kube` client over real HTTP against a loopback API
//! server (tests/support/apiserver.rs) that serves the same objects as a fixture cluster. The
//! imitation lets these tests count and read back requests, forbid a resource and stop the server on
//! demand; their twins against a real kube-apiserver are in tests/kube_apiserver.rs.
//!
//! - The same run gives the same output against fixtures (`run --cluster`) and against the server
//!   (`run --kubeconfig`), and the same writes.
//! - Lists are read page by page; discovery is read once per group version, and a resource's first
//!   read goes out beside its discovery rather than after it.
//! - The server's errors keep their meaning: not found, conflict, forbidden and invalid stay distinct.
//! - A call outside the module's grant never reaches the server.
//! - A run recorded against the server replays with the server stopped; a replay is strict.
//! - `--kubeconfig` and `--context` select the cluster as kubectl does; without any configuration,
//!   actions that never call the cluster still run.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::apiserver::ApiServer;
use support::run::Run;
use tempfile::TempDir;
use velero_wasm::Clock;
use velero_wasm::FixtureCluster;
use velero_wasm::{ApiResource, KubeApi, KubeError, ListOptions, Patch};
use velero_wasm::{ClusterOptions, LiveCluster};

/// How many ConfigMaps labelled `probe=many` the cluster holds: more than two pages of 500.
const MANY: usize = 1100;

/// A workspace for one test: the cluster's objects, a module directory with the test components and
/// their manifests, the item and the Backup, a kubeconfig, and a HOME without any kube config.
struct Case {
    dir: TempDir,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let case = Case { dir };
        std::fs::create_dir_all(case.path("cluster")).unwrap();
        std::fs::create_dir_all(case.path("modules")).unwrap();
        std::fs::create_dir_all(case.path("home")).unwrap();
        case.write_cluster();
        case.write_modules();
        let item = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "item", "namespace": "probe", "labels": {"app": "item"}}, "data": {"k": "v"}});
        std::fs::write(case.path("item.json"), item.to_string()).unwrap();
        let backup = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "nightly", "namespace": "velero"}, "spec": {"includedNamespaces": ["probe"]}});
        std::fs::write(case.path("backup.json"), backup.to_string()).unwrap();
        case
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn cluster(&self) -> PathBuf {
        self.path("cluster")
    }

    fn write_cluster(&self) {
        let cm = |ns: &str, name: &str, labels: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": ns, "labels": labels, "resourceVersion": "7"},
                   "data": {"name": name}})
        };
        let objects = vec![
            cm("probe", "a", json!({"app": "web", "tier": "front"})),
            cm("probe", "b", json!({"app": "web", "tier": "back"})),
            cm("probe", "c", json!({"app": "db", "tier": "back"})),
            cm(
                "probe",
                "legacy",
                json!({"app": "web", "tier": "front", "legacy": "true"}),
            ),
            cm("other", "a", json!({"app": "web"})),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "credentials", "namespace": "probe"},
                   "data": {"password": "aHVudGVyMg=="}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}}),
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                   "metadata": {"name": "vm", "namespace": "probe", "labels": {"app": "web"}}, "spec": {"running": true}}),
        ];
        std::fs::write(
            self.path("cluster/objects.json"),
            Value::Array(objects).to_string(),
        )
        .unwrap();
        // Spread over three namespaces so that pages cross namespace boundaries.
        let many: Vec<Value> = (0..MANY)
            .map(|i| {
                cm(
                    &format!("bulk-{}", i % 3),
                    &format!("many-{i:04}"),
                    json!({"probe": "many"}),
                )
            })
            .collect();
        std::fs::write(
            self.path("cluster/many.json"),
            Value::Array(many).to_string(),
        )
        .unwrap();
    }

    fn write_modules(&self) {
        let components = PathBuf::from(env!("VELERO_WASM_TEST_COMPONENTS"));
        let install = |file: &str, name: &str, manifest: &str| {
            let wasm = std::fs::read(components.join(file)).unwrap();
            let sha = format!("{:x}", Sha256::digest(&wasm));
            std::fs::write(self.path(&format!("modules/{name}.wasm")), wasm).unwrap();
            std::fs::write(
                self.path(&format!("modules/{name}.toml")),
                format!("sha256 = \"{sha}\"\n{manifest}"),
            )
            .unwrap();
        };
        install(
            "kube_probe.wasm",
            "kube-probe",
            r#"
[[grant.kube]]
resources = ["configmaps"]
verbs = ["*"]
namespaces = ["*"]

[[grant.kube]]
resources = ["secrets"]
verbs = ["get"]
namespaces = ["@item"]

[settings]
secret = "credentials"
"#,
        );
        install(
            "misbehave.wasm",
            "misbehave",
            r#"
[[grant.kube]]
resources = ["configmaps"]
verbs = ["get"]
namespaces = ["@item"]

[settings]
target = "b"
"#,
        );
    }

    /// `velero-wasm run --action ACTION` on the item, with `args` for the cluster.
    fn run(&self, action: &str, args: &[&str]) -> Output {
        self.command(&[
            "run",
            "--action",
            action,
            "--item",
            "item.json",
            "--backup",
            "backup.json",
            "--modules",
            "modules",
        ])
        .args(args)
        .output()
    }

    /// `velero-wasm ARGS` in the case's directory, with no kubeconfig but what a test gives.
    fn command(&self, args: &[&str]) -> Run {
        Run::cli(args)
            .current_dir(self.dir.path())
            .env("HOME", self.path("home"))
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
    }

    fn server(&self) -> (ApiServer, PathBuf) {
        let server = ApiServer::start(&[&self.cluster()]);
        let kubeconfig = self.path("kubeconfig");
        server.write_kubeconfig(&kubeconfig);
        (server, kubeconfig)
    }
}

fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The writes the fixture cluster reports, as the (method, path) requests a real server must have
/// answered with success.
fn writes_as_requests(writes: &Value) -> Vec<(String, String)> {
    writes
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let collection = format!(
                "/api/v1/namespaces/{}/configmaps",
                w["namespace"].as_str().unwrap()
            );
            let name = w["name"].as_str().unwrap();
            match w["verb"].as_str().unwrap() {
                "create" => ("POST".to_string(), collection),
                "update" => ("PUT".to_string(), format!("{collection}/{name}")),
                "patch" => ("PATCH".to_string(), format!("{collection}/{name}")),
                "delete" => ("DELETE".to_string(), format!("{collection}/{name}")),
                other => panic!("unexpected verb {other}"),
            }
        })
        .collect()
}

#[test]
fn run_against_the_api_server_prints_what_run_against_fixtures_prints() {
    let case = Case::new();
    let cluster = case.cluster();
    let fixture = stdout_json(&case.run(
        "test.velero-wasm.io/kube-probe",
        &["--cluster", cluster.to_str().unwrap()],
    ));
    let (server, kubeconfig) = case.server();
    let live = stdout_json(&case.run(
        "test.velero-wasm.io/kube-probe",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    ));

    // The probe really exercised every call (a report of errors would compare equal, too).
    let report = &fixture["item"]["report"];
    assert_eq!(report["get"]["object"]["data"]["name"], "a");
    assert_eq!(
        report["getMissing"]["error"],
        "not-found: configmaps \"missing\" not found"
    );
    assert_eq!(
        report["listLabels"],
        json!([
            "ConfigMap probe/a",
            "ConfigMap probe/b",
            "ConfigMap probe/legacy"
        ])
    );
    assert_eq!(
        report["listLabelsAndFields"],
        json!([
            "ConfigMap probe/b",
            "ConfigMap probe/c",
            "ConfigMap probe/legacy"
        ])
    );
    assert_eq!(
        report["listSetBased"],
        json!([
            "ConfigMap probe/a",
            "ConfigMap probe/b",
            "ConfigMap probe/c"
        ])
    );
    assert_eq!(
        report["listFieldNamespace"],
        json!([
            "ConfigMap probe/a",
            "ConfigMap probe/b",
            "ConfigMap probe/legacy"
        ])
    );
    assert_eq!(report["listBadSelector"]["error"], "invalid");
    assert_eq!(report["listMany"]["count"], MANY);
    assert_eq!(report["listMany"]["first"], "ConfigMap bulk-0/many-0000");
    assert_eq!(
        report["create"]["serverSet"],
        json!({"uid": true, "resourceVersion": true, "creationTimestamp": true})
    );
    assert_eq!(
        report["createAgain"]["error"],
        "conflict: configmaps \"created\" already exists"
    );
    assert_eq!(
        report["mergePatch"]["object"]["data"],
        json!({"merged": "yes"})
    );
    assert_eq!(
        report["jsonPatch"]["object"]["data"],
        json!({"merged": "json", "added": "2"})
    );
    assert_eq!(report["jsonPatchFailing"]["error"], "invalid");
    assert!(report["updateStale"]["error"]
        .as_str()
        .unwrap()
        .starts_with("conflict: Operation cannot be fulfilled"));
    assert_eq!(report["update"]["object"]["data"]["updated"], "yes");
    assert_eq!(
        report["updateMissing"]["error"],
        "not-found: configmaps \"missing\" not found"
    );
    assert_eq!(report["delete"], Value::Null);
    assert_eq!(
        report["getDeleted"]["error"],
        "not-found: configmaps \"created\" not found"
    );
    assert_eq!(
        report["deleteAgain"],
        "not-found: configmaps \"created\" not found"
    );
    assert_eq!(report["createNameless"]["error"], "invalid");
    assert_eq!(report["createGenerated"]["prefixed"], true);

    assert_eq!(
        live["item"], fixture["item"],
        "the item differs between backends"
    );
    assert_eq!(live["additionalItems"], fixture["additionalItems"]);
    assert_eq!(fixture["additionalItems"].as_array().unwrap().len(), 3);

    // The same writes reached the server (every successful write request, in order, except the create
    // with a generated name, whose collection path is the same anyway).
    let succeeded: Vec<(String, String)> = server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.status < 300)
        .map(|r| (r.method, r.path))
        .collect();
    assert_eq!(succeeded, writes_as_requests(&fixture["clusterWrites"]));
    // And both runs report the same writes (the stored objects differ only in what a server assigns:
    // uid, resourceVersion, creationTimestamp, and the suffix of a generated name).
    let summary = |output: &Value| -> Vec<Value> {
        output["clusterWrites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                let name = match w["object"]["metadata"]["generateName"].as_str() {
                    Some(prefix) => Value::String(format!("{prefix}…")),
                    None => w["name"].clone(),
                };
                serde_json::json!([
                    w["verb"],
                    w["apiVersion"],
                    w["kind"],
                    w["namespace"],
                    name,
                    w["patch"],
                    w["object"]["data"]
                ])
            })
            .collect()
    };
    assert_eq!(summary(&live), summary(&fixture));
    assert!(!summary(&live).is_empty());

    // The misbehave component's granted read gives the same answer too.
    let fixture = stdout_json(&case.run(
        "test.velero-wasm.io/granted-kube",
        &["--cluster", cluster.to_str().unwrap()],
    ));
    let live = stdout_json(&case.run(
        "test.velero-wasm.io/granted-kube",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    ));
    assert_eq!(
        fixture["item"]["metadata"]["annotations"]["test.velero-wasm.io/found"],
        "b"
    );
    assert_eq!(live["item"], fixture["item"]);
    assert_eq!(live["additionalItems"], fixture["additionalItems"]);
}

#[test]
fn lists_are_read_in_pages_of_500_and_discovery_once() {
    let case = Case::new();
    let (server, kubeconfig) = case.server();
    stdout_json(&case.run(
        "test.velero-wasm.io/kube-probe",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    ));
    let requests = server.requests();
    let pages: Vec<_> = requests
        .iter()
        .filter(|r| {
            r.path == "/api/v1/configmaps"
                && r.query.get("labelSelector").map(String::as_str) == Some("probe=many")
        })
        .collect();
    assert_eq!(pages.len(), 3, "1100 objects in pages of 500: {pages:#?}");
    assert!(pages.iter().all(|p| p.query["limit"] == "500"));
    assert!(!pages[0].query.contains_key("continue"));
    assert_eq!(pages[1].query["continue"], "offset-500");
    assert_eq!(pages[2].query["continue"], "offset-1000");
    let discovery = requests.iter().filter(|r| r.path == "/api/v1").count();
    assert_eq!(
        discovery, 1,
        "the core group version is discovered once for all the probe's calls"
    );
}

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "configmaps")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_read_goes_out_beside_its_discovery_not_after_it() {
    let case = Case::new();
    let (server, kubeconfig) = case.server();
    // Every answer waits this long, discovery's too: a read sent after discovery's answer arrives
    // at least this long after discovery.
    let latency = std::time::Duration::from_millis(300);
    server.set_latency(latency);
    let live = connect(&kubeconfig).await;
    let vms = ApiResource::new("kubevirt.io", "v1", "virtualmachines");
    let options = ListOptions::parse("app=web", "").unwrap();
    let listed = live.list(&vms, "probe", &options).await.unwrap();
    assert!(!listed.is_empty());
    // Typed by what discovery said, though the list went out before it answered.
    assert!(listed.iter().all(|vm| vm["kind"] == "VirtualMachine"));
    let vm = listed[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(
        live.get(&vms, "probe", &vm).await.unwrap()["kind"],
        "VirtualMachine"
    );

    let requests = server.requests();
    let at = |path: &str| {
        requests
            .iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("no request of {path}: {requests:#?}"))
            .at
    };
    let discovered = at("/apis/kubevirt.io/v1");
    let list = at("/apis/kubevirt.io/v1/namespaces/probe/virtualmachines");
    assert!(
        list < discovered + latency,
        "the list waited for discovery's answer: {requests:#?}"
    );
    // Discovery once: the get knew the resource.
    let discoveries = requests
        .iter()
        .filter(|r| r.path == "/apis/kubevirt.io/v1")
        .count();
    assert_eq!(discoveries, 1);

    // A cluster-scoped resource read in a namespace fails as it did when the read waited: the
    // answer of the read sent beside discovery is dropped.
    let namespaces = ApiResource::new("", "v1", "namespaces");
    let e = live.get(&namespaces, "probe", "probe").await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("cluster-scoped")),
        "{e:?}"
    );
    let e = live.list(&namespaces, "probe", &options).await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("cluster-scoped")),
        "{e:?}"
    );
}

async fn connect(kubeconfig: &Path) -> LiveCluster {
    LiveCluster::connect(&ClusterOptions {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        context: None,
        ..Default::default()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_items_carry_their_type_across_pages_as_fixtures_do() {
    let case = Case::new();
    let (server, kubeconfig) = case.server();
    let live = connect(&kubeconfig).await.with_page_size(7);
    let fixture = FixtureCluster::load(&[case.cluster()], Clock::System).unwrap();

    for (api, namespace, labels) in [
        (configmaps(), "", "app=web"),
        (configmaps(), "bulk-1", "probe=many"),
        (ApiResource::new("", "v1", "namespaces"), "", ""),
        (
            ApiResource::new("kubevirt.io", "v1", "virtualmachines"),
            "probe",
            "app=web",
        ),
    ] {
        let options = ListOptions::parse(labels, "").unwrap();
        let from_server = live.list(&api, namespace, &options).await.unwrap();
        let from_fixture = fixture.list(&api, namespace, &options).await.unwrap();
        assert!(!from_fixture.is_empty());
        // Built-in list items come without apiVersion and kind; the backend puts them back, first.
        assert_eq!(
            from_server, from_fixture,
            "{api} in {namespace:?} with {labels:?}"
        );
        for item in &from_server {
            let keys: Vec<&String> = item.as_object().unwrap().keys().take(2).collect();
            assert_eq!(keys, ["apiVersion", "kind"]);
        }
    }
    let bulk_pages = server
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/namespaces/bulk-1/configmaps")
        .count();
    assert_eq!(bulk_pages, MANY.div_ceil(3).div_ceil(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_keep_their_meaning() {
    let case = Case::new();
    let (server, kubeconfig) = case.server();
    server.forbid("secrets");
    let live = connect(&kubeconfig).await;
    let secrets = ApiResource::new("", "v1", "secrets");

    let e = live.get(&configmaps(), "probe", "nope").await.unwrap_err();
    assert_eq!(
        e,
        KubeError::NotFound("configmaps \"nope\" not found".into())
    );
    let e = live
        .get(&secrets, "probe", "credentials")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::Forbidden(m) if m.contains("cannot get resource \"secrets\"")),
        "{e:?}"
    );
    let a = live.get(&configmaps(), "probe", "a").await.unwrap();
    let e = live
        .create(&configmaps(), "probe", a.clone())
        .await
        .unwrap_err();
    assert_eq!(
        e,
        KubeError::Conflict("configmaps \"a\" already exists".into())
    );
    live.patch(
        &configmaps(),
        "probe",
        "a",
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    let e = live.update(&configmaps(), "probe", a).await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Conflict(m) if m.contains("has been modified")),
        "{e:?}"
    );
    let nameless = json!({"kind": "ConfigMap", "metadata": {"namespace": "probe"}});
    let e = live
        .create(&configmaps(), "probe", nameless)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("name or generateName is required")),
        "{e:?}"
    );

    // Resource types the server does not have, and scopes that cannot be, fail with what discovery
    // says. A group version's first read goes out beside its discovery (its answer dropped); a
    // resource missing from a group version already discovered, or of the wrong scope there, is
    // never sent.
    server.clear_requests();
    let e = live
        .get(&ApiResource::new("", "v1", "widgets"), "probe", "x")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::NotFound(m) if m.contains("widgets")),
        "{e:?}"
    );
    let e = live
        .get(
            &ApiResource::new("example.io", "v1", "widgets"),
            "probe",
            "x",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::NotFound(m) if m.contains("example.io/v1")),
        "{e:?}"
    );
    let e = live
        .get(&ApiResource::new("", "v1", "namespaces"), "probe", "probe")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("cluster-scoped")),
        "{e:?}"
    );
    let e = live.get(&configmaps(), "", "a").await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("namespaced")),
        "{e:?}"
    );
    let e = live
        .get(&configmaps(), "probe", "../secrets/credentials")
        .await
        .unwrap_err();
    assert!(matches!(e, KubeError::Invalid(_)), "{e:?}");
    let sent: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert!(
        sent.iter().all(|p| p == "/api/v1"
            || p == "/apis/example.io/v1"
            || p == "/apis/example.io/v1/namespaces/probe/widgets/x"),
        "{sent:?}"
    );

    // A server that is not there is `other`, naming the request.
    drop(server);
    let e = live.get(&configmaps(), "probe", "a").await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Other(m) if m.contains("/api/v1/namespaces/probe/configmaps/a")),
        "{e:?}"
    );
}

#[test]
fn a_forbidden_answer_reaches_the_action_as_forbidden() {
    let case = Case::new();
    let (server, kubeconfig) = case.server();
    server.forbid("secrets");
    let out = stdout_json(&case.run(
        "test.velero-wasm.io/kube-secret",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    ));
    let answer = out["item"]["report"]["error"].as_str().unwrap();
    assert!(
        answer.starts_with("forbidden: secrets \"credentials\" is forbidden"),
        "{answer}"
    );
}

#[test]
fn a_call_outside_the_grant_never_reaches_the_server() {
    let case = Case::new();
    let (server, kubeconfig) = case.server();
    let out = case.run(
        "test.velero-wasm.io/forbidden-kube",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(r#"Denied("permission denied: module misbehave is not granted get on secrets in namespace probe; the manifest rule that allows it: [[grant.kube]] resources = [\"secrets\"] verbs = [\"get\"] namespaces = [\"@item\"]")"#),
        "{}",
        stderr(&out)
    );
    let sent: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert!(
        sent.iter().all(|p| !p.contains("secrets")),
        "a denied call was sent: {sent:?}"
    );
    // The same module's granted call does reach it: the check above is not vacuous.
    stdout_json(&case.run(
        "test.velero-wasm.io/granted-kube",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    ));
    assert!(server
        .requests()
        .iter()
        .any(|r| r.path == "/api/v1/namespaces/probe/configmaps/b"));
}

#[test]
fn a_recorded_run_replays_with_the_server_stopped() {
    let case = Case::new();
    let (mut server, kubeconfig) = case.server();
    let recorded = stdout_json(&case.run(
        "test.velero-wasm.io/kube-probe",
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--record",
            "probe.jsonl",
        ],
    ));
    server.stop();

    let recording = std::fs::read_to_string(case.path("probe.jsonl")).unwrap();
    let lines: Vec<Value> = recording
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["recording"], "velero-wasm");
    assert!(lines[1..].iter().all(|l| l["capability"] == "kube"));
    assert!(lines
        .iter()
        .any(|l| l["call"]["op"] == "patch" && l["call"]["patchType"] == "json"));

    let replayed = stdout_json(&case.run(
        "test.velero-wasm.io/kube-probe",
        &["--replay", "probe.jsonl"],
    ));
    assert_eq!(replayed, recorded);

    // Strict: an action that makes a call the recording lacks fails, naming the call.
    let out = case.run(
        "test.velero-wasm.io/granted-kube",
        &["--replay", "probe.jsonl"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("get configmaps v1 in namespace probe named \"b\""),
        "{}",
        stderr(&out)
    );

    // A recording against fixtures replays too, and a replay needs no cluster flags.
    let cluster = case.cluster();
    let args = [
        "--cluster",
        cluster.to_str().unwrap(),
        "--record",
        "fixture.jsonl",
        "--now",
        "2026-05-02T10:00:00Z",
    ];
    let recorded = stdout_json(&case.run("test.velero-wasm.io/granted-kube", &args));
    let replayed = stdout_json(&case.run(
        "test.velero-wasm.io/granted-kube",
        &["--replay", "fixture.jsonl"],
    ));
    assert_eq!(replayed["item"], recorded["item"]);
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(case.path("fixture.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["clock"]["start"], "2026-05-02T10:00:00Z");
}

#[test]
fn kubeconfig_and_context_select_the_cluster_as_kubectl_does() {
    let case = Case::new();
    let (_server, kubeconfig) = case.server();
    let kubeconfig = kubeconfig.to_str().unwrap();

    // KUBECONFIG is honoured without --kubeconfig.
    let out = case
        .command(&[
            "run",
            "--action",
            "test.velero-wasm.io/granted-kube",
            "--item",
            "item.json",
            "--backup",
            "backup.json",
            "--modules",
            "modules",
        ])
        .env("KUBECONFIG", kubeconfig)
        .output();
    assert_eq!(
        stdout_json(&out)["item"]["metadata"]["annotations"]["test.velero-wasm.io/found"],
        "b"
    );

    // --context picks another cluster: here one nobody listens on, so the action's call fails.
    let out = case.run(
        "test.velero-wasm.io/granted-kube",
        &["--kubeconfig", kubeconfig, "--context", "elsewhere"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1:9"), "{}", stderr(&out));

    // Configuration that cannot be used is bad input, said clearly.
    let out = case.run(
        "test.velero-wasm.io/granted-kube",
        &["--kubeconfig", kubeconfig, "--context", "nope"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot use the live cluster") && stderr(&out).contains("nope"),
        "{}",
        stderr(&out)
    );
    let out = case.run(
        "test.velero-wasm.io/granted-kube",
        &["--kubeconfig", "missing.yaml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.yaml"), "{}", stderr(&out));
    let out = case.run(
        "test.velero-wasm.io/granted-kube",
        &["--cluster", "cluster", "--kubeconfig", kubeconfig],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "--cluster and --kubeconfig exclude each other"
    );
}

#[test]
fn without_any_cluster_configuration_actions_that_need_none_still_run() {
    let case = Case::new();
    let out = case.run("test.velero-wasm.io/echo", &[]);
    assert_eq!(stdout_json(&out)["item"]["metadata"]["name"], "item");
    let out = case.run("test.velero-wasm.io/granted-kube", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no Kubernetes cluster is configured"),
        "{}",
        stderr(&out)
    );
    let out = case.command(&["actions", "--modules", "modules"]).output();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("test.velero-wasm.io/kube-probe"));
}

/// A server that answers one path (or, for a path ending in `/`, every path under it) with `status`
/// and a body that never ends (JSON whitespace, in chunks), and everything else as a minimal API
/// server would (the `/api/v1` discovery of ConfigMaps, or 404). It counts the bytes of endless body
/// it got out before the client hung up.
struct EndlessServer {
    addr: std::net::SocketAddr,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl EndlessServer {
    fn start(endless_path: &'static str, status: &'static str) -> EndlessServer {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = std::sync::Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let counter = counter.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut stream = stream;
                    loop {
                        // One request: its first line names the path; GETs have no body.
                        let mut first = String::new();
                        if reader.read_line(&mut first).unwrap_or(0) == 0 {
                            return;
                        }
                        let path = first.split(' ').nth(1).unwrap_or("").to_string();
                        let mut line = String::new();
                        while reader.read_line(&mut line).unwrap_or(0) > 2 {
                            line.clear();
                        }
                        let endless = path == endless_path
                            || (endless_path.ends_with('/') && path.starts_with(endless_path));
                        if endless {
                            let head = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n");
                            if stream.write_all(head.as_bytes()).is_err() {
                                return;
                            }
                            let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
                            while stream.write_all(chunk.as_bytes()).is_ok() {
                                counter.fetch_add(0x10000, Ordering::Relaxed);
                            }
                            return;
                        }
                        let (status, body) = if path == "/api/v1" {
                            (
                                "200 OK",
                                r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get","list"]}]}"#,
                            )
                        } else {
                            (
                                "404 Not Found",
                                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"not found","reason":"NotFound","code":404}"#,
                            )
                        };
                        let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                        if stream.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        EndlessServer { addr, sent }
    }

    /// A kubeconfig in `dir` that points at this server.
    fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: endless\n\
             clusters:\n- name: endless\n  cluster:\n    server: http://{}\n\
             users:\n- name: tester\n  user:\n    token: test-token\n\
             contexts:\n- name: endless\n  context:\n    cluster: endless\n    user: tester\n",
            self.addr
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A server that never ends an answer (an object, a group version's discovery, the body of a `500`)
/// costs the call that asked and no more than the cap of what is read: the call fails saying so,
/// and the server got out at most the cap plus what the loopback socket buffers hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_answer_fails_its_call_after_a_bounded_read() {
    use velero_wasm::{MAX_ANSWER_BYTES, MAX_ERROR_BYTES};
    // Loopback socket buffers (sender and receiver) hold a few MiB at most.
    const BUFFERS: u64 = 16 << 20;
    let object = "/api/v1/namespaces/probe/configmaps/a";
    for (what, path, status, cap, says) in [
        (
            "an object",
            object,
            "200 OK",
            MAX_ANSWER_BYTES,
            "answer is longer than 16 MiB",
        ),
        (
            "discovery",
            "/api/v1",
            "200 OK",
            MAX_ANSWER_BYTES,
            "answer is longer than 16 MiB",
        ),
        (
            "an error body",
            object,
            "500 Internal Server Error",
            MAX_ERROR_BYTES,
            "HTTP 500",
        ),
    ] {
        let server = EndlessServer::start(path, status);
        let dir = tempfile::tempdir().unwrap();
        let live = connect(&server.kubeconfig(dir.path())).await;
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            live.get(&configmaps(), "probe", "a"),
        )
        .await
        .unwrap_or_else(|_| panic!("{what}: the host is still reading an endless answer"));
        let error = answer.unwrap_err().to_string();
        assert!(error.contains(says), "{what}: {error}");
        let sent = server.sent();
        assert!(
            sent <= cap + BUFFERS,
            "{what}: the server got {sent} bytes out, more than the cap of {cap} and the buffers"
        );
    }
}

/// One read-all of 24 gets, each answered without end, holds at most the module's memory (64 MiB)
/// of answers, not 24 answers of up to 16 MiB each (384 MiB; 64 such reads took a plugin past 1 GiB):
/// the bytes are charged as they arrive, the batch is refused once they would pass the module's
/// memory, and the call is stopped saying so.
#[test]
fn a_read_all_holds_no_more_answers_than_the_module_s_memory() {
    let case = Case::new();
    let wasm = std::fs::read(case.path("modules/kube-probe.wasm")).unwrap();
    let sha = format!("{:x}", Sha256::digest(&wasm));
    std::fs::write(
        case.path("modules/kube-probe.toml"),
        format!(
            "sha256 = \"{sha}\"\n[limits]\nmemory = \"64MiB\"\n\n[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n\n[settings]\nreads = \"24\"\n"
        ),
    )
    .unwrap();
    let server = EndlessServer::start("/api/v1/namespaces/probe/configmaps/", "200 OK");
    let kubeconfig = server.kubeconfig(case.dir.path());
    let out = case.run(
        "test.velero-wasm.io/kube-read-all",
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    );
    let error = stderr(&out);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        error.contains("the answers would take more than the module's memory limit of 64 MiB"),
        "{error}"
    );
}
