//! The last good version of each module from the module directory, kept in a state directory so that
//! a broken update (a truncated ConfigMap, a module that no longer loads) falls back to the version
//! that last loaded, in this process and in the plugin processes Velero starts after it.
//!
//! A copy comes with its manifest, and so its grant: copies are kept and recalled only in a
//! [private](crate::state::private_dir) directory, or not at all.

use std::io;
use std::path::{Path, PathBuf};

use super::directory::{read_module, ReadError};
use super::identity::sha256_hex;
use super::signature::TrustedKeys;
use super::source::{ModuleSource, Origin};
use crate::state::PrivateDirError;

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
    pub(crate) fn for_directory(state_dir: &Path, module_dir: &Path) -> LastGood {
        let canonical =
            std::fs::canonicalize(module_dir).unwrap_or_else(|_| module_dir.to_path_buf());
        let key = sha256_hex(canonical.as_os_str().as_encoded_bytes());
        LastGood {
            root: state_dir.to_path_buf(),
            dir: state_dir.join("last-good").join(&key[..16]),
        }
    }

    /// Where the store lives.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the store, or says why it cannot be used: it cannot be created, or it (or a directory
    /// above it, up to the state directory) belongs to another user or others can write to it.
    pub(crate) fn open(&self) -> Result<(), PrivateDirError> {
        crate::state::private_dir(&self.root, &self.dir)
    }

    /// Keeps a copy of a module that loaded, with its signature (so that it can be verified again
    /// when it is recalled). Each file is replaced atomically.
    pub(crate) fn remember(&self, module: &ModuleSource) -> io::Result<()> {
        self.open().map_err(io::Error::other)?;
        write_if_changed(
            &self.dir.join(format!("{}.toml", module.name)),
            module.manifest_text.as_bytes(),
        )?;
        write_if_changed(
            &self.dir.join(format!("{}.wasm", module.name)),
            &module.wasm,
        )?;
        let signature = self.dir.join(format!("{}.sig", module.name));
        match &module.signature {
            Some(s) => write_if_changed(&signature, s.text.as_bytes())?,
            None => remove(&signature)?,
        }
        let from = self.dir.join(format!("{}.from", module.name));
        match &module.origin {
            Origin::ConfigMap { uid, .. } if !uid.is_empty() => {
                write_if_changed(&from, uid.as_bytes())
            }
            _ => remove(&from),
        }
    }

    /// The uid of the ConfigMap the remembered version of a module came from, if it came from one:
    /// with trusted keys, a last good version stands in only for a broken update of that same
    /// object, never for a ConfigMap created after it was deleted.
    pub(crate) fn came_from(&self, name: &str) -> Option<String> {
        let path = self.dir.join(format!("{name}.from"));
        let bytes = crate::regular_file::read(&path, 256).ok()?;
        String::from_utf8(bytes).ok()
    }

    /// The remembered version of a module, if there is one, it is intact and its signature satisfies
    /// the `trusted` keys of now (a copy signed by a key no longer trusted is not served).
    pub(crate) fn recall(
        &self,
        name: &str,
        trusted: Option<&TrustedKeys>,
    ) -> Result<ModuleSource, RecallError> {
        self.open().map_err(|source| RecallError::Untrusted {
            name: name.to_string(),
            source,
        })?;
        let path = self.dir.join(format!("{name}.wasm"));
        if !path.exists() {
            return Err(RecallError::None(name.to_string()));
        }
        read_module(&path, trusted).map_err(RecallError::Unusable)
    }
}

/// Why no last good version of a module can stand in for it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecallError {
    /// The store is not private, so nothing in it can be trusted.
    #[error("no earlier version of module {name} can be trusted: {source}")]
    Untrusted {
        /// The module.
        name: String,
        /// Why the store is not private.
        #[source]
        source: PrivateDirError,
    },
    /// Nothing was remembered for it.
    #[error("no earlier version of module {0} was remembered")]
    None(String),
    /// The copy kept is damaged, or its signature no longer satisfies the trusted keys.
    #[error("its last good version cannot be used: {0}")]
    Unusable(#[source] ReadError),
}

fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Replaces the file at `path` with `bytes` unless it holds them already (a plugin remembers every
/// module at every start; reading back a copy costs less than writing it again).
fn write_if_changed(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let unchanged = std::fs::metadata(path).is_ok_and(|m| m.len() == bytes.len() as u64)
        && std::fs::read(path).is_ok_and(|kept| kept == bytes);
    if unchanged {
        return Ok(());
    }
    crate::state::write_atomically(path, bytes)
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
        let module = read_module(&wasm, None).unwrap();
        let store = LastGood::at(state.path().join("last-good"));
        assert!(store.recall("m", None).is_err());
        store.remember(&module).unwrap();
        let recalled = store.recall("m", None).unwrap();
        assert_eq!(&*recalled.wasm, b"bytes");
        assert_eq!(recalled.sha256, module.sha256);
    }

    #[test]
    fn a_signed_copy_is_verified_again_when_recalled() {
        use crate::modules::signature::PrivateKey;
        let (source, state, keys) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let (key, other) = (
            PrivateKey::generate().unwrap(),
            PrivateKey::generate().unwrap(),
        );
        std::fs::write(keys.path().join("k.pub"), key.public_pem().unwrap()).unwrap();
        let trusted = TrustedKeys::load(keys.path()).unwrap();
        let manifest = format!("sha256 = \"{}\"", sha256_hex(b"bytes"));
        let wasm = source.path().join("m.wasm");
        std::fs::write(&wasm, b"bytes").unwrap();
        std::fs::write(source.path().join("m.toml"), &manifest).unwrap();
        std::fs::write(
            source.path().join("m.sig"),
            key.sign("m", Some(&sha256_hex(b"bytes")), &manifest)
                .to_text(),
        )
        .unwrap();
        let module = read_module(&wasm, Some(&trusted)).unwrap();
        let store = LastGood::at(state.path().join("last-good"));
        store.remember(&module).unwrap();
        let recalled = store.recall("m", Some(&trusted)).unwrap();
        assert_eq!(recalled.signature.unwrap().key, key.key_id());

        // Once the key is no longer trusted, neither is the copy it signed.
        std::fs::write(keys.path().join("k.pub"), other.public_pem().unwrap()).unwrap();
        let rotated = TrustedKeys::load(keys.path()).unwrap();
        let error = store.recall("m", Some(&rotated)).unwrap_err().to_string();
        assert!(
            error.contains(&key.key_id()) && error.contains("not a trusted key"),
            "{error}"
        );

        // An unsigned version remembered later leaves no stale signature behind.
        let unsigned = read_module(&wasm, None).map(|mut m| {
            m.signature = None;
            m
        });
        store.remember(&unsigned.unwrap()).unwrap();
        assert!(store.recall("m", None).unwrap().signature.is_none());
    }
}
