//! What this plugin listed to Velero, kept across processes, and the actions Velero still knows that
//! no module provides any more.
//!
//! Velero asks every plugin for its list once, when the Velero pod starts (docs/plugin-protocol.md#s8-1), and from then on
//! asks each backup and restore for every listed action by kind and name. A module directory (a
//! ConfigMap) can change under a running Velero, so a later process may find that:
//! * an action moved between v1 and v2 of its kind (hcp's `etcd-wait` setting does that): Velero's
//!   service for the old version still runs it ([`crate::action::ActionKind::can_serve`]);
//! * a listed action is gone (its module was removed): answering "not found" would fail every backup
//!   until Velero restarts. So the list given to Velero is kept in the state directory, and such an
//!   action is served as *retired*: it applies to nothing, and anything else Velero asks of it
//!   answers as an action that leaves the item alone (see [`super::dispatch`]).
//!
//! The listing decides which names are served as retired, so it is kept like the rest of the state:
//! in a [private](crate::state::private_dir) directory, read only from there and only up to
//! [`MAX_LISTING`].

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::action::slot::slot_family;
use crate::action::ActionKind;

/// The listing file of one plugin binary and module directory in the state directory.
#[derive(Debug, Clone)]
pub struct Listing {
    state_dir: PathBuf,
    path: PathBuf,
}

/// The largest listing file read: far more than any plugin lists (a few hundred bytes an action).
pub(crate) const MAX_LISTING: u64 = 4 << 20;

/// One listed action (defined beside the slots, which serve the actions a listing lacks).
pub use crate::action::slot::Listed;

#[derive(Serialize, Deserialize)]
struct File {
    listed: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    kind: String,
    name: String,
}

impl Listing {
    /// The listing of the plugin started as `command` with the modules of `module_dir`, under
    /// `state_dir` (a pod's plugins share a state directory: each binary and directory has its own).
    pub(crate) fn new(state_dir: &Path, command: &str, module_dir: Option<&Path>) -> Listing {
        let mut key = command.as_bytes().to_vec();
        if let Some(dir) = module_dir {
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            key.push(0);
            key.extend_from_slice(dir.as_os_str().as_encoded_bytes());
        }
        let key = crate::modules::sha256_hex(&key);
        Listing {
            state_dir: state_dir.to_path_buf(),
            path: state_dir
                .join("listed")
                .join(format!("{}.json", &key[..16])),
        }
    }

    /// Where the listing is kept.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps what was just listed to Velero (atomically: concurrent processes read a whole file).
    pub(crate) fn save(&self, listed: &[Listed]) -> io::Result<()> {
        let file = File {
            listed: listed
                .iter()
                .map(|(kind, name)| Entry {
                    kind: kind.velero_kind().to_string(),
                    name: name.clone(),
                })
                .collect(),
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        crate::state::private_dir(&self.state_dir, dir).map_err(io::Error::other)?;
        crate::state::write_atomically(&self.path, &serde_json::to_vec_pretty(&file)?)
    }

    /// What was last listed to Velero, `None` when that is unknown: no listing was kept, or it cannot
    /// be read (reported). The slots serve only what a known listing lacks: with none, everything
    /// could be listed already, and an item must never go to one action twice.
    pub(crate) fn held(&self) -> Option<Vec<Listed>> {
        if !self.path.exists() {
            return None;
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if let Err(e) = crate::state::private_dir(&self.state_dir, dir) {
            tracing::warn!("the kept listing is not used: {e}");
            return None;
        }
        let text = match crate::regular_file::read(&self.path, MAX_LISTING) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!("{} {e}", self.path.display());
                return None;
            }
        };
        match serde_json::from_slice::<File>(&text) {
            Ok(file) => Some(
                file.listed
                    .into_iter()
                    .filter_map(|e| Some((ActionKind::from_velero_kind(&e.kind)?, e.name)))
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!("{} is not a listing: {e}", self.path.display());
                None
            }
        }
    }
}

/// The listed actions that no action `provided` can stand in for (by name, and a kind whose Velero
/// service can run it). The slots are never retired: they are the plugin's own, not a module's.
pub(crate) fn retired(listed: Vec<Listed>, provided: &[Listed]) -> BTreeSet<Listed> {
    listed
        .into_iter()
        .filter(|(_, name)| slot_family(name).is_none())
        .filter(|(kind, name)| !stands_in(provided, *kind, name))
        .collect()
}

/// Whether one of `provided` can stand in for the listed action `name` of `kind`.
fn stands_in(provided: &[Listed], kind: ActionKind, name: &str) -> bool {
    provided
        .iter()
        .any(|(actual, n)| n == name && kind.can_serve(*actual))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionKind::*;

    fn listed(items: &[(ActionKind, &str)]) -> Vec<Listed> {
        items.iter().map(|(k, n)| (*k, n.to_string())).collect()
    }

    #[test]
    fn a_listing_round_trips_and_each_plugin_and_directory_has_its_own() {
        let state = tempfile::tempdir().unwrap();
        let modules = tempfile::tempdir().unwrap();
        let one = Listing::new(state.path(), "/plugins/velero-wasm", Some(modules.path()));
        assert_eq!(
            one.held(),
            None,
            "nothing kept yet: no listing, not an empty one"
        );
        let actions = listed(&[(BackupV2, "example.io/a"), (Restore, "example.io/b")]);
        one.save(&actions).unwrap();
        assert_eq!(one.held(), Some(actions));
        let other = Listing::new(state.path(), "/plugins/velero-wasm", None);
        assert_ne!(other.path(), one.path());
        assert_eq!(other.held(), None);
    }

    #[test]
    fn a_damaged_listing_counts_as_none() {
        let state = tempfile::tempdir().unwrap();
        let listing = Listing::new(state.path(), "velero-wasm", None);
        std::fs::create_dir_all(listing.path().parent().unwrap()).unwrap();
        std::fs::write(listing.path(), b"{\"listed\": [tru").unwrap();
        assert_eq!(listing.held(), None);
    }

    #[test]
    fn a_listing_in_a_directory_others_can_write_is_ignored_and_not_written() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let listing = Listing::new(state.path(), "velero-wasm", None);
        let actions = listed(&[(Backup, "example.io/a")]);
        listing.save(&actions).unwrap();
        let dir = listing.path().parent().unwrap();
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the listing directory is private");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(listing.held(), None, "a planted listing is not trusted");
        let e = listing.save(&actions).unwrap_err();
        assert!(e.to_string().contains("writable by other users"), "{e}");
    }

    #[test]
    fn only_actions_nothing_can_stand_in_for_are_retired() {
        let was = listed(&[
            (BackupV2, "hcp/backup"),    // now v1: still served
            (Restore, "k/restore"),      // unchanged
            (Backup, "gone/backup"),     // module removed
            (Delete, "k/delete"),        // now a backup action of the same name: not a delete
            (ItemBlock, "k/item-block"), // unchanged
        ]);
        let now = listed(&[
            (Backup, "hcp/backup"),
            (Restore, "k/restore"),
            (Backup, "k/delete"),
            (ItemBlock, "k/item-block"),
        ]);
        assert_eq!(
            retired(was, &now),
            listed(&[(Backup, "gone/backup"), (Delete, "k/delete")])
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn slots_are_never_retired() {
        let was = listed(&[(BackupV2, "velero-wasm.io/added-backup-actions")]);
        assert!(retired(was, &[]).is_empty());
    }
}
