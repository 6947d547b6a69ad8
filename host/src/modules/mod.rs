//! Where modules come from: the stock components embedded in the binary, a module directory (a
//! mounted ConfigMap, or a policy author's build output) and module ConfigMaps read through the API
//! ([`configmaps`]), each adding modules or replacing earlier ones by name. Each module is a
//! component (`<name>.wasm`), its [`Manifest`] (`<name>.toml`) and, optionally, a
//! [signature](signature) (`<name>.sig`); a manifest alone, named after a stock module, overrides that
//! module's settings and limits and may narrow its grant ([`stock_override`]). A module ConfigMap may
//! name an OCI artifact instead of holding the files ([`oci`]).

pub(crate) mod cluster_floor;
pub mod compression;
mod configmap_file;
pub mod configmaps;
mod directory;
pub mod failure_policy;
mod identity;
mod last_good;
mod manifest;
pub mod oci;
mod scan;
pub mod settings_schema;
pub mod signature;
mod source;
mod stock;
pub mod stock_override;
pub(crate) mod version_floor;

pub(crate) use directory::{module_from_parts, read_module, DirectoryScan, OverrideFile};
pub(crate) use failure_policy::FailurePolicy;
pub use identity::sha256_hex;
pub(crate) use identity::valid_module_name;
pub use last_good::LastGood;
pub use manifest::{parse_byte_size, KubeRule, Manifest, NamespaceRule, Verbs, MAX_MEMORY};
pub(crate) use manifest::{Grant, Limits};
pub(crate) use scan::directory_names;
pub use scan::{scan_directory, MODULES_ENV};
pub(crate) use signature::{ModuleSignature, TrustedKeys};
pub use source::{ModuleSource, Origin};
pub(crate) use stock::chosen_stock_modules;
pub use stock::{stock_modules, stock_names, StockChoice, STOCK_ENV};
pub(crate) use version_floor::VersionFloor;
