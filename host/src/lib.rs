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
pub mod capabilities;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod documents;
use velero_wasm_grant::glob;
mod guest_output;
mod heap_cost;
mod json_cost;
pub mod logging;
pub mod metrics;
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

/// Where the build put the test components (`tests/components/*`), for the tests, benchmarks and fuzz
/// targets that load them.
pub const TEST_COMPONENTS: &str = env!("VELERO_WASM_TEST_COMPONENTS");
