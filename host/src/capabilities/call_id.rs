//! Which call this is (module, action, item, backup, shadow): it names the call in logs and errors.

use std::sync::Arc;

use crate::action::ItemRef;

/// Which call this is: module, action, and the item the call is on; it names the call in logs and
/// errors.
pub(crate) struct CallId {
    /// Module name.
    pub(crate) module: Arc<str>,
    /// Action name.
    pub(crate) action: String,
    pub(super) item: Option<ItemRef>,
    pub(super) backup: Option<Arc<str>>,
    pub(super) shadow: bool,
    /// Whether the call is one whose answer names items to Velero in a backup (`backup`,
    /// `related-items`): only those learn what was named before (`named-items`).
    pub(super) names: bool,
}

/// Logs at warn, or at info with `shadow = true` when `call` is a shadow's: nothing a shadow does
/// reaches Velero's warning count (docs/operation.md#what-velero-counts).
macro_rules! warn_unless_shadow {
    ($call:expr, $($args:tt)+) => {
        if $call.is_shadow() {
            tracing::info!(shadow = true, $($args)+)
        } else {
            tracing::warn!($($args)+)
        }
    };
}
pub(crate) use warn_unless_shadow;

impl CallId {
    /// A call of `action` in `module`, on an item (its identity, as the caller read it from the
    /// request) if the call has one.
    pub(crate) fn new(module: Arc<str>, action: &str, item: Option<ItemRef>) -> CallId {
        CallId {
            module,
            action: action.to_string(),
            item,
            backup: None,
            shadow: false,
            names: false,
        }
    }

    /// The call, made on a shadow module (`crate::shadow`): its log lines stay below warn.
    pub(crate) fn into_shadow(mut self) -> CallId {
        self.shadow = true;
        self
    }

    /// Whether the call is a shadow's.
    pub(crate) fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The call, made for the Backup or Restore whose `metadata.uid` is `uid`: its reads may be
    /// answered from that backup's read view.
    pub(crate) fn for_backup(mut self, uid: Option<Arc<str>>) -> CallId {
        self.backup = uid;
        self
    }

    /// The call, one whose answer names items to Velero in a backup (`backup`, `related-items`).
    pub(crate) fn naming_items(mut self) -> CallId {
        self.names = true;
        self
    }

    /// Whether the call's answer names items to Velero in a backup.
    pub(crate) fn names_items(&self) -> bool {
        self.names
    }

    /// The item's identity; `None` for a call without an item.
    pub(crate) fn item(&self) -> Option<&ItemRef> {
        self.item.as_ref()
    }

    /// `" on item <resource.group ns/name>"`, or "" without an item: for error messages.
    pub(crate) fn on_item(&self) -> String {
        match self.item() {
            Some(item) => format!(" on item {item}"),
            None => String::new(),
        }
    }
}
