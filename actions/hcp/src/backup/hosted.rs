//! HostedControlPlanes and HostedClusters (docs/hcp.md#s4-3): the restored-from-backup mark, platform
//! validation, and the etcd snapshot: its CR, the wait (blocking, or an asynchronous operation), and
//! its URL on both objects.

use hypershift::apis::{GROUP, HCP_ETCD_BACKUPS};
use hypershift::platform;
use serde_json::Value;
use velero_wasm_sdk::{log, Object, ResourceId};

use super::{Outcome, Scope};
use crate::config::Method;
use crate::etcd::condition::{completed, snapshot_url, Condition, Reading};
use crate::etcd::create::{ensure, Ensured};
use crate::etcd::operation::OperationId;
use crate::etcd::{credentials, poll, Job};
use crate::settings::EtcdWait;

/// Set on HostedClusters (empty value), at backup and again at restore.
pub const RESTORED_FROM_BACKUP: &str = "hypershift.openshift.io/restored-from-backup";
/// The snapshot's URL, on the HostedCluster and HostedControlPlane.
pub const SNAPSHOT_URL: &str = "hypershift.openshift.io/etcd-snapshot-url";

/// What the etcd steps produced for this item.
enum Etcd {
    /// Nothing to record (volume snapshots, or no URL yet).
    Nothing,
    /// The snapshot's URL.
    Url(String),
    /// An operation started.
    Started(String, Vec<ResourceId>),
}

/// Checks that the item reads as `kind`: `spec`, if present, is an object.
pub fn check_shape(item: &Object, kind: &str) -> Result<(), String> {
    match item.pointer("/spec") {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err(format!(
            "error converting item to {kind}: spec is not an object"
        )),
    }
}

/// A HostedControlPlane: platform validation, the etcd steps, the URL annotation.
pub fn control_plane(scope: &Scope, mut item: Object) -> Result<Outcome, String> {
    check_shape(&item, "HostedControlPlane")?;
    scope.config.warn_unknown_keys();
    platform::validate(platform::of(&item))
        .map_err(|e| format!("error checking platform configuration: {e}"))?;
    match etcd(scope)? {
        Etcd::Nothing => Ok(Outcome::PassThrough("nothing to record".into())),
        Etcd::Url(url) => {
            item.set_annotation(SNAPSHOT_URL, &url);
            Ok(Outcome::Changed(item))
        }
        Etcd::Started(operation_id, post_operation_items) => Ok(Outcome::Started {
            item,
            operation_id,
            post_operation_items,
        }),
    }
}

/// A HostedCluster: the restored-from-backup mark, the etcd steps, the URL annotation and status.
pub fn cluster(scope: &Scope, mut item: Object) -> Result<Outcome, String> {
    check_shape(&item, "HostedCluster")?;
    item.set_annotation(RESTORED_FROM_BACKUP, "");
    match etcd(scope)? {
        Etcd::Nothing => Ok(Outcome::Changed(item)),
        Etcd::Url(url) => {
            item.set_annotation(SNAPSHOT_URL, &url);
            item.set("/status/lastSuccessfulEtcdBackupURL", Value::String(url))
                .map_err(|e| format!("error converting item to HostedCluster: {e}"))?;
            Ok(Outcome::Changed(item))
        }
        Etcd::Started(operation_id, post_operation_items) => Ok(Outcome::Started {
            item,
            operation_id,
            post_operation_items,
        }),
    }
}

/// Whether Velero is finalizing the backup (re-running actions on post-operation items; an action
/// must not start operations then).
fn finalizing(backup: &Object) -> bool {
    matches!(
        backup.str_at("/status/phase"),
        Some("Finalizing" | "FinalizingPartiallyFailed")
    )
}

fn etcd(scope: &Scope) -> Result<Etcd, String> {
    if scope.method != Method::EtcdSnapshot {
        return Ok(Etcd::Nothing);
    }
    let job = Job {
        ctx: scope.ctx,
        backup: scope.backup,
        hcp: scope.hcp,
        velero_namespace: scope.velero_namespace,
        ho_namespace: scope.config.ho_namespace(),
    };
    if finalizing(scope.backup) {
        return Ok(finalize(&job));
    }
    match scope.ctx.settings.etcd_wait {
        EtcdWait::Blocking => blocking(&job),
        EtcdWait::Async => start(&job),
    }
}

/// `etcd-wait = "blocking"`: create if needed, then wait up to 10 minutes inside this call.
fn blocking(job: &Job) -> Result<Etcd, String> {
    ensure(job).map_err(|e| format!("error creating HCPEtcdBackup: {e}"))?;
    let cluster = job.ctx.cluster;
    let (namespace, name, secret) = (job.namespace(), job.cr_name(), job.secret_name());
    let url = poll::until_completed(&job.ctx, namespace, &name).map_err(|e| {
        // Upstream leaks the copy here; the snapshot is of no use to this backup any more.
        credentials::delete(cluster, job.ho_namespace, &secret);
        format!("HCPEtcdBackup failed: {e}")
    })?;
    credentials::delete(cluster, job.ho_namespace, &secret);
    if url.is_empty() {
        log::info(
            "the HCPEtcdBackup succeeded without a snapshot URL: nothing to record",
            &[("hcpEtcdBackup", &format!("{namespace}/{name}"))],
        );
        return Ok(Etcd::Nothing);
    }
    Ok(Etcd::Url(url))
}

/// `etcd-wait = "async"`: create if needed and return an operation. The item that creates the CR
/// starts the operation, listing the HostedCluster and HostedControlPlane for Velero to back up again
/// when it has ended; the other finds the CR and records its URL if it has one already.
fn start(job: &Job) -> Result<Etcd, String> {
    match ensure(job).map_err(|e| format!("error creating HCPEtcdBackup: {e}"))? {
        Ensured::Existing(cr) => {
            if completed(Condition::of(&cr).as_ref()) == Reading::Done
                && !snapshot_url(&cr).is_empty()
            {
                return Ok(Etcd::Url(snapshot_url(&cr).to_string()));
            }
            log::debug(
                "the HCPEtcdBackup exists already: its operation was started by another item",
                &[],
            );
            Ok(Etcd::Nothing)
        }
        Ensured::Created { hosted_cluster } => {
            let id = OperationId {
                namespace: job.namespace().to_string(),
                name: job.cr_name(),
                started: job.ctx.unix_now(),
                secret_namespace: job.ho_namespace.to_string(),
                secret: job.secret_name(),
            };
            let mut post = Vec::new();
            if let Some(hc) = hosted_cluster {
                post.push(ResourceId::new(
                    GROUP,
                    "hostedclusters",
                    hc.namespace(),
                    hc.name(),
                ));
            }
            post.push(ResourceId::new(
                GROUP,
                "hostedcontrolplanes",
                job.hcp.namespace(),
                job.hcp.name(),
            ));
            Ok(Etcd::Started(id.encode(), post))
        }
    }
}

/// Finalization: the operation has ended. The completed CR's URL is recorded, the copied Secret
/// deleted; a CR that did not succeed leaves nothing to record (Progress reported its failure).
fn finalize(job: &Job) -> Etcd {
    let (namespace, name) = (job.namespace(), job.cr_name());
    let url = match job.ctx.cluster.get(HCP_ETCD_BACKUPS, namespace, &name) {
        Ok(cr) => {
            let condition = Condition::of(&cr);
            if completed(condition.as_ref()) == Reading::Done {
                snapshot_url(&cr).to_string()
            } else {
                log::info(
                    "the HCPEtcdBackup did not succeed: no snapshot URL to record",
                    &[
                        ("hcpEtcdBackup", &format!("{namespace}/{name}")),
                        (
                            "condition",
                            &condition.map(|c| c.summary()).unwrap_or_default(),
                        ),
                    ],
                );
                String::new()
            }
        }
        Err(e) => {
            log::info(
                "no HCPEtcdBackup to read the snapshot URL from",
                &[("error", e.message())],
            );
            String::new()
        }
    };
    credentials::delete(job.ctx.cluster, job.ho_namespace, &job.secret_name());
    if url.is_empty() {
        Etcd::Nothing
    } else {
        Etcd::Url(url)
    }
}
