//! A module directory: `<name>.wasm` with `<name>.toml` beside it. A mounted ConfigMap has this shape
//! (its `..data` bookkeeping entries are skipped). A module whose files are unreadable, whose manifest
//! is invalid or whose sha256 does not match is reported and left out; the others load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{sha256_hex, valid_module_name, Manifest, ModuleSource, Origin};

/// What a scan found.
#[derive(Debug, Default)]
pub struct DirectoryScan {
    /// Modules ready to compile.
    pub modules: Vec<ModuleSource>,
    /// Files that could not be used, each with the reason.
    pub problems: Vec<(PathBuf, String)>,
}

/// Reads every module in `dir`. Fails only when the directory itself cannot be read.
pub fn scan_directory(dir: &Path) -> std::io::Result<DirectoryScan> {
    let mut wasm_files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    wasm_files.sort();
    let mut scan = DirectoryScan::default();
    for wasm_path in wasm_files {
        match read_module(&wasm_path) {
            Ok(module) => scan.modules.push(module),
            Err(problem) => scan.problems.push((wasm_path, problem)),
        }
    }
    Ok(scan)
}

fn read_module(wasm_path: &Path) -> Result<ModuleSource, String> {
    let name = wasm_path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("the file name is not UTF-8")?
        .to_string();
    if !valid_module_name(&name) {
        return Err(format!(
            "module name {name:?} must be lower-case letters, digits and '-', starting with a letter"
        ));
    }
    let manifest_path = wasm_path.with_extension("toml");
    let manifest_text = std::fs::read_to_string(&manifest_path).map_err(|e| {
        format!(
            "its manifest {} cannot be read: {e}",
            manifest_path.display()
        )
    })?;
    let manifest =
        Manifest::parse(&manifest_text).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let wasm = std::fs::read(wasm_path).map_err(|e| format!("cannot be read: {e}"))?;
    let sha256 = sha256_hex(&wasm);
    match &manifest.sha256 {
        None => {
            return Err(format!(
                "{} has no sha256: a manifest's grant must be pinned to its module; add the line\n  sha256 = \"{sha256}\"",
                manifest_path.display()
            ))
        }
        Some(expected) if *expected != sha256 => {
            return Err(format!(
                "sha256 mismatch: {} expects {expected}, the file has {sha256} (a partial update, or the wrong file?)",
                manifest_path.display()
            ))
        }
        Some(_) => {}
    }
    Ok(ModuleSource {
        name,
        wasm: Arc::from(wasm),
        sha256,
        manifest,
        origin: Origin::File(wasm_path.to_path_buf()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_need_a_matching_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("good.wasm"), b"abc").unwrap();
        std::fs::write(
            d.join("good.toml"),
            format!("sha256 = \"{}\"", sha256_hex(b"abc")),
        )
        .unwrap();
        std::fs::write(d.join("unpinned.wasm"), b"abc").unwrap();
        std::fs::write(d.join("unpinned.toml"), "").unwrap();
        std::fs::write(d.join("changed.wasm"), b"abcd").unwrap();
        std::fs::write(
            d.join("changed.toml"),
            format!("sha256 = \"{}\"", sha256_hex(b"abc")),
        )
        .unwrap();
        std::fs::write(d.join("lonely.wasm"), b"abc").unwrap();
        std::fs::write(d.join("notes.txt"), b"ignored").unwrap();
        std::fs::create_dir(d.join("..data")).unwrap();

        let scan = scan_directory(d).unwrap();
        let names: Vec<&str> = scan.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        let problems: Vec<String> = scan
            .problems
            .iter()
            .map(|(p, m)| format!("{}: {m}", p.display()))
            .collect();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].contains("changed.wasm") && problems[0].contains("mismatch"));
        assert!(problems[1].contains("lonely.toml") && problems[1].contains("cannot be read"));
        assert!(problems[2].contains("no sha256") && problems[2].contains(&sha256_hex(b"abc")));
    }
}
