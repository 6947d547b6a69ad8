//! What the actions of this module have already named in the backup being served (WIT 0.1.2
//! `named-items`; velero-wasm's docs/named-items.md).
//!
//! Velero reads every additional item a backup action names from the API server unless the item is
//! in the item block being backed up, even one it backed up moments before. A backup action whose
//! items many other items name too (an instance type, a shared Secret) can leave out those named
//! before and spare the API server the reads; the backup is the same.

use crate::ResourceId;

/// For each of `items`, whether an item-block action of this module named it earlier in the current
/// backup as a related item, in a call on another item.
/// Always `false` outside `backup` and `related-items`, in `velero-wasm run` and `test`, and in a
/// native build (unit tests).
pub fn named_before(items: &[ResourceId]) -> Vec<bool> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::named_items::named_before(items);
    #[cfg(not(target_arch = "wasm32"))]
    vec![false; items.len()]
}

/// `items` without those [`named_before`] says were named before, in their order.
pub fn leave_out_named_before(items: Vec<ResourceId>) -> Vec<ResourceId> {
    leave_out(items, named_before)
}

/// `items` without those `named` says were named before: [`leave_out_named_before`] with the answer
/// given, for tests.
pub fn leave_out(
    items: Vec<ResourceId>,
    named: impl FnOnce(&[ResourceId]) -> Vec<bool>,
) -> Vec<ResourceId> {
    if items.is_empty() {
        return items;
    }
    let answers = named(&items);
    items
        .into_iter()
        .zip(answers.into_iter().chain(std::iter::repeat(false)))
        .filter(|(_, named)| !named)
        .map(|(item, _)| item)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_named_before_are_left_out_in_order() {
        let items: Vec<ResourceId> = ["a", "b", "c"]
            .iter()
            .map(|n| ResourceId::new("", "secrets", "ns", n))
            .collect();
        let kept = leave_out(items.clone(), |asked| {
            asked.iter().map(|i| i.name == "b").collect()
        });
        assert_eq!(kept, [items[0].clone(), items[2].clone()]);
        // A short answer leaves the rest in; a native build names nothing before.
        assert_eq!(leave_out(items.clone(), |_| vec![true]), items[1..]);
        assert_eq!(leave_out_named_before(items.clone()), items);
    }
}
