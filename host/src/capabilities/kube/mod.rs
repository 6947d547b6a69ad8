//! The `kube` capability: what a guest may ask of Kubernetes, checked against its grant (`host.rs`:
//! the narrow view of a call, [`KubeView`], its authorisation and the WIT host functions), and the
//! read views that answer a backup's repeated reads ([`view`]). The calls themselves and the clients
//! that answer them are [`crate::cluster`]'s.

mod host;
pub(crate) mod view;

pub use host::object_for;
pub(super) use host::KubeHost;
pub(crate) use host::{reads_at_once, KubeView};
/// A module's Kubernetes grant: the grant crate's.
pub use velero_wasm_grant::KubeGrant;
