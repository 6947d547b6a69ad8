//! What `diff` takes in memory for a backup's items, counted against one bound while they are read:
//! what it holds for the whole run (each item's text, once, and what the item list and the two
//! clusters keep of it), and the room to compare one item on both sides at once (the parse of the
//! item that costs most once parsed, and copies of the longest text). Items run in parallel only
//! as far as that room fits the bound again. docs/limits.md has the arithmetic for a 512 MiB
//! container.

use std::mem::size_of;

use crate::cluster::fixture;
use crate::heap_cost::{allocation, string_map};
use crate::json_cost::ParsedCost;

use super::backup_item::BackupItem;

/// Most memory `diff` takes for the items of one backup: held, and while comparing them.
pub(crate) const MAX_ITEMS_MEMORY: u64 = 160 << 20;

/// Copies of an item's text one set's actions may make the host hold at once beside a parse: the
/// backup request's item, a restore request's item as backed up and as reset (written out, with
/// room to grow), and an object read from the cluster.
const TEXT_COPIES: u64 = 5;

/// The memory a backup's items take, counted as they are read.
#[derive(Debug, Default, Clone)]
pub(crate) struct ItemsMemory {
    /// Held for the whole run.
    held: u64,
    /// The most parsing one item holds at once.
    widest_parse: u64,
    /// The longest item text.
    longest_text: u64,
}

/// Items over [`MAX_ITEMS_MEMORY`]: what they would take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Over {
    /// Held for the whole run.
    pub(crate) held: u64,
    /// To compare one item on both sides.
    pub(crate) per_comparison: u64,
    /// What parsing the costliest item holds at once.
    pub(crate) widest_parse: u64,
}

impl std::fmt::Display for Over {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the items up to this one would take {} ({} held, and {} to compare one on both sides, \
             where parsing the costliest takes {}), over the {} diff takes for a backup's items",
            mib(self.held + self.per_comparison),
            mib(self.held),
            mib(self.per_comparison),
            mib(self.widest_parse),
            mib(MAX_ITEMS_MEMORY)
        )
    }
}

/// `bytes` in MiB, rounded up.
fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

impl ItemsMemory {
    /// Counts one more item, parsed at `parsed`'s cost; refuses it when the items so far, with the
    /// room to compare one, would be over [`MAX_ITEMS_MEMORY`].
    pub(crate) fn add(&mut self, item: &BackupItem, parsed: &ParsedCost) -> Result<(), Over> {
        if self.held == 0 {
            self.held = 2 * fixture::held_per_cluster();
        }
        self.held += held_for(item);
        self.widest_parse = self.widest_parse.max(parsed.peak);
        self.longest_text = self.longest_text.max(item.text.len() as u64);
        if self.held + self.per_comparison() > MAX_ITEMS_MEMORY {
            return Err(Over {
                held: self.held,
                per_comparison: self.per_comparison(),
                widest_parse: self.widest_parse,
            });
        }
        Ok(())
    }

    /// What comparing one item on both sides may make the host hold besides what is held: per side,
    /// a parse of any item (a restore action's item reset, a field selector or a write in the
    /// cluster) and [`TEXT_COPIES`] copies of a text.
    pub(crate) fn per_comparison(&self) -> u64 {
        2 * (self.widest_parse + TEXT_COPIES * allocation(self.longest_text))
    }

    /// Held for the whole run.
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    /// How many items may be compared at once within the bound, from 1 to `most`.
    pub(crate) fn comparisons_at_once(&self, most: usize) -> usize {
        let room = MAX_ITEMS_MEMORY.saturating_sub(self.held);
        match room.checked_div(self.per_comparison()) {
            Some(n) => usize::try_from(n)
                .unwrap_or(usize::MAX)
                .clamp(1, most.max(1)),
            None => most.max(1),
        }
    }
}

/// What `diff` holds for one item for the whole run: its text (once: the item list and both clusters
/// share it), where it was read from, its slot in the list of items (a list that grows by doubling,
/// so up to three slots while it moves), its identity, and what the two clusters keep of it. The
/// first item also counts what the two clusters hold besides their objects.
fn held_for(item: &BackupItem) -> u64 {
    let identity = &item.identity;
    let strings = [
        &identity.api_version,
        &identity.kind,
        &identity.namespace,
        &identity.name,
    ]
    .iter()
    .map(|s| allocation(s.len() as u64))
    .sum::<u64>();
    let labels = string_map(&identity.labels);
    // An `Arc<str>`: two counts, then the text.
    allocation(2 * size_of::<usize>() as u64 + item.text.len() as u64)
        + allocation(item.from.len() as u64)
        + 3 * size_of::<BackupItem>() as u64
        + strings
        + labels
        + fixture::held_per_item(identity, 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocation_tally::measure;
    use crate::cli::backup_item::item;
    use crate::cluster::fixture::FixtureCluster;
    use crate::json_cost::parsed_cost;

    fn config_map(name: &str, labels: usize) -> String {
        let labels: serde_json::Map<String, serde_json::Value> = (0..labels)
            .map(|i| {
                (
                    format!("example.com/label-{i}"),
                    format!("value-{i}").into(),
                )
            })
            .collect();
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "apps", "labels": labels},
            "data": {"a": "b"}
        })
        .to_string()
    }

    /// What reading `texts` as items and putting them into two clusters allocates, against what
    /// [`ItemsMemory`] counts for them.
    fn held(shape: &str, texts: &[String]) -> ItemsMemory {
        let ((items, memory, clusters), tally) = measure(|| {
            let mut memory = ItemsMemory::default();
            let mut items = Vec::new();
            for (i, text) in texts.iter().enumerate() {
                let from = format!("resources/configmaps/namespaces/apps/item-{i}.json");
                let item = item(from, text.clone()).unwrap();
                memory.add(&item, &parsed_cost(text).unwrap()).unwrap();
                items.push(item);
            }
            let cluster = FixtureCluster::of_items(
                items
                    .iter()
                    .map(|i| (i.from.as_str(), &i.identity, &i.text)),
                std::time::UNIX_EPOCH,
            )
            .unwrap();
            let copy = cluster.copy(std::time::UNIX_EPOCH);
            (items, memory, [cluster, copy])
        });
        assert!(
            tally.after <= memory.held(),
            "{shape}: the items and clusters hold {} bytes, more than the {} counted",
            tally.after,
            memory.held()
        );
        assert!(
            tally.peak <= memory.held() + memory.per_comparison(),
            "{shape}: reading them held {} bytes at once, more than the {} counted with room to \
             compare one",
            tally.peak,
            memory.held() + memory.per_comparison()
        );
        drop((items, clusters));
        memory
    }

    #[test]
    fn what_is_counted_bounds_what_the_items_and_both_clusters_allocate() {
        let small: Vec<String> = (0..10_000)
            .map(|i| config_map(&format!("cm-{i}"), 0))
            .collect();
        held("10 000 small items", &small);
        let labelled: Vec<String> = (0..1000)
            .map(|i| config_map(&format!("cm-{i}"), 100))
            .collect();
        held("1000 items of 100 labels", &labelled);
        let long: Vec<String> = (0..100)
            .map(|i| config_map(&format!("{i}-{}", "n".repeat(10_000)), 1))
            .collect();
        held("100 items of long names", &long);
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/kubevirt/cluster");
        let fixtures: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        held("the kubevirt fixture items", &fixtures);
    }

    #[test]
    fn an_item_whose_parse_takes_the_room_of_many_is_compared_alone() {
        let mut memory = ItemsMemory::default();
        let small = item("a.json".into(), config_map("a", 1)).unwrap();
        memory
            .add(&small, &parsed_cost(&small.text).unwrap())
            .unwrap();
        assert_eq!(memory.comparisons_at_once(8), 8);
        // 200 000 values: 16 MiB and more once parsed, so 32 MiB and more to compare one.
        let zeros = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"z"}},"z":[{}]}}"#,
            vec!["0"; 200_000].join(",")
        );
        let big = item("z.json".into(), zeros).unwrap();
        memory.add(&big, &parsed_cost(&big.text).unwrap()).unwrap();
        let at_once = memory.comparisons_at_once(8);
        assert!((1..8).contains(&at_once), "{at_once}");
        assert!(at_once as u64 * memory.per_comparison() + memory.held() <= MAX_ITEMS_MEMORY);
    }

    #[test]
    fn an_item_whose_parse_alone_passes_the_bound_is_refused() {
        // 8 MiB of [0,0,…]: four million values, over 300 MiB once parsed.
        let zeros = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"z"}},"z":[{}]}}"#,
            vec!["0"; 4 << 20].join(",")
        );
        let big = item("z.json".into(), zeros).unwrap();
        let mut memory = ItemsMemory::default();
        let over = memory
            .add(&big, &parsed_cost(&big.text).unwrap())
            .unwrap_err();
        assert!(over.widest_parse > 320 << 20, "{over:?}");
        let said = over.to_string();
        assert!(
            said.contains(&format!("over the {} MiB", MAX_ITEMS_MEMORY >> 20)),
            "{said}"
        );
    }
}
