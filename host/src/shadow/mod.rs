//! Shadow modules: a candidate version of a module, run on real calls in the cluster before it serves.
//!
//! A module ConfigMap labelled [`SHADOW_LABEL`](crate::modules::configmaps::SHADOW_LABEL) is loaded as
//! the shadow of the module of its name ([`crate::runtime::Runtime::load_shadow`]). For every Execute
//! (backup, restore), GetRelatedItems and delete call the serving module gets, the plugin answers
//! Velero first; then a task of its own calls the shadow with the same input and compares the two
//! results ([`crate::action::compare`]). Nothing the shadow does reaches Velero:
//!
//! - it runs after the answer is made, on its own budget ([`Budget`]): a few calls at a time, taken
//!   in the order the calls come (a call over that is dropped, never queued), its own deadline, a
//!   CPU share per call, its own memory budget (a call that would not fit is dropped), which also
//!   holds what the host keeps of each call for the comparison (its input and the serving answer: a
//!   call whose copy would not fit is dropped before it is queued); it never takes one of the
//!   serving calls' slots;
//! - all shadow calls run on one thread of their own ([`shadow_thread`]): together they never take
//!   more than one core, at the priority [`NICE_ENV`] gives that thread;
//! - its `kube` writes and its HTTP requests other than GET and HEAD are refused (reads stay within
//!   its own grant), so the cluster is as if it had not run;
//! - its faults (trap, deadline, memory) are counted, never raised.
//!
//! A difference (output item, additional items, error or not, …) is logged once per item and backup at
//! info with its JSON Patch, counted in metrics by module, action and kind ([`crate::metrics::shadow`])
//! and in the [status](status) the `velero-wasm status` command reads; when a backup's (or
//! restore's) calls go idle, one line per shadow summarises it. Progress, Cancel and AreAdditionalItemsReady
//! are not mirrored: they concern an operation the shadow never started.

mod book;
pub mod status_files;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::action::compare::{self, Comparison};
use crate::action::{ActionKind, BackupOutcome, ItemRef, ResourceId, RestoreOutcome};
use crate::capabilities::memory::AnswerAccount;
use crate::capabilities::MemoryBudget;
use crate::metrics::{self, ShadowEvent};
use crate::runtime::{calls, ActionCall, ActionEntry, CallError, Fault, Lane, Runtime};
pub(crate) use book::{Book, SubjectKey};
pub use book::{LastDifference, Tally};

/// Shadow calls that may run at once (`VELERO_WASM_SHADOW_CALLS`, default 2): one more is dropped.
pub(crate) use crate::config::VELERO_WASM_SHADOW_CALLS as CALLS_ENV;
/// The CPU time one shadow call may use (`VELERO_WASM_SHADOW_CPU`, e.g. `2s`; default 10 s): past it
/// the call is stopped and counted as a `cpu` fault, whatever its deadline.
pub(crate) use crate::config::VELERO_WASM_SHADOW_CPU as CPU_ENV;
/// How long a backup's calls must have stopped before its summary is logged
/// (`VELERO_WASM_SHADOW_IDLE`, default 60 s; the summary is logged at exit otherwise).
pub(crate) use crate::config::VELERO_WASM_SHADOW_IDLE as IDLE_ENV;
/// The guest memory all shadow calls together may hold (`VELERO_WASM_SHADOW_MEMORY`, e.g. `512MiB`;
/// default a quarter of the process's budget).
pub(crate) use crate::config::VELERO_WASM_SHADOW_MEMORY as MEMORY_ENV;
/// The nice value of the shadows' thread (`VELERO_WASM_SHADOW_NICE`, 0 to 19; default 0, the
/// plugin's own): 19 lets the serving calls' threads have the processor whenever they want it, at the
/// cost of shadows that may then wait past their deadline on a busy node.
pub(crate) use crate::config::VELERO_WASM_SHADOW_NICE as NICE_ENV;
/// The longest one shadow call may run (`VELERO_WASM_SHADOW_TIMEOUT`, e.g. `10s`; default 30 s; the
/// module's own timeout wins when shorter).
pub(crate) use crate::config::VELERO_WASM_SHADOW_TIMEOUT as TIMEOUT_ENV;

const DEFAULT_CALLS: usize = 2;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_CPU: Duration = Duration::from_secs(10);
const DEFAULT_IDLE: Duration = Duration::from_secs(60);

/// What shadow calls may use, all together.
#[derive(Debug)]
pub struct Budget {
    /// Calls at once.
    pub calls: usize,
    /// The longest one call may run.
    pub(crate) timeout: Duration,
    /// The CPU time one call may use.
    pub(crate) cpu: Duration,
    /// The nice value of the shadows' thread.
    pub nice: i32,
    /// Guest memory of all shadow calls together.
    pub(crate) memory: &'static MemoryBudget,
    /// How long a backup's calls must have stopped before its summary.
    pub(crate) idle: Duration,
}

static SHADOW_MEMORY: OnceLock<MemoryBudget> = OnceLock::new();

impl Budget {
    /// The budget `config` sets ([`CALLS_ENV`], [`TIMEOUT_ENV`], [`CPU_ENV`], [`NICE_ENV`],
    /// [`MEMORY_ENV`], [`IDLE_ENV`]);
    /// a value that cannot be used is a warning, and the default is used.
    pub fn from_config(config: &crate::config::Config) -> Budget {
        fn var<T>(
            text: &Option<String>,
            name: &str,
            parse: impl Fn(&str) -> Option<T>,
        ) -> Option<T> {
            let text = text.as_ref().filter(|t| !t.trim().is_empty())?;
            let parsed = parse(text.trim());
            if parsed.is_none() {
                tracing::info!("{name}={text:?} cannot be used; the default applies");
            }
            parsed
        }
        let settings = config.shadow();
        let duration = |t: &str| humantime::parse_duration(t).ok().filter(|d| !d.is_zero());
        let memory = SHADOW_MEMORY.get_or_init(|| {
            let bytes = var(
                &settings.memory,
                MEMORY_ENV,
                crate::modules::parse_byte_size,
            )
            .unwrap_or_else(|| MemoryBudget::process().limit() / 4);
            MemoryBudget::new(bytes)
        });
        Budget {
            calls: var(&settings.calls, CALLS_ENV, |t| t.parse::<usize>().ok())
                .unwrap_or(DEFAULT_CALLS),
            timeout: var(&settings.timeout, TIMEOUT_ENV, duration).unwrap_or(DEFAULT_TIMEOUT),
            cpu: var(&settings.cpu, CPU_ENV, duration).unwrap_or(DEFAULT_CPU),
            nice: var(&settings.nice, NICE_ENV, |t| {
                t.parse::<i32>().ok().filter(|n| (0..=19).contains(n))
            })
            .unwrap_or(0),
            memory,
            idle: var(&settings.idle, IDLE_ENV, duration).unwrap_or(DEFAULT_IDLE),
        }
    }
}

/// One call the serving module answered, with its input and the answer Velero got, to be made again
/// on the shadow.
pub enum Mirrored {
    /// Backup Execute (v1 or v2).
    Backup {
        /// The kind Velero called (v1 or v2).
        kind: ActionKind,
        /// The call as the serving module got it.
        call: calls::Backup,
        /// What Velero got: the outcome, or the error (its message is what Velero got).
        served: Result<BackupOutcome, Arc<CallError>>,
    },
    /// Restore Execute (v1 or v2).
    Restore {
        /// The kind Velero called (v1 or v2).
        kind: ActionKind,
        /// The call as the serving module got it.
        call: calls::Restore,
        /// What Velero got.
        served: Result<RestoreOutcome, Arc<CallError>>,
    },
    /// ItemBlockAction GetRelatedItems.
    Related {
        /// The call as the serving module got it.
        call: calls::RelatedItems,
        /// What Velero got.
        served: Result<Vec<ResourceId>, Arc<CallError>>,
    },
    /// DeleteItemAction Execute.
    Delete {
        /// The call as the serving module got it.
        call: calls::Delete,
        /// What Velero got.
        served: Result<(), Arc<CallError>>,
    },
}

/// A call that is mirrored to the shadow of the module that answered it.
pub(crate) trait Mirror: ActionCall + Clone
where
    Self::Output: Clone,
{
    /// The call, of `kind`, with what Velero got of it.
    fn mirrored(self, kind: ActionKind, served: Result<Self::Output, Arc<CallError>>) -> Mirrored;
}

impl Mirror for calls::Backup {
    fn mirrored(self, kind: ActionKind, served: Result<BackupOutcome, Arc<CallError>>) -> Mirrored {
        Mirrored::Backup {
            kind,
            call: self,
            served,
        }
    }
}

impl Mirror for calls::Restore {
    fn mirrored(
        self,
        kind: ActionKind,
        served: Result<RestoreOutcome, Arc<CallError>>,
    ) -> Mirrored {
        Mirrored::Restore {
            kind,
            call: self,
            served,
        }
    }
}

impl Mirror for calls::RelatedItems {
    fn mirrored(self, _: ActionKind, served: Result<Vec<ResourceId>, Arc<CallError>>) -> Mirrored {
        Mirrored::Related { call: self, served }
    }
}

impl Mirror for calls::Delete {
    fn mirrored(self, _: ActionKind, served: Result<(), Arc<CallError>>) -> Mirrored {
        Mirrored::Delete { call: self, served }
    }
}

impl Mirrored {
    /// Bytes of text the host keeps of the call for the comparison: its input and the serving answer.
    fn held_bytes(&self) -> u64 {
        fn ids(ids: &[ResourceId]) -> usize {
            ids.iter()
                .map(|id| id.group.len() + id.resource.len() + id.namespace.len() + id.name.len())
                .sum()
        }
        fn error(e: &CallError) -> usize {
            e.to_string().len()
        }
        let bytes = match self {
            Mirrored::Backup { call, served, .. } => {
                call.request.item.len()
                    + call.request.backup.len()
                    + match served {
                        Ok(o) => {
                            o.item.len() + ids(&o.additional_items) + ids(&o.post_operation_items)
                        }
                        Err(e) => error(e),
                    }
            }
            Mirrored::Restore { call, served, .. } => {
                call.request.item.len()
                    + call.request.item_from_backup.len()
                    + call.request.restore.len()
                    + match served {
                        Ok(o) => o.item.len() + ids(&o.additional_items),
                        Err(e) => error(e),
                    }
            }
            Mirrored::Related { call, served } => {
                call.text.len()
                    + call.backup.len()
                    + match served {
                        Ok(related) => ids(related),
                        Err(e) => error(e),
                    }
            }
            Mirrored::Delete { call, served } => {
                call.text.len() + call.backup.len() + served.as_ref().err().map_or(0, |e| error(e))
            }
        };
        bytes as u64
    }

    fn item(&self) -> &ItemRef {
        match self {
            Mirrored::Backup { call, .. } => &call.item,
            Mirrored::Restore { call, .. } => &call.item,
            Mirrored::Related { call, .. } => &call.item,
            Mirrored::Delete { call, .. } => &call.item,
        }
    }

    /// Velero's name for the call.
    fn call(&self) -> &'static str {
        match self {
            Mirrored::Related { .. } => "GetRelatedItems",
            _ => "Execute",
        }
    }

    /// The Backup or Restore the call belongs to.
    fn subject(&self) -> SubjectKey {
        let (kind, text) = match self {
            Mirrored::Backup { call, .. } => ("backup", call.request.backup.as_str()),
            Mirrored::Restore { call, .. } => ("restore", call.request.restore.as_str()),
            Mirrored::Related { call, .. } => ("backup", call.backup.as_str()),
            Mirrored::Delete { call, .. } => ("backup", call.backup.as_str()),
        };
        SubjectKey::of(kind, text)
    }

    /// Makes the call again on the shadow's `entry` in `lane`: its result, as compared.
    async fn again(
        &self,
        runtime: &Runtime,
        lane: Lane,
        entry: &ActionEntry,
    ) -> Result<Value, CallError> {
        Ok(match self {
            Mirrored::Backup { kind, call, .. } => {
                let outcome = runtime.call(lane, entry, call.clone()).await?;
                compare::backup_result::<String>(*kind, &Ok(outcome))
            }
            Mirrored::Restore { kind, call, .. } => {
                let outcome = runtime.call(lane, entry, call.clone()).await?;
                compare::restore_result::<String>(*kind, &Ok(outcome))
            }
            Mirrored::Related { call, .. } => {
                let related = runtime.call(lane, entry, call.clone()).await?;
                compare::related_result::<String>(&Ok(related))
            }
            Mirrored::Delete { call, .. } => {
                runtime.call(lane, entry, call.clone()).await?;
                compare::delete_result::<String>(&Ok(()))
            }
        })
    }

    /// The serving module's result, as compared.
    fn served(&self) -> Value {
        match self {
            Mirrored::Backup { kind, served, .. } => compare::backup_result(*kind, served),
            Mirrored::Restore { kind, served, .. } => compare::restore_result(*kind, served),
            Mirrored::Related { served, .. } => compare::related_result(served),
            Mirrored::Delete { served, .. } => compare::delete_result(served),
        }
    }
}

/// The name of the thread every shadow call runs on (`/proc/<pid>/task/*/comm` shows it).
pub const THREAD_NAME: &str = "vw-shadows";
/// The name of the threads the shadows' runtime starts for blocking work.
const IO_THREAD_NAME: &str = "vw-shadows-io";

/// The runtime of the one thread shadow calls run on, started on first use with nice value `nice`
/// (a process's shadows share one thread, and so the first call's value): shadows together never take
/// more than that one core. `None` when the thread cannot be started (the shadows then run on the
/// caller's runtime, under their CPU share alone; said once, at info).
pub(crate) fn shadow_thread(nice: i32) -> Option<&'static tokio::runtime::Handle> {
    static THREAD: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();
    THREAD
        .get_or_init(|| match start_shadow_thread(nice) {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::info!(
                    "cannot start the shadows' own thread ({e}); shadows share the serving threads"
                );
                None
            }
        })
        .as_ref()
}

fn start_shadow_thread(nice: i32) -> std::io::Result<tokio::runtime::Handle> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            // Per thread on Linux; threads it starts (the runtime's blocking pool) inherit it.
            if nice != 0 {
                let me = Some(rustix::thread::gettid());
                if let Err(e) = rustix::process::setpriority_process(me, nice) {
                    tracing::info!("cannot set the shadows' thread to nice {nice}: {e}");
                }
            }
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(IO_THREAD_NAME)
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = sender.send(Err(e));
                    return;
                }
            };
            let _ = sender.send(Ok(runtime.handle().clone()));
            runtime.block_on(std::future::pending::<()>());
        })?;
    receiver
        .recv()
        .map_err(|_| std::io::Error::other("the shadows' thread ended at start"))?
}

/// The shadows of one plugin process: their budget, what they did, and where that is written.
pub struct Shadows {
    budget: Budget,
    slots: Arc<Semaphore>,
    book: Mutex<Book>,
    status_file: OnceLock<PathBuf>,
    sweeper: OnceLock<()>,
    me: Weak<Shadows>,
}

impl Shadows {
    /// Shadows with `budget`.
    pub fn new(budget: Budget) -> Arc<Shadows> {
        Arc::new_cyclic(|me| Shadows {
            slots: Arc::new(Semaphore::new(budget.calls)),
            budget,
            book: Mutex::new(Book::default()),
            status_file: OnceLock::new(),
            sweeper: OnceLock::new(),
            me: me.clone(),
        })
    }

    /// Writes what the shadows did to `file` from now on (`status_files::Status`).
    pub(crate) fn write_status_to(&self, file: PathBuf) {
        let _ = self.status_file.set(file);
    }

    /// Whether the module of `entry` has a shadow: only then is a call's input kept for it.
    pub(crate) fn wanted(runtime: &Runtime, entry: &ActionEntry) -> bool {
        runtime.catalog().shadow(&entry.module.name).is_some()
    }

    /// Makes `call` again on the shadow of `entry`'s module, on a task of its own: what the shadow
    /// does is compared and counted, never returned.
    pub(crate) fn mirror(&self, runtime: Arc<Runtime>, entry: &ActionEntry, call: Mirrored) {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        self.start_sweeper();
        let (module, action) = (entry.module.name.to_string(), entry.info().name.clone());
        let subject = call.subject();
        self.book().started(&subject, &module);
        let finish = |outcome| {
            self.book()
                .finished(&subject, &module, &action, call.item(), outcome)
        };
        // What is kept for the comparison is held from the shadows' memory budget until it is done;
        // a call whose copy would not fit is dropped now, its copy with it.
        let kept = AnswerAccount::new(u64::MAX, self.budget.memory);
        if kept.hold(call.held_bytes()).is_err() {
            metrics::shadow(
                &module,
                &action,
                call.call(),
                ShadowEvent::Dropped("memory"),
            );
            return finish(book::Outcome::Dropped("memory"));
        }
        // Which shadow action runs, and whether it has a slot, is settled now, in the order the calls
        // come: a call admitted holds its slot while its task waits for the shadows' thread.
        let (shadow, slot) = match self.admit(&runtime, &module, &action, &call) {
            Ok(admitted) => admitted,
            Err(outcome) => return finish(outcome),
        };
        let task = async move {
            // The answer to Velero is on its way: let it go first.
            tokio::task::yield_now().await;
            let outcome = me.run(&runtime, &module, &action, &call, &shadow).await;
            me.book()
                .finished(&subject, &module, &action, call.item(), outcome);
            drop((call, kept, slot));
        };
        match shadow_thread(self.budget.nice) {
            Some(shadows) => drop(shadows.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
    }

    /// The shadow's action for `call` and a slot to run it in; or, when it is not to run, what
    /// happened instead (a shadow without the action or whose action does not apply to the item
    /// differs; one over the shadows' calls is dropped).
    fn admit(
        &self,
        runtime: &Runtime,
        module: &str,
        action: &str,
        call: &Mirrored,
    ) -> Result<(ActionEntry, OwnedSemaphorePermit), book::Outcome> {
        let event = |event: ShadowEvent| metrics::shadow(module, action, call.call(), event);
        let entry = match runtime.catalog().shadow_action(module, action) {
            // The shadow went away (a reload): nothing to compare.
            None => return Err(book::Outcome::Dropped("gone")),
            Some(None) => {
                event(ShadowEvent::Compared);
                event(ShadowEvent::Difference("missing-action"));
                return Err(book::Outcome::Differs(Comparison {
                    patch: Comparison::of(&call.served(), &Value::Null).patch,
                    kinds: vec!["missing-action"],
                }));
            }
            Some(Some(entry)) => entry,
        };
        let item = call.item();
        if entry
            .module
            .applies_to(entry.index)
            .check(item, &item.namespace)
            .is_err()
        {
            event(ShadowEvent::Compared);
            event(ShadowEvent::Difference("applies-to"));
            return Err(book::Outcome::Differs(Comparison {
                patch: Comparison::of(&call.served(), &Value::Null).patch,
                kinds: vec!["applies-to"],
            }));
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            event(ShadowEvent::Dropped("busy"));
            return Err(book::Outcome::Dropped("busy"));
        };
        Ok((entry, slot))
    }

    /// Calls the shadow's `entry` and compares; returns what happened.
    async fn run(
        &self,
        runtime: &Runtime,
        module: &str,
        action: &str,
        call: &Mirrored,
        entry: &ActionEntry,
    ) -> book::Outcome {
        let event = |event: ShadowEvent| metrics::shadow(module, action, call.call(), event);
        let memory = self.budget.memory;
        if memory.limit().saturating_sub(memory.used()) < entry.module.limits.memory {
            event(ShadowEvent::Dropped("memory"));
            return book::Outcome::Dropped("memory");
        }
        let lane = Lane::Shadow {
            timeout: self.budget.timeout,
            cpu: self.budget.cpu,
            memory,
        };
        let shadow = call.again(runtime, lane, entry).await;
        let shadow = match shadow {
            Ok(value) => value,
            Err(CallError::Fault {
                fault: Fault::MemoryBudget { .. },
                ..
            }) => {
                event(ShadowEvent::Dropped("memory"));
                return book::Outcome::Dropped("memory");
            }
            Err(error @ CallError::Fault { .. }) => {
                let kind = metrics::FailureKind::failure_kind(&error, false);
                event(ShadowEvent::Fault(kind));
                return book::Outcome::Fault(kind, error.to_string());
            }
            // An action's own error is a result like another, compared with the serving one.
            Err(error) => serde_json::json!({"error": error.to_string()}),
        };
        event(ShadowEvent::Compared);
        let comparison = Comparison::of(&call.served(), &shadow);
        for kind in &comparison.kinds {
            event(ShadowEvent::Difference(kind));
        }
        match comparison.same() {
            true => book::Outcome::Same,
            false => book::Outcome::Differs(comparison),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the shadows did so far, per shadow module.
    pub(crate) fn tallies(&self) -> std::collections::BTreeMap<String, Tally> {
        self.book().tallies()
    }

    /// Starts, once, the task that summarises idle backups and writes the status.
    fn start_sweeper(&self) {
        self.sweeper.get_or_init(|| {
            let me = self.me.clone();
            let tick =
                (self.budget.idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(1));
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(tick);
                loop {
                    interval.tick().await;
                    let Some(me) = me.upgrade() else { return };
                    me.sweep(false);
                }
            });
        });
    }

    /// Summarises the backups whose calls went idle (all of them when `all`), and writes the status
    /// when it changed.
    fn sweep(&self, all: bool) {
        let idle = if all {
            Duration::ZERO
        } else {
            self.budget.idle
        };
        let (summaries, dirty) = {
            let mut book = self.book();
            (book.take_idle(idle, all), book.take_dirty())
        };
        for summary in summaries {
            summary.log();
        }
        if dirty {
            self.write_status();
        }
    }

    /// Logs the summary of every backup still open and writes the status: the process is ending.
    pub(crate) fn finish(&self) {
        self.sweep(true);
    }

    fn write_status(&self) {
        let Some(file) = self.status_file.get() else {
            return;
        };
        let tallies = self.tallies();
        if tallies.is_empty() {
            return;
        }
        if let Err(e) = status_files::write_shadows(file, &tallies) {
            tracing::info!("cannot write the shadow status to {}: {e}", file.display());
        }
    }
}
