//! One item of a backup as `diff` holds it, and how an item is made from its JSON text: what the
//! archive reader (`diff_archive`) makes and `diff`'s memory bound (`diff_memory`) counts.

use std::sync::Arc;

use anyhow::bail;

use crate::action::ItemRef;

/// One item of a backup.
pub struct BackupItem {
    /// Where it was read from: an archive entry or a file.
    pub from: String,
    /// Who it is.
    pub identity: ItemRef,
    /// Its JSON text, an object: checked without being parsed into a tree, and shared with the
    /// clusters `diff` runs the actions against rather than copied.
    pub text: Arc<str>,
}

/// An item from its JSON text (an object), or why it is none: an object without a kind or a name is
/// no item.
pub(super) fn item(from: String, text: String) -> anyhow::Result<BackupItem> {
    let identity = match ItemRef::parse(&text) {
        Ok(identity) => identity,
        Err(e) => bail!("{from}: {e}"),
    };
    if identity.kind.is_empty() || identity.name.is_empty() {
        bail!("{from}: the object has no kind or no name: not an item");
    }
    Ok(BackupItem {
        from,
        identity,
        text: text.into(),
    })
}
