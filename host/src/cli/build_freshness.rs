//! Whether a crate's `module/` is its latest build: `test` refuses to run a suite against a module
//! its sources have moved past, so that a failed `build` (which leaves `module/` as it was) or an
//! edit not built yet cannot pass as green.
//!
//! Two checks, each cheap: the crate's manifest must equal the one in `module/` (`build` pins the
//! component's sha256 into the crate's manifest even when it then refuses to place the module), and
//! no source file (`Cargo.toml`, `src/**`, a Python module's `*.py`, a JavaScript module's `*.js`) may
//! be newer than the component.
//!
//! `run`, `bench`, `module pack` and `module push` refuse such a `module/` the same way (exit 2, the
//! same message), unless `--allow-stale` ([`StaleArgs`]) says the author means it: packing or running
//! the last build while believing the edit is in it is how an old version gets signed and served.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::failure::Failure;

/// `--allow-stale`, the one definition `run`, `bench`, `module pack` and `module push` share.
#[derive(Debug, Default, Clone, clap::Args)]
pub(crate) struct StaleArgs {
    /// Use a crate's module/ even when its sources or manifest changed after it was built (by
    /// default that is refused, as `test` refuses it: run `velero-wasm build` first).
    #[arg(long)]
    pub(crate) allow_stale: bool,
}

impl StaleArgs {
    /// Refuses (bad input) a crate's `module/` that is not its latest build, unless `--allow-stale`.
    /// `path` is a module directory, or a file in one (`module/<name>.wasm` or `.toml`).
    pub(crate) fn check(&self, path: &Path) -> Result<(), Failure> {
        if self.allow_stale {
            return Ok(());
        }
        let dir = match path.is_dir() {
            true => path,
            false => match path.extension().and_then(|e| e.to_str()) {
                Some("wasm" | "toml" | "gz") => path.parent().unwrap_or(Path::new("")),
                _ => return Ok(()),
            },
        };
        match stale_reason(dir) {
            None => Ok(()),
            Some(reason) => Err(Failure::bad_input(format!(
                "{reason}; --allow-stale uses it as it is"
            ))),
        }
    }
}

/// Why `module_dir` is not the latest build of the crate around it; `None` when it is, or when it is
/// not a crate's `module/` (a directory of modules given by hand is the author's to keep).
pub(crate) fn stale_reason(module_dir: &Path) -> Option<String> {
    if module_dir.file_name()? != "module" {
        return None;
    }
    let krate = module_dir.parent()?;
    let is_crate = ["Cargo.toml", "app.py", "app.js"]
        .iter()
        .any(|source| krate.join(source).is_file());
    if !is_crate {
        return None;
    }
    let built = built_components(module_dir);
    let rebuild = format!(
        "run `velero-wasm build` in {} first (a build that fails leaves module/ as it was)",
        krate.display()
    );
    for (wasm, wasm_time) in &built {
        let name = wasm.file_stem()?.to_string_lossy().into_owned();
        let source_manifest = krate.join(format!("{name}.toml"));
        let placed_manifest = module_dir.join(format!("{name}.toml"));
        if let (Ok(source), Ok(placed)) = (
            std::fs::read(&source_manifest),
            std::fs::read(&placed_manifest),
        ) {
            if source != placed {
                return Some(format!(
                    "{} is not the latest build: {} differs from {}; {rebuild}",
                    module_dir.display(),
                    source_manifest.display(),
                    placed_manifest.display()
                ));
            }
        }
        if let Some(newer) = newest_source_after(krate, *wasm_time) {
            return Some(format!(
                "{} is not the latest build: {} changed after {} was built; {rebuild}",
                module_dir.display(),
                newer.display(),
                wasm.display()
            ));
        }
    }
    None
}

/// The components in `module_dir` with their modification times.
fn built_components(module_dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let Ok(entries) = std::fs::read_dir(module_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "wasm"))
        .filter_map(|path| {
            let time = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
            Some((path, time))
        })
        .collect()
}

/// A source of the crate at `krate` modified after `than`, if there is one.
fn newest_source_after(krate: &Path, than: SystemTime) -> Option<PathBuf> {
    let mut sources = vec![krate.join("Cargo.toml")];
    let mut pending = vec![krate.join("src")];
    // A Python or JavaScript module's sources sit at the top of its directory, beside its unit tests
    // (`test_*.py`, `*.test.js`, which the component does not need).
    if let Ok(entries) = std::fs::read_dir(krate) {
        sources.extend(
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|e| e == "py" || e == "js"))
                .filter(|path| {
                    !path.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("test_") || n.ends_with(".test.js")
                    })
                }),
        );
    }
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|entry| entry.path()) {
            match path.is_dir() {
                true => pending.push(path),
                false => sources.push(path),
            }
        }
    }
    sources.into_iter().find(|path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|time| time > than)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A crate with `src/lib.rs`, a manifest, and a `module/` built from them.
    fn built_crate() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("module")).unwrap();
        std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
        std::fs::write(root.join("src/lib.rs"), "// source\n").unwrap();
        std::fs::write(root.join("a.toml"), "sha256 = \"1\"\n").unwrap();
        std::fs::write(root.join("module/a.toml"), "sha256 = \"1\"\n").unwrap();
        let wasm = root.join("module/a.wasm");
        std::fs::write(&wasm, b"\0asm").unwrap();
        // The component is the newest file, as `build` leaves it.
        let later = SystemTime::now() + Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&wasm)
            .unwrap()
            .set_modified(later)
            .unwrap();
        dir
    }

    #[test]
    fn a_fresh_build_is_not_stale() {
        let dir = built_crate();
        assert_eq!(stale_reason(&dir.path().join("module")), None);
    }

    #[test]
    fn a_manifest_pinned_by_a_failed_build_makes_module_stale() {
        let dir = built_crate();
        std::fs::write(dir.path().join("a.toml"), "sha256 = \"2\"\n").unwrap();
        let reason = stale_reason(&dir.path().join("module")).expect("stale");
        assert!(reason.contains("a.toml differs from"), "{reason}");
        assert!(reason.contains("run `velero-wasm build` in"), "{reason}");
    }

    #[test]
    fn a_source_edited_after_the_build_makes_module_stale() {
        let dir = built_crate();
        let lib = dir.path().join("src/lib.rs");
        std::fs::File::options()
            .write(true)
            .open(&lib)
            .unwrap()
            .set_modified(SystemTime::now() + Duration::from_secs(120))
            .unwrap();
        let reason = stale_reason(&dir.path().join("module")).expect("stale");
        assert!(reason.contains("src/lib.rs changed after"), "{reason}");
    }

    #[test]
    fn a_javascript_modules_source_edited_after_the_build_makes_module_stale_but_not_its_tests() {
        let dir = built_crate();
        let root = dir.path();
        std::fs::remove_file(root.join("Cargo.toml")).unwrap();
        let later = SystemTime::now() + Duration::from_secs(120);
        for file in ["app.js", "app.test.js"] {
            std::fs::write(root.join(file), "// source\n").unwrap();
        }
        std::fs::File::options()
            .write(true)
            .open(root.join("app.test.js"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(stale_reason(&root.join("module")), None);
        std::fs::File::options()
            .write(true)
            .open(root.join("app.js"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        let reason = stale_reason(&root.join("module")).expect("stale");
        assert!(reason.contains("app.js changed after"), "{reason}");
    }

    #[test]
    fn a_directory_of_modules_that_is_no_crates_module_is_never_stale() {
        let dir = built_crate();
        let elsewhere = dir.path().join("mods");
        std::fs::rename(dir.path().join("module"), &elsewhere).unwrap();
        assert_eq!(stale_reason(&elsewhere), None);
    }
}
