//! The store data of one call, [`CallState`], and the narrow view each capability takes of it (as
//! wasmtime's WASI host implementations take a `WasiCtxView`): a capability's host functions are
//! implemented on its view, so they reach only the parts of the call they need. The fields are
//! private to this module; the runtime reads what a call left behind through the accessors below.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::budget::WorkBudget;
use super::call_id::CallId;
use super::clock::{ClockView, TimeLimit};
use super::environment::EnvironmentView;
use super::exceeded::Exceeded;
use super::grants::ModuleCaps;
use super::http::HttpView;
use super::kube::KubeView;
use super::log::{LogState, LogView};
use super::memory::{AnswerAccount, MemoryBudget, MemoryCap};
use super::module_settings::ConfigView;
use super::named_items::NamedItemsView;
use super::random::RandomView;
use super::services::Services;
use super::signing::SigningService;
use super::signing::SigningView;
use crate::guest_output::GuestStreams;

/// The store data of one call.
pub(crate) struct CallState {
    /// What `std`'s WASI imports see: no files, no sockets, no environment; stdout and stderr
    /// captured (wasmtime's own view, [`WasiView`]).
    wasi: WasiCtx,
    table: ResourceTable,
    /// Who is calling (module, action, item): every capability names it in logs and errors, and the
    /// runtime returns it with the call's outcome.
    call: CallId,
    /// The module's grant and settings: read by the capabilities that check a grant and by `config`.
    caps: Arc<ModuleCaps>,
    /// The host-wide services: each capability's view takes only the one behind it.
    services: Arc<Services>,
    /// The call's memory cap: wasmtime's limiter grows the guest's memories against it, `kube` sizes
    /// its answers by it, and the runtime reads its refusal.
    memory: MemoryCap,
    /// The account of the answers of the guest's last `kube` or `http` import: what the host holds of
    /// them stays reserved from the process's budget until the guest has them, that is until its next
    /// import or the end of the call (when the state is dropped).
    last_answers: Option<Arc<AnswerAccount>>,
    /// The host's work for the guest: charged by the capabilities that do work, read by the runtime
    /// to stop the call and fail it with the limit it ran into.
    budget: WorkBudget,
    /// The guest's stdout and stderr: read by the runtime only, once the call is over.
    output: GuestStreams,
    /// What the guest has logged in this call: the `log` capability's alone.
    log: LogState,
    /// Where the `signing` import's calls go (the import's alone); `None` where the import is not
    /// offered (inside a signing call itself).
    signing: Option<Arc<dyn SigningService>>,
}

impl CallState {
    /// Fresh state for one call, drawing on the process's memory budget, without a time limit or
    /// signing. The WASI context `std` needs has no files, no sockets, no environment, no arguments;
    /// stdout and stderr are captured.
    pub(crate) fn new(
        call: CallId,
        caps: Arc<ModuleCaps>,
        services: Arc<Services>,
        limits: &velero_wasm_grant::Limits,
    ) -> CallState {
        let output = GuestStreams::default();
        let mut wasi = WasiCtx::builder();
        wasi.stdout(output.stdout.clone())
            .stderr(output.stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        services.clock.install(&mut wasi);
        CallState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            call,
            caps,
            services,
            memory: MemoryCap::new(limits.memory, MemoryBudget::process()),
            last_answers: None,
            budget: WorkBudget::new(limits.capability_calls),
            output,
            log: LogState::default(),
            signing: None,
        }
    }

    /// The state, its guest memory drawn from `budget` instead of the process's (a shadow call's).
    pub(crate) fn drawing_on(mut self, budget: &'static MemoryBudget) -> CallState {
        self.memory = MemoryCap::new(self.memory.limit(), budget);
        self
    }

    /// The state, the call ending at `limit`.
    pub(crate) fn until(mut self, limit: TimeLimit) -> CallState {
        self.budget = self.budget.until(limit);
        self
    }

    /// The state, its `signing` import's calls going to `signing` (`None`: not offered).
    pub(crate) fn signing_to(mut self, signing: Option<Arc<dyn SigningService>>) -> CallState {
        self.signing = signing;
        self
    }

    /// Which call this is.
    pub(crate) fn call(&self) -> &CallId {
        &self.call
    }

    /// Which call this was, once it is over.
    pub(crate) fn into_call(self) -> CallId {
        self.call
    }

    /// The call's memory cap: what it allows and whether it refused the guest's growth.
    pub(crate) fn memory(&self) -> &MemoryCap {
        &self.memory
    }

    /// The memory cap as the store's limiter (`Store::limiter`).
    pub(crate) fn limiter(&mut self) -> &mut dyn wasmtime::ResourceLimiter {
        &mut self.memory
    }

    /// The limit of the host's work the call ran into, if any.
    pub(crate) fn exceeded(&self) -> Option<&Exceeded> {
        self.budget.exceeded()
    }

    /// What the guest wrote to its stdout and stderr.
    pub(crate) fn output(&self) -> &GuestStreams {
        &self.output
    }

    /// The `kube` capability's view.
    pub(super) fn kube(&mut self) -> KubeView<'_> {
        KubeView {
            call: &self.call,
            caps: &self.caps,
            backend: &self.services.kube,
            views: self.services.views.as_ref(),
            velero_namespace: self.services.environment.velero_namespace(),
            budget: &mut self.budget,
            memory_limit: self.memory.limit(),
            memory_budget: self.memory.budget(),
            last_answers: &mut self.last_answers,
            reads_at_once: self.services.reads_at_once,
        }
    }

    /// The `http` capability's view.
    pub(super) fn http(&mut self) -> HttpView<'_> {
        HttpView {
            call: &self.call,
            caps: &self.caps,
            backend: &self.services.http,
            budget: &mut self.budget,
            memory_limit: self.memory.limit(),
            memory_budget: self.memory.budget(),
            last_answers: &mut self.last_answers,
        }
    }

    /// The `environment` capability's view.
    pub(super) fn environment(&mut self) -> EnvironmentView<'_> {
        EnvironmentView {
            call: &self.call,
            caps: &self.caps,
            environment: &self.services.environment,
            budget: &mut self.budget,
        }
    }

    /// The `random` capability's view.
    pub(super) fn random(&mut self) -> RandomView<'_> {
        RandomView {
            backend: &self.services.random,
            budget: &mut self.budget,
        }
    }

    /// The `clock` capability's view.
    pub(super) fn clock(&mut self) -> ClockView<'_> {
        ClockView {
            clock: &self.services.clock,
            limit: self.budget.time_limit(),
        }
    }

    /// The `config` capability's view.
    pub(super) fn config(&mut self) -> ConfigView<'_> {
        ConfigView {
            settings: &self.caps.settings,
        }
    }

    /// The `named-items` capability's view.
    pub(super) fn named_items(&mut self) -> NamedItemsView<'_> {
        NamedItemsView {
            call: &self.call,
            records: self.services.named.as_ref(),
            budget: &mut self.budget,
        }
    }

    /// The `log` capability's view.
    pub(super) fn log(&mut self) -> LogView<'_> {
        LogView {
            call: &self.call,
            log: &mut self.log,
        }
    }

    /// The `signing` import's view.
    pub(super) fn signing(&mut self) -> SigningView<'_> {
        SigningView {
            caller: &self.call.module,
            shadow: self.call.is_shadow(),
            service: self.signing.as_ref(),
            budget: &mut self.budget,
        }
    }
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
