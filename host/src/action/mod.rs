//! The domain of an item action, shared by every layer: what an action is, what it applies to, what
//! goes in and what comes out. Neither gRPC nor wasmtime types appear here.

mod applies_to;
pub(crate) mod compare;
mod item;
pub mod slot;

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

pub use applies_to::{AppliesTo, Selector};
pub use item::{plural_of, ItemRef};

/// The kinds of Velero item action a component can provide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// BackupItemAction v1.
    Backup,
    /// BackupItemAction v2 (asynchronous operations).
    BackupV2,
    /// RestoreItemAction v1.
    Restore,
    /// RestoreItemAction v2 (asynchronous operations, waiting for additional items).
    RestoreV2,
    /// ItemBlockAction v1 (Velero 1.15+).
    ItemBlock,
    /// DeleteItemAction.
    Delete,
}

impl ActionKind {
    /// Every kind, in the order Velero's Go framework lists them.
    pub(crate) const ALL: [ActionKind; 6] = [
        ActionKind::Backup,
        ActionKind::BackupV2,
        ActionKind::Restore,
        ActionKind::RestoreV2,
        ActionKind::Delete,
        ActionKind::ItemBlock,
    ];

    /// The kind string Velero's `ListPlugins` uses (`BackupItemActionV2`, …).
    pub(crate) fn velero_kind(self) -> &'static str {
        match self {
            ActionKind::Backup => "BackupItemAction",
            ActionKind::BackupV2 => "BackupItemActionV2",
            ActionKind::Restore => "RestoreItemAction",
            ActionKind::RestoreV2 => "RestoreItemActionV2",
            ActionKind::ItemBlock => "ItemBlockAction",
            ActionKind::Delete => "DeleteItemAction",
        }
    }

    /// Whether the action takes a Backup (backup, item-block and delete kinds) rather than a Restore.
    pub(crate) fn takes_backup(self) -> bool {
        !matches!(self, ActionKind::Restore | ActionKind::RestoreV2)
    }

    /// Whether Velero's service for `self` can run an action of kind `actual`: the same kind, or the
    /// other version of it (v2 calls carry everything v1 calls do; a v1 call can carry no operation).
    /// A module update may move an action between versions while Velero still knows the old one.
    pub(crate) fn can_serve(self, actual: ActionKind) -> bool {
        use ActionKind::*;
        self == actual
            || matches!(
                (self, actual),
                (Backup, BackupV2)
                    | (BackupV2, Backup)
                    | (Restore, RestoreV2)
                    | (RestoreV2, Restore)
            )
    }

    /// The kind of a Velero `ListPlugins` kind string.
    pub(crate) fn from_velero_kind(kind: &str) -> Option<ActionKind> {
        ActionKind::ALL
            .into_iter()
            .find(|k| k.velero_kind() == kind)
    }

    /// The WIT name (`backup-v2`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ActionKind::Backup => "backup",
            ActionKind::BackupV2 => "backup-v2",
            ActionKind::Restore => "restore",
            ActionKind::RestoreV2 => "restore-v2",
            ActionKind::ItemBlock => "item-block",
            ActionKind::Delete => "delete",
        }
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Kubernetes object as Velero names it (`ResourceIdentifier`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ResourceId {
    /// API group without version; "" for core.
    pub group: String,
    /// Plural lower-case resource.
    pub resource: String,
    /// Namespace; "" for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl fmt::Display for ResourceId {
    /// Velero's notation: `resource.group namespace/name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {}/{}", self.resource, self.namespace, self.name)
        } else {
            write!(
                f,
                "{}.{} {}/{}",
                self.resource, self.group, self.namespace, self.name
            )
        }
    }
}

/// A Kubernetes verb a module may be granted (the grant crate's, shared with the SDK).
pub use velero_wasm_grant::Verb;

/// A capability an action says it uses.
///
/// A kube need's WIT form is `(resource, verbs)`; a component that says where its calls go writes the
/// resource as `pods in @item` or `secrets in @velero,kube-system` (`(cluster)` for cluster scope),
/// which [`Need::kube`] reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Need {
    /// Kubernetes access to a resource (`resource.group`) with these verbs.
    Kube {
        /// `resource.group` (or `resource` for core).
        resource: String,
        /// Verbs used.
        verbs: Vec<Verb>,
        /// Where the calls go, as a grant writes it (`@item`, `@velero`, a name, `*`, "" for cluster
        /// scope); empty when the action does not say (then only the resource and verbs are checked).
        /// Components state it as `resource in ns,ns` in the WIT need's resource string.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        namespaces: Vec<String>,
    },
    /// Outbound HTTPS to a host.
    Http(String),
}

impl Need {
    /// A kube need from its WIT form: `resource` may end in ` in ns,ns` (see [`Need`]).
    pub(crate) fn kube(resource: &str, verbs: Vec<Verb>) -> Need {
        let (resource, namespaces) = match resource.split_once(" in ") {
            Some((resource, namespaces)) => (
                resource.trim(),
                namespaces
                    .split(',')
                    .map(str::trim)
                    .map(|n| if n == "(cluster)" { "" } else { n })
                    .map(str::to_string)
                    .collect(),
            ),
            None => (resource.trim(), Vec::new()),
        };
        Need::Kube {
            resource: resource.to_string(),
            verbs,
            namespaces,
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Kube {
                resource,
                verbs,
                namespaces,
            } => {
                let verbs: Vec<&str> = verbs.iter().map(|v| v.as_str()).collect();
                write!(f, "{} {}", verbs.join(","), resource)?;
                if !namespaces.is_empty() {
                    let shown: Vec<&str> = namespaces
                        .iter()
                        .map(|n| if n.is_empty() { "(cluster)" } else { n })
                        .collect();
                    write!(f, " in {}", shown.join(","))?;
                }
                Ok(())
            }
            Need::Http(host) => write!(f, "https {host}"),
        }
    }
}

/// What the host knows about an action without running it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionInfo {
    /// Velero plugin name, `<dns-subdomain>/<name>`.
    pub name: String,
    /// Kind.
    pub kind: ActionKind,
    /// Items it applies to.
    pub applies_to: Selector,
    /// One line for people.
    pub description: String,
    /// Capabilities it says it uses.
    pub needs: Vec<Need>,
}

/// Input of a backup action.
#[derive(Debug, Clone)]
pub struct BackupRequest {
    /// Item JSON.
    pub item: String,
    /// Backup JSON.
    pub backup: String,
}

/// Result of a backup action. `item` is always set: the input echoed when the action left it unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupOutcome {
    /// The item to store.
    pub item: String,
    /// Items to back up next.
    pub additional_items: Vec<ResourceId>,
    /// Asynchronous operation started (v2), if any.
    pub operation_id: Option<String>,
    /// Items to back up again after the operation (v2).
    pub post_operation_items: Vec<ResourceId>,
}

/// Input of a restore action.
#[derive(Debug, Clone)]
pub struct RestoreRequest {
    /// Item JSON, as Velero is about to create it.
    pub item: String,
    /// Item JSON as stored in the backup.
    pub item_from_backup: String,
    /// Restore JSON.
    pub restore: String,
}

/// Result of a restore action. `item` is always set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// The item to create.
    pub item: String,
    /// Items to restore first.
    pub additional_items: Vec<ResourceId>,
    /// Do not restore this item.
    pub skip_restore: bool,
    /// Asynchronous operation started (v2), if any.
    pub operation_id: Option<String>,
    /// Velero should wait for the additional items to be ready (v2).
    pub wait_for_additional_items: bool,
    /// How long to wait for them (v2); `None` is Velero's default.
    pub additional_items_timeout: Option<Duration>,
}

/// The state of an asynchronous operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationProgress {
    /// Ended, successfully or not.
    pub completed: bool,
    /// Failure message, if it failed.
    pub error: Option<String>,
    /// Units done.
    pub n_completed: i64,
    /// Units in all.
    pub n_total: i64,
    /// Unit name.
    pub units: String,
    /// One line for people.
    pub description: String,
    /// Start time.
    pub started: Option<SystemTime>,
    /// Last update.
    pub updated: Option<SystemTime>,
}
