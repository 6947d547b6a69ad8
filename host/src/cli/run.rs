//! `velero-wasm run`: one action on one item, the way Velero would call it, against an in-memory
//! fixture cluster. The result is JSON on stdout; exit 0 on success, 1 when the action fails, 2 on bad
//! input.
//!
//! ```text
//! velero-wasm run --action NAME --item FILE (--backup FILE | --restore FILE)
//!                 [--item-from-backup FILE] [--cluster PATH ...] [--modules DIR] [--now RFC3339]
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{load_runtime, Failure, ModuleArgs, EXIT_OK};
use crate::action::{ActionKind, ItemRef, ResourceId};
use crate::action::{BackupRequest, RestoreRequest};
use crate::capabilities::kube::fixture::FixtureCluster;
use crate::capabilities::kube::NoCluster;
use crate::capabilities::{Clock, KubeBackend};
use crate::documents::read_object;
use crate::runtime::{CallError, Runtime};

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("subject").required(true).args(["backup", "restore"])))]
pub struct RunArgs {
    /// The action, by its Velero name (see `velero-wasm actions`).
    #[arg(long, value_name = "NAME")]
    action: String,

    /// The item, as JSON or YAML. For restore actions, give the item as backed up: `run` first removes
    /// what Velero removes before restore actions run (status, uid, resourceVersion, …).
    #[arg(long, value_name = "FILE")]
    item: PathBuf,

    /// The velero.io/v1 Backup (for backup, item-block and delete actions).
    #[arg(long, value_name = "FILE")]
    backup: Option<PathBuf>,

    /// The velero.io/v1 Restore (for restore actions).
    #[arg(long, value_name = "FILE")]
    restore: Option<PathBuf>,

    /// The item as stored in the backup (restore actions; defaults to --item as given).
    #[arg(long, value_name = "FILE")]
    item_from_backup: Option<PathBuf>,

    /// Files or directories of objects that form the cluster the action sees (JSON or YAML, one or
    /// many per file, List kinds unwrapped). Repeatable.
    #[arg(long, value_name = "PATH", num_args = 1.., action = clap::ArgAction::Append)]
    cluster: Vec<PathBuf>,

    /// Fix the clock: time starts at this instant (e.g. 2026-05-02T10:00:00Z) and moves only when the
    /// action sleeps; sleeps return at once.
    #[arg(long, value_name = "RFC3339")]
    now: Option<String>,

    #[command(flatten)]
    modules: ModuleArgs,
}

/// Runs the command; returns the exit status.
pub async fn run(args: RunArgs) -> u8 {
    match execute(args).await {
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

async fn execute(args: RunArgs) -> Result<Value, Failure> {
    let clock = match &args.now {
        None => Clock::System,
        Some(text) => Clock::fixed(humantime::parse_rfc3339_weak(text).map_err(|e| {
            Failure::bad_input(format!("--now {text:?} is not an RFC 3339 time: {e}"))
        })?),
    };
    // Read every input before loading modules, so bad input is reported at once.
    let item = read("item", &args.item)?;
    let subject = match (&args.backup, &args.restore) {
        (Some(path), _) => read("backup", path)?,
        (_, Some(path)) => read("restore", path)?,
        (None, None) => return Err(Failure::bad_input("give --backup FILE or --restore FILE")),
    };
    let item_from_backup = match &args.item_from_backup {
        Some(path) => Some(read("item-from-backup", path)?),
        None => None,
    };
    let fixture = if args.cluster.is_empty() {
        None
    } else {
        let cluster = FixtureCluster::load(&args.cluster, clock.clone())
            .map_err(|e| Failure::bad_input(format!("--cluster {e}")))?;
        Some(Arc::new(cluster))
    };
    let kube: Arc<dyn KubeBackend> = match &fixture {
        Some(cluster) => cluster.clone(),
        None => Arc::new(NoCluster),
    };

    let (runtime, problems) = load_runtime(&args.modules, kube, clock).await?;
    for problem in &problems {
        eprintln!("velero-wasm run: warning: module left out: {problem}");
    }
    let entry = runtime
        .action(&args.action)
        .ok_or_else(|| unknown_action(&runtime, &args.action))?;
    let kind = entry.info().kind;
    match (kind.takes_backup(), args.backup.is_some()) {
        (true, false) => {
            return Err(Failure::bad_input(format!(
                "action {} is a {kind} action: give --backup FILE, not --restore",
                args.action
            )))
        }
        (false, true) => {
            return Err(Failure::bad_input(format!(
                "action {} is a {kind} action: give --restore FILE, not --backup",
                args.action
            )))
        }
        _ => {}
    }

    let item_text = item.to_string();
    let identity = ItemRef::parse(&item_text)
        .map_err(|e| Failure::bad_input(format!("--item {}: {e}", args.item.display())))?;
    if identity.kind.is_empty() {
        return Err(Failure::bad_input(format!(
            "--item {}: the object has no kind",
            args.item.display()
        )));
    }
    let namespace = if kind.takes_backup() {
        identity.namespace.clone()
    } else {
        mapped_namespace(&subject, &identity.namespace)
    };
    entry
        .module
        .applies_to(entry.index)
        .check(&identity, &namespace)
        .map_err(|why| {
            Failure::bad_input(format!(
                "action {} does not apply to item {identity}: {why}",
                args.action
            ))
        })?;

    let subject_text = subject.to_string();
    let mut output = Map::new();
    let outcome = match kind {
        ActionKind::Backup | ActionKind::BackupV2 => runtime
            .backup(
                &args.action,
                BackupRequest {
                    item: item_text,
                    backup: subject_text,
                },
            )
            .await
            .map(|o| {
                output.insert("item".into(), parse_item(&o.item));
                output.insert("additionalItems".into(), ids(&o.additional_items));
                if kind == ActionKind::BackupV2 {
                    output.insert("operationId".into(), json!(o.operation_id));
                    output.insert("postOperationItems".into(), ids(&o.post_operation_items));
                }
            }),
        ActionKind::Restore | ActionKind::RestoreV2 => {
            let from_backup = item_from_backup.unwrap_or_else(|| item.clone()).to_string();
            let as_restored = reset_for_restore(item, &subject, &identity).to_string();
            runtime
                .restore(
                    &args.action,
                    RestoreRequest {
                        item: as_restored,
                        item_from_backup: from_backup,
                        restore: subject_text,
                    },
                )
                .await
                .map(|o| {
                    output.insert("item".into(), parse_item(&o.item));
                    output.insert("additionalItems".into(), ids(&o.additional_items));
                    output.insert("skipRestore".into(), json!(o.skip_restore));
                    if kind == ActionKind::RestoreV2 {
                        output.insert("operationId".into(), json!(o.operation_id));
                        output.insert(
                            "waitForAdditionalItems".into(),
                            json!(o.wait_for_additional_items),
                        );
                        output.insert(
                            "additionalItemsTimeout".into(),
                            json!(o.additional_items_timeout.map(go_duration)),
                        );
                    }
                })
        }
        ActionKind::ItemBlock => runtime
            .related_items(&args.action, item_text, subject_text)
            .await
            .map(|related| {
                output.insert("relatedItems".into(), ids(&related));
            }),
        ActionKind::Delete => runtime.delete(&args.action, item_text, subject_text).await,
    };
    outcome.map_err(|e| match e {
        CallError::UnknownAction(_) | CallError::WrongKind { .. } => {
            Failure::bad_input(e.to_string())
        }
        other => Failure::failed(other.to_string()),
    })?;
    let writes = fixture.map(|f| f.writes()).unwrap_or_default();
    output.insert(
        "clusterWrites".into(),
        serde_json::to_value(writes).unwrap_or(Value::Null),
    );
    Ok(Value::Object(output))
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

/// The namespace Velero restores an item into (`spec.namespaceMapping`), which is the one it matches
/// restore actions' selectors against.
fn mapped_namespace(restore: &Value, namespace: &str) -> String {
    restore
        .pointer("/spec/namespaceMapping")
        .and_then(|m| m.get(namespace))
        .and_then(Value::as_str)
        .unwrap_or(namespace)
        .to_string()
}

/// What Velero does to an item before restore actions see it (`resetMetadataAndStatus`): server-set
/// metadata goes, and the status too unless the Restore restores this resource's status.
fn reset_for_restore(mut item: Value, restore: &Value, identity: &ItemRef) -> Value {
    if let Some(metadata) = item.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "generateName",
            "selfLink",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "ownerReferences",
        ] {
            metadata.remove(field);
        }
    }
    let list = |name: &str| -> Vec<String> {
        restore
            .pointer(&format!("/spec/restoreStatus/{name}"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_lowercase))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (included, excluded) = (list("includedResources"), list("excludedResources"));
    let names = [
        identity.group_resource(),
        identity.resource(),
        identity.kind.to_lowercase(),
    ];
    let named = |l: &[String]| l.iter().any(|r| r == "*" || names.contains(r));
    let keep_status = named(&included) && !excluded.iter().any(|r| names.contains(r));
    if !keep_status {
        if let Some(map) = item.as_object_mut() {
            map.remove("status");
        }
    }
    item
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

    #[test]
    fn restore_reset_removes_server_fields_and_status() {
        let item = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "1", "ownerReferences": [], "labels": {"x": "y"}},
            "status": {"phase": "Bound"}});
        let identity = ItemRef::parse(&item.to_string()).unwrap();
        let out = reset_for_restore(item.clone(), &json!({}), &identity);
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
        let keep = reset_for_restore(
            item,
            &json!({"spec": {"restoreStatus": {"includedResources": ["persistentvolumeclaims"]}}}),
            &identity,
        );
        assert_eq!(keep["status"]["phase"], "Bound");
    }

    #[test]
    fn restores_match_in_the_mapped_namespace() {
        let restore = json!({"spec": {"namespaceMapping": {"vm-workloads": "vm-workloads-dr"}}});
        assert_eq!(
            mapped_namespace(&restore, "vm-workloads"),
            "vm-workloads-dr"
        );
        assert_eq!(mapped_namespace(&restore, "other"), "other");
    }
}
