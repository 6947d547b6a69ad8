//! The backup archive reader of `diff` (`cli::diff_archive::read`): a gzipped tar as Velero writes
//! it, or a file of manifests, within its bounds (entries, item bytes, extension headers, the memory
//! its items take), then the items put into the fixture cluster `diff` runs the actions against.
//!
//! Input: a mode byte, then either the file's bytes (as they are, or gzipped), or entries that are
//! laid out as a tar (each: an entry type byte, a name and data; long names, PAX headers and any
//! other type included) and gzipped, split into one or more gzip members.
#![no_main]

use std::io::Write;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use velero_wasm::read_backup_archive;
use velero_wasm::FixtureCluster;

/// One tar entry as the fuzzer lays it out.
#[derive(Arbitrary, Debug)]
struct Entry {
    /// The header's type flag (`0` file, `5` directory, `L` GNU long name, `x` PAX, …).
    kind: u8,
    /// The header's name field (up to 100 bytes are kept).
    name: Vec<u8>,
    /// The entry's data.
    data: Vec<u8>,
}

/// A directory per process, with the archive file in it.
fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
}

fn gzip(members: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for member in members {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(member).expect("writing to memory");
        out.extend(encoder.finish().expect("writing to memory"));
    }
    out
}

/// Names the fuzzer is unlikely to find byte by byte: Velero's layout.
const NAMES: &[&str] = &[
    "resources/pods/namespaces/ns/p.json",
    "./resources/persistentvolumes/cluster/pv.json",
    "resources/pods/v1-preferredversion/namespaces/ns/p.json",
    "metadata/version",
];

fn tar(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        let name: &[u8] = match entry.name.as_slice() {
            [0xff, i] => NAMES[*i as usize % NAMES.len()].as_bytes(),
            name => name,
        };
        let field = &mut header.as_old_mut().name;
        let n = name.len().min(field.len());
        field[..n].copy_from_slice(&name[..n]);
        header.set_entry_type(tar::EntryType::new(entry.kind));
        header.set_size(entry.data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append(&header, entry.data.as_slice())
            .expect("writing to memory");
    }
    builder.into_inner().expect("writing to memory")
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = match mode % 3 {
        0 => rest.to_vec(),
        1 => gzip(&[rest]),
        _ => {
            let mut u = Unstructured::new(rest);
            let Ok(entries) = Vec::<Entry>::arbitrary(&mut u) else {
                return;
            };
            let archive = tar(&entries);
            // Cut into members where the mode says: every member must be read.
            let cut = (mode as usize / 3) % (archive.len() + 1);
            gzip(&[&archive[..cut], &archive[cut..]])
        }
    };
    let path = dir().path().join("backup.tar.gz");
    std::fs::write(&path, &bytes).expect("the temporary file is writable");
    let Ok(backup) = read_backup_archive(&path) else {
        return;
    };
    // What diff promises the fixture cluster: every item is an object.
    assert!(backup.items.iter().all(|item| {
        serde_json::from_str::<serde_json::Value>(&item.text).is_ok_and(|v| v.is_object())
    }));
    // The items in the cluster diff runs the actions against: two of one name are refused with a
    // reason, so only no panic is asked.
    let _ = FixtureCluster::of_items(
        backup
            .items
            .iter()
            .map(|i| (i.from.as_str(), &i.identity, &i.text)),
        std::time::UNIX_EPOCH,
    );
});
