//! The last good version of each module from the module directory, kept in a state directory so that
//! a broken update (a truncated ConfigMap, a module that no longer loads) falls back to the version
//! that last loaded, in this process and in the plugin processes Velero starts after it.
//!
//! A copy comes with its manifest, and so its grant: copies are kept and recalled only in a
//! [private](crate::state::private_dir) directory, or not at all.

use std::io;
use std::path::{Path, PathBuf};

use super::{read_module, ModuleSource};

/// A directory of modules that loaded successfully, by name.
#[derive(Debug, Clone)]
pub struct LastGood {
    /// The directory that must be private from here down to `dir`.
    root: PathBuf,
    dir: PathBuf,
}

impl LastGood {
    /// A store in `dir` (created when first needed; it and its parent must be private).
    pub fn at(dir: impl Into<PathBuf>) -> LastGood {
        let dir = dir.into();
        LastGood {
            root: dir.parent().unwrap_or(&dir).to_path_buf(),
            dir,
        }
    }

    /// The store for the modules of `module_dir`, under `state_dir`: each module directory (a mounted
    /// ConfigMap) has its own, so that two directories never stand in for each other.
    pub fn for_directory(state_dir: &Path, module_dir: &Path) -> LastGood {
        let canonical =
            std::fs::canonicalize(module_dir).unwrap_or_else(|_| module_dir.to_path_buf());
        let key = super::sha256_hex(canonical.as_os_str().as_encoded_bytes());
        LastGood {
            root: state_dir.to_path_buf(),
            dir: state_dir.join("last-good").join(&key[..16]),
        }
    }

    /// Where the store lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the store, or says why it cannot be used: it cannot be created, or it (or a directory
    /// above it, up to the state directory) belongs to another user or others can write to it.
    pub fn open(&self) -> Result<(), String> {
        crate::state::private_dir(&self.root, &self.dir)
    }

    /// Keeps a copy of a module that loaded. Each file is replaced atomically.
    pub fn remember(&self, module: &ModuleSource) -> io::Result<()> {
        self.open().map_err(io::Error::other)?;
        write_atomically(
            &self.dir.join(format!("{}.toml", module.name)),
            module.manifest_text.as_bytes(),
        )?;
        write_atomically(
            &self.dir.join(format!("{}.wasm", module.name)),
            &module.wasm,
        )
    }

    /// The remembered version of a module, if there is one and it is intact.
    pub fn recall(&self, name: &str) -> Result<ModuleSource, String> {
        self.open()
            .map_err(|why| format!("no earlier version of module {name} can be trusted: {why}"))?;
        let path = self.dir.join(format!("{name}.wasm"));
        if !path.exists() {
            return Err(format!(
                "no earlier version of module {name} was remembered"
            ));
        }
        read_module(&path)
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::sha256_hex;

    #[test]
    fn remembers_and_recalls_a_module() {
        let (source, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let wasm = source.path().join("m.wasm");
        std::fs::write(&wasm, b"bytes").unwrap();
        std::fs::write(
            source.path().join("m.toml"),
            format!("sha256 = \"{}\"", sha256_hex(b"bytes")),
        )
        .unwrap();
        let module = read_module(&wasm).unwrap();
        let store = LastGood::at(state.path().join("last-good"));
        assert!(store.recall("m").is_err());
        store.remember(&module).unwrap();
        let recalled = store.recall("m").unwrap();
        assert_eq!(&*recalled.wasm, b"bytes");
        assert_eq!(recalled.sha256, module.sha256);
    }
}
