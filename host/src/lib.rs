//! velero-wasm: Velero item actions as sandboxed WebAssembly components, hosted by one binary.
//!
//! One Execute, top-down: [`plugin`] (gRPC, Velero's protocol) or [`cli`] (the policy author's `run`)
//! calls [`runtime::Runtime`] with the action it found in the [`runtime::Registry`]; the runtime
//! instantiates the module's component in a fresh store and calls it; the component reaches the outside world only
//! through [`capabilities`], each checked against the module's grant. [`modules`] says where
//! components and their manifests come from, and [`plan`] which of them serves each name;
//! [`cluster`] talks to Kubernetes API servers for the `kube` capability and for the host itself;
//! [`action`] holds the domain types all layers share.

pub mod action;
#[cfg(test)]
mod allocation_tally;
pub mod answer_charge;
pub mod backend;
mod bindings;
pub(crate) mod capabilities;
pub(crate) mod cli;
pub(crate) mod cluster;
pub mod config;
pub mod documents;
mod guest_output;
mod heap_cost;
mod json_cost;
pub(crate) mod logging;
pub(crate) mod metrics;
pub mod modules;
mod network;
pub mod plan;
pub mod plugin;
mod regular_file;
pub mod runtime;
pub mod shadow;
mod shown;
pub mod state;
mod yaml_events;

// The library's face. Outside this crate the library is used by the binary (`main.rs`), the
// integration tests (`tests/`), the benchmarks (`host/benches/`) and the fuzz targets (`fuzz/`).
// `capabilities/`, `cluster/` and `cli/` are private to the crate: what those users need of them is
// re-exported here, and everything else in them is `pub(crate)` or narrower. The other rooms are
// still `pub mod`, reached by the same users at their own paths (`plugin::proto` for gRPC clients,
// `runtime::Runtime`, `plan`, `modules`, …).

/// The `http` capability's transport seam, which the fuzz harness answers without a network.
pub use capabilities::http::transport::{Answer, Exchange, ExchangeError};
/// The `kube` capability's parts driven on their own: a guest's object checked, the read views.
pub use capabilities::kube::{
    object_for,
    view::{Bounds, ReadViews, Stats},
};
/// The limit a call ran out of, which a `runtime::Fault` carries.
pub use capabilities::Exceeded;
/// What the serving calls of each backup named, which a runtime serving Velero records
/// (docs/named-items.md).
pub use capabilities::NamedItems;
/// What a runtime is built with: its clock (and the limits it sets), the host-wide services and the
/// process's environment.
pub use capabilities::{clock::TimeLimit, Clock, Environment, Services};
/// A module's grants, which a manifest's `[grant]` is read into (fuzzed with manifests).
pub use capabilities::{EnvGrant, HttpGrant, KubeGrant};
/// One item of a backup as `diff` reads it.
pub use cli::backup_item::BackupItem;
/// `diff`'s reader of backup archives and manifests, fuzzed on its own.
pub use cli::diff_archive::{read as read_backup_archive, BackupItems};
/// The command line, which `main.rs` hands every start that is not Velero's.
pub use cli::main as cli_main;
/// The caps on a live API server's answers, which the live cluster's tests go past.
pub use cluster::live::{MAX_ANSWER_BYTES, MAX_ERROR_BYTES};
/// The clusters a runtime can be given (none, a fixture, a live API server), what making one can
/// fail with, the fixture's clock, and `run`'s write log.
pub use cluster::{
    fixture::{FixtureCluster, FixtureError, Now},
    live::{ClusterOptions, ConnectError, LiveCluster},
    writes::{ClusterWrite, WriteLog},
    NoCluster,
};
/// The Kubernetes call vocabulary: tests and fuzz targets make calls in it and match its answers.
pub use cluster::{
    ApiResource, BadFieldSelector, FieldSelector, Json, KubeAnswer, KubeApi, KubeCall, KubeError,
    ListOptions, Patch,
};

/// Where the build put the test components (`tests/components/*`), for the tests, benchmarks and fuzz
/// targets that load them.
pub const TEST_COMPONENTS: &str = env!("VELERO_WASM_TEST_COMPONENTS");
