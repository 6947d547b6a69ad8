//! Reading VirtualMachines and VirtualMachineInstances: the VMI spec each carries, and the facts the
//! actions decide on (running, paused, owners).

use serde_json::Value;
use velero_wasm_sdk::Object;

use crate::fields;

static NO_SPEC: Value = Value::Null;

/// The VMI spec inside a VM (`spec.template.spec`). A VM without `spec.template` is not a valid
/// VirtualMachine; upstream dereferences nil there (docs/kubevirt.md#s8-4), this is a clear error instead.
pub fn vm_instance_spec(vm: &Object) -> Result<&Value, String> {
    match vm.pointer("/spec/template").filter(|t| !t.is_null()) {
        Some(template) => Ok(template.get("spec").unwrap_or(&NO_SPEC)),
        None => Err(format!(
            "VirtualMachine {}/{} has no spec.template: it is not a valid kubevirt.io/v1 VirtualMachine",
            vm.namespace(),
            vm.name()
        )),
    }
}

/// A VMI's `spec` (null when absent, which reads as an empty spec).
pub fn vmi_spec(vmi: &Object) -> &Value {
    vmi.pointer("/spec").unwrap_or(&NO_SPEC)
}

/// `volumes` of a VMI spec.
pub fn volumes(spec: &Value) -> &[Value] {
    fields::list(spec, "/volumes")
}

/// Whether a VM's `status.printableStatus` is one that upstream treats as running (`Starting`,
/// `Running`); extended mode adds `Migrating`, which is a running VM too (docs/kubevirt.md#s9-11).
pub fn vm_running(vm: &Object, extended: bool) -> bool {
    match vm.str_at("/status/printableStatus").unwrap_or("") {
        "Starting" | "Running" => true,
        "Migrating" => extended,
        _ => false,
    }
}

/// Whether a VMI has the condition `Paused` with status `"True"`.
pub fn vmi_paused(vmi: &Object) -> bool {
    vmi.array_at("/status/conditions")
        .iter()
        .any(|c| fields::text(c, "/type") == "Paused" && fields::text(c, "/status") == "True")
}

/// Whether a VMI's phase says it has no running guest: not yet scheduled, or finished.
pub fn vmi_phase_without_guest(vmi: &Object) -> bool {
    matches!(
        vmi.str_at("/status/phase"),
        Some("Pending" | "Succeeded" | "Failed")
    )
}

/// Whether any volume holds guest data that Velero snapshots (a DataVolume or a PVC), which is what
/// freezing the guest through the launcher pod protects.
pub fn has_claim_volumes(spec: &Value) -> bool {
    volumes(spec).iter().any(|v| {
        fields::set(v, "/dataVolume").is_some()
            || fields::set(v, "/persistentVolumeClaim").is_some()
    })
}

/// `metadata.ownerReferences`.
pub fn owners(object: &Object) -> &[Value] {
    object.array_at("/metadata/ownerReferences")
}

/// The first owner reference of this kind.
pub fn owner_of_kind<'a>(object: &'a Object, kind: &str) -> Option<&'a Value> {
    owners(object)
        .iter()
        .find(|o| fields::text(o, "/kind") == kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Object {
        Object::from_value(v).unwrap()
    }

    #[test]
    fn a_vm_without_template_is_a_clear_error() {
        let vm = obj(
            json!({"kind": "VirtualMachine", "metadata": {"name": "v", "namespace": "ns"}, "spec": {}}),
        );
        let e = vm_instance_spec(&vm).unwrap_err();
        assert!(e.contains("ns/v") && e.contains("spec.template"), "{e}");
        let vm = obj(json!({"spec": {"template": {"metadata": {}}}}));
        assert!(vm_instance_spec(&vm).unwrap().is_null());
    }

    #[test]
    fn checklist_58_64_running_statuses() {
        for (status, upstream, extended) in [
            ("Running", true, true),
            ("Starting", true, true),
            ("Migrating", false, true),
            ("Stopped", false, false),
            ("Provisioning", false, false),
            ("Paused", false, false),
            ("Stopping", false, false),
            ("Terminating", false, false),
            ("Unknown", false, false),
        ] {
            let vm = obj(json!({"status": {"printableStatus": status}}));
            assert_eq!(vm_running(&vm, false), upstream, "{status}");
            assert_eq!(vm_running(&vm, true), extended, "{status}");
        }
        assert!(!vm_running(&obj(json!({})), true));
    }

    #[test]
    fn paused_needs_the_condition_true() {
        assert!(vmi_paused(&obj(
            json!({"status": {"conditions": [{"type": "Paused", "status": "True"}]}})
        )));
        assert!(!vmi_paused(&obj(
            json!({"status": {"conditions": [{"type": "Paused", "status": "False"}]}})
        )));
        assert!(!vmi_paused(&obj(json!({"status": {"phase": "Paused"}}))));
    }
}
