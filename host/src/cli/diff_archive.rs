//! The items of a backup for `diff`: read from a Velero backup archive (the `.tar.gz` Velero writes to
//! object storage, layout in docs/backup-archive.md) or from a directory of manifests, with bounds on
//! what an archive may make us read, and what holding and comparing its items takes counted against
//! `diff`'s memory bound (`diff_memory`) as they are read.

use std::io::Read;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use flate2::read::MultiGzDecoder;

use super::backup_item::{item, BackupItem};
use super::diff_memory::{ItemsMemory, MAX_ITEMS_MEMORY};
use crate::heap_cost::allocation;
use crate::json_cost::parsed_cost;

/// Most entries read from an archive (files, directories and anything else in the tar).
pub(crate) const MAX_ENTRIES: usize = 500_000;
/// Largest item file read: Kubernetes stores nothing near this big (etcd's limit is about 1.5 MiB).
pub(crate) const MAX_ITEM_BYTES: u64 = 8 << 20;

/// Most bytes read from an archive once uncompressed, skipped entries included: a gzip stream of
/// zeros would otherwise keep `diff` decompressing for as long as it likes.
pub(crate) const MAX_ARCHIVE_BYTES: u64 = 8 << 30;

/// Largest tar extension header (GNU long name `L`, long link name `K`, PAX `x` and `g`) read: they
/// hold a path or a few records, and the `tar` crate would read one of any size whole into memory.
pub(crate) const MAX_EXTENSION_BYTES: u64 = 64 << 10;

/// The items of a backup.
pub struct BackupItems {
    /// Items, in the order read.
    pub items: Vec<BackupItem>,
    /// The backup format version of `metadata/version`, when the source is an archive that has one.
    pub(crate) format_version: Option<String>,
    /// Whether they come from an archive (rather than from files of manifests).
    pub archive: bool,
    /// What holding and comparing them takes.
    pub(crate) memory: ItemsMemory,
}

/// Reads the items of `path`: a directory (or file) of manifests as `run --cluster` reads them, or
/// a Velero backup archive (gzipped tar). The error's message is its chain (`{:#}`).
pub fn read(path: &Path) -> anyhow::Result<BackupItems> {
    let at = || path.display().to_string();
    let meta = std::fs::metadata(path).with_context(at)?;
    if !meta.is_dir() && !meta.is_file() {
        // A FIFO or a device would be read forever (or block at open): only files and directories.
        bail!(
            "{}: not a regular file nor a directory (a FIFO, socket or device is not read)",
            at()
        );
    }
    if !meta.is_dir() && is_gzip(path).with_context(at)? {
        return read_archive(path).with_context(at);
    }
    let objects = crate::documents::read_objects(&[path.to_path_buf()])?;
    let mut items = Vec::with_capacity(objects.len());
    let mut memory = ItemsMemory::default();
    for (file, value) in objects {
        let from = file.display().to_string();
        let text = value.to_string();
        drop(value);
        let item = item(from, text)?;
        let parsed = parsed_cost(&item.text).with_context(|| item.from.clone())?;
        memory
            .add(&item, &parsed)
            .map_err(|over| anyhow!("{}: {over}: not read further", item.from))?;
        items.push(item);
    }
    Ok(BackupItems {
        items,
        format_version: None,
        archive: false,
        memory,
    })
}

/// Whether the file starts as a gzip stream does.
fn is_gzip(path: &Path) -> std::io::Result<bool> {
    let mut magic = [0u8; 2];
    let mut file = std::fs::File::open(path)?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(magic == [0x1f, 0x8b]),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Where an archive entry sits in Velero's layout.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    /// `resources/<group-resource>/namespaces/<ns>/<name>.json` or
    /// `resources/<group-resource>/cluster/<name>.json`: an item in its preferred version.
    Item,
    /// `metadata/version`.
    Version,
    /// Anything else: the same items again under a version directory
    /// (`resources/<gr>/<version>[-preferredversion]/…`), directories, other metadata.
    Other,
}

/// Classifies an entry's path (a leading `./` allowed, as `tar -C dir .` writes).
fn classify(name: &str) -> Entry {
    let name = name.strip_prefix("./").unwrap_or(name);
    if name == "metadata/version" {
        return Entry::Version;
    }
    let parts: Vec<&str> = name.split('/').collect();
    let json = |file: &str| file.len() > ".json".len() && file.ends_with(".json");
    match parts.as_slice() {
        ["resources", gr, "namespaces", ns, file]
            if !gr.is_empty() && !ns.is_empty() && json(file) =>
        {
            Entry::Item
        }
        ["resources", gr, "cluster", file] if !gr.is_empty() && json(file) => Entry::Item,
        _ => Entry::Other,
    }
}

/// Reads the items of a Velero backup archive, within [`MAX_ENTRIES`], [`MAX_ITEM_BYTES`] and
/// `diff`'s memory bound for items ([`MAX_ITEMS_MEMORY`]). Errors do not name the archive: the caller
/// does.
fn read_archive(path: &Path) -> anyhow::Result<BackupItems> {
    let file = std::fs::File::open(path)?;
    let mut archive = tar::Archive::new(Bounded {
        // Every gzip member, as Go's reader (and so Velero) reads them: the first alone would leave
        // the items of the others silently out of the comparison.
        inner: MultiGzDecoder::new(std::io::BufReader::new(file)),
        left: MAX_ARCHIVE_BYTES,
    });
    let mut items = Vec::new();
    let mut format_version = None;
    let mut memory = ItemsMemory::default();
    // Raw: extension headers come as entries of their own, so their size is checked before
    // anything of them is read (the crate's own handling reads them whole, whatever their size).
    let entries = archive
        .entries()
        .map_err(|e| anyhow!("not a tar archive: {e}"))?
        .raw(true);
    let mut extension = Extension::default();
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ENTRIES {
            bail!("holds more than {MAX_ENTRIES} entries: not read further");
        }
        // tar's errors say what went wrong and keep the I/O error under it: only the first is shown.
        let mut entry = entry.map_err(|e| anyhow!("not a readable tar.gz archive: {e}"))?;
        let entry_type = entry.header().entry_type();
        if extension.read(&mut entry)? {
            continue;
        }
        let long_name = std::mem::take(&mut extension).name;
        if entry_type.is_gnu_sparse() {
            bail!("holds a GNU sparse entry, which Velero never writes: not read");
        }
        if !entry_type.is_file() {
            continue;
        }
        let name = match long_name {
            Some(name) => name,
            None => entry
                .path()
                .map_err(|e| anyhow!("an entry's name cannot be read: {e}"))?
                .to_string_lossy()
                .into_owned(),
        };
        let kind = classify(&name);
        if kind == Entry::Other {
            continue;
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > MAX_ITEM_BYTES {
            bail!("{name}: {size} bytes, over the {MAX_ITEM_BYTES}-byte limit of one item");
        }
        // Its text alone would pass the bound: refused before it is read.
        if memory.held() + allocation(size) > MAX_ITEMS_MEMORY {
            bail!(
                "{name}: its {size} bytes would take the items past the {} MiB diff takes for a \
                 backup's items: not read further",
                MAX_ITEMS_MEMORY >> 20
            );
        }
        let mut bytes = Vec::with_capacity(size as usize);
        entry
            .take(MAX_ITEM_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| anyhow!("{name}: {e}"))?;
        match kind {
            Entry::Version => {
                format_version = Some(String::from_utf8_lossy(&bytes).trim().to_string());
            }
            Entry::Item => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| anyhow!("{name}: not a JSON object (not UTF-8)"))?;
                // Checked, and its parsed size found, without building a tree: nothing of it is
                // kept but the text.
                let parsed =
                    parsed_cost(&text).with_context(|| format!("{name}: not a JSON object"))?;
                if !parsed.object {
                    bail!("{name}: not a JSON object");
                }
                let item = item(name, text)?;
                memory
                    .add(&item, &parsed)
                    .map_err(|over| anyhow!("{}: {over}: not read further", item.from))?;
                items.push(item);
            }
            Entry::Other => {}
        }
    }
    if items.is_empty() && format_version.is_none() {
        return Err(anyhow!(
            "holds neither resources/…/<name>.json items nor metadata/version: not a Velero backup archive"
        ));
    }
    Ok(BackupItems {
        items,
        format_version,
        archive: true,
        memory,
    })
}

/// What the extension headers before an entry say about it: its name (GNU `L`, or PAX `path`).
#[derive(Default)]
struct Extension {
    name: Option<String>,
}

impl Extension {
    /// Reads `entry` if it is an extension header (true), within [`MAX_EXTENSION_BYTES`]: a GNU long
    /// name or PAX `path` names the next entry; long link names and global PAX headers are skipped.
    fn read<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> anyhow::Result<bool> {
        let kind = entry.header().entry_type();
        let (long_name, pax) = (kind.is_gnu_longname(), kind.is_pax_local_extensions());
        if !(long_name || pax || kind.is_gnu_longlink() || kind.is_pax_global_extensions()) {
            return Ok(false);
        }
        let what = match kind.as_byte() {
            b'L' => "GNU long name (L)",
            b'K' => "GNU long link name (K)",
            b'x' => "PAX (x)",
            _ => "PAX global (g)",
        };
        let size = entry.header().entry_size().unwrap_or(u64::MAX);
        if size > MAX_EXTENSION_BYTES {
            bail!(
                "a {what} header of {size} bytes, over the {MAX_EXTENSION_BYTES}-byte limit of one: not read"
            );
        }
        let mut bytes = Vec::with_capacity(size as usize);
        entry
            .take(MAX_EXTENSION_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| anyhow!("a {what} header cannot be read: {e}"))?;
        if long_name {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            self.name = Some(String::from_utf8_lossy(&bytes[..end]).into_owned());
        } else if pax {
            for record in tar::PaxExtensions::new(&bytes) {
                let record = record.map_err(|e| anyhow!("a {what} header is malformed: {e}"))?;
                match record.key_bytes() {
                    b"path" => {
                        self.name = Some(String::from_utf8_lossy(record.value_bytes()).into_owned())
                    }
                    // An entry of 8 GiB or more: past the archive's bound (and read raw, the data
                    // would be framed by the header's size instead).
                    b"size" => bail!(
                        "a {what} header gives an entry's size ({}): entries that large are over \
                         the {MAX_ARCHIVE_BYTES}-byte bound",
                        String::from_utf8_lossy(record.value_bytes())
                    ),
                    _ => {}
                }
            }
        }
        Ok(true)
    }
}

/// A reader that fails, saying why, once it has given [`MAX_ARCHIVE_BYTES`].
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other(format!(
                "over {MAX_ARCHIVE_BYTES} bytes uncompressed: not read further"
            )));
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_read_from_the_unversioned_directories_only() {
        for item in [
            "resources/pods/namespaces/ns/p.json",
            "./resources/virtualmachines.kubevirt.io/namespaces/ns/vm.json",
            "resources/persistentvolumes/cluster/pv-1.json",
        ] {
            assert_eq!(classify(item), Entry::Item, "{item}");
        }
        for other in [
            "resources/pods/v1-preferredversion/namespaces/ns/p.json",
            "resources/pods/v1/namespaces/ns/p.json",
            "resources/persistentvolumes/v1-preferredversion/cluster/pv-1.json",
            "resources/pods/namespaces/ns/notes.txt",
            "resources/pods/namespaces/ns/.json",
            "metadata/other",
            "velero-backup.json",
        ] {
            assert_eq!(classify(other), Entry::Other, "{other}");
        }
        assert_eq!(classify("metadata/version"), Entry::Version);
    }

    #[test]
    fn reading_stops_with_a_reason_at_the_bound() {
        let mut bounded = Bounded {
            inner: std::io::repeat(0),
            left: 10,
        };
        let mut buf = [0u8; 8];
        assert_eq!(bounded.read(&mut buf).ok(), Some(8));
        assert_eq!(bounded.read(&mut buf).ok(), Some(2));
        let err = bounded.read(&mut buf).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("bytes uncompressed")));
    }
}
