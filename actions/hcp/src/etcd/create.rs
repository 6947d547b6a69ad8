//! Ensure-created (docs/hcp.md#s4-4-1–#s4-4-4): the backup's HCPEtcdBackup exists and has started.
//!
//! The cluster is the memory: a GET of the derived name says whether an earlier item (or an earlier
//! plugin process) of the same backup created it; only when it is absent is the CR created, so that
//! happens once per backup. A create that loses a race (AlreadyExists) counts as created, as upstream
//! treats it.

use hypershift::apis::{CUSTOM_RESOURCE_DEFINITIONS, HCP_ETCD_BACKUPS, HCP_ETCD_BACKUP_CRD};
use hypershift::discovery;
use serde_json::json;
use velero_wasm_sdk::{log, KubeError, Object};

use super::storage::Storage;
use super::{credentials, poll, Job};
use crate::bsl;

/// What ensure-created found or did.
#[derive(Debug, Clone, PartialEq)]
pub enum Ensured {
    /// The CR already existed (as read now).
    Existing(Object),
    /// This call created it and it has started; the HostedCluster found for it, if any.
    Created {
        /// The HostedCluster of the HostedControlPlane (docs/hcp.md#s3-3).
        hosted_cluster: Option<Object>,
    },
}

/// Makes sure the backup's HCPEtcdBackup exists and has started. On an error after the credential
/// Secret was copied, the copy is deleted again. Errors are unwrapped (the caller says
/// `error creating HCPEtcdBackup: …`).
pub fn ensure(job: &Job) -> Result<Ensured, String> {
    let cluster = job.ctx.cluster;
    let (namespace, name) = (job.namespace(), job.cr_name());
    match cluster.get(HCP_ETCD_BACKUPS, namespace, &name) {
        Ok(existing) => return Ok(Ensured::Existing(existing)),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(format!("failed to get HCPEtcdBackup: {}", e.message())),
    }
    match cluster.get(CUSTOM_RESOURCE_DEFINITIONS, "", HCP_ETCD_BACKUP_CRD) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return Err(
            "etcdBackupMethod is \"etcdSnapshot\" but HCPEtcdBackup CRD not found in the cluster"
                .into(),
        ),
        Err(e) => {
            return Err(format!(
                "failed to check for HCPEtcdBackup CRD: {}",
                e.message()
            ))
        }
    }
    let (hosted_cluster, errors) = discovery::hosted_cluster(cluster, job.backup, namespace);
    for error in &errors {
        log::info("looking for the HostedCluster", &[("error", error)]);
    }
    let mut copied = String::new();
    let result = create(job, &name, hosted_cluster.as_ref(), &mut copied)
        .and_then(|()| poll::until_started(&job.ctx, namespace, &name).map(|_| ()));
    match result {
        Ok(()) => Ok(Ensured::Created { hosted_cluster }),
        Err(e) => {
            credentials::delete(cluster, job.ho_namespace, &copied);
            Err(e)
        }
    }
}

/// Reads the BSL, copies its credentials, and creates the CR. `copied` receives the copy's name as
/// soon as there is one.
fn create(
    job: &Job,
    name: &str,
    hosted_cluster: Option<&Object>,
    copied: &mut String,
) -> Result<(), String> {
    let cluster = job.ctx.cluster;
    let location = job.backup.str_at("/spec/storageLocation").unwrap_or("");
    let bsl_object = bsl::get(cluster, job.velero_namespace, location).map_err(|e| {
        format!(
            "failed to fetch BackupStorageLocation {location:?}: {}",
            e.message()
        )
    })?;
    let mut storage = Storage::from_bsl(&bsl_object, job.backup.name())
        .map_err(|e| format!("failed to map BSL to HCPEtcdBackup storage: {e}"))?;
    *copied = credentials::copy(
        cluster,
        &bsl_object,
        job.velero_namespace,
        job.ho_namespace,
        job.backup.name(),
    )?;
    storage.set_credentials(copied);
    storage.set_encryption(hosted_cluster);
    let cr = Object::from_value(json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HCPEtcdBackup",
        "metadata": {"name": name, "namespace": job.namespace()},
        "spec": {"storage": storage.to_value()},
    }))?;
    match cluster.create(HCP_ETCD_BACKUPS, job.namespace(), &cr) {
        Ok(_) => {
            log::info(
                "created the HCPEtcdBackup",
                &[("hcpEtcdBackup", &format!("{}/{name}", job.namespace()))],
            );
            Ok(())
        }
        Err(KubeError::Conflict(_)) => {
            log::info(
                "reusing the HCPEtcdBackup",
                &[("hcpEtcdBackup", &format!("{}/{name}", job.namespace()))],
            );
            Ok(())
        }
        Err(e) => Err(format!("failed to create HCPEtcdBackup: {}", e.message())),
    }
}
