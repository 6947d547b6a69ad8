//! What the `hcp` and `agent` components share (behaviour: `docs/hcp.md`):
//! the resource types they call ([`apis`]), the HyperShift gate that turns every other backup into a
//! pass-through ([`gate`], docs/hcp.md#s3-1), the discovery of the backup's HostedControlPlane ([`discovery`],
//! docs/hcp.md#s3-2, #s3-3) and the platform check ([`platform`], #s3-6).
//!
//! A plain library: the two components link it, each into its own wasm module with its own grant.

pub mod apis;
pub mod discovery;
pub mod gate;
pub mod namespaces;
pub mod platform;
