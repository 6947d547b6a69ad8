//! `kubevirt-velero-plugin/restore-vmi-action` (docs/kubevirt.md#s6-2): skips VMIs their owner recreates, removes
//! the labels KubeVirt reserves, and names what must be restored before a standalone VMI.

use velero_wasm_sdk::{Object, RestoreResponse};

use crate::context::Context;
use crate::graph;
use crate::keys;
use crate::restore::identity;

/// Runs the action on a VirtualMachineInstance (Velero has removed its status and owners).
///
/// Upstream evaluates the MAC and UUID labels on a copy it then discards (docs/kubevirt.md#s8-2), so a standalone
/// VMI keeps its old identity; extended mode applies them to `spec.domain`.
pub fn restore(ctx: &Context, item: &Object, restore: &Object) -> Result<RestoreResponse, String> {
    if item.annotation(keys::IS_OWNED) == Some("true") {
        return Ok(RestoreResponse::skip());
    }
    let mut vmi = item.clone();
    for label in keys::RESTRICTED_VMI_LABELS {
        vmi.remove_label(label);
    }
    if ctx.extended() {
        identity::apply(&mut vmi, restore, "/spec/domain")?;
    }
    let additional = graph::vmi_restore(ctx, &vmi)?;
    Ok(RestoreResponse::with_item(&vmi).additional(additional))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use serde_json::{json, Value};
    use velero_wasm_sdk::FakeCluster;

    fn vmi(metadata: Value, spec: Value) -> Object {
        Object::from_value(
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                  "metadata": metadata, "spec": spec}),
        )
        .unwrap()
    }

    fn restore_with(labels: Value) -> Object {
        Object::from_value(json!({"kind": "Restore", "metadata": {"name": "r", "labels": labels}}))
            .unwrap()
    }

    fn run(mode: Mode, item: &Object, labels: Value) -> RestoreResponse {
        let c = FakeCluster::new();
        restore(&Context::new(&c, mode), item, &restore_with(labels)).unwrap()
    }

    #[test]
    fn checklist_97_98_owned_vmis_are_skipped_others_not() {
        let owned = vmi(
            json!({"name": "v", "namespace": "ns", "annotations": {"cdi.kubevirt.io/velero.isOwned": "true"}}),
            json!({}),
        );
        let out = run(Mode::Upstream, &owned, json!({}));
        assert!(out.skip_restore && out.item.is_none() && out.additional_items.is_empty());
        let not_owned = vmi(
            json!({"name": "v", "namespace": "ns", "annotations": {"cdi.kubevirt.io/velero.isOwned": "false"}}),
            json!({}),
        );
        assert!(!run(Mode::Upstream, &not_owned, json!({})).skip_restore);
        assert!(
            !run(
                Mode::Upstream,
                &vmi(json!({"name": "v", "namespace": "ns"}), json!({})),
                json!({})
            )
            .skip_restore
        );
    }

    #[test]
    fn checklist_99_restricted_labels_go_others_stay() {
        let v = vmi(
            json!({"name": "v", "namespace": "ns", "labels": {
            "kubevirt.io/created-by": "x", "kubevirt.io/migrationJobUID": "x", "kubevirt.io/nodeName": "x",
            "kubevirt.io/migrationTargetNodeName": "x", "kubevirt.io/schedulable": "x",
            "kubevirt.io/install-strategy": "x", "some.other/label": "test-value"}}),
            json!({}),
        );
        let out = run(Mode::Upstream, &v, json!({}));
        let item = Object::parse(out.item.as_deref().unwrap()).unwrap();
        assert_eq!(
            item.pointer("/metadata/labels"),
            Some(&json!({"some.other/label": "test-value"}))
        );
    }

    #[test]
    fn checklist_100_upstream_ignores_mac_and_uuid_labels_extended_applies_them() {
        let v = vmi(
            json!({"name": "v", "namespace": "ns"}),
            json!({"domain": {"devices": {"interfaces": [{"name": "default", "macAddress": "02:9a:3c:00:02:11"}]},
                                      "firmware": {"uuid": "0f4e8d2c-6b1a-5c9e-8d3f-2a7b6c5d4e19"}}}),
        );
        let labels = json!({"velero.kubevirt.io/clear-mac-address": "true", "velero.kubevirt.io/generate-new-firmware-uuid": "true"});
        let upstream = Object::parse(
            run(Mode::Upstream, &v, labels.clone())
                .item
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(upstream.pointer("/spec"), v.pointer("/spec"));
        let extended =
            Object::parse(run(Mode::Extended, &v, labels).item.as_deref().unwrap()).unwrap();
        assert!(extended
            .pointer("/spec/domain/devices/interfaces/0/macAddress")
            .is_none());
        let uuid = extended.str_at("/spec/domain/firmware/uuid").unwrap();
        assert!(uuid != "0f4e8d2c-6b1a-5c9e-8d3f-2a7b6c5d4e19" && uuid.len() == 36);
    }

    #[test]
    fn checklist_101_a_standalone_vmi_brings_its_pvc_and_credentials_not_its_pod() {
        let v = vmi(
            json!({"name": "v", "namespace": "ns"}),
            json!({
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "p"}}],
            "accessCredentials": [{"userPassword": {"source": {"secret": {"secretName": "s"}}}}]}),
        );
        let out = run(Mode::Upstream, &v, json!({}));
        let extras: Vec<String> = out
            .additional_items
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(extras, ["persistentvolumeclaims ns/p", "secrets ns/s"]);
    }
}
