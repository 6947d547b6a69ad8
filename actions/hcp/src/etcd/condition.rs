//! What an HCPEtcdBackup says about itself: its `BackupCompleted` condition and `status.snapshotURL`
//! (docs/hcp.md#s4-4-5, #s9), and what each poll makes of them.

use velero_wasm_sdk::{Object, Timestamp};

/// The condition type the plugin reads.
pub const BACKUP_COMPLETED: &str = "BackupCompleted";

/// The `BackupCompleted` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `True`, `False`, `Unknown`.
    pub status: String,
    /// `BackupSucceeded`, `BackupFailed`, `BackupInProgress`, `BackupRejected`, `EtcdUnhealthy`, …
    pub reason: String,
    /// For people.
    pub message: String,
    /// `lastTransitionTime`, in Unix seconds, if it parses.
    pub changed: Option<i64>,
}

impl Condition {
    /// The `BackupCompleted` condition of a CR, if it has one.
    pub fn of(cr: &Object) -> Option<Condition> {
        let field = |c: &serde_json::Value, name: &str| {
            c.get(name)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        cr.array_at("/status/conditions")
            .iter()
            .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(BACKUP_COMPLETED))
            .map(|c| Condition {
                status: field(c, "status"),
                reason: field(c, "reason"),
                message: field(c, "message"),
                changed: Timestamp::parse_rfc3339(&field(c, "lastTransitionTime"))
                    .map(|t| t.seconds),
            })
    }

    /// `BackupCompleted=False (BackupInProgress): "message"`.
    pub fn summary(&self) -> String {
        let mut text = format!("{BACKUP_COMPLETED}={} ({})", self.status, self.reason);
        if !self.message.is_empty() {
            text.push_str(&format!(": {:?}", self.message));
        }
        text
    }
}

/// `status.snapshotURL` ("" when absent).
pub fn snapshot_url(cr: &Object) -> &str {
    cr.str_at("/status/snapshotURL").unwrap_or("")
}

/// What the state of a CR means to a poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// The poll is over, successfully.
    Done,
    /// The poll is over: the backup failed, with this error.
    Failed(String),
    /// Keep polling.
    Pending,
}

/// The start check (verify in progress): `BackupInProgress` or `BackupSucceeded` (any status) is
/// done; `BackupFailed`, `BackupRejected` and `EtcdUnhealthy` fail.
pub fn started(condition: Option<&Condition>) -> Reading {
    let Some(c) = condition else {
        return Reading::Pending;
    };
    match c.reason.as_str() {
        "BackupInProgress" | "BackupSucceeded" => Reading::Done,
        "BackupFailed" => Reading::Failed(format!("HCPEtcdBackup failed: {}", c.message)),
        "BackupRejected" => Reading::Failed(format!("HCPEtcdBackup rejected: {}", c.message)),
        "EtcdUnhealthy" => Reading::Failed(format!("etcd unhealthy: {}", c.message)),
        _ => Reading::Pending,
    }
}

/// The completion check: status `True` with reason `BackupSucceeded` is done; `BackupFailed` and
/// `BackupRejected` fail (`EtcdUnhealthy` is not final here).
pub fn completed(condition: Option<&Condition>) -> Reading {
    let Some(c) = condition else {
        return Reading::Pending;
    };
    match c.reason.as_str() {
        "BackupSucceeded" if c.status == "True" => Reading::Done,
        "BackupFailed" => Reading::Failed(format!("HCPEtcdBackup failed: {}", c.message)),
        "BackupRejected" => Reading::Failed(format!("HCPEtcdBackup rejected: {}", c.message)),
        _ => Reading::Pending,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cr(status: &str, reason: &str, message: &str) -> Object {
        Object::from_value(json!({"kind": "HCPEtcdBackup", "status": {"conditions": [
            {"type": "Other", "status": "True", "reason": "BackupFailed"},
            {"type": "BackupCompleted", "status": status, "reason": reason, "message": message,
             "lastTransitionTime": "2026-05-08T12:00:00Z"}
        ], "snapshotURL": "s3://my-bucket/backups/test/etcd-backup/snapshot.db"}}))
        .unwrap()
    }

    fn reading(f: fn(Option<&Condition>) -> Reading, status: &str, reason: &str) -> Reading {
        f(Condition::of(&cr(status, reason, "disk full")).as_ref())
    }

    #[test]
    fn the_start_check_follows_upstream() {
        assert_eq!(reading(started, "False", "BackupInProgress"), Reading::Done);
        assert_eq!(reading(started, "True", "BackupSucceeded"), Reading::Done);
        assert_eq!(reading(started, "False", "BackupSucceeded"), Reading::Done);
        assert_eq!(
            reading(started, "False", "BackupFailed"),
            Reading::Failed("HCPEtcdBackup failed: disk full".into())
        );
        assert_eq!(
            reading(started, "False", "BackupRejected"),
            Reading::Failed("HCPEtcdBackup rejected: disk full".into())
        );
        assert_eq!(
            reading(started, "False", "EtcdUnhealthy"),
            Reading::Failed("etcd unhealthy: disk full".into())
        );
        assert_eq!(reading(started, "Unknown", "Pending"), Reading::Pending);
        assert_eq!(started(None), Reading::Pending);
    }

    #[test]
    fn the_completion_check_follows_upstream() {
        assert_eq!(reading(completed, "True", "BackupSucceeded"), Reading::Done);
        assert_eq!(
            reading(completed, "False", "BackupSucceeded"),
            Reading::Pending
        );
        assert_eq!(
            reading(completed, "False", "BackupInProgress"),
            Reading::Pending
        );
        assert_eq!(
            reading(completed, "False", "EtcdUnhealthy"),
            Reading::Pending
        );
        assert!(
            matches!(reading(completed, "False", "BackupFailed"), Reading::Failed(e) if e.contains("HCPEtcdBackup failed"))
        );
        assert!(
            matches!(reading(completed, "False", "BackupRejected"), Reading::Failed(e) if e.contains("rejected"))
        );
        let c = cr("True", "BackupSucceeded", "");
        assert_eq!(
            snapshot_url(&c),
            "s3://my-bucket/backups/test/etcd-backup/snapshot.db"
        );
        let condition = Condition::of(&c).unwrap();
        assert_eq!(condition.changed, Some(1_778_241_600));
        assert_eq!(
            condition.summary(),
            "BackupCompleted=True (BackupSucceeded)"
        );
    }
}
