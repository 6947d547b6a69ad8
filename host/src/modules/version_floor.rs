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

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ModuleSource;

/// The highest version served of each signed module, kept in a state directory.
#[derive(Debug, Clone)]
pub struct VersionFloor {
    root: PathBuf,
    dir: PathBuf,
}

/// What is kept of the highest version served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Served {
    version: String,
    /// sha256 of the component (`-` for a manifest without one) and of the manifest, as served.
    content: String,
}

/// Why a module is below its floor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rollback {
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
}

impl VersionFloor {
    /// The floor of the state directory `state` (`<state>/versions`; created when first raised).
    pub fn at(state: &Path) -> VersionFloor {
        VersionFloor {
            root: state.to_path_buf(),
            dir: state.join("versions"),
        }
    }

    /// Whether `module` may serve: at or above its floor, and with the content served if at it.
    pub fn check(&self, module: &ModuleSource) -> Result<(), Rollback> {
        let Some(served) = self.read(&module.name)? else {
            return Ok(());
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
    pub fn raise(&self, module: &ModuleSource) -> io::Result<()> {
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
        let bytes = match crate::regular_file::read(&path, 4096) {
            Ok(bytes) => bytes,
            Err(crate::regular_file::FileError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(e) => return Err(Rollback::Unreadable(format!("{}: {e}", path.display()))),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Rollback::Unreadable(format!("{}: {e}", path.display())))
    }
}

/// A version in the floor's file that is not semver.
#[derive(Debug, thiserror::Error)]
#[error("{version:?}: {source}")]
struct BadVersion {
    version: String,
    source: semver::Error,
}

fn parse(version: &str) -> Result<semver::Version, BadVersion> {
    semver::Version::parse(version).map_err(|source| BadVersion {
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
        super::sha256_hex(module.manifest_text.as_bytes())
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
    fn a_damaged_floor_refuses_rather_than_forgets() {
        let state = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        floor.raise(&module(Some("2.0.0"), b"a")).unwrap();
        std::fs::write(state.path().join("versions/m.json"), "{").unwrap();
        let error = floor.check(&module(Some("3.0.0"), b"a")).unwrap_err();
        assert!(matches!(error, Rollback::Unreadable(_)), "{error}");
    }
}
