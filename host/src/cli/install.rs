//! `velero-wasm install-plugin DIR`: the plugin image's init container. It copies the running binary
//! into Velero's plugin directory (`/target` in the init container) and exits, so the image needs no
//! shell and no `cp`. The copy is atomic: a temporary file in `DIR`, written, synced and made
//! executable, then renamed to `DIR/velero-wasm`, so Velero never finds half a binary.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::failure::{Failure, EXIT_OK};

/// The file name in the plugin directory (Velero runs every executable file there).
pub(crate) const INSTALLED_NAME: &str = "velero-wasm";

/// Arguments of `install-plugin`.
#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// Velero's plugin directory, as mounted in the init container (Velero's convention: /target).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// Runs the command; returns the exit status.
pub(crate) fn install_plugin(args: InstallArgs) -> u8 {
    match install(&args.dir) {
        Ok(path) => {
            println!(
                "installed velero-wasm {} at {}",
                super::version::VERSION,
                path.display()
            );
            EXIT_OK
        }
        Err(failure) => {
            eprintln!("velero-wasm install-plugin: {}", failure.message);
            failure.code
        }
    }
}

/// The binary that is running: `/proc/self/exe`, or an absolute `argv[0]` where `/proc` is not
/// mounted (an image's entrypoint names the binary by its absolute path).
fn running_binary() -> Result<PathBuf, Failure> {
    match std::env::current_exe() {
        Ok(path) => Ok(path),
        Err(e) => std::env::args_os()
            .next()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .ok_or_else(|| Failure::failed(format!("cannot find the running binary: {e}"))),
    }
}

/// Copies the running binary to `dir/velero-wasm`; returns that path.
fn install(dir: &Path) -> Result<PathBuf, Failure> {
    let what = dir.display();
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(Failure::bad_input(format!("{what}: not a directory"))),
        Err(e) => return Err(Failure::bad_input(format!("{what}: {e}"))),
    }
    let source = running_binary()?;
    let mut input = fs::File::open(&source)
        .map_err(|e| Failure::failed(format!("cannot read {}: {e}", source.display())))?;
    let target = dir.join(INSTALLED_NAME);
    // A dot file: should anything list the directory meanwhile, it is not a plugin.
    let mut temp = tempfile::Builder::new()
        .prefix(".velero-wasm.")
        .tempfile_in(dir)
        .map_err(|e| Failure::failed(format!("cannot write in {what}: {e}")))?;
    let failed = |e: std::io::Error| {
        Failure::failed(format!("cannot write a temporary file in {what}: {e}"))
    };
    std::io::copy(&mut input, temp.as_file_mut()).map_err(failed)?;
    temp.as_file_mut().flush().map_err(failed)?;
    temp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o755))
        .map_err(failed)?;
    temp.as_file().sync_all().map_err(failed)?;
    // On error the temporary file is removed when `temp` is dropped.
    temp.persist(&target).map_err(|e| {
        Failure::failed(format!(
            "cannot rename into {}: {}",
            target.display(),
            e.error
        ))
    })?;
    // The rename itself survives a crash once the directory is synced (best effort: some
    // filesystems refuse to sync a directory).
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(target)
}
