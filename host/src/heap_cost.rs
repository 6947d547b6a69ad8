//! What the host's own data takes on the heap, as the allocator takes it: the rounding of one
//! allocation, and the nodes of a `BTreeMap`. Memory bounds that count what the host holds for an
//! input (`diff`'s items) add these up instead of guessing a size per thing.

/// Bytes the allocator takes for a request of `bytes`: the larger of what glibc's malloc takes (an
/// 8-byte header, rounded up to 16 and 32 at least; from its mmap threshold on, whole pages with a
/// 16-byte header) and what mimalloc (the static build's allocator) takes (a size class at most a
/// quarter above the request).
pub const fn allocation(bytes: u64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    let glibc = if bytes < MMAP_THRESHOLD {
        let chunk = (bytes + 8).div_ceil(16) * 16;
        if chunk < 32 {
            32
        } else {
            chunk
        }
    } else {
        (bytes + 16).div_ceil(PAGE) * PAGE
    };
    let mimalloc = (bytes + bytes / 4).div_ceil(8) * 8;
    if glibc > mimalloc {
        glibc
    } else {
        mimalloc
    }
}

/// glibc's default mmap threshold: larger requests are mapped pages of their own.
const MMAP_THRESHOLD: u64 = 128 << 10;
/// The page size those mappings are rounded to.
const PAGE: u64 = 4096;

/// Bytes one node of a `BTreeMap` with entries of `entry` bytes (key and value) takes, at most: its
/// parent pointer, index and length, room for 11 entries and, when internal, 12 children.
pub fn btree_node(entry: u64) -> u64 {
    allocation(LEAF + 11 * entry + 12 * size_of::<usize>() as u64)
}

/// A leaf node's parent pointer, index in the parent and length.
const LEAF: u64 = 16;

/// Bytes a `BTreeMap`'s nodes take per entry, besides its root: every node but the root holds 5
/// entries at least, so there are at most `len / 5` of them. The keys' and values' own allocations
/// are not included.
pub fn btree_entry(entry: u64) -> u64 {
    btree_node(entry).div_ceil(5)
}

/// Bytes the nodes of a `BTreeMap` of `len` entries take: up to 11, one leaf; past that, a root and
/// [`btree_entry`] each.
pub fn btree_map(len: u64, entry: u64) -> u64 {
    match len {
        0 => 0,
        1..=11 => allocation(LEAF + 11 * entry),
        _ => btree_node(entry) + len * btree_entry(entry),
    }
}

/// Bytes a map of strings (labels) takes: its nodes and its strings.
pub fn string_map(map: &std::collections::BTreeMap<String, String>) -> u64 {
    btree_map(map.len() as u64, 2 * size_of::<String>() as u64)
        + map
            .iter()
            .map(|(k, v)| allocation(k.len() as u64) + allocation(v.len() as u64))
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocation_tally::measure;
    use std::collections::BTreeMap;

    #[test]
    fn an_allocation_is_counted_as_glibc_or_mimalloc_would_take_it_at_most() {
        for bytes in (1..5000).chain([128 << 10, (128 << 10) + 1, 8 << 20]) {
            let counted = allocation(bytes);
            let glibc = if bytes >= 128 << 10 {
                (bytes + 16).div_ceil(4096) * 4096
            } else {
                (bytes + 8).div_ceil(16).max(2) * 16
            };
            assert!(counted >= glibc, "{bytes}: {counted} < glibc's {glibc}");
            assert!(counted >= bytes + bytes / 4, "{bytes}: {counted}");
            assert!(
                counted <= glibc.max(bytes + bytes / 4) + 16,
                "{bytes}: {counted}"
            );
        }
        assert_eq!(allocation(0), 0);
    }

    #[test]
    fn a_map_of_strings_is_counted_at_least_as_it_allocates() {
        for len in [1, 2, 5, 11, 12, 30, 100, 1000, 10_000] {
            // Inserted in an order that splits nodes, and cloned (as a cluster's copy clones).
            let (maps, held) = measure(|| {
                let mut map = BTreeMap::new();
                for i in (0..len).rev().chain(0..len) {
                    map.insert(format!("example.com/label-{i}"), format!("value-{i}"));
                }
                let copy = map.clone();
                [map, copy]
            });
            let counted = 2 * string_map(&maps[0]);
            assert!(
                held.after <= counted,
                "{len} labels: {} bytes held, {counted} counted",
                held.after
            );
        }
    }
}
