//! Rollback protection: with trusted keys, a host never serves a signed module at a lower version than
//! one it has served, nor other content under a version it has served. Someone who can write module
//! ConfigMaps can re-apply any module ever signed; without this, an old version with a wider grant or a
//! known bug would be as good as the current one.
//!
//! The floor of each module is the highest `version` (its manifest's, which the signature covers) that
//! loaded, with the sha256 of the component and manifest it had: one file a module under
//! `<state>/versions/`, each replaced atomically, so plugin processes sharing the state directory
//! share the floor. A module without a version passes only while no version of it was served. The
//! floor lives as long as the state directory: a pod's `emptyDir` forgets it on restart, which a
//! signature's expiry ([`signature`](super::signature)) bounds.
//!
//! The floor is only as good as its directory: one that another user owns or may write (or a
//! symbolic link in place of it) could have had its files removed, so while it is so no signed module
//! serves ([`Rollback::Untrusted`]); its files are read and written without following a link.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::identity::{sha256_hex, valid_module_name};
use super::manifest::MAX_VERSION;
use super::source::ModuleSource;

/// The largest floor file read back. A record holds a version of at most [`MAX_VERSION`] bytes and
/// its content (two sha256s), so every record this host writes fits with room to spare; a longer
/// file is not one it wrote.
const MAX_RECORD: u64 = 4096;
/// The length of a record's content: `<sha256 of the component, or -> <sha256 of the manifest>`.
const CONTENT_LEN: usize = 64 + 1 + 64;
const _: () = assert!(MAX_VERSION + CONTENT_LEN + 64 <= MAX_RECORD as usize);

/// The highest version served of each signed module, kept in a state directory.
#[derive(Debug, Clone)]
pub struct VersionFloor {
    root: PathBuf,
    dir: PathBuf,
    /// Why the floor kept in the cluster could not be read, when it could not (shared by the clones
    /// of this floor: the plugin learns it after the runtime holds its floor).
    cluster_unknown: Arc<Mutex<Option<String>>>,
}

/// What is kept of the highest version served (also the form of each entry of the cluster's floor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Served {
    /// The version, as the manifest wrote it (semantic versioning).
    pub(crate) version: String,
    /// sha256 of the component (`-` for a manifest without one) and of the manifest, as served.
    pub(crate) content: String,
}

impl Served {
    /// The version, parsed; an error names the version that is not semver, or its length when it is
    /// longer than a version may be.
    pub(crate) fn parsed(&self) -> Result<semver::Version, BadVersion> {
        parse(&self.version)
    }

    /// The version, parsed, of a record this host could have written: a version within
    /// [`MAX_VERSION`] and a content of two sha256s. A record from elsewhere (the cluster's Secret) is
    /// checked so before it is kept, so that the floor never holds a file it cannot read back.
    pub(crate) fn checked(&self) -> Result<semver::Version, BadRecord> {
        let version = self.parsed()?;
        let sha256 = |s: &str| {
            s.len() == 64
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        match self.content.split_once(' ') {
            Some((component, manifest))
                if (component == "-" || sha256(component)) && sha256(manifest) =>
            {
                Ok(version)
            }
            _ => Err(BadRecord::Content(self.content.len())),
        }
    }
}

/// Why a record offered to the floor is not kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadRecord {
    /// Its version is none.
    #[error(transparent)]
    Version(#[from] BadVersion),
    /// Its content is not the two sha256s a record holds (its length in bytes).
    #[error("its content ({0} bytes) is not the sha256 of a component (or -) and of a manifest")]
    Content(usize),
}

/// Why a module is below its floor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rollback {
    /// A lower version than one served.
    #[error("version {offered} is older than version {served}, which this host has served: rollback refused (sign the module with a higher version)")]
    Older {
        /// The version offered.
        offered: String,
        /// The highest version served.
        served: String,
    },
    /// The version served, with other content.
    #[error("version {version} was served with other content: refused (a changed module needs a higher version)")]
    Changed {
        /// The version.
        version: String,
    },
    /// No version, where a version was served.
    #[error("it has no version, and version {served} of it has been served: refused (add version = \"…\" to its manifest, higher than {served})")]
    Unversioned {
        /// The highest version served.
        served: String,
    },
    /// The floor cannot be read: nothing is known, so nothing signed is served.
    #[error("its highest version served cannot be read ({0}): refused")]
    Unreadable(String),
    /// The floor's directory is not this user's alone (another owner, open to others, a symbolic
    /// link): whoever else can write it can remove the floor, so what it says is worth nothing and
    /// nothing signed is served.
    #[error("the versions this host has served are kept where others can change them ({0}): refused, as rollback protection cannot hold there (make the state directory belong to the plugin's user, mode 0700)")]
    Untrusted(String),
    /// The floor kept in the cluster cannot be read and this state directory has no record of the
    /// module (a new pod's): an older signed version would go unnoticed, so it is not served.
    #[error("the versions served are kept in the cluster, and that floor cannot be read ({0}), while this pod's state directory has no record of the module: refused, as an older signed version could serve after a restart")]
    ClusterUnknown(String),
}

impl VersionFloor {
    /// The floor of the state directory `state` (`<state>/versions`; created when first raised).
    pub(crate) fn at(state: &Path) -> VersionFloor {
        VersionFloor {
            root: state.to_path_buf(),
            dir: state.join("versions"),
            cluster_unknown: Arc::default(),
        }
    }

    /// Says that the floor kept in the cluster could not be read (`why`), or could (`None`): while it
    /// could not, a module without a record here is refused ([`Rollback::ClusterUnknown`]).
    pub(crate) fn set_cluster_unknown(&self, why: Option<String>) {
        *self
            .cluster_unknown
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = why;
    }

    fn cluster_unknown(&self) -> Option<String> {
        self.cluster_unknown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every module's record in this directory (a file that cannot be read or parsed is left out: the
    /// check of that module refuses it anyway).
    pub(crate) fn records(&self) -> Result<BTreeMap<String, Served>, Rollback> {
        crate::state::private_dir(&self.root, &self.dir)
            .map_err(|e| Rollback::Untrusted(e.to_string()))?;
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| Rollback::Unreadable(format!("{}: {e}", self.dir.display())))?;
        let mut records = BTreeMap::new();
        for entry in entries.flatten() {
            let file = entry.file_name();
            let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".json")) else {
                continue;
            };
            if !valid_module_name(name) {
                continue;
            }
            if let Ok(Some(served)) = self.read(name) {
                records.insert(name.to_string(), served);
            }
        }
        Ok(records)
    }

    /// Raises the record of `module` to `served` when it is higher than the record here (or there is
    /// none); returns whether it did. The same version with other content leaves the record here.
    pub(crate) fn raise_record(&self, module: &str, served: &Served) -> io::Result<bool> {
        let offered = served.checked().map_err(io::Error::other)?;
        let higher = match self.read(module) {
            Ok(Some(kept)) => parse(&kept.version).map_or(true, |k| offered > k),
            Ok(None) => true,
            Err(e) => return Err(io::Error::other(e.to_string())),
        };
        if !higher {
            return Ok(false);
        }
        crate::state::private_dir(&self.root, &self.dir).map_err(io::Error::other)?;
        let text = serde_json::to_vec(served).map_err(io::Error::other)?;
        crate::state::write_atomically(&self.path(module), &text)?;
        Ok(true)
    }

    /// Whether `module` may serve: at or above its floor, and with the content served if at it.
    pub(crate) fn check(&self, module: &ModuleSource) -> Result<(), Rollback> {
        // A floor anybody else could have removed or lowered says nothing: checked before each read,
        // as the directory may have changed since the last module.
        crate::state::private_dir(&self.root, &self.dir)
            .map_err(|e| Rollback::Untrusted(e.to_string()))?;
        let Some(served) = self.read(&module.name)? else {
            // Nothing here; the cluster's floor, read into this directory at start, had nothing
            // either, unless it could not be read.
            return match self.cluster_unknown() {
                Some(why) => Err(Rollback::ClusterUnknown(why)),
                None => Ok(()),
            };
        };
        let served_version =
            parse(&served.version).map_err(|e| Rollback::Unreadable(e.to_string()))?;
        let Some(offered) = &module.manifest.version else {
            return Err(Rollback::Unversioned {
                served: served.version,
            });
        };
        match offered.cmp(&served_version) {
            std::cmp::Ordering::Less => Err(Rollback::Older {
                offered: offered.to_string(),
                served: served.version,
            }),
            std::cmp::Ordering::Equal if content(module) != served.content => {
                Err(Rollback::Changed {
                    version: served.version,
                })
            }
            _ => Ok(()),
        }
    }

    /// Records that `module` serves, if its version is higher than the floor (or there is none).
    pub(crate) fn raise(&self, module: &ModuleSource) -> io::Result<()> {
        let Some(version) = &module.manifest.version else {
            return Ok(());
        };
        let higher = match self.read(&module.name) {
            Ok(Some(served)) => parse(&served.version).map_or(true, |s| *version > s),
            Ok(None) => true,
            Err(_) => false,
        };
        if !higher {
            return Ok(());
        }
        crate::state::private_dir(&self.root, &self.dir).map_err(io::Error::other)?;
        let served = Served {
            version: version.to_string(),
            content: content(module),
        };
        let text = serde_json::to_vec(&served).map_err(io::Error::other)?;
        crate::state::write_atomically(&self.path(&module.name), &text)
    }

    fn path(&self, module: &str) -> PathBuf {
        self.dir.join(format!("{module}.json"))
    }

    fn read(&self, module: &str) -> Result<Option<Served>, Rollback> {
        let path = self.path(module);
        let bytes = match crate::state::read_file(&path, MAX_RECORD) {
            Ok(bytes) => bytes,
            Err(crate::state::FileError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(e) => return Err(Rollback::Unreadable(format!("{}: {e}", path.display()))),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Rollback::Unreadable(format!("{}: {e}", path.display())))
    }
}

/// A version in a record that is none: not semver, or longer than any version (the manifest's bound).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadVersion {
    /// Not semver.
    #[error("{version:?}: {source}")]
    NotSemver {
        version: String,
        source: semver::Error,
    },
    /// Longer than [`MAX_VERSION`] (its length in bytes).
    #[error("a version of {0} bytes is longer than the {MAX_VERSION} bytes a version may have: not a version")]
    TooLong(usize),
}

fn parse(version: &str) -> Result<semver::Version, BadVersion> {
    if version.len() > MAX_VERSION {
        return Err(BadVersion::TooLong(version.len()));
    }
    semver::Version::parse(version).map_err(|source| BadVersion::NotSemver {
        version: version.to_string(),
        source,
    })
}

/// What a version stands for: its component and its manifest.
fn content(module: &ModuleSource) -> String {
    let component = if module.origin.is_stock_component() {
        "-".to_string()
    } else {
        module.sha256.clone()
    };
    format!(
        "{component} {}",
        sha256_hex(module.manifest_text.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::Origin;

    fn module(version: Option<&str>, wasm: &[u8]) -> ModuleSource {
        let manifest = match version {
            Some(v) => format!("version = \"{v}\""),
            None => String::new(),
        };
        ModuleSource::new("m", wasm.to_vec(), &manifest, Origin::File("m.wasm".into())).unwrap()
    }

    #[test]
    fn a_host_never_serves_lower_than_it_has_served() {
        let state = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        let (v1, v2) = (module(Some("1.0.0"), b"a"), module(Some("1.2.0"), b"b"));
        assert_eq!(floor.check(&v1), Ok(()));
        floor.raise(&v1).unwrap();
        assert_eq!(floor.check(&v2), Ok(()));
        floor.raise(&v2).unwrap();
        assert_eq!(
            floor.check(&v1),
            Err(Rollback::Older {
                offered: "1.0.0".into(),
                served: "1.2.0".into()
            })
        );
        // Raising with a lower version leaves the floor where it is.
        floor.raise(&v1).unwrap();
        assert!(floor.check(&v1).is_err());
        // The version served, again: fine; with other bytes: refused; without a version: refused.
        assert_eq!(floor.check(&module(Some("1.2.0"), b"b")), Ok(()));
        assert_eq!(
            floor.check(&module(Some("1.2.0"), b"c")),
            Err(Rollback::Changed {
                version: "1.2.0".into()
            })
        );
        assert!(matches!(
            floor.check(&module(None, b"b")),
            Err(Rollback::Unversioned { .. })
        ));
        assert_eq!(floor.check(&module(Some("1.10.0"), b"d")), Ok(()));
        // Another module has a floor of its own.
        let mut other = module(Some("0.1.0"), b"a");
        other.name = "n".into();
        assert_eq!(floor.check(&other), Ok(()));
    }

    #[test]
    fn a_floor_others_can_change_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        floor.raise(&module(Some("2.0.0"), b"a")).unwrap();
        let versions = state.path().join("versions");
        let chmod = |mode| {
            std::fs::set_permissions(&versions, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        // Open to everybody: anybody may have removed the floor, as here.
        chmod(0o777);
        std::fs::remove_file(versions.join("m.json")).unwrap();
        let error = floor.check(&module(Some("1.0.0"), b"a")).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("versions is writable by other users (mode 0777; make it 0700)")
                && message.contains("refused"),
            "{message}"
        );
        // Nor is a higher version recorded there.
        floor.raise(&module(Some("3.0.0"), b"a")).unwrap_err();
        assert!(!versions.join("m.json").exists());
        chmod(0o700);
        if crate::state::euid() == 0 {
            std::os::unix::fs::chown(&versions, Some(65534), None).unwrap();
            let error = floor.check(&module(Some("1.0.0"), b"a")).unwrap_err();
            assert!(
                error.to_string().contains("belongs to uid 65534"),
                "{error}"
            );
            std::os::unix::fs::chown(&versions, Some(0), None).unwrap();
        }
        // A link in its place, to a directory of ours with a low floor: not followed.
        let elsewhere = tempfile::tempdir().unwrap();
        VersionFloor::at(elsewhere.path())
            .raise(&module(Some("0.1.0"), b"a"))
            .unwrap();
        std::fs::remove_dir(&versions).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("versions"), &versions).unwrap();
        let error = floor.check(&module(Some("1.0.0"), b"a")).unwrap_err();
        assert!(error.to_string().contains("is a symbolic link"), "{error}");
        // Private again: the floor works.
        std::fs::remove_file(&versions).unwrap();
        assert_eq!(floor.check(&module(Some("1.0.0"), b"a")), Ok(()));
    }

    #[test]
    fn links_planted_in_the_floor_are_neither_written_through_nor_read() {
        let state = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        floor.raise(&module(Some("1.0.0"), b"a")).unwrap();
        // Where the floor's write once went first: `<name>.tmp<pid>`, beside the file.
        let target = outside.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let versions = state.path().join("versions");
        let planted = versions.join(format!("m.tmp{}", std::process::id()));
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        floor.raise(&module(Some("2.0.0"), b"b")).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let file = std::fs::symlink_metadata(versions.join("m.json")).unwrap();
        assert!(file.is_file(), "the floor is a file of its own");
        assert_eq!(
            floor.check(&module(Some("1.0.0"), b"a")),
            Err(Rollback::Older {
                offered: "1.0.0".into(),
                served: "2.0.0".into()
            })
        );
        // The floor's file itself a link (to a lower floor): refused, not read through.
        std::fs::write(&target, r#"{"version":"0.1.0","content":"- x"}"#).unwrap();
        std::fs::remove_file(versions.join("m.json")).unwrap();
        std::os::unix::fs::symlink(&target, versions.join("m.json")).unwrap();
        let error = floor.check(&module(Some("1.0.0"), b"a")).unwrap_err();
        assert!(
            matches!(&error, Rollback::Unreadable(m) if m.contains("is a symbolic link")),
            "{error}"
        );
    }

    #[test]
    fn a_damaged_floor_refuses_rather_than_forgets() {
        let state = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        floor.raise(&module(Some("2.0.0"), b"a")).unwrap();
        std::fs::write(state.path().join("versions/m.json"), "{").unwrap();
        let error = floor.check(&module(Some("3.0.0"), b"a")).unwrap_err();
        assert!(matches!(error, Rollback::Unreadable(_)), "{error}");
    }
}
