//! Velero's calls to a slot ([`crate::action::slot`]): the actions it serves are those in service of
//! its family that the listing Velero holds lacks ([`crate::action::slot::pending`]), so a module
//! added while Velero runs serves in its next backup (docs/modules.md#s10).
//!
//! Each call is shared out as Velero itself shares a call among matching actions: Execute runs every
//! served action whose own selector matches the item, in name order, each on the previous one's
//! output; additional items are joined without repeats; a skipped restore stops the chain; the
//! first failure fails the item and names its action. Operations are composed into one id that names
//! each action and its own id, so that Progress and Cancel reach the module that started them.

use std::time::Duration;

use serde::Deserialize;
use tonic::Status;
use tracing::Instrument;

use super::dispatch::{Dispatch, Item};
use super::grpc_status;
use super::served::{Covered, ServedAction};
use crate::action::slot::Family;
use crate::action::{
    ActionKind, AppliesTo, BackupOutcome, BackupRequest, ItemRef, OperationProgress, ResourceId,
    RestoreOutcome, RestoreRequest,
};
use crate::runtime::{calls, CallError};

/// The annotation with which a backup action tells Velero to leave the item out: Velero then stops
/// calling the item's actions, and so does a slot.
const SKIP_FROM_BACKUP: &str = "velero.io/skip-from-backup";

/// Whether `action`'s own selector matches `item`, seen in `namespace`. A selector that does not
/// parse (its module would not have loaded) matches nothing.
fn applies(action: &dyn ServedAction, item: &ItemRef, namespace: &str) -> bool {
    AppliesTo::new(&action.info().applies_to).is_ok_and(|s| s.check(item, namespace).is_ok())
}

/// The span every line logged during one served action's part of a slot's call carries: the call's
/// span names the slot as its action, this one the action served.
fn served_span(action: &dyn ServedAction) -> tracing::Span {
    tracing::error_span!("slot", served = action.info().name.as_str())
}

/// Keeps the operation `action` started for the slot's combined id, or refuses it where the slot's
/// kind is a v1 kind (`untracked`), which has no operations to report progress of.
fn keep_operation(
    kind: ActionKind,
    untracked: bool,
    action: &dyn ServedAction,
    id: Option<String>,
    operations: &mut Vec<(String, String)>,
) -> Result<(), Status> {
    let Some(id) = id else {
        return Ok(());
    };
    if untracked {
        return Err(grpc_status::untracked_operation(
            kind,
            &action.info().name,
            &id,
        ));
    }
    operations.push((action.info().name.clone(), id));
    Ok(())
}

/// The status of a served action's failure: as Velero's for that action, and an action's own error
/// message is prefixed with its name (the others name their module and action already).
fn failed(kind: ActionKind, slot: &str, action: &dyn ServedAction, error: &CallError) -> Status {
    match error {
        CallError::Action(message) => grpc_status::call_failed(
            kind,
            &CallError::Action(format!(
                "action {} (served through {slot}): {message}",
                action.info().name
            )),
        ),
        other => grpc_status::call_failed(kind, other),
    }
}

/// Appends each of `items` that `to` does not hold yet.
fn join(to: &mut Vec<ResourceId>, items: Vec<ResourceId>) {
    for item in items {
        if !to.contains(&item) {
            to.push(item);
        }
    }
}

/// Whether a backup action's answer asks Velero to leave the item out.
fn skips_backup(item: &str) -> bool {
    #[derive(Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Option<Metadata>,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        annotations: Option<std::collections::BTreeMap<String, serde::de::IgnoredAny>>,
    }
    serde_json::from_str::<Object>(item).is_ok_and(|o| {
        o.metadata
            .and_then(|m| m.annotations)
            .is_some_and(|a| a.contains_key(SKIP_FROM_BACKUP))
    })
}

/// The identity of an item a served action returned (checked by the runtime as an object with a kind).
fn identity(text: &str) -> Result<ItemRef, Status> {
    ItemRef::parse(text)
        .map_err(|e| grpc_status::bad_request("item", format!("not valid JSON: {}", e.0)))
}

/// One operation id for the operations the served actions started: each action's name with its own
/// id, so that Progress and Cancel find them again in any later process.
fn compose(operations: &[(String, String)]) -> Option<String> {
    // Pairs of strings always serialise.
    (!operations.is_empty())
        .then(|| serde_json::to_string(operations).ok())
        .flatten()
}

/// The operations an id made by [`compose`] names; a status when it is not one.
fn decompose(slot: &str, id: &str) -> Result<Vec<(String, String)>, Status> {
    serde_json::from_str::<Vec<(String, String)>>(id)
        .ok()
        .filter(|ops| !ops.is_empty())
        .ok_or_else(|| {
            grpc_status::bad_request(
                "operationID",
                format!(
                    "{} is not an operation {slot} started (it names each action with its own id: [[\"example.io/action\",\"id\"]])",
                    grpc_status::quoted(id)
                ),
            )
        })
}

impl Dispatch {
    /// Backup Execute through a slot.
    pub(super) async fn slot_backup(
        &self,
        kind: ActionKind,
        covered: Covered,
        item: Item,
        backup: String,
    ) -> Result<BackupOutcome, Status> {
        let slot = covered.name();
        // Velero matches each action against the item as it came, not as earlier actions left it.
        let original = item.id;
        let mut outcome = BackupOutcome {
            item: item.text,
            additional_items: Vec::new(),
            operation_id: None,
            post_operation_items: Vec::new(),
        };
        let mut operations = Vec::new();
        for action in covered.actions() {
            if !applies(&**action, &original, &original.namespace) {
                continue;
            }
            let served_kind = action.info().kind;
            let call = calls::Backup {
                item: identity(&outcome.item)?,
                request: BackupRequest {
                    item: std::mem::take(&mut outcome.item),
                    backup: backup.clone(),
                },
            };
            let answer = self
                .mirrored_call(served_kind, &**action, "Execute", call)
                .instrument(served_span(&**action))
                .await
                .map_err(|e| failed(kind, slot, &**action, &e))?;
            outcome.item = answer.item;
            join(&mut outcome.additional_items, answer.additional_items);
            join(
                &mut outcome.post_operation_items,
                answer.post_operation_items,
            );
            keep_operation(
                kind,
                kind == ActionKind::Backup,
                &**action,
                answer.operation_id,
                &mut operations,
            )?;
            if skips_backup(&outcome.item) {
                break;
            }
        }
        outcome.operation_id = compose(&operations);
        Ok(outcome)
    }

    /// Restore Execute through a slot.
    pub(super) async fn slot_restore(
        &self,
        kind: ActionKind,
        covered: Covered,
        request: RestoreRequest,
    ) -> Result<RestoreOutcome, Status> {
        let slot = covered.name();
        let RestoreRequest {
            item,
            item_from_backup,
            restore,
        } = request;
        let mut outcome = RestoreOutcome {
            item,
            additional_items: Vec::new(),
            skip_restore: false,
            operation_id: None,
            wait_for_additional_items: false,
            additional_items_timeout: None,
        };
        let mut operations = Vec::new();
        for action in covered.actions() {
            // Velero matches a restore action's labels against the item as earlier actions left it.
            let current = identity(&outcome.item)?;
            if !applies(&**action, &current, &current.namespace) {
                continue;
            }
            let served_kind = action.info().kind;
            let call = calls::Restore {
                item: current,
                request: RestoreRequest {
                    item: std::mem::take(&mut outcome.item),
                    item_from_backup: item_from_backup.clone(),
                    restore: restore.clone(),
                },
            };
            let answer = self
                .mirrored_call(served_kind, &**action, "Execute", call)
                .instrument(served_span(&**action))
                .await
                .map_err(|e| failed(kind, slot, &**action, &e))?;
            outcome.item = answer.item;
            join(&mut outcome.additional_items, answer.additional_items);
            if answer.wait_for_additional_items {
                outcome.wait_for_additional_items = true;
                outcome.additional_items_timeout = longest(
                    outcome.additional_items_timeout,
                    answer.additional_items_timeout,
                );
            }
            keep_operation(
                kind,
                kind == ActionKind::Restore,
                &**action,
                answer.operation_id,
                &mut operations,
            )?;
            // As Velero: a skipped item goes to no further action.
            if answer.skip_restore {
                outcome.skip_restore = true;
                break;
            }
        }
        outcome.operation_id = compose(&operations);
        Ok(outcome)
    }

    /// ItemBlockAction GetRelatedItems through a slot: every matching action's related items, joined.
    pub(super) async fn slot_related_items(
        &self,
        covered: Covered,
        item: Item,
        backup: String,
    ) -> Result<Vec<ResourceId>, Status> {
        let kind = ActionKind::ItemBlock;
        let mut related = Vec::new();
        for action in covered.actions() {
            if !applies(&**action, &item.id, &item.id.namespace) {
                continue;
            }
            let call = calls::RelatedItems {
                item: item.id.clone(),
                text: item.text.clone(),
                backup: backup.clone(),
                answers_velero: false,
            };
            let answer = self
                .mirrored_call(kind, &**action, "GetRelatedItems", call)
                .instrument(served_span(&**action))
                .await
                .map_err(|e| failed(kind, covered.name(), &**action, &e))?;
            join(&mut related, answer);
        }
        Ok(related)
    }

    /// DeleteItemAction Execute through a slot: every matching action, in order.
    pub(super) async fn slot_delete(
        &self,
        covered: Covered,
        item: Item,
        backup: String,
    ) -> Result<(), Status> {
        let kind = ActionKind::Delete;
        for action in covered.actions() {
            if !applies(&**action, &item.id, &item.id.namespace) {
                continue;
            }
            let call = calls::Delete {
                item: item.id.clone(),
                text: item.text.clone(),
                backup: backup.clone(),
            };
            self.mirrored_call(kind, &**action, "Execute", call)
                .instrument(served_span(&**action))
                .await
                .map_err(|e| failed(kind, covered.name(), &**action, &e))?;
        }
        Ok(())
    }

    /// Progress of an operation started through the slot of `family`: each action named in the id
    /// is asked about its own operation, whether Velero has listed it since or not.
    pub(super) async fn slot_progress(
        &self,
        kind: ActionKind,
        family: Family,
        operation_id: &str,
        subject: String,
    ) -> Result<OperationProgress, Status> {
        let slot = family.slot_name();
        let mut parts = Vec::new();
        for (name, id) in decompose(slot, operation_id)? {
            let action = self.operation_action(kind, slot, &name)?;
            let call = calls::Progress {
                operation_id: id,
                subject: subject.clone(),
            };
            let progress = super::dispatch::measured(&*action, "Progress", action.progress(call))
                .instrument(served_span(&*action))
                .await
                .map_err(|e| failed(kind, slot, &*action, &e))?;
            parts.push((name, progress));
        }
        Ok(combined(parts))
    }

    /// Cancel of an operation started through the slot of `family`: each action's own, all of them
    /// even when one fails (the first failure is returned).
    pub(super) async fn slot_cancel(
        &self,
        kind: ActionKind,
        family: Family,
        operation_id: &str,
        subject: String,
    ) -> Result<(), Status> {
        let slot = family.slot_name();
        let mut first_failure = None;
        for (name, id) in decompose(slot, operation_id)? {
            let cancelled = match self.operation_action(kind, slot, &name) {
                Ok(action) => {
                    let call = calls::Cancel {
                        operation_id: id,
                        subject: subject.clone(),
                    };
                    super::dispatch::measured(&*action, "Cancel", action.cancel(call))
                        .instrument(served_span(&*action))
                        .await
                        .map_err(|e| failed(kind, slot, &*action, &e))
                }
                Err(status) => Err(status),
            };
            if let Err(status) = cancelled {
                first_failure.get_or_insert(status);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// AreAdditionalItemsReady through the restore slot: ready when every v2 restore action it
    /// serves says so (Velero does not say which action asked to wait; each answers for the items).
    pub(super) async fn slot_items_ready(
        &self,
        covered: Covered,
        items: Vec<ResourceId>,
        restore: String,
    ) -> Result<bool, Status> {
        let kind = ActionKind::RestoreV2;
        for action in covered.actions() {
            if action.info().kind != ActionKind::RestoreV2 {
                continue;
            }
            let call = calls::ItemsReady {
                items: items.clone(),
                restore: restore.clone(),
            };
            let ready = super::dispatch::measured(
                &**action,
                "AreAdditionalItemsReady",
                action.items_ready(call),
            )
            .instrument(served_span(&**action))
            .await
            .map_err(|e| failed(kind, covered.name(), &**action, &e))?;
            if !ready {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The action named in an operation id of a slot: in service under that name, of a kind the
    /// slot's service can run.
    fn operation_action(
        &self,
        kind: ActionKind,
        slot: &str,
        name: &str,
    ) -> Result<Box<dyn ServedAction>, Status> {
        match self.actions().action(name) {
            Some(action) if kind.can_serve(action.info().kind) => Ok(action),
            _ => Err(grpc_status::retired_operation(&format!(
                "{name} (an operation started through {slot})"
            ))),
        }
    }
}

/// The longer of two waits for additional items (`None` is Velero's default, 10 minutes).
fn longest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The progress of one operation made of several: completed when all are; an error naming each
/// failed action; counts summed when all count in the same units, else counted in operations.
fn combined(mut parts: Vec<(String, OperationProgress)>) -> OperationProgress {
    if parts.len() == 1 {
        return parts.remove(0).1;
    }
    let same_units = parts.windows(2).all(|w| w[0].1.units == w[1].1.units);
    let errors: Vec<String> = parts
        .iter()
        .filter_map(|(name, p)| p.error.as_ref().map(|e| format!("{name}: {e}")))
        .collect();
    let (n_completed, n_total, units) = if same_units {
        (
            parts.iter().map(|(_, p)| p.n_completed).sum(),
            parts.iter().map(|(_, p)| p.n_total).sum(),
            parts[0].1.units.clone(),
        )
    } else {
        (
            parts.iter().filter(|(_, p)| p.completed).count() as i64,
            parts.len() as i64,
            "operations".to_string(),
        )
    };
    OperationProgress {
        completed: parts.iter().all(|(_, p)| p.completed),
        error: (!errors.is_empty()).then(|| errors.join("; ")),
        n_completed,
        n_total,
        units,
        description: parts
            .iter()
            .filter(|(_, p)| !p.description.is_empty())
            .map(|(name, p)| format!("{name}: {}", p.description))
            .collect::<Vec<_>>()
            .join("; "),
        started: parts.iter().filter_map(|(_, p)| p.started).min(),
        updated: parts.iter().filter_map(|(_, p)| p.updated).max(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn progress(completed: bool, n: i64, units: &str, error: Option<&str>) -> OperationProgress {
        OperationProgress {
            completed,
            error: error.map(str::to_string),
            n_completed: n,
            n_total: 10,
            units: units.into(),
            description: format!("{n} done"),
            started: Some(UNIX_EPOCH + Duration::from_secs(n as u64)),
            updated: None,
        }
    }

    #[test]
    fn operation_ids_name_each_action_and_come_apart_again() {
        let ops = vec![
            ("a.io/x".to_string(), "snap-1".to_string()),
            ("b.io/y".to_string(), "copy \"2\"".to_string()),
        ];
        let id = compose(&ops).unwrap();
        assert_eq!(decompose("slot", &id).unwrap(), ops);
        assert_eq!(compose(&[]), None);
        for bad in ["snap-1", "[]", "[[\"a\"]]"] {
            let status = decompose("velero-wasm.io/added-backup-actions", bad).unwrap_err();
            assert!(
                status
                    .message()
                    .contains("is not an operation velero-wasm.io/added-backup-actions started"),
                "{bad}: {}",
                status.message()
            );
        }
    }

    #[test]
    fn one_operation_reports_as_it_is_and_several_as_one() {
        let one = progress(false, 3, "GiB", None);
        assert_eq!(combined(vec![("a".into(), one.clone())]), one);
        let both = combined(vec![
            ("a".into(), progress(true, 3, "GiB", None)),
            ("b".into(), progress(false, 5, "GiB", Some("disk full"))),
        ]);
        assert!(!both.completed);
        assert_eq!(
            (both.n_completed, both.n_total, both.units.as_str()),
            (8, 20, "GiB")
        );
        assert_eq!(both.error.as_deref(), Some("b: disk full"));
        assert_eq!(both.description, "a: 3 done; b: 5 done");
        assert_eq!(both.started, Some(UNIX_EPOCH + Duration::from_secs(3)));
        let mixed = combined(vec![
            ("a".into(), progress(true, 3, "GiB", None)),
            ("b".into(), progress(true, 5, "items", None)),
        ]);
        assert!(mixed.completed);
        assert_eq!(
            (mixed.n_completed, mixed.n_total, mixed.units.as_str()),
            (2, 2, "operations")
        );
    }

    #[test]
    fn the_skip_annotation_is_found_and_nothing_else_counts_as_it() {
        assert!(skips_backup(
            r#"{"kind":"Pod","metadata":{"annotations":{"velero.io/skip-from-backup":"true"}}}"#
        ));
        assert!(!skips_backup(
            r#"{"kind":"Pod","metadata":{"annotations":{"a":"b"}}}"#
        ));
        assert!(!skips_backup(
            r#"{"kind":"Pod","metadata":{"labels":{"velero.io/skip-from-backup":"x"}}}"#
        ));
    }

    #[test]
    fn the_longest_wait_wins() {
        let s = Duration::from_secs;
        assert_eq!(longest(None, Some(s(5))), Some(s(5)));
        assert_eq!(longest(Some(s(90)), Some(s(5))), Some(s(90)));
        assert_eq!(longest(None, None), None);
    }
}
