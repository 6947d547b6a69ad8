//! Where modules come from, beyond the stock ones: module ConfigMaps read through the API at each
//! plugin start (against the loopback API server), the kubelet's mounted directory with its `..data`
//! swap, and stock overrides (a manifest alone) through a directory and through a ConfigMap.
//!
//! - A module ConfigMap created is served by the next plugin process; updated, the next process
//!   serves the new version; deleted, it is gone. An unchanged ConfigMap is not written again.
//! - With trusted keys, a ConfigMap whose component or manifest was changed after signing, signed by
//!   an unknown key, or unsigned is refused with a message naming it and the key id, and its last
//!   good version serves.
//! - Updated 100 times while 8 callers start fresh plugin processes and call it, every call succeeds
//!   and each process serves one whole version.
//! - With the list forbidden or the API server down (unreachable, hanging, or throttling every
//!   request), the ConfigMaps of the last successful list serve, with a warning.
//! - A ConfigMap too large or with keys that are not `<name>.wasm|toml|sig` is reported; the others
//!   are written.
//! - A mounted directory read while the kubelet swaps `..data` gives one whole version, never a mix;
//!   the next plugin process serves the new version.
//! - An override changes kubevirt's `mode` without a component; one that widens the grant is refused
//!   and the stock module serves unchanged.

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use support::apiserver::ApiServer;
use support::plugin::{binary, Plugin, Session};
use support::{components_dir, root, stderr, stdout_json, velero_wasm};
use velero_wasm::modules::configmaps::{Cache, LABEL};
use velero_wasm::modules::{scan_directory, sha256_hex};
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::ExecuteRequest;

/// A module ConfigMap as `module pack` writes it: the component (if any) under `binaryData`, the
/// manifest under `data`, labelled with the module's name.
fn module_configmap(module: &str, wasm: Option<&[u8]>, manifest: &str) -> Value {
    let mut binary = Map::new();
    if let Some(wasm) = wasm {
        binary.insert(
            format!("{module}.wasm"),
            json!(base64::engine::general_purpose::STANDARD.encode(wasm)),
        );
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("velero-wasm-module-{module}"), "namespace": "velero",
                     "labels": {LABEL: module}},
        "binaryData": binary,
        "data": {format!("{module}.toml"): manifest},
    })
}

/// The misbehave test component as module `misbehave`, its actions under `domain`.
fn misbehave_configmap(domain: &str) -> Value {
    support::misbehave_configmap_as("misbehave", domain)
}

/// A plugin process pointed at `server` with module ConfigMaps on, its state in `state`.
struct Scene {
    server: ApiServer,
    scratch: tempfile::TempDir,
}

impl Scene {
    fn new(cluster: &[&Path]) -> Scene {
        let server = ApiServer::start(cluster);
        let scratch = tempfile::tempdir().unwrap();
        server.write_kubeconfig(&scratch.path().join("kubeconfig"));
        std::fs::create_dir(scratch.path().join("state")).unwrap();
        Scene { server, scratch }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    fn start(&self, extra: &[(&str, &str)]) -> Plugin {
        self.start_logging("info", extra)
    }

    fn start_logging(&self, level: &str, extra: &[(&str, &str)]) -> Plugin {
        let (kubeconfig, state) = (self.path("kubeconfig"), self.path("state"));
        let mut env = vec![
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", state.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("VELERO_NAMESPACE", "velero"),
        ];
        env.extend_from_slice(extra);
        let env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Plugin::start_with(binary(), &["--log-level", level], &pairs, |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        })
    }

    /// Starts a plugin, checks that it lists `action`, and stops it: what it listed is the last
    /// successful list from then on.
    async fn lists(&self, action: &str) -> Session {
        let plugin = self.start(&[]);
        let listed = names(&plugin).await;
        let session = plugin.shutdown().await;
        assert!(
            listed.iter().any(|n| n == action),
            "{action} not listed: {listed:?}\n{}",
            session.stderr
        );
        session
    }

    /// The cache directory of the one module ConfigMap written.
    fn cached_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.path("state/configmaps"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir() && !p.file_name().unwrap().to_str().unwrap().starts_with('.'))
            .collect();
        dirs.sort();
        dirs
    }
}

/// The `modules in service` line of a session.
fn modules_line(session: &Session) -> Map<String, Value> {
    session
        .log_lines()
        .into_iter()
        .find(|l| l["@message"] == "modules in service")
        .unwrap_or_else(|| panic!("no `modules in service` line:\n{}", session.stderr))
}

async fn echo(plugin: &Plugin, action: &str) -> Result<Vec<String>, tonic::Status> {
    let item = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "cm", "namespace": "shop"}, "data": {"k": "v"}});
    let backup = json!({"metadata": {"name": "nightly", "namespace": "velero"}, "spec": {}});
    let response = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: action.into(),
            item: item.to_string().into_bytes(),
            backup: backup.to_string().into_bytes(),
        })
        .await?
        .into_inner();
    Ok(response
        .additional_items
        .iter()
        .map(|id| format!("{} {}/{}", id.resource, id.namespace, id.name))
        .collect())
}

async fn names(plugin: &Plugin) -> Vec<String> {
    plugin.list().await.into_iter().map(|p| p.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_configmap_is_served_by_the_next_process_updated_then_deleted() {
    let scene = Scene::new(&[]);
    scene.server.apply(misbehave_configmap("v1.example.io"));

    // Created: the next process serves its actions, and writes it to the cache once.
    let plugin = scene.start(&[]);
    assert!(names(&plugin)
        .await
        .contains(&"v1.example.io/echo".to_string()));
    assert_eq!(
        echo(&plugin, "v1.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    let session = plugin.shutdown().await;
    let line = modules_line(&session);
    assert_eq!(line["configmaps"], "1 written, 0 cached", "{line:?}");
    let stored = scene
        .server
        .object("configmaps", "velero", "velero-wasm-module-misbehave")
        .unwrap();
    let version = stored["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        line["modules"].as_str().unwrap().contains(&format!(
            "misbehave: ConfigMap velero-wasm-module-misbehave@{version}"
        )),
        "{line:?}"
    );
    let dirs = scene.cached_dirs();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let uid = stored["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        dirs[0].file_name().unwrap().to_str().unwrap(),
        format!("{uid}-{version}")
    );
    let file = dirs[0].join("misbehave.wasm");
    let before = std::fs::metadata(&file).unwrap();
    assert_eq!(std::fs::metadata(&dirs[0]).unwrap().mode() & 0o777, 0o700);

    // Unchanged: the next process uses the copy as it is, without writing it again.
    let plugin = scene.start(&[]);
    assert!(names(&plugin)
        .await
        .contains(&"v1.example.io/echo".to_string()));
    let line = modules_line(&plugin.shutdown().await);
    assert_eq!(line["configmaps"], "0 written, 1 cached", "{line:?}");
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (after.ino(), after.mtime_nsec(), after.mtime()),
        (before.ino(), before.mtime_nsec(), before.mtime())
    );

    // Updated: the next process serves the new version only.
    scene.server.apply(misbehave_configmap("v2.example.io"));
    let plugin = scene.start(&[]);
    let listed = names(&plugin).await;
    assert!(
        listed.contains(&"v2.example.io/echo".to_string()),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|n| n.starts_with("v1.example.io/")),
        "{listed:?}"
    );
    assert_eq!(
        echo(&plugin, "v2.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    let line = modules_line(&plugin.shutdown().await);
    assert_eq!(line["configmaps"], "1 written, 0 cached", "{line:?}");
    // The old copy is kept a while (a process that listed it may still be reading it).
    assert_eq!(scene.cached_dirs().len(), 2);

    // A copy no longer listed is pruned once unused for a while; a recent one is kept.
    let two = scene.cached_dirs();
    let old = two.iter().find(|d| **d == dirs[0]).unwrap();
    let newer = two.iter().find(|d| **d != dirs[0]).unwrap().clone();
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(old)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();

    // Deleted: gone from the next process.
    assert!(scene
        .server
        .delete("configmaps", "velero", "velero-wasm-module-misbehave"));
    let plugin = scene.start(&[]);
    let listed = names(&plugin).await;
    assert!(
        !listed.iter().any(|n| n.contains(".example.io/")),
        "{listed:?}"
    );
    let line = modules_line(&plugin.shutdown().await);
    assert_eq!(line["configmaps"], "0 written, 0 cached", "{line:?}");
    assert!(
        !line["modules"].as_str().unwrap().contains("misbehave"),
        "{line:?}"
    );
    assert_eq!(scene.cached_dirs(), [newer]);

    // The list asked the API server for the label, in Velero's namespace.
    let lists: Vec<_> = scene
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/namespaces/velero/configmaps")
        .collect();
    assert_eq!(lists.len(), 4, "{lists:?}");
    assert!(lists
        .iter()
        .all(|r| r.query.get("labelSelector").map(String::as_str) == Some(LABEL)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_configmap_is_updated_100_times_8_callers_on_fresh_processes_each_see_one_whole_version(
) {
    let scene = Scene::new(&[]);
    let version = |i: usize| {
        if i.is_multiple_of(2) {
            "a.example.io"
        } else {
            "b.example.io"
        }
    };
    scene.server.apply(misbehave_configmap(version(0)));
    let scene = std::sync::Arc::new(scene);
    let updating = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));

    // Each caller starts a fresh plugin process (as Velero does for each backup), finds which
    // version it serves, calls it, and stops it; over and over while the ConfigMap changes.
    let mut callers = Vec::new();
    for _ in 0..8 {
        let (scene, updating) = (scene.clone(), updating.clone());
        callers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let still_updating = updating.load(std::sync::atomic::Ordering::SeqCst);
                let plugin = scene.start(&[("VELERO_WASM_STOCK", "none")]);
                let listed = names(&plugin).await;
                let served: Vec<&str> = ["a.example.io", "b.example.io"]
                    .into_iter()
                    .filter(|v| listed.iter().any(|n| n.starts_with(&format!("{v}/"))))
                    .collect();
                assert_eq!(served.len(), 1, "one whole version, not {listed:?}");
                let answer = echo(&plugin, &format!("{}/echo", served[0])).await;
                assert_eq!(
                    answer.unwrap_or_else(|e| panic!("{}: {}", served[0], e.message())),
                    ["secrets shop/cm"]
                );
                seen.push(served[0]);
                plugin.shutdown().await;
                if !still_updating {
                    return seen;
                }
            }
        }));
    }
    for i in 1..=100 {
        scene.server.apply(misbehave_configmap(version(i)));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    updating.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut calls = 0;
    let mut both = std::collections::BTreeSet::new();
    for caller in callers {
        let seen = caller
            .await
            .expect("a caller saw a failed call or a mixed version");
        calls += seen.len();
        both.extend(seen);
    }
    println!("{calls} calls on fresh processes during 100 updates");
    assert!(calls >= 16, "{calls} calls");
    // The last version is the one the last processes served.
    assert!(both.contains(version(100)), "{both:?}");
}

/// A key pair from `velero-wasm module keygen`: the private key's path and the key id.
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let prefix = dir.join(name);
    let out = velero_wasm(&["module", "keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    (prefix, id)
}

/// The misbehave module (its actions under `domain`) as `module pack --sign` writes its ConfigMap.
fn signed_configmap(domain: &str, key: &Path) -> Value {
    signed_version(domain, key, None)
}

/// Like [`signed_configmap`], with `version = "…"` in the manifest when given.
fn signed_version(domain: &str, key: &Path, version: Option<&str>) -> Value {
    use serde::Deserialize;
    let dir = tempfile::tempdir().unwrap();
    let wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
    std::fs::write(dir.path().join("misbehave.wasm"), &wasm).unwrap();
    let unversioned = version.is_none();
    let version = version
        .map(|v| format!("version = \"{v}\"\n"))
        .unwrap_or_default();
    let manifest = format!(
        "sha256 = \"{}\"\n{version}[settings]\ndomain = \"{domain}\"\n",
        sha256_hex(&wasm)
    );
    std::fs::write(dir.path().join("misbehave.toml"), manifest).unwrap();
    let private = format!("{}.key", key.display());
    let mut args = vec![
        "module",
        "pack",
        dir.path().to_str().unwrap(),
        "--sign",
        &private,
    ];
    if unversioned {
        args.push("--unversioned");
    }
    let out = velero_wasm(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    Value::deserialize(serde_norway::Deserializer::from_str(&text)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_a_tampered_or_unsigned_configmap_is_refused_by_name_and_key_and_the_last_good_version_serves(
) {
    let scene = Scene::new(&[]);
    let keys = tempfile::tempdir().unwrap();
    let (trusted, trusted_id) = keygen(keys.path(), "trusted");
    let (other, other_id) = keygen(keys.path(), "other");
    let public = format!("{}.pub", trusted.display());
    let env = [
        ("VELERO_WASM_TRUSTED_KEYS", public.as_str()),
        ("VELERO_WASM_STOCK", "none"),
    ];

    // Signed by the trusted key: served, and remembered as the last good version.
    let good = signed_configmap("a.example.io", &trusted);
    scene.server.apply(good.clone());
    let plugin = scene.start(&env);
    assert_eq!(
        echo(&plugin, "a.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    plugin.shutdown().await;

    let kinds = std::fs::read(components_dir().join("kinds.wasm")).unwrap();
    let mut component = good.clone();
    component["binaryData"]["misbehave.wasm.gz"] = json!(base64::engine::general_purpose::STANDARD
        .encode(velero_wasm::modules::compression::compress(&kinds).unwrap()));
    let mut manifest = good.clone();
    let widened = good["data"]["misbehave.toml"]
        .as_str()
        .unwrap()
        .replace("a.example.io", "b.example.io");
    manifest["data"]["misbehave.toml"] = json!(widened);
    let mut unsigned = manifest.clone();
    unsigned["data"]
        .as_object_mut()
        .unwrap()
        .remove("misbehave.sig");
    let cases = [
        ("a tampered component", component, trusted_id.clone()),
        ("a tampered manifest", manifest, trusted_id.clone()),
        (
            "a signature by an unknown key",
            signed_configmap("b.example.io", &other),
            other_id.clone(),
        ),
        ("an unsigned module", unsigned, trusted_id.clone()),
    ];
    for (case, configmap, key) in cases {
        scene.server.apply(configmap);
        let plugin = scene.start(&env);
        let listed = names(&plugin).await;
        assert!(
            listed.contains(&"a.example.io/echo".to_string())
                && !listed.iter().any(|n| n.starts_with("b.example.io/")),
            "{case}: the last good version serves, not {listed:?}"
        );
        assert_eq!(
            echo(&plugin, "a.example.io/echo").await.unwrap(),
            ["secrets shop/cm"],
            "{case}"
        );
        let session = plugin.shutdown().await;
        let refusal = session
            .log_lines()
            .into_iter()
            .filter_map(|l| l["@message"].as_str().map(str::to_string))
            .find(|m| {
                m.contains("ConfigMap velero-wasm-module-misbehave@") && m.contains("last good")
            })
            .unwrap_or_else(|| {
                panic!(
                    "{case}: no refusal naming the ConfigMap:\n{}",
                    session.stderr
                )
            });
        assert!(
            refusal.contains(&key),
            "{case}: the key id {key} in {refusal:?}"
        );
    }
}

/// The messages of a session's log lines.
fn messages(session: &Session) -> Vec<String> {
    session
        .log_lines()
        .into_iter()
        .filter_map(|l| l["@message"].as_str().map(str::to_string))
        .collect()
}

/// A scene whose plugins trust one key (from `module keygen`), with no stock module.
struct Trusting {
    scene: Scene,
    key: PathBuf,
    public: String,
    _keys: tempfile::TempDir,
}

impl Trusting {
    fn new() -> Trusting {
        let keys = tempfile::tempdir().unwrap();
        let (key, _) = keygen(keys.path(), "trusted");
        Trusting {
            scene: Scene::new(&[]),
            public: format!("{}.pub", key.display()),
            key,
            _keys: keys,
        }
    }

    fn start(&self) -> Plugin {
        self.scene.start(&[
            ("VELERO_WASM_TRUSTED_KEYS", self.public.as_str()),
            ("VELERO_WASM_STOCK", "none"),
        ])
    }

    /// The actions a fresh plugin lists, and its log's messages.
    async fn serves(&self) -> (Vec<String>, Vec<String>) {
        let plugin = self.start();
        let listed = names(&plugin).await;
        let session = plugin.shutdown().await;
        (listed, messages(&session))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_an_older_signed_version_or_other_content_under_a_served_version_is_refused(
) {
    let t = Trusting::new();
    t.scene
        .server
        .apply(signed_version("v2.example.io", &t.key, Some("1.2.0")));
    assert!(t
        .serves()
        .await
        .0
        .contains(&"v2.example.io/echo".to_string()));

    // Signed, and older: someone re-applies a version the operator has moved past.
    t.scene
        .server
        .apply(signed_version("v1.example.io", &t.key, Some("1.1.9")));
    let (listed, log) = t.serves().await;
    assert!(
        listed.contains(&"v2.example.io/echo".to_string())
            && !listed.iter().any(|n| n.starts_with("v1.example.io/")),
        "the served version stays: {listed:?}"
    );
    assert!(
        log.iter()
            .any(|m| m.contains("version 1.1.9 is older than version 1.2.0")
                && m.contains("rollback refused")
                && m.contains("serving its last good version")),
        "{log:#?}"
    );

    // Signed, the same version, other content.
    t.scene
        .server
        .apply(signed_version("other.example.io", &t.key, Some("1.2.0")));
    let (listed, log) = t.serves().await;
    assert!(!listed.iter().any(|n| n.starts_with("other.example.io/")));
    assert!(
        log.iter()
            .any(|m| m.contains("version 1.2.0 was served with other content")),
        "{log:#?}"
    );

    // Signed without a version, once a version was served.
    t.scene
        .server
        .apply(signed_version("none.example.io", &t.key, None));
    let (listed, log) = t.serves().await;
    assert!(!listed.iter().any(|n| n.starts_with("none.example.io/")));
    assert!(
        log.iter().any(|m| m.contains("it has no version")),
        "{log:#?}"
    );

    // A higher version moves the floor up.
    t.scene
        .server
        .apply(signed_version("v3.example.io", &t.key, Some("1.10.0")));
    let (listed, _) = t.serves().await;
    assert!(
        listed.contains(&"v3.example.io/echo".to_string()),
        "{listed:?}"
    );
    t.scene
        .server
        .apply(signed_version("v2.example.io", &t.key, Some("1.2.0")));
    let (listed, _) = t.serves().await;
    assert!(
        listed.contains(&"v3.example.io/echo".to_string()),
        "1.2.0 is now below the floor: {listed:?}"
    );
}

/// The floor is only as good as its directory: one that others may write could have lost its files,
/// so while it is not the plugin's alone no signed module serves, and the refusal says how to fix it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_no_signed_module_serves_while_the_version_floor_is_open_to_others() {
    use std::os::unix::fs::PermissionsExt;
    let t = Trusting::new();
    t.scene
        .server
        .apply(signed_version("v2.example.io", &t.key, Some("1.2.0")));
    assert!(t
        .serves()
        .await
        .0
        .contains(&"v2.example.io/echo".to_string()));

    // The floor's directory open to everybody; somebody removed the floor and re-applied an older
    // signed version.
    let versions = t.scene.path("state/versions");
    std::fs::set_permissions(&versions, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::remove_file(versions.join("misbehave.json")).unwrap();
    t.scene
        .server
        .apply(signed_version("v1.example.io", &t.key, Some("1.1.9")));
    let (listed, log) = t.serves().await;
    assert!(
        !listed.iter().any(|n| n.starts_with("v1.example.io/")),
        "the older version serves: {listed:?}"
    );
    assert!(
        log.iter().any(|m| m
            .contains("versions is writable by other users (mode 0777; make it 0700)")
            && m.contains("rollback protection cannot hold there")),
        "{log:#?}"
    );
}

/// The version in the floor the cluster keeps (the Secret `velero-wasm-version-floor`), if any.
fn cluster_floor(server: &ApiServer, module: &str) -> Option<String> {
    let secret = server.object("secrets", "velero", "velero-wasm-version-floor")?;
    let record = secret["data"][format!("{module}.json")].as_str()?;
    let record: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(record)
            .unwrap(),
    )
    .unwrap();
    Some(record["version"].as_str().unwrap().to_string())
}

/// A pod restart empties the state directory (an `emptyDir`); the floor kept in the cluster still
/// refuses an older signed version. Without that Secret (whoever can write Secrets in Velero's
/// namespace deleted it) only the expiry holds: the boundary docs/modules.md §5 states. A floor that
/// cannot be read refuses the signed modules a new pod has no record of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_an_older_signed_version_is_refused_after_a_restart_with_an_empty_state_directory(
) {
    let t = Trusting::new();
    let state = t.scene.path("state");
    let restart = || {
        std::fs::remove_dir_all(&state).unwrap();
        std::fs::create_dir(&state).unwrap();
    };
    t.scene
        .server
        .apply(signed_version("v2.example.io", &t.key, Some("1.2.0")));
    let (listed, log) = t.serves().await;
    assert!(
        listed.contains(&"v2.example.io/echo".to_string()),
        "{listed:?}"
    );
    assert_eq!(
        cluster_floor(&t.scene.server, "misbehave").as_deref(),
        Some("1.2.0"),
        "{log:#?}"
    );

    // The pod restarts (its state directory empty); someone re-applies an older signed version.
    restart();
    t.scene
        .server
        .apply(signed_version("v1.example.io", &t.key, Some("1.1.9")));
    let (listed, log) = t.serves().await;
    assert!(
        !listed.iter().any(|n| n.starts_with("v1.example.io/")),
        "the older version serves after a restart: {listed:?}"
    );
    let refusal = log
        .iter()
        .find(|m| {
            m.contains("version 1.1.9 is older than version 1.2.0")
                && m.contains("rollback refused")
        })
        .unwrap_or_else(|| panic!("no refusal: {log:#?}"));
    eprintln!("after a restart with an empty state directory: {refusal}");
    assert_eq!(
        cluster_floor(&t.scene.server, "misbehave").as_deref(),
        Some("1.2.0")
    );

    // A higher version raises the cluster's floor too; the state directory, emptied, learns it back.
    t.scene
        .server
        .apply(signed_version("v3.example.io", &t.key, Some("1.3.0")));
    assert!(t
        .serves()
        .await
        .0
        .contains(&"v3.example.io/echo".to_string()));
    assert_eq!(
        cluster_floor(&t.scene.server, "misbehave").as_deref(),
        Some("1.3.0")
    );
    restart();
    t.scene
        .server
        .apply(signed_version("v2.example.io", &t.key, Some("1.2.0")));
    let (listed, log) = t.serves().await;
    assert!(
        !listed.iter().any(|n| n.starts_with("v2.example.io/")),
        "{listed:?}"
    );
    assert!(
        log.iter()
            .any(|m| m.contains("version 1.2.0 is older than version 1.3.0")),
        "{log:#?}"
    );

    // The floor cannot be read (here RBAC refuses it): a new pod serves no signed module it has no
    // record of, and says why.
    restart();
    t.scene.server.forbid("secrets");
    t.scene
        .server
        .apply(signed_version("v4.example.io", &t.key, Some("1.4.0")));
    let (listed, log) = t.serves().await;
    assert!(
        !listed.iter().any(|n| n.starts_with("v4.example.io/")),
        "{listed:?}"
    );
    assert!(
        log.iter()
            .any(|m| m.contains("the version floor kept in the cluster cannot be read")),
        "{log:#?}"
    );
    assert!(
        log.iter().any(|m| m.contains("that floor cannot be read")
            && m.contains("while this pod's state directory has no record of the module")),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_a_deleted_signed_module_is_not_resurrected_by_junk_with_its_label() {
    let t = Trusting::new();
    t.scene
        .server
        .apply(signed_version("a.example.io", &t.key, Some("1.0.0")));
    assert!(t
        .serves()
        .await
        .0
        .contains(&"a.example.io/echo".to_string()));

    // The operator deletes the module; someone adds an unsigned ConfigMap with its label.
    assert!(t
        .scene
        .server
        .delete("configmaps", "velero", "velero-wasm-module-misbehave"));
    let mut junk = module_configmap("misbehave", Some(b"junk"), "sha256 = \"x\"");
    junk["metadata"]["name"] = json!("junk");
    t.scene.server.apply(junk);
    let (listed, log) = t.serves().await;
    assert!(
        !listed.iter().any(|n| n.starts_with("a.example.io/")),
        "the deleted module serves again: {listed:?}"
    );
    assert!(
        log.iter().any(|m| m.contains("ConfigMap junk")
            && m.contains("came from another ConfigMap object (uid ")
            && m.contains("not this one (uid ")
            && m.contains("module misbehave is not served")),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_trusted_keys_an_unsigned_configmap_sorting_first_does_not_keep_the_signed_module_out()
{
    let t = Trusting::new();
    t.scene
        .server
        .apply(signed_version("a.example.io", &t.key, Some("1.0.0")));
    let mut squatter = misbehave_configmap("squat.example.io");
    squatter["metadata"]["name"] = json!("aaa-squatter");
    t.scene.server.apply(squatter);
    let (listed, log) = t.serves().await;
    assert!(
        listed.contains(&"a.example.io/echo".to_string())
            && !listed.iter().any(|n| n.starts_with("squat.example.io/")),
        "{listed:?}"
    );
    assert!(
        log.iter().any(|m| m.contains(
            "ConfigMap aaa-squatter: module misbehave is already in ConfigMap velero-wasm-module-misbehave; this one is left out"
        ) && m.contains("not signed")),
        "{log:#?}"
    );

    // Without trusted keys the first by name serves, as before, and the other is reported.
    let plugin = t.scene.start(&[("VELERO_WASM_STOCK", "none")]);
    let listed = names(&plugin).await;
    let log = messages(&plugin.shutdown().await);
    assert!(
        listed.contains(&"squat.example.io/echo".to_string()),
        "{listed:?}"
    );
    assert!(
        log.iter().any(|m| m.contains(
            "ConfigMap velero-wasm-module-misbehave: module misbehave is already in ConfigMap aaa-squatter"
        )),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_made_too_large_or_slow_never_serves_a_module_deleted_since() {
    let scene = Scene::new(&[]);
    scene.server.apply(misbehave_configmap("a.example.io"));
    scene.lists("a.example.io/echo").await;

    // Junk labelled as modules takes the list past 64 MiB, and the module is deleted.
    for i in 0..50 {
        let mut junk = module_configmap(&format!("junk{i}"), Some(&vec![7u8; 1 << 20]), "");
        junk["metadata"]["name"] = json!(format!("junk-{i}"));
        scene.server.apply(junk);
    }
    assert!(scene
        .server
        .delete("configmaps", "velero", "velero-wasm-module-misbehave"));
    let plugin = scene.start(&[]);
    let listed = names(&plugin).await;
    let session = plugin.shutdown().await;
    assert!(
        !listed.iter().any(|n| n.starts_with("a.example.io/")),
        "a deleted module serves from the last listing: {listed:?}\n{}",
        session.stderr
    );
    // Too large, or too slow to read whole (the loopback server may take longer than the 5 s
    // allowed for 70 MB): either way the last list is checked name by name.
    let log = messages(&session);
    assert!(
        log.iter().any(
            |m| (m.contains("the module ConfigMaps take more than 64 MiB")
                || m.contains("no answer within 5 s"))
                && m.contains("last successful list")
        ),
        "{log:#?}"
    );
    // Read by name, it is gone (or, with the server still busy with the list, not confirmed).
    assert!(
        log.iter().any(|m| m
            .starts_with("ConfigMap velero-wasm-module-misbehave (module misbehave): ")
            && (m.contains("deleted since the last list") || m.contains("cannot be read"))
            && m.ends_with("not served")),
        "{log:#?}"
    );
    // The stock modules still serve.
    assert!(
        listed
            .iter()
            .any(|n| n.starts_with("kubevirt-velero-plugin/")),
        "{listed:?}"
    );
}

/// `component` with a custom section appended: the same code, other bytes, so it compiles anew.
fn distinct(component: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(tag.len(), &mut body);
    body.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // a custom section
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// When a call answered, in the log's clock.
fn now_utc() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_new_configmap_modules_compile_calls_to_other_modules_are_served_and_a_waited_for_one_compiles_next(
) {
    use velero_wasm::plugin::proto::generated::BackupItemActionAppliesToRequest as AppliesToRequest;
    let scene = Scene::new(&[]);
    let wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
    // Four modules never compiled on this host.
    for i in 1..=4 {
        let component = distinct(&wasm, &format!("m{i}"));
        let manifest = format!(
            "sha256 = \"{}\"\n[settings]\ndomain = \"m{i}.example.io\"\n",
            sha256_hex(&component)
        );
        scene.server.apply(module_configmap(
            &format!("m{i}"),
            Some(&component),
            &manifest,
        ));
    }
    // And an override of the stock kubevirt module whose ConfigMap sorts after them.
    let mut kubevirt = module_configmap("kubevirt", None, "[settings]\nmode = \"upstream\"\n");
    kubevirt["metadata"]["name"] = json!("zz-kubevirt");
    scene.server.apply(kubevirt);

    let plugin = scene.start_logging("debug", &[]);
    let channel = plugin.channel().await;
    let applies_to = |name: &'static str| {
        let channel = channel.clone();
        tokio::spawn(async move {
            let answer = BackupItemActionClient::new(channel)
                .applies_to(AppliesToRequest {
                    plugin: name.into(),
                })
                .await;
            (answer.map(|_| ()), now_utc())
        })
    };
    let hcp = applies_to("hypershift-oadp-plugin/backup-item-action");
    let kubevirt = applies_to("kubevirt-velero-plugin/backup-virtualmachine-action");
    let last = applies_to("m4.example.io/echo");
    let (hcp, kubevirt, last) = (
        hcp.await.unwrap(),
        kubevirt.await.unwrap(),
        last.await.unwrap(),
    );
    let session = plugin.shutdown().await;
    let log = session.log_lines();
    let at = |message: &str| -> String {
        log.iter()
            .find(|l| l["@message"] == message)
            .and_then(|l| l["@timestamp"].as_str())
            .unwrap_or_else(|| panic!("no {message:?} line:\n{}", session.stderr))
            .to_string()
    };
    let loaded = at("modules in service");
    for (name, (answer, when)) in [("hcp", &hcp), ("kubevirt", &kubevirt), ("m4", &last)] {
        assert!(answer.is_ok(), "{name}: {answer:?}");
        println!("{name} answered at {when}; all modules loaded at {loaded}");
    }
    // A stock module nothing replaces answers while the new modules compile; the replaced kubevirt
    // is loaded ahead of the modules before it, as soon as a call waits for it; an action no module
    // in service provides waits until all are loaded.
    assert!(hcp.1 < loaded, "hcp waited for the others");
    assert!(kubevirt.1 < loaded, "kubevirt waited for the others");
    assert!(
        last.1 >= loaded,
        "m4's action answered before it could be known"
    );
    let order: Vec<&str> = log
        .iter()
        .filter(|l| {
            l["@message"] == "module loaded (compiled now, or from its kept description)"
                && l["origin"].as_str().unwrap_or("").contains("ConfigMap")
        })
        .filter_map(|l| l["module"].as_str())
        .collect();
    println!("load order: {order:?}");
    let place = |m: &str| order.iter().position(|o| *o == m).unwrap();
    assert_eq!(order.len(), 5, "{order:?}");
    assert!(
        place("kubevirt") < place("m3"),
        "kubevirt, waited for, was not loaded ahead of the modules before it: {order:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_list_forbidden_or_the_api_server_down_the_last_listed_configmaps_serve() {
    let mut scene = Scene::new(&[]);
    scene.server.apply(misbehave_configmap("v1.example.io"));
    scene.lists("v1.example.io/echo").await;

    // The service account may not list ConfigMaps (any more): the cached ones serve.
    scene.server.forbid("configmaps");
    let plugin = scene.start(&[]);
    assert!(names(&plugin)
        .await
        .contains(&"v1.example.io/echo".to_string()));
    let session = plugin.shutdown().await;
    assert!(
        session.log_lines().iter().any(|l| l["@level"] == "info"
            && l["@message"].as_str().unwrap().contains("is forbidden")
            && l["@message"]
                .as_str()
                .unwrap()
                .contains("last successful list")),
        "{}",
        session.stderr
    );

    // The API server is down.
    scene.server.stop();
    let plugin = scene.start(&[]);
    assert_eq!(
        echo(&plugin, "v1.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    let session = plugin.shutdown().await;
    // At info: the modules last listed serve, nothing the backup's user can act on, so not a warning
    // Velero would count against the backup (docs/operation.md#what-velero-counts).
    let warning = session
        .log_lines()
        .into_iter()
        .find(|l| {
            l["@level"] == "info"
                && l["@message"]
                    .as_str()
                    .unwrap()
                    .contains("cannot list the module ConfigMaps")
        })
        .unwrap_or_else(|| panic!("no warning:\n{}", session.stderr));
    assert!(
        warning["@message"]
            .as_str()
            .unwrap()
            .contains("serving the module ConfigMaps of the last successful list instead"),
        "{warning:?}"
    );
    assert_eq!(warning["configmaps"], "1");
    assert!(modules_line(&session)["modules"]
        .as_str()
        .unwrap()
        .contains("misbehave: ConfigMap velero-wasm-module-misbehave@"));

    // `actions`, the operator's pre-flight check, shows the same and fails: what it shows may not
    // be what the cluster holds.
    let (kubeconfig, state) = (scene.path("kubeconfig"), scene.path("state"));
    let out = support::run::Run::cli(["actions", "--json"])
        .envs(&[
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", state.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("VELERO_NAMESPACE", "velero"),
        ])
        .output();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json = stdout_json(&out);
    assert!(
        json["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "v1.example.io/echo"),
        "{json}"
    );
    assert!(
        json["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["message"]
                .as_str()
                .unwrap()
                .contains("the module ConfigMaps shown are those of the last successful list")),
        "{json}"
    );
}

/// An API server that throttles every request for good, or hangs (takes connections and never
/// answers), is down, as one that cannot be reached is: the ConfigMaps of the last successful list
/// serve. (Before, each read by name running out of time dropped its module, as if junk kept the
/// list slow: stock served in its place, whatever the module's failure policy.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_api_server_throttling_every_request_or_hanging_the_last_listed_configmaps_serve()
{
    let scene = Scene::new(&[]);
    scene.server.apply(misbehave_configmap("v1.example.io"));
    scene.lists("v1.example.io/echo").await;

    let served_from_the_last_list = |session: &Session| {
        let log = messages(session);
        assert!(
            log.iter().any(|m| m.contains("can be read by name either")
                && m.ends_with(
                    "serving the module ConfigMaps of the last successful list instead"
                )),
            "{log:#?}"
        );
        assert!(!log.iter().any(|m| m.ends_with("not served")), "{log:#?}");
    };

    // Every request answered 429, retry after 3 s: the list runs out of its 5 s, and so does the
    // read by name.
    scene.server.throttle(usize::MAX / 2, 3);
    let plugin = scene.start(&[]);
    assert_eq!(
        echo(&plugin, "v1.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    served_from_the_last_list(&plugin.shutdown().await);
    scene.server.throttle(0, 0);

    // A server that takes connections and never answers (the kernel accepts them; nobody reads).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std::fs::write(
        scene.path("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters:\n- name: c\n  cluster:\n    server: http://{}\n\
             users:\n- name: u\n  user:\n    token: t\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n",
            silent.local_addr().unwrap()
        ),
    )
    .unwrap();
    let plugin = scene.start(&[]);
    assert_eq!(
        echo(&plugin, "v1.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    served_from_the_last_list(&plugin.shutdown().await);
}

#[test]
fn a_configmap_too_large_or_with_bad_keys_is_reported_and_the_others_are_written() {
    let state = tempfile::tempdir().unwrap();
    let cache = Cache::new(state.path());
    let with_meta = |mut cm: Value, name: &str, uid: &str| {
        cm["metadata"]["name"] = json!(name);
        cm["metadata"]["uid"] = json!(uid);
        cm["metadata"]["resourceVersion"] = json!("7");
        cm
    };
    let good = with_meta(misbehave_configmap("v1.example.io"), "good", "u-1");
    let big = with_meta(
        module_configmap("big", Some(&vec![0u8; (1 << 20) + 1]), "sha256 = \"x\""),
        "big",
        "u-2",
    );
    let mut stray = with_meta(module_configmap("stray", None, ""), "stray", "u-3");
    stray["data"]["../escape.toml"] = json!("");
    let unlabelled = with_meta(module_configmap("plain", None, ""), "plain", "u-4");
    let mut unlabelled = unlabelled;
    unlabelled["metadata"]["labels"] = json!({});
    let bad_uid = with_meta(module_configmap("slash", None, ""), "slash", "../../x");

    let read = cache
        .materialise(&[big, good, stray, unlabelled, bad_uid])
        .unwrap();
    let written: Vec<&str> = read
        .configmaps
        .iter()
        .map(|c| c.configmap.as_str())
        .collect();
    assert_eq!(written, ["good"]);
    assert_eq!((read.written, read.cached), (1, 0));
    let problems: Vec<&str> = read.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(
        problems[0].starts_with("ConfigMap big: holds more than 1048576 bytes (1 MiB)"),
        "{}",
        problems[0]
    );
    assert_eq!(read.problems[0].module.as_deref(), Some("big"));
    assert!(
        problems[1].contains("ConfigMap plain: label velero-wasm.io/module does not name a module"),
        "{}",
        problems[1]
    );
    assert!(
        problems[2].contains("ConfigMap slash: metadata.uid \"../../x\" is not usable"),
        "{}",
        problems[2]
    );
    assert!(
        problems[3]
            .contains("ConfigMap stray: data key \"../escape.toml\" is not one of stray.wasm"),
        "{}",
        problems[3]
    );
    // Nothing was written outside the cache, and only the good ConfigMap inside it.
    assert!(!state.path().join("escape.toml").exists());
    assert_eq!(cache.last_listing().unwrap(), read.configmaps);
}

/// Publishes `files` as version `v` of a mounted ConfigMap, as the kubelet does: a new timestamped
/// directory, `..data` swapped to it by a rename, each file a link through `..data`, the previous
/// directory removed.
fn kubelet_publish(dir: &Path, v: usize, files: &[(String, Vec<u8>)]) {
    let stamp = format!("..2026_12_02_00_00_00.{v:09}");
    std::fs::create_dir(dir.join(&stamp)).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(&stamp).join(name), bytes).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    std::os::unix::fs::symlink(&stamp, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for (name, _) in files {
        if std::fs::symlink_metadata(dir.join(name)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

/// Version `v` of a module `m` whose component is text naming its version (never compiled).
fn kubelet_swap(dir: &Path, v: usize) {
    let wasm = format!("version {v}\n").repeat(8 << 10).into_bytes();
    let manifest = format!(
        "sha256 = \"{}\"\n[settings]\nversion = \"{v}\"\n",
        sha256_hex(&wasm)
    );
    kubelet_publish(
        dir,
        v,
        &[
            ("m.wasm".into(), wasm),
            ("m.toml".into(), manifest.into_bytes()),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_mounted_directory_serves_each_new_version_to_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let publish = |v: usize| {
        let cm = misbehave_configmap(&format!("v{v}.example.io"));
        let wasm = base64::engine::general_purpose::STANDARD
            .decode(cm["binaryData"]["misbehave.wasm"].as_str().unwrap())
            .unwrap();
        let toml = cm["data"]["misbehave.toml"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec();
        kubelet_publish(
            dir.path(),
            v,
            &[
                ("misbehave.wasm".into(), wasm),
                ("misbehave.toml".into(), toml),
            ],
        );
    };
    let env = [
        ("VELERO_WASM_MODULES", dir.path().to_str().unwrap()),
        ("VELERO_WASM_STATE_DIR", state.path().to_str().unwrap()),
    ];
    for v in 1..=2 {
        publish(v);
        let plugin = Plugin::start_as(binary(), &["--log-level", "info"], &env);
        assert_eq!(
            echo(&plugin, &format!("v{v}.example.io/echo"))
                .await
                .unwrap(),
            ["secrets shop/cm"]
        );
        let listed = names(&plugin).await;
        assert!(
            !listed.contains(&format!("v{}.example.io/echo", 3 - v)),
            "{listed:?}"
        );
        let line = modules_line(&plugin.shutdown().await);
        // Named as the operator sees it, not by the kubelet's timestamped directory.
        let shown = format!("misbehave: {}", dir.path().join("misbehave.wasm").display());
        assert!(
            line["modules"]
                .as_str()
                .unwrap()
                .split("; ")
                .any(|m| m == shown),
            "{line:?}"
        );
    }
}

#[test]
fn a_mounted_directory_read_during_the_kubelet_s_swap_gives_one_whole_version() {
    let dir = tempfile::tempdir().unwrap();
    kubelet_swap(dir.path(), 0);
    const SWAPS: usize = 100;
    let swapper = {
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            for v in 1..=SWAPS {
                std::thread::sleep(Duration::from_millis(5));
                kubelet_swap(&dir, v);
            }
        })
    };
    let mut scans = 0;
    let mut seen = std::collections::BTreeSet::new();
    while !swapper.is_finished() && scans < 20_000 {
        let scan = scan_directory(dir.path(), None).unwrap();
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        assert_eq!(scan.modules.len(), 1);
        let module = &scan.modules[0];
        let version = module.manifest.settings["version"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            module
                .wasm
                .starts_with(format!("version {version}\n").as_bytes()),
            "the manifest of version {version} came with another component"
        );
        // Shown as the operator sees it, not by the kubelet's timestamped directory.
        assert_eq!(
            module.origin.to_string(),
            dir.path().join("m.wasm").display().to_string()
        );
        seen.insert(version.clone());
        scans += 1;
    }
    swapper.join().unwrap();
    assert!(seen.len() > 1, "the scans saw only {seen:?}");
    let last = scan_directory(dir.path(), None).unwrap();
    assert_eq!(
        last.modules[0].manifest.settings["version"],
        serde_json::Value::String(SWAPS.to_string())
    );
}

// ---------------------------------------------------------------------------------------------
// Stock overrides

const VM_BACKUP: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
/// What extended mode adds to a VM backup and upstream mode does not.
const EXTENDED_ONLY: &str = "datasources.cdi.kubevirt.io kubevirt-os-images/fedora";

fn kubevirt_fixture(relative: &str) -> PathBuf {
    root().join("tests/fixtures/kubevirt").join(relative)
}

/// The VM backup's additional items, by `velero-wasm run`, with `--modules dir` when given.
fn vm_backup(modules: Option<&Path>) -> Vec<String> {
    let (item, backup, cluster) = (
        kubevirt_fixture("cluster/vm-fedora-web-01.json"),
        kubevirt_fixture("velero/backup-nightly.json"),
        kubevirt_fixture("cluster"),
    );
    let mut args = vec![
        "run".to_string(),
        "--action".into(),
        VM_BACKUP.into(),
        "--item".into(),
        item.display().to_string(),
        "--backup".into(),
        backup.display().to_string(),
        "--cluster".into(),
        cluster.display().to_string(),
    ];
    if let Some(dir) = modules {
        args.extend(["--modules".to_string(), dir.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = velero_wasm(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout_json(&out)["additionalItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| {
            let resource = match id["group"].as_str().unwrap() {
                "" => id["resource"].as_str().unwrap().to_string(),
                group => format!("{}.{group}", id["resource"].as_str().unwrap()),
            };
            format!(
                "{resource} {}/{}",
                id["namespace"].as_str().unwrap(),
                id["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn an_override_in_a_directory_changes_kubevirt_s_mode_without_a_component() {
    let stock = vm_backup(None);
    assert!(stock.contains(&EXTENDED_ONLY.to_string()), "{stock:#?}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kubevirt.toml"),
        "[settings]\nmode = \"upstream\"\n[limits]\ntimeout = \"20s\"\n",
    )
    .unwrap();
    let upstream = vm_backup(Some(dir.path()));
    assert!(
        !upstream.contains(&EXTENDED_ONLY.to_string()),
        "{upstream:#?}"
    );
    assert!(upstream.len() < stock.len());

    // `actions` says where the module comes from and which settings are in effect.
    let modules = dir.path().display().to_string();
    let out = velero_wasm(&["actions", "--json", "--modules", &modules]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout_json(&out);
    let kubevirt = json["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "kubevirt")
        .unwrap();
    assert_eq!(
        kubevirt["source"],
        format!(
            "stock + override {}",
            dir.path().join("kubevirt.toml").display()
        )
    );
    assert_eq!(kubevirt["settings"]["mode"], "upstream");
    let vm = json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == VM_BACKUP)
        .unwrap();
    assert_eq!(vm["limits"]["timeout"], "20s");
    // The stock grant is kept when the override does not narrow it.
    assert_eq!(vm["grant"]["kube"].as_array().unwrap().len(), 4);
    let table = velero_wasm(&["actions", "--modules", &modules]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("kubevirt ") && l.contains("stock + override ")),
        "{text}"
    );
}

#[test]
fn an_override_that_widens_the_grant_is_refused_and_the_stock_module_serves() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kubevirt.toml"),
        "[settings]\nmode = \"upstream\"\n\n[[grant.kube]]\nresources = [\"pods\"]\nverbs = [\"list\", \"delete\"]\nnamespaces = [\"@item\"]\n",
    )
    .unwrap();
    let modules = dir.path().display().to_string();
    let out = velero_wasm(&["actions", "--modules", &modules]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refused override is reported with exit 1"
    );
    let err = stderr(&out);
    assert!(
        err.contains("kubevirt.toml of module kubevirt refused: it widens the grant of the stock module kubevirt: grant.kube[0] allows delete on pods in @item, which no stock rule allows")
            && err.contains("serving the stock module kubevirt"),
        "{err}"
    );
    // The stock module serves unchanged (extended mode) — and `run`, which would be trying it in the
    // override's place, stops and says so.
    assert!(vm_backup(None).contains(&EXTENDED_ONLY.to_string()));
    let out = velero_wasm(&[
        "run",
        "--action",
        VM_BACKUP,
        "--item",
        &kubevirt_fixture("cluster/vm-fedora-web-01.json")
            .display()
            .to_string(),
        "--backup",
        &kubevirt_fixture("velero/backup-nightly.json")
            .display()
            .to_string(),
        "--cluster",
        &kubevirt_fixture("cluster").display().to_string(),
        "--modules",
        &modules,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`run` stops rather than serve another module in its place"),
        "{}",
        stderr(&out)
    );

    // An override for a module that is not stock is a manifest without its component.
    std::fs::remove_file(dir.path().join("kubevirt.toml")).unwrap();
    std::fs::write(dir.path().join("mine.toml"), "").unwrap();
    let out = velero_wasm(&["actions", "--modules", &modules]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "a manifest without its component (mine.wasm), and no stock module is named mine"
        ),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_in_a_configmap_changes_kubevirt_s_mode_over_grpc() {
    let scene = Scene::new(&[&kubevirt_fixture("cluster")]);
    scene.server.apply(module_configmap(
        "kubevirt",
        None,
        "[settings]\nmode = \"upstream\"\n",
    ));
    let execute = |plugin: Plugin| async move {
        let response = BackupItemActionClient::new(plugin.channel().await)
            .execute(ExecuteRequest {
                plugin: VM_BACKUP.into(),
                item: std::fs::read(kubevirt_fixture("cluster/vm-fedora-web-01.json")).unwrap(),
                backup: std::fs::read(kubevirt_fixture("velero/backup-nightly.json")).unwrap(),
            })
            .await
            .expect("the VM backup succeeds")
            .into_inner();
        let items: Vec<String> = response
            .additional_items
            .iter()
            .map(|id| match id.group.as_str() {
                "" => format!("{} {}/{}", id.resource, id.namespace, id.name),
                g => format!("{}.{g} {}/{}", id.resource, id.namespace, id.name),
            })
            .collect();
        (items, plugin.shutdown().await)
    };
    let (items, session) = execute(scene.start(&[])).await;
    assert!(!items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
    let version = scene
        .server
        .object("configmaps", "velero", "velero-wasm-module-kubevirt")
        .unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let line = modules_line(&session);
    assert!(
        line["modules"].as_str().unwrap().contains(&format!(
            "kubevirt: stock + override ConfigMap velero-wasm-module-kubevirt@{version}"
        )),
        "{line:?}"
    );

    // A widening override in a ConfigMap is refused, with the reason in the start-up line.
    scene.server.apply(module_configmap(
        "kubevirt",
        None,
        "[settings]\nmode = \"upstream\"\n[grant]\nhttp = [\"example.com\"]\n",
    ));
    let (items, session) = execute(scene.start(&[])).await;
    assert!(items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
    let line = modules_line(&session);
    assert!(
        line["modules"]
            .as_str()
            .unwrap()
            .split("; ")
            .any(|m| m == "kubevirt: stock"),
        "{line:?}"
    );
    assert!(
        line["rejected"]
            .as_str()
            .unwrap()
            .contains("grant.http[0] \"example.com\" is not covered by the stock grant (none)"),
        "{line:?}"
    );
}

/// `module pack` stores a component gzipped (`<name>.wasm.gz`): the host writes it out expanded, as
/// `<name>.wasm`, whose sha256 the manifest pins. One that expands beyond 8 MiB (a decompression
/// bomb), is not gzip, or sits beside the same component stored as it is, is reported for its
/// ConfigMap alone; a ConfigMap from earlier releases, its component stored as it is, loads as before.
#[test]
fn a_compressed_component_is_expanded_and_a_bomb_or_a_corrupt_one_fails_only_its_configmap() {
    use velero_wasm::modules::compression::{compress, MAX_COMPONENT_BYTES};
    let state = tempfile::tempdir().unwrap();
    let cache = Cache::new(state.path());
    let encode = |bytes: &[u8]| json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    let named = |mut cm: Value, name: &str, uid: &str| {
        cm["metadata"]["name"] = json!(name);
        cm["metadata"]["uid"] = json!(uid);
        cm["metadata"]["resourceVersion"] = json!("7");
        cm
    };
    let wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
    let compressed = |module: &str| {
        let mut cm = named(
            module_configmap(
                module,
                None,
                &format!("sha256 = \"{}\"\n", sha256_hex(&wasm)),
            ),
            module,
            &format!("u-{module}"),
        );
        cm["binaryData"] =
            json!({ format!("{module}.wasm.gz"): encode(&compress(&wasm).unwrap()) });
        cm
    };
    let packed = compressed("packed");
    let old = named(misbehave_configmap("old.example.io"), "old", "u-old");
    let mut bomb = compressed("bomb");
    let zeros = compress(&vec![0u8; MAX_COMPONENT_BYTES as usize + 1]).unwrap();
    assert!(zeros.len() < 20_000, "{}", zeros.len());
    bomb["binaryData"]["bomb.wasm.gz"] = encode(&zeros);
    let mut corrupt = compressed("corrupt");
    corrupt["binaryData"]["corrupt.wasm.gz"] = encode(&wasm);
    let mut twice = compressed("twice");
    twice["binaryData"]["twice.wasm"] = encode(&wasm);

    let read = cache
        .materialise(&[bomb, corrupt, old, packed, twice])
        .unwrap();
    let written: Vec<&str> = read
        .configmaps
        .iter()
        .map(|c| c.configmap.as_str())
        .collect();
    assert_eq!(written, ["old", "packed"]);
    let problems: Vec<&str> = read.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        problems,
        [
            "ConfigMap bomb: bomb.wasm.gz: expands to more than 8388608 bytes, the most a component may be (a decompression bomb?)",
            "ConfigMap corrupt: corrupt.wasm.gz: is not gzip data, or is truncated or corrupt: invalid gzip header",
            "ConfigMap twice: it holds twice.wasm both as it is and compressed",
        ]
    );
    assert_eq!(read.problems[0].module.as_deref(), Some("bomb"));

    // Written out expanded, and loaded as the component itself.
    let dir = &read.configmaps[1].dir;
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["packed.toml", "packed.wasm"]);
    assert_eq!(std::fs::read(dir.join("packed.wasm")).unwrap(), wasm);
    let scan = scan_directory(dir, None).unwrap();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert_eq!(scan.modules[0].sha256, sha256_hex(&wasm));
}
