//! What became of each module ConfigMap, on the ConfigMap, against the real kube-apiserver with RBAC
//! (tests/support/kube_apiserver.rs): `kubectl describe configmap` answers "does my module serve?"
//! (docs/modules.md §11).
//!
//! - A ConfigMap whose module serves gets a `Serving` Event (Normal) and the status annotation
//!   `velero-wasm.io/status`; one whose module is refused (a sha256 mismatch) gets `Refused` (Warning)
//!   with the reason. All under exactly what `velero-wasm rbac` prints.
//! - The next plugin start finds the annotation as it would write it: no second Event, the
//!   resourceVersion unchanged; the same server-side apply again is a no-op on the real server.
//! - An action Velero has not listed yet serves through the slot: `ServingThroughSlot`.
//! - Without the rights to write it, the plugin serves as before and says so in one line at info.
//! - A shadow ConfigMap's bad `velero-wasm.io/on-failure` annotation, and a serving module's settings
//!   schema in the old vocabulary, reach no warning line (Velero would count it in every backup):
//!   each is a Warning Event on its ConfigMap, the deprecation also in `velero-wasm status`.

use crate::support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use support::kube_apiserver::{shared, KubeApiServer};
use support::plugin::{binary, Plugin, Session};
use velero_wasm::modules::configmaps::{LABEL, SHADOW_LABEL, STATUS_ANNOTATION};

/// The misbehave component.
fn misbehave() -> Vec<u8> {
    std::fs::read(support::components_dir().join("misbehave.wasm")).unwrap()
}

/// A module ConfigMap `name` in `namespace` holding misbehave as module `module`, its actions under
/// `domain`, its manifest pinned to `sha256` (the component's when `None`) with `extra` after it.
fn configmap(
    namespace: &str,
    name: &str,
    module: &str,
    domain: &str,
    sha256: Option<&str>,
    extra: &str,
) -> Value {
    let wasm = misbehave();
    let sha = sha256
        .map(str::to_string)
        .unwrap_or_else(|| velero_wasm::modules::sha256_hex(&wasm));
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: module}},
        "binaryData": {format!("{module}.wasm"): base64::engine::general_purpose::STANDARD.encode(&wasm)},
        "data": {format!("{module}.toml"): format!("sha256 = \"{sha}\"\n[settings]\ndomain = \"{domain}\"\n{extra}")},
    })
}

/// Velero's namespace on the server, with a service account `velero` holding what `velero-wasm
/// rbac --stock none` prints (or only `rules` in a Role of its own), and a kubeconfig for it.
struct Scene {
    server: &'static KubeApiServer,
    namespace: String,
    scratch: tempfile::TempDir,
}

impl Scene {
    fn new(prefix: &str) -> Scene {
        let server = shared();
        let namespace = server.namespace(prefix);
        let scratch = tempfile::tempdir().unwrap();
        std::fs::create_dir(scratch.path().join("state")).unwrap();
        Scene {
            server,
            namespace,
            scratch,
        }
    }

    /// Binds `velero` to what `velero-wasm rbac` prints for no module.
    fn with_rbac_printed(self) -> Scene {
        let out = support::velero_wasm(&[
            "rbac",
            "--stock",
            "none",
            "--velero-namespace",
            &self.namespace,
            "--name",
            &format!("velero-wasm-{}", self.namespace),
        ]);
        assert!(out.status.success(), "rbac: {}", support::stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        for document in serde_norway::Deserializer::from_str(&text)
            .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
            .filter(|d: &Value| !d.is_null())
        {
            self.server.apply(&document);
        }
        self.account();
        self
    }

    /// Binds `velero` to a Role of `rules` only.
    fn with_rules(self, rules: Value) -> Scene {
        let ns = &self.namespace;
        self.server.apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "velero-wasm", "namespace": ns}, "rules": rules}));
        self.server.apply(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "velero-wasm", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "velero-wasm"},
            "subjects": [{"kind": "ServiceAccount", "name": "velero", "namespace": ns}]}));
        self.account();
        self
    }

    fn account(&self) {
        self.server
            .service_account(&self.namespace, "velero", &self.kubeconfig());
    }

    fn kubeconfig(&self) -> PathBuf {
        self.scratch.path().join("velero.kubeconfig")
    }

    fn state(&self) -> PathBuf {
        self.scratch.path().join("state")
    }

    /// The plugin as Velero starts it in its pod, as `velero`, writing the ConfigMaps' state, at
    /// `level`, with `extra` variables.
    fn start(&self, level: &str, extra: &[(&str, &str)]) -> Plugin {
        let (kubeconfig, state) = (self.kubeconfig(), self.state());
        let mut env = vec![
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", state.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("VELERO_WASM_CONFIGMAP_STATE", "on"),
            ("VELERO_NAMESPACE", self.namespace.as_str()),
            ("VELERO_WASM_STOCK", "none"),
        ];
        env.extend_from_slice(extra);
        Plugin::start_with(binary(), &["--log-level", level], &env, |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        })
    }

    fn apply(&self, object: &Value) -> Value {
        self.server.apply(object)
    }

    fn path(&self, name: &str) -> String {
        format!("/api/v1/namespaces/{}/configmaps/{name}", self.namespace)
    }

    fn configmap(&self, name: &str) -> Value {
        self.server
            .get(&self.path(name))
            .unwrap_or_else(|| panic!("no ConfigMap {name}"))
    }

    /// The status annotation of ConfigMap `name`, parsed, once it is there (within 30 s).
    fn status_of(&self, name: &str, plugin: &Plugin) -> Value {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.configmap(name)["metadata"]["annotations"][STATUS_ANNOTATION]
                .as_str()
                .map(|text| serde_json::from_str::<Value>(text).unwrap());
            if let Some(found) = found {
                return found;
            }
            assert!(
                Instant::now() < until,
                "no {STATUS_ANNOTATION} on {name} after 30 s:\n{}",
                stderr_so_far(plugin)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The Events on the object of `uid`: (type, reason, message).
    fn events_of(&self, uid: &str) -> Vec<(String, String, String)> {
        let answer = self.server.request(
            "GET",
            &format!("/api/v1/namespaces/{}/events", self.namespace),
            None,
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let mut events: Vec<(String, String, String)> = answer.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["involvedObject"]["uid"] == uid)
            .map(|e| (text(&e["type"]), text(&e["reason"]), text(&e["message"])))
            .collect();
        events.sort();
        events
    }
}

fn stderr_so_far(plugin: &Plugin) -> String {
    String::from_utf8_lossy(&plugin.stderr.lock().unwrap()).into_owned()
}

/// Waits (30 s at most) for a log line whose message contains `text`.
fn wait_for_line(plugin: &Plugin, text: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    while !stderr_so_far(plugin).contains(text) {
        assert!(
            Instant::now() < until,
            "no line with {text:?} after 30 s:\n{}",
            stderr_so_far(plugin)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lines of a session at warn or error: what Velero counts in the backup.
fn counted(session: &Session) -> Vec<Map<String, Value>> {
    session
        .log_lines()
        .into_iter()
        .filter(|l| l["@level"] == "warn" || l["@level"] == "error")
        .collect()
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"].as_str().unwrap().to_string()
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_says_whether_its_module_serves_and_says_it_once() {
    let scene = Scene::new("state").with_rbac_printed();
    let ns = scene.namespace.clone();
    let good = scene.apply(&configmap(
        &ns,
        "velero-wasm-module-good",
        "good",
        "good.example.io",
        None,
        "",
    ));
    let zeros = "0".repeat(64);
    let bad = scene.apply(&configmap(
        &ns,
        "velero-wasm-module-broken",
        "broken",
        "broken.example.io",
        Some(&zeros),
        "",
    ));

    let plugin = scene.start("info", &[]);
    let listed = plugin.listed().await;
    assert!(
        listed
            .iter()
            .any(|(_, name)| name == "good.example.io/echo"),
        "{listed:?}"
    );
    let serving = scene.status_of("velero-wasm-module-good", &plugin);
    let refused = scene.status_of("velero-wasm-module-broken", &plugin);
    let session = plugin.shutdown().await;

    let sha = velero_wasm::modules::sha256_hex(&misbehave());
    assert_eq!(
        serving,
        json!({"state": "serving", "module": "good", "sha256": &sha[..12]}),
        "{}",
        session.stderr
    );
    assert_eq!(refused["state"], "refused", "{refused}");
    assert_eq!(refused["module"], "broken");
    let why = refused["why"].as_str().unwrap();
    assert!(
        why.contains("sha256 mismatch") && why.contains("ConfigMap velero-wasm-module-broken:"),
        "{why}"
    );
    assert!(!why.contains('@'), "no resourceVersion in it: {why}");

    let events = scene.events_of(&uid(&good));
    assert_eq!(events.len(), 1, "{events:?}");
    let (kind, reason, message) = &events[0];
    assert_eq!((kind.as_str(), reason.as_str()), ("Normal", "Serving"));
    assert!(
        message.starts_with(&format!(
            "module good (sha256 {}) serves from this ConfigMap: ",
            &sha[..12]
        )),
        "{message}"
    );
    let events = scene.events_of(&uid(&bad));
    assert_eq!(events.len(), 1, "{events:?}");
    let (kind, reason, message) = &events[0];
    assert_eq!((kind.as_str(), reason.as_str()), ("Warning", "Refused"));
    assert!(
        message.starts_with("module broken from this ConfigMap is not served: ")
            && message.contains("sha256 mismatch")
            && message.contains("Fix the ConfigMap and apply it again"),
        "{message}"
    );
    let line = session
        .log_lines()
        .into_iter()
        .find(|l| {
            l["@message"]
                .as_str()
                .unwrap()
                .starts_with("module ConfigMaps' state written")
        })
        .unwrap_or_else(|| panic!("no line saying the state was written:\n{}", session.stderr));
    assert_eq!(line["@level"], "info");
    assert_eq!(
        line["written"],
        "velero-wasm-module-broken,velero-wasm-module-good"
    );

    // The next plugin process finds each state written as it would write it: nothing is written,
    // no second Event, the ConfigMaps as they were.
    let before: Vec<Value> = ["velero-wasm-module-good", "velero-wasm-module-broken"]
        .map(|n| scene.configmap(n))
        .to_vec();
    let plugin = scene.start("debug", &[]);
    plugin.listed().await;
    wait_for_line(&plugin, "module ConfigMaps' state unchanged");
    let session = plugin.shutdown().await;
    for (name, before) in ["velero-wasm-module-good", "velero-wasm-module-broken"]
        .into_iter()
        .zip(&before)
    {
        assert_eq!(
            resource_version(&scene.configmap(name)),
            resource_version(before),
            "{name} was written again:\n{}",
            session.stderr
        );
    }
    assert_eq!(scene.events_of(&uid(&good)).len(), 1);
    assert_eq!(scene.events_of(&uid(&bad)).len(), 1);

    // The same server-side apply again, by the plugin's field manager, is a no-op on the real server.
    let stored = scene.configmap("velero-wasm-module-good");
    let value = stored["metadata"]["annotations"][STATUS_ANNOTATION].clone();
    let apply = |uid: &str| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "velero-wasm-module-good", "namespace": ns, "uid": uid,
                                       "annotations": {STATUS_ANNOTATION: value}}});
        scene.server.request_as(
            &scene.server.admin_kubeconfig(),
            "PATCH",
            &format!(
                "{}?fieldManager=velero-wasm-status&force=true",
                scene.path("velero-wasm-module-good")
            ),
            Some("application/apply-patch+yaml"),
            Some(&body),
        )
    };
    let again = apply(&uid(&stored));
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(resource_version(&again.body), resource_version(&stored));
    // The plugin's apply names the ConfigMap's uid: one deleted (or replaced) since it was listed is
    // not written to, nor created again.
    assert_eq!(
        scene
            .server
            .request("DELETE", &scene.path("velero-wasm-module-good"), None)
            .status,
        200
    );
    let gone = apply(&uid(&stored));
    assert!(gone.status >= 400, "{} {}", gone.status, gone.body);
    assert!(scene
        .server
        .get(&scene.path("velero-wasm-module-good"))
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_velero_has_not_listed_serves_through_the_slot_and_its_configmap_says_so() {
    let scene = Scene::new("slot").with_rbac_printed();
    let ns = scene.namespace.clone();
    scene.apply(&configmap(
        &ns,
        "velero-wasm-module-first",
        "first",
        "first.example.io",
        None,
        "",
    ));
    // Velero's pod starts: it lists the plugin's actions, and the plugin keeps that listing.
    let plugin = scene.start("info", &[]);
    plugin.listed().await;
    scene.status_of("velero-wasm-module-first", &plugin);
    plugin.shutdown().await;

    // A module added since: the next process serves it, but Velero knows none of its names.
    let added = scene.apply(&configmap(
        &ns,
        "velero-wasm-module-added",
        "added",
        "added.example.io",
        None,
        "",
    ));
    let plugin = scene.start("info", &[]);
    let status = scene.status_of("velero-wasm-module-added", &plugin);
    plugin.shutdown().await;
    assert_eq!(status["state"], "serving", "{status}");
    assert_eq!(status["through"], "slot", "{status}");
    let events = scene.events_of(&uid(&added));
    assert_eq!(events.len(), 1, "{events:?}");
    let (kind, reason, message) = &events[0];
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("Normal", "ServingThroughSlot")
    );
    assert!(
        message.contains("through velero-wasm.io/added-")
            && message.contains("until Velero restarts")
            && message.contains("added.example.io/echo"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_rights_to_write_the_state_the_plugin_serves_and_says_so_at_info() {
    // Only what reading modules needs: no create on events, no patch on configmaps.
    let scene = Scene::new("norights")
        .with_rules(json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]));
    let ns = scene.namespace.clone();
    let good = scene.apply(&configmap(
        &ns,
        "velero-wasm-module-good",
        "good",
        "good.example.io",
        None,
        "",
    ));
    let plugin = scene.start("info", &[]);
    let listed = plugin.listed().await;
    assert!(
        listed
            .iter()
            .any(|(_, name)| name == "good.example.io/echo"),
        "{listed:?}"
    );
    wait_for_line(&plugin, "is not written on them");
    let session = plugin.shutdown().await;
    assert_eq!(counted(&session), [], "Velero would count these");
    let line = session
        .log_lines()
        .into_iter()
        .find(|l| {
            l["@message"]
                .as_str()
                .unwrap()
                .contains("is not written on them")
        })
        .unwrap();
    assert_eq!(line["@level"], "info");
    let message = line["@message"].as_str().unwrap();
    assert!(
        message.contains("forbidden") && message.contains("velero-wasm rbac"),
        "{message}"
    );
    let stored = scene.configmap("velero-wasm-module-good");
    assert!(
        stored["metadata"]["annotations"][STATUS_ANNOTATION].is_null(),
        "{stored}"
    );
    assert_eq!(resource_version(&stored), resource_version(&good));
    assert_eq!(scene.events_of(&uid(&good)), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_s_bad_failure_policy_annotation_is_no_warning_and_shows_on_its_configmap() {
    let scene = Scene::new("shadowpolicy").with_rbac_printed();
    let ns = scene.namespace.clone();
    scene.apply(&configmap(
        &ns,
        "velero-wasm-module-misbehave",
        "misbehave",
        "shadowed.example.io",
        None,
        "",
    ));
    let mut candidate = configmap(
        &ns,
        "velero-wasm-module-misbehave-shadow",
        "misbehave",
        "shadowed.example.io",
        None,
        "",
    );
    candidate["metadata"]["labels"][SHADOW_LABEL] = json!("true");
    candidate["metadata"]["annotations"] = json!({"velero-wasm.io/on-failure": "never"});
    let shadow = scene.apply(&candidate);

    let plugin = scene.start("info", &[]);
    plugin.listed().await;
    let status = scene.status_of("velero-wasm-module-misbehave-shadow", &plugin);
    let session = plugin.shutdown().await;
    // Nothing a shadow causes reaches what Velero counts (each backup starts a plugin process).
    assert_eq!(counted(&session), [], "{}", session.stderr);
    assert_eq!(status["state"], "shadowing", "{status}");
    assert_eq!(status["shadow"], true);
    assert_eq!(
        status["remarks"],
        json!(["InvalidFailurePolicy"]),
        "{status}"
    );
    let events = scene.events_of(&uid(&shadow));
    let reasons: Vec<(&str, &str)> = events
        .iter()
        .map(|(kind, reason, _)| (kind.as_str(), reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [("Normal", "Shadowing"), ("Warning", "InvalidFailurePolicy")],
        "{events:?}"
    );
    assert!(
        events[1].2.contains("\"never\" is not a failure policy")
            && events[1].2.contains("once its shadow label is removed"),
        "{}",
        events[1].2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_schema_in_the_old_vocabulary_is_said_on_the_configmap_and_in_status_not_counted(
) {
    let scene = Scene::new("deprecated").with_rbac_printed();
    let ns = scene.namespace.clone();
    let old = "[settings-schema.domain]\nvalues = [\"old.example.io\", \"other.example.io\"]\n";
    let module = scene.apply(&configmap(
        &ns,
        "velero-wasm-module-old",
        "old",
        "old.example.io",
        None,
        old,
    ));
    // A module of the module directory has no ConfigMap: its deprecation is an info line and
    // `status` says it.
    let dir = support::module_dir(
        "misbehave",
        "fromdir",
        &format!(
            "[settings]\ndomain = \"dir.example.io\"\n{}",
            old.replace("old.example.io", "dir.example.io")
        ),
    );

    let plugin = scene.start(
        "info",
        &[("VELERO_WASM_MODULES", dir.path().to_str().unwrap())],
    );
    let listed = plugin.listed().await;
    assert!(
        listed.iter().any(|(_, name)| name == "old.example.io/echo")
            && listed.iter().any(|(_, name)| name == "dir.example.io/echo"),
        "{listed:?}"
    );
    let status = scene.status_of("velero-wasm-module-old", &plugin);
    let session = plugin.shutdown().await;
    assert_eq!(
        counted(&session),
        [],
        "Velero would count these in every backup"
    );
    let deprecations: Vec<Map<String, Value>> = session
        .log_lines()
        .into_iter()
        .filter(|l| {
            l["@message"]
                .as_str()
                .unwrap()
                .contains("the old settings vocabulary")
        })
        .collect();
    assert_eq!(deprecations.len(), 2, "{}", session.stderr);
    assert!(
        deprecations
            .iter()
            .all(|l| l["@level"] == "info" && l["deprecated"] == "true"),
        "{deprecations:?}"
    );

    assert_eq!(status["state"], "serving", "{status}");
    assert_eq!(
        status["remarks"],
        json!(["DeprecatedSettingsSchema"]),
        "{status}"
    );
    let events = scene.events_of(&uid(&module));
    let warning = events
        .iter()
        .find(|(_, reason, _)| reason == "DeprecatedSettingsSchema")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(warning.0, "Warning");
    assert!(
        warning
            .2
            .starts_with("module old: settings-schema.domain: the old settings vocabulary")
            && warning.2.contains("write it as JSON Schema:"),
        "{}",
        warning.2
    );

    // `velero-wasm status` says it for both modules.
    let out = support::velero_wasm(&[
        "status",
        "--state-dir",
        scene.state().to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    let status = support::stdout_json(&out);
    for name in ["old", "fromdir"] {
        let module = status["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {status}"));
        let said = module["deprecations"][0].as_str().unwrap_or_default();
        assert!(
            said.starts_with("settings-schema.domain: the old settings vocabulary"),
            "{name}: {module}"
        );
    }
    let out = support::run::Run::cli(["status", "--state-dir", scene.state().to_str().unwrap()])
        .env("COLUMNS", "400")
        .output();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("fromdir: settings-schema.domain: the old settings vocabulary"),
        "{text}"
    );
}
