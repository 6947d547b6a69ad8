//! Shadow modules, over Velero's gRPC protocol against the loopback API server: a module ConfigMap
//! labelled `velero-wasm.io/shadow: "true"` is called after the serving module of its name, with the
//! same input, and compared (docs/modules.md#s8).
//!
//! - A shadow whose result differs is reported: one log line per item with the JSON Patch, the
//!   figures `velero-wasm status` shows, a summary of the backup once its calls go idle; what Velero
//!   receives is the serving module's answer, unchanged.
//! - A shadow that traps, hangs past the shadows' deadline or tries to write changes nothing for the
//!   serving module: its answers are the serving ones, the write never reaches the API server, the
//!   faults are counted.
//! - Shadow calls over the shadows' budget are dropped and counted, never queued.
//! - Shadows cost bounded CPU: one thread for all of them, and a CPU share per call past which a
//!   spinning shadow is stopped and counted, whatever its deadline.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Map, Value};
use support::apiserver::ApiServer;
use support::plugin::{binary, Plugin};
use support::{components_dir, stdout_json, velero_wasm};
use velero_wasm::modules::configmaps::{LABEL, SHADOW_LABEL};
use velero_wasm::modules::sha256_hex;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::ExecuteRequest;

const DOMAIN: &str = "shadow.example.io";

/// The misbehave component as module `misbehave` in a ConfigMap named `name`: its actions under
/// [`DOMAIN`], allowed to read and write ConfigMaps of the item's namespace, with `extra` manifest
/// lines; a shadow when `shadow`.
fn misbehave(name: &str, shadow: bool, extra: &str) -> Value {
    let wasm = std::fs::read(components_dir().join("misbehave.wasm")).unwrap();
    let manifest = format!(
        "sha256 = \"{}\"\nversion = \"{}\"\n[settings]\ndomain = \"{DOMAIN}\"\n{extra}\n\
         [[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\", \"list\", \"create\", \"patch\"]\nnamespaces = [\"@item\"]\n",
        sha256_hex(&wasm),
        if shadow { "1.1.0" } else { "1.0.0" }
    );
    let mut labels = Map::new();
    labels.insert(LABEL.into(), json!("misbehave"));
    if shadow {
        labels.insert(SHADOW_LABEL.into(), json!("true"));
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "velero", "labels": labels},
        "binaryData": {"misbehave.wasm": base64::engine::general_purpose::STANDARD.encode(&wasm)},
        "data": {"misbehave.toml": manifest},
    })
}

/// An API server holding the serving module and its shadow, and a state directory.
struct Scene {
    server: ApiServer,
    scratch: tempfile::TempDir,
}

impl Scene {
    /// The shadow runs, for each serving action, the case `instead` maps it to.
    fn new(instead: &str) -> Scene {
        let server = ApiServer::start(&[]);
        server.apply(misbehave("velero-wasm-module-misbehave", false, ""));
        server.apply(misbehave(
            "misbehave-candidate",
            true,
            &format!("instead = \"{instead}\""),
        ));
        let scratch = tempfile::tempdir().unwrap();
        server.write_kubeconfig(&scratch.path().join("kubeconfig"));
        std::fs::create_dir(scratch.path().join("state")).unwrap();
        Scene { server, scratch }
    }

    fn state(&self) -> PathBuf {
        self.scratch.path().join("state")
    }

    fn start(&self, extra: &[(&str, &str)]) -> Plugin {
        let kubeconfig = self.scratch.path().join("kubeconfig");
        let state = self.state();
        let mut env = vec![
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", state.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("VELERO_NAMESPACE", "velero"),
            ("VELERO_WASM_STOCK", "none"),
        ];
        env.extend_from_slice(extra);
        Plugin::start_with(binary(), &["--log-level", "info"], &env, |c| {
            c.env_remove("KUBERNETES_SERVICE_HOST");
        })
    }
}

/// The item every call is made on.
fn item() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cm", "namespace": "shop"}, "data": {"k": "v"}})
}

/// What Velero receives from backup Execute of `case`: the item and the additional items.
async fn execute(plugin: &Plugin, case: &str) -> (Value, Vec<String>) {
    execute_on(plugin, case, &item()).await
}

/// What Velero receives from backup Execute of `case` on `item`.
async fn execute_on(plugin: &Plugin, case: &str, item: &Value) -> (Value, Vec<String>) {
    let backup = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                        "metadata": {"name": "nightly", "namespace": "velero", "uid": "b-uid-1"},
                        "spec": {}});
    let response = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: format!("{DOMAIN}/{case}"),
            item: item.to_string().into_bytes(),
            backup: backup.to_string().into_bytes(),
        })
        .await
        .unwrap_or_else(|e| panic!("{case}: {e}"))
        .into_inner();
    let returned = match response.item.is_empty() {
        true => item.clone(),
        false => serde_json::from_slice(&response.item).unwrap(),
    };
    let additional = response
        .additional_items
        .iter()
        .map(|id| format!("{} {}/{}", id.resource, id.namespace, id.name))
        .collect();
    (returned, additional)
}

/// `velero-wasm status --json` of `state`.
fn status(state: &Path) -> Value {
    let output = velero_wasm(&["status", "--state-dir", state.to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    stdout_json(&output)
}

/// The status once `done(shadow figures)` holds (the shadows run after the answers).
fn status_when(state: &Path, done: impl Fn(&Value) -> bool) -> Value {
    status_within(state, Duration::from_secs(30), done)
}

/// [`status_when`], waiting at most `limit` (a failure, not a figure: nothing asserts how long).
fn status_within(state: &Path, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let until = Instant::now() + limit;
    loop {
        let output = velero_wasm(&["status", "--state-dir", state.to_str().unwrap(), "--json"]);
        if output.status.code() == Some(0) {
            let status = stdout_json(&output);
            if done(&status["shadows"]["misbehave"]) {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the shadows never got there: {status:#}"
            );
        } else {
            assert!(Instant::now() < until, "no status: {output:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The plugin's stderr so far, once `text` is in it.
fn stderr_when(plugin: &Plugin, text: &str) -> String {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let stderr = String::from_utf8_lossy(&plugin.stderr.lock().unwrap()).into_owned();
        if stderr.contains(text) {
            return stderr;
        }
        assert!(Instant::now() < until, "no {text:?} in:\n{stderr}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn count(figures: &Value, pointer: &str) -> u64 {
    figures
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_that_differs_traps_hangs_or_writes_is_reported_and_velero_gets_the_serving_answers(
) {
    // label → echo: a different item and additional items; echo → trap; log → sleep (a hang);
    // stdout → write (refused: the shadow's action fails); counter: the same.
    let scene = Scene::new("label:echo,echo:trap,log:sleep,stdout:write");
    let plugin = scene.start(&[
        ("VELERO_WASM_SHADOW_TIMEOUT", "1s"),
        ("VELERO_WASM_SHADOW_IDLE", "2s"),
        ("VELERO_WASM_SHADOW_CALLS", "8"),
    ]);

    // What Velero receives is what the serving module answers, whatever the shadow does.
    let labelled = {
        let mut item = item();
        item["metadata"]["labels"] = json!({"velero-wasm.io/seen": "true"});
        item
    };
    for round in 0..2 {
        assert_eq!(
            execute(&plugin, "label").await,
            (labelled.clone(), vec![]),
            "round {round}"
        );
    }
    assert_eq!(
        execute(&plugin, "echo").await,
        (item(), vec!["secrets shop/cm".to_string()])
    );
    assert_eq!(execute(&plugin, "log").await, (item(), vec![]));
    assert_eq!(execute(&plugin, "stdout").await, (item(), vec![]));
    let mut counted = item();
    counted["metadata"]["annotations"] = json!({"test.velero-wasm.io/calls": "1"});
    assert_eq!(execute(&plugin, "counter").await, (counted, vec![]));

    // The operator's view: both modules with their source, and what the shadow did.
    let status = status_when(&scene.state(), |s| {
        count(s, "/compared") + count(s, "/faults/trap") + count(s, "/faults/deadline") == 6
    });
    let modules = status["modules"].as_array().unwrap();
    let module = |role: &str| {
        modules
            .iter()
            .find(|m| m["name"] == "misbehave" && m["role"] == role)
            .unwrap_or_else(|| panic!("no {role} misbehave in {status:#}"))
    };
    assert_eq!(module("serving")["version"], "1.0.0");
    assert!(module("serving")["source"]
        .as_str()
        .unwrap()
        .starts_with("ConfigMap velero-wasm-module-misbehave@"));
    assert_eq!(module("shadow")["version"], "1.1.0");
    assert!(module("shadow")["source"]
        .as_str()
        .unwrap()
        .starts_with("ConfigMap misbehave-candidate@"));
    let shadow = &status["shadows"]["misbehave"];
    assert_eq!(
        (
            count(shadow, "/compared"),
            count(shadow, "/same"),
            count(shadow, "/differing")
        ),
        (4, 1, 3),
        "{shadow:#}"
    );
    assert_eq!(
        shadow["differences"],
        json!({"item": 2, "additional-items": 2, "error": 1}),
        "{shadow:#}"
    );
    assert_eq!(
        shadow["faults"],
        json!({"trap": 1, "deadline": 1}),
        "{shadow:#}"
    );
    let last = &shadow["lastDifference"];
    assert_eq!(last["item"], "configmaps shop/cm", "{last:#}");
    assert_eq!(last["subject"], "backup nightly", "{last:#}");

    // The human table names the shadow and its figures.
    let output = velero_wasm(&["status", "--state-dir", scene.state().to_str().unwrap()]);
    let table = String::from_utf8_lossy(&output.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("misbehave") && l.contains("additional-items=2"))
        .unwrap_or_else(|| panic!("no shadow row in:\n{table}"));
    let figures: Vec<&str> = row.split_whitespace().take(6).collect();
    assert_eq!(figures, ["misbehave", "4", "1", "3", "2", "0"], "{table}");

    // Once the backup's calls are idle, one summary line.
    stderr_when(&plugin, "shadow summary of backup nightly");
    let session = plugin.shutdown().await;
    let lines = session.log_lines();
    let differs: Vec<&Map<String, Value>> = lines
        .iter()
        .filter(|l| {
            l["@message"]
                .as_str()
                .unwrap_or("")
                .starts_with("shadow result differs")
        })
        .collect();
    // Once per item and action: `label` was called twice on the same item.
    let actions: Vec<&str> = differs
        .iter()
        .map(|l| l["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions.len(), 2, "{actions:?}");
    let label = differs
        .iter()
        .find(|l| l["action"] == format!("{DOMAIN}/label"))
        .expect("the label difference is logged");
    assert_eq!(label["@level"], "info");
    assert_eq!(label["kinds"], "item,additional-items");
    assert_eq!(label["subject_uid"], "b-uid-1");
    let patch: Value = serde_json::from_str(label["diff"].as_str().unwrap()).unwrap();
    assert!(
        patch.as_array().unwrap().contains(
            &json!({"op": "add", "path": "/additionalItems/secrets shop~1cm", "value": true})
        ),
        "{patch:#}"
    );
    let write = differs
        .iter()
        .find(|l| l["action"] == format!("{DOMAIN}/stdout"))
        .expect("the refused write is a difference");
    assert_eq!(write["kinds"], "error");
    assert!(
        write["diff"].as_str().unwrap().contains("runs as a shadow"),
        "{write:?}"
    );
    let summary = lines
        .iter()
        .find(|l| l["@message"] == "shadow summary of backup nightly")
        .unwrap();
    assert_eq!(
        (&summary["compared"], &summary["differing"], &summary["uid"]),
        (&json!("4"), &json!("3"), &json!("b-uid-1")),
        "{summary:?}"
    );

    // Velero counts every warn and error line of the plugin against the backup: the only ones are the
    // serving `log` action's own (docs/operation.md#what-velero-counts), none of the shadow's trap,
    // hang, refused write or differences.
    let counted: Vec<String> = lines
        .iter()
        .filter(|l| l["@level"] == "warn" || l["@level"] == "error")
        .map(|l| format!("{} {}", l["action"], l["@message"]))
        .collect();
    assert_eq!(
        counted,
        [
            format!("\"{DOMAIN}/log\" \"warn line\""),
            format!("\"{DOMAIN}/log\" \"error line\"")
        ],
        "{counted:#?}"
    );

    // The shadow's write never reached the API server.
    assert!(scene
        .server
        .object("configmaps", "shop", "cm-copy")
        .is_none());
    let writes: Vec<String> = scene
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadows_own_warnings_and_errors_reach_velero_at_info() {
    // The shadow of `echo` runs `log`, which logs at every level.
    let scene = Scene::new("echo:log");
    let plugin = scene.start(&[("VELERO_WASM_SHADOW_IDLE", "1s")]);
    assert_eq!(
        execute(&plugin, "echo").await,
        (item(), vec!["secrets shop/cm".to_string()])
    );
    stderr_when(&plugin, "shadow summary of backup nightly");
    let session = plugin.shutdown().await;
    let lines = session.log_lines();
    let counted: Vec<&Map<String, Value>> = lines
        .iter()
        .filter(|l| l["@level"] == "warn" || l["@level"] == "error")
        .collect();
    assert!(counted.is_empty(), "{counted:#?}");
    for (message, level) in [("warn line", "warn"), ("error line", "error")] {
        let line = lines
            .iter()
            .find(|l| l["@message"] == message)
            .unwrap_or_else(|| panic!("no {message:?}:\n{}", session.stderr));
        assert_eq!(
            (&line["@level"], &line["shadow"], &line["guestLevel"]),
            (&json!("info"), &json!("true"), &json!(level)),
            "{line:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_calls_over_the_budget_are_dropped_and_counted() {
    // One shadow call at a time: while the shadow of `log` sleeps, the shadow of `counter` is dropped.
    let scene = Scene::new("log:sleep");
    let plugin = scene.start(&[
        ("VELERO_WASM_SHADOW_TIMEOUT", "3s"),
        ("VELERO_WASM_SHADOW_CALLS", "1"),
    ]);
    assert_eq!(execute(&plugin, "log").await, (item(), vec![]));
    let mut counted = item();
    counted["metadata"]["annotations"] = json!({"test.velero-wasm.io/calls": "1"});
    assert_eq!(execute(&plugin, "counter").await, (counted, vec![]));
    let status = status_when(&scene.state(), |s| count(s, "/faults/deadline") == 1);
    let shadow = &status["shadows"]["misbehave"];
    assert_eq!(shadow["dropped"], json!({"busy": 1}), "{shadow:#}");
    assert_eq!(count(shadow, "/compared"), 0, "{shadow:#}");
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_shadow_call_keeps_for_its_comparison_is_held_from_the_shadows_memory() {
    // The shadows' budget has room for the shadow's 256 MiB of guest memory and 5 MiB more: a call
    // on an item of 3 MiB keeps its input and the serving answer (6 MiB) until it is compared, so
    // it is dropped before it runs; a small item's call runs.
    let scene = Scene::new("echo:label");
    let plugin = scene.start(&[("VELERO_WASM_SHADOW_MEMORY", "261MiB")]);
    let mut big = item();
    big["data"]["padding"] = json!("x".repeat(3 << 20));
    let (_, additional) = execute_on(&plugin, "echo", &big).await;
    assert_eq!(additional.len(), 1, "{additional:?}");
    let status = status_when(&scene.state(), |s| count(s, "/dropped/memory") == 1);
    assert_eq!(
        count(&status, "/shadows/misbehave/compared"),
        0,
        "{status:#}"
    );
    // A small item's copy fits: its shadow runs and differs (echo against label).
    execute(&plugin, "echo").await;
    let status = status_when(&scene.state(), |s| count(s, "/compared") == 1);
    assert_eq!(
        count(&status, "/shadows/misbehave/dropped/memory"),
        1,
        "{status:#}"
    );
    plugin.shutdown().await;
}

/// The threads of process `pid` named `name`: (nice value, CPU time in clock ticks) of each, from
/// `/proc/<pid>/task/<tid>/stat`.
fn threads_named(pid: u32, name: &str) -> Vec<(i64, u64)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let stat = std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
        // `tid (comm) state ppid …`: the fields after the name, from `state` (field 3) on.
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        if head.split_once(" (").map(|(_, comm)| comm) != Some(name) {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15, nice field 19 (proc(5)); `fields[0]` is field 3.
        let number = |field: usize| fields[field - 3].parse::<i64>().unwrap();
        found.push((number(19), (number(14) + number(15)) as u64));
    }
    found
}

/// Shadows that spin forever cost bounded CPU: each is stopped once it has used its CPU share and
/// counted as a `cpu` fault (its deadline is ten minutes away), all of them ran on the one shadows'
/// thread at the nice value asked for, and the serving calls made meanwhile answer as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadows_that_spin_stop_at_their_cpu_share_on_one_thread_while_serving_calls_answer() {
    // The shadow of `label` spins; the shadow of `counter` is `counter`, answering the same.
    let scene = Scene::new("label:loop");
    let plugin = scene.start(&[
        ("VELERO_WASM_SHADOW_TIMEOUT", "10m"),
        ("VELERO_WASM_SHADOW_CPU", "50ms"),
        ("VELERO_WASM_SHADOW_NICE", "19"),
        // Room for every shadow call below at once: none is dropped.
        ("VELERO_WASM_SHADOW_CALLS", "8"),
    ]);
    let mut labelled = item();
    labelled["metadata"]["labels"] = json!({"velero-wasm.io/seen": "true"});
    let mut counted = item();
    counted["metadata"]["annotations"] = json!({"test.velero-wasm.io/calls": "1"});
    for round in 0..4 {
        assert_eq!(
            execute(&plugin, "label").await,
            (labelled.clone(), vec![]),
            "round {round}"
        );
        // Served while the shadows before it spin.
        assert_eq!(
            execute(&plugin, "counter").await,
            (counted.clone(), vec![]),
            "round {round}"
        );
    }
    // Waiting on the figures: a spinning shadow at nice 19 on a busy machine gets little CPU, and
    // its share is CPU time, so it may take a while of wall-clock time to use it.
    let status = status_within(&scene.state(), Duration::from_secs(240), |s| {
        count(s, "/faults/cpu") + count(s, "/compared") == 8
    });
    let shadow = &status["shadows"]["misbehave"];
    assert_eq!(shadow["faults"], json!({"cpu": 4}), "{shadow:#}");
    assert_eq!(
        (count(shadow, "/compared"), count(shadow, "/same")),
        (4, 4),
        "{shadow:#}"
    );
    // One shadows' thread, at nice 19, which did the spinning: at least the four shares of 50 ms
    // (USER_HZ is 100 on Linux: 20 ticks; one tick of rounding per share allowed).
    let pid = plugin.child.0.id();
    let threads = threads_named(pid, velero_wasm::shadow::THREAD_NAME);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let (nice, ticks) = threads[0];
    assert_eq!(nice, 19);
    assert!(ticks >= 16, "the shadows' thread used {ticks} ticks of CPU");
    plugin.shutdown().await;
}

/// `velero-wasm actions` where the plugin would load a shadow: its actions are listed after the
/// serving ones, marked as the shadow of the module of their name, in the table and in the JSON (with
/// the ConfigMap it comes from); `--module` shows a module's shadow with it.
#[test]
fn actions_lists_a_shadow_s_actions_marked_as_the_shadow_of_its_module() {
    let scene = Scene::new("log:sleep");
    let kubeconfig = scene.scratch.path().join("kubeconfig");
    let run = |args: &[&str]| {
        let mut all = vec!["actions"];
        all.extend_from_slice(args);
        support::run::Run::cli(&all)
            .env("KUBECONFIG", &kubeconfig)
            .env("VELERO_WASM_STATE_DIR", scene.state())
            .env("VELERO_WASM_CONFIGMAPS", "on")
            .env("VELERO_NAMESPACE", "velero")
            .env("VELERO_WASM_STOCK", "none")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
    };
    let out = run(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", support::stderr(&out));
    let json = stdout_json(&out);
    let actions = json["actions"].as_array().unwrap();
    let serving: Vec<&Value> = actions
        .iter()
        .filter(|a| a.get("shadowOf").is_none())
        .collect();
    let shadow: Vec<&Value> = actions
        .iter()
        .filter(|a| a.get("shadowOf").is_some())
        .collect();
    assert!(!serving.is_empty(), "{json:#}");
    // The shadow provides the same actions as the module it shadows, each marked.
    let names = |list: &[&Value]| -> std::collections::BTreeSet<String> {
        list.iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&shadow), names(&serving), "{json:#}");
    for action in &shadow {
        assert_eq!(action["shadowOf"], "misbehave", "{action:#}");
        assert_eq!(action["module"], "misbehave");
        assert!(
            action["origin"]
                .as_str()
                .unwrap()
                .contains("misbehave-candidate"),
            "{action:#}"
        );
    }
    for action in &serving {
        assert!(
            action["origin"]
                .as_str()
                .unwrap()
                .contains("velero-wasm-module-misbehave"),
            "{action:#}"
        );
    }
    let modules: Vec<(&str, Option<&str>)> = json["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["shadowOf"].as_str()))
        .collect();
    assert_eq!(
        modules,
        [("misbehave", None), ("misbehave", Some("misbehave"))]
    );

    // The table: a row per shadow action, its module marked; the sources name the shadow's ConfigMap.
    let out = run(&["--wide"]);
    assert_eq!(out.status.code(), Some(0), "{}", support::stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    let marked = table
        .lines()
        .filter(|l| l.contains("misbehave (shadow of misbehave)"))
        .count();
    assert_eq!(marked, shadow.len() + 1, "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("misbehave (shadow of misbehave)")
                && l.contains("misbehave-candidate")),
        "{table}"
    );

    // `--module misbehave`: the module and its shadow.
    let out = run(&["--module", "misbehave", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", support::stderr(&out));
    let one = stdout_json(&out);
    assert_eq!(one["actions"].as_array().unwrap().len(), actions.len());
}

#[test]
fn status_without_a_plugin_says_so() {
    let state = tempfile::tempdir().unwrap();
    let output = velero_wasm(&["status", "--state-dir", state.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        support::stderr(&output).contains("no plugin process has written its status"),
        "{output:?}"
    );
}

/// The ConfigMap `module pack` writes for `dir`, with `flags`.
fn packed(dir: &Path, flags: &[&str]) -> Value {
    let mut args = vec!["module", "pack", dir.to_str().unwrap()];
    args.extend_from_slice(flags);
    let output = velero_wasm(&args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_norway::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_trusted_keys_a_shadow_must_be_signed_like_a_serving_module() {
    let keys = tempfile::tempdir().unwrap();
    let prefix = keys.path().join("ops");
    let output = velero_wasm(&["module", "keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let key_id = String::from_utf8(output.stdout).unwrap().trim().to_string();
    let (private, public) = (
        format!("{}.key", prefix.display()),
        format!("{}.pub", prefix.display()),
    );
    let grant = "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n";
    let serving = support::module_dir(
        "misbehave",
        "misbehave",
        &format!("version = \"1.0.0\"\n[settings]\ndomain = \"{DOMAIN}\"\n{grant}"),
    );
    let candidate = support::module_dir(
        "misbehave",
        "misbehave",
        &format!(
            "version = \"1.1.0\"\n[settings]\ndomain = \"{DOMAIN}\"\ninstead = \"label:echo\"\n{grant}"
        ),
    );
    let scene = Scene {
        server: ApiServer::start(&[]),
        scratch: tempfile::tempdir().unwrap(),
    };
    scene
        .server
        .write_kubeconfig(&scene.scratch.path().join("kubeconfig"));
    std::fs::create_dir(scene.state()).unwrap();
    scene
        .server
        .apply(packed(serving.path(), &["--sign", &private]));
    let unsigned = packed(candidate.path(), &["--shadow"]);
    assert_eq!(
        unsigned["metadata"]["name"], "velero-wasm-module-misbehave-shadow",
        "{unsigned:#}"
    );
    assert_eq!(unsigned["metadata"]["labels"][SHADOW_LABEL], "true");
    scene.server.apply(unsigned);

    // Unsigned: not loaded, said so; the signed module serves.
    let plugin = scene.start(&[("VELERO_WASM_TRUSTED_KEYS", &public)]);
    let mut labelled = item();
    labelled["metadata"]["labels"] = json!({"velero-wasm.io/seen": "true"});
    assert_eq!(execute(&plugin, "label").await, (labelled.clone(), vec![]));
    let session = plugin.shutdown().await;
    let refused = session
        .log_lines()
        .into_iter()
        .find(|l| {
            let message = l["@message"].as_str().unwrap_or("");
            message.starts_with("shadow ") && message.contains("not signed")
        })
        .unwrap_or_else(|| panic!("no refusal:\n{}", session.stderr));
    // At info: a shadow's trouble is not the backup's, so Velero must not count it as a warning
    // (docs/operation.md#what-velero-counts).
    assert_eq!(refused["@level"], "info", "{refused:?}");
    let roles: Vec<(String, String)> = status(&scene.state())["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["role"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(roles, [("misbehave".to_string(), "serving".to_string())]);

    // Signed by the trusted key: it shadows, and differs.
    scene
        .server
        .apply(packed(candidate.path(), &["--shadow", "--sign", &private]));
    let plugin = scene.start(&[("VELERO_WASM_TRUSTED_KEYS", &public)]);
    assert_eq!(execute(&plugin, "label").await, (labelled, vec![]));
    let status = status_when(&scene.state(), |s| count(s, "/differing") == 1);
    let shadow = status["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "shadow")
        .cloned()
        .unwrap();
    assert_eq!(
        (&shadow["signedBy"], &shadow["verified"], &shadow["version"]),
        (&json!(key_id), &json!(true), &json!("1.1.0")),
        "{shadow:#}"
    );
    plugin.shutdown().await;
}
