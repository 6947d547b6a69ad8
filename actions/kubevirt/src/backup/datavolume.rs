//! `kubevirt-velero-plugin/backup-datavolume-action` (docs/kubevirt.md#s5-1), on PVCs and DataVolumes: records
//! whether CDI finished populating a disk, so that a restore neither imports a finished disk again nor
//! restores a half-imported one.

use velero_wasm_sdk::{BackupResponse, Object};

use crate::context::Context;
use crate::fields::text;
use crate::go_zero_values::{self, GoType};
use crate::graph;
use crate::keys;
use crate::messages;
use crate::resources::DATA_VOLUMES;
use crate::workload::owner_of_kind;

/// Runs the action on a PVC or a DataVolume; other kinds pass unchanged.
pub fn backup(ctx: &Context, item: &Object) -> Result<BackupResponse, String> {
    match item.kind() {
        "PersistentVolumeClaim" => pvc(ctx, item),
        "DataVolume" => Ok(datavolume(ctx, item)),
        _ => Ok(BackupResponse::unchanged()),
    }
}

/// A PVC owned by a DataVolume is annotated `populatedFor` when the DataVolume succeeded, else
/// `inprogress` (the restore then skips it and CDI imports again).
fn pvc(ctx: &Context, item: &Object) -> Result<BackupResponse, String> {
    let Some(owner) = owner_of_kind(item, "DataVolume") else {
        return Ok(BackupResponse::unchanged());
    };
    let (ns, name) = (item.namespace(), text(owner, "/name"));
    let dv = ctx.cluster.get(DATA_VOLUMES, ns, name).map_err(|e| {
        if e.is_not_found() {
            messages::kube_error(ctx.mode, &e, || {
                format!(
                    "PVC {ns}/{} is owned by DataVolume {ns}/{name}, which no longer exists; run the backup again once \
                     CDI has settled the PVC's ownership",
                    item.name()
                )
            })
        } else {
            messages::datavolume_get_failed(ns, name, &e)
        }
    })?;
    let mut out = item.clone();
    if dv.str_at("/status/phase") == Some("Succeeded") {
        out.set_annotation(keys::POPULATED_FOR, dv.name());
    } else {
        out.set_annotation(keys::IN_PROGRESS, dv.name());
    }
    Ok(BackupResponse::with_item(&out))
}

/// A DataVolume whose import succeeded is annotated `prePopulated` and brings its PVC along. Upstream
/// returns every DataVolume as its Go type encodes it, which upstream mode reproduces.
fn datavolume(ctx: &Context, item: &Object) -> BackupResponse {
    let additional = graph::datavolume_backup(ctx.mode, item);
    let succeeded = item.str_at("/status/phase") == Some("Succeeded");
    let mut out = item.clone();
    if succeeded {
        out.set_annotation(keys::PRE_POPULATED, item.name());
    }
    if !ctx.extended() {
        go_zero_values::write(&mut out, GoType::DataVolume);
        return BackupResponse::with_item(&out).additional(additional);
    }
    if succeeded {
        BackupResponse::with_item(&out).additional(additional)
    } else {
        BackupResponse::unchanged().additional(additional)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use serde_json::{json, Value};
    use velero_wasm_sdk::FakeCluster;

    fn obj(v: Value) -> Object {
        Object::from_value(v).unwrap()
    }

    fn dv(phase: Option<&str>) -> Object {
        let mut v = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                           "metadata": {"name": "d", "namespace": "vm-workloads"}});
        if let Some(p) = phase {
            v["status"] = json!({"phase": p});
        }
        obj(v)
    }

    fn owned_pvc(owner_kind: &str) -> Object {
        obj(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "d", "namespace": "vm-workloads", "annotations": {"keep": "me"},
                                "ownerReferences": [{"apiVersion": "x/v1", "kind": owner_kind, "name": "d"}]}}))
    }

    fn item(out: &BackupResponse) -> Object {
        Object::parse(out.item.as_deref().expect("an item")).unwrap()
    }

    #[test]
    fn checklist_40_a_succeeded_dv_is_pre_populated_and_brings_its_pvc() {
        let c = FakeCluster::new();
        let out = backup(&Context::new(&c, Mode::Upstream), &dv(Some("Succeeded"))).unwrap();
        assert_eq!(item(&out).annotation(keys::PRE_POPULATED), Some("d"));
        let extras: Vec<String> = out
            .additional_items
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(extras, ["persistentvolumeclaims vm-workloads/d"]);
        assert!(c.calls().is_empty());
    }

    #[test]
    fn checklist_41_an_unfinished_dv_is_left_alone() {
        let c = FakeCluster::new();
        for phase in [Some("ImportScheduled"), None] {
            let out = backup(&Context::new(&c, Mode::Extended), &dv(phase)).unwrap();
            assert!(out.item.is_none() && out.additional_items.is_empty());
            // Upstream mode writes only its Go type's zero values (tested below), no annotation.
            let out = backup(&Context::new(&c, Mode::Upstream), &dv(phase)).unwrap();
            let mut expected = dv(phase);
            crate::go_zero_values::write(&mut expected, crate::go_zero_values::GoType::DataVolume);
            assert_eq!(item(&out), expected);
            assert!(out.additional_items.is_empty());
        }
    }

    /// Upstream returns every DataVolume encoded from CDI's Go type (docs/kubevirt.md#s8-3).
    #[test]
    fn upstream_mode_writes_the_zero_values_of_upstreams_go_type_and_extended_mode_does_not() {
        let c = FakeCluster::new();
        let mut d = dv(None);
        d.set("/metadata/annotations", json!({})).unwrap();
        let out = backup(&Context::new(&c, Mode::Upstream), &d).unwrap();
        assert_eq!(
            item(&out).into_value(),
            json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                   "metadata": {"name": "d", "namespace": "vm-workloads", "creationTimestamp": null},
                   "status": {}})
        );
        let out = backup(&Context::new(&c, Mode::Extended), &d).unwrap();
        assert_eq!(out.item, None);
        // A DataVolume read from the cluster has both: upstream mode returns it as it came.
        let mut read = dv(Some("ImportInProgress"));
        read.set("/metadata/creationTimestamp", json!("2026-03-14T09:21:44Z"))
            .unwrap();
        let out = backup(&Context::new(&c, Mode::Upstream), &read).unwrap();
        assert_eq!(item(&out), read);
    }

    #[test]
    fn checklist_42_a_pvc_of_a_succeeded_dv_is_populated_for_it() {
        let c = FakeCluster::new().with(DATA_VOLUMES, dv(Some("Succeeded")));
        let out = backup(&Context::new(&c, Mode::Upstream), &owned_pvc("DataVolume")).unwrap();
        let pvc = item(&out);
        assert_eq!(pvc.annotation(keys::POPULATED_FOR), Some("d"));
        assert_eq!(pvc.annotation(keys::IN_PROGRESS), None);
        assert_eq!(pvc.annotation("keep"), Some("me"));
        assert!(out.additional_items.is_empty());
        let calls = c.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (
                calls[0].verb,
                calls[0].resource.as_str(),
                calls[0].target.as_str()
            ),
            ("get", "datavolumes.cdi.kubevirt.io", "d")
        );
    }

    #[test]
    fn checklist_43_a_pvc_of_an_importing_dv_is_in_progress() {
        let c = FakeCluster::new().with(DATA_VOLUMES, dv(Some("ImportInProgress")));
        let pvc =
            item(&backup(&Context::new(&c, Mode::Upstream), &owned_pvc("DataVolume")).unwrap());
        assert_eq!(pvc.annotation(keys::IN_PROGRESS), Some("d"));
        assert_eq!(pvc.annotation(keys::POPULATED_FOR), None);
    }

    #[test]
    fn checklist_44_pvcs_not_owned_by_a_dv_make_no_call() {
        let c = FakeCluster::new();
        let ctx = Context::new(&c, Mode::Upstream);
        assert!(backup(&ctx, &owned_pvc("AnotherObject"))
            .unwrap()
            .item
            .is_none());
        let plain = obj(
            json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "p", "namespace": "ns"}}),
        );
        assert!(backup(&ctx, &plain).unwrap().item.is_none());
        assert!(c.calls().is_empty());
    }

    #[test]
    fn checklist_45_a_missing_dv_is_an_error() {
        let c = FakeCluster::new();
        let e = backup(&Context::new(&c, Mode::Upstream), &owned_pvc("DataVolume")).unwrap_err();
        assert_eq!(e, "datavolumes.cdi.kubevirt.io \"d\" not found");
        let e = backup(&Context::new(&c, Mode::Extended), &owned_pvc("DataVolume")).unwrap_err();
        assert!(
            e.starts_with(
                "datavolumes.cdi.kubevirt.io \"d\" not found: PVC vm-workloads/d is owned by"
            ),
            "{e}"
        );
    }

    #[test]
    fn extended_mode_follows_what_an_import_reads_from() {
        let c = FakeCluster::new();
        let mut d = dv(Some("ImportInProgress"));
        d.set(
            "/spec",
            json!({"source": {"http": {"url": "u", "secretRef": "creds", "certConfigMap": "ca"}}}),
        )
        .unwrap();
        let out = backup(&Context::new(&c, Mode::Extended), &d).unwrap();
        let extras: Vec<String> = out
            .additional_items
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            extras,
            ["secrets vm-workloads/creds", "configmaps vm-workloads/ca"]
        );
        assert!(backup(&Context::new(&c, Mode::Upstream), &d)
            .unwrap()
            .additional_items
            .is_empty());
    }

    #[test]
    fn other_kinds_pass_unchanged() {
        let c = FakeCluster::new();
        let pod = obj(json!({"kind": "Pod", "metadata": {"name": "p"}}));
        let out = backup(&Context::new(&c, Mode::Extended), &pod).unwrap();
        assert!(out.item.is_none() && out.additional_items.is_empty());
    }
}
