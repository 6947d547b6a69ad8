//! The ConfigMap cache of a state directory ([`Cache`]): each ConfigMap written once into its own
//! directory, the last successful list recorded ([`LISTING`]), old directories pruned
//! ([`PRUNE_AFTER`]); and what reading the ConfigMaps gave ([`ConfigMapModules`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::files::{files_of, is_artifact};
use super::metadata::{
    field_of, is_shadow, labelled_module, name_of, on_failure_of, status_of, LABEL,
};
use super::pulls::{PullError, Pulls, Wanted};
use crate::modules::last_good::LastGood;
use crate::modules::source::Origin;

/// How long an unused cached ConfigMap directory is kept after it left the list.
pub(crate) const PRUNE_AFTER: Duration = Duration::from_secs(600);
/// The file, in the cache, naming the ConfigMaps of the last successful list.
pub(crate) const LISTING: &str = "listing.json";

/// One module ConfigMap, written out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cached {
    /// The ConfigMap's name.
    pub configmap: String,
    /// The module its label names (empty in a listing written by an earlier version).
    #[serde(default)]
    pub(crate) module: String,
    /// Its uid (empty in a listing written by an earlier version).
    #[serde(default)]
    pub(crate) uid: String,
    /// Its resourceVersion.
    #[serde(rename = "resourceVersion")]
    pub(crate) resource_version: String,
    /// The directory holding its files (`<uid>-<resourceVersion>`, inside the cache).
    pub dir: PathBuf,
    /// Labelled [`SHADOW_LABEL`](super::SHADOW_LABEL): its module is a shadow, not served.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) shadow: bool,
    /// Its annotation [`ANNOTATION`](crate::modules::failure_policy::ANNOTATION) as written: the
    /// module's failure policy when no manifest of it can be trusted (kept in the listing, for when
    /// the list cannot be read).
    #[serde(default, rename = "onFailure", skip_serializing_if = "Option::is_none")]
    pub(crate) on_failure: Option<String>,
    /// Its annotation [`STATUS_ANNOTATION`](super::STATUS_ANNOTATION) as listed: what the plugin last
    /// wrote of its state (not kept in the listing: a ConfigMap of the last list is not written to).
    #[serde(skip)]
    pub(crate) status: Option<String>,
}

impl Cached {
    /// Where its modules come from, for people.
    pub(crate) fn origin(&self) -> Origin {
        Origin::ConfigMap {
            name: self.configmap.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
        }
    }
}

/// A ConfigMap that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The ConfigMap's name.
    pub(crate) configmap: String,
    /// The module it was meant to hold, when its label says.
    pub module: Option<String>,
    /// The ConfigMap's uid, when it has one (a module's last good version stands in for a broken
    /// ConfigMap only if it came from the same object, see `plan::load_modules`).
    pub(crate) uid: Option<String>,
    /// What is wrong, naming the ConfigMap.
    pub message: String,
    /// The ConfigMap was labelled a shadow: the module it names serves as before.
    pub(crate) shadow: bool,
    /// Its annotation [`STATUS_ANNOTATION`](super::STATUS_ANNOTATION) as listed (none for a
    /// ConfigMap of the last list).
    pub(crate) status: Option<String>,
}

/// What reading the module ConfigMaps gave: the directories to load, in order, and what to report.
#[derive(Debug, Clone, Default)]
pub struct ConfigMapModules {
    /// The ConfigMaps to load, by name.
    pub configmaps: Vec<Cached>,
    /// ConfigMaps left out.
    pub problems: Vec<Problem>,
    /// Where the last good version of each ConfigMap module is kept.
    pub(crate) last_good: Option<LastGood>,
    /// Directories written by this process.
    pub written: usize,
    /// Directories an earlier process had written, used as they were.
    pub cached: usize,
    /// Old directories removed.
    pub(crate) pruned: usize,
    /// Set when the API could not be used and the last listed ConfigMaps are loaded instead.
    pub(crate) fallback: Option<String>,
    /// The annotation [`ANNOTATION`](crate::modules::failure_policy::ANNOTATION) of each listed
    /// ConfigMap that has one, by uid, those that could not be used too: what a module whose
    /// ConfigMap cannot be used falls back on is the ConfigMap's to say when no manifest of it can be
    /// trusted.
    pub(crate) on_failure: BTreeMap<String, String>,
}

impl ConfigMapModules {
    /// These ConfigMaps and `other`'s, as one list.
    pub(super) fn merged(mut self, other: ConfigMapModules) -> ConfigMapModules {
        self.configmaps.extend(other.configmaps);
        self.configmaps
            .sort_by(|a, b| a.configmap.cmp(&b.configmap));
        self.problems.extend(other.problems);
        self.on_failure.extend(other.on_failure);
        self.written += other.written;
        self.cached += other.cached;
        self.pruned += other.pruned;
        self
    }

    /// Only the ConfigMaps (and problems, and annotations) of `modules`: a later loading step sees,
    /// and reports, nothing of the ConfigMaps an earlier one loaded.
    pub(crate) fn only(&self, modules: &BTreeSet<String>) -> ConfigMapModules {
        let of = |module: &str| modules.contains(module);
        let configmaps: Vec<Cached> = self
            .configmaps
            .iter()
            .filter(|c| of(&c.module))
            .cloned()
            .collect();
        let problems: Vec<Problem> = self
            .problems
            .iter()
            .filter(|p| p.module.as_deref().is_some_and(of))
            .cloned()
            .collect();
        let uids: BTreeSet<&str> = configmaps
            .iter()
            .map(|c| c.uid.as_str())
            .chain(problems.iter().filter_map(|p| p.uid.as_deref()))
            .collect();
        let on_failure = self
            .on_failure
            .iter()
            .filter(|(uid, _)| uids.contains(uid.as_str()))
            .map(|(uid, policy)| (uid.clone(), policy.clone()))
            .collect();
        ConfigMapModules {
            configmaps,
            problems,
            last_good: self.last_good.clone(),
            written: self.written,
            cached: self.cached,
            pruned: self.pruned,
            fallback: self.fallback.clone(),
            on_failure,
        }
    }

    /// Every module these ConfigMaps (those that could not be used too) name.
    pub(crate) fn modules(&self) -> BTreeSet<String> {
        self.configmaps
            .iter()
            .map(|c| c.module.clone())
            .chain(self.problems.iter().filter_map(|p| p.module.clone()))
            .collect()
    }
}

/// The ConfigMap cache of a state directory.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    dir: PathBuf,
}

impl Cache {
    /// The cache under `state` (`<state>/configmaps`).
    pub fn new(state: &Path) -> Cache {
        Cache {
            root: state.to_path_buf(),
            dir: state.join("configmaps"),
        }
    }

    /// Where it is.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store of last good ConfigMap modules that goes with it.
    pub(crate) fn last_good(&self) -> LastGood {
        LastGood::for_directory(&self.root, &self.dir)
    }

    /// Writes out the ConfigMaps of a list (those not already written), records the list, and prunes
    /// old directories. Fails only when the cache directory cannot be used.
    pub fn materialise(&self, items: &[Value]) -> Result<ConfigMapModules, CacheError> {
        self.materialise_pulled(items, &Pulls::new())
    }

    /// [`Cache::materialise`], with the artifacts pulled for the ConfigMaps that name one (by the
    /// directory they are written to; see [`pull_artifacts`](super::pulls::pull_artifacts)).
    pub(crate) fn materialise_pulled(
        &self,
        items: &[Value],
        pulled: &Pulls,
    ) -> Result<ConfigMapModules, CacheError> {
        let items: Vec<&Value> = items.iter().collect();
        self.record(self.write_all(&items, pulled)?)
    }

    /// Writes out the ConfigMaps of `items` not already written (those naming an artifact with
    /// what `pulled` holds for them), without recording them as a list.
    pub(super) fn write_all(
        &self,
        items: &[&Value],
        pulled: &Pulls,
    ) -> Result<ConfigMapModules, CacheError> {
        crate::state::private_dir(&self.root, &self.dir)?;
        let mut out = ConfigMapModules {
            last_good: Some(self.last_good()),
            ..ConfigMapModules::default()
        };
        let mut sorted: Vec<&Value> = items.to_vec();
        sorted.sort_by_key(|cm| name_of(cm).to_string());
        for item in sorted {
            let configmap = name_of(item).to_string();
            if let Some(policy) = on_failure_of(item) {
                out.on_failure.insert(field_of(item, "uid"), policy);
            }
            let module = item
                .pointer("/metadata/labels")
                .and_then(|l| l.get(LABEL))
                .and_then(Value::as_str)
                .map(str::to_string);
            let shadow = is_shadow(item);
            let problem = |message: &dyn std::fmt::Display| Problem {
                configmap: configmap.clone(),
                status: status_of(item),
                shadow,
                module: module.clone(),
                uid: item
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                message: format!("ConfigMap {configmap}: {message}"),
            };
            let files = match files_of(item, module.as_deref()) {
                Ok(files) => files,
                Err(why) => {
                    out.problems.push(problem(&why));
                    continue;
                }
            };
            match self.write(item, module.as_deref().unwrap_or(""), &files, pulled) {
                Ok((cached, written)) => {
                    if written {
                        out.written += 1;
                    } else {
                        out.cached += 1;
                    }
                    out.configmaps.push(cached);
                }
                Err(why) => out.problems.push(problem(&why)),
            }
        }
        Ok(out)
    }

    /// Records `out`'s ConfigMaps as the last successful list and prunes the directories of
    /// earlier ones.
    pub(super) fn record(&self, mut out: ConfigMapModules) -> Result<ConfigMapModules, CacheError> {
        let listing = serde_json::to_vec_pretty(&out.configmaps).unwrap_or_default();
        crate::state::write_atomically(&self.dir.join(LISTING), &listing).map_err(|source| {
            CacheError::Record {
                dir: self.dir.clone(),
                source,
            }
        })?;
        out.pruned = self.prune(&out.configmaps);
        Ok(out)
    }

    /// The ConfigMaps of the last successful list, as written then (those still there).
    pub fn last_listing(&self) -> Result<Vec<Cached>, CacheError> {
        crate::state::private_dir(&self.root, &self.dir)?;
        let path = self.dir.join(LISTING);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(CacheError::Unreadable { path, source }),
        };
        let listed: Vec<Cached> =
            serde_json::from_slice(&text).map_err(|source| CacheError::Invalid { path, source })?;
        Ok(listed
            .into_iter()
            .filter(|c| c.dir.parent() == Some(self.dir.as_path()) && c.dir.is_dir())
            .collect())
    }

    /// Writes one ConfigMap's files, unless a complete directory for its uid and resourceVersion is
    /// there already. Returns it and whether it was written now.
    fn write(
        &self,
        item: &Value,
        module: &str,
        files: &[(String, Vec<u8>)],
        pulled: &Pulls,
    ) -> Result<(Cached, bool), WriteError> {
        let dir = self.dir_of(item)?;
        let (uid, version) = (field_of(item, "uid"), field_of(item, "resourceVersion"));
        let cached = Cached {
            configmap: name_of(item).to_string(),
            module: module.to_string(),
            uid: uid.clone(),
            resource_version: version,
            dir: dir.clone(),
            shadow: is_shadow(item),
            on_failure: on_failure_of(item),
            status: status_of(item),
        };
        if dir.is_dir() {
            // Used again: not pruned while in use.
            if let Ok(handle) = std::fs::File::open(&dir) {
                let _ = handle.set_modified(SystemTime::now());
            }
            return Ok((cached, false));
        }
        // A ConfigMap naming an artifact is written with the artifact's files.
        let files = if is_artifact(files) {
            match pulled.get(&dir) {
                Some(Ok(files)) => files.as_slice(),
                Some(Err(why)) => return Err(WriteError::Pull(why.clone())),
                None => return Err(WriteError::NotPulled),
            }
        } else {
            files
        };
        let tmp = self.dir.join(format!(
            ".{uid}-{}.tmp{}",
            cached.resource_version,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        let written = (|| -> std::io::Result<()> {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
            for (key, bytes) in files {
                std::fs::write(tmp.join(key), bytes)?;
            }
            std::fs::rename(&tmp, &dir)
        })();
        match written {
            Ok(()) => Ok((cached, true)),
            // Another process wrote the same version first: use its directory.
            Err(_) if dir.is_dir() => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok((cached, false))
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Err(WriteError::Write { dir, source: e })
            }
        }
    }

    /// The directory a ConfigMap is written to: `<uid>-<resourceVersion>`, or why it has none.
    fn dir_of(&self, item: &Value) -> Result<PathBuf, WriteError> {
        let field = |name: &str| {
            let value = item
                .pointer(&format!("/metadata/{name}"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if value.is_empty()
                || value.len() > 128
                || !value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                Err(WriteError::DirName {
                    field: name.to_string(),
                    value: value.to_string(),
                })
            } else {
                Ok(value.to_string())
            }
        };
        let (uid, version) = (field("uid")?, field("resourceVersion")?);
        Ok(self.dir.join(format!("{uid}-{version}")))
    }

    /// The pull `item` needs: it names an artifact and its directory is not written yet.
    pub(super) fn pull_wanted(&self, item: &Value) -> Option<Wanted> {
        let module = labelled_module(item)?;
        let files = files_of(item, Some(&module)).ok()?;
        let dir = self.dir_of(item).ok()?;
        if dir.is_dir() || !is_artifact(&files) {
            return None;
        }
        Some(Wanted {
            dir,
            reference: String::from_utf8_lossy(&files[0].1).trim().to_string(),
            module,
            configmap: name_of(item).to_string(),
        })
    }

    /// Removes directories not in `keep` that have not been used for [`PRUNE_AFTER`].
    fn prune(&self, keep: &[Cached]) -> usize {
        let keep: BTreeSet<&Path> = keep.iter().map(|c| c.dir.as_path()).collect();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut pruned = 0;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let old = entry
                .metadata()
                .ok()
                .filter(|m| m.is_dir())
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > PRUNE_AFTER);
            if old && !keep.contains(path.as_path()) && std::fs::remove_dir_all(&path).is_ok() {
                pruned += 1;
            }
        }
        pruned
    }
}

/// Why the module ConfigMap cache cannot be used (then no ConfigMap module is loaded from it).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache directory is not private.
    #[error(transparent)]
    PrivateDir(#[from] crate::state::PrivateDirError),
    /// The list could not be recorded.
    #[error("cannot record the list in {}: {source}", dir.display())]
    Record {
        /// The cache directory.
        dir: PathBuf,
        /// Why the write failed.
        #[source]
        source: std::io::Error,
    },
    /// The recorded list cannot be read.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The list's file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The recorded list is not a list.
    #[error("{}: {source}", path.display())]
    Invalid {
        /// The list's file.
        path: PathBuf,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
}

/// Why one ConfigMap's files cannot be written to the cache.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// Its uid or resourceVersion cannot name a directory.
    #[error("metadata.{field} {value:?} is not usable as a directory name")]
    DirName {
        /// `uid` or `resourceVersion`.
        field: String,
        /// Its value.
        value: String,
    },
    /// The artifact it names could not be pulled.
    #[error(transparent)]
    Pull(PullError),
    /// The artifact it names was not pulled (it was not wanted when the pulls were made).
    #[error("its OCI artifact was not pulled")]
    NotPulled,
    /// The files could not be written.
    #[error("cannot be written to {}: {source}", dir.display())]
    Write {
        /// Its directory.
        dir: PathBuf,
        /// Why the write failed.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(configmap: &str, module: &str, uid: &str) -> Cached {
        Cached {
            configmap: configmap.into(),
            module: module.into(),
            uid: uid.into(),
            resource_version: "1".into(),
            dir: PathBuf::new(),
            shadow: false,
            on_failure: None,
            status: None,
        }
    }

    #[test]
    fn only_keeps_the_annotations_of_the_configmaps_it_keeps() {
        let all = ConfigMapModules {
            configmaps: vec![
                cached("inline", "inline", "uid-a"),
                cached("pulled", "pulled", "uid-b"),
            ],
            problems: vec![Problem {
                configmap: "broken".into(),
                module: Some("broken".into()),
                uid: Some("uid-c".into()),
                message: "ConfigMap broken: no manifest".into(),
                shadow: false,
                status: None,
            }],
            on_failure: [("uid-a", "bogus"), ("uid-b", "stock"), ("uid-c", "refuse")]
                .map(|(uid, policy)| (uid.to_string(), policy.to_string()))
                .into(),
            ..ConfigMapModules::default()
        };
        let later = all.only(&BTreeSet::from([
            "pulled".to_string(),
            "broken".to_string(),
        ]));
        let names: Vec<&str> = later
            .configmaps
            .iter()
            .map(|c| c.configmap.as_str())
            .collect();
        assert_eq!(names, ["pulled"]);
        assert_eq!(later.problems.len(), 1);
        // The inline ConfigMap's annotation was read (and, being no policy, reported) by the step
        // that loaded it: a later step does not report it again.
        let uids: Vec<&str> = later.on_failure.keys().map(String::as_str).collect();
        assert_eq!(uids, ["uid-b", "uid-c"]);
    }
}
