//! `velero-wasm build [DIR]`: builds the crate in DIR as a component (`cargo build --target
//! wasm32-wasip2 --release`; a Python module, app.py without Cargo.toml, with componentize-py; a
//! JavaScript module, app.js without either, with componentize-js), writes the component's sha256 into the manifest beside it
//! (`<package>.toml` in DIR) without touching the rest of the file, then loads it as `run` would and
//! checks what its actions say they need against the manifest's grant. When the grant covers them, the
//! component and its manifest are laid out as a module directory, `DIR/module/` (what `run --modules`,
//! `test` and `module pack` take); when not, `build` exits 1 and leaves `module/` as it was.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::failure::{Failure, EXIT_FAILED, EXIT_OK};
use crate::capabilities::{Clock, Environment, Services};
use crate::cluster::NoCluster;
use crate::config::Config;
use crate::modules::{sha256_hex, Manifest, ModuleSource, Origin};
use crate::runtime::Runtime;

/// The target components are built for.
const TARGET: &str = "wasm32-wasip2";

/// Arguments of `build`.
#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// The crate to build (a directory with a Cargo.toml whose lib is a `cdylib`); its manifest is
    /// `<package name>.toml` beside Cargo.toml.
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

/// Runs the command; returns the exit status.
pub(crate) async fn build(args: BuildArgs, config: &Config) -> u8 {
    match build_and_check(&args.dir, config).await {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("velero-wasm build: {}", failure.message);
            failure.code
        }
    }
}

async fn build_and_check(dir: &Path, config: &Config) -> Result<u8, Failure> {
    let language = Language::of(dir);
    let package = match language {
        Language::Rust => package_name(dir)?,
        Language::Python => source_module_name(dir, "app.py")?,
        Language::JavaScript => source_module_name(dir, "app.js")?,
    };
    let manifest_path = dir.join(format!("{package}.toml"));
    let wasm_path = match language {
        Language::Rust => cargo_build(dir, config)?,
        Language::Python => componentize_py(dir, &package, config)?,
        Language::JavaScript => componentize_js(dir, &package, config)?,
    };
    let wasm = std::fs::read(&wasm_path)
        .map_err(|e| Failure::failed(format!("{}: {e}", wasm_path.display())))?;
    let sha256 = sha256_hex(&wasm);
    let manifest_text = pin_sha256(&manifest_path, &sha256)?;

    let source = ModuleSource::new(
        &package,
        wasm.clone(),
        &manifest_text,
        Origin::File(wasm_path.clone()),
    )
    .map_err(|e| Failure::bad_input(format!("{}: {e}", manifest_path.display())))?;
    let services = Services::new(
        Arc::new(NoCluster::default()),
        Clock::System,
        Environment::from_config(config),
    );
    let runtime = Runtime::new(services)
        .map_err(|e| Failure::failed(format!("{e:#}")))?
        .with_compile_budget(crate::runtime::CompileBudget::from_config(config));
    let loaded = runtime
        .load(source)
        .await
        .map_err(|e| Failure::failed(format!("the component does not load: {e}")))?;
    for warning in loaded.warnings.iter().chain(&loaded.deprecations) {
        eprintln!("velero-wasm build: {warning}");
    }
    // module/ is what `test`, `run` and `module pack` take: it gets only a module whose grant covers
    // what its actions need.
    let clean = loaded.warnings.is_empty() && loaded.deprecations.is_empty();
    let placed = match clean {
        true => {
            let module_dir = write_module_dir(dir, &package, &wasm, &manifest_text)?;
            format!("module in {}", module_dir.display())
        }
        false => format!(
            "{} left as it was: fix the grant in {} (or the action's needs) and build again",
            dir.join("module").display(),
            manifest_path.display()
        ),
    };
    eprintln!(
        "velero-wasm build: {} ({} bytes), sha256 {sha256} in {}, {placed}",
        wasm_path.display(),
        wasm.len(),
        manifest_path.display(),
    );
    let catalog = runtime.catalog();
    // One column of names, so that the kinds of a module's several actions line up.
    let width = catalog
        .actions()
        .map(|entry| entry.info().name.chars().count())
        .max()
        .unwrap_or(0);
    for entry in catalog.actions() {
        println!("{:width$}  {}", entry.info().name, entry.info().kind);
    }
    Ok(if clean { EXIT_OK } else { EXIT_FAILED })
}

/// The language of the module in a directory, which says how to build it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    /// A crate: Cargo.toml.
    Rust,
    /// `new --lang python`: app.py and no Cargo.toml.
    Python,
    /// `new --lang javascript`: app.js and neither Cargo.toml nor app.py.
    JavaScript,
}

impl Language {
    fn of(dir: &Path) -> Language {
        if dir.join("Cargo.toml").exists() {
            Language::Rust
        } else if dir.join("app.py").exists() {
            Language::Python
        } else if dir.join("app.js").exists() {
            Language::JavaScript
        } else {
            // Cargo's error (no Cargo.toml) is the one to show.
            Language::Rust
        }
    }
}

/// The package name in `dir/Cargo.toml`.
fn package_name(dir: &Path) -> Result<String, Failure> {
    let path = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
    let cargo: toml::Table = text
        .parse()
        .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
    cargo
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .ok_or_else(|| Failure::bad_input(format!("{}: no [package] name", path.display())))
}

/// A Python or JavaScript module's name: its directory's (as `new --lang` named it), which its
/// manifest `<name>.toml` beside `source` (app.py, app.js) confirms.
fn source_module_name(dir: &Path, source: &str) -> Result<String, Failure> {
    let absolute = std::fs::canonicalize(dir)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", dir.display())))?;
    let name = absolute
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    if !dir.join(format!("{name}.toml")).exists() {
        return Err(Failure::bad_input(format!(
            "{}: the module's manifest is <directory name>.toml beside {source}, and there is no {name}.toml",
            dir.display()
        )));
    }
    Ok(name)
}

/// Builds the Python module in `dir` (app.py, against the WIT in `dir/wit`) with componentize-py
/// (`COMPONENTIZE_PY`, or on PATH) into `dir/target/<name>.wasm`, and returns that path.
fn componentize_py(dir: &Path, name: &str, config: &Config) -> Result<PathBuf, Failure> {
    let tool = PathBuf::from(
        config
            .componentize_py()
            .unwrap_or("componentize-py".as_ref()),
    );
    let tool = Builder {
        name: "componentize-py",
        source: "app.py",
        takes: "a minute or so: it snapshots an interpreter",
        install: "install it with `pip install componentize-py==0.25.1` (or name it with COMPONENTIZE_PY)"
            .to_string(),
        tool,
    };
    tool.run(
        dir,
        name,
        &["-d", "wit", "-w", "plugin", "componentize", "app", "-o"],
    )
}

/// Builds the JavaScript module in `dir` (app.js, an ES module, against the WIT in `dir/wit`) with
/// componentize-js into `dir/target/<name>.wasm`, and returns that path. The tool is the executable
/// `COMPONENTIZE_JS` names, else the module's own (`npm install` puts the version package.json pins in
/// node_modules/.bin), else `componentize-js` on PATH.
fn componentize_js(dir: &Path, name: &str, config: &Config) -> Result<PathBuf, Failure> {
    let local = dir.join("node_modules/.bin/componentize-js");
    let tool = match config.componentize_js() {
        Some(tool) => PathBuf::from(tool),
        // Absolute: the command runs in `dir`.
        None if local.exists() => std::path::absolute(&local)
            .map_err(|e| Failure::failed(format!("{}: {e}", local.display())))?,
        None => PathBuf::from("componentize-js"),
    };
    let tool = Builder {
        name: "componentize-js",
        source: "app.js",
        takes: "some seconds: it snapshots a JavaScript engine",
        install: format!(
            "install it with `npm install` in {} (package.json pins it), or \
             `npm install @bytecodealliance/componentize-js@{}` and name it with COMPONENTIZE_JS",
            dir.display(),
            super::new::COMPONENTIZE_JS_VERSION
        ),
        tool,
    };
    // Without WASI's http and fetch-event: the host offers HTTP through velero-wasm:plugin/http only,
    // and a component importing wasi:http would not load.
    tool.run(
        dir,
        name,
        &[
            "app.js",
            "--wit",
            "wit",
            "--world-name",
            "plugin",
            "--disable",
            "http",
            "fetch-event",
            "--out",
        ],
    )
}

/// A tool that turns a module's source into a component (componentize-py, componentize-js).
struct Builder {
    /// Its name, for messages.
    name: &'static str,
    /// The source file it reads, for the first message.
    source: &'static str,
    /// How long it takes, for the first message.
    takes: &'static str,
    /// How to install it, for the error when it cannot be run.
    install: String,
    /// The executable.
    tool: PathBuf,
}

impl Builder {
    /// Runs the tool in `dir` with `args` and then `target/<name>.wasm` (where it writes the
    /// component), its own messages on stderr, saying when it starts and how long it took; returns
    /// the component's path.
    fn run(&self, dir: &Path, name: &str, args: &[&str]) -> Result<PathBuf, Failure> {
        std::fs::create_dir_all(dir.join("target"))
            .map_err(|e| Failure::failed(format!("{}: {e}", dir.join("target").display())))?;
        eprintln!(
            "velero-wasm build: {}: {} against wit/ ({})",
            self.name, self.source, self.takes
        );
        let started = Instant::now();
        let mut child = Command::new(&self.tool)
            .current_dir(dir)
            .args(args)
            .arg(format!("target/{name}.wasm"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                Failure::failed(format!(
                    "cannot run {}: {e}; {}",
                    self.tool.display(),
                    self.install
                ))
            })?;
        // The tools print nothing of their own while they snapshot an engine (up to a minute or so):
        // a person at a terminal hears every so often that the build still runs.
        let every = std::io::stderr()
            .is_terminal()
            .then_some(super::compile_progress::EVERY);
        let status = wait_saying_so(&mut child, every, |secs| {
            eprintln!("velero-wasm build: still running {} ({secs} s)", self.name)
        })
        .map_err(|e| Failure::failed(format!("waiting for {}: {e}", self.name)))?;
        if !status.success() {
            return Err(Failure::failed(format!(
                "{} failed ({status}): its messages are above",
                self.name
            )));
        }
        eprintln!(
            "velero-wasm build: {} done in {:.0} s",
            self.name,
            started.elapsed().as_secs_f64()
        );
        Ok(dir.join("target").join(format!("{name}.wasm")))
    }
}

/// Waits for `child`; when `every` is given, calls `say` with the seconds elapsed each time that much
/// more time has passed.
fn wait_saying_so(
    child: &mut Child,
    every: Option<Duration>,
    say: impl Fn(u64),
) -> std::io::Result<ExitStatus> {
    let Some(every) = every else {
        return child.wait();
    };
    let started = Instant::now();
    let mut next = every;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            // Not left running unwatched.
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
        if started.elapsed() >= next {
            say(started.elapsed().as_secs());
            next += every;
        }
        std::thread::sleep(Duration::from_millis(100).min(every));
    }
}

/// Builds the crate in `dir` for [`TARGET`] (release) and returns the path of its component. Cargo's
/// own messages go to stderr as it writes them.
fn cargo_build(dir: &Path, config: &Config) -> Result<PathBuf, Failure> {
    let cargo = config.cargo().unwrap_or("cargo".as_ref());
    let output = Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--target", TARGET, "--release", "--lib"])
        .arg("--message-format=json-render-diagnostics")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure::failed(format!("cannot run cargo: {e}")))?;
    if !output.status.success() {
        return Err(Failure::failed(format!(
            "cargo build --target {TARGET} --release failed ({}); is the target installed? `rustup target add {TARGET}`",
            output.status
        )));
    }
    let manifest = std::fs::canonicalize(dir.join("Cargo.toml"))
        .map_err(|e| Failure::bad_input(format!("{}: {e}", dir.display())))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| m["manifest_path"].as_str().map(Path::new) == Some(manifest.as_path()))
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| f.extension().is_some_and(|e| e == "wasm"))
        .ok_or_else(|| {
            Failure::bad_input(format!(
                "{}: the build made no .wasm: the lib needs crate-type = [\"cdylib\", \"rlib\"]",
                manifest.display()
            ))
        })
}

/// Writes `sha256` into the manifest at `path` (created when missing), changing nothing else: the
/// `sha256 = "…"` line is replaced in place with its comment kept, or added at the top. The result must
/// still be a valid manifest, or nothing is written. Returns the manifest text.
fn pin_sha256(path: &Path, sha256: &str) -> Result<String, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Failure::bad_input(format!("{}: {e}", path.display()))),
    };
    let updated = with_sha256(&text, sha256)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
    Manifest::parse(&updated)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
    if updated != text {
        super::output_file::replace(path, updated.as_bytes()).map_err(Failure::failed)?;
    }
    Ok(updated)
}

/// Writes `DIR/module/<package>.wasm` and `.toml` (each replaced by a rename, never half written):
/// the crate's module directory. Returns its path.
fn write_module_dir(
    dir: &Path,
    package: &str,
    wasm: &[u8],
    manifest: &str,
) -> Result<PathBuf, Failure> {
    let module_dir = dir.join("module");
    std::fs::create_dir_all(&module_dir)
        .map_err(|e| Failure::failed(format!("{}: {e}", module_dir.display())))?;
    let write = |name: String, bytes: &[u8]| {
        super::output_file::replace(&module_dir.join(name), bytes).map_err(Failure::failed)
    };
    write(format!("{package}.wasm"), wasm)?;
    write(format!("{package}.toml"), manifest.as_bytes())?;
    Ok(module_dir)
}

/// `text` with its top-level `sha256` set to `sha256`, formatting and comments kept.
fn with_sha256(text: &str, sha256: &str) -> Result<String, toml_edit::TomlError> {
    let mut doc: toml_edit::DocumentMut = text.parse()?;
    match doc
        .get_mut("sha256")
        .and_then(toml_edit::Item::as_value_mut)
    {
        Some(value) => {
            let decor = value.decor().clone();
            *value = toml_edit::Value::from(sha256);
            *value.decor_mut() = decor;
        }
        None => {
            let mut table = toml_edit::DocumentMut::new();
            table["sha256"] = toml_edit::value(sha256);
            // At the top, before the tables, where people look for it.
            return Ok(format!("{table}{text}"));
        }
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "1111111111111111111111111111111111111111111111111111111111111111";

    #[test]
    fn the_sha256_line_changes_and_nothing_else() {
        let text = "# label-pvcs\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"   # pinned\ndescription = \"x\"\n\n[[grant.kube]]  # PVCs\nresources = [\"persistentvolumeclaims\"]\nverbs = [\"list\"]\nnamespaces = [\"@item\"]\n";
        let updated = with_sha256(text, SHA).unwrap();
        assert_eq!(updated, text.replace(&"0".repeat(64), SHA));
    }

    #[test]
    fn a_manifest_without_sha256_gets_it_at_the_top() {
        let text =
            "[[grant.kube]]\nresources = [\"pods\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n";
        let updated = with_sha256(text, SHA).unwrap();
        assert_eq!(updated, format!("sha256 = \"{SHA}\"\n{text}"));
        Manifest::parse(&updated).unwrap();
        assert_eq!(
            with_sha256("", SHA).unwrap(),
            format!("sha256 = \"{SHA}\"\n")
        );
        assert!(with_sha256("[grant", SHA).is_err());
    }

    #[test]
    fn a_long_build_is_mentioned_while_it_runs_and_a_short_one_never() {
        use std::sync::Mutex;
        let said = Mutex::new(Vec::new());
        let mut child = Command::new("sleep").arg("1").spawn().unwrap();
        let status = wait_saying_so(&mut child, Some(Duration::from_millis(100)), |secs| {
            said.lock().unwrap().push(secs)
        })
        .unwrap();
        assert!(status.success());
        let times = said.lock().unwrap().len();
        assert!(times >= 2, "mentioned {times} times in 1 s, every 0.1 s");

        let mut child = Command::new("true").spawn().unwrap();
        let status = wait_saying_so(&mut child, Some(Duration::from_secs(15)), |_| {
            panic!("a build that ends at once is not mentioned")
        })
        .unwrap();
        assert!(status.success());
        let mut child = Command::new("false").spawn().unwrap();
        assert!(!wait_saying_so(&mut child, None, |_| unreachable!())
            .unwrap()
            .success());
    }
}
