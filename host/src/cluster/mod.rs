//! The clients that talk to Kubernetes API servers, and the calls they answer: the call vocabulary
//! ([`KubeCall`], [`KubeAnswer`], [`KubeError`], [`KubeApi`]), the live API server ([`live`]), the
//! in-memory fixture cluster ([`fixture`]) and the write log of `run` ([`writes`]).
//!
//! Nothing here knows of guests: the `kube` capability (`capabilities/kube/`) checks a guest's call
//! against its grant and hands one [`KubeCall`] to one of these; module ConfigMaps, the version floor,
//! the plugin and the CLI use them directly, for the host's own calls.

pub(crate) mod fixture;
mod json;
pub(crate) mod live;
mod vocabulary;
pub(crate) mod writes;

pub use json::Json;
pub use vocabulary::{
    ApiResource, BadFieldSelector, FieldSelector, KubeAnswer, KubeApi, KubeCall, KubeError,
    ListOptions, NoCluster, Patch,
};
