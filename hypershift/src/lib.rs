//! What the `hcp` and `agent` components share (behaviour: `shared/spec/hcp-plugin-behaviour.md`):
//! the resource types they call ([`apis`]), the HyperShift gate that turns every other backup into a
//! pass-through ([`gate`], §3.1), the discovery of the backup's HostedControlPlane ([`discovery`],
//! §3.2, §3.3) and the platform check ([`platform`], §3.6).
//!
//! A plain library: the two components link it, each into its own wasm module with its own grant.

pub mod apis;
pub mod discovery;
pub mod gate;
pub mod namespaces;
pub mod platform;
