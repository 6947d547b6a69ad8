//! Collecting the blob store (`<state>/oci/sha256/`): a pull keeps every manifest and component it
//! fetched, so without collection each module version pushed and named once stays on disk for good.
//! After the module ConfigMaps were listed and written out, the blobs that no module directory of the
//! cache names any more are removed: a directory's `<name>.oci` pins a manifest, which keeps itself
//! and its component. The directories are those of the ConfigMaps listed now and the older versions
//! not yet pruned, among them the one the last good copy of a module came from, so a module that
//! falls back to its last good version can still be written from the store without a registry.
//! A blob that nothing names is kept while it is younger than [`COLLECT_AFTER`]: another plugin
//! process may have just pulled it and not yet written the directory that names it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{layout, BlobStore, OciError, Reference, EXTENSION};

/// How old a blob nothing names must be before it is removed.
pub(crate) const COLLECT_AFTER: Duration = Duration::from_secs(10 * 60);

/// The manifest digests the `<name>.oci` files of the module directories under `cache` pin (each
/// directory one level down, as the ConfigMap cache writes them).
pub(crate) fn referenced(cache: &Path) -> BTreeSet<String> {
    let dirs: Vec<PathBuf> = match std::fs::read_dir(cache) {
        Ok(entries) => entries.filter_map(|e| Some(e.ok()?.path())).collect(),
        Err(_) => return BTreeSet::new(),
    };
    let mut digests = BTreeSet::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        let Ok(files) = std::fs::read_dir(dir) else {
            continue;
        };
        for file in files.filter_map(Result::ok) {
            let path = file.path();
            if path.extension().is_none_or(|x| x != EXTENSION) {
                continue;
            }
            // A pinned reference is a line; anything larger is not one.
            let Ok(text) = crate::regular_file::read(&path, 4096) else {
                continue;
            };
            if let Ok(Reference {
                digest: Some(digest),
                ..
            }) = Reference::parse(String::from_utf8_lossy(&text).trim())
            {
                digests.insert(digest);
            }
        }
    }
    digests
}

impl BlobStore {
    /// Removes the kept blobs that are neither one of `manifests` nor the component such a manifest
    /// describes, and have not been written for `older_than`. Returns how many were removed; a blob
    /// that cannot be removed is left for the next time.
    pub(crate) fn collect(
        &self,
        manifests: &BTreeSet<String>,
        older_than: Duration,
    ) -> Result<usize, OciError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(source) => {
                let dir = self.dir.clone();
                return Err(OciError::List { dir, source });
            }
        };
        crate::state::private_dir(&self.root, &self.dir)?;
        let mut keep: BTreeSet<String> = manifests.clone();
        for manifest in manifests {
            let component = self
                .get(manifest, layout::MAX_MANIFEST)
                .and_then(|bytes| layout::read(&bytes).ok())
                .map(|module| module.component.digest);
            keep.extend(component);
        }
        let mut removed = 0;
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Only blobs: 64 hex digits (a file being written has another name).
            let is_blob = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
            if !is_blob || keep.contains(&format!("sha256:{name}")) {
                continue;
            }
            let old = entry
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= older_than);
            if old && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Collects the store of `state` against the module directories of the ConfigMap cache `cache`,
/// logging what it did; a store that cannot be collected is a warning (it only takes disk).
pub(crate) fn collect_unreferenced(state: &Path, cache: &Path) {
    let store = BlobStore::new(state);
    match store.collect(&referenced(cache), COLLECT_AFTER) {
        Ok(0) => {}
        Ok(removed) => tracing::info!(
            removed,
            "removed the kept OCI blobs no module ConfigMap names any more"
        ),
        Err(e) => tracing::info!("the kept OCI blobs cannot be collected: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    /// A module laid out and kept in `store` as a pull keeps it: manifest and component. Returns the
    /// manifest's and the component's digests.
    fn kept(store: &BlobStore, component: &[u8]) -> (String, String) {
        let artifact = layout::artifact("m", component, "sha256 = \"x\"\n", None, None);
        let manifest = format!(
            "sha256:{}",
            crate::modules::identity::sha256_hex(&artifact.manifest)
        );
        let layer = artifact.parsed.layers[0].digest.clone();
        store.put(&manifest, &artifact.manifest).unwrap();
        store.put(&layer, component).unwrap();
        (manifest, layer)
    }

    /// A module directory of the cache naming `manifest`, as a pulled ConfigMap is written.
    fn names(cache: &Path, dir: &str, manifest: &str) {
        let dir = cache.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("m.oci"),
            format!("registry.example:5000/modules/m:1.0.0@{manifest}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("m.wasm"), b"\0asm").unwrap();
    }

    fn age_all(store: &Path, by: Duration) {
        for entry in std::fs::read_dir(store).unwrap() {
            let file = std::fs::File::options()
                .write(true)
                .open(entry.unwrap().path())
                .unwrap();
            file.set_modified(SystemTime::now() - by).unwrap();
        }
    }

    fn blobs(store: &Path) -> BTreeSet<String> {
        std::fs::read_dir(store)
            .unwrap()
            .map(|e| format!("sha256:{}", e.unwrap().file_name().to_string_lossy()))
            .collect()
    }

    #[test]
    fn blobs_no_module_directory_names_are_removed_once_old() {
        let state = tempfile::tempdir().unwrap();
        let cache = state.path().join("configmaps");
        let store = BlobStore::new(state.path());
        let dir = state.path().join("oci").join("sha256");
        let (v1, v1_component) = kept(&store, b"\0asm version 1");
        let (v2, v2_component) = kept(&store, b"\0asm version 2");
        let (gone, gone_component) = kept(&store, b"\0asm named by nothing");
        // The version listed now, and the one before it whose directory is not pruned yet.
        names(&cache, "uid-2", &v2);
        names(&cache, "uid-1", &v1);
        let referenced = referenced(&cache);
        assert_eq!(referenced, [v1.clone(), v2.clone()].into());

        // Young blobs stay even when nothing names them: a pull may be writing its directory.
        assert_eq!(store.collect(&referenced, COLLECT_AFTER).unwrap(), 0);
        assert!(blobs(&dir).contains(&gone));

        age_all(&dir, COLLECT_AFTER * 2);
        assert_eq!(store.collect(&referenced, COLLECT_AFTER).unwrap(), 2);
        let left = blobs(&dir);
        assert_eq!(
            left,
            [v1.clone(), v1_component, v2.clone(), v2_component.clone()].into()
        );
        assert!(!left.contains(&gone) && !left.contains(&gone_component));

        // Once the older version's directory is pruned, its blobs go; the listed one's stay, and
        // what is kept still reads back by digest.
        std::fs::remove_dir_all(cache.join("uid-1")).unwrap();
        assert_eq!(
            store
                .collect(&super::referenced(&cache), COLLECT_AFTER)
                .unwrap(),
            2
        );
        assert_eq!(blobs(&dir), [v2.clone(), v2_component.clone()].into());
        assert!(store.get(&v2, layout::MAX_MANIFEST).is_some());

        // Files that are not blobs are left alone; a missing store is nothing to collect.
        std::fs::write(dir.join(".partial.tmp"), b"x").unwrap();
        age_all(&dir, COLLECT_AFTER * 2);
        assert_eq!(store.collect(&BTreeSet::new(), COLLECT_AFTER).unwrap(), 2);
        assert!(dir.join(".partial.tmp").exists());
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            BlobStore::new(empty.path())
                .collect(&BTreeSet::new(), Duration::ZERO)
                .unwrap(),
            0
        );
    }
}
