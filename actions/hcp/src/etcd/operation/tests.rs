//! Operation ids, Progress and Cancel against a fake cluster.

use hypershift::apis::{HCP_ETCD_BACKUPS, SECRETS};
use serde_json::json;
use velero_wasm_sdk::{Cluster, FakeCluster};

use super::*;
use crate::testing::objects::{etcd_backup, object};
use crate::testing::{Fakes, START};

const ID: &str = "hcpetcdbackup:clusters-example/oadp-nightly-abcd:1778240000:hypershift/etcd-backup-creds-nightly";
const URL: &str = "s3://my-bucket/backups/nightly/etcd-backup/snap.db";

fn copy() -> velero_wasm_sdk::Object {
    object(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "etcd-backup-creds-nightly", "namespace": "hypershift"}}),
    )
}

fn with_backup(status: &str, reason: &str, url: &str) -> Fakes {
    Fakes::new(
        FakeCluster::new()
            .with(
                HCP_ETCD_BACKUPS,
                etcd_backup("oadp-nightly-abcd", status, reason, url),
            )
            .with(SECRETS, copy()),
    )
}

#[test]
fn ids_round_trip_and_bad_ones_are_refused() {
    let id = OperationId::parse(ID).unwrap();
    assert_eq!(
        id,
        OperationId {
            namespace: "clusters-example".into(),
            name: "oadp-nightly-abcd".into(),
            started: 1_778_240_000,
            secret_namespace: "hypershift".into(),
            secret: "etcd-backup-creds-nightly".into(),
        }
    );
    assert_eq!(id.encode(), ID);
    for bad in [
        "",
        "x",
        "other:a/b:1:c/d",
        "hcpetcdbackup:a/b:soon:c/d",
        "hcpetcdbackup:ab:1:c/d",
        "hcpetcdbackup:a/b:1:c/d:e",
    ] {
        let e = OperationId::parse(bad).unwrap_err();
        assert!(
            e.starts_with(&format!("operation ID {bad} is invalid: ")),
            "{e}"
        );
    }
}

/// An error repeats at most 128 bytes of a client's operation ID, cut at a character boundary, and
/// says how long the whole was: a 16 KiB id does not come back in the error.
#[test]
fn an_invalid_id_is_cut_in_its_error() {
    let long = format!("hcpetcdbackup:{}/b:1:c/d", "a".repeat(16 << 10));
    let wide = "é".repeat(8 << 10);
    let split = format!("hcpetcdbackup:{}:1:c/d", "x".repeat(16 << 10));
    let start = format!("hcpetcdbackup:a/b:{}:c/d", "9x".repeat(8 << 10));
    for id in [&long, &wide, &split, &start] {
        let e = OperationId::parse(id).unwrap_err();
        assert!(e.len() < 500, "{} bytes: {e}", e.len());
        assert!(e.contains(&format!("… ({} bytes)", id.len())), "{e}");
    }
    assert!(shown_id(&wide).starts_with(&"é".repeat(64)));
    assert_eq!(
        shown_id("hcpetcdbackup:a/b:1:c/d"),
        "hcpetcdbackup:a/b:1:c/d"
    );
}

#[test]
fn a_running_snapshot_is_in_progress_with_its_condition() {
    let fakes = with_backup("False", "BackupInProgress", "");
    let p = progress(&fakes.context(), ID).unwrap();
    assert!(!p.completed && p.error.is_none());
    assert_eq!(p.description, "waiting for HCPEtcdBackup clusters-example/oadp-nightly-abcd: BackupCompleted=False (BackupInProgress): \"disk full\"");
    assert_eq!(p.started.unwrap().seconds, 1_778_240_000);
    // 2026-05-08T12:05:00Z, the condition's lastTransitionTime.
    assert_eq!(p.updated.unwrap().seconds, 1_778_241_900);
    assert!(fakes
        .cluster
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_ok());
}

#[test]
fn a_finished_snapshot_completes_and_its_copy_goes() {
    let fakes = with_backup("True", "BackupSucceeded", URL);
    let p = progress(&fakes.context(), ID).unwrap();
    assert!(p.completed && p.error.is_none(), "{p:?}");
    assert_eq!((p.n_completed, p.n_total), (1, 1));
    assert_eq!(p.description, format!("etcd snapshot at {URL}"));
    assert!(fakes
        .cluster
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_err());
}

#[test]
fn a_failed_snapshot_completes_with_its_error() {
    for (reason, error) in [
        ("BackupFailed", "HCPEtcdBackup failed: disk full"),
        ("BackupRejected", "HCPEtcdBackup rejected: disk full"),
    ] {
        let fakes = with_backup("False", reason, "");
        let p = progress(&fakes.context(), ID).unwrap();
        assert!(p.completed, "{reason}");
        assert_eq!(p.error.as_deref(), Some(error));
        assert!(fakes
            .cluster
            .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
            .is_err());
    }
    // EtcdUnhealthy is not final while waiting for completion.
    let p = progress(&with_backup("False", "EtcdUnhealthy", "").context(), ID).unwrap();
    assert!(!p.completed);
}

#[test]
fn success_without_a_url_is_still_in_progress() {
    let fakes = with_backup("True", "BackupSucceeded", "");
    let p = progress(&fakes.context(), ID).unwrap();
    assert!(!p.completed);
    assert!(
        p.description.contains("waiting for its status.snapshotURL"),
        "{}",
        p.description
    );
}

#[test]
fn a_vanished_snapshot_fails_the_operation() {
    let fakes = Fakes::new(FakeCluster::new().with(SECRETS, copy()));
    let p = progress(&fakes.context(), ID).unwrap();
    assert!(p.completed);
    assert_eq!(
        p.error.as_deref(),
        Some("HCPEtcdBackup clusters-example/oadp-nightly-abcd no longer exists")
    );
    assert_eq!(p.updated.unwrap().seconds, START);
}

#[test]
fn cancel_deletes_the_copy_and_keeps_the_backup() {
    let fakes = with_backup("False", "BackupInProgress", "");
    cancel(&fakes.context(), ID).unwrap();
    assert!(fakes
        .cluster
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_err());
    assert!(fakes
        .cluster
        .get(HCP_ETCD_BACKUPS, "clusters-example", "oadp-nightly-abcd")
        .is_ok());
    assert!(cancel(&fakes.context(), "nonsense").is_err());
}
