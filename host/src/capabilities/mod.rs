//! What a component can reach, one module per import: [`kube`], [`clock`], [`log`], [`config`],
//! [`random`], [`http`], [`environment`], [`signing`]; plus [`backend`], the one shape of every
//! capability's calls to its backend, and [`recording`], the record and replay of those calls. (Where
//! the guest's stdout and stderr go is not a capability: [`crate::guest_output`].)
//!
//! Every call of a component runs with a fresh [`CallState`] as its store data. It carries the call's
//! identity (module, action, item) for logs and errors, the module's [`ModuleCaps`] (its grant and
//! settings) and the host-wide [`Services`] behind the capabilities.

pub mod backend;
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

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::action::ItemRef;
use crate::bindings::Plugin;
use crate::guest_output::GuestOutput;
pub use backend::{Backend, Call};
pub use clock::Clock;
pub use environment::{EnvGrant, Environment};
pub use exceeded::Exceeded;
pub use http::HttpGrant;
pub use kube::{KubeApi, KubeCall, KubeGrant};
pub use memory::{MemoryBudget, MemoryCap};
pub use random::RandomCall;
pub use signing::SigningService;

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
}

impl CallId {
    /// A call of `action` in `module`, on an item (its identity, as the caller read it from the
    /// request) if the call has one.
    pub fn new(module: Arc<str>, action: &str, item: Option<ItemRef>) -> CallId {
        CallId {
            module,
            action: action.to_string(),
            item,
            backup: None,
        }
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

/// The store data of one call.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The call's memory cap.
    pub memory: MemoryCap,
    /// Who is calling.
    pub call: CallId,
    /// The module's grant and settings.
    pub caps: Arc<ModuleCaps>,
    /// Host-wide services.
    pub services: Arc<Services>,
    /// The guest's stdout, logged at debug level after the call.
    pub stdout: GuestOutput,
    /// The guest's stderr (quoted in errors: a Rust panic message lands there).
    pub stderr: GuestOutput,
    /// What the guest has logged in this call (the `log` capability's own part).
    log: log::LogState,
    /// Calls of capabilities that do work for the guest (kube, http, environment, random, signing).
    pub capability_calls: u32,
    /// The most such calls the module may make in one call (manifest `[limits] capability-calls`).
    pub max_capability_calls: u32,
    /// A limit of the host's work that the call ran into (set by a capability); the call is stopped at
    /// the guest's next epoch tick and fails with it.
    pub exceeded: Option<Exceeded>,
    /// The call's time limit (outbound requests never wait beyond it; `clock.remaining` reads it).
    pub limit: Option<clock::TimeLimit>,
    /// Where the `signing` import's calls go; `None` where the import is not offered (inside a
    /// signing call itself).
    pub signing: Option<Arc<dyn SigningService>>,
}

impl CallState {
    /// Fresh state for one call. The WASI context `std` needs has no files, no sockets, no environment,
    /// no arguments; stdout and stderr are captured.
    pub fn new(
        call: CallId,
        caps: Arc<ModuleCaps>,
        services: Arc<Services>,
        limits: &velero_wasm_grant::Limits,
    ) -> CallState {
        let (stdout, stderr) = (GuestOutput::default(), GuestOutput::default());
        let mut wasi = WasiCtx::builder();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        services.clock.install(&mut wasi);
        CallState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            memory: MemoryCap::new(limits.memory, MemoryBudget::process()),
            call,
            caps,
            services,
            stdout,
            stderr,
            log: log::LogState::default(),
            capability_calls: 0,
            max_capability_calls: limits.capability_calls,
            exceeded: None,
            limit: None,
            signing: None,
        }
    }
}

impl CallState {
    /// Counts one capability call that does work for the guest. Past the module's limit the call is
    /// refused with the message returned here, and the whole call is stopped with it.
    pub fn count_capability_call(&mut self) -> Result<(), Exceeded> {
        self.capability_calls = self.capability_calls.saturating_add(1);
        if self.capability_calls <= self.max_capability_calls {
            return Ok(());
        }
        let exceeded = Exceeded::CapabilityCalls {
            max: self.max_capability_calls,
        };
        self.stop(exceeded.clone());
        Err(exceeded)
    }

    /// Stops the call at the guest's next epoch tick, failing it with `problem` (the first one wins).
    pub fn stop(&mut self, problem: impl Into<Exceeded>) {
        self.exceeded.get_or_insert_with(|| problem.into());
    }
}

/// Longest piece of guest input quoted in a host log line or error (a name, a namespace, an origin).
const MAX_SHOWN: usize = 256;

/// `text` for a log line or a message: cut to [`MAX_SHOWN`] bytes, marked with `…` when cut.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    shown_within(text, MAX_SHOWN)
}

/// `text` cut to `max` bytes, marked with `…` and its length when cut.
pub fn shown_within(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len()).into()
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl crate::bindings::velero_wasm::plugin::types::Host for CallState {}

/// A linker with every import a component may use: the WASI interfaces `std` needs, and ours.
pub fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    signing::add_to_linker(&mut linker)?;
    Ok(linker)
}
