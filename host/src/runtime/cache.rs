//! Compiled modules on disk, keyed by the module's sha256 and the engine's compatibility hash, so that
//! a new process loads a module by mapping machine code instead of compiling it again; and beside them
//! what each module said of its actions when it was described, keyed by its bytes, its manifest and
//! this host's version, so that a new process can put a module in service before it maps its code.
//!
//! Loading machine code trusts the file, so:
//! * the cache is used only in a [private](crate::state::private_dir) directory (this user's, not
//!   writable by others), and
//! * each entry ends with the sha256 of the artifact before it, checked on every load against the
//!   bytes that are then deserialized: an entry damaged on disk (same length, other bytes: the kind of
//!   damage wasmtime's header check does not see, and that would run as broken machine code) is
//!   deleted with a warning and the module compiled again.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

/// What an entry ends with, after the artifact's digest: names the entry format, so that an entry of
/// another format is never read as this one.
const TRAILER: &[u8; 8] = b"vwcwasm1";
const DIGEST: usize = 32;

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

impl CompileCache {
    /// Opens (creating, mode 0700) a cache directory; `None`, with a warning, when it cannot be
    /// created, or when it or its parent (the state directory) belongs to another user or others can
    /// write to it.
    pub fn open(dir: PathBuf) -> Option<CompileCache> {
        let root = dir.parent().unwrap_or(&dir).to_path_buf();
        match crate::state::private_dir(&root, &dir) {
            Ok(()) => Some(CompileCache { dir }),
            Err(why) => {
                tracing::warn!("not caching compiled modules (compiling them in memory): {why}");
                None
            }
        }
    }

    fn path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        TRAILER.hash(&mut hasher);
        self.dir
            .join(format!("{sha256}-{:016x}.cwasm", hasher.finish()))
    }

    /// The cached compilation of a module, if there is a usable one, mapped from its file (its
    /// machine code is then file-backed pages the kernel may drop and read again, not a copy in the
    /// process's heap: ten interpreter modules of 37 MB of code each held 370 MiB that way). A damaged
    /// entry is deleted.
    #[allow(unsafe_code)] // Mapping compiled code: see the SAFETY comment below.
    pub(crate) fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.path(engine, sha256);
        let started = std::time::Instant::now();
        let length = match verify_file(&path) {
            Ok(Some(length)) => length,
            Ok(None) => {
                tracing::warn!(
                    "the cached compilation {} is damaged (its sha256 does not match): deleting it and compiling the module again",
                    path.display()
                );
                let _ = std::fs::remove_file(&path);
                return None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::debug!("cannot read cached module {}: {e}", path.display());
                return None;
            }
        };
        let verified_in = started.elapsed();
        // SAFETY: these are the bytes `compile` wrote (their sha256, read just now, matches the one
        // stored with them) into a directory only this user can write to (checked in `open`), under
        // a name that binds them to the module's sha256 and this engine's configuration; entries are
        // replaced by renaming a new file over them, never written in place, so the mapped file does
        // not change under the module. wasmtime checks the header and refuses artifacts of another
        // engine version or configuration; the digest and trailer after the artifact are past the
        // end of the ELF image it reads.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => {
                tracing::debug!(
                    bytes = length,
                    verify_us = verified_in.as_micros() as u64,
                    total_us = started.elapsed().as_micros() as u64,
                    "compiled module {sha256} mapped from the cache"
                );
                Some(component)
            }
            Err(e) => {
                tracing::debug!("ignoring cached module {}: {e}", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Compiles `wasm` into the cache and maps the entry written ([`Self::load`]), so that the
    /// module's machine code is never held twice (the compiled object and a copy of it to write);
    /// where the entry cannot be written or mapped, the compilation is used from memory.
    #[allow(unsafe_code)] // Deserializing what was compiled just now: see the SAFETY comment below.
    pub(crate) fn compile(
        &self,
        engine: &Engine,
        sha256: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<Component> {
        let path = self.path(engine, sha256);
        let sealed = sealed(engine.precompile_component(wasm)?);
        if let Err(e) = crate::state::write_atomically(&path, &sealed) {
            tracing::debug!("cannot cache compiled module in {}: {e}", path.display());
        } else if let Some(component) = self.load(engine, sha256) {
            return Ok(component);
        }
        let artifact = &sealed[..sealed.len() - DIGEST - TRAILER.len()];
        // SAFETY: `artifact` is what this engine's precompile_component produced just now.
        unsafe { Component::deserialize(engine, artifact) }
    }

    /// Holds the compile lock of a module until dropped: processes starting at once (Velero starts one
    /// per backup; tests start many) compile a module once, and the others then find it cached.
    pub(crate) fn lock(&self, engine: &Engine, sha256: &str) -> Option<std::fs::File> {
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
}

/// Which of `actions` and `signing` a module exports: known before it is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Interfaces {
    pub(crate) actions: bool,
    pub(crate) signing: bool,
}

/// What a module said of itself when it was loaded: its interfaces and its actions.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Description {
    pub(crate) interfaces: Interfaces,
    pub(crate) actions: Vec<crate::action::ActionInfo>,
}

impl CompileCache {
    /// The description of a module loaded before, if one is kept and whole.
    pub(super) fn description(&self, key: &str) -> Option<Description> {
        let entry = std::fs::read(self.dir.join(format!("{key}.described"))).ok()?;
        serde_json::from_slice(verified(&entry)?).ok()
    }

    /// Keeps a module's description; failures only cost a later compile, so they are ignored.
    pub(super) fn store_description(&self, key: &str, description: &Description) {
        let path = self.dir.join(format!("{key}.described"));
        let written = serde_json::to_vec(description)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::state::write_atomically(&path, &sealed(bytes)).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::debug!(
                "cannot keep the description of a module in {}: {e}",
                path.display()
            );
        }
    }
}

/// The key of a module's description: what `describe` can depend on (the module's bytes, its manifest
/// as parsed, which holds the settings and grant it runs with) and what turns its answer into the
/// host's (this host's version and the WIT package).
pub(super) fn description_key(source: &crate::modules::ModuleSource) -> String {
    let mut hasher = Sha256::new();
    for part in [
        "velero-wasm module description 1",
        env!("CARGO_PKG_VERSION"),
        env!("VELERO_WASM_WIT_PACKAGE"),
        &source.name,
        &source.sha256,
        &source.manifest_text,
        &format!("{:?}", source.manifest),
    ] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An artifact as stored: its bytes, their sha256, the trailer.
fn sealed(mut artifact: Vec<u8>) -> Vec<u8> {
    artifact.reserve_exact(DIGEST + TRAILER.len());
    let digest = Sha256::digest(&artifact);
    artifact.extend_from_slice(&digest);
    artifact.extend_from_slice(TRAILER);
    artifact
}

/// The length of the entry at `path`, if its artifact's sha256 is the one stored after it (read in
/// blocks: the artifact is not held in memory to be checked); `None` when it is damaged.
fn verify_file(path: &std::path::Path) -> std::io::Result<Option<u64>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let length = file.metadata()?.len();
    let Some(artifact) = length.checked_sub((DIGEST + TRAILER.len()) as u64) else {
        return Ok(None);
    };
    let mut hasher = Sha256::new();
    std::io::copy(&mut (&mut file).take(artifact), &mut hasher)?;
    let mut tail = [0u8; DIGEST + TRAILER.len()];
    file.seek(SeekFrom::Start(artifact))?;
    file.read_exact(&mut tail)?;
    let whole = tail[..DIGEST] == hasher.finalize()[..] && &tail[DIGEST..] == TRAILER;
    Ok(whole.then_some(length))
}

/// The artifact of a stored entry, if the entry is whole and its bytes are the ones digested.
fn verified(entry: &[u8]) -> Option<&[u8]> {
    let body = entry.strip_suffix(TRAILER.as_slice())?;
    let split = body.len().checked_sub(DIGEST)?;
    let (artifact, digest) = body.split_at(split);
    (Sha256::digest(artifact).as_slice() == digest).then_some(artifact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_verified_against_its_digest() {
        let entry = sealed(b"machine code".to_vec());
        assert_eq!(verified(&entry), Some(&b"machine code"[..]));
        let mut flipped = entry.clone();
        flipped[3] ^= 0xff;
        assert_eq!(verified(&flipped), None, "same length, other bytes");
        assert_eq!(verified(&entry[1..]), None, "truncated at the front");
        assert_eq!(verified(&entry[..entry.len() - 1]), None, "truncated");
        assert_eq!(verified(b"vwcwasm1"), None, "too short");
        assert_eq!(verified(b""), None);
    }

    fn source(wasm: &[u8], manifest: &str) -> crate::modules::ModuleSource {
        crate::modules::ModuleSource::new(
            "m",
            wasm.to_vec(),
            manifest,
            crate::modules::Origin::File("m.wasm".into()),
        )
        .unwrap()
    }

    #[test]
    fn a_description_is_keyed_by_what_describe_can_see() {
        let key = description_key(&source(b"one", ""));
        assert_eq!(key, description_key(&source(b"one", "")));
        assert_ne!(key, description_key(&source(b"two", "")), "other bytes");
        let settings = "[settings]\nmode = \"upstream\"\n";
        assert_ne!(
            key,
            description_key(&source(b"one", settings)),
            "other settings"
        );
    }

    #[test]
    fn a_damaged_description_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache {
            dir: dir.path().to_path_buf(),
        };
        let description = Description {
            interfaces: Interfaces {
                actions: true,
                signing: false,
            },
            actions: Vec::new(),
        };
        cache.store_description("k", &description);
        let kept = cache.description("k").unwrap();
        assert_eq!(kept.interfaces, description.interfaces);
        let path = dir.path().join("k.described");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[2] ^= 0x20;
        std::fs::write(&path, bytes).unwrap();
        assert!(cache.description("k").is_none());
    }
}
