//! A module's failure policy (docs/modules.md#s2-3): what serves when its new version cannot be
//! loaded, against the loopback API server, through the plugin's gRPC services as Velero calls them.
//!
//! - A narrowing kubevirt candidate (upstream mode: it leaves out what extended mode adds) whose OCI
//!   artifact cannot be pulled, on a plugin whose state directory is empty (a restarted pod): under
//!   `refuse` its actions are still listed and every item they are given fails with the reason, while
//!   other modules serve; under `stock` the stock module serves; with no policy (`last-good`, the
//!   default) and no kept copy, the stock module serves, as before policies existed.
//! - A candidate whose manifest states the policy, updated to a version that does not load: `last-good`
//!   serves the kept copy, `stock` the stock module, `refuse` refuses its items.
//! - `velero-wasm status` and `velero-wasm actions` show the policy in force, where it was stated,
//!   whether it triggered and why, and a signature that expires within 14 days.

use crate::support;

use std::path::PathBuf;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use support::apiserver::ApiServer;
use support::plugin::{binary, Plugin, Session};
use support::run::Run;
use support::{components_dir, root, stderr, stdout_json, velero_wasm};
use velero_wasm::modules::configmaps::LABEL;
use velero_wasm::modules::failure_policy::ANNOTATION;
use velero_wasm::modules::sha256_hex;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::ExecuteRequest;

const VM_BACKUP: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
/// What extended mode (the stock module's) adds to a VM backup and the upstream-mode candidate
/// leaves out.
const EXTENDED_ONLY: &str = "datasources.cdi.kubevirt.io kubevirt-os-images/fedora";
/// A registry address nothing listens on: every pull from it fails at once.
const NO_REGISTRY: &str = "127.0.0.1:9";

fn kubevirt_fixture(relative: &str) -> PathBuf {
    root().join("tests/fixtures/kubevirt").join(relative)
}

/// An API server with the kubevirt fixture cluster, and one state directory the plugin processes
/// share.
struct Scene {
    server: ApiServer,
    scratch: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let server = ApiServer::start(&[&kubevirt_fixture("cluster")]);
        let scratch = tempfile::tempdir().unwrap();
        server.write_kubeconfig(&scratch.path().join("kubeconfig"));
        std::fs::create_dir(scratch.path().join("state")).unwrap();
        Scene { server, scratch }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    fn env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = vec![
            (
                "KUBECONFIG".into(),
                self.path("kubeconfig").display().to_string(),
            ),
            (
                "VELERO_WASM_STATE_DIR".into(),
                self.path("state").display().to_string(),
            ),
            ("VELERO_WASM_CONFIGMAPS".into(), "on".into()),
            ("VELERO_NAMESPACE".into(), "velero".into()),
            ("VELERO_WASM_OCI_PLAIN_HTTP".into(), NO_REGISTRY.into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    }

    fn start(&self, extra: &[(&str, &str)]) -> Plugin {
        let env = self.env(extra);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Plugin::start_with(binary(), &["--log-level", "info"], &pairs, |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        })
    }

    /// `velero-wasm status` on the shared state directory: the table, and the JSON.
    fn status(&self) -> (String, Value) {
        let state = self.path("state");
        let table = Run::cli(["status", "--state-dir", state.to_str().unwrap()])
            .env("COLUMNS", "400")
            .output();
        assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
        let json = velero_wasm(&["status", "--state-dir", state.to_str().unwrap(), "--json"]);
        assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
        (String::from_utf8(table.stdout).unwrap(), stdout_json(&json))
    }

    /// `velero-wasm actions` as the plugin would load the modules now (the ConfigMaps read):
    /// stdout and stderr of the table, and the JSON.
    fn actions(&self, extra: &[(&str, &str)]) -> (String, String, Value) {
        let env = self.env(extra);
        let run = |json: bool| {
            let mut args = vec!["actions"];
            if json {
                args.push("--json");
            }
            Run::cli(args)
                .envs(&env)
                .env("COLUMNS", "400")
                .env_remove("KUBERNETES_SERVICE_HOST")
                .output()
        };
        let (table, json) = (run(false), run(true));
        let errors = stderr(&table);
        (
            String::from_utf8(table.stdout).unwrap(),
            errors,
            stdout_json(&json),
        )
    }
}

/// The VM backup through the plugin's BackupItemAction service: the additional items, or the status
/// Velero would count as the item's error.
async fn vm_backup(plugin: &Plugin) -> Result<Vec<String>, tonic::Status> {
    let response = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: VM_BACKUP.into(),
            item: std::fs::read(kubevirt_fixture("cluster/vm-fedora-web-01.json")).unwrap(),
            backup: std::fs::read(kubevirt_fixture("velero/backup-nightly.json")).unwrap(),
        })
        .await?
        .into_inner();
    Ok(response
        .additional_items
        .iter()
        .map(|id| match id.group.as_str() {
            "" => format!("{} {}/{}", id.resource, id.namespace, id.name),
            g => format!("{}.{g} {}/{}", id.resource, id.namespace, id.name),
        })
        .collect())
}

/// The misbehave test component as module `misbehave`, its actions under `domain`: another module,
/// which must keep serving whatever happens to kubevirt.
fn misbehave_configmap(domain: &str) -> Value {
    support::misbehave_configmap_as("misbehave", domain)
}

/// misbehave's `echo` on a ConfigMap item: its additional items.
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

/// The kubevirt candidate as a ConfigMap naming its OCI artifact, with the failure-policy
/// annotation when given.
fn candidate_reference(policy: Option<&str>) -> Value {
    let reference = format!(
        "{NO_REGISTRY}/velero/kubevirt:0.2.0@sha256:{}",
        sha256_hex(b"the narrowing candidate")
    );
    let mut metadata = json!({"name": "velero-wasm-module-kubevirt", "namespace": "velero",
                              "labels": {LABEL: "kubevirt"}});
    if let Some(policy) = policy {
        metadata["annotations"] = json!({ ANNOTATION: policy });
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
        "data": {"kubevirt.oci": reference},
    })
}

/// The module named `name` in `status --json`.
fn status_module<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name && m["role"] != "shadow")
        .unwrap_or_else(|| panic!("no module {name} in {status:#}"))
}

/// The module named `name` among `actions --json`'s modules.
fn actions_module<'a>(actions: &'a Value, name: &str) -> &'a Value {
    actions["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name && m.get("shadowOf").is_none())
        .unwrap_or_else(|| panic!("no module {name} in {actions:#}"))
}

/// The log lines of a session that mention `text`.
fn lines_about(session: &Session, text: &str) -> Vec<Map<String, Value>> {
    session
        .log_lines()
        .into_iter()
        .filter(|l| l["@message"].as_str().unwrap_or("").contains(text))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_refuse_a_narrowing_candidate_whose_pull_fails_refuses_its_items_rather_than_serving_stock(
) {
    let scene = Scene::new();
    scene.server.apply(misbehave_configmap("other.example.io"));
    scene.server.apply(candidate_reference(Some("refuse")));

    // The pod restarted: the state directory is empty, so nothing of the candidate is kept, and its
    // artifact cannot be pulled.
    let plugin = scene.start(&[]);
    let listed: Vec<String> = plugin.list().await.into_iter().map(|p| p.name).collect();
    assert!(
        listed.contains(&VM_BACKUP.to_string()),
        "kubevirt's actions stay listed, so that Velero gives them their items: {listed:?}"
    );
    let refused = vm_backup(&plugin)
        .await
        .expect_err("the VM is not backed up by the stock module in the candidate's place");
    let message = refused.message().to_string();
    println!("refused item's error, as Velero gets it: {message}");
    assert!(
        message.contains(&format!("module kubevirt, action {VM_BACKUP} on item"))
            && message.contains("vm-workloads/fedora-web-01")
            && message.contains(
                "refused: module kubevirt cannot be loaded and its failure policy is refuse (ConfigMap annotation)"
            )
            && message.contains("ConfigMap velero-wasm-module-kubevirt: cannot pull"),
        "{message}"
    );
    // Only kubevirt's items fail: another module serves.
    assert_eq!(
        echo(&plugin, "other.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    let session = plugin.shutdown().await;
    // The refusal reaches Velero as the items' errors, and nothing else: the start-up line saying so
    // is at info, never a warning or an error Velero would count against the backup.
    let about = lines_about(&session, "velero-wasm-module-kubevirt");
    assert!(!about.is_empty(), "{}", session.stderr);
    for line in &about {
        assert_eq!(line["@level"], "info", "{line:?}");
    }
    assert!(
        about.iter().any(|l| l["refused"] == "true"
            && l["@message"]
                .as_str()
                .unwrap()
                .contains("refusing its actions (failure policy refuse, ConfigMap annotation)")),
        "{about:?}"
    );

    // status: the policy in force, where it was stated, that it triggered, and why.
    let (table, json) = scene.status();
    println!("{table}");
    let kubevirt = status_module(&json, "kubevirt");
    assert_eq!(
        kubevirt["failurePolicy"]["policy"], "refuse",
        "{kubevirt:#}"
    );
    assert_eq!(kubevirt["failurePolicy"]["from"], "ConfigMap annotation");
    assert_eq!(
        kubevirt["failurePolicy"]["triggered"]["outcome"],
        "refusing"
    );
    assert!(
        kubevirt["failurePolicy"]["triggered"]["cause"]
            .as_str()
            .unwrap()
            .contains("cannot pull"),
        "{kubevirt:#}"
    );
    assert!(
        table.contains("refuse (ConfigMap annotation), TRIGGERED: refusing"),
        "{table}"
    );
    assert!(
        table.contains("kubevirt: failure policy refuse triggered (refusing): ConfigMap velero-wasm-module-kubevirt: cannot pull"),
        "{table}"
    );
    let misbehave = status_module(&json, "misbehave");
    assert_eq!(misbehave["failurePolicy"]["policy"], "last-good");
    assert_eq!(misbehave["failurePolicy"]["from"], "default");
    assert!(misbehave["failurePolicy"].get("triggered").is_none());

    // actions: the same, as the plugin would load the modules now.
    let (table, errors, json) = scene.actions(&[]);
    println!("{table}{errors}");
    let kubevirt = actions_module(&json, "kubevirt");
    assert_eq!(
        kubevirt["failurePolicy"]["policy"], "refuse",
        "{kubevirt:#}"
    );
    assert_eq!(
        kubevirt["failurePolicy"]["triggered"]["outcome"],
        "refusing"
    );
    assert!(
        table.contains("ON FAILURE")
            && table.contains("refuse (ConfigMap annotation), TRIGGERED: refusing"),
        "{table}"
    );

    // Under `stock`, the same failure serves the stock module, which captures what the candidate
    // leaves out.
    scene.server.apply(candidate_reference(Some("stock")));
    let plugin = scene.start(&[]);
    let items = vm_backup(&plugin).await.expect("stock serves");
    assert!(items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
    plugin.shutdown().await;
    let (table, json) = scene.status();
    let kubevirt = status_module(&json, "kubevirt");
    assert_eq!(kubevirt["source"], "stock", "{kubevirt:#}");
    assert_eq!(kubevirt["failurePolicy"]["policy"], "stock");
    assert_eq!(
        kubevirt["failurePolicy"]["triggered"]["outcome"],
        "serving stock"
    );
    assert!(
        table.contains("stock (ConfigMap annotation), TRIGGERED: serving stock"),
        "{table}"
    );

    // With no policy stated: last-good, the default, which without a kept copy serves stock, as the
    // plugin did before policies existed.
    scene.server.apply(candidate_reference(None));
    let plugin = scene.start(&[]);
    let items = vm_backup(&plugin).await.expect("stock serves");
    assert!(items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
    plugin.shutdown().await;
    let (table, _) = scene.status();
    assert!(
        table.contains("last-good (default), TRIGGERED: serving stock"),
        "{table}"
    );
}

/// The stock kubevirt module as `module export` writes it, turned into the narrowing candidate:
/// upstream mode, with `on-failure = policy`; its component and manifest.
fn candidate_files(policy: &str) -> (Vec<u8>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("candidate");
    let out = velero_wasm(&["module", "export", "kubevirt", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let wasm = std::fs::read(out_dir.join("kubevirt.wasm")).unwrap();
    let manifest = std::fs::read_to_string(out_dir.join("kubevirt.toml")).unwrap();
    assert!(manifest.contains("mode = \"extended\""), "{manifest}");
    let manifest = format!(
        "on-failure = \"{policy}\"\n{}",
        manifest.replace("mode = \"extended\"", "mode = \"upstream\"")
    );
    (wasm, manifest)
}

/// A module ConfigMap holding kubevirt's component and manifest.
fn kubevirt_configmap(wasm: &[u8], manifest: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "velero-wasm-module-kubevirt", "namespace": "velero",
                     "labels": {LABEL: "kubevirt"}},
        "binaryData": {"kubevirt.wasm": base64::engine::general_purpose::STANDARD.encode(wasm)},
        "data": {"kubevirt.toml": manifest},
    })
}

/// The candidate's manifest pinned to other bytes: an update whose component does not load.
fn broken_update(manifest: &str) -> (Vec<u8>, String) {
    let bytes = b"not a component".to_vec();
    let pinned: String = manifest
        .lines()
        .map(|line| {
            if line.starts_with("sha256 = ") {
                format!("sha256 = \"{}\"", sha256_hex(&bytes))
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(pinned, manifest, "the manifest pins its component");
    (bytes, pinned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_a_manifest_states_decides_what_serves_when_its_update_does_not_load() {
    let scene = Scene::new();
    for policy in ["last-good", "stock", "refuse"] {
        // The candidate serves (and is kept as the last good copy).
        let (wasm, manifest) = candidate_files(policy);
        scene.server.apply(kubevirt_configmap(&wasm, &manifest));
        let plugin = scene.start(&[]);
        let items = vm_backup(&plugin).await.expect("the candidate serves");
        assert!(!items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
        plugin.shutdown().await;
        let (_, json) = scene.status();
        let kubevirt = status_module(&json, "kubevirt");
        assert_eq!(kubevirt["failurePolicy"]["policy"], policy, "{kubevirt:#}");
        assert_eq!(kubevirt["failurePolicy"]["from"], "manifest");
        assert!(kubevirt["failurePolicy"].get("triggered").is_none());

        // Its update does not load.
        let (bytes, pinned) = broken_update(&manifest);
        scene.server.apply(kubevirt_configmap(&bytes, &pinned));
        let plugin = scene.start(&[]);
        let answer = vm_backup(&plugin).await;
        plugin.shutdown().await;
        let (table, json) = scene.status();
        let kubevirt = status_module(&json, "kubevirt");
        let outcome = &kubevirt["failurePolicy"]["triggered"]["outcome"];
        match policy {
            "last-good" => {
                let items = answer.expect("the kept copy serves");
                assert!(!items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
                assert_eq!(outcome, "serving last good copy", "{kubevirt:#}");
            }
            "stock" => {
                let items = answer.expect("the stock module serves");
                assert!(items.contains(&EXTENDED_ONLY.to_string()), "{items:#?}");
                assert_eq!(outcome, "serving stock", "{kubevirt:#}");
            }
            _ => {
                let status = answer.expect_err("the items are refused");
                assert!(
                    status
                        .message()
                        .contains("its failure policy is refuse (manifest)"),
                    "{}",
                    status.message()
                );
                assert_eq!(outcome, "refusing", "{kubevirt:#}");
            }
        }
        assert!(
            table.contains(&format!("{policy} (manifest), TRIGGERED: ")),
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_actions_say_when_a_serving_module_s_signature_expires_within_14_days() {
    let scene = Scene::new();
    let keys = tempfile::tempdir().unwrap();
    let prefix = keys.path().join("ops");
    let out = velero_wasm(&["module", "keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let pack = |expires: &str, version: &str| -> Value {
        use serde::Deserialize;
        let dir = tempfile::tempdir().unwrap();
        let wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
        std::fs::write(dir.path().join("misbehave.wasm"), &wasm).unwrap();
        std::fs::write(
            dir.path().join("misbehave.toml"),
            format!(
                "sha256 = \"{}\"\nversion = \"{version}\"\n[settings]\ndomain = \"signed.example.io\"\n",
                sha256_hex(&wasm)
            ),
        )
        .unwrap();
        let private = format!("{}.key", prefix.display());
        let out = velero_wasm(&[
            "module",
            "pack",
            dir.path().to_str().unwrap(),
            "--sign",
            &private,
            "--expires",
            expires,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        Value::deserialize(serde_norway::Deserializer::from_str(&text)).unwrap()
    };
    let public = format!("{}.pub", prefix.display());
    let trusted = [("VELERO_WASM_TRUSTED_KEYS", public.as_str())];

    // Signed until 3 days from now: called out.
    scene.server.apply(pack("3d", "1.0.0"));
    let plugin = scene.start(&trusted);
    assert_eq!(
        echo(&plugin, "signed.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    plugin.shutdown().await;
    let (table, json) = scene.status();
    println!("{table}");
    let misbehave = status_module(&json, "misbehave");
    assert_eq!(misbehave["signatureExpiresInDays"], 3, "{misbehave:#}");
    assert!(
        table.contains(&format!("{key} (verified), expires in 3 days")),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "misbehave: its signature by key {key} expires in 3 days"
        )),
        "{table}"
    );
    let (table, errors, json) = scene.actions(&trusted);
    let signature = &json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["module"] == "misbehave")
        .unwrap()["signature"];
    assert_eq!(signature["expiresInDays"], 3, "{signature:#}");
    assert!(
        table.contains(&format!("misbehave (signed {key}, expires in 3 days)")),
        "{table}"
    );
    assert!(
        errors.contains("module misbehave: its signature by key")
            && errors.contains("expires in 3 days"),
        "{errors}"
    );

    // Signed for the default 90 days: nothing to say.
    scene.server.apply(pack("90d", "1.0.1"));
    let plugin = scene.start(&trusted);
    assert_eq!(
        echo(&plugin, "signed.example.io/echo").await.unwrap(),
        ["secrets shop/cm"]
    );
    plugin.shutdown().await;
    let (table, json) = scene.status();
    let misbehave = status_module(&json, "misbehave");
    assert!(
        misbehave["signatureExpiresInDays"].is_null(),
        "{misbehave:#}"
    );
    assert!(!table.contains("expires in"), "{table}");
}
