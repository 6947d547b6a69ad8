//! One action of every kind (and a second backup action), for the plugin protocol tests. Each action
//! does something small that a test can see in the answer, so that every field of every request and
//! response is checked end to end:
//!
//! - `backup-v1` names two additional items (`<name>-data` PVC, `apps` Deployment `<name>`) and leaves
//!   the item unchanged; with annotation `test.velero-wasm.io/sleep-ms` it sleeps that long and
//!   records when it started and finished (annotations `…/started`, `…/finished`, in nanoseconds).
//! - `backup-v1-labels` adds label `test.velero-wasm.io/labelled=true`.
//! - `backup-v2` and `restore-v2` start an operation whose id encodes its start time and duration
//!   (`op-<seconds>-<nanos>-<milliseconds>`, duration from annotation `…/duration-ms`, default 1000),
//!   so that any later process answers `progress` from the id and the clock alone.
//! - `restore-v1` skips items labelled `test.velero-wasm.io/skip=true`, otherwise records the uid of
//!   the backed-up item in annotation `…/from-backup-uid` and names the Secret of the same name.
//! - `restore-v2` also asks Velero to wait for a ConfigMap `pending-<name>`; `items-ready` says no while
//!   any item's name starts with `pending-`.
//! - `item-block` relates a Pod to its PVCs.
//! - `delete` refuses items annotated `…/refuse-delete`.
//!
//! Every action fails when the Backup or Restore it gets has no `metadata.name`. With the setting
//! `swap-backup-versions = "true"`, `backup-v1` is described as a v2 action and `backup-v2` as a v1
//! one (what a module update can do to actions Velero already knows). The setting `domain` replaces
//! `test.velero-wasm.io` in the action names (not in the annotations), so that a second copy can add
//! the same actions under other names (the slot's tests).

use velero_wasm_sdk::*;

struct Kinds;

const PREFIX: &str = "test.velero-wasm.io/";

impl Plugin for Kinds {
    fn describe() -> Vec<ActionInfo> {
        let domain =
            config::get("domain").unwrap_or_else(|| PREFIX.trim_end_matches('/').to_string());
        let action = |name: &str, kind: Kind| ActionInfo::new(&format!("{domain}/{name}"), kind);
        // A module update that moves actions between versions of their kind.
        let swapped = config::get("swap-backup-versions").as_deref() == Some("true");
        let (v1, v2) = if swapped {
            (Kind::BackupV2, Kind::Backup)
        } else {
            (Kind::Backup, Kind::BackupV2)
        };
        vec![
            action("backup-v1", v1)
                .applies_to(Selector {
                    excluded_namespaces: vec!["kube-system".into()],
                    ..Selector::resources(&["configmaps", "pods"])
                })
                .description("names a PVC and a Deployment as additional items"),
            action("backup-v1-labels", Kind::Backup)
                .applies_to(Selector::all().labels("app in (web,db),!skip"))
                .description("labels the item"),
            action("backup-v2", v2).description("starts an operation"),
            action("restore-v1", Kind::Restore).description("restores, or skips labelled items"),
            action("restore-v2", Kind::RestoreV2)
                .description("starts an operation and waits for an item"),
            action("item-block", Kind::ItemBlock)
                .applies_to(Selector::resources(&["pods"]))
                .description("relates a Pod to its PVCs"),
            action("delete", Kind::Delete).description("refuses annotated items"),
        ]
    }

    fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        named("backup", &request.backup)?;
        let mut item = Object::parse(&request.item)?;
        match case(action) {
            "backup-v1" => {
                log::info("backing up", &[("step", "inspect")]);
                let additional = vec![
                    ResourceId::new(
                        "",
                        "persistentvolumeclaims",
                        item.namespace(),
                        &format!("{}-data", item.name()),
                    ),
                    ResourceId::new("apps", "deployments", item.namespace(), item.name()),
                ];
                let Some(ms) = item
                    .annotation(&format!("{PREFIX}sleep-ms"))
                    .map(str::to_string)
                else {
                    return Ok(BackupResponse::unchanged().additional(additional));
                };
                let ms: u64 = ms.parse().map_err(|e| format!("sleep-ms {ms:?}: {e}"))?;
                let started = nanos(clock::now());
                clock::sleep(std::time::Duration::from_millis(ms));
                item.set_annotation(&format!("{PREFIX}started"), &started.to_string());
                item.set_annotation(
                    &format!("{PREFIX}finished"),
                    &nanos(clock::now()).to_string(),
                );
                Ok(BackupResponse::with_item(&item).additional(additional))
            }
            "backup-v1-labels" => {
                item.set_label(&format!("{PREFIX}labelled"), "true");
                Ok(BackupResponse::with_item(&item))
            }
            "backup-v2" => {
                let operation = start_operation(&item)?;
                Ok(BackupResponse {
                    operation_id: Some(operation),
                    post_operation_items: vec![ResourceId::new(
                        "",
                        "configmaps",
                        item.namespace(),
                        item.name(),
                    )],
                    ..BackupResponse::unchanged()
                })
            }
            other => Err(format!("no backup action {other}")),
        }
    }

    fn restore(action: &str, request: RestoreRequest) -> Result<RestoreResponse, String> {
        named("restore", &request.restore)?;
        let mut item = Object::parse(&request.item)?;
        let from_backup = Object::parse(&request.item_from_backup)?;
        match case(action) {
            "restore-v1" => {
                if item.label(&format!("{PREFIX}skip")) == Some("true") {
                    return Ok(RestoreResponse::skip());
                }
                item.set_annotation(&format!("{PREFIX}from-backup-uid"), from_backup.uid());
                let secret = ResourceId::new("", "secrets", item.namespace(), item.name());
                Ok(RestoreResponse::with_item(&item).additional(vec![secret]))
            }
            "restore-v2" => {
                let operation = start_operation(&item)?;
                let pending = ResourceId::new(
                    "",
                    "configmaps",
                    item.namespace(),
                    &format!("pending-{}", item.name()),
                );
                Ok(RestoreResponse {
                    operation_id: Some(operation),
                    wait_for_additional_items: true,
                    additional_items_timeout: Some(90_000_000_000),
                    ..RestoreResponse::unchanged().additional(vec![pending])
                })
            }
            other => Err(format!("no restore action {other}")),
        }
    }

    fn related_items(_action: &str, item: &str, backup: &str) -> Result<Vec<ResourceId>, String> {
        named("backup", backup)?;
        let pod = Object::parse(item)?;
        Ok(pod
            .array_at("/spec/volumes")
            .iter()
            .filter_map(|v| {
                v.pointer("/persistentVolumeClaim/claimName")
                    .and_then(|c| c.as_str())
            })
            .map(|claim| ResourceId::new("", "persistentvolumeclaims", pod.namespace(), claim))
            .collect())
    }

    fn delete(_action: &str, item: &str, backup: &str) -> Result<(), String> {
        named("backup", backup)?;
        let item = Object::parse(item)?;
        if item.annotation(&format!("{PREFIX}refuse-delete")).is_some() {
            return Err(format!(
                "refusing to delete {}: it is annotated {PREFIX}refuse-delete",
                item.name()
            ));
        }
        log::info("deleted", &[]);
        Ok(())
    }

    fn progress(
        _action: &str,
        operation_id: &str,
        subject: &str,
    ) -> Result<OperationProgress, String> {
        named("backup or restore", subject)?;
        let (start, duration_ms) = parse_operation(operation_id)?;
        let now = clock::now();
        let (start_ns, now_ns) = (nanos(start), nanos(now));
        if now_ns < start_ns {
            return Ok(OperationProgress {
                completed: false,
                error: None,
                n_completed: 0,
                n_total: duration_ms as i64,
                units: "milliseconds".into(),
                description: "not started".into(),
                started: None,
                updated: None,
            });
        }
        let elapsed_ms = ((now_ns - start_ns) / 1_000_000) as u64;
        let completed = elapsed_ms >= duration_ms;
        Ok(OperationProgress {
            completed,
            error: None,
            n_completed: elapsed_ms.min(duration_ms) as i64,
            n_total: duration_ms as i64,
            units: "milliseconds".into(),
            description: if completed {
                "done".into()
            } else {
                "waiting".into()
            },
            started: Some(start),
            updated: Some(now),
        })
    }

    fn cancel(_action: &str, operation_id: &str, subject: &str) -> Result<(), String> {
        named("backup or restore", subject)?;
        parse_operation(operation_id).map(|_| ())
    }

    fn items_ready(_action: &str, items: Vec<ResourceId>, restore: &str) -> Result<bool, String> {
        named("restore", restore)?;
        Ok(!items.is_empty() && !items.iter().any(|i| i.name.starts_with("pending-")))
    }
}

/// The case an action name stands for: what follows its domain.
fn case(action: &str) -> &str {
    action.rsplit_once('/').map_or(action, |(_, case)| case)
}

/// Fails unless the Backup or Restore has a `metadata.name` (so a misrouted field shows).
fn named(what: &str, subject: &str) -> Result<(), String> {
    let object = Object::parse(subject).map_err(|e| format!("{what}: {e}"))?;
    if object.name().is_empty() {
        return Err(format!("the {what} has no metadata.name"));
    }
    Ok(())
}

fn nanos(t: Timestamp) -> i128 {
    i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanoseconds)
}

fn start_operation(item: &Object) -> Result<String, String> {
    let duration_ms: u64 = match item.annotation(&format!("{PREFIX}duration-ms")) {
        Some(text) => text
            .parse()
            .map_err(|e| format!("duration-ms {text:?}: {e}"))?,
        None => 1000,
    };
    let now = clock::now();
    Ok(format!(
        "op-{}-{}-{duration_ms}",
        now.seconds, now.nanoseconds
    ))
}

fn parse_operation(id: &str) -> Result<(Timestamp, u64), String> {
    let invalid = || format!("operation ID {id} is invalid");
    let mut parts = id.strip_prefix("op-").ok_or_else(invalid)?.split('-');
    let seconds = parts
        .next()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(invalid)?;
    let nanoseconds = parts
        .next()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(invalid)?;
    let duration_ms = parts
        .next()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(invalid)?;
    if parts.next().is_some() || nanoseconds >= 1_000_000_000 {
        return Err(invalid());
    }
    Ok((
        Timestamp {
            seconds,
            nanoseconds,
        },
        duration_ms,
    ))
}

export_plugin!(Kinds);
