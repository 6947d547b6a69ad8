//! Where the host keeps state between processes: compiled modules (so a plugin process Velero starts
//! does not compile them again), the last good version of each directory module, and the actions last
//! listed to Velero (`plugin::kept_listing`).
//!
//! The first of: `$VELERO_WASM_STATE_DIR`; `$VELERO_SCRATCH_DIR/velero-wasm` (the Velero pod's scratch
//! volume, shared by every plugin process of the pod); `$XDG_CACHE_HOME/velero-wasm`;
//! `$HOME/.cache/velero-wasm`. None of them set: no state is kept.
//!
//! Compiled modules are machine code the host maps and runs, last good modules come with their grant,
//! and the version floor (`modules::version_floor`) says which signed versions may serve: whoever can
//! write where they are kept can run code as the plugin, widen a module's grant or roll a module back.
//! So they are kept only in [private](private_dir) directories, reached without following a symbolic
//! link, and written through new files of random names ([`write_atomically`]): a link planted in the
//! state directory never sends a write, or the status's clean-up, elsewhere.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// The state directory `config` names, if one can be named.
pub fn default_dir(config: &crate::config::Config) -> Option<PathBuf> {
    let dirs = config.state_dir();
    dirs.state_dir
        .or_else(|| dirs.scratch_dir.map(|d| d.join("velero-wasm")))
        .or_else(|| dirs.xdg_cache_home.map(|d| d.join("velero-wasm")))
        .or_else(|| dirs.home.map(|d| d.join(".cache").join("velero-wasm")))
}

/// Creates `dir` (and what is missing above it, mode 0700) and checks that it, and every directory
/// from `root` down to it, belongs to this process's effective user and is not writable by group or
/// others: nobody else can then add, replace or rename what is in it. The walk from `root` down goes
/// by handle, each directory opened relative to the one above with `O_NOFOLLOW`: a symbolic link in
/// place of `root` or of any directory below it is refused, never followed (what is above `root` is
/// the operator's path, followed as given). The error says which directory fails and why.
pub(crate) fn private_dir(root: &Path, dir: &Path) -> Result<(), PrivateDirError> {
    // `dir` is meant to be under `root`; one that is not is checked on its own.
    let (root, below) = match dir.strip_prefix(root) {
        Ok(below) => (root, below),
        Err(_) => (dir, Path::new("")),
    };
    if std::fs::symlink_metadata(root).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(|source| PrivateDirError::Create {
                dir: root.to_path_buf(),
                source,
            })?;
    }
    let mut current = root.to_path_buf();
    let mut handle = open_private(rustix::fs::CWD, root, &current)?;
    for part in below.components() {
        let Component::Normal(name) = part else {
            return Err(PrivateDirError::NotADirectory { dir: dir.into() });
        };
        current.push(name);
        match rustix::fs::mkdirat(&handle, name, rustix::fs::Mode::RWXU) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => {
                return Err(PrivateDirError::Create {
                    dir: current,
                    source: e.into(),
                })
            }
        }
        handle = open_private(&handle, Path::new(name), &current)?;
    }
    Ok(())
}

/// Opens the directory `name` (relative to `parent`) without following a symbolic link, and checks
/// that it is private; `path` names it in errors.
fn open_private(
    parent: impl std::os::fd::AsFd,
    name: &Path,
    path: &Path,
) -> Result<std::fs::File, PrivateDirError> {
    use rustix::fs::OFlags;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = path.to_path_buf();
    let handle = match rustix::fs::openat(&parent, name, flags, rustix::fs::Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        // `O_NOFOLLOW` on a symbolic link: ELOOP; `O_DIRECTORY` on anything else: ENOTDIR.
        Err(rustix::io::Errno::LOOP) => return Err(PrivateDirError::Symlink { dir }),
        Err(rustix::io::Errno::NOTDIR) => {
            let link = rustix::fs::statat(&parent, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| {
                    rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Symlink
                });
            return Err(if link {
                PrivateDirError::Symlink { dir }
            } else {
                PrivateDirError::NotADirectory { dir }
            });
        }
        Err(e) => {
            return Err(PrivateDirError::Unreadable {
                dir,
                source: e.into(),
            })
        }
    };
    let meta = handle
        .metadata()
        .map_err(|source| PrivateDirError::Unreadable {
            dir: dir.clone(),
            source,
        })?;
    check_private(dir, &meta)?;
    Ok(handle)
}

/// Replaces the file at `path` with `bytes` atomically: written beside it in a new file of a random
/// name (created with `O_EXCL`, so nothing already there, a symbolic link least of all, is written
/// through), then renamed over it, so a reader (another plugin process) sees the old file or the new
/// one, never a part. The temporary file is removed if any step fails.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// The contents of the regular file `path` of a private directory, up to `limit` bytes. A symbolic
/// link in its place is refused (`O_NOFOLLOW`), not read through; a missing file is `NotFound`.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => FileError::Symlink,
            _ => FileError::Io(e),
        })?;
    if !file.metadata()?.is_file() {
        return Err(FileError::NotRegular);
    }
    crate::regular_file::read_capped(file, limit).map_err(|e| match e {
        crate::regular_file::FileError::Io(e) => FileError::Io(e),
        crate::regular_file::FileError::NotRegular(_) => FileError::NotRegular,
        crate::regular_file::FileError::TooLarge(limit) => FileError::TooLarge(limit),
    })
}

/// Why a file of the state directory cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// It cannot be opened or read (`NotFound` when it is not there).
    #[error("cannot be read: {0}")]
    Io(#[from] std::io::Error),
    /// A symbolic link is in its place.
    #[error("is a symbolic link, which the state directory never follows")]
    Symlink,
    /// A directory, FIFO, device or socket is in its place.
    #[error("is not a regular file")]
    NotRegular,
    /// It holds more than the cap.
    #[error("is larger than the {} limit", crate::regular_file::size(*.0))]
    TooLarge(u64),
}

/// The effective user id of this process.
#[allow(unsafe_code)] // A libc call: see the SAFETY comment.
pub(crate) fn euid() -> u32 {
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
    /// A symbolic link is in its place: followed, it would put state (and what is written and
    /// removed there) wherever the link points.
    #[error("{} is a symbolic link: state is kept only in directories, never through a link (remove it)", dir.display())]
    Symlink {
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

fn check_private(dir: PathBuf, meta: &std::fs::Metadata) -> Result<(), PrivateDirError> {
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

    #[test]
    fn a_link_in_place_of_a_state_directory_is_refused_not_followed() {
        let state = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = state.path().join("status");
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        let e = private_dir(state.path(), &link.join("below"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/status is a symbolic link"), "{e}");
        assert!(
            !elsewhere.path().join("below").exists(),
            "nothing made there"
        );
        // The state directory itself, too.
        let e = private_dir(&link, &link).unwrap_err().to_string();
        assert!(e.contains("/status is a symbolic link"), "{e}");
        // A file in place of a directory.
        std::fs::write(state.path().join("file"), "").unwrap();
        let e = private_dir(state.path(), &state.path().join("file"))
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("/file is not a directory"), "{e}");
    }
}
