//! The command-line contract other tooling depends on:
//!
//! ```text
//! velero-wasm run --action NAME --item FILE (--backup FILE | --restore FILE)
//!                 [--item-from-backup FILE] [--cluster PATH ...] [--modules DIR]
//! ```
//! JSON on stdout; exit 0 on success, 1 when the action fails (message on stderr), 2 on bad input
//! (one line that says what and where). `velero-wasm actions` lists what is loaded.

use crate::support;

use std::path::Path;

use serde_json::json;
use support::run::Run;
use support::{stderr, stdout_json, velero_wasm, write};

const MANIFEST: &str = r#"
[limits]
timeout = "2s"

[[grant.kube]]
resources = ["configmaps"]
verbs = ["get", "create", "patch"]
namespaces = ["@item"]

[settings]
target = "settings"
"#;

struct Scene {
    modules: tempfile::TempDir,
    files: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let files = tempfile::tempdir().unwrap();
        let d = files.path();
        write(
            d,
            "item.json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"},"data":{"k":"v"}}"#,
        );
        write(
            d,
            "item.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: shop\n",
        );
        write(
            d,
            "secret.json",
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"shop"}}"#,
        );
        write(
            d,
            "backup.json",
            r#"{"metadata":{"name":"nightly","namespace":"velero"},"spec":{}}"#,
        );
        write(
            d,
            "restore.json",
            r#"{"metadata":{"name":"r","namespace":"velero"},"spec":{}}"#,
        );
        std::fs::create_dir(d.join("cluster")).unwrap();
        write(
            &d.join("cluster"),
            "objects.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n",
        );
        Scene {
            modules: support::module_dir("misbehave", "misbehave", MANIFEST),
            files,
        }
    }

    fn path(&self, name: &str) -> String {
        self.files.path().join(name).display().to_string()
    }

    /// The misbehave module again, its manifest the scene's with `toml` after it.
    fn add_to_manifest(&self, toml: &str) {
        let manifest = format!("{MANIFEST}\n{toml}\n");
        support::add_module(self.modules.path(), "misbehave", "misbehave", &manifest);
    }

    fn run(&self, case: &str, extra: &[&str]) -> std::process::Output {
        let action = format!("test.velero-wasm.io/{case}");
        let (item, backup, cluster, modules) = (
            self.path("item.json"),
            self.path("backup.json"),
            self.path("cluster"),
            self.modules.path().display().to_string(),
        );
        let mut args = vec![
            "run",
            "--action",
            &action,
            "--item",
            &item,
            "--backup",
            &backup,
            "--cluster",
            &cluster,
            "--modules",
            &modules,
        ];
        args.extend_from_slice(extra);
        velero_wasm(&args)
    }
}

fn one_line(output: &std::process::Output) -> String {
    let text = stderr(output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {text}");
    lines[0].to_string()
}

#[test]
fn success_prints_the_item_additional_items_and_cluster_writes() {
    let scene = Scene::new();
    let out = scene.run("echo", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout_json(&out),
        json!({
            "item": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "shop"}, "data": {"k": "v"}},
            "additionalItems": [{"group": "", "resource": "secrets", "namespace": "shop", "name": "app"}],
            "clusterWrites": []
        })
    );
}

#[test]
fn writes_are_applied_to_the_fixture_cluster_and_reported() {
    let scene = Scene::new();
    let out = scene.run("write", &["--now", "2026-05-02T10:00:00Z"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let writes = &stdout_json(&out)["clusterWrites"];
    assert_eq!(writes.as_array().unwrap().len(), 2, "{writes:#}");
    assert_eq!(writes[0]["verb"], "create");
    assert_eq!(writes[0]["kind"], "ConfigMap");
    assert_eq!(writes[0]["namespace"], "shop");
    assert_eq!(writes[0]["name"], "app-copy");
    assert_eq!(writes[0]["object"]["data"], json!({"k": "v"}));
    assert_eq!(
        writes[0]["object"]["metadata"]["creationTimestamp"],
        "2026-05-02T10:00:00Z"
    );
    assert_eq!(writes[1]["verb"], "patch");
    assert_eq!(writes[1]["patchType"], "merge");
    assert_eq!(
        writes[1]["patch"],
        json!({"metadata": {"labels": {"copied": "true"}}})
    );
    assert_eq!(writes[1]["object"]["metadata"]["labels"]["copied"], "true");
}

#[test]
fn yaml_items_are_accepted() {
    let scene = Scene::new();
    let (item, backup, modules) = (
        scene.path("item.yaml"),
        scene.path("backup.json"),
        scene.modules.path().display().to_string(),
    );
    let out = velero_wasm(&[
        "run",
        "--action",
        "test.velero-wasm.io/echo",
        "--item",
        &item,
        "--backup",
        &backup,
        "--modules",
        &modules,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["item"]["metadata"]["name"], "app");
}

#[test]
fn an_action_error_exits_1_with_the_message_on_stderr() {
    let scene = Scene::new();
    let out = scene.run("forbidden-kube", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains(
        "permission denied: module misbehave is not granted get on secrets in namespace shop"
    ));
    let out = scene.run("trap", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(
        "module misbehave, action test.velero-wasm.io/trap on item configmaps shop/app: trapped"
    ));
    // The guest's panic message is part of the error at the default log level, not only at debug.
    assert!(
        stderr(&out).contains("deliberate panic in trap"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_settings_schema_in_the_old_vocabulary_loads_and_says_what_to_write_instead() {
    let scene = Scene::new();
    scene.add_to_manifest("[settings-schema.target]\nvalues = [\"settings\", \"elsewhere\"]");
    let out = scene.run("echo", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let message = stderr(&out).replace("\\\"", "\"");
    assert!(
        message.contains("module misbehave: settings-schema.target: the old settings vocabulary")
            && message.contains("is deprecated and was converted; write it as JSON Schema:")
            && message.contains(r#"enum = ["settings", "elsewhere"]"#),
        "{message}"
    );
}

#[test]
fn a_denied_call_names_the_manifest_rule_that_allows_it_and_that_rule_does() {
    let scene = Scene::new();
    let out = scene.run("forbidden-kube", &[]);
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out).replace("\\\"", "\"");
    let rule = r#"[[grant.kube]] resources = ["secrets"] verbs = ["get"] namespaces = ["@item"]"#;
    assert!(
        message.contains(&format!("; the manifest rule that allows it: {rule}")),
        "{message}"
    );
    // Added to the manifest (one key a line), the rule lets the same call through to the cluster,
    // which has no such Secret.
    let toml = rule.replacen("]] ", "]]\n", 1).replace("] ", "]\n");
    scene.add_to_manifest(&toml);
    let out = scene.run("forbidden-kube", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Error::NotFound") && !stderr(&out).contains("permission denied"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn guest_output_never_reaches_stdout() {
    let scene = Scene::new();
    let out = scene.run("stdout", &[]);
    assert_eq!(out.status.code(), Some(0));
    stdout_json(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("must not reach"));
}

#[test]
fn bad_input_exits_2_with_one_line_that_says_what_and_where() {
    let scene = Scene::new();
    let d = scene.files.path();
    write(
        d,
        "broken.json",
        "{\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\n}",
    );
    write(d, "broken.yaml", "kind: [ConfigMap\n");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--item".into(), scene.path("missing.json")], "--item"),
        (
            vec!["--item".into(), scene.path("broken.json")],
            "broken.json: invalid JSON at line 4",
        ),
        (
            vec!["--item".into(), scene.path("broken.yaml")],
            "broken.yaml: invalid YAML",
        ),
        (
            vec!["--item".into(), scene.path("secret.json")],
            "does not apply to item secrets shop/s",
        ),
        (
            vec!["--restore".into(), scene.path("restore.json")],
            "is a backup action: give --backup FILE",
        ),
        (
            vec!["--cluster".into(), scene.path("broken.json")],
            "--cluster",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec![
            "run".to_string(),
            "--action".into(),
            "test.velero-wasm.io/echo".into(),
            "--modules".into(),
            scene.modules.path().display().to_string(),
        ];
        if !args.contains(&"--item".to_string()) {
            all.extend(["--item".into(), scene.path("item.json")]);
        }
        if !args.contains(&"--restore".to_string()) {
            all.extend(["--backup".into(), scene.path("backup.json")]);
        }
        all.extend(args.iter().cloned());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = velero_wasm(&refs);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        let line = one_line(&out);
        assert!(line.contains(expected), "{args:?}: {line}");
    }
}

#[test]
fn an_unknown_action_exits_2_and_names_the_loaded_ones() {
    let scene = Scene::new();
    let out = scene.run("no-such-case", &[]);
    assert_eq!(out.status.code(), Some(2));
    let line = one_line(&out);
    assert!(
        line.contains("unknown action \"test.velero-wasm.io/no-such-case\""),
        "{line}"
    );
    assert!(line.contains("test.velero-wasm.io/echo"), "{line}");
}

#[test]
fn a_module_directory_with_a_bad_module_still_serves_the_good_ones() {
    let scene = Scene::new();
    let dir = scene.modules.path();
    write(dir, "broken.wasm", "not wasm");
    write(
        dir,
        "broken.toml",
        &format!("sha256 = \"{}\"", sha256_of(&dir.join("broken.wasm"))),
    );
    let out = scene.run("echo", &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("module broken"), "{}", stderr(&out));
}

#[test]
fn actions_lists_one_line_per_action_within_100_columns() {
    let scene = Scene::new();
    let modules = scene.modules.path().display().to_string();
    let out = velero_wasm(&["actions", "--modules", &modules]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("NAME")
            && header.contains("KIND")
            && header.contains("MODULE")
            && header.contains("APPLIES TO")
            && !header.contains("GRANT"),
        "{header}"
    );
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
    // One line per action: the stock ones and the test component's.
    assert!(lines.clone().count() > 10, "{table}");
    let echo = lines
        .find(|l| l.starts_with("test.velero-wasm.io/echo "))
        .unwrap();
    assert!(
        echo.contains("backup") && echo.contains("configmaps") && echo.contains("misbehave"),
        "{echo}"
    );
    assert!(!echo.contains("@item"), "grants only under --wide: {echo}");

    let out = velero_wasm(&["actions", "--json", "--modules", &modules]);
    let json = stdout_json(&out);
    let echo = json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "test.velero-wasm.io/echo")
        .unwrap();
    assert_eq!(echo["veleroKind"], "BackupItemAction");
    assert_eq!(
        echo["appliesTo"]["includedResources"],
        json!(["configmaps"])
    );
    assert_eq!(echo["grant"]["kube"][0]["namespaces"], json!(["@item"]));

    write(scene.modules.path(), "unpinned.wasm", "x");
    write(scene.modules.path(), "unpinned.toml", "");
    let out = velero_wasm(&["actions", "--modules", &modules]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a module left out is reported with exit 1"
    );
    assert!(stderr(&out).contains("unpinned.toml has no sha256"));
}

#[test]
fn actions_shows_grants_under_wide_and_one_module_in_full_under_module() {
    let scene = Scene::new();
    let modules = scene.modules.path().display().to_string();
    let out = velero_wasm(&["actions", "--wide", "--modules", &modules]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.lines().next().unwrap().contains("GRANT"), "{table}");
    let echo = table
        .lines()
        .find(|l| l.starts_with("test.velero-wasm.io/echo "))
        .unwrap();
    assert!(
        echo.contains("get,create,patch configmaps in @item"),
        "{echo}"
    );
    // Cluster scope ("" in the manifest) is written (cluster).
    let agent = table
        .lines()
        .find(|l| l.contains("  agent  "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        agent.contains("get customresourcedefinitions.apiextensions.k8s.io (cluster)"),
        "{agent}"
    );

    let out = velero_wasm(&["actions", "--module", "agent", "--modules", &modules]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("module") && lines[0].ends_with("agent"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("origin") && l.ends_with("stock")),
        "{text}"
    );
    assert!(lines.iter().any(|l| l.starts_with("sha256")), "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("limits") && l.contains("timeout ")),
        "{text}"
    );
    // The grant, one rule a line.
    let grant = lines.iter().position(|l| l.starts_with("grant ")).unwrap();
    assert!(
        lines[grant].ends_with("get customresourcedefinitions.apiextensions.k8s.io (cluster)"),
        "{text}"
    );
    assert!(
        lines[grant + 1]
            .trim_start()
            .starts_with("list hostedcontrolplanes"),
        "{text}"
    );
    // Then the module's actions, and no other module's.
    assert!(lines.iter().any(|l| l.starts_with("NAME")), "{text}");
    assert!(!text.contains("test.velero-wasm.io/echo"), "{text}");
    assert!(!text.contains("kubevirt-velero-plugin/"), "{text}");

    let out = velero_wasm(&["actions", "--module", "nosuch", "--modules", &modules]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--module nosuch: no such module; loaded: ")
            && stderr(&out).contains("misbehave"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_log_level_may_come_before_the_command() {
    let scene = Scene::new();
    let modules = scene.modules.path().display().to_string();
    for args in [
        vec!["--log-level", "debug", "actions", "--modules", &modules],
        vec!["--log-level=debug", "actions", "--modules", &modules],
        vec!["actions", "--log-level", "debug", "--modules", &modules],
    ] {
        let out = velero_wasm(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("NAME"),
            "{args:?}"
        );
        assert!(stderr(&out).contains("DEBUG"), "{args:?}: {}", stderr(&out));
    }
    let out = velero_wasm(&["--log-level", "error", "run", "--action", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("is a Velero plugin"),
        "{}",
        stderr(&out)
    );
}

/// A crate of a policy author's, outside this repository, that depends on the SDK by path.
fn author_crate(dir: &Path) {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    write(
        dir,
        "Cargo.toml",
        &format!(
            "[package]\nname = \"label-pvcs\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n\
             [dependencies]\nvelero-wasm-sdk = {{ path = {:?} }}\n\n[workspace]\n\n\
             [profile.release]{}",
            sdk.canonicalize().unwrap().display().to_string(),
            // The profile and stack size of a crate from `velero-wasm new`, so that both tests share
            // one build of the SDK and its dependencies in target/author-crate.
            include_str!("../host/src/cli/new/common/Cargo.toml")
                .split("[profile.release]")
                .nth(1)
                .unwrap()
        ),
    );
    std::fs::create_dir_all(dir.join(".cargo")).unwrap();
    write(
        &dir.join(".cargo"),
        "config.toml",
        include_str!("../host/src/cli/new/common/config.toml"),
    );
    std::fs::create_dir_all(dir.join("src")).unwrap();
    write(
        &dir.join("src"),
        "lib.rs",
        r#"use velero_wasm_sdk::*;

pub struct LabelPvcs;

impl Plugin for LabelPvcs {
    fn describe() -> Vec<ActionInfo> {
        vec![ActionInfo::new("example.io/label-pvcs", Kind::Backup)
            .applies_to(Selector::resources(&["persistentvolumeclaims"]))
            .needs_kube_in("persistentvolumeclaims", &[Verb::List], &["@item"])]
    }

    fn backup(_action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        let mut item = Object::parse(&request.item)?;
        item.set_label("example.io/labelled", "true");
        Ok(BackupResponse::with_item(&item))
    }
}

export_plugin!(LabelPvcs);
"#,
    );
    // The workspace's lock: the same dependency versions, all in the local cache (no network).
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock"),
        dir.join("Cargo.lock"),
    )
    .unwrap();
}

/// Runs `velero-wasm build DIR` offline, with a target directory kept between runs.
fn build_module(dir: &Path) -> std::process::Output {
    Run::cli(["build", dir.to_str().unwrap()])
        .env("CARGO_NET_OFFLINE", "true")
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/author-crate"),
        )
        .output()
}

#[test]
fn build_makes_the_component_pins_its_sha256_in_the_manifest_and_checks_the_grant() {
    let dir = tempfile::tempdir().unwrap();
    author_crate(dir.path());
    let manifest = "# Labels PVCs.\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"  # pinned by velero-wasm build\ndescription = \"label PVCs\"\n\n[[grant.kube]]  # the PVCs of the item's namespace\nresources = [\"persistentvolumeclaims\"]\nverbs = [\"list\"]\nnamespaces = [\"@item\"]\n";
    write(dir.path(), "label-pvcs.toml", manifest);
    let out = build_module(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("example.io/label-pvcs  backup"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let wasm = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/author-crate/wasm32-wasip2/release/label_pvcs.wasm");
    let sha = sha256_of(&wasm);
    let written = std::fs::read_to_string(dir.path().join("label-pvcs.toml")).unwrap();
    assert_eq!(written, manifest.replace(&"0".repeat(64), &sha));
    assert!(stderr(&out).contains(&sha), "{}", stderr(&out));

    // The module as built serves from a module directory with that manifest.
    let modules = tempfile::tempdir().unwrap();
    std::fs::copy(&wasm, modules.path().join("label-pvcs.wasm")).unwrap();
    std::fs::copy(
        dir.path().join("label-pvcs.toml"),
        modules.path().join("label-pvcs.toml"),
    )
    .unwrap();
    let list = || {
        velero_wasm(&[
            "actions",
            "--module",
            "label-pvcs",
            "--modules",
            modules.path().to_str().unwrap(),
        ])
    };
    let listed = list();
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));

    // A grant that does not cover what the action declares it needs: exit 1, saying so.
    let narrow = manifest.replace("verbs = [\"list\"]", "verbs = [\"get\"]");
    write(dir.path(), "label-pvcs.toml", &narrow);
    let out = build_module(dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("action example.io/label-pvcs needs")
            && stderr(&out).contains("which the manifest does not grant"),
        "{}",
        stderr(&out)
    );
    let pinned_narrow = std::fs::read_to_string(dir.path().join("label-pvcs.toml")).unwrap();
    // module/ keeps the module that built and passed.
    let module_manifest = dir.path().join("module/label-pvcs.toml");
    assert_eq!(
        std::fs::read_to_string(&module_manifest).unwrap(),
        written,
        "a failed build left module/ alone"
    );
    assert!(stderr(&out).contains("left as it was"), "{}", stderr(&out));
    // `test` does not run a suite against the module/ that failed build left: it says to build.
    std::fs::create_dir_all(dir.path().join("tests")).unwrap();
    write(
        &dir.path().join("tests"),
        "suite.yaml",
        "modules: ../module\ncases:\n  - name: labels\n    action: example.io/label-pvcs\n    item: item.json\n    backup: backup.json\n    expect: {}\n",
    );
    let out = velero_wasm(&[
        "test",
        dir.path().join("tests/suite.yaml").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not the latest build")
            && stderr(&out).contains("label-pvcs.toml differs from")
            && stderr(&out).contains("run `velero-wasm build` in"),
        "{}",
        stderr(&out)
    );

    // The verb granted, but in a namespace the item's is not: the need says where, and build says
    // what to add.
    let elsewhere = manifest.replace("namespaces = [\"@item\"]", "namespaces = [\"kube-system\"]");
    write(dir.path(), "label-pvcs.toml", &elsewhere);
    let out = build_module(dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("needs list persistentvolumeclaims in @item, which the manifest does not grant (list on persistentvolumeclaims is granted only in \"kube-system\"")
            && stderr(&out).contains("add \"@item\" to the namespaces of the rule that grants it"),
        "{}",
        stderr(&out)
    );
    write(dir.path(), "label-pvcs.toml", &pinned_narrow);

    // `actions` says the same of a module directory holding it, and exits 1.
    std::fs::copy(
        dir.path().join("label-pvcs.toml"),
        modules.path().join("label-pvcs.toml"),
    )
    .unwrap();
    let listed = list();
    assert_eq!(listed.status.code(), Some(1), "{}", stderr(&listed));
    assert!(
        stderr(&listed).contains("which the manifest does not grant"),
        "{}",
        stderr(&listed)
    );
}

#[test]
fn without_a_command_it_explains_it_is_a_plugin() {
    let out = velero_wasm(&["--log-level", "debug"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("is a Velero plugin"));
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs the binary like [`velero_wasm`], failing the test if it has not ended within `limit` (a hang).
fn velero_wasm_within(args: &[&str], limit: std::time::Duration) -> std::process::Output {
    use std::process::Stdio;
    let mut child = Run::cli(args)
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run velero-wasm");
    let until = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "velero-wasm {args:?} did not end within {limit:?}; stderr: {}",
                stderr(&out)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let scene = Scene::new();
    let fifo = scene.files.path().join("item.fifo.json");
    mkfifo(&fifo);
    let fifo = fifo.display().to_string();
    let (item, backup) = (scene.path("item.json"), scene.path("backup.json"));
    let modules = scene.modules.path().display().to_string();
    let base = [
        "run",
        "--action",
        "test.velero-wasm.io/echo",
        "--modules",
        &modules,
    ];
    for (flags, expected) in [
        (
            vec!["--item", &fifo, "--backup", &backup],
            format!("--item {fifo}: is not a regular file (it is a FIFO)"),
        ),
        (
            vec!["--item", &item, "--backup", &fifo],
            format!("--backup {fifo}: is not a regular file (it is a FIFO)"),
        ),
        (
            vec![
                "--item",
                &item,
                "--backup",
                &backup,
                "--cluster",
                "/dev/zero",
            ],
            "--cluster /dev/zero: is not a regular file (it is a character device)".to_string(),
        ),
        (
            vec!["--item", &item, "--backup", &backup, "--replay", &fifo],
            format!("--replay {fifo}: is not a regular file (it is a FIFO)"),
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(&flags);
        let out = velero_wasm_within(&args, std::time::Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert_eq!(one_line(&out), format!("velero-wasm run: {expected}"));
    }
}

#[test]
fn an_input_file_over_64_mib_is_refused() {
    let scene = Scene::new();
    let big = scene.files.path().join("big.yaml");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len((64 << 20) + 1).unwrap();
    let big = big.display().to_string();
    let out = scene.run("echo", &["--cluster", &big]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        one_line(&out),
        format!("velero-wasm run: --cluster {big}: is larger than the 64 MiB limit")
    );
}

#[test]
fn symbolic_links_that_loop_in_a_cluster_directory_are_walked_once() {
    let scene = Scene::new();
    let cluster = scene.files.path().join("cluster");
    // Two links to the directory itself, and one below it back up: each directory is read once.
    std::os::unix::fs::symlink(".", cluster.join("again")).unwrap();
    std::os::unix::fs::symlink(".", cluster.join("and-again")).unwrap();
    std::fs::create_dir(cluster.join("sub")).unwrap();
    std::os::unix::fs::symlink("..", cluster.join("sub").join("up")).unwrap();
    let out = velero_wasm_within(
        &[
            "run",
            "--action",
            "test.velero-wasm.io/echo",
            "--item",
            &scene.path("item.json"),
            "--backup",
            &scene.path("backup.json"),
            "--cluster",
            &cluster.display().to_string(),
            "--modules",
            &scene.modules.path().display().to_string(),
        ],
        std::time::Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn deeply_nested_yaml_is_refused_with_a_clear_error() {
    let scene = Scene::new();
    let deep = write(
        scene.files.path(),
        "deep.yaml",
        &format!("kind: ConfigMap\ndata: {}\n", "[".repeat(200_000)),
    );
    let deep = deep.display().to_string();
    let args = [
        "run",
        "--action",
        "test.velero-wasm.io/echo",
        "--item",
        &deep,
        "--backup",
        &scene.path("backup.json"),
        "--modules",
        &scene.modules.path().display().to_string(),
    ];
    let out = velero_wasm_within(&args, std::time::Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let line = one_line(&out);
    assert!(
        line.starts_with(&format!("velero-wasm run: --item {deep}: "))
            && line.contains("nested deeper than"),
        "{line}"
    );
}

#[test]
fn a_recording_is_private_and_never_written_through_a_symbolic_link() {
    use std::os::unix::fs::PermissionsExt;
    let scene = Scene::new();
    let existing = write(scene.files.path(), "existing.jsonl", "old contents\n");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = scene.run("echo", &["--record", &existing.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mode = std::fs::metadata(&existing).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a recording holds Secrets: owner only");
    let text = std::fs::read_to_string(&existing).unwrap();
    assert!(text.starts_with("{\"recording\":\"velero-wasm\""), "{text}");

    let target = write(scene.files.path(), "target.txt", "someone else's file\n");
    let link = scene.files.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let link = link.display().to_string();
    let out = scene.run("echo", &["--record", &link]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        one_line(&out).starts_with(&format!(
            "velero-wasm run: --record {link}: is a symbolic link"
        )),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "someone else's file\n"
    );
}

/// `actions --json`: (action name, module) pairs.
fn listed_actions(out: &std::process::Output) -> Vec<(String, String)> {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    stdout_json(out)["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["module"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn actions_lists_only_the_chosen_stock_modules() {
    let all = listed_actions(&velero_wasm(&["actions", "--json"]));
    let modules: std::collections::BTreeSet<&str> = all.iter().map(|(_, m)| m.as_str()).collect();
    assert!(
        modules.contains("kubevirt") && modules.contains("hcp"),
        "{all:?}"
    );

    let kubevirt = listed_actions(&velero_wasm(&["actions", "--json", "--stock", "kubevirt"]));
    let expected: Vec<_> = all
        .iter()
        .filter(|(_, m)| m == "kubevirt")
        .cloned()
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(kubevirt, expected);
    assert!(kubevirt
        .iter()
        .all(|(name, _)| name.starts_with("kubevirt-velero-plugin/")));

    // The variable does the same as the flag.
    let out = Run::cli(["actions", "--json"])
        .env("VELERO_WASM_STOCK", "hcp")
        .output();
    let hcp = listed_actions(&out);
    assert_eq!(
        hcp,
        all.iter()
            .filter(|(_, m)| m == "hcp")
            .cloned()
            .collect::<Vec<_>>()
    );

    // `none` with a module directory: only the directory's actions.
    let scene = Scene::new();
    let dir = scene.modules.path().display().to_string();
    let only_dir = listed_actions(&velero_wasm(&[
        "actions",
        "--json",
        "--stock",
        "none",
        "--modules",
        &dir,
    ]));
    assert!(!only_dir.is_empty());
    assert!(
        only_dir.iter().all(|(_, m)| m == "misbehave"),
        "{only_dir:?}"
    );
}

#[test]
fn an_unknown_stock_module_exits_2_naming_the_stock_modules() {
    let out = velero_wasm(&["actions", "--stock", "kubevirt,hpc"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let message = stderr(&out);
    assert!(
        message.contains("unknown stock module \"hpc\""),
        "{message}"
    );
    for name in ["agent", "hcp", "kubevirt", "signing"] {
        assert!(message.contains(name), "{message}");
    }
}

/// The WIT package the sources declare, read the way a reader of `wit/world.wit` would.
fn wit_package() -> String {
    let world = std::fs::read_to_string(support::root().join("wit/world.wit")).unwrap();
    world
        .lines()
        .find_map(|l| l.strip_prefix("package "))
        .unwrap()
        .trim_end_matches(';')
        .to_string()
}

#[test]
fn version_names_the_release_and_the_wit_package() {
    let out = velero_wasm(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "velero-wasm {} (WIT {})\n",
            env!("CARGO_PKG_VERSION"),
            wit_package()
        )
    );
    assert!(wit_package().starts_with("velero-wasm:plugin@"));
}

#[test]
fn install_plugin_copies_a_working_binary_into_the_plugin_directory() {
    let target = tempfile::tempdir().unwrap();
    let dir = target.path().display().to_string();
    let out = velero_wasm(&["install-plugin", &dir]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let installed = target.path().join("velero-wasm");
    assert_eq!(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        [format!(
            "installed velero-wasm {} (WIT {}) at {}",
            env!("CARGO_PKG_VERSION"),
            wit_package(),
            installed.display()
        )]
    );
    // Nothing else is left in the directory (Velero runs every executable file there).
    let names: Vec<_> = std::fs::read_dir(target.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["velero-wasm"]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(env!("CARGO_BIN_EXE_velero-wasm")).unwrap()
    );

    // The installed binary answers: its version, and the README demo.
    let version = Run::cli(["--version"]).program(&installed).output();
    assert_eq!(version.stdout, velero_wasm(&["--version"]).stdout);
    let demo = readme_demo(&installed).output().unwrap();
    assert_eq!(demo.status.code(), Some(0), "{}", stderr(&demo));
    let answer = stdout_json(&demo);
    assert_eq!(answer["item"]["kind"], "VirtualMachine");
    assert!(!answer["additionalItems"].as_array().unwrap().is_empty());

    // Installing again replaces the binary in place.
    let again = velero_wasm(&["install-plugin", &dir]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 1);
}

#[test]
fn install_plugin_into_a_directory_that_cannot_take_it_fails_clearly() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("missing");
    let out = velero_wasm(&["install-plugin", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        one_line(&out).contains(&format!("{}: No such file or directory", missing.display())),
        "{}",
        stderr(&out)
    );
    let file = write(scratch.path(), "file", "x");
    let out = velero_wasm(&["install-plugin", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        one_line(&out).ends_with(": not a directory"),
        "{}",
        stderr(&out)
    );
    // A directory nobody may write to (procfs refuses new files even to root).
    let out = velero_wasm(&["install-plugin", "/proc/self"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        one_line(&out).contains("cannot write in /proc/self"),
        "{}",
        stderr(&out)
    );
}

/// One command of a `console` block of docs/authoring.md, with the lines it must print.
struct GuideStep {
    command: Vec<String>,
    expected: Vec<String>,
}

/// The commands of the guide's `console` blocks, in order: a `$ ` line (continued by a trailing `\`)
/// is a command, the lines after it are what it must print.
fn guide_steps(doc: &str) -> Vec<GuideStep> {
    let mut steps: Vec<GuideStep> = Vec::new();
    let (mut in_console, mut continued) = (false, None::<String>);
    for line in doc.lines() {
        if !in_console {
            in_console = line == "```console";
            continue;
        }
        if line == "```" {
            in_console = false;
            continue;
        }
        let command = match (continued.take(), line.strip_prefix("$ ")) {
            (Some(start), _) => Some(format!("{start} {}", line.trim())),
            (None, Some(command)) => Some(command.to_string()),
            (None, None) => None,
        };
        match command {
            Some(command) => match command.strip_suffix('\\') {
                Some(start) => continued = Some(start.trim_end().to_string()),
                None => steps.push(GuideStep {
                    command: command.split_whitespace().map(str::to_string).collect(),
                    expected: Vec::new(),
                }),
            },
            None => steps
                .last_mut()
                .expect("output before any command in docs/authoring.md")
                .expected
                .push(line.to_string()),
        }
    }
    steps
}

/// Whether `line` is what the guide's `pattern` shows, `…` standing for any text (ends trimmed).
fn guide_line_matches(pattern: &str, line: &str) -> bool {
    let (pattern, line) = (pattern.trim(), line.trim());
    let pieces: Vec<&str> = pattern.split('…').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return line == pattern;
    }
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// Checks that every expected line is printed, in order within stdout and within stderr.
fn assert_guide_output(step: &GuideStep, out: &std::process::Output) {
    let (stdout, stderr_text) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let mut streams = [stdout.lines(), stderr_text.lines()];
    for expected in &step.expected {
        if expected.trim().is_empty() || expected.trim() == "…" {
            continue;
        }
        let found = streams.iter_mut().any(|lines| {
            let mut ahead = lines.clone();
            while let Some(line) = ahead.next() {
                if guide_line_matches(expected, line) {
                    *lines = ahead;
                    return true;
                }
            }
            false
        });
        assert!(
            found,
            "`{}` did not print (in order) the line\n  {expected}\nstdout:\n{stdout}\nstderr:\n{stderr_text}",
            step.command.join(" ")
        );
    }
}

/// docs/authoring.md, run as written in a directory outside this repository: `velero-wasm new` (the
/// SDK from the binary, no path into this checkout), the crate's native `cargo test`, `velero-wasm build`, `actions`, `run`,
/// `--record` and `--replay`, `module pack` and `module verify`; each must succeed and print what the
/// guide shows.
#[test]
fn the_authoring_guide_runs_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(repo.join("docs/authoring.md")).unwrap();
    let steps = guide_steps(&doc);
    assert!(steps.len() >= 8, "too few commands found in the guide");
    let scratch = tempfile::tempdir().unwrap();
    let mut cwd = scratch.path().to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for step in &steps {
        let args: Vec<String> = step.command.clone();
        let mut command = match args[0].as_str() {
            "cd" => {
                cwd = cwd.join(&args[1]);
                continue;
            }
            "velero-wasm" => std::process::Command::new(support::run::binary()),
            "cargo" => std::process::Command::new(&cargo),
            other => panic!("docs/authoring.md runs {other:?}, which this test does not know"),
        };
        let out = support::run::hermetic(&mut command)
            .args(&args[1..])
            .current_dir(&cwd)
            // Offline, and with the SDK's dependencies built once for every run of this test.
            .env("CARGO_NET_OFFLINE", "true")
            .env("CARGO_TARGET_DIR", repo.join("target/author-crate"))
            // The crate's unit tests one after the other, so that they report in the guide's order.
            .env("RUST_TEST_THREADS", "1")
            .env("CARGO_TERM_COLOR", "never")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "`{}` failed:\nstdout:\n{}\nstderr:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        assert_guide_output(step, &out);
        if args[..2] == ["velero-wasm", "new"] {
            // Nothing of the crate points into this checkout: the SDK is the binary's copy.
            let cargo_toml =
                std::fs::read_to_string(cwd.join(&args[2]).join("Cargo.toml")).unwrap();
            let checkout = repo.canonicalize().unwrap();
            assert!(
                !cargo_toml.contains(checkout.to_str().unwrap())
                    && cargo_toml.contains("path = \"vendor/velero-wasm-sdk\""),
                "{cargo_toml}"
            );
            // The workspace's lock: the same dependency versions, all in the local cache (no network).
            std::fs::copy(
                repo.join("Cargo.lock"),
                cwd.join(&args[2]).join("Cargo.lock"),
            )
            .unwrap();
        }
    }

    // The crate the guide made, as it describes it.
    let crate_dir = scratch.path().join("count-pvcs");
    let suite = std::fs::read_to_string(crate_dir.join("tests/suite.yaml")).unwrap();
    let shown = doc
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    assert!(
        suite.contains(shown),
        "the guide shows a case the suite does not have:\n{suite}"
    );
    let manifest = std::fs::read_to_string(crate_dir.join("module/count-pvcs.toml")).unwrap();
    let wasm = crate_dir.join("module/count-pvcs.wasm");
    assert!(manifest.starts_with(&format!("sha256 = \"{}\"", sha256_of(&wasm))));
    assert_eq!(
        manifest,
        std::fs::read_to_string(crate_dir.join("count-pvcs.toml")).unwrap()
    );
    let configmap = std::fs::read_to_string(crate_dir.join("count-pvcs-configmap.yaml")).unwrap();
    assert!(
        configmap.contains("velero-wasm.io/module: count-pvcs"),
        "{configmap}"
    );
}

#[test]
fn new_refuses_a_bad_name_and_a_directory_that_is_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let out = velero_wasm(&[
        "new",
        &path("Label_PVCs"),
        "--sdk",
        "https://example.com/v.git",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"Label_PVCs\" cannot name a module's crate"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("Label_PVCs").exists());

    std::fs::create_dir(dir.path().join("taken")).unwrap();
    write(&dir.path().join("taken"), "keep.txt", "mine");
    let out = velero_wasm(&["new", &path("taken"), "--sdk", "https://example.com/v.git"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("exists and is not empty"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("taken")).unwrap().count(),
        1,
        "nothing was added"
    );

    let out = velero_wasm(&[
        "new",
        &path("count-pvcs"),
        "--kind",
        "restore-v2",
        "--sdk",
        "https://example.com/v.git",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cargo = std::fs::read_to_string(dir.path().join("count-pvcs/Cargo.toml")).unwrap();
    assert!(
        cargo.contains("velero-wasm-sdk = { git = \"https://example.com/v.git\" }"),
        "{cargo}"
    );
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let lib = std::fs::read_to_string(dir.path().join("count-pvcs/src/lib.rs")).unwrap();
    assert!(lib.contains("Kind::RestoreV2"));

    // Without --sdk the crate gets the binary's SDK, and `new` says where it put it.
    let out = velero_wasm(&["new", &path("no-sdk")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("the SDK: velero-wasm-sdk")
            && stdout(&out).contains("no-sdk/vendor/velero-wasm-sdk"),
        "{}",
        stdout(&out)
    );
    let vendored = dir.path().join("no-sdk/vendor/velero-wasm-sdk");
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "wit/actions.wit",
        "label-selector/src/lib.rs",
    ] {
        assert!(vendored.join(file).is_file(), "{file} was not written");
    }
    assert_eq!(
        std::fs::read_to_string(vendored.join("wit/actions.wit")).unwrap(),
        std::fs::read_to_string(support::root().join("wit/actions.wit")).unwrap(),
        "the WIT written is the contract's"
    );
    assert!(dir
        .path()
        .join("count-pvcs/tests/fixtures/restore.json")
        .exists());
}

/// `new --lang python` of each kind it writes: the module's own unit tests (the action's and the
/// typed settings reader's) pass natively, as its README says to run them (`make python` builds and
/// runs the component).
#[test]
fn each_python_kind_is_scaffolded_with_unit_tests_that_pass() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["backup", "restore", "delete"] {
        let module = dir.path().join(format!("py-{kind}"));
        let out = velero_wasm(&[
            "new",
            "--lang",
            "python",
            "--kind",
            kind,
            module.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out).contains(&format!("the {kind} action example.io/py-{kind} in Python")),
            "{}",
            stdout(&out)
        );
        let tests = std::process::Command::new("python3")
            .args(["-m", "unittest", "-v"])
            .current_dir(&module)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("python3 runs");
        let report = String::from_utf8_lossy(&tests.stderr);
        assert!(tests.status.success(), "{kind}: {report}");
        assert!(
            report.contains("test_a_value_of_the_wrong_type_names_its_key")
                && report
                    .contains("test_the_hosts_settings_are_read_without_importing_during_the_call")
                && report.contains("OK"),
            "{kind}: the settings reader's tests ran: {report}"
        );
    }
    let out = velero_wasm(&[
        "new",
        "--lang",
        "python",
        "--kind",
        "item-block",
        dir.path().join("py-block").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("backup, restore or delete"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("py-block").exists());
}

/// `new --lang javascript` of each kind it writes: the files, the suite byte for byte its Rust twin's,
/// and the module's own unit tests (the action's on fakes of the WIT's imports, and the typed settings
/// reader's) pass natively with `node --test`, as its README says to run them (`make javascript`
/// builds and runs the component).
#[test]
fn each_javascript_kind_is_scaffolded_with_its_rust_twins_suite_and_unit_tests_that_pass() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["backup", "restore", "delete"] {
        let module = dir.path().join("js").join(format!("{kind}-pvcs"));
        let rust = dir.path().join("rust").join(format!("{kind}-pvcs"));
        let lang = ["--lang", "javascript"];
        let out = velero_wasm(
            &[
                &["new"][..],
                &lang,
                &["--kind", kind, module.to_str().unwrap()],
            ]
            .concat(),
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out).contains(&format!(
                "the {kind} action example.io/{kind}-pvcs in JavaScript"
            )),
            "{}",
            stdout(&out)
        );
        let out = velero_wasm(&["new", "--kind", kind, rust.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        for file in [
            "app.js",
            "app.test.js",
            "settings.js",
            "settings.test.js",
            "unimplemented.js",
            "fakes/hooks.js",
            "package.json",
            ".gitignore",
            "wit/world.wit",
        ] {
            assert!(module.join(file).is_file(), "{kind}: {file} is not written");
        }
        for same in ["tests/suite.yaml", &format!("{kind}-pvcs.toml")] {
            assert_eq!(
                std::fs::read(module.join(same)).unwrap(),
                std::fs::read(rust.join(same)).unwrap(),
                "{kind}: {same} differs from the Rust twin's"
            );
        }
        let tests = std::process::Command::new("node")
            .arg("--test")
            .current_dir(&module)
            .output()
            .expect("node runs");
        let report = String::from_utf8_lossy(&tests.stdout);
        assert!(tests.status.success(), "{kind}: {report}{}", stderr(&tests));
        assert!(
            report.contains("a value of the wrong type names its key")
                && report.contains("suspended")
                && report.contains("# fail 0"),
            "{kind}: the action's and the settings reader's tests ran: {report}"
        );
    }
    let out = velero_wasm(&[
        "new",
        "--lang",
        "javascript",
        "--kind",
        "item-block",
        dir.path().join("js-block").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--lang javascript writes a backup, restore or delete"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("js-block").exists());
}

// `velero-wasm test`: suites of cases written as data (docs/suites.md).

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_kubevirt_fixture_readme_passes_as_a_suite() {
    let suite = support::root().join("tests/fixtures/kubevirt/suite.yaml");
    let cases = std::fs::read_to_string(&suite)
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("- name:"))
        .count();
    assert!(cases >= 25, "the suite holds the README's results");
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.lines()
            .any(|l| l == format!("{cases} passed, 0 failed")),
        "{text}"
    );
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line}"
        );
    }
}

/// A suite of two cases on the KubeVirt fixtures: the standalone VMI's backup, expected right, and
/// the same backup with its second additional item named wrongly. Returns the suite file.
fn two_case_suite(dir: &Path) -> std::path::PathBuf {
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let f = |p: &str| fixtures.join(p).display().to_string();
    let case = |name: &str, scratch: &str| {
        format!(
            "  - name: {name}
    action: kubevirt-velero-plugin/backup-virtualmachineinstance-action
    item: {item}
    backup: {backup}
    cluster: [{cluster}]
    expect:
      # the launcher pod, the scratch PVC, the ConfigDrive Secret
      additionalItems:
        - {{group: \"\", resource: pods, namespace: vm-workloads, name: virt-launcher-batch-worker-7-p2w8k}}
        - {{group: \"\", resource: persistentvolumeclaims, namespace: vm-workloads, name: {scratch}}}
        - {{group: \"\", resource: secrets, namespace: vm-workloads, name: batch-worker-7-userdata}}
",
            item = f("cluster/vmi-batch-worker-7.json"),
            backup = f("velero/backup-nightly.json"),
            cluster = f("cluster"),
        )
    };
    let text = format!(
        "# two cases\nstock: kubevirt\ncases:\n{}\n{}",
        case("names its pod PVC and Secret", "batch-scratch-7"),
        case("names a PVC it does not have", "wrong-name")
    );
    write(dir, "suite.yaml", &text)
}

#[test]
fn a_wrong_expectation_fails_with_exit_1_and_shows_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        row(&text, "names its pod PVC and Secret").contains(" ok "),
        "{text}"
    );
    assert!(
        row(&text, "names a PVC it does not have").contains(" FAIL "),
        "{text}"
    );
    assert!(text.contains("additionalItems differ:"), "{text}");
    assert!(
        text.contains("- #2 persistentvolumeclaims vm-workloads/wrong-name"),
        "{text}"
    );
    assert!(
        text.contains("+ #2 persistentvolumeclaims vm-workloads/batch-scratch-7"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "1 passed, 1 failed"), "{text}");
}

#[test]
fn a_long_reason_is_wrapped_to_the_terminal_not_cut_and_junit_says_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    let long = "the rule to add is at the very end of this reason, which is longer than a terminal is wide: grant.kube get secrets";
    let text = std::fs::read_to_string(&suite).unwrap().replacen(
        "      # the launcher pod",
        &format!("      error: \"{long}\"\n      # the launcher pod"),
        1,
    );
    std::fs::write(&suite, text).unwrap();
    let junit = dir.path().join("junit.xml");
    let out = velero_wasm(&[
        "test",
        suite.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(!text.contains('…'), "a reason was cut: {text}");
    let joined: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(joined.contains(long), "{text}");

    // The second case's diff: JUnit's one-line message names the item, not just the heading.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("additionalItems differ: - #2 persistentvolumeclaims vm-workloads/wrong-name"),
        "{xml}"
    );
}

#[test]
fn an_error_expected_of_a_run_that_succeeds_fails_the_case() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    let text = std::fs::read_to_string(&suite).unwrap().replacen(
        "      # the launcher pod",
        "      error: not found\n      # the launcher pod",
        1,
    );
    std::fs::write(&suite, text).unwrap();
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("expected a failure containing \"not found\", the run succeeded"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_malformed_suite_exits_2_naming_the_file_and_the_line_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    let text = std::fs::read_to_string(&suite).unwrap();
    let typo = write(
        dir.path(),
        "typo.yaml",
        &text.replacen("    expect:", "    expcet:", 1),
    );
    let out = velero_wasm(&["test", suite.to_str().unwrap(), typo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let line = one_line(&out);
    assert!(
        line.contains(&typo.display().to_string()) && line.contains("expcet"),
        "{line}"
    );
    assert!(line.contains("line 9"), "{line}");
    assert!(out.stdout.is_empty(), "no case runs: {}", stdout(&out));

    let missing = dir.path().join("missing.yaml");
    let out = velero_wasm(&["test", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("missing.yaml"));
}

#[test]
fn junit_xml_counts_the_cases_and_the_failures() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    let xml = dir.path().join("report.xml");
    let out = velero_wasm(&[
        "test",
        suite.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = std::fs::read_to_string(&xml).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&text)
        .unwrap_or_else(|e| panic!("not JUnit XML ({e}): {text}"));
    assert_eq!((report.tests, report.failures, report.errors), (2, 1, 0));
    assert_eq!(report.test_suites.len(), 1);
    let cases = &report.test_suites[0].test_cases;
    let failed: Vec<&str> = cases
        .iter()
        .filter(|c| !matches!(c.status, quick_junit::TestCaseStatus::Success { .. }))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failed, ["names a PVC it does not have"]);
    assert!(text.contains("wrong-name"), "the failure says why: {text}");
}

#[test]
fn update_rewrites_only_the_failing_expectation_and_the_suite_then_passes() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    let before = std::fs::read_to_string(&suite).unwrap();
    let out = velero_wasm(&["test", "--update", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("UPDATED"), "{}", stdout(&out));
    let after = std::fs::read_to_string(&suite).unwrap();
    let (first_before, _) = before.split_once("\n\n").unwrap();
    let (first_after, second_after) = after.split_once("\n\n").unwrap();
    assert_eq!(
        first_after, first_before,
        "the passing case is left as written"
    );
    assert!(!second_after.contains("wrong-name"), "{after}");
    assert!(second_after.contains("name: batch-scratch-7}"), "{after}");
    assert!(after.starts_with("# two cases\n"), "comments stay: {after}");

    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).lines().any(|l| l == "2 passed, 0 failed"));
}

/// `--update` finds the case to rewrite by parsing the suite: a block scalar of the passing case that
/// holds the text of the failing case's `- name:` and `expect:` stays byte for byte, and the failing
/// case itself is the one rewritten.
#[test]
fn update_rewrites_the_case_not_a_block_scalar_that_looks_like_it() {
    let dir = tempfile::tempdir().unwrap();
    let suite = two_case_suite(dir.path());
    // A free-text field the action does not read (the VMI action never asks for Velero's namespace).
    let decoy = "    veleroNamespace: |
      - name: names a PVC it does not have
        expect:
          additionalItems: []
";
    let text = std::fs::read_to_string(&suite).unwrap().replacen(
        "    expect:\n",
        &format!("{decoy}    expect:\n"),
        1,
    );
    std::fs::write(&suite, &text).unwrap();
    let (first_before, _) = text.split_once("\n\n").unwrap();
    assert!(first_before.contains(decoy));

    let out = velero_wasm(&["test", "--update", suite.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let after = std::fs::read_to_string(&suite).unwrap();
    let (first_after, second_after) = after.split_once("\n\n").unwrap();
    assert_eq!(first_after, first_before, "the passing case is as written");
    assert!(
        !second_after.contains("wrong-name") && second_after.contains("name: batch-scratch-7}"),
        "{after}"
    );
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    assert!(
        stdout(&out).lines().any(|l| l == "2 passed, 0 failed"),
        "{}",
        stdout(&out)
    );
}

/// A file a case names may be any readable file (a file of secrets named by mistake or by a hostile
/// suite): a YAML error in it gives its path and the place, never its text.
#[test]
fn a_yaml_error_in_a_file_a_case_names_never_quotes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let f = |p: &str| fixtures.join(p).display().to_string();
    for (name, content) in [
        ("tagged.yaml", "password: !!int hunter2-secret\n"),
        ("syntax.yaml", "password: hunter2-secret\n  bad: [\n"),
        ("key.yaml", "? [hunter2-secret]\n: 1\n"),
    ] {
        let secret = write(dir.path(), name, content);
        let text = format!(
            "stock: kubevirt\ncases:\n  - name: reads a file of secrets\n    action: kubevirt-velero-plugin/backup-virtualmachineinstance-action\n    item: {item}\n    backup: {backup}\n",
            item = secret.display(),
            backup = f("velero/backup-nightly.json"),
        );
        let suite = write(dir.path(), "suite.yaml", &text);
        let out = velero_wasm(&["test", suite.to_str().unwrap()]);
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(all.contains(name) && all.contains("line "), "{all}");
        assert!(!all.contains("hunter2"), "the file's text is shown: {all}");
    }
}

/// `--update` rewrites an `expect.item` file only inside the suite's directory and never through a
/// symbolic link: a case that names `../outside.json`, an absolute path or a link leaves every file
/// as it was (the suite included) and says why.
#[test]
fn update_never_writes_an_item_file_outside_the_suite_directory_or_through_a_link() {
    let root = tempfile::tempdir().unwrap();
    let suite_dir = root.path().join("suite");
    std::fs::create_dir(&suite_dir).unwrap();
    let outside = write(root.path(), "outside.json", "{\"keep\": \"me\"}\n");
    std::os::unix::fs::symlink(&outside, suite_dir.join("link.json")).unwrap();
    std::os::unix::fs::symlink(root.path(), suite_dir.join("up")).unwrap();
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let f = |p: &str| fixtures.join(p).display().to_string();
    for (named, why) in [
        (
            "../outside.json".to_string(),
            "outside the suite's directory",
        ),
        (
            outside.display().to_string(),
            "outside the suite's directory",
        ),
        ("link.json".to_string(), "is a symbolic link"),
        ("up/outside.json".to_string(), "is a symbolic link"),
    ] {
        let text = format!(
            "stock: kubevirt\ncases:\n  - name: the VMI as stored\n    action: kubevirt-velero-plugin/backup-virtualmachineinstance-action\n    item: {item}\n    backup: {backup}\n    cluster: [{cluster}]\n    expect:\n      item: {named}\n",
            item = f("cluster/vmi-batch-worker-7.json"),
            backup = f("velero/backup-nightly.json"),
            cluster = f("cluster"),
        );
        let suite = write(&suite_dir, "suite.yaml", &text);
        let out = velero_wasm(&["test", "--update", suite.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{named}: {}", stdout(&out));
        assert!(
            stderr(&out).contains(why) && stderr(&out).contains("nothing written"),
            "{named}: {}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "{\"keep\": \"me\"}\n",
            "{named}"
        );
        assert_eq!(std::fs::read_to_string(&suite).unwrap(), text, "{named}");
    }
}

#[test]
fn a_case_without_a_cluster_never_reaches_a_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let text = format!(
        "stock: kubevirt
cases:
  - name: the VM's lookups find no cluster
    action: kubevirt-velero-plugin/backup-virtualmachine-action
    item: {}
    backup: {}
    expect:
      error: 'no cluster is given: add cluster: PATH'
",
        fixtures.join("cluster/vm-fedora-web-01.json").display(),
        fixtures.join("velero/backup-nightly.json").display()
    );
    let suite = write(dir.path(), "suite.yaml", &text);
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// A directory with the `kinds` test component as module `kinds` (`modules/`), a ConfigMap item, a
/// Backup and a Restore, for suites of v2 actions. Returns the suite file's path, to be written.
fn kinds_scene(dir: &Path) -> std::path::PathBuf {
    let modules = dir.join("modules");
    std::fs::create_dir(&modules).unwrap();
    support::add_module(&modules, "kinds", "kinds", "");
    write(
        dir,
        "configmap.json",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}}"#,
    );
    write(
        dir,
        "backup.json",
        r#"{"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "nightly", "namespace": "velero"}}"#,
    );
    write(
        dir,
        "restore.json",
        r#"{"apiVersion": "velero.io/v1", "kind": "Restore", "metadata": {"name": "back", "namespace": "velero"}}"#,
    );
    dir.join("suite.yaml")
}

/// The two v2 cases of the `kinds` module at 2026-05-02T10:00:00Z, with `expect` blocks given.
fn operation_cases(backup_expect: &str, restore_expect: &str) -> String {
    format!(
        "modules: modules
stock: none
cases:
  - name: the backup starts an operation
    action: test.velero-wasm.io/backup-v2
    item: configmap.json
    backup: backup.json
    now: 2026-05-02T10:00:00Z
    expect:
{backup_expect}
  - name: the restore waits for its pending item
    action: test.velero-wasm.io/restore-v2
    item: configmap.json
    restore: restore.json
    now: 2026-05-02T10:00:00Z
    expect:
{restore_expect}"
    )
}

#[test]
fn every_field_of_an_operation_is_checked_and_update_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let suite = kinds_scene(dir.path());
    // The operation's id encodes its start (seconds, nanoseconds) and its duration (1000 ms).
    let right_backup = "      operationId: op-1777716000-0-1000
      postOperationItems:
        - {group: \"\", resource: configmaps, namespace: shop, name: web}
";
    let right_restore = "      operationId: op-1777716000-0-1000
      waitForAdditionalItems: true
      additionalItemsTimeout: 1m30s
";
    std::fs::write(&suite, operation_cases(right_backup, right_restore)).unwrap();
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let wrong_backup = "      operationId: op-1777716000-0-1000
      postOperationItems:
        - {group: \"\", resource: configmaps, namespace: shop, name: db}
";
    let wrong_restore = "      operationId: op-1777716000-0-1000
      waitForAdditionalItems: false
      additionalItemsTimeout: 10m0s
";
    std::fs::write(&suite, operation_cases(wrong_backup, wrong_restore)).unwrap();
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for reason in [
        "postOperationItems differ:",
        "- #1 configmaps shop/db",
        "+ #1 configmaps shop/web",
        "waitForAdditionalItems: expected false, got true",
        "additionalItemsTimeout: expected \"10m0s\", got \"1m30s\"",
    ] {
        assert!(text.contains(reason), "no {reason:?} in:\n{text}");
    }
    assert!(!text.contains("operationId:"), "{text}");

    let out = velero_wasm(&["test", "--update", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        std::fs::read_to_string(&suite).unwrap(),
        operation_cases(right_backup, right_restore)
    );
}

#[test]
fn a_case_s_settings_apply_to_that_case_only() {
    // With `swap-backup-versions`, kinds describes backup-v1 as a v2 action: its output then carries
    // an operation id (none started: ""), which a v1 action's has not.
    let dir = tempfile::tempdir().unwrap();
    let suite = kinds_scene(dir.path());
    let case = |name: &str, settings: &str| {
        format!(
            "  - name: {name}
    action: test.velero-wasm.io/backup-v1
    item: configmap.json
    backup: backup.json{settings}
    expect:
      operationId: \"\"
"
        )
    };
    let text = format!(
        "modules: modules\nstock: none\ncases:\n{}{}",
        case(
            "swapped by the case's setting",
            "\n    settings:\n      swap-backup-versions: true"
        ),
        case("as the manifest describes it", "")
    );
    std::fs::write(&suite, text).unwrap();
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        row(&text, "swapped by the case's setting").contains(" ok "),
        "{text}"
    );
    assert!(
        row(&text, "as the manifest describes it").contains("FAIL"),
        "{text}"
    );
    assert!(
        text.contains("operationId: expected \"\", got nothing"),
        "{text}"
    );
}

/// The rows of a suite's table by case name, for asserting `ok` and `FAIL`.
fn row<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no row for {name}: {text}"))
}

/// The three items of the standalone VMI's backup as a suite writes them, by their short names.
fn vmi_item(short: &str) -> String {
    let (resource, name) = match short {
        "pod" => ("pods", "virt-launcher-batch-worker-7-p2w8k"),
        "pvc" => ("persistentvolumeclaims", "batch-scratch-7"),
        "secret" => ("secrets", "batch-worker-7-userdata"),
        _ => ("persistentvolumeclaims", short),
    };
    format!(
        "        - {{group: \"\", resource: {resource}, namespace: vm-workloads, name: {name}}}\n"
    )
}

#[test]
fn a_case_answers_from_its_recording_without_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let f = |p: &str| fixtures.join(p).display().to_string();
    let recording = dir.path().join("recording.jsonl");
    let out = velero_wasm(&[
        "run",
        "--stock",
        "kubevirt",
        "--action",
        "kubevirt-velero-plugin/backup-virtualmachineinstance-action",
        "--item",
        &f("cluster/vmi-batch-worker-7.json"),
        "--backup",
        &f("velero/backup-nightly.json"),
        "--cluster",
        &f("cluster"),
        "--record",
        recording.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The launcher pod and the Secret are found by lookups the recording answers.
    let case = |name: &str, items: &[&str]| {
        format!(
            "  - name: {name}
    action: kubevirt-velero-plugin/backup-virtualmachineinstance-action
    item: {item}
    backup: {backup}
    replay: recording.jsonl
    expect:
      additionalItems:
{list}",
            item = f("cluster/vmi-batch-worker-7.json"),
            backup = f("velero/backup-nightly.json"),
            list = items.iter().map(|s| vmi_item(s)).collect::<String>(),
        )
    };
    let text = format!(
        "stock: kubevirt\ncases:\n{}{}",
        case(
            "the recording names the pod PVC and Secret",
            &["pod", "pvc", "secret"]
        ),
        case(
            "the recording has no such PVC",
            &["pod", "wrong-name", "secret"]
        )
    );
    let suite = write(dir.path(), "suite.yaml", &text);
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        row(&text, "the recording names the pod PVC and Secret").contains(" ok "),
        "{text}"
    );
    assert!(
        row(&text, "the recording has no such PVC").contains(" FAIL "),
        "{text}"
    );
    assert!(
        text.contains("- #2 persistentvolumeclaims vm-workloads/wrong-name"),
        "{text}"
    );

    // A recording of another run does not answer this one: the case fails saying so.
    let other = text_replacing(&suite, "vmi-batch-worker-7.json", "vm-fedora-web-01.json");
    let out = velero_wasm(&["test", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(!stdout(&out).contains(" ok "), "{}", stdout(&out));
}

/// A copy of a suite with `from` replaced by `to` everywhere, beside it.
fn text_replacing(suite: &Path, from: &str, to: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(suite).unwrap().replace(from, to);
    write(suite.parent().unwrap(), "replaced.yaml", &text)
}

#[test]
fn additional_items_include_holds_for_an_ordered_subset_and_names_only_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let f = |p: &str| fixtures.join(p).display().to_string();
    let case = |name: &str, items: &[&str]| {
        format!(
            "  - name: {name}
    action: kubevirt-velero-plugin/backup-virtualmachineinstance-action
    item: {item}
    backup: {backup}
    cluster: {cluster}
    expect:
      additionalItemsInclude:
{list}",
            item = f("cluster/vmi-batch-worker-7.json"),
            backup = f("velero/backup-nightly.json"),
            cluster = f("cluster"),
            list = items.iter().map(|s| vmi_item(s)).collect::<String>(),
        )
    };
    let text = format!(
        "stock: kubevirt\ncases:\n{}{}{}",
        case(
            "the pod then the Secret, the PVC between",
            &["pod", "secret"]
        ),
        case("the Secret before the pod", &["secret", "pod"]),
        case(
            "a PVC it does not name, then its Secret",
            &["elsewhere", "secret"]
        ),
    );
    let suite = write(dir.path(), "suite.yaml", &text);
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        row(&text, "the pod then the Secret, the PVC between").contains(" ok "),
        "{text}"
    );
    assert!(
        row(&text, "the Secret before the pod").contains(" FAIL "),
        "{text}"
    );
    assert!(
        row(&text, "a PVC it does not name, then its Secret").contains(" FAIL "),
        "{text}"
    );
    let reasons: Vec<&str> = text
        .split("additionalItemsInclude: not among the 3 additional items, in this order:\n")
        .skip(1)
        .map(|r| r.split("\n  ").next().unwrap_or(r))
        .collect();
    assert_eq!(reasons.len(), 2, "{text}");
    // Out of order: the pod is not after the Secret.
    assert!(
        reasons[0].contains("pods vm-workloads/virt-launcher-batch-worker-7-p2w8k"),
        "{text}"
    );
    // Missing: the PVC alone; the Secret after it is still found.
    assert!(
        reasons[1].contains("persistentvolumeclaims vm-workloads/elsewhere"),
        "{text}"
    );
    assert!(!reasons[1].contains("secrets"), "{text}");
    assert!(text.lines().any(|l| l == "1 passed, 2 failed"), "{text}");
}

#[test]
fn cluster_writes_are_checked_field_by_field_in_order() {
    let scene = Scene::new();
    // The object `run` reports for the create, as the expectation of the right case.
    let out = scene.run("write", &["--now", "2026-05-02T10:00:00Z"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let object = stdout_json(&out)["clusterWrites"][0]["object"].clone();
    let mut changed = object.clone();
    changed["data"]["k"] = json!("w");
    let case = |name: &str, writes: &str| {
        format!(
            "  - name: {name}
    action: test.velero-wasm.io/write
    item: {item}
    backup: {backup}
    cluster: {cluster}
    now: 2026-05-02T10:00:00Z
    expect:
      clusterWrites:
{writes}",
            item = scene.path("item.json"),
            backup = scene.path("backup.json"),
            cluster = scene.path("cluster"),
        )
    };
    let patch = "        - {verb: patch, patchType: merge, patch: {metadata: {labels: {copied: \"true\"}}}}\n";
    let right = format!(
        "        - {{verb: create, kind: ConfigMap, namespace: shop, name: app-copy, object: {object}}}\n{patch}"
    );
    let wrong_object =
        format!("        - {{verb: create, name: app-copy, object: {changed}}}\n{patch}");
    let wrong_name = "        - {verb: create, name: app-clone}
        - {verb: patch, patchType: merge}
";
    let one_only = "        - {verb: create, name: app-copy}
";
    let text = format!(
        "modules: {}\nstock: none\ncases:\n{}{}{}{}",
        scene.modules.path().display(),
        case("creates the copy then labels it", &right),
        case("writes other data", &wrong_object),
        case("names the copy wrongly", wrong_name),
        case("expects one write of two", one_only),
    );
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "suite.yaml", &text);
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        row(&text, "creates the copy then labels it").contains(" ok "),
        "{text}"
    );
    for name in [
        "writes other data",
        "names the copy wrongly",
        "expects one write of two",
    ] {
        assert!(row(&text, name).contains(" FAIL "), "{text}");
    }
    assert_eq!(text.matches("clusterWrites differ:").count(), 3, "{text}");
    // A difference deep in the object is named by its pointer, though the lines are cut alike.
    assert!(text.contains("#1 differs at:"), "{text}");
    assert!(text.contains("- /object/data/k: \"w\""), "{text}");
    assert!(text.contains("+ /object/data/k: \"v\""), "{text}");
    // The wrong write is shown against what was written; the write that matches is not.
    assert!(
        text.contains(r#"- #1 {"verb":"create","name":"app-clone"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"+ #1 {"verb":"create","name":"app-copy"}"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"#2 {"verb":"patch","patchType":"merge"}"#),
        "{text}"
    );
    // The write no case expected is listed.
    assert!(
        text.contains(
            r#"+ #2 {"verb":"patch","kind":"ConfigMap","namespace":"shop","name":"app-copy"}"#
        ),
        "{text}"
    );
    assert!(text.contains("(1 expected, 2 observed)"), "{text}");
}

// `velero-wasm bench`: figures are printed, never asserted; the shape and the count of calls are.

fn bench_args(extra: &[&str]) -> Vec<String> {
    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let f = |p: &str| fixtures.join(p).display().to_string();
    let mut args: Vec<String> = [
        "bench",
        "--stock",
        "kubevirt",
        "--action",
        "kubevirt-velero-plugin/backup-virtualmachine-action",
        "--item",
        &f("cluster/vm-fedora-web-01.json"),
        "--backup",
        &f("velero/backup-nightly.json"),
        "--cluster",
        &f("cluster"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn bench_makes_n_calls_and_reports_their_spread_and_capability_calls_as_json() {
    let args = bench_args(&["-n", "7", "--warmup", "2", "--json"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = velero_wasm(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let figures = stdout_json(&out);
    assert_eq!(figures["calls"], 7);
    assert_eq!(figures["warmup"], 2);
    for part in ["perCall", "instantiate"] {
        for key in ["medianUs", "p90Us", "p99Us"] {
            assert!(
                figures[part][key].as_f64().is_some_and(|v| v > 0.0),
                "{part}.{key}: {figures}"
            );
        }
        assert!(figures[part]["medianUs"].as_f64() <= figures[part]["p99Us"].as_f64());
    }
    assert!(figures["callMedianUs"].is_number(), "{figures}");
    assert!(figures["machine"]["cores"].as_u64().is_some_and(|n| n >= 1));
    assert!(figures["machine"]["cpu"].is_string());
    // The running VM's backup reads its VMI, two PVCs, the launcher pods and the backend PVCs and
    // more: the same calls each time, so the total is 7 times one call's.
    let calls = &figures["capabilityCalls"];
    let each = calls["perCallMin"].as_u64().unwrap();
    assert!(each >= 5, "{calls}");
    assert_eq!(calls["perCallMax"].as_u64(), Some(each));
    assert_eq!(calls["total"].as_u64(), Some(7 * each));
}

#[test]
fn bench_prints_a_table_with_the_machine() {
    let args = bench_args(&["-n", "3", "--warmup", "0"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = velero_wasm(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("on vm-fedora-web-01.json: 3 calls after 0 warm-up calls"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("machine: ") && l.ends_with(" cores")),
        "{text}"
    );
    let header = text.lines().find(|l| l.contains("median")).unwrap();
    assert!(header.contains("p90") && header.contains("p99"), "{text}");
    assert!(
        text.contains("per call (instantiate + call, as served)"),
        "{text}"
    );
    assert!(
        text.contains("instantiate (fresh store and instance)"),
        "{text}"
    );
    assert!(text.contains("capability calls per call: "), "{text}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line}"
        );
    }
}

#[test]
fn a_reader_that_goes_away_stops_the_command_quietly_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    // As `velero-wasm run … | head -0`: the reading end is closed before anything is printed.
    let mut child = readme_demo(Path::new(support::run::binary()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("panicked"), "{text}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {text}",
        out.status
    );
}

/// The README's demo: `binary run` of the KubeVirt fixture VM's backup, on the fixture cluster.
fn readme_demo(binary: &Path) -> std::process::Command {
    Run::new("kubevirt-velero-plugin/backup-virtualmachine-action")
        .program(binary)
        .fixtures(support::root().join("tests/fixtures/kubevirt"))
        .item("cluster/vm-fedora-web-01.json")
        .path("--backup", "velero/backup-nightly.json")
        .cluster(&["cluster"])
        .command()
}

/// A `--modules` module that cannot be loaded stops `run` (exit 2, naming the problem) rather than
/// leave the stock module it replaces to answer: an author would test the stock one unknowingly.
#[test]
fn run_stops_when_a_module_of_modules_cannot_be_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("modules");
    std::fs::create_dir(&modules).unwrap();
    write(
        &modules,
        "kubevirt.toml",
        "[settings]\nmdoe = \"upstream\"\n",
    );
    let run = || {
        Run::new("kubevirt-velero-plugin/backup-virtualmachine-action")
            .fixtures(support::root().join("tests/fixtures/kubevirt"))
            .item("cluster/vm-fedora-web-01.json")
            .path("--backup", "velero/backup-nightly.json")
            .cluster(&["cluster"])
            .arg("--stock")
            .arg("kubevirt")
            .modules(&modules)
            .output()
    };
    let out = run();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(out.stdout.is_empty(), "no result is printed");
    assert!(
        text.contains("settings.mdoe") && text.contains("did you mean \"mode\"?"),
        "{text}"
    );
    assert!(
        text.contains("`run` stops rather than serve another module in its place"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");

    // Without the broken override the same run serves the stock module.
    std::fs::remove_file(modules.join("kubevirt.toml")).unwrap();
    let out = run();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A misspelt setting is reported, with the key it probably meant, wherever it is written: a stock
/// override (`actions` exits 1 and the stock settings serve) and a suite case (`test` fails the case).
#[test]
fn a_misspelt_setting_is_named_with_the_nearest_declared_key() {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("modules");
    std::fs::create_dir(&modules).unwrap();
    write(
        &modules,
        "kubevirt.toml",
        "[settings]\nmdoe = \"upstream\"\n",
    );
    let out = velero_wasm(&[
        "actions",
        "--wide",
        "--stock",
        "kubevirt",
        "--modules",
        modules.to_str().unwrap(),
    ]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("settings.mdoe: this module has no setting \"mdoe\"; did you mean \"mode\"?"),
        "{text}"
    );
    // The stock module serves with its declared default, shown by --wide.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("mode=extended"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let fixtures = support::root().join("tests/fixtures/kubevirt");
    let suite = write(
        dir.path(),
        "suite.yaml",
        &format!(
            "stock: kubevirt
cases:
  - name: a typo in the case's settings
    action: kubevirt-velero-plugin/backup-virtualmachine-action
    item: {}
    backup: {}
    settings:
      mode: upstrem
    expect:
      additionalItems: []
",
            fixtures.join("cluster/vm-fedora-web-01.json").display(),
            fixtures.join("velero/backup-nightly.json").display()
        ),
    );
    let out = velero_wasm(&["test", suite.to_str().unwrap()]);
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{all}");
    // (The reason is wrapped to the terminal: each part on a line of its own.)
    assert!(
        all.contains("settings.mode: \"upstrem\" is not one of extended, upstream;")
            && all.contains("did you mean \"upstream\"?"),
        "{all}"
    );
}

/// `module pack DIR --out FILE ARGS…`.
fn pack_to(dir: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "module",
        "pack",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    velero_wasm(&all)
}

#[test]
fn pack_never_turns_a_signed_shadow_into_an_unsigned_serving_module_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("candidate");
    std::fs::create_dir(&modules).unwrap();
    write(
        &modules,
        "kubevirt.toml",
        "version = \"1.1.0\"\n[settings]\nmode = \"upstream\"\n",
    );
    let key = dir.path().join("ops");
    let out = velero_wasm(&["module", "keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let key = format!("{}.key", key.display());
    let file = dir.path().join("candidate.yaml");
    let out = pack_to(&modules, &file, &["--shadow", "--sign", &key]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let signed_shadow = std::fs::read_to_string(&file).unwrap();
    assert!(signed_shadow.contains("kubevirt.sig"), "{signed_shadow}");

    // The same again is fine: nothing changes role.
    let out = pack_to(&modules, &file, &["--shadow", "--sign", &key]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let signed_shadow = std::fs::read_to_string(&file).unwrap();

    // One forgotten flag: refused, the file as it was.
    let refused = |args: &[&str], why: &str| {
        let out = pack_to(&modules, &file, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let message = one_line(&out);
        assert!(
            message.contains("exists: not overwriting it") && message.contains(why),
            "{args:?}: {message}"
        );
        assert!(message.contains("--force"), "{message}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), signed_shadow);
    };
    refused(
        &["--sign", &key],
        "module kubevirt is a shadow there and would become a serving one",
    );
    refused(
        &["--shadow"],
        "module kubevirt is signed there and would lose its signature",
    );
    refused(&[], "would become a serving one");

    // Said with --force, it is done.
    let out = pack_to(&modules, &file, &["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let serving = std::fs::read_to_string(&file).unwrap();
    assert!(
        !serving.contains("kubevirt.sig") && !serving.contains("velero-wasm.io/shadow"),
        "{serving}"
    );

    // A file that is not module ConfigMaps is not replaced silently either.
    let notes = write(
        dir.path(),
        "notes.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
    );
    let out = pack_to(&modules, &notes, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(one_line(&out).contains("document 1 (Secret s) is not a module ConfigMap"));
}

#[test]
fn pack_never_writes_through_a_symbolic_link() {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("candidate");
    std::fs::create_dir(&modules).unwrap();
    write(
        &modules,
        "kubevirt.toml",
        "[settings]\nmode = \"upstream\"\n",
    );
    let target = write(dir.path(), "target.txt", "someone else's file\n");
    let link = dir.path().join("out.yaml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for force in [&[][..], &["--force"][..]] {
        let out = pack_to(&modules, &link, force);
        assert_eq!(out.status.code(), Some(2), "{force:?}: {}", stderr(&out));
        assert!(
            one_line(&out).contains(&format!("{}: is a symbolic link", link.display())),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "someone else's file\n"
        );
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }
    // The file itself, given, is written.
    let out = pack_to(&modules, &dir.path().join("real.yaml"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The source `actions --json` names for module `kubevirt`, run with `env` and `args` against
/// `server` with module ConfigMaps on, `home` as HOME and state directory (its compile cache shared).
fn kubevirt_source(
    server: &support::apiserver::ApiServer,
    home: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> String {
    let scratch = home.join("state");
    let kubeconfig = home.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let mut all = vec!["actions", "--json", "--stock", "kubevirt"];
    all.extend_from_slice(args);
    let out = Run::cli(all)
        .envs(&[
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_STATE_DIR", scratch.to_str().unwrap()),
            ("VELERO_WASM_CONFIGMAPS", "on"),
            ("HOME", home.to_str().unwrap()),
        ])
        .envs(env)
        .output();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?} {env:?}: {}",
        stderr(&out)
    );
    let json = stdout_json(&out);
    let module = json["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "kubevirt")
        .cloned()
        .unwrap();
    module["source"].as_str().unwrap().to_string()
}

#[test]
fn actions_finds_velero_s_namespace_as_velero_s_cli_does() {
    let server = support::apiserver::ApiServer::start(&[]);
    server.apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "velero-wasm-module-kubevirt", "namespace": "velero",
                     "labels": {"velero-wasm.io/module": "kubevirt"}},
        "data": {"kubevirt.toml": "[settings]\nmode = \"upstream\"\n"},
    }));
    let home = tempfile::tempdir().unwrap();
    let from_velero = |source: &str| source.contains("ConfigMap velero-wasm-module-kubevirt@");
    // Nothing set: `velero`, Velero's default, not the kubeconfig's `default`.
    let source = kubevirt_source(&server, home.path(), &[], &[]);
    assert!(from_velero(&source), "{source}");
    // VELERO_NAMESPACE.
    let source = kubevirt_source(&server, home.path(), &[("VELERO_NAMESPACE", "other")], &[]);
    assert_eq!(source, "stock");
    // The client config file comes before the variable, as in Velero's CLI.
    let config = home.path().join(".config/velero");
    std::fs::create_dir_all(&config).unwrap();
    write(&config, "config.json", r#"{"namespace":"velero"}"#);
    let source = kubevirt_source(&server, home.path(), &[("VELERO_NAMESPACE", "other")], &[]);
    assert!(from_velero(&source), "{source}");
    // The flag before everything.
    for flag in ["--namespace", "-n"] {
        let source = kubevirt_source(&server, home.path(), &[], &[flag, "other"]);
        assert_eq!(source, "stock", "{flag}");
    }
}

/// A state directory whose status holds a signed shadow with a long source, counts too wide for a
/// fixed table, and a last difference the shadow made no result for (it has no such action).
fn status_scene() -> tempfile::TempDir {
    use std::collections::BTreeMap;
    use velero_wasm::shadow::status_files::{ModuleStatus, Modules, Process};
    use velero_wasm::shadow::{LastDifference, Tally};
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("status");
    std::fs::create_dir(&dir).unwrap();
    let module = |role: &str, source: &str, signed_by: Option<&str>| ModuleStatus {
        name: "kubevirt".into(),
        role: role.into(),
        version: Some("1.2.0-rc.1+build.20261204".into()),
        source: source.into(),
        sha256: "0".repeat(64),
        signed_by: signed_by.map(str::to_string),
        verified: false,
        signature_expires: None,
        failure_policy: None,
        deprecations: Vec::new(),
    };
    let modules = Modules {
        written: "2026-12-04T16:00:00.000Z".into(),
        pid: 1,
        modules: vec![
            module("serving", "stock", None),
            module(
                "shadow",
                "OCI registry.example.com/velero-wasm/kubevirt-candidate:1.2.0@sha256:0123456789abcdef0123456789abcdef",
                Some("05ca04d5eb9fffea"),
            ),
        ],
        slots: BTreeMap::from([(
            "velero-wasm.io/added-backup-actions".to_string(),
            vec![
                "example.io/pvc-labeller".to_string(),
                "example.io/secret-redactor-with-a-rather-long-name".to_string(),
            ],
        )]),
    };
    write(
        &dir,
        "modules.json",
        &serde_json::to_string(&modules).unwrap(),
    );
    let big = 12_345_678_901u64;
    let tally = Tally {
        compared: big,
        same: big - 7,
        differing: 7,
        differences: BTreeMap::from([
            ("additional-items".to_string(), 4),
            ("missing-action".to_string(), 3),
            ("post-operation-items".to_string(), 2),
        ]),
        faults: BTreeMap::from([("trap".to_string(), 9_876_543_210)]),
        dropped: BTreeMap::from([("busy".to_string(), 5)]),
        last_difference: Some(LastDifference {
            at: "2026-12-04T16:01:00.000Z".into(),
            action: "kubevirt-velero-plugin/block-vmi-action".into(),
            item: "virtualmachineinstances.kubevirt.io vm-workloads/fedora-web-01".into(),
            subject: "backup nightly".into(),
            kinds: vec!["missing-action".into()],
            patch: json!([{"op": "replace", "path": "", "value": null}]),
        }),
        last_fault: Some(format!(
            "wasm trap: {} and the end of the message",
            "x".repeat(150)
        )),
    };
    let process = Process {
        pid: 2,
        updated: "2026-12-04T16:02:00.000Z".into(),
        shadows: BTreeMap::from([("kubevirt".to_string(), tally)]),
    };
    write(
        &dir,
        "shadows-2-1.json",
        &serde_json::to_string(&process).unwrap(),
    );
    state
}

#[test]
fn status_fits_the_terminal_cuts_no_count_or_signature_and_names_the_cause_of_a_difference() {
    let state = status_scene();
    let status = |columns: &str| {
        let out = Run::cli(["status", "--state-dir", state.path().to_str().unwrap()])
            .env("COLUMNS", columns)
            .output();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    for columns in [80, 100, 160] {
        let text = status(&columns.to_string());
        assert!(
            text.lines().all(|l| l.chars().count() <= columns),
            "wider than {columns}:\n{text}"
        );
        assert!(!text.contains('…'), "nothing cut:\n{text}");
        // Every count whole, and the signature state.
        let words: String = text.split_whitespace().collect();
        for whole in [
            "12345678901",
            "12345678894",
            "trap=9876543210",
            "busy=5",
            "missing-action=3",
            "post-operation-items=2",
            "theendofthemessage",
            // The actions added since Velero listed, by slot.
            "velero-wasm.io/added-backup-actionsexample.io/pvc-labeller,example.io/secret-redactor-with-a-rather-long-name",
        ] {
            assert!(words.contains(whole), "{whole} at {columns}:\n{text}");
        }
        // The signature column, read down: each module's signature state whole.
        let header = text.lines().find(|l| l.starts_with("MODULE")).unwrap();
        let at = header.find("SIGNATURE").unwrap();
        let column: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("MODULE"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.get(at..))
            .collect();
        assert_eq!(
            column
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            "unsigned 05ca04d5eb9fffea (not verified)",
            "{text}"
        );
        // The cause, not a patch replacing the whole result with nothing.
        assert!(!text.contains("replace  null"), "{text}");
        assert!(
            words.contains("theshadowhasnoactionkubevirt-velero-plugin/block-vmi-action,soitmadenoresulttocompare"),
            "{text}"
        );
    }
    // A wider terminal gets longer lines: the table follows it rather than 100 columns.
    assert!(status("160").lines().any(|l| l.chars().count() > 100));
}

#[test]
fn module_export_writes_the_stock_version_to_raise() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("kubevirt");
    let out = velero_wasm(&["module", "export", "kubevirt", target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(target.join("kubevirt.toml")).unwrap();
    let version = format!("version = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        manifest.lines().any(|l| l == version),
        "{version} in:\n{manifest}"
    );
    // As exported, it loads and packs: the manifest is valid with its version.
    let out = velero_wasm(&[
        "actions",
        "--json",
        "--stock",
        "none",
        "--modules",
        target.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let packed = dir.path().join("kubevirt.yaml");
    let out = pack_to(&target, &packed, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = velero_wasm(&["module", "verify", "--json", packed.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Sets `path`'s modification time `seconds` before now.
fn modified_ago(path: &Path, seconds: u64) {
    let at = std::time::SystemTime::now() - std::time::Duration::from_secs(seconds);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(at)
        .unwrap();
}

/// A module's crate as `velero-wasm build` leaves it: `Cargo.toml`, `src/lib.rs`, the manifest, and
/// `module/` (the misbehave component and the same manifest) built after them.
fn built_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("module")).unwrap();
    write(root, "Cargo.toml", "[package]\nname = \"misbehave\"\n");
    write(&root.join("src"), "lib.rs", "// the action\n");
    support::add_module(&root.join("module"), "misbehave", "misbehave", MANIFEST);
    std::fs::copy(
        root.join("module/misbehave.toml"),
        root.join("misbehave.toml"),
    )
    .unwrap();
    for source in ["Cargo.toml", "src/lib.rs", "misbehave.toml"] {
        modified_ago(&root.join(source), 120);
    }
    for built in ["module/misbehave.wasm", "module/misbehave.toml"] {
        modified_ago(&root.join(built), 60);
    }
    dir
}

#[test]
fn run_bench_pack_and_push_refuse_a_module_its_sources_moved_past_unless_allow_stale() {
    let scene = Scene::new();
    let krate = built_crate();
    let module = krate.path().join("module");
    let module_text = module.to_str().unwrap().to_string();
    let wasm_text = module.join("misbehave.wasm").display().to_string();
    let (item, backup, cluster) = (
        scene.path("item.json"),
        scene.path("backup.json"),
        scene.path("cluster"),
    );
    let inputs = [
        "--action",
        "test.velero-wasm.io/echo",
        "--item",
        &item,
        "--backup",
        &backup,
        "--cluster",
        &cluster,
        "--stock",
        "none",
        "--modules",
        &module_text,
    ];
    let run: Vec<&str> = ["run"].iter().chain(&inputs).copied().collect();
    let bench: Vec<&str> = ["bench", "-n", "1", "--warmup", "0"]
        .iter()
        .chain(&inputs)
        .copied()
        .collect();
    let pack = ["module", "pack", &module_text];
    let pack_one = ["module", "pack", &wasm_text];
    // Nothing listens on the discard port: a push that gets past the check fails to connect.
    let target = "oci://127.0.0.1:9/velero/misbehave:1.0.0";
    let push = ["module", "push", &module_text, target, "--plain-http"];
    let commands: [&[&str]; 5] = [&run, &bench, &pack, &pack_one, &push];

    // Fresh: each goes ahead (push as far as the registry).
    for command in commands {
        let out = velero_wasm(command);
        let expected = if command[1] == "push" { 1 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{command:?}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("not the latest build"),
            "{}",
            stderr(&out)
        );
    }

    // The source edited, not rebuilt: each refuses with `test`'s message, exit 2.
    write(
        &krate.path().join("src"),
        "lib.rs",
        "// the action, changed\n",
    );
    for command in commands {
        let out = velero_wasm(command);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(
            message.contains(&format!("{module_text} is not the latest build"))
                && message.contains("src/lib.rs changed after")
                && message.contains("run `velero-wasm build` in")
                && message.contains("--allow-stale uses it as it is"),
            "{command:?}: {message}"
        );
        assert!(out.stdout.is_empty(), "{command:?}: nothing written");
        // Told so, it goes ahead.
        let allowed: Vec<&str> = command.iter().copied().chain(["--allow-stale"]).collect();
        let out = velero_wasm(&allowed);
        let expected = if command[1] == "push" { 1 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{allowed:?}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("not the latest build"),
            "{}",
            stderr(&out)
        );
    }

    // A manifest changed since the build (a version raised, not rebuilt): refused the same way.
    write(
        &krate.path().join("src"),
        "lib.rs",
        "// the action, changed\n",
    );
    modified_ago(&krate.path().join("src/lib.rs"), 120);
    let raised = std::fs::read_to_string(krate.path().join("misbehave.toml")).unwrap()
        + "version = \"0.2.0\"\n";
    write(krate.path(), "misbehave.toml", &raised);
    let out = velero_wasm(&pack);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("misbehave.toml differs from"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pack_of_a_module_too_big_for_a_configmap_says_to_push_it_or_mount_a_directory() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    // 3 MB that gzip cannot shrink (xorshift), pinned by its manifest, as a Python module's would be.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let wasm: Vec<u8> = (0..3_000_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(dir.path().join("big.wasm"), &wasm).unwrap();
    let sha: String = sha2::Sha256::digest(&wasm)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    write(dir.path(), "big.toml", &format!("sha256 = \"{sha}\"\n"));
    let path = dir.path().to_str().unwrap();
    let out = velero_wasm(&["module", "pack", path]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let message = stderr(&out);
    assert!(
        message.contains("over Kubernetes' limit of 1048576 bytes")
            && message.contains(&format!(
                "velero-wasm module push {path} oci://REGISTRY/REPOSITORY:TAG"
            ))
            && message.contains("--from-literal=big.oci=REFERENCE")
            && message.contains("point VELERO_WASM_MODULES at it"),
        "{message}"
    );
}
