//! The integration tests: one module per area, each reading as the specification of that area, run
//! against the built `velero-wasm` binary and library.
//!
//! They form one test binary rather than one per file: every binary links the whole host (wasmtime,
//! tonic, kube), and linking it sixteen times was most of a `cargo test` after a change to the host.
//! `cargo test --test integration AREA::` runs one area, for instance `cli::` or `kubevirt::`.

// A test stops at what it did not expect: the workspace's unwrap lints are for the host's code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod architecture;
mod cli;
mod config_once;
mod configmap_state;
mod diff;
mod environment;
mod failure_policy;
mod hcp;
#[path = "http.rs"]
mod http_capability;
mod install;
mod kube_apiserver;
mod kubevirt;
mod limits;
mod live_kube;
mod module_configmaps;
mod module_signing;
mod named_items;
mod oci;
mod plugin_fake;
mod plugin_faults;
mod plugin_protocol;
mod rate_limit;
mod read_views;
mod runtime;
mod scaffolds;
mod shadow;
mod signing;
mod slot;
mod state_dir;
