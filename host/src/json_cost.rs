//! What a JSON text costs in memory once parsed into a [`serde_json::Value`], found while the text is
//! checked and without building the tree. This crate's `Value` keeps object keys in order
//! (`preserve_order`): an object is an `IndexMap`, whose entries and hash table grow in steps, so a
//! text's parsed size depends on its shape far more than on its length (8 MiB of `[0,0,…]` is four
//! million values of 80 bytes each). `diff` uses it to know, before it holds a backup's items, what
//! parsing any of them can take.
//!
//! The cost is computed from the sizes and growth rules of the types the parse really builds:
//! `size_of::<Value>()` per array element, `Vec`'s doubling from a capacity of 4, indexmap's entries
//! (hash, key, value) sized to its hash table's capacity, and hashbrown's table of `usize` indices
//! (power-of-two buckets, 7/8 full at most, a control byte per bucket and a 16-byte group). Each
//! allocation is charged as the allocator rounds it (`heap_cost::allocation`). A unit test checks the result
//! against what the parse allocates, for the worst shapes.

use std::fmt;
use std::mem::size_of;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::heap_cost::allocation;

/// One value's slot: an array element, an object's value, or the parsed document itself.
const VALUE: u64 = size_of::<Value>() as u64;
/// One object entry as indexmap stores it (`Bucket`): the key's hash, the key and the value.
const ENTRY: u64 = (size_of::<usize>() + size_of::<String>() + size_of::<Value>()) as u64;
/// One bucket of an object's hash table: the index of its entry.
const INDEX: u64 = size_of::<usize>() as u64;
/// hashbrown's control group (SSE2's width; 8 elsewhere): that many control bytes more per table.
const GROUP: u64 = 16;

/// serde_json's key for an object that stands for raw JSON text: `{"$serde_json::private::RawValue":
/// "<text>"}` parses as the value of `<text>` (serde_json's `raw_value` feature, on in this build).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// What parsing one text into a [`Value`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParsedCost {
    /// Bytes the parsed tree holds, its own slot included.
    pub kept: u64,
    /// Bytes held at most while parsing: [`Self::kept`], the parser's buffer for strings with
    /// escapes, and the larger of the buffer a growing array or object leaves when it moves and that
    /// buffer's own last move.
    pub peak: u64,
    /// Values in the text: scalars, strings, arrays and objects.
    pub values: u64,
    /// Whether the text is a JSON object.
    pub object: bool,
}

/// The cost of parsing `text` into a [`Value`], or serde_json's error when it is not JSON (the same
/// error the parse would give, with its line and column).
pub fn parsed_cost(text: &str) -> Result<ParsedCost, serde_json::Error> {
    let tally: Tally = serde_json::from_str(text)?;
    let kept = VALUE + tally.kept;
    // serde_json's scratch buffer holds one string with escapes at a time, decoded; it grows by
    // doubling, so it holds at most twice the longest, and its last move at most the longest again.
    let scratch = allocation(2 * tally.longest);
    Ok(ParsedCost {
        kept,
        peak: kept + scratch + tally.moved.max(allocation(tally.longest)),
        values: tally.values,
        object: tally.object,
    })
}

/// What a value costs, besides its own slot (its parent's array or entry holds that).
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Bytes its allocations hold once parsed.
    kept: u64,
    /// The largest buffer a growing container within it gives up when it moves (alive, with the new
    /// one, while the move lasts), or what the parse of a raw value holds beyond its result.
    moved: u64,
    /// The longest string or key within it, decoded.
    longest: u64,
    values: u64,
    object: bool,
}

impl Tally {
    fn add(&mut self, inner: Tally) {
        self.kept += inner.kept;
        self.moved = self.moved.max(inner.moved);
        self.longest = self.longest.max(inner.longest);
        self.values += inner.values;
    }
}

/// The capacity `Vec::push` leaves after `n` pushes from empty: doubling, from 4.
fn vec_capacity(n: u64) -> u64 {
    match n {
        0 => 0,
        n => n.next_power_of_two().max(4),
    }
}

/// The entries a hash table of `buckets` buckets holds before it grows (one bucket is kept empty up
/// to 8, an eighth above).
fn table_capacity(buckets: u64) -> u64 {
    if buckets <= 8 {
        buckets - 1
    } else {
        buckets / 8 * 7
    }
}

/// The allocations of an object's index table and entries with room for `entries`, and those of the
/// step before it (what its last growth moved away from).
fn object_allocations(entries: u64) -> (u64, u64) {
    if entries == 0 {
        return (0, 0);
    }
    let mut buckets = 4;
    while table_capacity(buckets) < entries {
        buckets *= 2;
    }
    let at = |buckets: u64| {
        allocation(buckets * INDEX + buckets + GROUP) + allocation(table_capacity(buckets) * ENTRY)
    };
    let before = if buckets > 4 { at(buckets / 2) } else { 0 };
    (at(buckets), before)
}

impl<'de> Deserialize<'de> for Tally {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Tally, D::Error> {
        deserializer.deserialize_any(TallyVisitor)
    }
}

struct TallyVisitor;

impl TallyVisitor {
    fn scalar<E>(self) -> Result<Tally, E> {
        Ok(Tally {
            values: 1,
            ..Tally::default()
        })
    }
}

impl<'de> Visitor<'de> for TallyVisitor {
    type Value = Tally;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Tally, E> {
        self.scalar()
    }

    fn visit_i64<E>(self, _: i64) -> Result<Tally, E> {
        self.scalar()
    }

    fn visit_u64<E>(self, _: u64) -> Result<Tally, E> {
        self.scalar()
    }

    fn visit_f64<E>(self, _: f64) -> Result<Tally, E> {
        self.scalar()
    }

    fn visit_unit<E>(self) -> Result<Tally, E> {
        self.scalar()
    }

    fn visit_str<E>(self, s: &str) -> Result<Tally, E> {
        Ok(Tally {
            kept: allocation(s.len() as u64),
            longest: s.len() as u64,
            values: 1,
            ..Tally::default()
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tally, A::Error> {
        let mut tally = Tally::default();
        let mut n = 0u64;
        while let Some(element) = seq.next_element::<Tally>()? {
            tally.add(element);
            n += 1;
        }
        let capacity = vec_capacity(n);
        tally.kept += allocation(capacity * VALUE);
        if capacity > 4 {
            tally.moved = tally.moved.max(allocation(capacity / 2 * VALUE));
        }
        tally.values += 1;
        Ok(tally)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tally, A::Error> {
        let mut tally = Tally {
            values: 1,
            object: true,
            ..Tally::default()
        };
        let Some(first) = map.next_key::<Key>()? else {
            return Ok(tally);
        };
        if first.raw {
            // serde_json copies the string and parses it as the value in this object's place.
            let text: String = map.next_value()?;
            let inner = parsed_cost(&text).map_err(de::Error::custom)?;
            let copy = allocation(text.len() as u64);
            return Ok(Tally {
                kept: inner.kept - VALUE,
                moved: copy + inner.peak - inner.kept,
                longest: text.len() as u64,
                values: inner.values,
                object: inner.object,
            });
        }
        let mut entries = 1u64;
        tally.longest = first.len;
        tally.kept += allocation(first.len);
        tally.add(map.next_value::<Tally>()?);
        while let Some(key) = map.next_key::<Key>()? {
            entries += 1;
            tally.longest = tally.longest.max(key.len);
            tally.kept += allocation(key.len);
            tally.add(map.next_value::<Tally>()?);
        }
        let (kept, before) = object_allocations(entries);
        tally.kept += kept;
        tally.moved = tally.moved.max(before);
        Ok(tally)
    }
}

/// An object key: its length, and whether it is serde_json's raw-value token.
struct Key {
    len: u64,
    raw: bool,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E>(self, s: &str) -> Result<Key, E> {
                Ok(Key {
                    len: s.len() as u64,
                    raw: s == RAW_VALUE_TOKEN,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocation_tally::measure;

    /// `text` parsed for real, against its computed cost: never above it, and not far below (the
    /// model is of the real types, not a generous guess).
    fn holds(shape: &str, text: &str) -> ParsedCost {
        let (cost, kept) = bounds(shape, text);
        assert!(
            cost.kept <= kept + kept * 3 / 10 + 256,
            "{shape}: computed {} bytes for a parse that kept {kept}",
            cost.kept
        );
        cost
    }

    /// `text` parsed for real, against its computed cost: never above it. Returns the cost and what
    /// the parse kept.
    fn bounds(shape: &str, text: &str) -> (ParsedCost, u64) {
        let cost = parsed_cost(text).unwrap();
        let (value, held) = measure(|| serde_json::from_str::<Value>(text).unwrap());
        // The parsed value's own slot is on this stack, not on the heap the tally sees.
        let (kept, peak) = (held.after + VALUE, held.peak + VALUE);
        assert!(
            kept <= cost.kept,
            "{shape}: the parse kept {kept} bytes, more than the computed {}",
            cost.kept
        );
        assert!(
            peak <= cost.peak,
            "{shape}: the parse held {peak} bytes at once, more than the computed {}",
            cost.peak
        );
        // What mimalloc may take: a size class up to a quarter above each request.
        let classes = held.requested + held.requested / 4;
        assert!(
            classes <= cost.kept + held.allocations,
            "{shape}: the parse asked for {} bytes in {} allocations, more than the computed {} \
             allows with mimalloc's rounding",
            held.requested,
            held.allocations,
            cost.kept
        );
        drop(value);
        (cost, kept)
    }

    fn repeated(item: &str, n: usize) -> String {
        format!("[{}]", vec![item; n].join(","))
    }

    #[test]
    fn the_cost_bounds_what_parsing_the_worst_shapes_allocates() {
        for n in [0, 1, 4, 5, 8, 9, 1000, 1024, 1025, 100_000] {
            for item in ["0", "\"\"", "{}", "[]", "null", "1.5e300", "\"a\"", "[0]"] {
                holds(&format!("{n} × {item}"), &repeated(item, n));
            }
        }
        // Objects at every step of their table's growth: 3, 7, 14, 28 … entries, and one more.
        for n in [1, 3, 4, 7, 8, 14, 15, 28, 29, 56, 57, 100, 1000, 50_000] {
            let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
            holds(&format!("{n} keys"), &format!("{{{}}}", keys.join(",")));
            holds(
                &format!("10 000 objects of {n} keys"),
                &repeated(&format!("{{{}}}", keys.join(",")), 10_000.min(200_000 / n)),
            );
        }
        let long_key = format!("\"{}\"", "k".repeat(100_000));
        holds("long keys", &repeated(&format!("{{{long_key}:0}}"), 20));
        holds("long strings", &repeated(&long_key, 20));
        holds(
            "escaped strings",
            &repeated(&format!("\"{}\"", "\\u0041\\n".repeat(10_000)), 20),
        );
        holds(
            "many small objects",
            &repeated(r#"{"a":1,"b":"x"}"#, 100_000),
        );
        // The value a later key replaces was held until then: counted too.
        bounds(
            "duplicate keys",
            &repeated(r#"{"a":[1,2,3],"a":[4]}"#, 1000),
        );
        // Deep as serde_json allows (127 levels, the array around them one), many times over.
        let deep = format!("{}{}", "[".repeat(126), "]".repeat(126));
        holds("deep arrays", &repeated(&deep, 1000));
        let deep = format!("{}0{}", r#"{"a":"#.repeat(126), "}".repeat(126));
        holds("deep objects", &repeated(&deep, 1000));
        // serde_json parses this object as the JSON text of its string.
        let raw = format!(
            r#"{{"{RAW_VALUE_TOKEN}":"{}"}}"#,
            repeated("0", 10_000).replace('"', "\\\"")
        );
        let cost = holds("a raw value", &raw);
        assert!(!cost.object && cost.values == 10_001, "{cost:?}");
    }

    #[test]
    fn the_cost_bounds_what_the_fixture_items_allocate() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/kubevirt/cluster");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let cost = holds(&path.display().to_string(), &text);
            assert!(cost.object, "{}", path.display());
        }
    }

    #[test]
    fn eight_mebibytes_of_zeros_are_four_million_values() {
        // The shape that took diff past its memory: an item of 8 MiB of [0,0,…], 72 bytes a value.
        let zeros = repeated("0", 4 << 20);
        let cost = parsed_cost(&zeros).unwrap();
        assert_eq!(cost.values, (4 << 20) + 1);
        assert!(cost.kept >= (4 << 20) * VALUE, "{cost:?}");
        assert!(cost.kept > 280 << 20, "{cost:?}");
        assert!(!cost.object);
    }

    #[test]
    fn not_json_is_serde_jsons_error() {
        let e = parsed_cost("{\"a\": [1, 2,]}").unwrap_err();
        assert_eq!(
            e.to_string(),
            serde_json::from_str::<Value>("{\"a\": [1, 2,]}")
                .unwrap_err()
                .to_string()
        );
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parsed_cost(&deep).is_err());
        assert!(parsed_cost(r#"{"a":1}"#).unwrap().object);
    }
}
