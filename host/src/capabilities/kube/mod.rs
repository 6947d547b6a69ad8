//! The `kube` capability: what a guest may ask of Kubernetes, checked against its grant (`host.rs`:
//! the narrow view of a call, [`KubeView`], its authorisation and the WIT host functions), and the
//! read views that answer a backup's repeated reads ([`view`]). The calls themselves and the clients
//! that answer them are [`crate::cluster`]'s.

mod host;
pub mod view;

pub(super) use host::KubeHost;
pub use host::{object_for, reads_at_once, KubeView, BATCH_VARIABLE, MAX_BATCH};
/// A module's Kubernetes grant and the resources the host knows: the grant crate's.
pub use velero_wasm_grant::{resources, KubeGrant};
