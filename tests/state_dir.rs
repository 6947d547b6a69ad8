//! The state directory keeps what a later process reuses: compiled modules (machine code the host
//! maps and runs) and the last good version of each directory module (with its grant). So it is
//! trusted only when nobody else could have written it, and what is in it is checked before use:
//! * a compiled module damaged on disk is compiled again when it is next used (by the plugin, in the
//!   background once it serves), with a warning, and the cache repaired;
//! * a `compiled/` or `last-good/` directory of another user, or one others can write to, is not used;
//! * a symbolic link in place of a directory of the state is never followed: the plugin writes and
//!   cleans up nothing where it points;
//! * `status` reads what any process may have written: counts summed past `u64` saturate.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::plugin::Plugin;
use support::run::Run;
use support::{stderr, stdout_json, write};

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

/// Files for `run`: an item, a backup, a module directory with the test component.
struct Scene {
    files: tempfile::TempDir,
    modules: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let files = tempfile::tempdir().unwrap();
        write(
            files.path(),
            "item.json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"}}"#,
        );
        write(
            files.path(),
            "backup.json",
            r#"{"metadata":{"name":"nightly","namespace":"velero"},"spec":{}}"#,
        );
        Scene {
            files,
            modules: support::module_dir("misbehave", "misbehave", MANIFEST),
            state: tempfile::tempdir().unwrap(),
        }
    }

    /// `velero-wasm run` of the test module's echo action, with this scene's state directory.
    fn run(&self) -> Output {
        Run::new("test.velero-wasm.io/echo")
            .item(self.files.path().join("item.json"))
            .path("--backup", self.files.path().join("backup.json"))
            .modules(self.modules.path())
            .env("VELERO_WASM_STATE_DIR", self.state.path())
            .output()
    }

    fn compiled(&self) -> PathBuf {
        self.state.path().join("compiled")
    }
}

fn succeeds(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    assert_eq!(stdout_json(out)["item"]["metadata"]["name"], "app");
    stderr(out)
}

/// The cached compilations in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    entries.sort();
    entries
}

/// Flips 64 bytes in the middle of a file, keeping its length.
fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 64] {
        *b ^= 0xa5;
    }
    std::fs::write(path, bytes).unwrap();
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), None).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn running_as_root() -> bool {
    // The owner of a file this process creates is its effective user.
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid() == 0
}

#[test]
fn run_compiles_a_damaged_cached_module_again_with_a_warning_and_repairs_the_cache() {
    let scene = Scene::new();
    succeeds(&scene.run());
    let cached = entries(&scene.compiled());
    assert_eq!(
        cached.len(),
        5,
        "four stock modules and the test module: {cached:?}"
    );
    for entry in &cached {
        damage(entry);
    }
    // `run` compiles only the module it runs (the others serve from their cached descriptions): that
    // one's damaged entry is noticed and replaced; the others wait until a run uses them.
    let wasm = std::fs::read(scene.modules.path().join("misbehave.wasm")).unwrap();
    let (own, others): (Vec<&PathBuf>, Vec<&PathBuf>) = cached.iter().partition(|p| {
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&sha256_hex(&wasm))
    });
    let log = succeeds(&scene.run());
    assert!(
        log.contains(&format!("{} is damaged", own[0].display())),
        "{log}"
    );
    for entry in others {
        assert!(!log.contains(&entry.display().to_string()), "{log}");
    }
    assert_eq!(entries(&scene.compiled()), cached);
    let log = succeeds(&scene.run());
    assert!(
        !log.contains("damaged"),
        "the repaired cache is used: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_compiles_a_damaged_cached_module_again_with_a_warning_and_serves() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();
    let env = [("VELERO_WASM_STATE_DIR", state_dir.as_str())];
    let binary = support::plugin::binary();

    let plugin = Plugin::start_as(binary, &[], &env);
    let listed = plugin.listed().await;
    assert!(!listed.is_empty());
    plugin.shutdown().await;
    let cached = entries(&state.path().join("compiled"));
    assert_eq!(cached.len(), 4, "the stock modules: {cached:?}");
    for entry in &cached {
        damage(entry);
    }

    // The plugin serves from the modules' cached descriptions and compiles them in the background:
    // each damaged entry is noticed and written again.
    let damaged: Vec<std::time::SystemTime> = cached
        .iter()
        .map(|e| std::fs::metadata(e).unwrap().modified().unwrap())
        .collect();
    let plugin = Plugin::start_as(binary, &[], &env);
    assert_eq!(plugin.listed().await, listed);
    let rewritten = || {
        cached.iter().zip(&damaged).all(|(entry, then)| {
            std::fs::metadata(entry).is_ok_and(|m| m.modified().is_ok_and(|now| now != *then))
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !rewritten() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let session = plugin.shutdown().await;
    let warnings: Vec<String> = session
        .log_lines()
        .into_iter()
        .filter(|l| l["@level"] == "warn")
        .map(|l| l["@message"].as_str().unwrap_or("").to_string())
        .collect();
    for entry in &cached {
        let expected = format!("{} is damaged", entry.display());
        assert!(
            warnings.iter().any(|w| w.contains(&expected)),
            "{warnings:#?}"
        );
    }

    let plugin = Plugin::start_as(binary, &[], &env);
    assert_eq!(plugin.listed().await, listed);
    let session = plugin.shutdown().await;
    assert!(
        !session.stderr.contains("damaged"),
        "the repaired cache is used: {}",
        session.stderr
    );
}

#[test]
fn a_compiled_directory_of_another_user_or_open_to_others_is_not_used() {
    let scene = Scene::new();
    succeeds(&scene.run());
    // Plant the machine code of another module under the test module's key, sealed as the host
    // seals its own: a cache that is used runs it.
    let wasm = std::fs::read(scene.modules.path().join("misbehave.wasm")).unwrap();
    let cached = entries(&scene.compiled());
    let (own, others): (Vec<&PathBuf>, Vec<&PathBuf>) = cached.iter().partition(|p| {
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&sha256_hex(&wasm))
    });
    let (own, other) = (own[0], others[0]);
    std::fs::copy(other, own).unwrap();
    let planted = std::fs::read(own).unwrap();

    let compiled = scene.compiled();
    let mut cases = vec![(0o777, 0, "is writable by other users (mode 0777")];
    if running_as_root() {
        cases.push((0o755, 65534, "belongs to uid 65534"));
    } else {
        eprintln!("not root: the case of a directory of another user is left out");
    }
    for (mode, owner, why) in cases {
        chmod(&compiled, mode);
        if owner != 0 {
            chown(&compiled, owner);
        }
        let log = succeeds(&scene.run());
        assert!(
            log.contains("not caching compiled modules") && log.contains(why),
            "{log}"
        );
        assert_eq!(std::fs::read(own).unwrap(), planted, "left alone, not used");
        if owner != 0 {
            chown(&compiled, 0);
        }
    }

    // The same directory, private again, is trusted: what is planted there is what is loaded. It is
    // found out either because its exports are not the ones the module described or, when the planted
    // module exports the same interfaces, because it lacks the module's action: which of the two
    // depends on the module whose machine code sorts first, and so on the build.
    chmod(&compiled, 0o700);
    let out = scene.run();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its exports differ from its cached description")
            || stderr(&out).contains("has no action test.velero-wasm.io/echo"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_good_copies_of_another_user_are_not_served() {
    if !running_as_root() {
        eprintln!("not root: a directory of another user cannot be made");
        return;
    }
    let modules = support::module_dir("misbehave", "misbehave", MANIFEST);
    let state = tempfile::tempdir().unwrap();
    let (modules_dir, state_dir) = (
        modules.path().display().to_string(),
        state.path().display().to_string(),
    );
    let env = [
        ("VELERO_WASM_MODULES", modules_dir.as_str()),
        ("VELERO_WASM_STATE_DIR", state_dir.as_str()),
    ];
    let serves_echo = |listed: std::collections::BTreeSet<(String, String)>| {
        listed
            .iter()
            .any(|(_, name)| name == "test.velero-wasm.io/echo")
    };
    let plugin = Plugin::start_as(support::plugin::binary(), &[], &env);
    assert!(serves_echo(plugin.listed().await));
    plugin.shutdown().await;

    // A broken update: its last good copy would serve, were its directory to be trusted.
    write(modules.path(), "misbehave.wasm", "an update cut short");
    let last_good = state.path().join("last-good");
    let chown_all = |uid: u32| {
        let status = Command::new("chown")
            .args(["-R", &uid.to_string()])
            .arg(&last_good)
            .status()
            .unwrap();
        assert!(status.success());
    };
    chown_all(65534);
    let plugin = Plugin::start_as(support::plugin::binary(), &[], &env);
    assert!(!serves_echo(plugin.listed().await));
    let session = plugin.shutdown().await;
    assert!(
        session
            .stderr
            .contains("not keeping last good versions of modules")
            && session.stderr.contains("belongs to uid 65534"),
        "{}",
        session.stderr
    );

    chown_all(0);
    let plugin = Plugin::start_as(support::plugin::binary(), &[], &env);
    assert!(
        serves_echo(plugin.listed().await),
        "served from its last good copy"
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_directory_that_is_a_link_is_neither_written_nor_cleaned_up() {
    let state = tempfile::tempdir().unwrap();
    // Ours and private, as a directory the link points to may well be.
    let elsewhere = tempfile::tempdir().unwrap();
    // Named as a plugin names its shadows' figures, and older than the week they are kept: the
    // plugin's clean-up of its status directory would remove it.
    let theirs = elsewhere.path().join("shadows-1-1.json");
    std::fs::write(&theirs, "not the plugin's").unwrap();
    let week_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&theirs)
        .unwrap()
        .set_modified(week_ago)
        .unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), state.path().join("status")).unwrap();

    let state_dir = state.path().display().to_string();
    let plugin = Plugin::start_as(
        support::plugin::binary(),
        &[],
        &[("VELERO_WASM_STATE_DIR", state_dir.as_str())],
    );
    assert!(!plugin.listed().await.is_empty(), "the plugin serves");
    let session = plugin.shutdown().await;
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        "not the plugin's",
        "left where the link points"
    );
    assert!(!elsewhere.path().join("modules.json").exists());
    let warning = session
        .log_lines()
        .into_iter()
        .filter_map(|l| l["@message"].as_str().map(str::to_string))
        .find(|m| m.contains("the status for `velero-wasm status` is not written"))
        .unwrap_or_else(|| panic!("no warning: {}", session.stderr));
    assert!(
        warning.contains(&format!(
            "{} is a symbolic link",
            state.path().join("status").display()
        )),
        "{warning}"
    );
}

#[test]
fn status_sums_counts_past_u64_without_failing() {
    let state = tempfile::tempdir().unwrap();
    let status = state.path().join("status");
    std::fs::create_dir(&status).unwrap();
    chmod(&status, 0o700);
    write(
        &status,
        "modules.json",
        r#"{"written":"2026-01-01T00:00:00.000Z","pid":1,"modules":[
            {"name":"m","role":"shadow","source":"stock","sha256":"x"}]}"#,
    );
    // Two processes' figures, each at u64::MAX, and two kinds of fault at u64::MAX in each.
    let max = u64::MAX;
    for pid in [1, 2] {
        write(
            &status,
            &format!("shadows-{pid}-1.json"),
            &format!(
                r#"{{"pid":{pid},"updated":"2026-01-0{pid}T00:00:00.000Z","shadows":{{"m":{{
                    "compared":{max},"same":{max},"differing":{max},
                    "differences":{{"item":{max}}},
                    "faults":{{"trap":{max},"deadline":{max}}},
                    "dropped":{{"busy":{max}}}}}}}}}"#
            ),
        );
    }
    let out = Run::cli(["status", "--json", "--state-dir"])
        .arg(state.path())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shadow = &stdout_json(&out)["shadows"]["m"];
    assert_eq!(shadow["compared"], max, "{shadow}");
    assert_eq!(shadow["faults"]["trap"], max, "{shadow}");

    let out = Run::cli(["status", "--state-dir"])
        .arg(state.path())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let shadows = text
        .split("\nshadows (2 plugin processes):")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let row: Vec<&str> = shadows
        .lines()
        .find(|l| l.starts_with("m "))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    // Compared, same, differing (the rest of the row is cut at the table's width).
    let max = max.to_string();
    assert_eq!(row[1..4], [max.as_str(); 3], "{text}");
}

/// What a status file, a module directory or a ConfigMap names reaches a terminal escaped: an ESC
/// sequence could clear the screen or restyle a refusal, a bidi override reorder a name. JSON output
/// keeps the exact text (its own escaping is exact).
#[test]
fn printed_names_and_sources_are_escaped_and_json_keeps_them_exact() {
    const HOSTILE: &str = "m\u{1b}[2J\u{202e}gnp.exe";
    let state = tempfile::tempdir().unwrap();
    let status = state.path().join("status");
    std::fs::create_dir(&status).unwrap();
    chmod(&status, 0o700);
    let modules = serde_json::json!({"written": "2026-01-01T00:00:00.000Z", "pid": 1,
        "modules": [{"name": HOSTILE, "role": "serving", "source": format!("ConfigMap {HOSTILE}"),
                     "sha256": "x"}]});
    write(&status, "modules.json", &modules.to_string());
    let raw = |text: &str| text.contains('\u{1b}') || text.contains('\u{202e}');

    let out = Run::cli(["status", "--state-dir"])
        .arg(state.path())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!raw(&text), "printed raw: {text:?}");
    assert!(text.contains("m\\u{1b}[2J\\u{202e}gnp.exe"), "{text}");
    let out = Run::cli(["status", "--json", "--state-dir"])
        .arg(state.path())
        .output();
    assert_eq!(stdout_json(&out)["modules"][0]["name"], HOSTILE);

    // `actions`: an override in a directory whose path holds the same is shown by its path.
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join(HOSTILE);
    std::fs::create_dir(&modules).unwrap();
    write(
        &modules,
        "kubevirt.toml",
        "[settings]\nmode = \"upstream\"\n",
    );
    let out = Run::cli(["actions", "--stock", "kubevirt", "--modules"])
        .arg(&modules)
        .env("COLUMNS", "400")
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!raw(&text), "printed raw: {text:?}");
    assert!(
        text.contains("stock + override") && text.contains("\\u{1b}[2J\\u{202e}gnp.exe"),
        "{text}"
    );
}
