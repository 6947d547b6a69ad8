//! `velero-wasm new NAME`: starts a module's crate in the new directory NAME: the action (of the kind
//! asked for) with its unit tests on the SDK's `FakeCluster`, its manifest with the least grant it
//! needs, fixtures, a test suite, and `.cargo/config.toml` with the stack size of the stock
//! components. The files are the templates in `new/`, embedded in the binary, with the crate's name,
//! the action's kind and the SDK dependency filled in. The SDK comes with them: its source and WIT,
//! carried in the binary, go to `vendor/velero-wasm-sdk/` ([`vendored_sdk`]), unless `--sdk` names
//! another.

use std::path::{Path, PathBuf};

use super::failure::{Failure, EXIT_OK};
use super::vendored_sdk::{self, VENDOR_DIR};
use crate::modules::valid_module_name;

/// Arguments of `new`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The SDK (velero-wasm-sdk, source and WIT) of this binary's version is written into \
    the crate, at vendor/velero-wasm-sdk, and Cargo.toml depends on it by path: the crate builds with \
    this binary and Cargo alone. --sdk uses another copy instead."
)]
pub(crate) struct NewArgs {
    /// The directory to create (or an empty one); its last component names the crate, the module and
    /// the action (`example.io/NAME`): lower-case letters, digits and `-`, starting with a letter.
    #[arg(value_name = "NAME")]
    path: PathBuf,

    /// The kind of action.
    #[arg(long, value_enum, default_value_t = ActionKind::Backup)]
    kind: ActionKind,

    /// The language of the module: rust (the SDK's crate), python (componentize-py) or javascript
    /// (componentize-js); python and javascript write --kind backup, restore or delete, with a typed
    /// settings reader, and `velero-wasm build` needs their tool (its README says how to install it).
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,

    /// Where the SDK comes from instead of the copy this binary writes into the crate: a directory
    /// (its sdk/, or a velero-wasm checkout), written as an absolute path dependency, or a git URL
    /// (e.g. https://github.com/velero-wasm/velero-wasm.git).
    #[arg(long, value_name = "PATH|GIT-URL")]
    sdk: Option<String>,
}

/// The languages `new` writes a module in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Lang {
    Rust,
    Python,
    Javascript,
}

/// The kinds of action the WIT contract offers, as `new --kind` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ActionKind {
    Backup,
    BackupV2,
    Restore,
    RestoreV2,
    Delete,
    ItemBlock,
}

impl ActionKind {
    /// The variant of the SDK's `Kind`, and the name people read.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            ActionKind::Backup => ("Backup", "backup"),
            ActionKind::BackupV2 => ("BackupV2", "backup-v2"),
            ActionKind::Restore => ("Restore", "restore"),
            ActionKind::RestoreV2 => ("RestoreV2", "restore-v2"),
            ActionKind::Delete => ("Delete", "delete"),
            ActionKind::ItemBlock => ("ItemBlock", "item-block"),
        }
    }

    /// The kind's own templates: the action, its manifest, its fixture cluster and its suite.
    fn templates(self) -> KindTemplates {
        match self {
            ActionKind::Backup | ActionKind::BackupV2 => KindTemplates {
                lib: include_str!("new/backup/lib.rs"),
                manifest: include_str!("new/backup/manifest.toml"),
                cluster: include_str!("new/backup/cluster.yaml"),
                suite: include_str!("new/backup/suite.yaml"),
            },
            ActionKind::Restore | ActionKind::RestoreV2 => KindTemplates {
                lib: include_str!("new/restore/lib.rs"),
                manifest: include_str!("new/restore/manifest.toml"),
                cluster: include_str!("new/restore/cluster.yaml"),
                suite: include_str!("new/restore/suite.yaml"),
            },
            ActionKind::Delete => KindTemplates {
                lib: include_str!("new/delete/lib.rs"),
                manifest: include_str!("new/delete/manifest.toml"),
                cluster: include_str!("new/delete/cluster.yaml"),
                suite: include_str!("new/delete/suite.yaml"),
            },
            ActionKind::ItemBlock => KindTemplates {
                lib: include_str!("new/item-block/lib.rs"),
                manifest: include_str!("new/item-block/manifest.toml"),
                cluster: include_str!("new/item-block/cluster.yaml"),
                suite: include_str!("new/item-block/suite.yaml"),
            },
        }
    }

    /// The object the action is called about: `backup` or `restore` (as `run --backup|--restore`).
    fn subject(self) -> &'static str {
        match self {
            ActionKind::Restore | ActionKind::RestoreV2 => "restore",
            _ => "backup",
        }
    }
}

struct KindTemplates {
    lib: &'static str,
    manifest: &'static str,
    cluster: &'static str,
    suite: &'static str,
}

/// Runs the command; returns the exit status.
pub(crate) fn new(args: NewArgs) -> u8 {
    match create(&args) {
        Ok(()) => EXIT_OK,
        Err(failure) => {
            eprintln!("velero-wasm new: {}", failure.message);
            failure.code
        }
    }
}

fn create(args: &NewArgs) -> Result<(), Failure> {
    let name = crate_name(&args.path)?;
    match args.lang {
        Lang::Python => return create_python(args, &name),
        Lang::Javascript => return create_javascript(args, &name),
        Lang::Rust => {}
    }
    let dependency = sdk_dependency(args.sdk.as_deref())?;
    let mut files = render(&name, args.kind, &dependency);
    if args.sdk.is_none() {
        files.extend(vendored_sdk::files().map_err(Failure::failed)?);
    }
    write_files(&args.path, &files)?;
    let (_, kind) = args.kind.names();
    let dir = args.path.display();
    println!("created {dir}: the {kind} action example.io/{name}, its manifest {name}.toml, fixtures and tests/suite.yaml");
    match &args.sdk {
        None => println!(
            "the SDK: velero-wasm-sdk {} (source and WIT, from this binary) in {dir}/{VENDOR_DIR}, a path dependency of Cargo.toml",
            env!("CARGO_PKG_VERSION")
        ),
        Some(sdk) => println!("the SDK: {dependency} (from --sdk {sdk})"),
    }
    println!("next: (cd {dir} && cargo test) && velero-wasm build {dir} && velero-wasm test {dir}/tests/suite.yaml");
    Ok(())
}

/// Writes `files` under `dir`, which must be absent or empty.
fn write_files(dir: &Path, files: &[(String, String)]) -> Result<(), Failure> {
    ensure_empty_or_absent(dir)?;
    for (relative, text) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Failure::failed(format!("{}: {e}", parent.display())))?;
        }
        // A new file (O_EXCL): nothing that appeared meanwhile, a link least of all, is written through.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
            .map_err(|e| Failure::failed(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// `new --lang python`: the example of the kind in Python (`app.py`), its unit tests, the typed
/// settings reader (`settings.py`), the WIT it is built against, and the same manifest, fixtures and
/// suite as the Rust example of that kind.
fn create_python(args: &NewArgs, name: &str) -> Result<(), Failure> {
    if args.sdk.is_some() {
        return Err(Failure::bad_input(
            "--sdk is the Rust SDK's: a Python module is built against the WIT, which new writes into wit/",
        ));
    }
    let files = render_python(name, args.kind)?;
    write_files(&args.path, &files)?;
    let dir = args.path.display();
    let kind = args.kind.names().1;
    println!("created {dir}: the {kind} action example.io/{name} in Python (app.py, settings.py), its manifest {name}.toml, fixtures and tests/suite.yaml");
    println!("the WIT: {dir}/wit, from this binary; `velero-wasm build` runs componentize-py (pip install componentize-py==0.25.1)");
    println!("next: (cd {dir} && python3 -m unittest) && velero-wasm build {dir} && velero-wasm test {dir}/tests/suite.yaml");
    Ok(())
}

/// The Python example of `kind` (its action and its unit tests), or why there is none.
fn python_templates(kind: ActionKind) -> Result<(&'static str, &'static str), Failure> {
    match kind {
        ActionKind::Backup => Ok((
            include_str!("new/python/backup.py"),
            include_str!("new/python/backup_test.py"),
        )),
        ActionKind::Restore => Ok((
            include_str!("new/python/restore.py"),
            include_str!("new/python/restore_test.py"),
        )),
        ActionKind::Delete => Ok((
            include_str!("new/python/delete.py"),
            include_str!("new/python/delete_test.py"),
        )),
        other => Err(Failure::bad_input(format!(
            "--lang python writes a backup, restore or delete action (not {}): start from one of \
             them and change the kind; the WIT in wit/ has every kind",
            other.names().1
        ))),
    }
}

/// The Python module's files: relative path and text.
fn render_python(name: &str, kind: ActionKind) -> Result<Vec<(String, String)>, Failure> {
    let (app, tests) = python_templates(kind)?;
    let test_app = include_str!("new/python/test_app.py").replace("__TESTS__", tests);
    let own: Vec<(&str, &str)> = vec![
        ("app.py", app),
        ("test_app.py", &test_app),
        ("settings.py", include_str!("new/python/settings.py")),
        (
            "unimplemented.py",
            include_str!("new/python/unimplemented.py"),
        ),
        (
            "test_settings.py",
            include_str!("new/python/test_settings.py"),
        ),
        (".gitignore", include_str!("new/python/gitignore")),
        ("README.md", include_str!("new/python/README.md")),
    ];
    render_source_module(name, kind, &own)
}

/// A module in a language other than Rust: its own files (`own`: relative path and template), then
/// what every language shares with the Rust example of `kind` (its manifest, suite and fixtures) and
/// the WIT, each template filled in with the module's name, kind and subject.
fn render_source_module(
    name: &str,
    kind: ActionKind,
    own: &[(&str, &str)],
) -> Result<Vec<(String, String)>, Failure> {
    let shared = kind.templates();
    let subject = kind.subject();
    let subject_fixture = match subject {
        "restore" => include_str!("new/common/restore.json"),
        _ => include_str!("new/common/backup.json"),
    };
    let fill = |template: &str| {
        template
            .replace("__NAME__", name)
            .replace("__KIND_NAME__", kind.names().1)
            .replace("__SUBJECT__", subject)
    };
    let common = [
        (format!("{name}.toml"), shared.manifest),
        ("tests/suite.yaml".into(), shared.suite),
        (
            "tests/fixtures/item.json".into(),
            include_str!("new/common/item.json"),
        ),
        (format!("tests/fixtures/{subject}.json"), subject_fixture),
        ("tests/fixtures/cluster/objects.yaml".into(), shared.cluster),
    ];
    let mut files: Vec<(String, String)> = own
        .iter()
        .map(|(path, template)| (path.to_string(), fill(template)))
        .chain(
            common
                .iter()
                .map(|(path, template)| (path.clone(), fill(template))),
        )
        .collect();
    files.extend(wit_files()?);
    Ok(files)
}

/// The WIT contract, as `wit/<file>`: what a module in another language than Rust is built against.
fn wit_files() -> Result<Vec<(String, String)>, Failure> {
    let wit = format!("{VENDOR_DIR}/wit/");
    Ok(vendored_sdk::files()
        .map_err(Failure::failed)?
        .into_iter()
        .filter_map(|(path, text)| {
            path.strip_prefix(&wit)
                .map(|file| (format!("wit/{file}"), text))
        })
        .collect())
}

/// `new --lang javascript`: the example of the kind in JavaScript (`app.js`, an ES module), its unit
/// tests on fakes of the WIT's imports (`node --test`), the typed settings reader (`settings.js`), a
/// package.json pinning componentize-js, the WIT, and the same manifest, fixtures and suite as the
/// Rust example of that kind.
fn create_javascript(args: &NewArgs, name: &str) -> Result<(), Failure> {
    if args.sdk.is_some() {
        return Err(Failure::bad_input(
            "--sdk is the Rust SDK's: a JavaScript module is built against the WIT, which new writes into wit/",
        ));
    }
    let files = render_javascript(name, args.kind)?;
    write_files(&args.path, &files)?;
    let dir = args.path.display();
    let kind = args.kind.names().1;
    println!("created {dir}: the {kind} action example.io/{name} in JavaScript (app.js, settings.js), its manifest {name}.toml, fixtures and tests/suite.yaml");
    println!("the WIT: {dir}/wit, from this binary; `velero-wasm build` runs componentize-js {COMPONENTIZE_JS_VERSION} (`npm install` in {dir} installs it)");
    println!("next: (cd {dir} && npm install && node --test) && velero-wasm build {dir} && velero-wasm test {dir}/tests/suite.yaml");
    Ok(())
}

/// The componentize-js version the JavaScript scaffold's package.json pins (and `make javascript`
/// tests).
pub(crate) const COMPONENTIZE_JS_VERSION: &str = "0.23.0";

/// The JavaScript example of `kind` (its action and its unit tests), or why there is none.
fn javascript_templates(kind: ActionKind) -> Result<(&'static str, &'static str), Failure> {
    match kind {
        ActionKind::Backup => Ok((
            include_str!("new/javascript/backup.js"),
            include_str!("new/javascript/backup.test.js"),
        )),
        ActionKind::Restore => Ok((
            include_str!("new/javascript/restore.js"),
            include_str!("new/javascript/restore.test.js"),
        )),
        ActionKind::Delete => Ok((
            include_str!("new/javascript/delete.js"),
            include_str!("new/javascript/delete.test.js"),
        )),
        other => Err(Failure::bad_input(format!(
            "--lang javascript writes a backup, restore or delete action (not {}): start from one of \
             them and change the kind; the WIT in wit/ has every kind",
            other.names().1
        ))),
    }
}

/// The JavaScript module's files: relative path and text.
fn render_javascript(name: &str, kind: ActionKind) -> Result<Vec<(String, String)>, Failure> {
    let (app, tests) = javascript_templates(kind)?;
    let test_app = include_str!("new/javascript/app.test.js").replace("__TESTS__", tests);
    let own: Vec<(&str, &str)> = vec![
        ("app.js", app),
        ("app.test.js", &test_app),
        ("settings.js", include_str!("new/javascript/settings.js")),
        (
            "settings.test.js",
            include_str!("new/javascript/settings.test.js"),
        ),
        (
            "unimplemented.js",
            include_str!("new/javascript/unimplemented.js"),
        ),
        (
            "fakes/hooks.js",
            include_str!("new/javascript/fakes/hooks.js"),
        ),
        (
            "fakes/kube.js",
            include_str!("new/javascript/fakes/kube.js"),
        ),
        (
            "fakes/config.js",
            include_str!("new/javascript/fakes/config.js"),
        ),
        ("package.json", include_str!("new/javascript/package.json")),
        (".gitignore", include_str!("new/javascript/gitignore")),
        ("README.md", include_str!("new/javascript/README.md")),
    ];
    render_source_module(name, kind, &own)
}

/// The crate's name: the last component of `path`, which must also be a valid module name (the
/// manifest is `<name>.toml`, and the host loads the module by that name).
fn crate_name(path: &Path) -> Result<String, Failure> {
    // `new .` (or `new ..`) names the crate after the directory itself.
    let absolute = std::fs::canonicalize(path)
        .ok()
        .filter(|_| path.file_name().is_none());
    let name = absolute
        .as_deref()
        .unwrap_or(path)
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Failure::bad_input(format!("{}: no directory name", path.display())))?;
    // Names cargo refuses for a package (they clash with the standard library or its own targets).
    const RESERVED: [&str; 6] = ["test", "std", "core", "alloc", "proc-macro", "build"];
    if !valid_module_name(name) || name.ends_with('-') || RESERVED.contains(&name) {
        return Err(Failure::bad_input(format!(
            "{name:?} cannot name a module's crate: use lower-case letters, digits and `-`, starting \
             with a letter and not ending with `-`, at most 63 characters (e.g. label-pvcs), and none \
             of {}",
            RESERVED.join(", ")
        )));
    }
    Ok(name.to_string())
}

/// The `velero-wasm-sdk = …` line of Cargo.toml for `--sdk` (a git URL, or a directory made
/// absolute), or the copy `new` writes into the crate without it.
fn sdk_dependency(sdk: Option<&str>) -> Result<String, Failure> {
    let Some(sdk) = sdk else {
        return Ok(format!(
            "velero-wasm-sdk = {{ path = {} }}",
            toml_string(VENDOR_DIR)
        ));
    };
    if is_git_url(sdk) {
        return Ok(format!(
            "velero-wasm-sdk = {{ git = {} }}",
            toml_string(sdk)
        ));
    }
    let given = Path::new(sdk);
    let dir = [given.join("sdk"), given.to_path_buf()]
        .into_iter()
        .find(|d| is_sdk(d))
        .ok_or_else(|| {
            Failure::bad_input(format!(
                "--sdk {sdk}: neither it nor its sdk/ holds the velero-wasm-sdk crate (a Cargo.toml \
                 with name = \"velero-wasm-sdk\"); give the sdk/ directory of a velero-wasm checkout, \
                 or a git URL"
            ))
        })?;
    let absolute = std::fs::canonicalize(&dir)
        .map_err(|e| Failure::bad_input(format!("--sdk {}: {e}", dir.display())))?;
    let absolute = absolute.to_str().ok_or_else(|| {
        Failure::bad_input(format!(
            "--sdk {}: the path is not UTF-8, which Cargo.toml cannot hold",
            absolute.display()
        ))
    })?;
    Ok(format!(
        "velero-wasm-sdk = {{ path = {} }}",
        toml_string(absolute)
    ))
}

/// Whether `sdk` names a git repository rather than a directory.
fn is_git_url(sdk: &str) -> bool {
    ["https://", "http://", "ssh://", "git://", "file://", "git@"]
        .iter()
        .any(|scheme| sdk.starts_with(scheme))
}

/// Whether `dir` holds the velero-wasm-sdk package.
fn is_sdk(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|cargo| {
            cargo
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .map(|n| n == "velero-wasm-sdk")
        })
        .unwrap_or(false)
}

/// `text` as a TOML string, quoted and escaped.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// Refuses a path that exists and is not an empty directory: nothing of the user's is overwritten.
fn ensure_empty_or_absent(path: &Path) -> Result<(), Failure> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::bad_input(format!("{}: {e}", path.display()))),
        Ok(meta) if !meta.is_dir() => Err(Failure::bad_input(format!(
            "{} exists and is not a directory: not overwriting it",
            path.display()
        ))),
        Ok(_) => {
            let mut entries = std::fs::read_dir(path)
                .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
            if entries.next().is_some() {
                return Err(Failure::bad_input(format!(
                    "{} exists and is not empty: not overwriting it; choose a new name or empty it",
                    path.display()
                )));
            }
            Ok(())
        }
    }
}

/// The crate's files: relative path and text, every placeholder filled in.
fn render(name: &str, kind: ActionKind, sdk_dependency: &str) -> Vec<(String, String)> {
    let (variant, kind_name) = kind.names();
    let subject = kind.subject();
    let fill = |template: &str| {
        template
            .replace("__NAME__", name)
            .replace("__KIND_NAME__", kind_name)
            .replace("__KIND__", variant)
            .replace("__SUBJECT__", subject)
            .replace("__SDK_DEPENDENCY__", sdk_dependency)
    };
    let own = kind.templates();
    let subject_fixture = match subject {
        "restore" => include_str!("new/common/restore.json"),
        _ => include_str!("new/common/backup.json"),
    };
    [
        (
            "Cargo.toml".to_string(),
            include_str!("new/common/Cargo.toml"),
        ),
        (
            ".cargo/config.toml".into(),
            include_str!("new/common/config.toml"),
        ),
        (".gitignore".into(), include_str!("new/common/gitignore")),
        ("README.md".into(), include_str!("new/common/README.md")),
        ("src/lib.rs".into(), own.lib),
        (format!("{name}.toml"), own.manifest),
        ("tests/suite.yaml".into(), own.suite),
        (
            "tests/fixtures/item.json".into(),
            include_str!("new/common/item.json"),
        ),
        (format!("tests/fixtures/{subject}.json"), subject_fixture),
        ("tests/fixtures/cluster/objects.yaml".into(), own.cluster),
    ]
    .into_iter()
    .map(|(path, template)| (path, fill(template)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_of_every_kind_is_filled_in() {
        for &kind in <ActionKind as clap::ValueEnum>::value_variants() {
            for (path, text) in render("label-pvcs", kind, "velero-wasm-sdk = \"0.1.0\"") {
                assert!(
                    !text.contains("__"),
                    "{kind:?} {path}: a placeholder is left: {text}"
                );
            }
        }
    }

    #[test]
    fn every_kind_gets_a_valid_manifest_cargo_toml_and_the_kind_asked_for() {
        for &kind in <ActionKind as clap::ValueEnum>::value_variants() {
            let files = render("label-pvcs", kind, "velero-wasm-sdk = \"0.1.0\"");
            let file = |p: &str| &files.iter().find(|(path, _)| path == p).unwrap().1;
            crate::modules::Manifest::parse(file("label-pvcs.toml")).unwrap();
            let cargo: toml::Table = file("Cargo.toml").parse().unwrap();
            assert_eq!(cargo["package"]["name"].as_str(), Some("label-pvcs"));
            assert_eq!(
                cargo["dependencies"]["velero-wasm-sdk"].as_str(),
                Some("0.1.0")
            );
            let (variant, _) = kind.names();
            assert!(file("src/lib.rs").contains(&format!("Kind::{variant})")));
            let suite: serde_norway::Value =
                serde_norway::from_str(file("tests/suite.yaml")).unwrap();
            assert_eq!(
                suite["cases"][0]["action"].as_str(),
                Some("example.io/label-pvcs")
            );
        }
    }

    /// The keys of the suite format `velero-wasm test` reads (the subset every generated suite keeps to).
    const SUITE_KEYS: [&str; 3] = ["modules", "stock", "cases"];
    const CASE_KEYS: [&str; 9] = [
        "name", "action", "item", "backup", "restore", "cluster", "now", "settings", "expect",
    ];
    const EXPECT_KEYS: [&str; 6] = [
        "error",
        "additionalItems",
        "relatedItems",
        "pointers",
        "clusterWrites",
        "item",
    ];

    #[test]
    fn every_suite_keeps_to_the_suite_format_and_names_files_the_crate_has() {
        for &kind in <ActionKind as clap::ValueEnum>::value_variants() {
            let files = render("count-pvcs", kind, "velero-wasm-sdk = \"0.1.0\"");
            let has = |p: &str| {
                files
                    .iter()
                    .any(|(path, _)| path == p || path.starts_with(&format!("{p}/")))
            };
            let suite = &files
                .iter()
                .find(|(p, _)| p == "tests/suite.yaml")
                .unwrap()
                .1;
            let suite: serde_norway::Mapping = serde_norway::from_str(suite).unwrap();
            let keys = |map: &serde_norway::Mapping, allowed: &[&str]| {
                for key in map.keys() {
                    let key = key.as_str().unwrap();
                    assert!(
                        allowed.contains(&key),
                        "{kind:?}: {key} is not in the suite format"
                    );
                }
            };
            keys(&suite, &SUITE_KEYS);
            assert_eq!(suite["modules"].as_str(), Some("../module"));
            let cases = suite["cases"].as_sequence().unwrap();
            assert!(!cases.is_empty());
            for case in cases {
                let case = case.as_mapping().unwrap();
                keys(case, &CASE_KEYS);
                let expect = case["expect"].as_mapping().unwrap();
                keys(expect, &EXPECT_KEYS);
                if let Some(item) = expect.get("item") {
                    let path = format!("tests/{}", item.as_str().unwrap());
                    assert!(has(&path), "{kind:?}: {path} is not generated");
                }
                let subject = kind.subject();
                for file in ["item", subject] {
                    let path = format!("tests/{}", case[file].as_str().unwrap());
                    assert!(has(&path), "{kind:?}: {path} is not generated");
                }
                for dir in case["cluster"].as_sequence().unwrap() {
                    let path = format!("tests/{}", dir.as_str().unwrap());
                    assert!(has(&path), "{kind:?}: {path} is not generated");
                }
            }
        }
    }

    #[test]
    fn each_python_module_has_its_rust_twins_suite_and_the_wit() {
        let file = |files: &[(String, String)], p: &str| {
            files
                .iter()
                .find(|(path, _)| path == p)
                .map(|(_, t)| t.clone())
        };
        for kind in [ActionKind::Backup, ActionKind::Restore, ActionKind::Delete] {
            let python = render_python("count-pvcs", kind)
                .map_err(|f| f.message)
                .unwrap();
            let rust = render("count-pvcs", kind, "velero-wasm-sdk = \"0.1.0\"");
            let subject = format!("tests/fixtures/{}.json", kind.subject());
            for same in [
                "tests/suite.yaml",
                "count-pvcs.toml",
                "tests/fixtures/item.json",
                "tests/fixtures/cluster/objects.yaml",
                &subject,
            ] {
                assert!(file(&python, same).is_some(), "{kind:?} {same}");
                assert_eq!(file(&python, same), file(&rust, same), "{kind:?} {same}");
            }
            let app = file(&python, "app.py").unwrap();
            assert!(app.contains("ACTION = \"example.io/count-pvcs\"") && !app.contains("__"));
            let kind_name = kind.names().0.to_uppercase();
            assert!(
                app.contains(&format!("kind=actions.Kind.{kind_name}")),
                "{kind:?}"
            );
            let tests = file(&python, "test_app.py").unwrap();
            assert!(!tests.contains("__TESTS__") && tests.contains("unittest.TestCase"));
            assert!(file(&python, "settings.py").unwrap().contains("def read("));
            // The hooks of other kinds come from one base class, not a copy in each example.
            assert!(app.contains("class Actions(Unimplemented):"), "{kind:?}");
            assert!(!app.contains("does not implement"), "{kind:?}");
            assert!(file(&python, "unimplemented.py")
                .unwrap()
                .contains("class Unimplemented(exports.Actions):"));
            assert!(file(&python, "wit/world.wit")
                .unwrap()
                .contains("world plugin"));
        }
        let refused = render_python("count-pvcs", ActionKind::ItemBlock).unwrap_err();
        assert!(refused.message.contains("backup, restore or delete"));
    }

    #[test]
    fn each_javascript_module_has_its_rust_twins_suite_the_wit_and_the_pinned_tool() {
        let file = |files: &[(String, String)], p: &str| {
            files
                .iter()
                .find(|(path, _)| path == p)
                .map(|(_, t)| t.clone())
        };
        for kind in [ActionKind::Backup, ActionKind::Restore, ActionKind::Delete] {
            let js = render_javascript("count-pvcs", kind)
                .map_err(|f| f.message)
                .unwrap();
            let rust = render("count-pvcs", kind, "velero-wasm-sdk = \"0.1.0\"");
            let subject = format!("tests/fixtures/{}.json", kind.subject());
            for same in [
                "tests/suite.yaml",
                "count-pvcs.toml",
                "tests/fixtures/item.json",
                "tests/fixtures/cluster/objects.yaml",
                &subject,
            ] {
                assert!(file(&js, same).is_some(), "{kind:?} {same}");
                assert_eq!(file(&js, same), file(&rust, same), "{kind:?} {same}");
            }
            for (path, text) in &js {
                assert!(
                    !text.contains("__"),
                    "{kind:?} {path}: a placeholder is left"
                );
            }
            let app = file(&js, "app.js").unwrap();
            assert!(app.contains("export const ACTION = 'example.io/count-pvcs';"));
            assert!(
                app.contains(&format!("kind: '{}'", kind.names().1)),
                "{kind:?}"
            );
            assert!(app.contains("...unimplemented,"), "{kind:?}");
            assert!(file(&js, "app.test.js").unwrap().contains("test('"));
            assert!(file(&js, "settings.js")
                .unwrap()
                .contains("export function read("));
            let package: serde_json::Value =
                serde_json::from_str(&file(&js, "package.json").unwrap()).unwrap();
            assert_eq!(package["name"], "count-pvcs");
            assert_eq!(package["type"], "module");
            assert_eq!(
                package["devDependencies"]["@bytecodealliance/componentize-js"],
                COMPONENTIZE_JS_VERSION
            );
            assert!(file(&js, "wit/world.wit").unwrap().contains("world plugin"));
        }
        let refused = render_javascript("count-pvcs", ActionKind::ItemBlock).unwrap_err();
        assert!(refused
            .message
            .contains("--lang javascript writes a backup, restore or delete"));
    }

    #[test]
    fn names_that_cannot_name_a_module_are_refused_with_the_rule() {
        for bad in ["Label", "label_pvcs", "9lives", "label-", "test", "a b", ""] {
            let failure = crate_name(Path::new(bad)).err();
            assert!(failure.is_some(), "{bad:?} was accepted");
        }
        let failure = crate_name(Path::new("Label")).err().unwrap();
        assert!(failure.message.contains("lower-case letters"));
        assert_eq!(
            crate_name(Path::new("/tmp/x/label-pvcs")).ok().as_deref(),
            Some("label-pvcs")
        );
    }

    #[test]
    fn the_sdk_comes_from_a_git_url_a_directory_made_absolute_or_the_copy_in_the_crate() {
        assert_eq!(
            sdk_dependency(Some("https://github.com/example/velero-wasm.git")).ok(),
            Some(
                "velero-wasm-sdk = { git = \"https://github.com/example/velero-wasm.git\" }".into()
            )
        );
        assert_eq!(
            sdk_dependency(None).ok().as_deref(),
            Some("velero-wasm-sdk = { path = \"vendor/velero-wasm-sdk\" }")
        );
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
        let absolute = std::fs::canonicalize(&sdk).unwrap();
        let expected = format!("velero-wasm-sdk = {{ path = \"{}\" }}", absolute.display());
        assert_eq!(sdk_dependency(sdk.to_str()).ok(), Some(expected.clone()));
        // The checkout's root finds its sdk/.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert_eq!(sdk_dependency(root.to_str()).ok(), Some(expected));
        let host = sdk_dependency(Some(env!("CARGO_MANIFEST_DIR")))
            .err()
            .unwrap();
        assert!(
            host.message.contains("velero-wasm-sdk crate"),
            "{}",
            host.message
        );
    }

    #[test]
    fn an_existing_non_empty_directory_or_a_file_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ensure_empty_or_absent(&dir.path().join("absent")).is_ok());
        assert!(ensure_empty_or_absent(dir.path()).is_ok());
        std::fs::write(dir.path().join("mine.txt"), "keep").unwrap();
        let failure = ensure_empty_or_absent(dir.path()).err().unwrap();
        assert!(failure.message.contains("not empty"));
        let failure = ensure_empty_or_absent(&dir.path().join("mine.txt"))
            .err()
            .unwrap();
        assert!(failure.message.contains("not a directory"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("mine.txt")).unwrap(),
            "keep"
        );
    }
}
