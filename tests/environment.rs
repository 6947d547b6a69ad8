//! The `environment` capability, through `velero-wasm run` with the probe component
//! (`tests/components/probe`): Velero's namespace (the `--backup` object's, or `--velero-namespace`),
//! environment variables and variable-named files as far as `[grant] env` and `[grant] env-files`
//! allow, and the `@velero` namespace of a kube grant. The host process's environment is what the
//! module sees, so each test sets variables on the child process — except in a replay, which answers
//! from its recording.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use support::run::Run;

use serde_json::{json, Value};

const GRANT: &str = "[grant]\nenv = [\"AZURE_*\", \"AWS_WEB_IDENTITY_TOKEN_FILE\"]\nenv-files = [\"AWS_WEB_IDENTITY_TOKEN_FILE\"]\n";

/// Runs the probe's `action` on a ConfigMap whose `data` is `data`, with `env` set on the process.
fn probe(
    modules: &Path,
    action: &str,
    data: Value,
    env: &[(&str, &str)],
    extra: &[&str],
) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let item = support::write(
        dir.path(),
        "item.json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "probe", "namespace": "apps"}, "data": data})
        .to_string(),
    );
    let backup = support::write(
        dir.path(),
        "backup.json",
        &json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                "metadata": {"name": "b", "namespace": "openshift-adp"}, "spec": {}})
        .to_string(),
    );
    let cluster = support::write(
        dir.path(),
        "cluster.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "openshift-adp"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "apps"}},
        ]})
        .to_string(),
    );
    let run = Run::new(&format!("test.velero-wasm.io/{action}"))
        .item(&item)
        .path("--backup", &backup)
        .modules(modules)
        .args(extra);
    // A replay answers from its recording instead of a cluster.
    let run = if extra.contains(&"--replay") {
        run
    } else {
        run.cluster(&[&cluster])
    };
    run.envs(env).output()
}

/// What the probe's `environment` action saw.
fn seen(output: &Output) -> Value {
    let out = support::stdout_json(output);
    serde_json::from_str(out["item"]["data"]["result"].as_str().expect("a result")).unwrap()
}

#[test]
fn granted_variables_are_read_and_others_are_refused_with_a_warning() {
    let modules = support::module_dir("probe", "probe", GRANT);
    let out = probe(
        modules.path(),
        "environment",
        json!({"variable": "AZURE_TENANT_ID", "file": "NONE"}),
        &[("AZURE_TENANT_ID", "tid-5678")],
        &[],
    );
    assert_eq!(seen(&out)["variable"], json!({"ok": "tid-5678"}));

    // Granted but unset: none.
    let out = probe(
        modules.path(),
        "environment",
        json!({"variable": "AZURE_CLIENT_ID", "file": "NONE"}),
        &[],
        &[],
    );
    assert_eq!(seen(&out)["variable"], json!({"ok": null}));

    // Not granted: an error for the module, a warning for the operator, and the value never leaves.
    let out = probe(
        modules.path(),
        "environment",
        json!({"variable": "SECRET_THING", "file": "NONE"}),
        &[("SECRET_THING", "hunter2")],
        &[],
    );
    assert_eq!(
        seen(&out)["variable"],
        json!({"error": "permission denied: module probe is not granted the environment variable SECRET_THING"})
    );
    let log = support::stderr(&out);
    assert!(
        log.contains("WARN") && log.contains("not granted the environment variable SECRET_THING"),
        "{log}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hunter2"));
}

#[test]
fn files_named_by_granted_variables_are_read_and_nothing_else() {
    let modules = support::module_dir("probe", "probe", GRANT);
    let files = tempfile::tempdir().unwrap();
    let token = support::write(files.path(), "token", "eyJ.projected-token");
    let token = token.to_str().unwrap();
    let file = |variable: &str, env: &[(&str, &str)]| {
        seen(&probe(
            modules.path(),
            "environment",
            json!({"variable": "NONE", "file": variable}),
            env,
            &[],
        ))["file"]
            .clone()
    };
    assert_eq!(
        file(
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            &[("AWS_WEB_IDENTITY_TOKEN_FILE", token)]
        ),
        json!({"ok": "eyJ.projected-token"})
    );
    // Granted as a variable only (AZURE_*), not as a file.
    assert_eq!(
        file(
            "AZURE_FEDERATED_TOKEN_FILE",
            &[("AZURE_FEDERATED_TOKEN_FILE", token)]
        ),
        json!({"error": "permission denied: module probe is not granted the file named by the environment variable AZURE_FEDERATED_TOKEN_FILE"})
    );
    assert_eq!(
        file("AWS_WEB_IDENTITY_TOKEN_FILE", &[]),
        json!({"error": "environment variable AWS_WEB_IDENTITY_TOKEN_FILE is not set"})
    );
    let missing = files.path().join("missing");
    let missing = missing.to_str().unwrap();
    let error = file(
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        &[("AWS_WEB_IDENTITY_TOKEN_FILE", missing)],
    );
    assert!(
        error["error"].as_str().unwrap().starts_with(&format!(
            "cannot read {missing} (named by AWS_WEB_IDENTITY_TOKEN_FILE): "
        )),
        "{error}"
    );
    let big = support::write(files.path(), "big", &"x".repeat((1 << 20) + 1));
    let error = file(
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        &[("AWS_WEB_IDENTITY_TOKEN_FILE", big.to_str().unwrap())],
    );
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("is larger than the 1 MiB a module may read"),
        "{error}"
    );
}

#[test]
fn a_granted_file_that_is_a_fifo_is_refused_and_the_run_ends() {
    let modules = support::module_dir("probe", "probe", GRANT);
    let files = tempfile::tempdir().unwrap();
    let fifo = files.path().join("token");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.to_str().unwrap().to_string();
    // Run on a thread so that a run that never ends fails the test instead of hanging it.
    let (done, result) = std::sync::mpsc::channel();
    let dir = modules.path().to_path_buf();
    let token = fifo.clone();
    std::thread::spawn(move || {
        let out = probe(
            &dir,
            "environment",
            json!({"variable": "NONE", "file": "AWS_WEB_IDENTITY_TOKEN_FILE"}),
            &[("AWS_WEB_IDENTITY_TOKEN_FILE", &token)],
            &[],
        );
        let _ = done.send(out);
    });
    let out = result
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run ends within 60 s");
    assert_eq!(
        seen(&out)["file"],
        json!({"error": format!("{fifo} (named by AWS_WEB_IDENTITY_TOKEN_FILE) is not a regular file (it is a FIFO)")})
    );
}

#[test]
fn velero_s_namespace_is_the_backup_s_unless_given() {
    let modules = support::module_dir("probe", "probe", GRANT);
    let data = json!({"variable": "NONE", "file": "NONE"});
    let out = probe(modules.path(), "environment", data.clone(), &[], &[]);
    assert_eq!(seen(&out)["veleroNamespace"], "openshift-adp");
    let out = probe(
        modules.path(),
        "environment",
        data,
        &[("VELERO_NAMESPACE", "ignored-by-run")],
        &["--velero-namespace", "velero"],
    );
    assert_eq!(seen(&out)["veleroNamespace"], "velero");
}

#[test]
fn a_kube_grant_in_velero_s_namespace_follows_it() {
    let modules = support::module_dir(
        "probe",
        "probe",
        "[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\"]\nnamespaces = [\"@velero\"]\n",
    );
    let get = |namespace: &str, extra: &[&str]| {
        let out = probe(
            modules.path(),
            "kube-get",
            json!({"resource": "configmaps", "name": "settings", "namespace": namespace}),
            &[],
            extra,
        );
        support::stdout_json(&out)["item"]["data"].clone()
    };
    assert_eq!(get("openshift-adp", &[])["result"], "settings");
    let denied = get("apps", &[]);
    assert!(
        denied["error"].as_str().unwrap().contains(
            "permission denied: module probe is not granted get on configmaps in namespace apps"
        ),
        "{denied}"
    );
    // Another Velero namespace moves the grant with it.
    assert!(
        get("openshift-adp", &["--velero-namespace", "apps"])["error"]
            .as_str()
            .unwrap()
            .contains("not granted get on configmaps in namespace openshift-adp")
    );
    assert_eq!(
        get("apps", &["--velero-namespace", "apps"])["result"],
        "settings"
    );
}

#[test]
fn a_replay_answers_from_the_recording_and_the_grant_still_decides() {
    let modules = support::module_dir("probe", "probe", GRANT);
    let scratch = tempfile::tempdir().unwrap();
    let token = support::write(scratch.path(), "token", "eyJ.projected-token");
    let record = scratch.path().join("environment.jsonl");
    let record = record.to_str().unwrap();
    let data = json!({"variable": "AZURE_TENANT_ID", "file": "AWS_WEB_IDENTITY_TOKEN_FILE"});
    let recorded = probe(
        modules.path(),
        "environment",
        data.clone(),
        &[
            ("AZURE_TENANT_ID", "tid-5678"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.to_str().unwrap()),
        ],
        &["--record", record, "--velero-namespace", "velero"],
    );
    assert_eq!(
        seen(&recorded),
        json!({"veleroNamespace": "velero", "variable": {"ok": "tid-5678"}, "file": {"ok": "eyJ.projected-token"}})
    );

    // Another process environment and no token file: the recording's answers, Velero's namespace too.
    std::fs::remove_file(&token).unwrap();
    let replay = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["--replay", record];
        args.extend(extra);
        probe(modules.path(), "environment", data.clone(), env, &args)
    };
    let replayed = replay(
        &[
            ("AZURE_TENANT_ID", "another-tenant"),
            ("VELERO_NAMESPACE", "elsewhere"),
        ],
        &[],
    );
    assert_eq!(
        support::stdout_json(&replayed),
        support::stdout_json(&recorded)
    );
    assert!(!support::stderr(&replayed).contains("warning"));
    // The namespace is the recording's: another one given is refused, not ignored.
    let out = replay(&[], &["--velero-namespace", "openshift-adp"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        support::stderr(&out).contains("--velero-namespace \"openshift-adp\" differs from the recording's Velero namespace \"velero\""),
        "{}",
        support::stderr(&out)
    );

    // A denied call never reaches the recording, and a replay denies it again by the same grant, even
    // when a hand-edited recording answers it (that answer is then reported unused).
    let denied = json!({"variable": "SECRET_THING", "file": "NONE"});
    probe(
        modules.path(),
        "environment",
        denied.clone(),
        &[("SECRET_THING", "hunter2")],
        &["--record", record],
    );
    let text = std::fs::read_to_string(record).unwrap();
    assert!(!text.contains("SECRET_THING"), "{text}");
    std::fs::write(
        record,
        format!("{text}{{\"capability\":\"environment\",\"call\":{{\"op\":\"variable\",\"name\":\"SECRET_THING\"}},\"answer\":{{\"ok\":\"hunter2\"}}}}\n"),
    )
    .unwrap();
    let out = probe(
        modules.path(),
        "environment",
        denied,
        &[],
        &["--replay", record],
    );
    assert_eq!(
        seen(&out)["variable"],
        json!({"error": "permission denied: module probe is not granted the environment variable SECRET_THING"})
    );
    assert!(
        support::stderr(&out).contains("warning: 1 recorded calls were not made (environment 1)"),
        "{}",
        support::stderr(&out)
    );

    // Strict: a granted call the recording lacks fails the run, naming it.
    let out = replay(&[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        support::stderr(&out).contains(
            "the action made calls that are not in the recording:\n  environment: variable AZURE_TENANT_ID\n  environment: read-env-file AWS_WEB_IDENTITY_TOKEN_FILE"
        ),
        "{}",
        support::stderr(&out)
    );
}
