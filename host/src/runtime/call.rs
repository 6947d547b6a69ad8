//! One call into a component: given the action its caller found and the item it read, instantiate in
//! a fresh store under the module's memory cap and deadline, call the export, turn misbehaviour into a
//! [`Fault`], check what came back.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use wasmtime::Store;

use super::calls::{ActionCall, GuestCall};
use super::cpu_share::CpuShare;
use super::engine::MAX_CONCURRENT_CALLS;
use super::error::{CallError, Cause, Fault, InstantiateError, LoadError, Trapped};
use super::module::LoadedModule;
use super::registry::ActionEntry;
use crate::action::{ActionInfo, ItemRef};
use crate::bindings::Plugin;
use crate::capabilities::memory::{MemoryBudget, Refusal};
use crate::capabilities::{CallId, CallState};

/// How a call is admitted and bounded: a serving call waits for one of the runtime's slots and draws
/// on the process's memory budget; a shadow call (`crate::shadow`) was admitted by the shadows' own
/// budget, takes no slot, and runs under the shadows' deadline, CPU share and memory budget.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lane {
    /// A call whose answer goes to Velero.
    Serving,
    /// A shadow's call, compared and dropped.
    Shadow {
        /// The longest a shadow call may run (the module's own timeout, if shorter, wins).
        timeout: Duration,
        /// The CPU time one shadow call may use ([`CpuShare`]).
        cpu: Duration,
        /// The guest memory all shadow calls together may hold.
        memory: &'static MemoryBudget,
    },
}

/// What a call is on: its item, the uid of the Backup or Restore it is made for, and whether its
/// answer names items to Velero in that backup.
struct Subject {
    item: Option<ItemRef>,
    backup: Option<Arc<str>>,
    names_items: bool,
}

/// How far a call got.
enum Stage<R> {
    Instantiate(wasmtime::Error),
    Called(wasmtime::Result<R>),
}

/// What every call runs with: the engine, the host's services, where a call's `signing` import goes,
/// and the slots a serving call waits for. The runtime holds one; a call takes nothing else from it.
pub(super) struct Caller {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) services: Arc<crate::capabilities::Services>,
    pub(crate) signing: Arc<dyn crate::capabilities::SigningService>,
    pub(crate) slots: Semaphore,
}

impl Caller {
    /// Makes `call` to the action of `entry` in `lane`: the one path of every call of the actions
    /// interface. A call the action's kind does not have (a v1 action has no Progress) is refused.
    pub(super) async fn call<C: ActionCall>(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        call: C,
    ) -> Result<C::Output, CallError> {
        let info = entry.info();
        if !C::allowed(info.kind) {
            return Err(CallError::WrongKind {
                action: info.name.clone(),
                kind: info.kind,
                call: C::NAME,
            });
        }
        let (item, backup) = call.subject();
        let name = info.name.clone();
        let recorded = matches!(lane, Lane::Serving) && call.recorded();
        let subject = Subject {
            item,
            backup,
            names_items: C::NAMES_ITEMS,
        };
        let (raw, id) = self
            .invoke(lane, entry, subject, move |plugin, store| {
                call.call(plugin, store, name)
            })
            .await?;
        let output = C::answer(raw, &entry.module, &id)?;
        // What Velero is given as related items is what later calls of the backup learn was named
        // (docs/named-items.md#s2).
        if let (true, Some(named)) = (recorded, &self.services.named) {
            named.record(&id, C::named(&output));
        }
        Ok(output)
    }

    /// Asks a freshly linked module for its actions, under its own limits.
    pub(super) async fn describe(
        &self,
        linked: &super::module::Linked,
    ) -> Result<Vec<ActionInfo>, LoadError> {
        let Some(pre) = linked.exports.as_ref().and_then(|e| e.pre.as_ref()) else {
            return Ok(Vec::new());
        };
        let input = CallInput {
            id: CallId::new(linked.caps.module.clone(), "describe", None),
            caps: linked.caps.clone(),
            limits: linked.source.manifest.limits,
            budget: None,
            cpu: None,
        };
        let (result, id) = self
            .run_in_slot(pre, input, |plugin, store| {
                Box::pin(async move {
                    plugin
                        .velero_wasm_plugin_actions()
                        .call_describe(store)
                        .await
                })
            })
            .await;
        match result {
            Ok(actions) => Ok(actions.into_iter().map(ActionInfo::from).collect()),
            Err(fault) => Err(linked.error(format!("describe {fault}{}", id.on_item()))),
        }
    }

    /// Runs `call` on the action of `entry`, on the subject's item if the call has one, for the
    /// Backup or Restore whose uid is the subject's `backup` (its reads may come from that backup's
    /// read view).
    async fn invoke<R: Send + 'static>(
        &self,
        lane: Lane,
        entry: &ActionEntry,
        subject: Subject,
        call: impl for<'a> FnOnce(&'a Plugin, &'a mut Store<CallState>) -> GuestCall<'a, R> + Send,
    ) -> Result<(R, CallId), CallError> {
        let module = &entry.module;
        let mut input = CallInput::of(module, &entry.info().name, subject.item);
        input.id = input.id.for_backup(subject.backup);
        if subject.names_items {
            input.id = input.id.naming_items();
        }
        if let Lane::Shadow {
            timeout,
            cpu,
            memory,
        } = lane
        {
            input.id = input.id.into_shadow();
            input.limits.timeout = input.limits.timeout.min(timeout);
            input.budget = Some(memory);
            input.cpu = Some(cpu);
        }
        // A module whose failure policy refused it answers every call with why, running nothing.
        if let Some(why) = module.refusal() {
            return Err(CallError::Refused {
                module: module.name.to_string(),
                action: input.id.action.clone(),
                item: input.id.on_item(),
                why: Arc::from(why),
            });
        }
        let exports = module
            .exports()
            .await
            .map_err(|problem| CallError::fault(&input.id, Fault::Instantiate(problem)))?;
        let Some(pre) = &exports.pre else {
            let problem = InstantiateError::NoActions;
            return Err(CallError::fault(&input.id, Fault::Instantiate(problem)));
        };
        match self.run_in_slot(pre, input, call).await {
            (Ok(r), id) => Ok((r, id)),
            (Err(fault), id) => Err(CallError::fault(&id, fault)),
        }
    }

    /// Runs one call once a slot is free: a call waits for a slot at most its own deadline, then runs
    /// under its full deadline.
    async fn run_in_slot<R: Send + 'static>(
        &self,
        pre: &crate::bindings::PluginPre<CallState>,
        input: CallInput,
        call: impl for<'a> FnOnce(&'a Plugin, &'a mut Store<CallState>) -> GuestCall<'a, R> + Send,
    ) -> (Result<R, Fault>, CallId) {
        let timeout = input.limits.timeout;
        // A shadow call was admitted by the shadows' own budget: it never takes a serving call's slot.
        let shadow = input.budget.is_some();
        let slot = match shadow {
            true => None,
            false => Some(tokio::time::timeout(timeout, self.slots.acquire()).await),
        };
        match &slot {
            None | Some(Ok(Ok(_))) => {}
            Some(Ok(Err(_)) | Err(_)) => {
                let fault = Fault::NoSlot {
                    timeout,
                    slots: MAX_CONCURRENT_CALLS,
                };
                return (Err(fault), input.id);
            }
        };
        let host = Host {
            engine: &self.engine,
            services: &self.services,
            signing: Some(self.signing.clone()),
        };
        run_in_store(host, pre, input, call).await
    }
}

/// Where a call runs: the engine, the host-wide services, and where the call's `signing` import goes
/// (`None` where the import is not offered: inside a signing call itself).
pub(super) struct Host<'a> {
    pub(crate) engine: &'a wasmtime::Engine,
    pub(crate) services: &'a Arc<crate::capabilities::Services>,
    pub(crate) signing: Option<Arc<dyn crate::capabilities::SigningService>>,
}

/// What one call is given besides its guest function: which call it is, and the grant and limits of
/// its module.
pub(super) struct CallInput {
    pub(crate) id: CallId,
    pub(crate) caps: Arc<crate::capabilities::ModuleCaps>,
    pub(crate) limits: crate::modules::Limits,
    /// The memory budget the call draws on, when not the process's (a shadow call's).
    pub(crate) budget: Option<&'static MemoryBudget>,
    /// The CPU time the call may use, when it has a share (a shadow call's).
    pub(crate) cpu: Option<Duration>,
}

impl CallInput {
    /// A call of `action` (on `item`, if any) to `module`, under its grant and limits.
    pub(super) fn of(module: &LoadedModule, action: &str, item: Option<ItemRef>) -> CallInput {
        CallInput {
            id: CallId::new(module.name.clone(), action, item),
            caps: module.caps.clone(),
            limits: module.limits,
            budget: None,
            cpu: None,
        }
    }
}

/// A module prepared for instantiation: a typed world (`PluginPre`) or a plain `InstancePre`.
pub(super) trait Prepared: Sync {
    /// What instantiation yields.
    type Instance: Send;
    /// Instantiates in `store`.
    fn instantiate<'a>(&'a self, store: &'a mut Store<CallState>) -> GuestCall<'a, Self::Instance>;
}

impl Prepared for crate::bindings::PluginPre<CallState> {
    type Instance = Plugin;
    fn instantiate<'a>(&'a self, store: &'a mut Store<CallState>) -> GuestCall<'a, Plugin> {
        Box::pin(self.instantiate_async(store))
    }
}

impl Prepared for wasmtime::component::InstancePre<CallState> {
    type Instance = wasmtime::component::Instance;
    fn instantiate<'a>(&'a self, store: &'a mut Store<CallState>) -> GuestCall<'a, Self::Instance> {
        Box::pin(self.instantiate_async(store))
    }
}

/// Runs one call in a fresh store under the module's memory cap and deadline, and turns misbehaviour
/// into a [`Fault`].
pub(super) async fn run_in_store<P: Prepared, R: Send + 'static>(
    host: Host<'_>,
    pre: &P,
    input: CallInput,
    call: impl for<'a> FnOnce(&'a P::Instance, &'a mut Store<CallState>) -> GuestCall<'a, R> + Send,
) -> (Result<R, Fault>, CallId) {
    let CallInput {
        id,
        caps,
        limits,
        budget,
        cpu,
    } = input;
    let mut state = CallState::new(id, caps, host.services.clone(), &limits)
        .until(host.services.clock.limit(limits.timeout))
        .signing_to(host.signing);
    if let Some(budget) = budget {
        state = state.drawing_on(budget);
    }
    let mut store = Store::new(host.engine, state);
    store.limiter(CallState::limiter);
    // Yield at every tick (so the deadline can end a spinning guest), and stop a call whose host work
    // ran into a limit (`WorkBudget::exceed`) or that used its CPU share.
    let share = cpu.map(CpuShare::new);
    let stop = share.clone();
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |store| {
        if store.data().exceeded().is_some() {
            return Err(wasmtime::format_err!(
                "stopped by the host: a limit was exceeded"
            ));
        }
        if stop.as_ref().is_some_and(|share| share.spent()) {
            return Err(wasmtime::format_err!(
                "stopped by the host: the call used its CPU share"
            ));
        }
        Ok(wasmtime::UpdateDeadline::Yield(1))
    });
    let work = async {
        match pre.instantiate(&mut store).await {
            Err(e) => Stage::Instantiate(e),
            Ok(instance) => Stage::Called(call(&instance, &mut store).await),
        }
    };
    let outcome = match &share {
        Some(share) => tokio::time::timeout(limits.timeout, share.metered(work)).await,
        None => tokio::time::timeout(limits.timeout, work).await,
    };
    let state = store.into_data();
    log_guest_output(&state);
    let spent = share.filter(|share| share.spent());
    let result = match (outcome, state.exceeded().cloned()) {
        (Err(_elapsed), _) => Err(Fault::Timeout(limits.timeout)),
        // Stopped at an interruption once its share was used (or finished just past it: the share
        // is what a shadow call may use, and the call's own answer is then not compared).
        (Ok(_), None) if spent.is_some() => Err(Fault::CpuShare(
            spent.map(|share| share.share()).unwrap_or_default(),
        )),
        // A limit the host's work ran into fails the call even when the guest carried on.
        (Ok(_), Some(exceeded)) => Err(Fault::Limit(exceeded)),
        (Ok(Stage::Called(Ok(r))), None) => Ok(r),
        (Ok(Stage::Called(Err(error))), None) => Err(classify(error, &state, limits.memory)),
        (Ok(Stage::Instantiate(_)), None) if state.memory().refused.is_some() => {
            Err(memory_fault(&state, limits.memory))
        }
        (Ok(Stage::Instantiate(error)), None) => Err(Fault::Instantiate(
            InstantiateError::Wasmtime(Cause::from(error)),
        )),
    };
    (result, state.into_call())
}

/// Turns a wasmtime error into a [`Fault`].
fn classify(error: wasmtime::Error, state: &CallState, memory_limit: u64) -> Fault {
    if state.memory().refused.is_some() {
        return memory_fault(state, memory_limit);
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return Fault::Exit(exit.0);
    }
    let cause = match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string(),
    };
    let frame = error
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .and_then(|bt| {
            bt.frames()
                .iter()
                .find_map(|f| f.func_name().map(str::to_string))
        });
    Fault::Trap(Trapped {
        cause,
        frame,
        panic: state.output().stderr.panic_message(),
        traceback: state.output().stderr.python_traceback(),
    })
}

/// The module's own cap, or the process's budget, whichever refused the guest's growth.
fn memory_fault(state: &CallState, memory_limit: u64) -> Fault {
    match state.memory().refused {
        Some((asked, Refusal::Budget)) => Fault::MemoryBudget {
            asked_mib: asked >> 20,
            budget_mib: state.memory().budget().limit() >> 20,
        },
        _ => Fault::Memory {
            limit_mib: memory_limit >> 20,
        },
    }
}

fn log_guest_output(state: &CallState) {
    let (streams, call) = (state.output(), state.call());
    for (stream, output) in [("stdout", &streams.stdout), ("stderr", &streams.stderr)] {
        let text = output.text();
        if !text.is_empty() {
            tracing::debug!(
                module = &*call.module,
                action = call.action.as_str(),
                "guest {stream}: {}",
                text.trim_end()
            );
        }
    }
}
