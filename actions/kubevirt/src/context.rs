//! What every action runs with: the cluster it may read and the module's mode.

use velero_wasm_sdk::Cluster;

use crate::mode::Mode;

/// The cluster (the host's `kube` capability, or a fake in tests) and the mode.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// Every Kubernetes read goes through here.
    pub cluster: &'a dyn Cluster,
    /// `upstream` or `extended`.
    pub mode: Mode,
}

impl<'a> Context<'a> {
    /// A context.
    pub fn new(cluster: &'a dyn Cluster, mode: Mode) -> Context<'a> {
        Context { cluster, mode }
    }

    /// Whether extended behaviour applies.
    pub fn extended(&self) -> bool {
        self.mode.extended()
    }
}
