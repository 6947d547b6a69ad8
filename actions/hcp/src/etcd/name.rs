//! The HCPEtcdBackup's name (docs/hcp.md#s4-4-4): `oadp-<backup name cut to 53 bytes, trailing '-'
//! trimmed>-<4 characters>`, at most 63 bytes (HyperShift uses it as a label value).
//!
//! Upstream draws the 4 characters at random and remembers the name in memory. Here they are derived
//! from the Backup's `metadata.uid` (its name when it has none), so every call of the same backup, in
//! any plugin process, names the same CR, and two backups of the same name (a deleted and re-created
//! Backup) still get different CRs.

use velero_wasm_sdk::Object;

/// The characters of the suffix: no vowels (no words), no look-alikes (0/o, 1/l, 3/e).
pub const ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// The longest part of the backup name kept: 63 − len("oadp-") − len("-") − 4.
pub const MAX_STEM: usize = 53;

/// The CR name for `backup`.
pub fn cr_name(backup: &Object) -> String {
    let seed = if backup.uid().is_empty() {
        backup.name()
    } else {
        backup.uid()
    };
    name_for(backup.name(), seed)
}

/// The CR name for a backup named `backup_name`, with the suffix derived from `seed`.
pub fn name_for(backup_name: &str, seed: &str) -> String {
    let mut cut = backup_name.len().min(MAX_STEM);
    while !backup_name.is_char_boundary(cut) {
        cut -= 1;
    }
    let stem = backup_name[..cut].trim_end_matches('-');
    format!("oadp-{stem}-{}", suffix(seed))
}

/// Four characters of [`ALPHABET`] from the FNV-1a hash of `seed`.
pub fn suffix(seed: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (0..4)
        .map(|_| {
            let c = ALPHABET[(hash % 27) as usize] as char;
            hash /= 27;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(name: &str) -> (&str, &str) {
        let (stem, suffix) = name.rsplit_once('-').unwrap();
        (stem, suffix)
    }

    #[test]
    fn upstream_name_table_holds_with_derived_suffixes() {
        let a53 = "a".repeat(53);
        for (backup, stem) in [
            ("test-backup".to_string(), "oadp-test-backup".to_string()),
            (a53.clone(), format!("oadp-{a53}")),
            (format!("{a53}X"), format!("oadp-{a53}")),
            (format!("{a53}-bbb"), format!("oadp-{a53}")),
            (
                "2q8dk2uepjpfcvm4lqg92rlpjshj219a-hourly-20260512140053".to_string(),
                "oadp-2q8dk2uepjpfcvm4lqg92rlpjshj219a-hourly-2026051214005".to_string(),
            ),
        ] {
            let name = name_for(&backup, "uid-1");
            let (got_stem, suffix) = parts(&name);
            assert_eq!(got_stem, stem, "{backup}");
            assert_eq!(suffix.len(), 4);
            assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)), "{name}");
            assert!(name.len() <= 63, "{name}");
            assert!(!name.contains("--"), "{name}");
        }
        // 52 characters then '-': the dash goes too.
        let name = name_for(&format!("{}-x", "a".repeat(52)), "u");
        assert_eq!(parts(&name).0, format!("oadp-{}", "a".repeat(52)));
    }

    #[test]
    fn the_suffix_is_stable_per_seed_and_varies_between_seeds() {
        assert_eq!(
            suffix("0d6e1f1c-3a54-4a4e-9d6a-6b1f6c1d2e3f"),
            suffix("0d6e1f1c-3a54-4a4e-9d6a-6b1f6c1d2e3f")
        );
        let distinct: std::collections::BTreeSet<String> =
            (0..200).map(|i| suffix(&format!("uid-{i}"))).collect();
        assert!(distinct.len() > 190, "{}", distinct.len());
    }

    #[test]
    fn the_uid_seeds_the_suffix_and_the_name_stands_in_for_it() {
        let with_uid = Object::parse(r#"{"metadata":{"name":"nightly","uid":"u-1"}}"#).unwrap();
        let without = Object::parse(r#"{"metadata":{"name":"nightly"}}"#).unwrap();
        assert_eq!(
            cr_name(&with_uid),
            format!("oadp-nightly-{}", suffix("u-1"))
        );
        assert_eq!(
            cr_name(&without),
            format!("oadp-nightly-{}", suffix("nightly"))
        );
    }
}
