//! Instancetype and preference ControllerRevisions (docs/kubevirt.md#s4-6): the point-in-time copies a VM runs
//! with, which a restore needs before the VM. The backup action also copies the revision names from
//! `status` into `spec`, because Velero removes `status` before restore actions run.

use serde_json::Value;
use velero_wasm_sdk::{Object, ResourceId};

use crate::fields::{set, text};
use crate::resources::{id, CONTROLLER_REVISIONS};

/// The two matchers of a VM: `spec.<matcher>` and its resolved `status.<matcher>Ref`.
const MATCHERS: [(&str, &str); 2] = [
    ("instancetype", "instancetypeRef"),
    ("preference", "preferenceRef"),
];

/// The ControllerRevisions of a VM: instancetype first, then preference, in the VM's namespace.
pub fn revision_items(vm: &Object) -> Vec<ResourceId> {
    MATCHERS
        .iter()
        .filter_map(|(matcher, reference)| revision_name(vm, matcher, reference))
        .map(|name| id(CONTROLLER_REVISIONS, vm.namespace(), &name))
        .collect()
}

fn revision_name(vm: &Object, matcher: &str, reference: &str) -> Option<String> {
    let present = |pointer: &str| vm.pointer(pointer).filter(|v| !v.is_null());
    present(&format!("/spec/{matcher}"))?;
    match present(&format!("/status/{reference}")) {
        Some(status_ref) => {
            set(status_ref, "/controllerRevisionRef").map(|r| text(r, "/name").to_string())
        }
        None => vm
            .str_at(&format!("/spec/{matcher}/revisionName"))
            .filter(|n| !n.is_empty())
            .map(str::to_string),
    }
}

/// Copies `status.<matcher>Ref.controllerRevisionRef.name` into `spec.<matcher>.revisionName` for each
/// matcher present in the spec (docs/kubevirt.md#s5-4 step 5); everything else, `status` included, stays.
pub fn copy_revision_names(vm: &mut Object) -> Result<(), String> {
    for (matcher, reference) in MATCHERS {
        if vm
            .pointer(&format!("/spec/{matcher}"))
            .is_none_or(Value::is_null)
        {
            continue;
        }
        let Some(name) = vm
            .pointer(&format!("/status/{reference}/controllerRevisionRef"))
            .filter(|r| !r.is_null())
            .map(|r| text(r, "/name").to_string())
        else {
            continue;
        };
        vm.set(
            &format!("/spec/{matcher}/revisionName"),
            Value::String(name),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm(spec: Value, status: Value) -> Object {
        Object::from_value(
            json!({"kind": "VirtualMachine", "metadata": {"name": "vm1", "namespace": "ns"},
                                  "spec": spec, "status": status}),
        )
        .unwrap()
    }

    fn items(vm: &Object) -> Vec<String> {
        revision_items(vm).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn checklist_20_status_reference_wins() {
        let v = vm(
            json!({"instancetype": {"name": "it"}}),
            json!({"instancetypeRef": {"name": "it", "controllerRevisionRef": {"name": "cr-a"}}}),
        );
        assert_eq!(items(&v), ["controllerrevisions.apps ns/cr-a"]);
    }

    #[test]
    fn checklist_21_spec_revision_name_without_status_reference() {
        let v = vm(
            json!({"instancetype": {"name": "it", "revisionName": "cr-spec"}}),
            json!({}),
        );
        assert_eq!(items(&v), ["controllerrevisions.apps ns/cr-spec"]);
    }

    #[test]
    fn checklist_22_status_revision_over_spec_revision() {
        let v = vm(
            json!({"instancetype": {"revisionName": "cr-spec"}}),
            json!({"instancetypeRef": {"controllerRevisionRef": {"name": "cr-status"}}}),
        );
        assert_eq!(items(&v), ["controllerrevisions.apps ns/cr-status"]);
    }

    #[test]
    fn checklist_23_status_reference_without_revision_names_nothing() {
        let v = vm(
            json!({"instancetype": {"revisionName": "cr-spec"}}),
            json!({"instancetypeRef": {"name": "it"}}),
        );
        assert!(items(&v).is_empty());
    }

    #[test]
    fn checklist_24_no_matcher_in_spec_names_nothing() {
        let v = vm(
            json!({}),
            json!({"instancetypeRef": {"controllerRevisionRef": {"name": "cr"}}}),
        );
        assert!(items(&v).is_empty());
    }

    #[test]
    fn checklist_25_instancetype_then_preference() {
        let v = vm(
            json!({"preference": {"name": "p"}, "instancetype": {"name": "i"}}),
            json!({"preferenceRef": {"controllerRevisionRef": {"name": "cr-p"}},
                          "instancetypeRef": {"controllerRevisionRef": {"name": "cr-i"}}}),
        );
        assert_eq!(
            items(&v),
            [
                "controllerrevisions.apps ns/cr-i",
                "controllerrevisions.apps ns/cr-p"
            ]
        );
    }

    #[test]
    fn checklist_26_cluster_instancetype_revision_lives_beside_the_vm() {
        let v = vm(
            json!({"instancetype": {"kind": "VirtualMachineClusterInstancetype", "name": "u1.medium"}}),
            json!({"instancetypeRef": {"controllerRevisionRef": {"name": "cr"}}}),
        );
        assert_eq!(items(&v), ["controllerrevisions.apps ns/cr"]);
    }

    #[test]
    fn checklist_73_74_revision_names_are_copied_into_spec() {
        let mut v = vm(
            json!({"instancetype": {"name": "i", "revisionName": "old"}, "preference": {"name": "p"}}),
            json!({"instancetypeRef": {"controllerRevisionRef": {"name": "cr-1"}},
                              "preferenceRef": {"controllerRevisionRef": {"name": "cr-2"}}}),
        );
        copy_revision_names(&mut v).unwrap();
        assert_eq!(v.str_at("/spec/instancetype/revisionName"), Some("cr-1"));
        assert_eq!(v.str_at("/spec/preference/revisionName"), Some("cr-2"));
        assert!(
            v.pointer("/status/instancetypeRef").is_some(),
            "status is kept"
        );

        let mut v = vm(json!({"instancetype": {"revisionName": "old"}}), json!({}));
        copy_revision_names(&mut v).unwrap();
        assert_eq!(v.str_at("/spec/instancetype/revisionName"), Some("old"));
        assert_eq!(items(&v), ["controllerrevisions.apps ns/old"]);
    }
}
