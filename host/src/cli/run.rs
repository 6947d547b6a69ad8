//! `velero-wasm run`: one action on one item, the way Velero would call it, against an in-memory
//! fixture cluster (`--cluster`), a live cluster (the default: kubeconfig as kubectl resolves it), or a
//! recording (`--replay`). The result is JSON on stdout; exit 0 on success, 1 when the action fails, 2
//! on bad input.
//!
//! ```text
//! velero-wasm run --action NAME (--item FILE | --operation-id ID [--cancel]) (--backup FILE | --restore FILE)
//!                 [--item-from-backup FILE] [--modules DIR] [--now RFC3339] [--velero-namespace NS]
//!                 [--cluster PATH ... | --kubeconfig FILE --context NAME | --replay FILE] [--record FILE]
//! ```
//!
//! With `--operation-id`, `run` asks a `backup-v2` or `restore-v2` action for the progress of an
//! operation it started (or cancels it), as Velero does from a later process.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};

use super::build_freshness::StaleArgs;
use super::failure::{Failure, EXIT_OK};
use super::module_args::{load_runtime, ModuleArgs};
use super::restore_input::{mapped_namespace, reset_for_restore};
use crate::action::{
    ActionKind, BackupOutcome, BackupRequest, ItemRef, OperationProgress, ResourceId,
    RestoreOutcome, RestoreRequest,
};
use crate::backend::Backend;
use crate::capabilities::recording::{
    Header, Recorded, Recorder, Recording, RecordingError, Replay, Replayed,
};
use crate::capabilities::{Clock, Environment, Services};
use crate::cluster::fixture::FixtureCluster;
use crate::cluster::live::{ClusterOptions, LiveCluster};
use crate::cluster::writes::WriteLog;
use crate::cluster::KubeCall;
use crate::cluster::NoCluster;
use crate::config::Config;
use crate::documents::read_object;
use crate::runtime::{calls, ActionEntry, CallError, Lane, Runtime};

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("subject").required(true).args(["backup", "restore"])))]
pub(crate) struct RunArgs {
    /// The action, by its Velero name (see `velero-wasm actions`).
    #[arg(long, value_name = "NAME")]
    pub(super) action: String,

    /// The item, as JSON or YAML. For restore actions, give the item as backed up: `run` first removes
    /// what Velero removes before restore actions run (status, uid, resourceVersion, …).
    #[arg(long, value_name = "FILE", required_unless_present = "operation_id")]
    pub(super) item: Option<PathBuf>,

    /// Instead of running the action on an item, ask it for the progress of the operation with this id
    /// (backup-v2 and restore-v2 actions), as Velero does from a later process.
    #[arg(long, value_name = "ID", conflicts_with_all = ["item", "item_from_backup"])]
    pub(super) operation_id: Option<String>,

    /// With --operation-id: cancel the operation instead of asking for its progress.
    #[arg(long, requires = "operation_id")]
    pub(super) cancel: bool,

    /// The namespace Velero runs in, as modules see it (the `environment` capability, `@velero` in
    /// grants). Default: the namespace of the --backup or --restore object.
    #[arg(long, value_name = "NAMESPACE")]
    pub(super) velero_namespace: Option<String>,

    /// The velero.io/v1 Backup (for backup, item-block and delete actions).
    #[arg(long, value_name = "FILE")]
    pub(super) backup: Option<PathBuf>,

    /// The velero.io/v1 Restore (for restore actions).
    #[arg(long, value_name = "FILE")]
    pub(super) restore: Option<PathBuf>,

    /// The item as stored in the backup (restore actions; defaults to --item as given).
    #[arg(long, value_name = "FILE")]
    pub(super) item_from_backup: Option<PathBuf>,

    /// Files or directories of objects that form the cluster the action sees (JSON or YAML, one or
    /// many per file, List kinds unwrapped). Repeatable.
    #[arg(long, value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    pub(super) cluster: Vec<PathBuf>,

    /// Without --cluster, the kubeconfig of the live cluster (default: KUBECONFIG, then
    /// ~/.kube/config; in a pod, its service account).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cluster", "replay"])]
    pub(super) kubeconfig: Option<PathBuf>,

    /// Without --cluster, the kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["cluster", "replay"])]
    pub(super) context: Option<String>,

    /// Write every capability call and its answer to FILE (JSON Lines), for --replay: Kubernetes
    /// calls, outbound HTTP, granted environment variables and files, random bytes. The file holds
    /// what was sent and received (tokens in HTTP requests and answers, token files' contents, Secrets
    /// read from the cluster): treat a recording as a secret.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub(super) record: Option<PathBuf>,

    /// Answer every capability call from a recording made with --record; nothing is sent anywhere,
    /// no variable or file is read, and the clock and Velero's namespace are the recording's. A call
    /// that is not in the recording fails the run.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cluster", "now"])]
    pub(super) replay: Option<PathBuf>,

    /// Fix the clock: time starts at this instant (e.g. 2026-05-02T10:00:00Z) and moves only when the
    /// action sleeps; sleeps return at once.
    #[arg(long, value_name = "RFC3339")]
    pub(super) now: Option<String>,

    #[command(flatten)]
    pub(super) modules: ModuleArgs,

    #[command(flatten)]
    pub(super) stale: StaleArgs,

    /// Without --cluster or --replay, no cluster at all rather than the live one (`test`: a suite
    /// never reaches a live cluster).
    #[arg(skip)]
    pub(super) offline: bool,

    /// Settings of the action's module over its manifest's, for this run only (`test`: a case's
    /// `settings`).
    #[arg(skip)]
    pub(super) settings: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Runs the command; returns the exit status.
pub(crate) async fn run(args: RunArgs, config: &Config) -> u8 {
    match execute(args, config).await {
        Ok(output) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&output)
                    .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
            );
            EXIT_OK
        }
        Err(failure) => {
            eprintln!("velero-wasm run: {}", failure.message);
            failure.code
        }
    }
}

fn read(flag: &str, path: &Path) -> Result<Value, Failure> {
    read_object(path).map_err(|e| Failure::bad_input(format!("--{flag} {e}")))
}

/// Runs the action once, as `run` does: what `run` prints, or why it failed.
pub(super) async fn execute(args: RunArgs, config: &Config) -> Result<Value, Failure> {
    prepare(args, |services| services, config)
        .await?
        .call()
        .await
}

/// A run with its inputs read, its cluster and modules loaded and its action found: ready to call
/// (once for `run` and `test`, many times for `bench`).
pub(super) struct Prepared {
    args: RunArgs,
    inputs: Inputs,
    runtime: Runtime,
    entry: ActionEntry,
    capture: Capture,
}

/// The documents a run reads: the item (without `--operation-id`), the Backup or Restore, and the
/// item as backed up.
struct Inputs {
    item: Option<Value>,
    subject: Value,
    item_from_backup: Option<Value>,
}

/// What a run records and checks around the call: its recording, the replay it answers from, and the
/// cluster writes the action made.
struct Capture {
    recorder: Option<Arc<Recorder>>,
    replay: Option<Arc<Replay>>,
    writes: Arc<WriteLog>,
}

/// Reads the inputs of `args` and loads the modules, with the capabilities' services as `wrap`
/// returns them (`bench` counts their calls).
pub(super) async fn prepare(
    args: RunArgs,
    wrap: impl FnOnce(Services) -> Services,
    config: &Config,
) -> Result<Prepared, Failure> {
    // A crate's module/ its sources moved past would run the last build, not the code on screen.
    if let Some(dir) = &args.modules.modules {
        args.stale.check(dir)?;
    }
    let replay = match &args.replay {
        Some(path) => Some(Arc::new(Replay::new(
            Recording::read(path).map_err(replay_error)?,
        ))),
        None => None,
    };
    let clock = clock(&args, replay.as_deref())?;
    // Read every input before loading modules, so bad input is reported at once.
    let inputs = Inputs::read(&args)?;
    let (services, capture) = assemble(&args, &inputs.subject, clock, replay, config).await?;
    let (runtime, problems) = load_runtime(&args.modules, wrap(services), config).await?;
    // A module that cannot be used while another version of it (often the stock one) serves in its
    // place: an author testing a change would test something else. The plugin falls back; a run
    // stops. A broken module that stands in for nothing is a warning: the others still run.
    let (broken, warnings): (Vec<_>, Vec<_>) =
        problems.into_iter().partition(|p| p.broken && p.served);
    for problem in &warnings {
        eprintln!("velero-wasm run: warning: {problem}");
    }
    if !broken.is_empty() {
        let problems: Vec<String> = broken.iter().map(ToString::to_string).collect();
        return Err(Failure::bad_input(format!(
            "{}; `run` stops rather than serve another module in its place (as the plugin would): \
             fix the module and run again",
            problems.join("; ")
        )));
    }
    if !args.settings.is_empty() {
        super::settings::apply_settings(&runtime, &args.modules, &args.action, &args.settings)
            .await?;
    }
    let entry = find_action(&runtime, &args)?;
    Ok(Prepared {
        args,
        inputs,
        runtime,
        entry,
        capture,
    })
}

/// The clock the action sees: fixed by `--now` or the replay, stepped while recording, else the
/// system's.
fn clock(args: &RunArgs, replay: Option<&Replay>) -> Result<Clock, Failure> {
    let now = match &args.now {
        None => None,
        Some(text) => Some(humantime::parse_rfc3339_weak(text).map_err(|e| {
            Failure::bad_input(format!("--now {text:?} is not an RFC 3339 time: {e}"))
        })?),
    };
    Ok(match (now, replay, &args.record) {
        (Some(start), _, _) => Clock::fixed(start),
        (None, Some(replay), _) => Clock::fixed(replay.header().clock_start),
        // Recording: real waits, but time read as start + slept, so that the replay reads the same.
        (None, None, Some(_)) => Clock::stepped(SystemTime::now()),
        (None, None, None) => Clock::System,
    })
}

impl Inputs {
    fn read(args: &RunArgs) -> Result<Inputs, Failure> {
        let item = match &args.item {
            Some(path) => Some(read("item", path)?),
            None => None,
        };
        let subject = match (&args.backup, &args.restore) {
            (Some(path), _) => read("backup", path)?,
            (_, Some(path)) => read("restore", path)?,
            (None, None) => return Err(Failure::bad_input("give --backup FILE or --restore FILE")),
        };
        let item_from_backup = match &args.item_from_backup {
            Some(path) => Some(read("item-from-backup", path)?),
            None => None,
        };
        Ok(Inputs {
            item,
            subject,
            item_from_backup,
        })
    }
}

/// The services behind the capabilities, as `args` chooses them (fixture, live or replayed cluster;
/// recorded or replayed HTTP, random bytes and environment), with what the run captures around them.
async fn assemble(
    args: &RunArgs,
    subject: &Value,
    clock: Clock,
    replay: Option<Arc<Replay>>,
    config: &Config,
) -> Result<(Services, Capture), Failure> {
    // Velero's own objects live in Velero's namespace.
    let velero_namespace = args.velero_namespace.clone().unwrap_or_else(|| {
        subject
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    });
    let environment = match &replay {
        Some(replay) => replayed_environment(replay, args.velero_namespace.as_deref())?,
        None if velero_namespace.is_empty() => Environment::from_config(config),
        None => Environment::from_config(config).with_velero_namespace(&velero_namespace),
    };
    let kube: Arc<dyn Backend<KubeCall>> = match (args.cluster.is_empty(), &replay) {
        (false, _) => Arc::new(
            FixtureCluster::load(&args.cluster, clock.clone())
                .map_err(|e| Failure::bad_input(format!("--cluster {e}")))?,
        ),
        (true, Some(replay)) => Arc::new(Replayed::<KubeCall>::new(replay).map_err(replay_error)?),
        (true, None) if args.offline => Arc::new(NoCluster::because(
            "no cluster is given: add cluster: PATH (fixture files) or replay: FILE to the case",
        )),
        (true, None) => live_cluster(args, config).await?,
    };
    let mut services = Services::new(kube, clock, environment);
    services.reads_at_once = crate::capabilities::kube::reads_at_once(config);
    if let Some(replay) = &replay {
        services.http = Arc::new(Replayed::new(replay).map_err(replay_error)?);
        services.random = Arc::new(Replayed::new(replay).map_err(replay_error)?);
    }
    let recorder = match &args.record {
        Some(path) => {
            let header = Header {
                clock_start: services.clock.now(),
                velero_namespace: services.environment.velero_namespace().to_string(),
            };
            let recorder = Recorder::create(path, &header)
                .map_err(|e| Failure::bad_input(format!("--record {e}")))?;
            services = recorded(services, &recorder);
            Some(recorder)
        }
        None => None,
    };
    // Outermost, so that what is recorded and replayed includes what the log itself reads.
    let writes = Arc::new(WriteLog::new(services.kube.clone()));
    services.kube = writes.clone();
    let capture = Capture {
        recorder,
        replay,
        writes,
    };
    Ok((services, capture))
}

/// The action `--action` names, if the Backup or Restore given is the one its kind takes.
fn find_action(runtime: &Runtime, args: &RunArgs) -> Result<ActionEntry, Failure> {
    let entry = runtime
        .action(&args.action)
        .ok_or_else(|| unknown_action(runtime, &args.action))?;
    let kind = entry.info().kind;
    let (given, wanted) = match (kind.takes_backup(), args.backup.is_some()) {
        (true, false) => ("--restore", "--backup"),
        (false, true) => ("--backup", "--restore"),
        _ => return Ok(entry),
    };
    Err(Failure::bad_input(format!(
        "action {} is a {kind} action: give {wanted} FILE, not {given}",
        args.action
    )))
}

impl Prepared {
    /// The loaded runtime (`bench` instantiates the action's module on its own, to time that part).
    pub(super) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Calls the action once: the output `run` prints, or why it failed.
    pub(super) async fn call(&self) -> Result<Value, Failure> {
        let outcome = match (&self.args.operation_id, &self.inputs.item) {
            (Some(id), _) => self.operation(id).await?,
            (None, Some(item)) => self.item_call(item.clone()).await?,
            (None, None) => {
                return Err(Failure::bad_input("give --item FILE or --operation-id ID"))
            }
        };
        self.capture.finish(outcome)
    }

    /// Progress or cancel of an operation: what Velero calls later, from another process.
    async fn operation(&self, id: &str) -> Result<Result<Map<String, Value>, CallError>, Failure> {
        let (runtime, entry) = (&self.runtime, &self.entry);
        let kind = entry.info().kind;
        if !matches!(kind, ActionKind::BackupV2 | ActionKind::RestoreV2) {
            return Err(Failure::bad_input(format!(
                "action {} is a {kind} action: only backup-v2 and restore-v2 actions have operations",
                entry.info().name
            )));
        }
        let subject = self.inputs.subject.to_string();
        Ok(if self.args.cancel {
            let operation_id = id.to_string();
            let call = calls::Cancel {
                operation_id,
                subject,
            };
            runtime
                .call(Lane::Serving, entry, call)
                .await
                .map(|()| output([("cancelled", json!(true))]))
        } else {
            let operation_id = id.to_string();
            let call = calls::Progress {
                operation_id,
                subject,
            };
            runtime
                .call(Lane::Serving, entry, call)
                .await
                .map(|p| output([("progress", progress_json(&p))]))
        })
    }

    /// One call of the action on an item: what `run` prints of its outcome.
    async fn item_call(
        &self,
        item: Value,
    ) -> Result<Result<Map<String, Value>, CallError>, Failure> {
        let (runtime, entry) = (&self.runtime, &self.entry);
        let kind = entry.info().kind;
        let item_text = item.to_string();
        let identity = self.identify(&item_text)?;
        let subject = &self.inputs.subject;
        let subject_text = subject.to_string();
        Ok(match kind {
            ActionKind::Backup | ActionKind::BackupV2 => {
                let request = BackupRequest {
                    item: item_text,
                    backup: subject_text,
                };
                let outcome = runtime.backup(entry, identity, request).await;
                outcome.map(|o| backup_output(&o, kind))
            }
            ActionKind::Restore | ActionKind::RestoreV2 => {
                let from_backup = self.inputs.item_from_backup.as_ref().unwrap_or(&item);
                let request = RestoreRequest {
                    item_from_backup: from_backup.to_string(),
                    item: reset_for_restore(item, subject, &identity).to_string(),
                    restore: subject_text,
                };
                let outcome = runtime.restore(entry, identity, request).await;
                outcome.map(|o| restore_output(&o, kind))
            }
            ActionKind::ItemBlock => runtime
                .call(
                    Lane::Serving,
                    entry,
                    calls::RelatedItems {
                        item: identity,
                        text: item_text,
                        backup: subject_text,
                        // `run` records nothing (its runtime has no records).
                        answers_velero: false,
                    },
                )
                .await
                .map(|related| output([("relatedItems", ids(&related))])),
            ActionKind::Delete => runtime
                .call(
                    Lane::Serving,
                    entry,
                    calls::Delete {
                        item: identity,
                        text: item_text,
                        backup: subject_text,
                    },
                )
                .await
                .map(|()| Map::new()),
        })
    }

    /// The identity of the `--item` (JSON text), checked the way Velero would: it has a kind, and the
    /// action applies to it (restore actions in the namespace the item is restored into).
    fn identify(&self, item_text: &str) -> Result<ItemRef, Failure> {
        let path = self.args.item.as_deref().unwrap_or(Path::new(""));
        let identity = ItemRef::parse(item_text)
            .map_err(|e| Failure::bad_input(format!("--item {}: {e}", path.display())))?;
        if identity.kind.is_empty() {
            return Err(Failure::bad_input(format!(
                "--item {}: the object has no kind",
                path.display()
            )));
        }
        let entry = &self.entry;
        let namespace = if entry.info().kind.takes_backup() {
            identity.namespace.clone()
        } else {
            mapped_namespace(&self.inputs.subject, &identity.namespace)
        };
        entry
            .module
            .applies_to(entry.index)
            .check(&identity, &namespace)
            .map_err(|why| {
                Failure::bad_input(format!(
                    "action {} does not apply to item {identity}: {why}",
                    self.args.action
                ))
            })?;
        Ok(identity)
    }
}

/// Output fields, in the order `run` prints them.
fn output<const N: usize>(fields: [(&str, Value); N]) -> Map<String, Value> {
    fields
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect()
}

/// What `run` prints of a backup outcome (the operation fields for `backup-v2` only).
fn backup_output(o: &BackupOutcome, kind: ActionKind) -> Map<String, Value> {
    let mut fields = output([
        ("item", parse_item(&o.item)),
        ("additionalItems", ids(&o.additional_items)),
    ]);
    if kind == ActionKind::BackupV2 {
        fields.extend(output([
            ("operationId", json!(o.operation_id)),
            ("postOperationItems", ids(&o.post_operation_items)),
        ]));
    }
    fields
}

/// What `run` prints of a restore outcome (the operation fields for `restore-v2` only).
fn restore_output(o: &RestoreOutcome, kind: ActionKind) -> Map<String, Value> {
    let mut fields = output([
        ("item", parse_item(&o.item)),
        ("additionalItems", ids(&o.additional_items)),
        ("skipRestore", json!(o.skip_restore)),
    ]);
    if kind == ActionKind::RestoreV2 {
        fields.extend(output([
            ("operationId", json!(o.operation_id)),
            ("waitForAdditionalItems", json!(o.wait_for_additional_items)),
            (
                "additionalItemsTimeout",
                json!(o.additional_items_timeout.map(go_duration)),
            ),
        ]));
    }
    fields
}

/// An operation's progress as JSON (times in RFC 3339, `null` when not set).
fn progress_json(p: &OperationProgress) -> Value {
    let time = |t: Option<SystemTime>| t.map(|t| humantime::format_rfc3339(t).to_string());
    json!({
        "completed": p.completed,
        "error": p.error,
        "nCompleted": p.n_completed,
        "nTotal": p.n_total,
        "units": p.units,
        "description": p.description,
        "started": time(p.started),
        "updated": time(p.updated),
    })
}

impl Capture {
    /// Ends a run: the recording is closed, a replay checked, the call's error turned into the exit
    /// status, and the writes the action made added to the output.
    fn finish(&self, outcome: Result<Map<String, Value>, CallError>) -> Result<Value, Failure> {
        if let Some(recorder) = &self.recorder {
            recorder.finish().map_err(Failure::failed)?;
        }
        if let Some(replay) = &self.replay {
            let misses = replay.misses();
            if !misses.is_empty() {
                return Err(Failure::failed(format!(
                    "the action made calls that are not in the recording:\n  {}",
                    misses.join("\n  ")
                )));
            }
            let unused = replay.unused();
            if !unused.is_empty() {
                let total: usize = unused.iter().map(|(_, n)| n).sum();
                let each: Vec<String> = unused.iter().map(|(c, n)| format!("{c} {n}")).collect();
                eprintln!(
                    "velero-wasm run: warning: {total} recorded calls were not made ({})",
                    each.join(", ")
                );
            }
        }
        let mut output = outcome.map_err(|e| match e {
            CallError::UnknownAction(_) | CallError::WrongKind { .. } => {
                Failure::bad_input(e.to_string())
            }
            other => Failure::failed(other.to_string()),
        })?;
        output.insert(
            "clusterWrites".into(),
            serde_json::to_value(self.writes.writes()).unwrap_or(Value::Null),
        );
        Ok(Value::Object(output))
    }
}

/// A recording that `--replay` cannot use: bad input.
fn replay_error(e: RecordingError) -> Failure {
    Failure::bad_input(format!("--replay {e}"))
}

/// The environment of a replay: Velero's namespace as recorded, variables and files from the
/// recording. A `--velero-namespace` that says otherwise is refused rather than ignored.
fn replayed_environment(replay: &Replay, given: Option<&str>) -> Result<Environment, Failure> {
    let recorded = &replay.header().velero_namespace;
    if let Some(given) = given.filter(|g| g != recorded) {
        return Err(Failure::bad_input(format!(
            "--velero-namespace {given:?} differs from the recording's Velero namespace {recorded:?}"
        )));
    }
    let source = Replayed::new(replay).map_err(replay_error)?;
    Ok(Environment::new(recorded, Arc::new(source)))
}

/// `services` with every capability's calls also written to `recorder`.
fn recorded(mut services: Services, recorder: &Arc<Recorder>) -> Services {
    services.kube = Arc::new(Recorded::new(services.kube, recorder.clone()));
    services.http = Arc::new(Recorded::new(services.http, recorder.clone()));
    services.random = Arc::new(Recorded::new(services.random, recorder.clone()));
    let source = Recorded::new(services.environment.source(), recorder.clone());
    services.environment = services.environment.with_source(Arc::new(source));
    services
}

/// The live cluster of `--kubeconfig`/`--context` (or kubectl's defaults). Without any configuration
/// to be found, actions that never call the cluster still run: their calls fail saying what to give.
async fn live_cluster(
    args: &RunArgs,
    config: &Config,
) -> Result<Arc<dyn Backend<KubeCall>>, Failure> {
    let options = ClusterOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        config: config.clone(),
    };
    if !options.is_configured() {
        return Ok(Arc::new(NoCluster::because(
            "no Kubernetes cluster is configured: give `run` a fixture cluster with --cluster DIR, or a live one with --kubeconfig FILE",
        )));
    }
    let cluster = LiveCluster::connect(&options)
        .await
        .map_err(|e| Failure::bad_input(format!("cannot use the live cluster: {e}")))?;
    Ok(Arc::new(cluster))
}

fn unknown_action(runtime: &Runtime, name: &str) -> Failure {
    let catalog = runtime.catalog();
    let names: Vec<&str> = catalog.actions().map(|a| a.info().name.as_str()).collect();
    let hint = if names.is_empty() {
        "no actions are loaded".to_string()
    } else {
        format!("loaded actions: {}", names.join(", "))
    };
    Failure::bad_input(format!("unknown action {name:?} ({hint})"))
}

fn parse_item(item: &str) -> Value {
    serde_json::from_str(item).unwrap_or_else(|_| Value::String(item.to_string()))
}

fn ids(ids: &[ResourceId]) -> Value {
    serde_json::to_value(ids).unwrap_or(Value::Null)
}

/// A duration as Go prints it (`10m0s`), as Velero's objects carry durations.
fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let frac = d.subsec_nanos();
    let s = if frac == 0 {
        format!("{s}")
    } else {
        format!("{s}.{}", format!("{frac:09}").trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(600)), "10m0s");
        assert_eq!(go_duration(Duration::from_secs(4 * 3600)), "4h0m0s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
