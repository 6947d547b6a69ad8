//! Files the commands write where they are told to (`pack --out`, `test --junit`, a suite `test
//! --update` rewrites, the manifest `build` pins): written whole to a new temporary file beside the
//! target, then renamed over it, so a reader never sees half a file and nothing is ever written
//! through a symbolic link. A target that is itself a link is refused: the link names another file,
//! which the user did not give.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// Why a file was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The target is a symbolic link: writing through it would change the file it points to.
    #[error(
        "{path}: is a symbolic link (to {target}): not writing through it; give the file itself"
    )]
    Link { path: String, target: String },
    /// The target exists and is not a regular file (a directory, a FIFO, a device).
    #[error("{path}: is not a regular file: not replacing it")]
    NotRegular { path: String },
    /// Creating, writing or renaming failed.
    #[error("{path}: cannot be written: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `bytes` to `path`, replacing the regular file there (its mode kept) or creating one
/// (mode 0666 less the umask): never through a symbolic link, never half written.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let shown = path.display().to_string();
    let io = |source: std::io::Error| WriteError::Io {
        path: shown.clone(),
        source,
    };
    let existing = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".to_string());
            return Err(WriteError::Link {
                path: shown,
                target,
            });
        }
        Ok(meta) if !meta.is_file() => return Err(WriteError::NotRegular { path: shown }),
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A new file (O_EXCL: never an existing one, never a link) with a dot name: whoever lists the
    // directory meanwhile does not take it for the real one.
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(io)?;
    if let Some(permissions) = existing {
        temp.as_file().set_permissions(permissions).map_err(io)?;
    }
    temp.as_file_mut().write_all(bytes).map_err(io)?;
    temp.as_file_mut().sync_all().map_err(io)?;
    // rename(2) replaces the name itself: were it made a link meanwhile, the link goes, not its target.
    temp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_file_keeping_its_mode_and_refuses_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.yaml");
        replace(&file, b"one").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"one");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        replace(&file, b"two").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"keep").unwrap();
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let e = replace(&link, b"three").unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());

        let e = replace(dir.path(), b"x").unwrap_err().to_string();
        assert!(e.contains("is not a regular file"), "{e}");
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
