//! Waiting for an HCPEtcdBackup inside Execute (docs/hcp.md#s4-4-5): a GET every 5 s, the first at once,
//! through the `clock` capability's sleep (a virtual clock makes the wait instant). A wait never runs
//! into the module's deadline: it ends [`AFTER_WAIT`] before it, so the backup still cleans up and
//! answers. A timeout names the CR and the last thing it said.

use std::time::Duration;

use hypershift::apis::HCP_ETCD_BACKUPS;
use velero_wasm_sdk::Object;

use super::condition::{completed, snapshot_url, started, Condition, Reading};
use super::{COMPLETION_TIMEOUT, INTERVAL, VERIFY_TIMEOUT};
use crate::context::Context;

/// What a wait leaves of the call's time for the work after it (deleting the copied Secret, answering).
pub const AFTER_WAIT: Duration = Duration::from_secs(10);

/// Waits until the CR reports that the backup started (or already succeeded): 30 s.
pub fn until_started(ctx: &Context, namespace: &str, name: &str) -> Result<Object, String> {
    poll(ctx, namespace, name, VERIFY_TIMEOUT, "to start", started)
}

/// Waits until the backup succeeded and returns the snapshot URL ("" if the CR gives none): 10 min.
pub fn until_completed(ctx: &Context, namespace: &str, name: &str) -> Result<String, String> {
    let cr = poll(
        ctx,
        namespace,
        name,
        COMPLETION_TIMEOUT,
        "to complete",
        completed,
    )?;
    Ok(snapshot_url(&cr).to_string())
}

fn poll(
    ctx: &Context,
    namespace: &str,
    name: &str,
    timeout: Duration,
    goal: &str,
    check: fn(Option<&Condition>) -> Reading,
) -> Result<Object, String> {
    let start = ctx.clock.monotonic();
    let allowed = ctx.clock.remaining().saturating_sub(AFTER_WAIT);
    let budget = timeout.min(allowed);
    loop {
        let last = match ctx.cluster.get(HCP_ETCD_BACKUPS, namespace, name) {
            Ok(cr) => {
                let condition = Condition::of(&cr);
                match check(condition.as_ref()) {
                    Reading::Done => return Ok(cr),
                    Reading::Failed(e) => return Err(e),
                    Reading::Pending => condition
                        .map(|c| c.summary())
                        .unwrap_or_else(|| "no BackupCompleted condition yet".into()),
                }
            }
            Err(e) if e.is_not_found() => "not found yet".to_string(),
            Err(e) => return Err(format!("failed to get HCPEtcdBackup: {}", e.message())),
        };
        let elapsed = ctx.clock.monotonic().saturating_sub(start);
        if elapsed >= budget {
            let cut = if budget < timeout {
                format!(
                    " (the module's limits.timeout leaves no more of the {} this wait allows: raise it in the hcp manifest)",
                    human(timeout)
                )
            } else {
                String::new()
            };
            return Err(format!(
                "timed out after {} waiting for HCPEtcdBackup {namespace}/{name} {goal}{cut}; last observed: {last}",
                human(budget)
            ));
        }
        ctx.clock.sleep(INTERVAL.min(budget - elapsed));
    }
}

/// `30s`, `10m`, `1m30s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use velero_wasm_sdk::FakeCluster;

    use super::*;
    use crate::testing::Fakes;

    fn cr(reason: &str, status: &str) -> Object {
        Object::from_value(json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HCPEtcdBackup",
            "metadata": {"name": "oadp-b-xxxx", "namespace": "clusters-hc"},
            "status": {"conditions": [{"type": "BackupCompleted", "status": status, "reason": reason, "message": "m"}],
                       "snapshotURL": "s3://bucket/backups/b/etcd-backup/snap.db"}}))
        .unwrap()
    }

    #[test]
    fn a_finished_backup_answers_at_the_first_check() {
        let fakes =
            Fakes::new(FakeCluster::new().with(HCP_ETCD_BACKUPS, cr("BackupSucceeded", "True")));
        let ctx = fakes.context();
        assert_eq!(
            until_completed(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap(),
            "s3://bucket/backups/b/etcd-backup/snap.db"
        );
        assert_eq!(fakes.clock.slept(), Duration::ZERO);
        assert_eq!(fakes.cluster.calls().len(), 1);
    }

    #[test]
    fn a_backup_that_never_finishes_times_out_after_121_reads() {
        let fakes =
            Fakes::new(FakeCluster::new().with(HCP_ETCD_BACKUPS, cr("BackupInProgress", "False")));
        let ctx = fakes.context();
        let e = until_completed(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err();
        assert_eq!(
            e,
            "timed out after 10m waiting for HCPEtcdBackup clusters-hc/oadp-b-xxxx to complete; last observed: BackupCompleted=False (BackupInProgress): \"m\""
        );
        assert_eq!(fakes.cluster.calls().len(), 121);
        assert_eq!(fakes.clock.slept(), Duration::from_secs(600));
    }

    #[test]
    fn a_wait_ends_before_the_module_s_deadline_and_says_which_limit_cut_it_short() {
        let fakes =
            Fakes::new(FakeCluster::new().with(HCP_ETCD_BACKUPS, cr("BackupInProgress", "False")));
        fakes.clock.set_limit(Duration::from_secs(120));
        let ctx = fakes.context();
        let e = until_completed(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err();
        assert_eq!(
            e,
            "timed out after 1m50s waiting for HCPEtcdBackup clusters-hc/oadp-b-xxxx to complete (the module's limits.timeout leaves no more of the 10m this wait allows: raise it in the hcp manifest); last observed: BackupCompleted=False (BackupInProgress): \"m\""
        );
        assert_eq!(fakes.clock.slept(), Duration::from_secs(110));
        assert_eq!(
            fakes.cluster.calls().len(),
            1 + 22,
            "every 5 s from 0 to 110 s"
        );
    }

    #[test]
    fn a_call_with_less_than_the_margin_left_reads_once_and_gives_up() {
        let fakes = Fakes::new(FakeCluster::new());
        fakes.clock.set_limit(Duration::from_secs(3));
        let ctx = fakes.context();
        let e = until_started(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err();
        assert!(e.starts_with("timed out after 0s waiting for HCPEtcdBackup clusters-hc/oadp-b-xxxx to start (the module's limits.timeout"), "{e}");
        assert_eq!(fakes.cluster.calls().len(), 1);
        assert_eq!(fakes.clock.slept(), Duration::ZERO);
    }

    #[test]
    fn a_backup_that_never_appears_times_out_after_7_reads() {
        let fakes = Fakes::new(FakeCluster::new());
        let ctx = fakes.context();
        let e = until_started(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err();
        assert_eq!(
            e,
            "timed out after 30s waiting for HCPEtcdBackup clusters-hc/oadp-b-xxxx to start; last observed: not found yet"
        );
        assert_eq!(fakes.cluster.calls().len(), 7);
    }

    #[test]
    fn failures_end_the_wait_with_upstream_texts() {
        let fakes =
            Fakes::new(FakeCluster::new().with(HCP_ETCD_BACKUPS, cr("BackupFailed", "False")));
        let ctx = fakes.context();
        assert_eq!(
            until_completed(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err(),
            "HCPEtcdBackup failed: m"
        );
        assert_eq!(
            until_started(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err(),
            "HCPEtcdBackup failed: m"
        );
        let fakes =
            Fakes::new(FakeCluster::new().with(HCP_ETCD_BACKUPS, cr("EtcdUnhealthy", "False")));
        let ctx = fakes.context();
        assert_eq!(
            until_started(&ctx, "clusters-hc", "oadp-b-xxxx").unwrap_err(),
            "etcd unhealthy: m"
        );
    }
}
