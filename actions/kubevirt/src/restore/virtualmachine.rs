//! `kubevirt-velero-plugin/restore-vm-action` (docs/kubevirt.md#s6-1): applies the Restore's labels (run strategy,
//! MAC addresses, firmware UUID) and names what must be restored before the VM.

use serde_json::Value;
use velero_wasm_sdk::{Object, RestoreResponse};

use crate::context::Context;
use crate::go_zero_values::{self, GoType};
use crate::graph;
use crate::keys;
use crate::restore::identity;
use crate::workload::vm_instance_spec;

/// KubeVirt's run strategies.
const RUN_STRATEGIES: [&str; 6] = [
    "Always",
    "Halted",
    "Manual",
    "RerunOnFailure",
    "Once",
    "WaitAsReceiver",
];

/// Runs the action on a VirtualMachine (Velero has removed its status). Never skips.
pub fn restore(ctx: &Context, item: &Object, restore: &Object) -> Result<RestoreResponse, String> {
    vm_instance_spec(item)?;
    let mut vm = item.clone();
    if let Some(strategy) = restore.label(keys::RESTORE_RUN_STRATEGY) {
        if ctx.extended() && !RUN_STRATEGIES.contains(&strategy) {
            return Err(format!(
                "Restore label {}={strategy:?} is not a KubeVirt run strategy, so VirtualMachine {}/{} would be \
                 rejected by KubeVirt; set the label to one of {}",
                keys::RESTORE_RUN_STRATEGY,
                vm.namespace(),
                vm.name(),
                RUN_STRATEGIES.join(", ")
            ));
        }
        vm.set("/spec/runStrategy", Value::String(strategy.to_string()))?;
        vm.remove("/spec/running");
    }
    identity::apply(&mut vm, restore, "/spec/template/spec/domain")?;
    let additional = graph::vm_restore(ctx, &vm)?;
    if !ctx.extended() {
        go_zero_values::write(&mut vm, GoType::VirtualMachine);
    }
    Ok(RestoreResponse::with_item(&vm).additional(additional))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use crate::resources::PERSISTENT_VOLUME_CLAIMS;
    use serde_json::json;
    use velero_wasm_sdk::FakeCluster;

    fn vm(spec: Value) -> Object {
        Object::from_value(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                                  "metadata": {"name": "vm1", "namespace": "vm-workloads"}, "spec": spec}))
        .unwrap()
    }

    fn restore_with(labels: Value) -> Object {
        Object::from_value(json!({"kind": "Restore", "metadata": {"name": "r", "labels": labels}}))
            .unwrap()
    }

    fn run(mode: Mode, vm: &Object, labels: Value) -> Result<(RestoreResponse, Object), String> {
        let c = FakeCluster::new();
        let out = restore(&Context::new(&c, mode), vm, &restore_with(labels))?;
        let item = Object::parse(out.item.as_deref().unwrap()).unwrap();
        Ok((out, item))
    }

    fn template() -> Value {
        json!({"spec": {"domain": {"devices": {}}}})
    }

    #[test]
    fn checklist_88_no_labels_no_change() {
        let v = vm(json!({"runStrategy": "Always", "template": template()}));
        for mode in [Mode::Upstream, Mode::Extended] {
            let (out, item) = run(mode, &v, json!({})).unwrap();
            // Upstream mode writes its Go type's zero values (tested below), nothing else.
            let mut expected = v.clone();
            if mode == Mode::Upstream {
                crate::go_zero_values::write(
                    &mut expected,
                    crate::go_zero_values::GoType::VirtualMachine,
                );
            }
            assert_eq!(item, expected, "{mode:?}");
            assert!(!out.skip_restore);
        }
    }

    /// Velero hands the restore a VM without `creationTimestamp` and `status`; upstream decodes it into
    /// KubeVirt's Go type and encodes it again (docs/kubevirt.md#s8-3).
    #[test]
    fn upstream_mode_writes_the_zero_values_of_upstreams_go_type_and_extended_mode_does_not() {
        let v = vm(json!({"runStrategy": "Always", "template": template(),
                          "dataVolumeTemplates": [{"metadata": {"name": "root"}, "spec": {}}]}));
        let (_, upstream) = run(Mode::Upstream, &v, json!({})).unwrap();
        let mut expected = v.clone();
        expected
            .set("/metadata/creationTimestamp", Value::Null)
            .unwrap();
        expected
            .set(
                "/spec/template/metadata",
                json!({"creationTimestamp": null}),
            )
            .unwrap();
        expected
            .pointer_mut("/spec/dataVolumeTemplates/0/metadata")
            .unwrap()["creationTimestamp"] = Value::Null;
        expected.set("/status", json!({})).unwrap();
        assert_eq!(upstream, expected);
        let (_, extended) = run(Mode::Extended, &v, json!({})).unwrap();
        assert_eq!(extended, v);
    }

    #[test]
    fn checklist_89_90_the_label_sets_the_run_strategy() {
        let (_, item) = run(
            Mode::Upstream,
            &vm(json!({"runStrategy": "Always", "template": template()})),
            json!({"velero.kubevirt.io/restore-run-strategy": "Halted"}),
        )
        .unwrap();
        assert_eq!(item.str_at("/spec/runStrategy"), Some("Halted"));
        let (_, item) = run(
            Mode::Upstream,
            &vm(json!({"runStrategy": "Halted", "template": template()})),
            json!({"velero.kubevirt.io/restore-run-strategy": "Always"}),
        )
        .unwrap();
        assert_eq!(item.str_at("/spec/runStrategy"), Some("Always"));
    }

    #[test]
    fn checklist_91_running_gives_way_to_the_run_strategy() {
        let (_, item) = run(
            Mode::Upstream,
            &vm(json!({"running": true, "runStrategy": "", "template": template()})),
            json!({"velero.kubevirt.io/restore-run-strategy": "Halted"}),
        )
        .unwrap();
        assert_eq!(item.str_at("/spec/runStrategy"), Some("Halted"));
        assert!(item.pointer("/spec/running").is_none());
    }

    #[test]
    fn an_invalid_run_strategy_is_copied_upstream_and_refused_extended() {
        let v = vm(json!({"runStrategy": "Always", "template": template()}));
        let labels = json!({"velero.kubevirt.io/restore-run-strategy": "halted"});
        let (_, item) = run(Mode::Upstream, &v, labels.clone()).unwrap();
        assert_eq!(item.str_at("/spec/runStrategy"), Some("halted"));
        let e = run(Mode::Extended, &v, labels).unwrap_err();
        assert!(
            e.contains("\"halted\"") && e.contains("Always, Halted"),
            "{e}"
        );
    }

    #[test]
    fn checklist_94_data_volumes_then_their_pvcs() {
        let v = vm(json!({"template": {"spec": {"volumes": [
            {"name": "a", "dataVolume": {"name": "test-dv-1"}}, {"name": "b", "dataVolume": {"name": "test-dv-2"}}]}}}));
        let (out, _) = run(Mode::Upstream, &v, json!({})).unwrap();
        let extras: Vec<String> = out
            .additional_items
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            extras,
            [
                "datavolumes.cdi.kubevirt.io vm-workloads/test-dv-1",
                "persistentvolumeclaims vm-workloads/test-dv-1",
                "datavolumes.cdi.kubevirt.io vm-workloads/test-dv-2",
                "persistentvolumeclaims vm-workloads/test-dv-2",
            ]
        );
    }

    #[test]
    fn checklist_95_revisions_first_never_a_vmi_or_pod() {
        let v = vm(
            json!({"instancetype": {"name": "i", "revisionName": "cr-i"},
                          "preference": {"name": "p", "revisionName": "cr-p"},
                          "template": {"spec": {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "x"}}]}}}),
        );
        let c = FakeCluster::new();
        let out = restore(
            &Context::new(&c, Mode::Upstream),
            &v,
            &restore_with(json!({})),
        )
        .unwrap();
        let extras: Vec<String> = out
            .additional_items
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            extras,
            [
                "controllerrevisions.apps vm-workloads/cr-i",
                "controllerrevisions.apps vm-workloads/cr-p",
                "persistentvolumeclaims vm-workloads/x"
            ]
        );
        assert!(c.calls().is_empty());
    }

    #[test]
    fn checklist_96_never_skipped_and_the_backend_lookup_is_the_only_call() {
        let v = vm(
            json!({"template": {"spec": {"domain": {"devices": {"tpm": {"persistent": true}}}}}}),
        );
        let c = FakeCluster::new();
        let out = restore(
            &Context::new(&c, Mode::Upstream),
            &v,
            &restore_with(json!({})),
        )
        .unwrap();
        assert!(!out.skip_restore);
        let calls = c.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (
                calls[0].verb,
                calls[0].resource.as_str(),
                calls[0].target.as_str()
            ),
            (
                "list",
                PERSISTENT_VOLUME_CLAIMS.resource,
                "persistent-state-for=vm1"
            )
        );
    }

    #[test]
    fn a_vm_without_template_is_a_clear_error() {
        let e = run(Mode::Upstream, &vm(json!({})), json!({})).unwrap_err();
        assert!(e.contains("spec.template"), "{e}");
    }
}
