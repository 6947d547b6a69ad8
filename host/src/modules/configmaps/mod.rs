//! Module ConfigMaps read through the API: at each plugin start the host lists the ConfigMaps labelled
//! [`LABEL`] in Velero's namespace, writes each into its own directory of the state directory
//! (`configmaps/<uid>-<resourceVersion>/`, the files side by side as in a module directory) and loads
//! them with the directory loader, so a module is validated the same way whichever way it came. No
//! Deployment change and no kubelet delay: the next plugin process Velero starts serves the new
//! version.
//!
//! - **Layout**: `binaryData` (or `data`) holds `<name>.wasm` (or `<name>.wasm.gz`, see
//!   [`compression`]), `<name>.toml` and optionally `<name>.sig`; the label's value is `<name>`. A
//!   manifest without a component is a stock override. Or `data` holds one key, `<name>.oci`, naming
//!   an OCI artifact (`registry/repo:tag@sha256:…`): it is pulled ([`oci`](super::oci)) when its
//!   directory is first written, and the module's files come from it.
//! - **Cache**: a directory is written once per uid and resourceVersion (to a temporary name, then
//!   renamed, so one that exists is complete); a later process with the same ConfigMap reuses it.
//! - **Bounds**: the list is read within [`LIST_TIMEOUT`] and at most [`MAX_LIST_BYTES`]; a ConfigMap
//!   holding more than [`MAX_CONFIGMAP_BYTES`], or a key that is not `<name>.wasm|toml|sig`, is a
//!   problem reported for that ConfigMap, never a failure of the others.
//! - **Fallback**: the ConfigMaps of the last successful list are recorded ([`LISTING`]); when the API
//!   server cannot be reached or refuses the list, those are loaded, with a warning. When it answers
//!   but the list is larger than [`MAX_LIST_BYTES`] or slower than [`LIST_TIMEOUT`] (junk labelled
//!   as modules can do both), each ConfigMap of the last list is read by name first, and one deleted
//!   or changed since is not served: a deleted module must not stay in service for as long as
//!   someone keeps the list large.
//! - **Pruning**: a directory that is in neither the current list and has not been used for
//!   [`PRUNE_AFTER`] is removed (a process that started just before an update may still be reading
//!   the one it listed).
//!
//! One file per concern, each importing only those listed before it: [`metadata`] (labels and
//! annotations), [`files`] (a ConfigMap's keys as a module's files), [`list`] (the switch, the
//! namespace, the bounded list), [`pulls`] (OCI artifacts and pull Secrets), [`disk_cache`] (the
//! directories under the state directory) and [`read`] (what start-up loads, the fallback included).
//!
//! [`compression`]: super::compression
//! [`MAX_LIST_BYTES`]: list::MAX_LIST_BYTES
//! [`MAX_CONFIGMAP_BYTES`]: files::MAX_CONFIGMAP_BYTES
//! [`LISTING`]: disk_cache::LISTING
//! [`PRUNE_AFTER`]: disk_cache::PRUNE_AFTER

mod disk_cache;
mod files;
mod list;
mod metadata;
mod pulls;
mod read;

pub use disk_cache::{Cache, CacheError, Cached, ConfigMapModules, Problem};
pub(crate) use files::{files_of, FilesError};
pub(crate) use list::{namespace_of, Switch, LIST_TIMEOUT};
pub(crate) use metadata::is_shadow;
pub use metadata::{LABEL, SHADOW_LABEL, STATUS_ANNOTATION};
pub(crate) use read::{read, Listed};
