//! `kubevirt-velero-plugin/backup-volumesnapshot-action` (docs/kubevirt.md#s5-3): labels a CSI VolumeSnapshot with
//! the UID of the PVC it was taken from, so a selective restore by `velero.kubevirt.io/pvc-uid` brings
//! back the snapshot with its PVC.

use std::collections::HashMap;

use velero_wasm_sdk::{BackupResponse, Object};

use crate::context::Context;
use crate::go_zero_values::{self, GoType};
use crate::keys;
use crate::messages;
use crate::resources::PERSISTENT_VOLUME_CLAIMS;
use crate::uid_label;

/// PVC name → UID, per namespace, filled by one LIST of every PVC in the namespace. Upstream keeps it
/// for the life of the plugin process (a whole backup) and never refreshes it (docs/kubevirt.md#s8-6); the host
/// instantiates the component per call, so here it lives for one call unless a caller keeps it.
#[derive(Debug, Default)]
pub struct PvcUids {
    namespaces: HashMap<String, HashMap<String, String>>,
}

impl PvcUids {
    /// An empty cache.
    pub fn new() -> PvcUids {
        PvcUids::default()
    }

    /// The UID of PVC `namespace/claim`, or `None` when the namespace has no such PVC. Extended mode
    /// lists the namespace again once before giving up, so a PVC created after the first LIST is found.
    fn uid(
        &mut self,
        ctx: &Context,
        namespace: &str,
        claim: &str,
    ) -> Result<Option<String>, String> {
        let cached = self.namespaces.contains_key(namespace);
        if !cached || ctx.extended() && !self.namespaces[namespace].contains_key(claim) {
            self.fill(ctx, namespace)?;
        }
        Ok(self.namespaces[namespace].get(claim).cloned())
    }

    fn fill(&mut self, ctx: &Context, namespace: &str) -> Result<(), String> {
        let pvcs = ctx.cluster.list(PERSISTENT_VOLUME_CLAIMS, namespace, "").map_err(|e| {
            messages::kube_error(ctx.mode, &e, || {
                format!("cannot list the PVCs of namespace {namespace} to label its VolumeSnapshots")
            })
        })?;
        let uids = pvcs
            .iter()
            .map(|p| (p.name().to_string(), p.uid().to_string()))
            .collect();
        self.namespaces.insert(namespace.to_string(), uids);
        Ok(())
    }
}

/// Runs the action on a VolumeSnapshot.
pub fn backup(ctx: &Context, cache: &mut PvcUids, item: &Object) -> Result<BackupResponse, String> {
    let Some(claim) = item.str_at("/spec/source/persistentVolumeClaimName") else {
        return Ok(BackupResponse::unchanged());
    };
    let uid = cache
        .uid(ctx, item.namespace(), claim)?
        .ok_or_else(|| messages::snapshot_source_missing(ctx.mode, item, claim))?;
    if uid.is_empty() {
        return Ok(BackupResponse::unchanged());
    }
    let mut snapshot = item.clone();
    uid_label::apply(&mut snapshot, &uid, keys::ORIGINAL_VOLUMESNAPSHOT_UID);
    if !ctx.extended() {
        // Upstream encodes its Go type again only on this path; the others return the item as read.
        go_zero_values::write(&mut snapshot, GoType::VolumeSnapshot);
    }
    Ok(BackupResponse::with_item(&snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use serde_json::{json, Value};
    use velero_wasm_sdk::{Cluster, FakeCluster};

    fn obj(v: Value) -> Object {
        Object::from_value(v).unwrap()
    }

    fn pvc(name: &str, uid: &str) -> Object {
        obj(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": name, "namespace": "vm-workloads", "uid": uid}}))
    }

    fn snapshot(name: &str, source: Value, labels: Value) -> Object {
        obj(
            json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                   "metadata": {"name": name, "namespace": "vm-workloads", "labels": labels},
                   "spec": {"source": source}}),
        )
    }

    fn run(cluster: &dyn Cluster, mode: Mode, vs: &Object) -> Result<Option<Object>, String> {
        let out = backup(&Context::new(cluster, mode), &mut PvcUids::new(), vs)?;
        assert!(out.additional_items.is_empty());
        Ok(out.item.map(|i| Object::parse(&i).unwrap()))
    }

    #[test]
    fn checklist_52_a_pre_provisioned_snapshot_is_left_alone() {
        let c = FakeCluster::new();
        let vs = snapshot(
            "s",
            json!({"volumeSnapshotContentName": "content"}),
            json!({}),
        );
        assert_eq!(run(&c, Mode::Upstream, &vs).unwrap(), None);
        assert!(c.calls().is_empty());
    }

    #[test]
    fn checklist_53_the_source_pvc_uid_becomes_a_label() {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", "u"));
        let vs = snapshot(
            "s",
            json!({"persistentVolumeClaimName": "p"}),
            json!({"velero.io/backup-name": "b"}),
        );
        let out = run(&c, Mode::Upstream, &vs).unwrap().unwrap();
        assert_eq!(
            out.pointer("/metadata/labels"),
            Some(&json!({"velero.io/backup-name": "b", "velero.kubevirt.io/pvc-uid": "u"}))
        );
        assert_eq!(
            (c.calls()[0].verb, c.calls()[0].target.as_str()),
            ("list", "")
        );
    }

    #[test]
    fn checklist_54_a_users_label_value_is_saved() {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", "u"));
        let vs = snapshot(
            "s",
            json!({"persistentVolumeClaimName": "p"}),
            json!({"velero.kubevirt.io/pvc-uid": "user"}),
        );
        let out = run(&c, Mode::Upstream, &vs).unwrap().unwrap();
        assert_eq!(out.label(keys::PVC_UID), Some("u"));
        assert_eq!(
            out.annotation(keys::ORIGINAL_VOLUMESNAPSHOT_UID),
            Some("user")
        );
    }

    #[test]
    fn checklist_55_a_missing_source_pvc_is_an_error() {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("other", "u"));
        let vs = snapshot("s", json!({"persistentVolumeClaimName": "p"}), json!({}));
        assert_eq!(
            run(&c, Mode::Upstream, &vs).unwrap_err(),
            "PVC p not found in namespace vm-workloads"
        );
        let e = run(&c, Mode::Extended, &vs).unwrap_err();
        assert!(
            e.starts_with(
                "PVC p not found in namespace vm-workloads: VolumeSnapshot vm-workloads/s"
            ),
            "{e}"
        );
    }

    #[test]
    fn checklist_56_one_list_per_namespace_for_many_snapshots() {
        let c = FakeCluster::new()
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("p", "u"))
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("q", "v"));
        let ctx = Context::new(&c, Mode::Upstream);
        let mut cache = PvcUids::new();
        for (name, claim) in [("s1", "p"), ("s2", "q")] {
            let vs = snapshot(name, json!({"persistentVolumeClaimName": claim}), json!({}));
            assert!(backup(&ctx, &mut cache, &vs).unwrap().item.is_some());
        }
        assert_eq!(c.calls().len(), 1);
    }

    /// Upstream encodes its Go type again only after labelling (docs/kubevirt.md#s8-3); the status is a
    /// pointer there, so no `status: {}`.
    #[test]
    fn upstream_mode_writes_the_zero_values_of_upstreams_go_type_when_it_labels() {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", "u"));
        let mut vs = snapshot("s", json!({"persistentVolumeClaimName": "p"}), json!({}));
        vs.set("/metadata/finalizers", json!([])).unwrap();
        let upstream = run(&c, Mode::Upstream, &vs).unwrap().unwrap();
        assert_eq!(
            upstream.pointer("/metadata"),
            Some(&json!({"name": "s", "namespace": "vm-workloads",
                         "labels": {"velero.kubevirt.io/pvc-uid": "u"}, "creationTimestamp": null}))
        );
        assert_eq!(upstream.pointer("/status"), None);
        let extended = run(&c, Mode::Extended, &vs).unwrap().unwrap();
        assert_eq!(
            extended.pointer("/metadata"),
            Some(&json!({"name": "s", "namespace": "vm-workloads",
                         "labels": {"velero.kubevirt.io/pvc-uid": "u"}, "finalizers": []}))
        );
        // A snapshot it does not label is returned as it came, in both modes.
        let unlabelled = snapshot("s", json!({"volumeSnapshotContentName": "c"}), json!({}));
        assert_eq!(run(&c, Mode::Upstream, &unlabelled).unwrap(), None);
    }

    #[test]
    fn checklist_57_an_empty_uid_changes_nothing() {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", ""));
        let vs = snapshot("s", json!({"persistentVolumeClaimName": "p"}), json!({}));
        assert_eq!(run(&c, Mode::Upstream, &vs).unwrap(), None);
    }

    #[test]
    fn extended_mode_lists_again_before_declaring_a_pvc_missing() {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", "u"));
        let mut cache = PvcUids::new();
        let first = snapshot("s1", json!({"persistentVolumeClaimName": "p"}), json!({}));
        let late = snapshot(
            "s2",
            json!({"persistentVolumeClaimName": "late"}),
            json!({}),
        );
        backup(&Context::new(&c, Mode::Extended), &mut cache, &first).unwrap();
        let c = c.with(PERSISTENT_VOLUME_CLAIMS, pvc("late", "w"));
        let upstream = backup(
            &Context::new(&c, Mode::Upstream),
            &mut PvcUids {
                namespaces: cache.namespaces.clone(),
            },
            &late,
        );
        assert!(upstream.is_err(), "upstream never refreshes");
        let out = backup(&Context::new(&c, Mode::Extended), &mut cache, &late).unwrap();
        assert_eq!(
            Object::parse(&out.item.unwrap())
                .unwrap()
                .label(keys::PVC_UID),
            Some("w")
        );
    }
}
