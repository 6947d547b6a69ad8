//! Compiled modules on disk, keyed by the module's sha256 and the engine's compatibility hash, so that
//! a new process loads a module by mapping machine code instead of compiling it again.
//!
//! Loading machine code trusts the file: the cache is used only in a directory that this process
//! created or that nobody but its owner can write to.

use std::hash::{Hash, Hasher};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use wasmtime::component::Component;
use wasmtime::Engine;

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

impl CompileCache {
    /// Opens (creating, mode 0700) a cache directory; `None`, with a warning, when it cannot be created
    /// or others can write to it.
    pub fn open(dir: PathBuf) -> Option<CompileCache> {
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
        {
            tracing::warn!(
                "not caching compiled modules: cannot create {}: {e}",
                dir.display()
            );
            return None;
        }
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.permissions().mode() & 0o022 == 0 => Some(CompileCache { dir }),
            Ok(_) => {
                tracing::warn!(
                    "not caching compiled modules: {} is writable by other users",
                    dir.display()
                );
                None
            }
            Err(e) => {
                tracing::warn!("not caching compiled modules: {}: {e}", dir.display());
                None
            }
        }
    }

    fn path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{sha256}-{:016x}.cwasm", hasher.finish()))
    }

    /// The cached compilation of a module, if there is a usable one.
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.path(engine, sha256);
        if !path.exists() {
            return None;
        }
        // SAFETY: the file was written by `store` below into a directory only this user can write to
        // (checked in `open`), under a name that binds it to the module's sha256 and this engine's
        // configuration; wasmtime checks its header and refuses incompatible artifacts.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::debug!("ignoring cached module {}: {e}", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Holds the compile lock of a module until dropped: processes starting at once (Velero starts one
    /// per backup; tests start many) compile a module once, and the others then find it cached.
    pub fn lock(&self, engine: &Engine, sha256: &str) -> Option<std::fs::File> {
        let path = self.path(engine, sha256).with_extension("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?;
        file.lock().ok()?;
        Some(file)
    }

    /// Stores a compilation; failures only cost a later compile, so they are logged and ignored.
    pub fn store(&self, engine: &Engine, sha256: &str, component: &Component) {
        let path = self.path(engine, sha256);
        let written = component
            .serialize()
            .map_err(|e| e.to_string())
            .and_then(|bytes| write_atomically(&path, &bytes).map_err(|e| e.to_string()));
        if let Err(e) = written {
            tracing::debug!("cannot cache compiled module in {}: {e}", path.display());
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
