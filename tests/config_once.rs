//! Configuration is read once, at the edge: `main.rs` builds one `Config` from the environment and
//! passes it to the plugin and the CLI; no other file of `host/src` but `config.rs` reads the
//! environment (docs/architecture.md §5), and none but `config.rs` and the `environment` capability
//! looks a variable up by name: the rooms get typed settings from `Config`'s methods. A read added deep in the library would make a
//! setting that tests cannot give and that the start-up does not show, so it fails here, listing
//! where.

use std::path::{Path, PathBuf};

use velero_wasm::config::Config;

/// What reads the process's environment in Rust's standard library (`std::env::var`, `var_os`,
/// `vars`, `vars_os`, and `temp_dir`/`home_dir`, which read `TMPDIR` and `HOME`), however imported.
const READS: &[&str] = &[
    "env::var",
    "env::temp_dir",
    "env::home_dir",
    "use std::env::{",
];

/// The files allowed to read it: the edge.
const EDGE: &[&str] = &["config.rs", "main.rs"];

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The code lines of the library's files (not comments) that contain one of `needles`, as
/// `host/src/<file>:<line>: <code>`, leaving out the files `skipped` says to.
fn lines_containing(needles: &[&str], skipped: impl Fn(&Path) -> bool) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "host/src holds {} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        if skipped(relative) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if needles.iter().any(|needle| code.contains(needle)) {
                found.push(format!(
                    "host/src/{}:{}: {}",
                    relative.display(),
                    n + 1,
                    code
                ));
            }
        }
    }
    found
}

#[test]
fn no_library_file_below_the_edge_reads_the_environment() {
    let offenders = lines_containing(READS, |relative| {
        EDGE.iter().any(|edge| relative == Path::new(edge))
    });
    assert!(
        offenders.is_empty(),
        "the environment is read below the edge (take the value from velero_wasm::config::Config instead):\n{}",
        offenders.join("\n")
    );
}

/// How a variable is looked up by name in a `Config` (`var` is public for the `environment`
/// capability; `var_os`, `path` and `is_set` are private to config.rs).
const LOOKUPS: &[&str] = &[".var(", ".var_os(", ".is_set(", "config.path("];

/// The files that may look a variable up by name: config.rs, whose methods hand the rooms typed
/// settings, and the `environment` capability, whose grants name arbitrary variables.
const NAMERS: &[&str] = &["config.rs", "capabilities/environment/"];

#[test]
fn no_library_file_but_config_and_the_environment_capability_looks_a_variable_up_by_name() {
    let offenders = lines_containing(LOOKUPS, |relative| {
        NAMERS
            .iter()
            .any(|namer| relative.to_str().unwrap().starts_with(namer))
    });
    assert!(
        offenders.is_empty(),
        "a variable is looked up by name outside config.rs (give the room a typed setting from a method of velero_wasm::config::Config instead):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_edge_reads_the_environment_through_config_only() {
    let main =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs")).unwrap();
    assert!(
        main.contains("Config::from_env()"),
        "main.rs builds the Config"
    );
    let reads = main
        .lines()
        .filter(|l| !l.trim_start().starts_with("//") && l.contains("env::var"))
        .count();
    assert_eq!(
        reads, 0,
        "main.rs reads the environment only through Config::from_env"
    );
}

#[test]
fn a_config_given_as_variables_is_what_the_library_sees() {
    let config = Config::from_vars([
        ("VELERO_WASM_STATE_DIR", "/state"),
        ("VELERO_NAMESPACE", " backups "),
    ]);
    assert_eq!(
        velero_wasm::state::default_dir(&config),
        Some(PathBuf::from("/state"))
    );
    let environment = velero_wasm::Environment::from_config(&config);
    assert_eq!(environment.velero_namespace(), "backups");
    // Empty is unset, as it was for the variables read from the process.
    let config = Config::from_vars([("VELERO_WASM_STATE_DIR", ""), ("HOME", "/home/op")]);
    assert_eq!(
        velero_wasm::state::default_dir(&config),
        Some(PathBuf::from("/home/op/.cache/velero-wasm"))
    );
}

#[test]
fn the_shadow_budget_comes_from_the_config_given() {
    let budget = velero_wasm::shadow::Budget::from_config(&Config::from_vars([
        ("VELERO_WASM_SHADOW_CALLS", "5"),
        ("VELERO_WASM_SHADOW_NICE", "40"),
    ]));
    assert_eq!(budget.calls, 5);
    // Out of range: the default, as before.
    assert_eq!(budget.nice, 0);
}
