//! Pods, PVCs and DataVolumes of a hosted control plane (docs/hcp.md#s4-2): etcd pods get the FS-backup label
//! or are left out; the etcd volumes are left out when the etcd snapshot replaces them; KubeVirt RHCOS
//! image volumes are always left out.

use velero_wasm_sdk::Object;

use super::Outcome;
use crate::config::Method;

/// Set on etcd pods when the backup uses volume snapshots by default.
pub const FS_BACKUP_LABEL: &str = "hypershift.openshift.io/fsbackup";
/// Marks KubeVirt RHCOS image volumes (any value).
pub const RHCOS_LABEL: &str = "hypershift.openshift.io/is-kubevirt-rhcos";
/// Velero (after 1.18) leaves out an item a BackupItemAction returns with this annotation.
pub const SKIP_ANNOTATION: &str = "velero.io/skip-from-backup";

/// A pod: one whose name contains `etcd-` is left out under `etcdSnapshot`; under `volumeSnapshot` it
/// is labelled for FS backup when the backup sets `defaultVolumesToFsBackup: false`.
pub fn pod(method: Method, backup: &Object, mut item: Object) -> Outcome {
    if !item.name().contains("etcd-") {
        return Outcome::PassThrough("not an etcd pod".into());
    }
    match method {
        Method::EtcdSnapshot => exclude(item, "etcd is backed up by an HCPEtcdBackup"),
        Method::VolumeSnapshot => {
            if backup.pointer("/spec/defaultVolumesToFsBackup")
                == Some(&serde_json::Value::Bool(false))
            {
                item.set_label(FS_BACKUP_LABEL, "true");
                Outcome::Changed(item)
            } else {
                Outcome::PassThrough("defaultVolumesToFsBackup is not false".into())
            }
        }
    }
}

/// A PVC or DataVolume: RHCOS image volumes are left out; so are `data-etcd-*` PVCs under
/// `etcdSnapshot`.
pub fn volume(method: Method, item: Object) -> Outcome {
    if item.has_label(RHCOS_LABEL) {
        return exclude(item, "a KubeVirt RHCOS image volume");
    }
    if item.kind() == "PersistentVolumeClaim"
        && item.name().starts_with("data-etcd-")
        && method == Method::EtcdSnapshot
    {
        return exclude(item, "etcd is backed up by an HCPEtcdBackup");
    }
    Outcome::PassThrough("a regular volume".into())
}

fn exclude(mut item: Object, why: &str) -> Outcome {
    item.set_annotation(SKIP_ANNOTATION, &format!("hypershift-oadp-plugin: {why}"));
    Outcome::Excluded(item)
}
