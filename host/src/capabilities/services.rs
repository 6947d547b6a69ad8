//! The host-wide services behind the capabilities, shared by every call.

use std::sync::Arc;

use super::clock::Clock;
use super::environment::Environment;
use super::http;
use super::kube;
use super::named_items::NamedItems;
use super::random::{self, RandomCall};
use crate::backend::Backend;
use crate::cluster::KubeCall;

/// The host-wide services behind the capabilities, shared by every call.
pub struct Services {
    /// The Kubernetes backend: fixtures, a live cluster, or a replay.
    pub(crate) kube: Arc<dyn Backend<KubeCall>>,
    /// The clock.
    pub(crate) clock: Clock,
    /// The host's environment: Velero's namespace, the process's variables.
    pub(crate) environment: Environment,
    /// Where outbound HTTP exchanges go: the network, a recording of it, or a replay.
    pub http: Arc<dyn Backend<http::Exchange>>,
    /// Where random bytes come from: the system's generator, a recording of it, or a replay.
    pub(crate) random: Arc<dyn Backend<RandomCall>>,
    /// The read views of the backups being served (docs/read-views.md); `None`: every read goes to
    /// the backend (as in `run`, replays and tests, whose calls must stay as recorded).
    pub views: Option<Arc<kube::view::ReadViews>>,
    /// What the serving calls of each backup named (docs/named-items.md); `None`: nothing is recorded
    /// and `named-before` answers `false` (as in `run`, replays and tests of single calls).
    pub named: Option<Arc<NamedItems>>,
    /// Whether `read-all` sends its reads at once (true unless the configuration says
    /// `VELERO_WASM_READ_BATCH=off`, [`kube::reads_at_once`]): one after another, to measure batching.
    pub(crate) reads_at_once: bool,
}

impl Services {
    /// Services with `kube`, `clock` and `environment`, the network for HTTP and the system's
    /// generator for random bytes.
    pub fn new(
        kube: Arc<dyn Backend<KubeCall>>,
        clock: Clock,
        environment: Environment,
    ) -> Services {
        Services {
            kube,
            clock,
            environment,
            http: Arc::new(http::NetworkTransport),
            random: Arc::new(random::SystemRandom),
            views: None,
            named: None,
            reads_at_once: true,
        }
    }
}
