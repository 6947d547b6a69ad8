//! What a component can reach, one module per import: [`kube`], [`clock`], [`log`], [`config`],
//! [`random`], [`http`], [`environment`], [`signing`]; plus [`recording`], the record and replay of
//! the calls each hands its backend ([`crate::backend`], the one shape of them all). (Where the
//! guest's stdout and stderr go is not a capability: [`crate::guest_output`].)
//!
//! Every call of a component runs with a fresh [`CallState`] as its store data. It carries the call's
//! identity (module, action, item) for logs and errors, the module's [`ModuleCaps`] (its grant and
//! settings), the host-wide [`Services`] behind the capabilities, and the [`WorkBudget`] they charge;
//! each capability's host functions see only their own view of it (`state.rs`).

mod budget;
pub mod clock;
mod config;
pub mod environment;
mod exceeded;
pub mod http;
pub mod kube;
mod log;
pub mod memory;
pub mod random;
pub mod recording;
pub mod signing;
mod state;

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::action::ItemRef;
use crate::backend::Backend;
use crate::bindings::velero_wasm::plugin as wit;
use crate::cluster::KubeCall;
pub use budget::WorkBudget;
pub use clock::Clock;
pub use environment::{EnvGrant, Environment};
pub use exceeded::Exceeded;
pub use http::HttpGrant;
pub use kube::KubeGrant;
pub use memory::{MemoryBudget, MemoryCap};
pub use random::RandomCall;
pub use signing::SigningService;
pub use state::CallState;

/// The host-wide services behind the capabilities, shared by every call.
pub struct Services {
    /// The Kubernetes backend: fixtures, a live cluster, or a replay.
    pub kube: Arc<dyn Backend<KubeCall>>,
    /// The clock.
    pub clock: Clock,
    /// The host's environment: Velero's namespace, the process's variables.
    pub environment: Environment,
    /// Where outbound HTTP exchanges go: the network, a recording of it, or a replay.
    pub http: Arc<dyn Backend<http::Exchange>>,
    /// Where random bytes come from: the system's generator, a recording of it, or a replay.
    pub random: Arc<dyn Backend<RandomCall>>,
    /// The read views of the backups being served (docs/read-views.md); `None`: every read goes to
    /// the backend (as in `run`, replays and tests, whose calls must stay as recorded).
    pub views: Option<Arc<kube::view::ReadViews>>,
    /// Whether `read-all` sends its reads at once (true unless the configuration says
    /// `VELERO_WASM_READ_BATCH=off`, [`kube::reads_at_once`]): one after another, to measure batching.
    pub reads_at_once: bool,
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
            reads_at_once: true,
        }
    }
}

/// What one module is allowed and configured to do, built once when the module loads.
#[derive(Debug)]
pub struct ModuleCaps {
    /// Module name.
    pub module: Arc<str>,
    /// Kubernetes grant.
    pub kube: KubeGrant,
    /// HTTP grant and limits.
    pub http: HttpGrant,
    /// Environment variables and variable-named files.
    pub env: EnvGrant,
    /// Settings from the manifest.
    pub settings: BTreeMap<String, String>,
    /// Whether the module's reads may be answered from a backup's read view (manifest `read-views`).
    pub read_views: bool,
    /// A shadow module (`crate::shadow`): it reads within its grant but never writes, so that trying
    /// a candidate changes nothing in the cluster or beyond it.
    pub shadow: bool,
}

/// Which call this is: module, action, and the item the call is on; it names the call in logs and
/// errors.
pub struct CallId {
    /// Module name.
    pub module: Arc<str>,
    /// Action name.
    pub action: String,
    item: Option<ItemRef>,
    backup: Option<Arc<str>>,
    shadow: bool,
}

/// Logs at warn, or at info with `shadow = true` when `call` is a shadow's: nothing a shadow does
/// reaches Velero's warning count (docs/operation.md#what-velero-counts).
macro_rules! warn_unless_shadow {
    ($call:expr, $($args:tt)+) => {
        if $call.is_shadow() {
            tracing::info!(shadow = true, $($args)+)
        } else {
            tracing::warn!($($args)+)
        }
    };
}
pub(crate) use warn_unless_shadow;

impl CallId {
    /// A call of `action` in `module`, on an item (its identity, as the caller read it from the
    /// request) if the call has one.
    pub fn new(module: Arc<str>, action: &str, item: Option<ItemRef>) -> CallId {
        CallId {
            module,
            action: action.to_string(),
            item,
            backup: None,
            shadow: false,
        }
    }

    /// The call, made on a shadow module (`crate::shadow`): its log lines stay below warn.
    pub fn as_shadow(mut self) -> CallId {
        self.shadow = true;
        self
    }

    /// Whether the call is a shadow's.
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The call, made for the Backup or Restore whose `metadata.uid` is `uid`: its reads may be
    /// answered from that backup's read view.
    pub fn for_backup(mut self, uid: Option<Arc<str>>) -> CallId {
        self.backup = uid;
        self
    }

    /// The `metadata.uid` of the Backup or Restore the call is made for, if known.
    pub fn backup(&self) -> Option<&str> {
        self.backup.as_deref()
    }

    /// The item's identity; `None` for a call without an item.
    pub fn item(&self) -> Option<&ItemRef> {
        self.item.as_ref()
    }

    /// `" on item <resource.group ns/name>"`, or "" without an item: for error messages.
    pub fn on_item(&self) -> String {
        match self.item() {
            Some(item) => format!(" on item {item}"),
            None => String::new(),
        }
    }
}

/// A linker with every import a component may use: the WASI interfaces `std` needs, and ours.
pub fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    // Each capability's host functions take its own view of the call (`state`).
    let l = &mut linker;
    wit::types::add_to_linker::<CallState, HasSelf<CallState>>(l, |state| state)?;
    wit::kube::add_to_linker::<CallState, kube::KubeHost>(l, CallState::kube)?;
    wit::clock::add_to_linker::<CallState, clock::ClockHost>(l, CallState::clock)?;
    wit::log::add_to_linker::<CallState, log::LogHost>(l, CallState::log)?;
    wit::config::add_to_linker::<CallState, config::ConfigHost>(l, CallState::config)?;
    wit::random::add_to_linker::<CallState, random::RandomHost>(l, CallState::random)?;
    wit::http::add_to_linker::<CallState, http::HttpHost>(l, CallState::http)?;
    wit::environment::add_to_linker::<CallState, environment::EnvironmentHost>(
        l,
        CallState::environment,
    )?;
    signing::add_to_linker(&mut linker)?;
    Ok(linker)
}
