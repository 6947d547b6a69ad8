//! The live `kube` backend against a real kube-apiserver with etcd and RBAC (tests/support/
//! kube_apiserver.rs, one per test process, each test in namespaces of its own): the twins of the
//! loopback-imitation tests whose point is what the real server does.
//!
//! - A run against the real server prints what the same run against fixtures prints: every call
//!   (get, list by labels and fields, across namespaces in pages of 500, create, merge and JSON
//!   patch, update, delete) and every error the probe provokes keeps its meaning.
//! - The server's errors reach `LiveCluster` as NotFound, Conflict, Forbidden (RBAC, on a service
//!   account's token) and Invalid, with the server's messages.
//! - List items carry their type, pages of 7 included, built-in and custom resources alike.
//! - Every packed stock module is server-side applied as a ConfigMap (again: unchanged) and served
//!   by a plugin that runs as a service account holding only what `velero-wasm rbac` printed; the
//!   real size limits refuse a ConfigMap over 1 MiB and annotations over 256 KiB.
//! - `velero-wasm rbac`'s output, applied, is enforced by the real authorizer on a service-account
//!   token: every need of the stock grants allowed, anything beyond refused (403).
//! - Read views and batched reads answer a VM backup from the real server as without them, with
//!   fewer requests.
//! - The version floor outlives the pod: kept in its Secret by a plugin holding what `rbac
//!   --trusted-keys` printed, it makes a new pod refuse an older signed version.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde_json::{json, Value};
use support::kube_apiserver::{shared, KubeApiServer};
use support::run::Run;
use velero_wasm::backend::Backend;
use velero_wasm::Clock;
use velero_wasm::FixtureCluster;
use velero_wasm::{ApiResource, KubeAnswer, KubeApi, KubeCall, KubeError, ListOptions, Patch};
use velero_wasm::{ClusterOptions, LiveCluster};

/// How many ConfigMaps labelled `probe=many` the server holds, in namespaces bulk-0..2: more than
/// two pages of 500.
const MANY: usize = 1100;

/// The `probe=many` ConfigMaps, as objects.
fn many() -> Vec<Value> {
    (0..MANY)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("many-{i:04}"), "namespace": format!("bulk-{}", i % 3),
                                "labels": {"probe": "many"}},
                   "data": {"name": format!("many-{i:04}")}})
        })
        .collect()
}

/// The server, with the `probe=many` ConfigMaps stored (once per process).
fn server_with_many() -> &'static KubeApiServer {
    static MANY_STORED: OnceLock<()> = OnceLock::new();
    let server = shared();
    MANY_STORED.get_or_init(|| server.load(&many()));
    server
}

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "configmaps")
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

/// One probe scene: namespace `ns` (and `other`) on the real server holding the probe's ConfigMaps
/// and Secret, the same objects as a fixture cluster directory, the test components as modules, the
/// item (in `ns`) and Backup, and an admin kubeconfig.
struct Probe {
    dir: tempfile::TempDir,
    ns: String,
}

impl Probe {
    fn new() -> Probe {
        let server = server_with_many();
        let ns = server.namespace("probe");
        let other = server.namespace("other");
        let dir = tempfile::tempdir().unwrap();
        let probe = Probe { dir, ns };
        for sub in ["cluster", "modules", "home"] {
            std::fs::create_dir_all(probe.path(sub)).unwrap();
        }
        let ns = probe.ns.as_str();
        let cm = |ns: &str, name: &str, labels: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": ns, "labels": labels},
                   "data": {"name": name}})
        };
        let objects = vec![
            cm(ns, "a", json!({"app": "web", "tier": "front"})),
            cm(ns, "b", json!({"app": "web", "tier": "back"})),
            cm(ns, "c", json!({"app": "db", "tier": "back"})),
            cm(
                ns,
                "legacy",
                json!({"app": "web", "tier": "front", "legacy": "true"}),
            ),
            cm(&other, "a", json!({"app": "web"})),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "credentials", "namespace": ns},
                   "data": {"password": "aHVudGVyMg=="}}),
        ];
        server.load(&objects);
        // The fixture twin holds the same objects, with what a server sets on them (the probe
        // reports whether uid, resourceVersion and creationTimestamp are there), the namespaces as
        // objects too, and the bulk.
        let mut fixture: Vec<Value> = objects
            .into_iter()
            .enumerate()
            .map(|(i, mut o)| {
                o["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
                o["metadata"]["resourceVersion"] = json!("7");
                o["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
                o
            })
            .collect();
        fixture.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        fixture.extend(many());
        std::fs::write(
            probe.path("cluster/objects.json"),
            Value::Array(fixture).to_string(),
        )
        .unwrap();
        support::add_module(
            &probe.path("modules"),
            "kube-probe",
            "kube-probe",
            "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"*\"]\nnamespaces = [\"*\"]\n\n\
             [[grant.kube]]\nresources = [\"secrets\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n\n\
             [settings]\nsecret = \"credentials\"\n",
        );
        support::add_module(
            &probe.path("modules"),
            "misbehave",
            "misbehave",
            "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n\n\
             [settings]\ntarget = \"b\"\n",
        );
        let item = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "item", "namespace": ns, "labels": {"app": "item"}}, "data": {"k": "v"}});
        std::fs::write(probe.path("item.json"), item.to_string()).unwrap();
        let backup = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "nightly", "namespace": "velero"}, "spec": {"includedNamespaces": [ns]}});
        std::fs::write(probe.path("backup.json"), backup.to_string()).unwrap();
        server.admin_kubeconfig_in(ns, &probe.path("kubeconfig"));
        probe
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `velero-wasm run --action ACTION` on the item, with `args` for the cluster.
    fn run(&self, action: &str, args: &[&str]) -> Output {
        Run::cli([
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
        .current_dir(self.dir.path())
        .env("HOME", self.path("home"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
    }

    fn on_fixtures(&self, action: &str) -> Value {
        stdout_json(&self.run(action, &["--cluster", "cluster"]))
    }

    fn on_server(&self, action: &str) -> Value {
        stdout_json(&self.run(action, &["--kubeconfig", "kubeconfig"]))
    }
}

#[test]
fn a_run_against_the_real_api_server_prints_what_the_run_against_fixtures_prints() {
    let probe = Probe::new();
    let ns = &probe.ns;
    let fixture = probe.on_fixtures("test.velero-wasm.io/kube-probe");
    let live = probe.on_server("test.velero-wasm.io/kube-probe");

    // The probe really exercised every call (a report of errors would compare equal, too).
    let report = &live["item"]["report"];
    assert_eq!(report["get"]["object"]["data"]["name"], "a");
    assert_eq!(
        report["getMissing"]["error"],
        "not-found: configmaps \"missing\" not found"
    );
    assert_eq!(
        report["listLabels"],
        json!([
            format!("ConfigMap {ns}/a"),
            format!("ConfigMap {ns}/b"),
            format!("ConfigMap {ns}/legacy")
        ])
    );
    assert_eq!(report["listBadSelector"]["error"], "invalid");
    assert_eq!(report["listMany"]["count"], MANY);
    assert_eq!(report["listMany"]["first"], "ConfigMap bulk-0/many-0000");
    assert_eq!(report["listMany"]["sorted"], true);
    assert_eq!(
        report["createAgain"]["error"],
        "conflict: configmaps \"created\" already exists"
    );
    assert!(report["updateStale"]["error"]
        .as_str()
        .unwrap()
        .starts_with("conflict: Operation cannot be fulfilled"));
    assert_eq!(report["createGenerated"]["prefixed"], true);

    // Every answer is the fixture cluster's, key by key (so a difference names its call).
    let fixture_report = fixture["item"]["report"].as_object().unwrap();
    for (call, answer) in report.as_object().unwrap() {
        assert_eq!(
            Some(answer),
            fixture_report.get(call),
            "{call}: the real server (left) and fixtures (right) differ"
        );
    }
    assert_eq!(live["item"], fixture["item"]);
    assert_eq!(live["additionalItems"], fixture["additionalItems"]);
    assert_eq!(live["additionalItems"].as_array().unwrap().len(), 3);

    // Both runs report the same writes (the stored objects differ only in what a server assigns).
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
                json!([
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
    assert!(!summary(&live).is_empty());
    assert_eq!(summary(&live), summary(&fixture));

    // The writes are really there: the generated ConfigMap exists, `created` is gone.
    let server = shared();
    let listed = server
        .get(&format!("/api/v1/namespaces/{ns}/configmaps"))
        .unwrap();
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("gen-")), "{names:?}");
    assert!(!names.contains(&"created"), "{names:?}");

    // The misbehave component's granted read gives the same answer too.
    let fixture = probe.on_fixtures("test.velero-wasm.io/granted-kube");
    let live = probe.on_server("test.velero-wasm.io/granted-kube");
    assert_eq!(
        live["item"]["metadata"]["annotations"]["test.velero-wasm.io/found"],
        "b"
    );
    assert_eq!(live["item"], fixture["item"]);

    // A run recorded against the real server replays without it, answer for answer.
    let recorded = stdout_json(&probe.run(
        "test.velero-wasm.io/kube-probe",
        &["--kubeconfig", "kubeconfig", "--record", "probe.jsonl"],
    ));
    let replayed = stdout_json(&probe.run(
        "test.velero-wasm.io/kube-probe",
        &["--replay", "probe.jsonl"],
    ));
    assert_eq!(replayed, recorded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_items_from_the_real_server_carry_their_type_across_pages() {
    let server = server_with_many();
    let ns = server.namespace("widgets");
    server.custom_resource("test.velero-wasm.io", "Widget", true, &["v1".to_string()]);
    let widgets: Vec<Value> = (0..10)
        .map(|i| {
            json!({"apiVersion": "test.velero-wasm.io/v1", "kind": "Widget",
                   "metadata": {"name": format!("w{i}"), "namespace": ns, "labels": {"app": "web"}},
                   "spec": {"size": i}})
        })
        .collect();
    server.load(&widgets);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("objects.json"),
        Value::Array(many().into_iter().chain(widgets).collect()).to_string(),
    )
    .unwrap();
    let fixture = FixtureCluster::load(&[dir.path().to_path_buf()], Clock::System).unwrap();
    let live = connect(&server.admin_kubeconfig()).await.with_page_size(7);

    for (api, namespace, labels) in [
        (configmaps(), "bulk-1", "probe=many"),
        (configmaps(), "", "probe=many"),
        (
            ApiResource::new("test.velero-wasm.io", "v1", "widgets"),
            ns.as_str(),
            "app=web",
        ),
    ] {
        let options = ListOptions::parse(labels, "").unwrap();
        let from_server = live.list(&api, namespace, &options).await.unwrap();
        let from_fixture = fixture.list(&api, namespace, &options).await.unwrap();
        assert!(!from_fixture.is_empty());
        assert_eq!(from_server.len(), from_fixture.len(), "{api} {namespace}");
        for (real, fixed) in from_server.iter().zip(&from_fixture) {
            // Built-in list items come without apiVersion and kind; the backend puts them back, first.
            let keys: Vec<&String> = real.as_object().unwrap().keys().take(2).collect();
            assert_eq!(keys, ["apiVersion", "kind"]);
            for field in [
                "/apiVersion",
                "/kind",
                "/metadata/namespace",
                "/metadata/name",
                "/data",
                "/spec",
            ] {
                assert_eq!(real.pointer(field), fixed.pointer(field), "{api} {field}");
            }
        }
    }
    let namespaces = live
        .list(
            &ApiResource::new("", "v1", "namespaces"),
            "",
            &ListOptions::parse("", "").unwrap(),
        )
        .await
        .unwrap();
    assert!(namespaces
        .iter()
        .all(|n| n["kind"] == "Namespace" && n["apiVersion"] == "v1"));
    assert!(namespaces
        .iter()
        .any(|n| n["metadata"]["name"] == "kube-system"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_server_s_errors_keep_their_meaning() {
    let server = shared();
    let ns = server.namespace("errors");
    server.load(&[
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": ns}, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "credentials", "namespace": ns}}),
    ]);
    let live = connect(&server.admin_kubeconfig()).await;

    let e = live.get(&configmaps(), &ns, "nope").await.unwrap_err();
    assert_eq!(
        e,
        KubeError::NotFound("configmaps \"nope\" not found".into())
    );
    let a = live.get(&configmaps(), &ns, "a").await.unwrap();
    let mut again = a.clone();
    again["metadata"]
        .as_object_mut()
        .unwrap()
        .shift_remove("resourceVersion");
    let e = live.create(&configmaps(), &ns, again).await.unwrap_err();
    assert_eq!(
        e,
        KubeError::Conflict("configmaps \"a\" already exists".into())
    );
    // The object as read, resourceVersion and all, is refused before the name is looked at: a 500
    // (InternalError) that reaches the action as `other` (fixtures and the imitation say conflict).
    let e = live
        .create(&configmaps(), &ns, a.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::Other(m) if m.contains("resourceVersion should not be set on objects to be created")),
        "{e:?}"
    );
    live.patch(
        &configmaps(),
        &ns,
        "a",
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await
    .unwrap();
    let e = live.update(&configmaps(), &ns, a).await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Conflict(m) if m.contains("the object has been modified")),
        "{e:?}"
    );
    let nameless = json!({"kind": "ConfigMap", "metadata": {"namespace": ns}});
    let e = live.create(&configmaps(), &ns, nameless).await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("name or generateName is required")),
        "{e:?}"
    );
    let e = live
        .patch(&configmaps(), &ns, "missing", &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        KubeError::NotFound("configmaps \"missing\" not found".into())
    );
    // An invalid object: a label value with a space.
    let bad = json!({"metadata": {"name": "bad", "namespace": ns, "labels": {"k": "not valid"}}});
    let e = live.create(&configmaps(), &ns, bad).await.unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("metadata.labels")),
        "{e:?}"
    );

    // Forbidden, by RBAC: a service account bound to nothing.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.service_account(&ns, "nobody", &kubeconfig);
    let nobody = connect(&kubeconfig).await;
    let secrets = ApiResource::new("", "v1", "secrets");
    let e = nobody.get(&secrets, &ns, "credentials").await.unwrap_err();
    assert_eq!(
        e,
        KubeError::Forbidden(format!(
            "secrets \"credentials\" is forbidden: User \"system:serviceaccount:{ns}:nobody\" \
             cannot get resource \"secrets\" in API group \"\" in the namespace \"{ns}\""
        ))
    );

    // Resource types the server does not have, and scopes that cannot be, fail as with the imitation.
    let e = live
        .get(&ApiResource::new("", "v1", "widgets"), &ns, "x")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::NotFound(m) if m.contains("widgets")),
        "{e:?}"
    );
    let e = live
        .get(&ApiResource::new("example.io", "v1", "widgets"), &ns, "x")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::NotFound(m) if m.contains("example.io/v1")),
        "{e:?}"
    );
    let e = live
        .get(&ApiResource::new("", "v1", "namespaces"), &ns, &ns)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, KubeError::Invalid(m) if m.contains("cluster-scoped")),
        "{e:?}"
    );
}

/// Every stock module, exported and packed by the CLI.
fn packed_stock_modules(dir: &Path, namespace: &str) -> Vec<Value> {
    let modules = dir.join("stock");
    for name in velero_wasm::modules::stock_names() {
        let out = support::velero_wasm(&["module", "export", name, modules.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "export {name}: {}",
            support::stderr(&out)
        );
    }
    let packed = dir.join("packed.yaml");
    let out = support::velero_wasm(&[
        "module",
        "pack",
        modules.to_str().unwrap(),
        "--namespace",
        namespace,
        "--out",
        packed.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "pack: {}", support::stderr(&out));
    let text = std::fs::read_to_string(&packed).unwrap();
    let documents: Vec<Value> = serde_norway::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .filter(|d: &Value| !d.is_null())
        .collect();
    assert_eq!(documents.len(), velero_wasm::modules::stock_names().len());
    documents
}

/// `velero-wasm rbac` for the stock modules, Velero in `namespace` as service account `velero`.
fn rbac_documents(namespace: &str) -> Vec<Value> {
    let out = support::velero_wasm(&[
        "rbac",
        "--velero-namespace",
        namespace,
        "--service-account",
        "velero",
        "--name",
        &format!("velero-wasm-{namespace}"),
    ]);
    assert!(out.status.success(), "rbac: {}", support::stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .filter(|d: &Value| !d.is_null())
        .collect()
}

/// Applies `rbac`'s documents as the admin, creating the namespaces its Roles name first.
fn apply_rbac(server: &KubeApiServer, documents: &[Value]) {
    for document in documents {
        if let Some(namespace) = document["metadata"]["namespace"].as_str() {
            server.create_namespace(namespace);
        }
        server.apply(document);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_packed_stock_module_applied_server_side_serves_from_its_configmap_under_rbac() {
    let server = shared();
    let velero = server.namespace("velero");
    let scratch = tempfile::tempdir().unwrap();
    let packed = packed_stock_modules(scratch.path(), &velero);

    // Server-side apply of each: stored as packed; applied again unchanged, nothing is written.
    for configmap in &packed {
        let stored = server.apply(configmap);
        assert_eq!(stored["data"], configmap["data"]);
        assert_eq!(stored["binaryData"], configmap["binaryData"]);
        assert_eq!(
            stored["metadata"]["labels"],
            configmap["metadata"]["labels"]
        );
        let again = server.apply(configmap);
        assert_eq!(
            again["metadata"]["resourceVersion"], stored["metadata"]["resourceVersion"],
            "an unchanged apply wrote {}",
            configmap["metadata"]["name"]
        );
    }

    // A client-side `kubectl apply` keeps the object as JSON in an annotation: the real annotation
    // limit refuses exactly the modules `pack` advised to apply server-side (signing).
    let elsewhere = server.namespace("client-side");
    let mut refused = Vec::new();
    for configmap in &packed {
        let mut annotated = configmap.clone();
        annotated["metadata"]["namespace"] = json!(elsewhere);
        let json = annotated
            .to_string()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026");
        annotated["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": format!("{json}\n")});
        let (collection, _) = server.paths(&annotated);
        let answer = server.request("POST", &collection, Some(&annotated));
        let name = configmap["metadata"]["name"].as_str().unwrap();
        match answer.status {
            201 => {}
            422 => {
                assert_eq!(
                    answer.body["message"],
                    format!("ConfigMap \"{name}\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"),
                );
                refused.push(name.to_string());
            }
            other => panic!("{name}: {other} {}", answer.body),
        }
    }
    assert_eq!(refused, ["velero-wasm-module-signing"]);

    // Velero's service account holds exactly what `rbac` printed.
    let rbac = rbac_documents(&velero);
    apply_rbac(server, &rbac);
    let kubeconfig = scratch.path().join("velero.kubeconfig");
    server.service_account(&velero, "velero", &kubeconfig);
    let state = scratch.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let start = || {
        support::plugin::Plugin::reading_configmaps(
            &kubeconfig,
            &state,
            &velero,
            &[("VELERO_WASM_STOCK", "none")],
        )
    };
    let plugin = start();
    let listed: Vec<String> = plugin.list().await.into_iter().map(|p| p.name).collect();
    assert!(
        listed.contains(&"kubevirt-velero-plugin/backup-virtualmachine-action".to_string()),
        "{listed:?}"
    );
    let session = plugin.shutdown().await;
    let line = session
        .log_lines()
        .into_iter()
        .find(|l| l["@message"] == "modules in service")
        .unwrap_or_else(|| panic!("no `modules in service` line:\n{}", session.stderr));
    assert_eq!(
        line["configmaps"],
        format!("{} written, 0 cached", packed.len()),
        "{line:?}"
    );
    let modules = line["modules"].as_str().unwrap();
    for configmap in &packed {
        let name = configmap["metadata"]["name"].as_str().unwrap();
        assert!(
            modules.contains(&format!("ConfigMap {name}@")),
            "{name}: {line:?}"
        );
    }
    assert!(
        !session.stderr.contains("\"@level\":\"warn\"")
            && !session.stderr.contains("\"@level\":\"error\""),
        "{}",
        session.stderr
    );

    // Its Role in Velero's namespace unbound, the list is forbidden by RBAC: the modules of the last
    // successful list serve, and the log says why.
    for binding in rbac
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" && d["metadata"]["namespace"] == velero.as_str())
    {
        let (_, path) = server.paths(binding);
        assert_eq!(server.request("DELETE", &path, None).status, 200);
    }
    let plugin = start();
    let again: Vec<String> = plugin.list().await.into_iter().map(|p| p.name).collect();
    assert_eq!(again, listed);
    let session = plugin.shutdown().await;
    let fallback = session
        .log_lines()
        .into_iter()
        .find(|l| {
            l["@message"]
                .as_str()
                .unwrap()
                .contains("cannot list the module ConfigMaps")
        })
        .unwrap_or_else(|| panic!("no line about the list:\n{}", session.stderr));
    assert!(
        fallback
            .values()
            .any(|v| v.as_str().is_some_and(|t| t.contains("forbidden"))),
        "{fallback:?}"
    );
}

#[test]
fn the_real_size_limits_refuse_what_they_refuse() {
    let server = shared();
    let ns = server.namespace("limits");
    let configmap = |name: &str, data: Value, annotations: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns, "annotations": annotations}, "data": data})
    };
    // Data: at most 1 MiB (1,048,576 bytes) of values, keys not counted.
    let at = configmap("at-limit", json!({"k": "x".repeat(1 << 20)}), json!({}));
    assert_eq!(server.try_apply(&at).status, 201);
    let over = configmap(
        "over-limit",
        json!({"k": "x".repeat((1 << 20) + 1)}),
        json!({}),
    );
    let answer = server.try_apply(&over);
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.body["reason"], "Invalid");
    let message = answer.body["message"].as_str().unwrap();
    assert_eq!(
        message,
        "ConfigMap \"over-limit\" is invalid: []: Too long: may not be more than 1048576 bytes"
    );
    // Annotations: at most 256 KiB, keys and values together.
    let key = "test.velero-wasm.io/a";
    let fits = configmap(
        "annotated",
        json!({}),
        json!({key: "x".repeat((256 << 10) - key.len())}),
    );
    assert_eq!(server.try_apply(&fits).status, 201);
    let too_many = configmap(
        "over-annotated",
        json!({}),
        json!({key: "x".repeat((256 << 10) - key.len() + 1)}),
    );
    let answer = server.try_apply(&too_many);
    assert_eq!(answer.status, 422, "{}", answer.body);
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.contains("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{message}"
    );
    // A module ConfigMap over the limit, as `module pack` would refuse to write it, is refused too.
    let packed = configmap("packed-over", json!({}), json!({}));
    let mut packed = packed;
    use base64::Engine as _;
    packed["binaryData"] = json!({"big.wasm": base64::engine::general_purpose::STANDARD.encode(vec![0u8; (1 << 20) + 1])});
    let answer = server.try_apply(&packed);
    assert_eq!(answer.status, 422, "{}", answer.body);
}

#[test]
fn rbac_s_output_applied_is_enforced_by_the_real_authorizer() {
    let server = shared();
    let velero = server.namespace("velero");
    let documents = rbac_documents(&velero);
    apply_rbac(server, &documents);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("velero.kubeconfig");
    server.service_account(&velero, "velero", &kubeconfig);
    let anywhere = server.namespace("anywhere");

    // The needs, from the stock manifests' grants: (verb, resource.group, namespace) where "" is
    // cluster scope and "*" any namespace.
    let mut needs: Vec<(String, String, String)> = vec![
        // The host's own: module ConfigMaps in Velero's namespace, and the state it writes on them.
        ("list".into(), "configmaps".into(), velero.clone()),
        ("patch".into(), "configmaps".into(), velero.clone()),
        ("create".into(), "events".into(), velero.clone()),
    ];
    for name in velero_wasm::modules::stock_names() {
        let manifest =
            std::fs::read_to_string(support::root().join(format!("actions/{name}/{name}.toml")))
                .unwrap_or_default();
        let manifest: toml::Value = toml::from_str(&manifest).unwrap();
        let rules = manifest
            .get("grant")
            .and_then(|g| g.get("kube"))
            .and_then(toml::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for rule in rules {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            let verbs = match list("verbs").contains(&"*".to_string()) {
                true => ["get", "list", "create", "update", "patch", "delete"]
                    .map(String::from)
                    .to_vec(),
                false => list("verbs"),
            };
            for resource in list("resources") {
                for namespace in list("namespaces") {
                    let namespace = match namespace.as_str() {
                        "@velero" => velero.clone(),
                        "" => String::new(),
                        "*" | "@item" => "*".to_string(),
                        glob if glob.contains('*') => "*".to_string(),
                        named => named.to_string(),
                    };
                    for verb in &verbs {
                        needs.push((verb.clone(), resource.clone(), namespace.clone()));
                    }
                }
            }
        }
    }
    assert!(needs.len() > 10, "{needs:?}");
    let split = |resource: &str| -> (String, String) {
        match resource.split_once('.') {
            Some((r, g)) => (r.to_string(), g.to_string()),
            None => (resource.to_string(), String::new()),
        }
    };
    // What RBAC can express: a grant for any namespace or cluster scope becomes a ClusterRole, which
    // reaches every namespace and cluster scope; a named namespace's, a Role there.
    let covered = |verb: &str, resource: &str, namespace: &str| {
        needs.iter().any(|(v, r, n)| {
            v == verb && r == resource && (n == namespace || n == "*" || n.is_empty())
        })
    };
    // Every need allowed.
    for (verb, resource, namespace) in &needs {
        let (r, g) = split(resource);
        let ns = if namespace == "*" {
            anywhere.as_str()
        } else {
            namespace.as_str()
        };
        assert!(
            server.can(&kubeconfig, verb, &g, &r, ns, ""),
            "{verb} {resource} in {namespace:?} is needed by a grant but RBAC refuses it"
        );
    }
    // Anything beyond refused: the verbs no grant names, each needed resource in a namespace no
    // grant of its verb reaches, and resources no grant names.
    let mut beyond = Vec::new();
    for (_, resource, namespace) in &needs {
        for verb in [
            "watch",
            "deletecollection",
            "escalate",
            "bind",
            "impersonate",
        ] {
            beyond.push((verb.to_string(), resource.clone(), namespace.clone()));
        }
        for verb in ["get", "list", "create", "update", "patch", "delete"] {
            for elsewhere in [anywhere.as_str(), "kube-system", ""] {
                beyond.push((verb.to_string(), resource.clone(), elsewhere.to_string()));
            }
        }
    }
    for (verb, resource) in [
        ("get", "secrets"),
        ("create", "clusterroles.rbac.authorization.k8s.io"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
        ("list", "nodes"),
        ("create", "serviceaccounts/token"),
    ] {
        for namespace in [anywhere.as_str(), "kube-system", velero.as_str()] {
            beyond.push((
                verb.to_string(),
                resource.to_string(),
                namespace.to_string(),
            ));
        }
    }
    let mut refused = 0;
    for (verb, resource, namespace) in beyond {
        let ns = if namespace == "*" {
            anywhere.clone()
        } else {
            namespace
        };
        if covered(&verb, &resource, &ns) {
            continue;
        }
        let (r, g) = match resource.split_once('/') {
            Some((r, _)) => split(r),
            None => split(&resource),
        };
        let allowed = server.can(&kubeconfig, &verb, &g, &r, &ns, "");
        assert!(
            !allowed,
            "{verb} {resource} in {ns:?} is allowed; no grant needs it"
        );
        refused += 1;
    }
    assert!(refused > 50, "only {refused} refusals tried");

    // And real requests: a need answered, one beyond it refused with 403 Forbidden.
    let answer = server.request_as(
        &kubeconfig,
        "GET",
        &format!("/api/v1/namespaces/{velero}/configmaps"),
        None,
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = server.request_as(
        &kubeconfig,
        "GET",
        "/api/v1/namespaces/kube-system/secrets",
        None,
        None,
    );
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert_eq!(answer.body["reason"], "Forbidden");
    let answer = server.request_as(
        &kubeconfig,
        "DELETE",
        &format!("/api/v1/namespaces/{velero}/configmaps"),
        None,
        None,
    );
    assert_eq!(answer.status, 403, "deletecollection: {}", answer.body);
}

/// A backend that counts the calls reaching the real server.
struct Counting {
    inner: LiveCluster,
    calls: AtomicUsize,
}

#[async_trait]
impl Backend<KubeCall> for Counting {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(call).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_views_answer_a_vm_backup_from_the_real_server_as_without_them() {
    use velero_wasm::action::{BackupRequest, ItemRef};
    use velero_wasm::modules::scan_directory;
    use velero_wasm::runtime::Runtime;
    use velero_wasm::{Bounds, ReadViews};
    use velero_wasm::{Environment, Services};

    let server = shared();
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let objects: Vec<Value> = velero_wasm::documents::read_objects(&[fixtures.join("cluster")])
        .unwrap()
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    server.load(&objects);

    let manifest =
        std::fs::read_to_string(support::root().join("actions/kubevirt/kubevirt.toml")).unwrap();
    let modules = support::module_dir("kubevirt", "kubevirt", &manifest);
    let mut outcomes = Vec::new();
    for views in [false, true] {
        let backend = Arc::new(Counting {
            inner: connect(&server.admin_kubeconfig()).await,
            calls: AtomicUsize::new(0),
        });
        let mut services = Services::new(
            backend.clone(),
            Clock::System,
            Environment::from_config(&velero_wasm::config::Config::from_env()),
        );
        if views {
            services.views = Some(ReadViews::new(Bounds::default()));
        }
        let runtime = Runtime::new(services).unwrap();
        let scan = scan_directory(modules.path(), None).unwrap();
        assert!(runtime.load_all(scan.modules).await.is_empty());
        let entry = runtime
            .resolve("kubevirt-velero-plugin/backup-virtualmachine-action")
            .unwrap();
        let backup = std::fs::read_to_string(fixtures.join("velero/backup-nightly.json")).unwrap();
        let mut described = Vec::new();
        for vm in ["vm-fedora-web-01", "vm-win2k22-sql", "vm-rhel9-cache-02"] {
            // The VM as the server holds it (its uid and resourceVersion are the server's).
            let fixture: Value = serde_json::from_str(
                &std::fs::read_to_string(fixtures.join(format!("cluster/{vm}.json"))).unwrap(),
            )
            .unwrap();
            let (_, path) = server.paths(&fixture);
            let item = server.get(&path).unwrap().to_string();
            let id = ItemRef::parse(&item).unwrap();
            let request = BackupRequest {
                item,
                backup: backup.clone(),
            };
            // rhel9-cache-02 reports running without a VMI: its backup fails, the same either way.
            described.push(match runtime.backup(&entry, id, request).await {
                Ok(outcome) => (
                    outcome.item.clone(),
                    outcome
                        .additional_items
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                ),
                Err(e) => (format!("error: {e}"), Vec::new()),
            });
        }
        outcomes.push((described, backend.calls.load(Ordering::SeqCst)));
    }
    let (without, calls_without) = &outcomes[0];
    let (with, calls_with) = &outcomes[1];
    assert!(
        without[2]
            .0
            .contains("its VirtualMachineInstance cannot be read"),
        "{:?}",
        without[2].0
    );
    assert!(
        without[0].1.len() > 5,
        "the running VM's backup names its additional items: {:?}",
        without[0].1
    );
    assert_eq!(with, without, "views changed an answer");
    assert!(
        calls_with < calls_without,
        "views read {calls_with} times, without {calls_without}"
    );
    println!("requests to the real server: {calls_without} without views, {calls_with} with");
}

/// `module pack --sign` of stock `agent` as version `version`, for Velero in `namespace`: the one
/// ConfigMap, signed with `key`.
fn signed_agent(dir: &Path, namespace: &str, key: &Path, version: &str) -> Value {
    let modules = dir.join(format!("agent-{version}"));
    let out = support::velero_wasm(&["module", "export", "agent", modules.to_str().unwrap()]);
    assert!(out.status.success(), "export: {}", support::stderr(&out));
    let manifest = modules.join("agent.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text: String = text
        .lines()
        .map(|line| match line.starts_with("version = ") {
            true => format!("version = \"{version}\"\n"),
            false => format!("{line}\n"),
        })
        .collect();
    std::fs::write(&manifest, text).unwrap();
    let packed = dir.join(format!("agent-{version}.yaml"));
    let out = support::velero_wasm(&[
        "module",
        "pack",
        modules.to_str().unwrap(),
        "--namespace",
        namespace,
        "--sign",
        key.to_str().unwrap(),
        "--out",
        packed.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "pack: {}", support::stderr(&out));
    let text = std::fs::read_to_string(&packed).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// The version floor outlives the pod through the real server: a plugin that runs as the service
/// account holding what `rbac --trusted-keys` printed records the signed version it served in the
/// Secret `velero-wasm-version-floor`, and a plugin with an empty state directory (a new pod) then
/// refuses an older signed version of the module that the ConfigMap writer put back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_floor_outlives_the_pod_through_the_real_server_under_rbac() {
    let server = shared();
    let velero = server.namespace("floor");
    let scratch = tempfile::tempdir().unwrap();
    let keys = scratch.path().join("ops");
    let out = support::velero_wasm(&["module", "keygen", "--out", keys.to_str().unwrap()]);
    assert!(out.status.success(), "keygen: {}", support::stderr(&out));
    let (key, public) = (keys.with_extension("key"), keys.with_extension("pub"));

    let out = support::velero_wasm(&[
        "rbac",
        "--velero-namespace",
        &velero,
        "--name",
        &format!("velero-wasm-{velero}"),
        "--trusted-keys",
        public.to_str().unwrap(),
        "--stock",
        "none",
    ]);
    assert!(out.status.success(), "rbac: {}", support::stderr(&out));
    let rbac: Vec<Value> =
        serde_norway::Deserializer::from_str(&String::from_utf8_lossy(&out.stdout))
            .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
            .filter(|d: &Value| !d.is_null())
            .collect();
    apply_rbac(server, &rbac);
    let kubeconfig = scratch.path().join("velero.kubeconfig");
    server.service_account(&velero, "velero", &kubeconfig);

    let start = |state: &Path| {
        std::fs::create_dir_all(state).unwrap();
        support::plugin::Plugin::reading_configmaps(
            &kubeconfig,
            state,
            &velero,
            &[
                ("VELERO_WASM_STOCK", "none"),
                ("VELERO_WASM_TRUSTED_KEYS", public.to_str().unwrap()),
            ],
        )
    };

    // Version 1.2.0 serves, and the floor is raised in the Secret.
    server.apply(&signed_agent(scratch.path(), &velero, &key, "1.2.0"));
    let plugin = start(&scratch.path().join("pod-1"));
    let listed: Vec<String> = plugin.list().await.into_iter().map(|p| p.name).collect();
    assert!(!listed.is_empty(), "agent's actions are not listed");
    let session = plugin.shutdown().await;
    let secret = server
        .get(&format!(
            "/api/v1/namespaces/{velero}/secrets/velero-wasm-version-floor"
        ))
        .unwrap_or_else(|| panic!("no floor Secret:\n{}", session.stderr));
    assert!(
        secret["data"]["agent.json"].is_string(),
        "{secret}\n{}",
        session.stderr
    );

    // The ConfigMap writer puts 1.1.0 back; a new pod, whose state directory knows nothing, refuses it.
    server.apply(&signed_agent(scratch.path(), &velero, &key, "1.1.0"));
    let plugin = start(&scratch.path().join("pod-2"));
    let listed: Vec<String> = plugin.list().await.into_iter().map(|p| p.name).collect();
    let session = plugin.shutdown().await;
    assert!(listed.is_empty(), "{listed:?}\n{}", session.stderr);
    assert!(
        session
            .stderr
            .contains("version 1.1.0 is older than version 1.2.0"),
        "{}",
        session.stderr
    );
}
