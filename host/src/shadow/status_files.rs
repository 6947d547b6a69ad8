//! What plugin processes tell `velero-wasm status`, as files in the state directory's `status/`
//! (Velero starts a plugin process per backup and stops it after, so the figures must outlive it; the
//! state directory, `$VELERO_SCRATCH_DIR/velero-wasm` in the Velero pod, is shared by them all):
//!
//! - `modules.json`: the modules in service and the shadows, as the last plugin process loaded them
//!   (version, source, sha256, signature);
//! - `shadows-<pid>-<start>.json`: what one process's shadows did ([`Tally`] per shadow module),
//!   rewritten while it runs. Files older than [`KEEP`] are removed.
//!
//! Each file is replaced whole (written beside, then renamed), so a reader never sees a part.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::book::Tally;
use crate::modules::failure_policy::PolicyState;
use crate::runtime::{Catalog, LoadedModule};

/// The directory under the state directory.
pub(crate) const DIR: &str = "status";
/// The file naming the modules in service.
pub(crate) const MODULES: &str = "modules.json";
/// How long a process's shadow figures are kept.
pub(crate) const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// The largest status file read.
const MAX_FILE: u64 = 16 << 20;

/// One module as the status shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleStatus {
    /// Module name.
    pub name: String,
    /// `serving` or `shadow`.
    pub role: String,
    /// The manifest's version, if any.
    #[serde(default)]
    pub version: Option<String>,
    /// Where it came from (`stock`, a file, `ConfigMap name@resourceVersion`, …).
    pub source: String,
    /// sha256 of its component.
    pub sha256: String,
    /// The key that signed it, if signed.
    #[serde(default)]
    pub signed_by: Option<String>,
    /// Whether that signature was verified with a trusted key.
    #[serde(default)]
    pub verified: bool,
    /// When that signature expires (RFC 3339), if it does: `status` warns within
    /// [`EXPIRY_WARNING_DAYS`](crate::modules::signature::EXPIRY_WARNING_DAYS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_expires: Option<String>,
    /// Its failure policy, where it was stated and whether it triggered (modules that are not stock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<PolicyState>,
    /// Its settings declared in the old vocabulary, converted at load: what to write instead (the
    /// plugin says it here and on the module's ConfigMap, not in a warning every backup counts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deprecations: Vec<String>,
}

impl ModuleStatus {
    fn of(module: &LoadedModule, role: &str) -> ModuleStatus {
        ModuleStatus {
            name: module.name.to_string(),
            role: role.to_string(),
            version: module.version.clone(),
            source: module.origin.to_string(),
            sha256: module.sha256.clone(),
            signed_by: module.signature.as_ref().map(|s| s.key.clone()),
            verified: module.signature.as_ref().is_some_and(|s| s.verified),
            signature_expires: module.signature.as_ref().and_then(|s| s.expires.clone()),
            failure_policy: None,
            deprecations: module.settings_schema.deprecations.clone(),
        }
    }

    /// A module whose failure policy triggered with nothing of its name in service.
    fn not_served(name: &str, policy: &PolicyState) -> ModuleStatus {
        ModuleStatus {
            name: name.to_string(),
            role: "not served".to_string(),
            version: None,
            source: "-".to_string(),
            sha256: String::new(),
            signed_by: None,
            verified: false,
            signature_expires: None,
            failure_policy: Some(policy.clone()),
            deprecations: Vec::new(),
        }
    }
}

/// `modules.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Modules {
    /// When it was written (RFC 3339).
    pub written: String,
    /// By which process.
    pub pid: u32,
    /// Serving modules, then shadows, by name.
    pub modules: Vec<ModuleStatus>,
    /// Per slot, the actions it serves until Velero restarts: added since Velero listed
    /// (docs/modules.md#s10).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slots: BTreeMap<String, Vec<String>>,
}

/// `shadows-<pid>-<start>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    /// The plugin process.
    pub pid: u32,
    /// When it last wrote (RFC 3339).
    pub updated: String,
    /// Per shadow module.
    pub shadows: BTreeMap<String, Tally>,
}

/// The status directory of the state directory `state`, made private if need be.
pub(crate) fn dir(state: &Path) -> Result<PathBuf, crate::state::PrivateDirError> {
    let dir = state.join(DIR);
    crate::state::private_dir(state, &dir)?;
    Ok(dir)
}

/// Writes `modules.json` for `catalog` and the actions each slot serves (`slots`), and removes shadow
/// figures older than [`KEEP`]. Returns the file this process's shadow figures go to.
pub(crate) fn write_modules(
    dir: &Path,
    catalog: &Catalog,
    slots: BTreeMap<String, Vec<String>>,
) -> std::io::Result<PathBuf> {
    let modules = Modules {
        slots,
        written: now(),
        pid: std::process::id(),
        modules: catalog
            .modules()
            .map(|m| ModuleStatus {
                failure_policy: catalog.policy(&m.name).cloned(),
                ..ModuleStatus::of(m, "serving")
            })
            .chain(
                catalog
                    .policies()
                    .filter(|(name, _)| !catalog.modules().any(|m| &*m.name == name.as_str()))
                    .map(|(name, policy)| ModuleStatus::not_served(name, policy)),
            )
            .chain(catalog.shadows().map(|m| ModuleStatus::of(m, "shadow")))
            .collect(),
    };
    let text = serde_json::to_vec_pretty(&modules).unwrap_or_default();
    crate::state::write_atomically(&dir.join(MODULES), &text)?;
    for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        let old = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > KEEP);
        let name = entry.file_name().to_string_lossy().into_owned();
        if old && name.starts_with("shadows-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let started = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    Ok(dir.join(format!("shadows-{}-{started}.json", std::process::id())))
}

/// Writes one process's shadow figures.
pub(crate) fn write_shadows(file: &Path, tallies: &BTreeMap<String, Tally>) -> std::io::Result<()> {
    let process = Process {
        pid: std::process::id(),
        updated: now(),
        shadows: tallies.clone(),
    };
    let text = serde_json::to_vec_pretty(&process).unwrap_or_default();
    crate::state::write_atomically(file, &text)
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Everything the status directory holds, read.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// `modules.json`, if a process wrote it.
    pub(crate) modules: Option<Modules>,
    /// Each process's shadow figures, oldest first.
    pub(crate) processes: Vec<Process>,
    /// Files that could not be read, with why.
    pub(crate) problems: Vec<String>,
}

/// Reads the status directory `dir`.
pub(crate) fn read(dir: &Path) -> std::io::Result<Read> {
    let mut read = Read::default();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = match crate::regular_file::read(&path, MAX_FILE) {
            Ok(text) => text,
            Err(e) => {
                read.problems.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        if name == MODULES {
            match serde_json::from_slice(&text) {
                Ok(modules) => read.modules = Some(modules),
                Err(e) => read.problems.push(format!("{}: {e}", path.display())),
            }
        } else if name.starts_with("shadows-") {
            match serde_json::from_slice::<Process>(&text) {
                Ok(process) => read.processes.push(process),
                Err(e) => read.problems.push(format!("{}: {e}", path.display())),
            }
        }
    }
    read.processes.sort_by(|a, b| a.updated.cmp(&b.updated));
    Ok(read)
}
