//! Whether the disks of a VM or VMI will be in the backup, so that a restore brings it back whole
//! (docs/kubevirt.md#s4-3). Volumes are walked in order and the first that fails decides.

use serde_json::Value;

use crate::context::Context;
use crate::fields::{set, text};
use crate::messages::{self, Blocker};
use crate::resources::{DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS};
use crate::scope::{self, excluded_by_label, Scope};

/// `None` when a restore is possible, else the first volume that prevents it. `skip` exempts
/// volumes (the VM action exempts DataVolumes created from its own templates). API errors are action
/// errors.
///
/// The order of reads and scope checks differs between the two volume kinds, as upstream's does: a
/// DataVolume is read first and the scope checked after; a PVC's scope is checked first and the PVC
/// read only when PVCs are in the backup. Each scope check is followed by the name globs of the
/// resource policy (extended mode, Velero 1.18.3+; none in upstream mode).
pub fn restore_blocker(
    ctx: &Context,
    scope: &Scope,
    namespace: &str,
    volumes: &[Value],
    skip: &dyn Fn(&Value) -> bool,
) -> Result<Option<Blocker>, String> {
    for volume in volumes {
        let volume_name = text(volume, "/name").to_string();
        if set(volume, "/dataVolume").is_some() && !skip(volume) {
            let name = text(volume, "/dataVolume/name");
            match ctx.cluster.get(DATA_VOLUMES, namespace, name) {
                Err(e) if e.is_not_found() => {
                    if !scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
                        return Ok(Some(Blocker::PvcsNotInBackup {
                            volume: volume_name,
                            claim: name.into(),
                            via_datavolume: true,
                        }));
                    }
                    if scope.drops_name(&scope::PERSISTENT_VOLUME_CLAIMS, namespace, name) {
                        return Ok(Some(Blocker::PvcLeftOutByPolicy {
                            volume: volume_name,
                            claim: name.into(),
                            via_datavolume: true,
                            policy: scope.policy().into(),
                        }));
                    }
                    let pvc = ctx.cluster.get(PERSISTENT_VOLUME_CLAIMS, namespace, name).map_err(|e| {
                        messages::kube_error(ctx.mode, &e, || {
                            format!(
                                "volume {volume_name:?} uses DataVolume {namespace}/{name}, which exists neither as a \
                                 DataVolume nor as a PVC; recreate it or remove the volume before the backup"
                            )
                        })
                    })?;
                    if excluded_by_label(&pvc) {
                        return Ok(Some(Blocker::PvcExcludedByLabel {
                            volume: volume_name,
                            claim: name.into(),
                            via_datavolume: true,
                        }));
                    }
                }
                Err(e) => return Err(messages::datavolume_get_failed(namespace, name, &e)),
                Ok(dv) => {
                    if excluded_by_label(&dv) {
                        return Ok(Some(Blocker::DataVolumeExcludedByLabel {
                            volume: volume_name,
                            name: name.into(),
                        }));
                    }
                    if !scope.in_backup(&scope::DATA_VOLUMES) {
                        return Ok(Some(Blocker::DataVolumesNotInBackup {
                            volume: volume_name,
                            name: name.into(),
                        }));
                    }
                    if scope.drops_name(&scope::DATA_VOLUMES, namespace, name) {
                        return Ok(Some(Blocker::DataVolumeLeftOutByPolicy {
                            volume: volume_name,
                            name: name.into(),
                            policy: scope.policy().into(),
                        }));
                    }
                }
            }
        }
        if set(volume, "/persistentVolumeClaim").is_some() {
            let claim = text(volume, "/persistentVolumeClaim/claimName");
            if !scope.in_backup(&scope::PERSISTENT_VOLUME_CLAIMS) {
                return Ok(Some(Blocker::PvcsNotInBackup {
                    volume: volume_name,
                    claim: claim.into(),
                    via_datavolume: false,
                }));
            }
            if scope.drops_name(&scope::PERSISTENT_VOLUME_CLAIMS, namespace, claim) {
                return Ok(Some(Blocker::PvcLeftOutByPolicy {
                    volume: volume_name,
                    claim: claim.into(),
                    via_datavolume: false,
                    policy: scope.policy().into(),
                }));
            }
            let pvc = ctx.cluster.get(PERSISTENT_VOLUME_CLAIMS, namespace, claim).map_err(|e| {
                messages::kube_error(ctx.mode, &e, || {
                    format!("volume {volume_name:?} uses PVC {namespace}/{claim}, which cannot be read")
                })
            })?;
            if excluded_by_label(&pvc) {
                return Ok(Some(Blocker::PvcExcludedByLabel {
                    volume: volume_name,
                    claim: claim.into(),
                    via_datavolume: false,
                }));
            }
        }
    }
    Ok(None)
}
