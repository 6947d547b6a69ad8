//! Every Rust scaffold `velero-wasm new --kind K` offers, as an author gets it (issue 44): generated
//! with the binary's own SDK, its unit tests run natively (`cargo test`), built into `module/`
//! (`velero-wasm build`), its generated suite run (`velero-wasm test`), and its settings path
//! exercised: the typed setting read at its default and overridden (by a suite case and by an
//! operator's `[settings]`), a misspelt key and a value of the wrong type refused, naming the key.
//! The Python scaffolds take minutes to build and run in `make python` (tests/python/run.sh), the
//! JavaScript ones in `make javascript` (tests/javascript/run.sh).
//!
//! Builds are offline, with the workspace's Cargo.lock and one target directory for every crate
//! (target/author-crate, shared with the authoring guide's test), so the SDK's dependencies build once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::run::Run;
use crate::support::{self, stderr, write};

/// The target directory every author crate of the tests builds in.
fn author_target() -> PathBuf {
    support::root().join("target/author-crate")
}

/// `velero-wasm new --kind KIND DIR/NAME`, with the workspace's Cargo.lock; the crate's directory.
fn scaffold(dir: &Path, name: &str, kind: &str) -> PathBuf {
    let crate_dir = dir.join(name);
    let out = Run::cli(["new", "--kind", kind, crate_dir.to_str().unwrap()]).output();
    assert_eq!(
        out.status.code(),
        Some(0),
        "new --kind {kind}: {}",
        stderr(&out)
    );
    std::fs::copy(
        support::root().join("Cargo.lock"),
        crate_dir.join("Cargo.lock"),
    )
    .unwrap();
    crate_dir
}

/// `cargo ARGS` in `dir`, offline, in the shared target directory.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    support::run::hermetic(&mut Command::new(cargo))
        .args(args)
        .current_dir(dir)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", author_target())
        .env("CARGO_TERM_COLOR", "never")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .unwrap()
}

/// `velero-wasm build` in `dir`, offline, in the shared target directory.
fn build(dir: &Path) -> Output {
    Run::cli(["build"])
        .current_dir(dir)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", author_target())
        .env_remove("CARGO_BUILD_TARGET")
        .output()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the action of each kind returns while its setting `suspend` is true, as a suite expects it.
fn suspended_expectation(kind: &str) -> &'static str {
    match kind {
        "backup" | "backup-v2" | "restore" | "restore-v2" => {
            "additionalItems: []\n      item: fixtures/item.json"
        }
        "delete" => "clusterWrites: []",
        "item-block" => "relatedItems: []",
        other => panic!("no expectation for kind {other}"),
    }
}

/// A suite of the settings path against the module directory `modules` (relative to tests/): the
/// setting as that directory's manifest sets it, a misspelt key, and a value of the wrong type.
fn settings_suite(name: &str, kind: &str, modules: &str, as_set: &str) -> String {
    let subject = match kind {
        "restore" | "restore-v2" => "restore",
        _ => "backup",
    };
    let case = |title: &str, settings: &str, expect: &str| {
        format!(
            "  - name: {title}
    action: example.io/{name}
    item: fixtures/item.json
    {subject}: fixtures/{subject}.json
    cluster: [fixtures/cluster]{settings}
    expect:
      {expect}
"
        )
    };
    format!(
        "modules: {modules}\nstock: none\ncases:\n{}{}{}",
        case("as the module directory's manifest sets it", "", as_set),
        case(
            "a misspelt setting",
            "\n    settings: {suspnd: true}",
            "error: 'did you mean \"suspend\"'"
        ),
        case(
            "a value of the wrong type",
            "\n    settings: {suspend: sometimes}",
            "error: 'settings.suspend'"
        ),
    )
}

/// The whole loop of one kind's scaffold, as its README and docs/authoring.md tell an author.
fn scaffold_works_as_generated(kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("scaffold-{kind}");
    let crate_dir = scaffold(dir.path(), &name, kind);

    // Its unit tests, natively, the setting's among them.
    let out = cargo(&crate_dir, &["test"]);
    let report = stdout(&out);
    assert!(
        out.status.success(),
        "{kind}: cargo test:\n{report}\n{}",
        stderr(&out)
    );
    assert!(
        report.contains("tests::a_suspended_action_") && report.contains(" 0 failed"),
        "{kind}: {report}"
    );

    // The component, into module/.
    let out = build(&crate_dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{kind}: build: {}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains(&format!("example.io/{name}  {kind}")),
        "{kind}: {}",
        stdout(&out)
    );

    // The generated suite: the action at the setting's default, and with the case's override.
    let suite = crate_dir.join("tests/suite.yaml");
    let out = Run::cli(["test", suite.to_str().unwrap()]).output();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{kind}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("2 passed, 0 failed"),
        "{kind}: {}",
        stdout(&out)
    );

    // An operator's override: the module directory's manifest sets it, as a ConfigMap or a stock
    // override would.
    let operator = crate_dir.join("operator");
    std::fs::create_dir(&operator).unwrap();
    std::fs::copy(
        crate_dir.join(format!("module/{name}.wasm")),
        operator.join(format!("{name}.wasm")),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(crate_dir.join(format!("module/{name}.toml"))).unwrap();
    write(
        &operator,
        &format!("{name}.toml"),
        &format!("{manifest}\n[settings]\nsuspend = true\n"),
    );
    let probes = write(
        &crate_dir.join("tests"),
        "settings.yaml",
        &settings_suite(&name, kind, "../operator", suspended_expectation(kind)),
    );
    let out = Run::cli(["test", probes.to_str().unwrap()]).output();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{kind}: the settings path:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("3 passed, 0 failed"),
        "{kind}: {}",
        stdout(&out)
    );

    // The probes fail where they should: the override reaches the action (without it the first case
    // fails), so they do not pass by accident.
    write(
        &operator,
        &format!("{name}.toml"),
        &format!("{manifest}\n[settings]\nsuspend = false\n"),
    );
    let out = Run::cli(["test", probes.to_str().unwrap()]).output();
    assert_eq!(out.status.code(), Some(1), "{kind}: {}", stdout(&out));
    assert!(
        stdout(&out).contains("2 passed, 1 failed"),
        "{kind}: {}",
        stdout(&out)
    );
}

#[test]
fn the_backup_scaffold_works_as_generated() {
    scaffold_works_as_generated("backup");
}

#[test]
fn the_backup_v2_scaffold_works_as_generated() {
    scaffold_works_as_generated("backup-v2");
}

#[test]
fn the_restore_scaffold_works_as_generated() {
    scaffold_works_as_generated("restore");
}

#[test]
fn the_restore_v2_scaffold_works_as_generated() {
    scaffold_works_as_generated("restore-v2");
}

#[test]
fn the_delete_scaffold_works_as_generated() {
    scaffold_works_as_generated("delete");
}

#[test]
fn the_item_block_scaffold_works_as_generated() {
    scaffold_works_as_generated("item-block");
}

/// The same scaffold, generated and built in two directories, gives the same component, byte for byte
/// (issue 44): what a reviewer rebuilds from the source matches the sha256 a manifest pins. Nothing of
/// the crate's path reaches the component (Cargo passes rustc the crate's and its path dependencies'
/// sources relative to the crate; registry sources have the same path on one machine).
#[test]
fn the_same_scaffold_built_in_two_directories_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let sha256 = |place: &str| {
        let crate_dir = scaffold(&dir.path().join(place), "same-bytes", "backup");
        let out = build(&crate_dir);
        assert_eq!(out.status.code(), Some(0), "{place}: {}", stderr(&out));
        let wasm = std::fs::read(crate_dir.join("module/same-bytes.wasm")).unwrap();
        let pinned = std::fs::read_to_string(crate_dir.join("same-bytes.toml")).unwrap();
        let sha = velero_wasm::modules::sha256_hex(&wasm);
        assert!(pinned.contains(&sha), "{pinned}");
        sha
    };
    let first = sha256("one");
    assert_eq!(first, sha256("another/place"));
}
