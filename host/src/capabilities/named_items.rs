//! The `named-items` capability: what a module's actions have already named in the backup being
//! served (docs/named-items.md).
//!
//! Velero reads every additional item a backup action names from the API server unless the item is
//! in the item block being backed up, even when it backed that item up moments before. The runtime
//! records the related items of each serving `related-items` call of a listed item-block action
//! ([`NamedItems::record`]), per module and per Backup (its `metadata.uid`): Velero puts each of them
//! in an item block or leaves it out by the backup's filters, item by item, whatever happens to the
//! others. An action asks which of its items were named so by a call on another item
//! ([`NamedItems::named_before`]) and may leave those out.
//!
//! What keeps it correct and bounded:
//! - only what Velero was given as related items is recorded: never a backup action's additional
//!   items (Velero stops at the first of them that fails, so the rest would be recorded but never
//!   backed up), never the calls a slot chains (Velero gets none of their answers when a later one
//!   fails), never a shadow's or a failed call's; a call's own earlier answers (Velero calls an item
//!   again for each API version it backs up) do not count for it;
//! - a shadow's call is answered as the serving call on the same item was, so that the shadow's
//!   answer differs from the serving one only by its own code;
//! - it answers `false` for whatever it does not hold, so forgetting only costs reads;
//! - it holds the records of at most [`MAX_BACKUPS`] module and backup pairs, the least recently used
//!   going first, and at most [`MAX_BYTES`] of names and answers in all; past that, a pair records
//!   nothing more.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use super::budget::WorkBudget;
use super::call_id::CallId;
use crate::action::{ItemRef, ResourceId};
use crate::bindings::velero_wasm::plugin::named_items::Host;
use crate::bindings::velero_wasm::plugin::types as wit_types;

/// The module and backup pairs whose records are kept at once (a plugin process serves one backup
/// at a time; a few more cover a restart's overlap and several modules).
pub(crate) const MAX_BACKUPS: usize = 16;
/// The bytes of names all records hold together: about 60,000 names of 100 bytes, four times what a
/// backup of 1,000 VMs names.
pub(crate) const MAX_BYTES: usize = 8 << 20;
/// What one recorded name costs beyond its text (the map's entry and the namer).
const ENTRY_COST: usize = 48;
/// The most items one `named-before` call may ask about (as many as a call may return to Velero).
const MAX_ASKED: usize = 100_000;

/// The records of every module and backup pair this process serves.
#[derive(Debug, Default)]
pub struct NamedItems {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Least recently used first.
    pairs: Vec<Pair>,
    bytes: usize,
}

#[derive(Debug)]
struct Pair {
    module: Arc<str>,
    backup: Arc<str>,
    /// Each name, and who named it.
    names: HashMap<String, Namers>,
    /// The names a serving call on an item (its [`namer`]) was told were not named before: a shadow
    /// of that call is told the same.
    not_before: HashSet<(u64, String)>,
    bytes: usize,
    /// The bounds were reached: nothing more is recorded for this pair.
    full: bool,
}

/// Who named an item: the first namer (a hash of its identity), and whether another item did too.
#[derive(Debug, Clone, Copy)]
struct Namers {
    first: u64,
    others: bool,
}

impl Namers {
    fn besides(&self, asker: u64) -> bool {
        self.first != asker || self.others
    }
}

fn key(id: &ResourceId) -> String {
    // None of the four contains a `/` (API groups, resources, namespaces and names cannot).
    format!("{}/{}/{}/{}", id.group, id.resource, id.namespace, id.name)
}

/// Who an item is, whatever the API version it was read at: Velero calls an item once per version
/// it backs up (`EnableAPIGroupVersions`), and each of those calls is the same item's.
fn namer(item: Option<&ItemRef>) -> u64 {
    let mut hasher = DefaultHasher::new();
    if let Some(item) = item {
        (item.group(), &item.kind, &item.namespace, &item.name).hash(&mut hasher);
    }
    hasher.finish()
}

impl NamedItems {
    /// Records that the call `id` (a serving `related-items` call whose answer Velero gets whole)
    /// named `items`. Nothing is recorded for a call without a backup uid.
    pub(crate) fn record(&self, id: &CallId, items: &[ResourceId]) {
        let Some(backup) = id.backup.as_ref() else {
            return;
        };
        if items.is_empty() {
            return;
        }
        let by = namer(id.item());
        let keys: Vec<String> = items.iter().map(key).collect();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.touch(&id.module, backup);
        for key in keys {
            // The pair being recorded is the most recently used, the last; eviction keeps it there.
            let last = state.pairs.len() - 1;
            if let Some(namers) = state.pairs[last].names.get_mut(&key) {
                namers.others |= namers.first != by;
                continue;
            }
            let cost = key.len() + ENTRY_COST;
            if !state.reserve(cost) {
                continue;
            }
            let last = state.pairs.len() - 1;
            state.pairs[last].names.insert(
                key,
                Namers {
                    first: by,
                    others: false,
                },
            );
        }
    }

    /// For each of `items`, whether a serving call on an item other than the asker's named it in the
    /// call's backup, for the call's module; for a shadow's call, as the serving call on the same item
    /// was told.
    pub(crate) fn named_before(&self, id: &CallId, items: &[ResourceId]) -> Vec<bool> {
        let Some(backup) = id.backup.as_ref() else {
            return vec![false; items.len()];
        };
        let asker = namer(id.item());
        let keys: Vec<String> = items.iter().map(key).collect();
        let shadow = id.is_shadow();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !shadow {
            // A serving call's answers are kept for its shadows, even before anything is recorded.
            state.touch(&id.module, backup);
        }
        let Some(at) = state.position(&id.module, backup) else {
            return vec![false; items.len()];
        };
        let pair = &state.pairs[at];
        let answers: Vec<bool> = keys
            .iter()
            .map(|key| {
                if shadow && pair.not_before.contains(&(asker, key.clone())) {
                    return false;
                }
                pair.names.get(key).is_some_and(|n| n.besides(asker))
            })
            .collect();
        if !shadow {
            for (key, named) in keys.into_iter().zip(&answers) {
                let cost = key.len() + size_of::<u64>() + ENTRY_COST;
                let last = state.pairs.len() - 1;
                let entry = (asker, key);
                if *named {
                    // A later call on the item was told otherwise: its shadow will be too.
                    if state.pairs[last].not_before.remove(&entry) {
                        state.pairs[last].bytes -= cost;
                        state.bytes -= cost;
                    }
                } else if !state.pairs[last].not_before.contains(&entry) && state.reserve(cost) {
                    let last = state.pairs.len() - 1;
                    state.pairs[last].not_before.insert(entry);
                }
            }
        }
        answers
    }

    /// The bytes the records hold now (for tests and metrics).
    pub fn bytes(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

impl State {
    fn position(&self, module: &str, backup: &str) -> Option<usize> {
        self.pairs
            .iter()
            .position(|p| &*p.module == module && &*p.backup == backup)
    }

    /// Makes the pair the most recently used, the last (created if new, evicting the least recently
    /// used pair past [`MAX_BACKUPS`]).
    fn touch(&mut self, module: &Arc<str>, backup: &Arc<str>) {
        let pair = match self.position(module, backup) {
            Some(at) => self.pairs.remove(at),
            None => {
                if self.pairs.len() >= MAX_BACKUPS {
                    let gone = self.pairs.remove(0);
                    self.bytes -= gone.bytes;
                }
                Pair {
                    module: module.clone(),
                    backup: backup.clone(),
                    names: HashMap::new(),
                    not_before: HashSet::new(),
                    bytes: 0,
                    full: false,
                }
            }
        };
        self.pairs.push(pair);
    }

    /// Makes room for `cost` more bytes in the last pair (the one being written), dropping the least
    /// recently used others; false, and the pair marked full, when it does not fit.
    fn reserve(&mut self, cost: usize) -> bool {
        let last = self.pairs.len() - 1;
        if self.pairs[last].full {
            return false;
        }
        while self.bytes + cost > MAX_BYTES {
            let last = self.pairs.len() - 1;
            if !self.evict_least_recently_used(last) {
                self.pairs[last].full = true;
                return false;
            }
        }
        let last = self.pairs.len() - 1;
        self.pairs[last].bytes += cost;
        self.bytes += cost;
        true
    }

    /// Drops the least recently used pair, unless it is the one at `keep`; false when it is.
    fn evict_least_recently_used(&mut self, keep: usize) -> bool {
        if keep == 0 {
            return false;
        }
        let gone = self.pairs.remove(0);
        self.bytes -= gone.bytes;
        true
    }
}

/// What the `named-items` capability sees of a call: who calls, the records, and the work budget.
pub(crate) struct NamedItemsView<'a> {
    pub(super) call: &'a CallId,
    /// `None` where nothing is recorded (the CLI's runs, tests): every answer is `false`.
    pub(super) records: Option<&'a Arc<NamedItems>>,
    pub(super) budget: &'a mut WorkBudget,
}

/// The `named-items` import's host functions take a [`NamedItemsView`] of the call.
pub(super) struct NamedItemsHost;

impl wasmtime::component::HasData for NamedItemsHost {
    type Data<'a> = NamedItemsView<'a>;
}

impl Host for NamedItemsView<'_> {
    fn named_before(&mut self, items: Vec<wit_types::ResourceId>) -> wasmtime::Result<Vec<bool>> {
        self.budget
            .charge()
            .map_err(|limit| wasmtime::format_err!("named-items: {limit}"))?;
        if items.len() > MAX_ASKED {
            wasmtime::bail!(
                "named-items: {} items asked about in one call; the limit is {MAX_ASKED}",
                items.len()
            );
        }
        let (Some(records), true) = (self.records, self.call.names_items()) else {
            return Ok(vec![false; items.len()]);
        };
        let items: Vec<ResourceId> = items.into_iter().map(ResourceId::from).collect();
        Ok(records.named_before(self.call, &items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ResourceId {
        ResourceId {
            group: "instancetype.kubevirt.io".into(),
            resource: "virtualmachineclusterinstancetypes".into(),
            namespace: String::new(),
            name: name.into(),
        }
    }

    fn call(module: &str, backup: Option<&str>, vm: &str) -> CallId {
        let item = ItemRef {
            api_version: "kubevirt.io/v1".into(),
            kind: "VirtualMachine".into(),
            namespace: "ns".into(),
            name: vm.into(),
            ..ItemRef::default()
        };
        CallId::new(module.into(), "a", Some(item))
            .for_backup(backup.map(Arc::from))
            .naming_items()
    }

    #[test]
    fn an_item_named_for_another_item_of_the_same_backup_and_module_was_named_before() {
        let named = NamedItems::default();
        named.record(&call("kubevirt", Some("b1"), "vm1"), &[id("u1.small")]);
        let asked = [id("u1.small"), id("u1.large")];
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b1"), "vm2"), &asked),
            [true, false]
        );
        // Not for the item that named it, not in another backup, not for another module.
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b1"), "vm1"), &asked),
            [false, false]
        );
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b2"), "vm2"), &asked),
            [false, false]
        );
        assert_eq!(
            named.named_before(&call("other", Some("b1"), "vm2"), &asked),
            [false, false]
        );
        // Named by a second item too: it counts for the first one now.
        named.record(&call("kubevirt", Some("b1"), "vm2"), &[id("u1.small")]);
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b1"), "vm1"), &asked),
            [true, false]
        );
    }

    #[test]
    fn a_shadow_is_told_what_the_serving_call_on_its_item_was_told() {
        let named = NamedItems::default();
        let asked = [id("u1.small")];
        let serving = call("kubevirt", Some("b1"), "vm1");
        let shadow = || call("kubevirt", Some("b1"), "vm1").into_shadow();
        assert_eq!(named.named_before(&serving, &asked), [false]);
        // Another VM's block names it after the serving call and before its shadow's.
        named.record(&call("kubevirt", Some("b1"), "vm2"), &asked);
        assert_eq!(named.named_before(&shadow(), &asked), [false]);
        // A later serving call on the item is told it was named, and so is its shadow.
        assert_eq!(named.named_before(&serving, &asked), [true]);
        assert_eq!(named.named_before(&shadow(), &asked), [true]);
        // A shadow records nothing: the records only hold what Velero was given.
        let before = named.bytes();
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b2"), "vm1").into_shadow(), &asked),
            [false]
        );
        assert_eq!(named.bytes(), before);
    }

    #[test]
    fn an_item_called_again_at_another_api_version_is_the_same_item() {
        let named = NamedItems::default();
        named.record(&call("kubevirt", Some("b1"), "vm1"), &[id("x")]);
        let mut again = call("kubevirt", Some("b1"), "vm1");
        if let Some(item) = again.item.as_mut() {
            item.api_version = "kubevirt.io/v1alpha3".into();
        }
        assert_eq!(named.named_before(&again, &[id("x")]), [false]);
    }

    #[test]
    fn a_call_without_a_backup_uid_records_and_finds_nothing() {
        let named = NamedItems::default();
        named.record(&call("kubevirt", None, "vm1"), &[id("u1.small")]);
        assert_eq!(named.bytes(), 0);
        assert_eq!(
            named.named_before(&call("kubevirt", None, "vm2"), &[id("u1.small")]),
            [false]
        );
    }

    #[test]
    fn the_least_recently_used_backup_goes_first() {
        let named = NamedItems::default();
        for b in 0..MAX_BACKUPS {
            named.record(&call("kubevirt", Some(&format!("b{b}")), "vm1"), &[id("x")]);
        }
        // b0 is used again, so b1 is the least recently used when one more backup comes.
        named.record(&call("kubevirt", Some("b0"), "vm1"), &[id("y")]);
        named.record(&call("kubevirt", Some("new"), "vm1"), &[id("x")]);
        let asked = [id("x")];
        // Asked from shadows, which change nothing (a serving call's question makes its backup the
        // most recently used).
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b0"), "vm2").into_shadow(), &asked),
            [true]
        );
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b1"), "vm2").into_shadow(), &asked),
            [false]
        );
        assert_eq!(
            named.named_before(&call("kubevirt", Some("b2"), "vm2").into_shadow(), &asked),
            [true]
        );
    }

    #[test]
    fn the_records_hold_at_most_the_byte_bound_and_forget_rather_than_grow() {
        let named = NamedItems::default();
        let long = "n".repeat(200);
        let many: Vec<ResourceId> = (0..MAX_BYTES / 200 + 10)
            .map(|i| id(&format!("{long}{i}")))
            .collect();
        // An older backup's records go first; then the one backup stops recording.
        named.record(&call("kubevirt", Some("old"), "vm1"), &[id("x")]);
        named.record(&call("kubevirt", Some("b1"), "vm1"), &many);
        assert!(named.bytes() <= MAX_BYTES, "{}", named.bytes());
        assert_eq!(
            named.named_before(&call("kubevirt", Some("old"), "vm2"), &[id("x")]),
            [false]
        );
        let answers = named.named_before(&call("kubevirt", Some("b1"), "vm2"), &many);
        assert!(answers[0], "the first names are kept");
        assert!(!answers[many.len() - 1], "the last ones did not fit");
    }
}
