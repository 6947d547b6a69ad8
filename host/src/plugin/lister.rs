//! `generated.PluginLister/ListPlugins` (docs/plugin-protocol.md#s6-2, #s7): one entry per loaded action, under its Velero
//! kind, in the Go framework's order (BackupItemAction, BackupItemActionV2, RestoreItemAction,
//! RestoreItemActionV2, DeleteItemAction, ItemBlockAction; names sorted within a kind), each with our
//! own `argv[0]` as the command Velero re-executes. Each family of kinds also lists its slot
//! ([`crate::action::slot`]), last in its kind: the v2 kind of backup and restore, or v1 when only v1
//! is listed.
//!
//! Only the kinds in [`Advertised`] are listed: Velero 1.14 refuses to start when a plugin lists
//! `ItemBlockAction`, so `VELERO_WASM_KINDS` can narrow the list. The start-up log line (at info)
//! names the kinds listed, so a Velero log shows whether item-block actions run.

use std::collections::BTreeSet;

use tonic::{Request, Response, Status};

use super::dispatch::Dispatch;
use super::kept_listing::{Listed, Listing};
use super::proto::generated::plugin_lister_server::PluginLister;
use super::proto::generated::{Empty, ListPluginsResponse, PluginIdentifier};
use crate::action::slot::Family;
use crate::action::ActionKind;

/// The environment variable naming the kinds to list.
pub use crate::config::VELERO_WASM_KINDS as KINDS_ENV;

/// The kinds listed to Velero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised(BTreeSet<ActionKind>);

impl Default for Advertised {
    /// Every kind.
    fn default() -> Self {
        Advertised(ActionKind::ALL.into_iter().collect())
    }
}

impl Advertised {
    /// Reads `VELERO_WASM_KINDS`: Velero kind names separated by commas (e.g. every kind but
    /// `ItemBlockAction` for Velero 1.14). Unset or empty means every kind. Returns the names it did
    /// not recognise, which are left out.
    pub fn parse(value: Option<&str>) -> (Advertised, Vec<String>) {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return (Advertised::default(), Vec::new());
        };
        let mut kinds = BTreeSet::new();
        let mut unknown = Vec::new();
        for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match ActionKind::ALL
                .into_iter()
                .find(|k| k.velero_kind().eq_ignore_ascii_case(name))
            {
                Some(kind) => {
                    kinds.insert(kind);
                }
                None => unknown.push(name.to_string()),
            }
        }
        (Advertised(kinds), unknown)
    }

    /// Whether `kind` is listed.
    pub(crate) fn contains(&self, kind: ActionKind) -> bool {
        self.0.contains(&kind)
    }

    /// The kind the slot of `family` is listed under: the first of its kinds that is listed.
    pub(crate) fn slot_kind(&self, family: Family) -> Option<ActionKind> {
        family.kinds().iter().copied().find(|k| self.contains(*k))
    }
}

impl std::fmt::Display for Advertised {
    /// The Velero kind names in listing order, comma-separated, as the start-up log line shows them
    /// (so that a missing `ItemBlockAction` is visible in Velero's log).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = ActionKind::ALL
            .into_iter()
            .filter(|k| self.contains(*k))
            .map(ActionKind::velero_kind)
            .collect();
        f.write_str(&names.join(","))
    }
}

/// The service.
pub struct Lister {
    /// The loaded actions.
    pub dispatch: Dispatch,
    /// Our `argv[0]`, verbatim.
    pub command: String,
    /// The kinds to list.
    pub kinds: Advertised,
    /// Where what is listed is kept for later processes (none without a state directory).
    pub listing: Option<Listing>,
}

impl Lister {
    /// The listing.
    pub(crate) fn plugins(&self) -> Vec<PluginIdentifier> {
        let actions = self.dispatch.actions().actions();
        let mut plugins = Vec::new();
        for kind in ActionKind::ALL
            .into_iter()
            .filter(|k| self.kinds.contains(*k))
        {
            // The actions are sorted by name, and the slot comes after them.
            let family = Family::of(kind);
            let slot = (self.kinds.slot_kind(family) == Some(kind)).then(|| family.slot_name());
            let names = actions
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, name)| name.as_str())
                .chain(slot);
            for name in names {
                plugins.push(PluginIdentifier {
                    command: self.command.clone(),
                    kind: kind.velero_kind().to_string(),
                    name: name.to_string(),
                });
            }
        }
        plugins
    }
}

#[tonic::async_trait]
impl PluginLister for Lister {
    async fn list_plugins(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<ListPluginsResponse>, Status> {
        // The whole list: every module, not only those in service so far.
        self.dispatch.actions().all_loaded().await;
        let plugins = self.plugins();
        tracing::debug!(plugins = plugins.len(), "ListPlugins");
        if let Some(listing) = &self.listing {
            let listed: Vec<Listed> = plugins
                .iter()
                .filter_map(|p| Some((ActionKind::from_velero_kind(&p.kind)?, p.name.clone())))
                .collect();
            if let Err(e) = listing.save(&listed) {
                tracing::warn!(
                    "cannot keep the list of actions in {}: {e}; an action removed later fails backups until Velero restarts",
                    listing.path().display()
                );
            }
        }
        Ok(Response::new(ListPluginsResponse { plugins }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_environment() {
        assert_eq!(Advertised::parse(None).0, Advertised::default());
        assert_eq!(Advertised::parse(Some(" ")).0, Advertised::default());
        let (kinds, unknown) = Advertised::parse(Some(
            "BackupItemAction, backupitemactionv2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction,ObjectStore",
        ));
        assert!(kinds.contains(ActionKind::BackupV2));
        assert!(!kinds.contains(ActionKind::ItemBlock));
        assert_eq!(unknown, ["ObjectStore"]);
        assert_eq!(
            kinds.to_string(),
            "BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction"
        );
        assert_eq!(kinds.slot_kind(Family::Backup), Some(ActionKind::BackupV2));
        assert_eq!(kinds.slot_kind(Family::ItemBlock), None);
        let (v1_only, _) = Advertised::parse(Some("BackupItemAction,DeleteItemAction"));
        assert_eq!(v1_only.slot_kind(Family::Backup), Some(ActionKind::Backup));
        assert_eq!(v1_only.slot_kind(Family::Restore), None);
        assert_eq!(
            Advertised::default().to_string(),
            "BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction,ItemBlockAction"
        );
    }
}
