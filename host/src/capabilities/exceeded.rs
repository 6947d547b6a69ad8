//! A limit of the host's work for a guest that a call ran into: a capability sets it
//! ([`super::WorkBudget::exceed`]) and the call is stopped and fails with it.

use crate::cluster::KubeError;

/// Which limit of the host's work the call ran into; its text is the message the call fails with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// More capability calls than the module's `[limits] capability-calls`.
    #[error("made more than {max} capability calls (kube, http, environment, random, signing) in one call, its limit (manifest [limits] capability-calls)")]
    CapabilityCalls {
        /// The module's limit.
        max: u32,
    },
    /// A Kubernetes read whose answer would not fit the guest's memory.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// A limit the capability that ran into it describes in its own words.
    #[error("{0}")]
    Described(String),
}

impl From<String> for Exceeded {
    fn from(problem: String) -> Exceeded {
        Exceeded::Described(problem)
    }
}
