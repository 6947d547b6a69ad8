//! Where the host keeps state between processes: compiled modules (so a plugin process Velero starts
//! does not compile them again), the last good version of each directory module, and the actions last
//! listed to Velero (`plugin::kept_listing`).
//!
//! The first of: `$VELERO_WASM_STATE_DIR`; `$VELERO_SCRATCH_DIR/velero-wasm` (the Velero pod's scratch
//! volume, shared by every plugin process of the pod); `$XDG_CACHE_HOME/velero-wasm`;
//! `$HOME/.cache/velero-wasm`. None of them set: no state is kept.
//!
//! Compiled modules are machine code the host maps and runs, and last good modules come with their
//! grant: whoever can write where they are kept can run code as the plugin or widen a module's grant.
//! So they are kept only in [private](private_dir) directories.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The state directory for this environment, if one can be named.
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("VELERO_WASM_STATE_DIR")
        .or_else(|| var("VELERO_SCRATCH_DIR").map(|d| d.join("velero-wasm")))
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("velero-wasm")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("velero-wasm")))
}

/// Creates `dir` (and what is missing above it, mode 0700) and checks that it, and every directory
/// from `root` down to it, belongs to this process's effective user and is not writable by group or
/// others: nobody else can then add, replace or rename what is in it. The error says which directory
/// fails and why.
pub fn private_dir(root: &Path, dir: &Path) -> Result<(), PrivateDirError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| PrivateDirError::Create {
            dir: dir.to_path_buf(),
            source,
        })?;
    let below = dir.strip_prefix(root).unwrap_or(Path::new(""));
    let mut current = root.to_path_buf();
    check_private(&current)?;
    for part in below.components() {
        current.push(part);
        check_private(&current)?;
    }
    Ok(())
}

/// Replaces the file at `path` with `bytes` atomically: written beside it under a name of this
/// process, then renamed over it, so a reader (another plugin process) sees the old file or the new
/// one, never a part.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The effective user id of this process.
#[allow(unsafe_code)] // A libc call: see the SAFETY comment.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a directory cannot hold state: each names the directory that fails.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    /// It (or a directory above it) could not be created.
    #[error("cannot create {}: {source}", dir.display())]
    Create {
        /// The directory asked for.
        dir: PathBuf,
        /// Why it could not be created.
        #[source]
        source: std::io::Error,
    },
    /// Its metadata could not be read.
    #[error("{}: {source}", dir.display())]
    Unreadable {
        /// The directory.
        dir: PathBuf,
        /// Why its metadata could not be read.
        #[source]
        source: std::io::Error,
    },
    /// Something other than a directory is in its place.
    #[error("{} is not a directory", dir.display())]
    NotADirectory {
        /// The path.
        dir: PathBuf,
    },
    /// Another user owns it, and could change what is in it.
    #[error("{} belongs to uid {owner}, not to uid {me} that this process runs as", dir.display())]
    Owner {
        /// The directory.
        dir: PathBuf,
        /// Who owns it.
        owner: u32,
        /// This process's effective user.
        me: u32,
    },
    /// Group or others may write to it.
    #[error("{} is writable by other users (mode {mode:04o}; make it 0700)", dir.display())]
    Open {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

fn check_private(dir: &Path) -> Result<(), PrivateDirError> {
    let meta = std::fs::metadata(dir).map_err(|source| PrivateDirError::Unreadable {
        dir: dir.to_path_buf(),
        source,
    })?;
    let dir = dir.to_path_buf();
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory { dir });
    }
    let me = euid();
    if meta.uid() != me {
        return Err(PrivateDirError::Owner {
            dir,
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(PrivateDirError::Open {
            dir,
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_dir_is_created_owner_only_and_open_ones_are_refused() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("a").join("b");
        private_dir(state.path(), &dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let middle = state.path().join("a");
        std::fs::set_permissions(&middle, std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = private_dir(state.path(), &dir).unwrap_err().to_string();
        assert!(
            e.contains("/a is writable by other users (mode 0775"),
            "{e}"
        );
        // A readable directory is fine: only writing matters.
        std::fs::set_permissions(&middle, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(state.path(), &dir).unwrap();
    }
}
