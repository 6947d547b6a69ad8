//! Files the host reads because a user or an operator named them (`run`'s inputs and `--replay`, the
//! files of `env-files` grants): regular files only, opened without blocking (a FIFO would wait for a
//! writer forever) and read up to a cap (`/dev/zero` never ends).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It cannot be opened or read.
    #[error("cannot be read: {0}")]
    Io(#[from] io::Error),
    /// It is a FIFO, a device, a socket or a directory.
    #[error("is not a regular file (it is {0})")]
    NotRegular(&'static str),
    /// It holds more than the cap.
    #[error("is larger than the {} limit", size(*.0))]
    TooLarge(u64),
}

/// Opens a regular file for reading, without blocking whatever the path names.
pub fn open(path: &Path) -> Result<File, FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(FileError::NotRegular(describe(kind)));
    }
    Ok(file)
}

/// The contents of a regular file of at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    read_capped(open(path)?, limit)
}

/// The contents of an open regular file of at most `limit` bytes (for callers that open it
/// themselves, as the state directory does without following links).
pub fn read_capped(file: File, limit: u64) -> Result<Vec<u8>, FileError> {
    if file.metadata()?.len() > limit {
        return Err(FileError::TooLarge(limit));
    }
    let mut contents = Vec::new();
    // A file that grows while it is read is still cut at the limit.
    file.take(limit + 1).read_to_end(&mut contents)?;
    if contents.len() as u64 > limit {
        return Err(FileError::TooLarge(limit));
    }
    Ok(contents)
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// A size for people: `64 MiB`, `1 KiB`, `100 bytes`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)] // mkfifo: see the SAFETY comment.
    fn only_regular_files_up_to_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read(&file, 10).unwrap(), b"0123456789");
        let e = read(&file, 9).unwrap_err().to_string();
        assert_eq!(e, "is larger than the 9 bytes limit");
        let e = read(dir.path(), 10).unwrap_err().to_string();
        assert_eq!(e, "is not a regular file (it is a directory)");
        let e = read(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "is not a regular file (it is a character device)");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo, 10).unwrap_err().to_string();
        assert_eq!(e, "is not a regular file (it is a FIFO)");
        assert!(read(&dir.path().join("missing"), 10)
            .unwrap_err()
            .to_string()
            .starts_with("cannot be read: "));
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(1 << 10), "1 KiB");
    }
}
