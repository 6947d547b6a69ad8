//! The zero values kubevirt-velero-plugin writes into an item it returns after decoding it into a Go API
//! type and encoding it again (docs/kubevirt.md#s8-3), so that upstream mode stores what upstream stores.
//!
//! Upstream converts with apimachinery's unstructured converter (v0.33, as vendored), which follows
//! the `json` tags: an `omitempty` string, number, pointer, map or slice that is empty is left out
//! (so a `labels` map the action emptied disappears), a struct field is always written (a missing
//! status becomes `{}`), and `metav1.Time` writes its zero value as `null` (so an item without
//! `creationTimestamp` gets `creationTimestamp: null`, in every `ObjectMeta` the type holds).
//! Only these zero values are reproduced: the round trip's other effects (fields the vendored types
//! do not know are dropped, empty structs deeper in `spec` and `status` appear) are not.

use serde_json::{Map, Value};
use velero_wasm_sdk::Object;

/// The Go type upstream decodes an item into before returning it; each has its own struct layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoType {
    /// KubeVirt's `VirtualMachine`: a struct status, and an `ObjectMeta` in its template and in each
    /// DataVolume template.
    VirtualMachine,
    /// CDI's `DataVolume`: a struct status.
    DataVolume,
    /// Kubernetes' `PersistentVolumeClaim`: a struct status.
    PersistentVolumeClaim,
    /// external-snapshotter's `VolumeSnapshot`: the status is a pointer, left out when null.
    VolumeSnapshot,
    /// Multus' `NetworkAttachmentDefinition`: no status.
    NetworkAttachmentDefinition,
}

/// The Go type of an `omitempty` field, which decides what "empty" is.
#[derive(Clone, Copy)]
enum Omitted {
    /// A string: `""` (or null) is left out.
    Text,
    /// An integer: `0` (or null) is left out.
    Number,
    /// A pointer: only null is left out (a pointer to 0 is kept).
    Pointer,
    /// A map or slice: null, `{}` and `[]` are left out.
    Collection,
}

/// `ObjectMeta`'s `omitempty` fields; every field but `creationTimestamp` is one.
const OBJECT_META_OMITEMPTY: [(&str, Omitted); 14] = [
    ("name", Omitted::Text),
    ("generateName", Omitted::Text),
    ("namespace", Omitted::Text),
    ("selfLink", Omitted::Text),
    ("uid", Omitted::Text),
    ("resourceVersion", Omitted::Text),
    ("generation", Omitted::Number),
    ("deletionTimestamp", Omitted::Pointer),
    ("deletionGracePeriodSeconds", Omitted::Pointer),
    ("labels", Omitted::Collection),
    ("annotations", Omitted::Collection),
    ("ownerReferences", Omitted::Collection),
    ("finalizers", Omitted::Collection),
    ("managedFields", Omitted::Collection),
];

/// Writes into `item` the zero values upstream's encoding of `go_type` writes. Values that are not
/// of their field's JSON type are left alone (upstream fails to decode those items).
pub fn write(item: &mut Object, go_type: GoType) {
    let fields = &mut item.0;
    object_meta(fields);
    if go_type == GoType::VirtualMachine {
        if let Some(Value::Object(spec)) = fields.get_mut("spec") {
            if let Some(Value::Object(template)) = spec.get_mut("template") {
                object_meta(template);
            }
            if let Some(Value::Array(templates)) = spec.get_mut("dataVolumeTemplates") {
                for template in templates.iter_mut() {
                    if let Value::Object(template) = template {
                        object_meta(template);
                    }
                }
            }
        }
    }
    let status_null = fields.get("status").map(Value::is_null);
    match go_type {
        GoType::VirtualMachine | GoType::DataVolume | GoType::PersistentVolumeClaim => {
            if status_null != Some(false) {
                fields.insert("status".to_string(), Value::Object(Map::new()));
            }
        }
        GoType::VolumeSnapshot if status_null == Some(true) => {
            fields.remove("status");
        }
        GoType::VolumeSnapshot | GoType::NetworkAttachmentDefinition => {}
    }
}

/// The `metadata` of `object` (an `ObjectMeta`, a struct: written even when absent or null) as
/// `metav1.ObjectMeta` encodes it.
fn object_meta(object: &mut Map<String, Value>) {
    let fields = match object.get_mut("metadata") {
        Some(Value::Object(fields)) => fields,
        Some(Value::Null) | None => {
            object.insert("metadata".to_string(), Value::Object(Map::new()));
            match object.get_mut("metadata") {
                Some(Value::Object(fields)) => fields,
                _ => return,
            }
        }
        Some(_) => return,
    };
    for (key, omitted) in OBJECT_META_OMITEMPTY {
        let empty = match (fields.get(key), omitted) {
            (None, _) => false,
            (Some(Value::Null), _) => true,
            (Some(Value::String(text)), Omitted::Text) => text.is_empty(),
            (Some(Value::Number(n)), Omitted::Number) => n.as_f64() == Some(0.0),
            (Some(Value::Object(map)), Omitted::Collection) => map.is_empty(),
            (Some(Value::Array(items)), Omitted::Collection) => items.is_empty(),
            _ => false,
        };
        if empty {
            fields.remove(key);
        }
    }
    if !fields.contains_key("creationTimestamp") {
        fields.insert("creationTimestamp".to_string(), Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(item: Value, go_type: GoType) -> Value {
        let mut item = Object::from_value(item).unwrap();
        write(&mut item, go_type);
        item.into_value()
    }

    #[test]
    fn a_missing_creation_timestamp_is_written_null_and_a_set_one_is_kept() {
        let got = written(
            json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "p"}, "spec": {}}),
            GoType::PersistentVolumeClaim,
        );
        assert_eq!(
            got["metadata"],
            json!({"name": "p", "creationTimestamp": null})
        );
        let set = json!({"name": "p", "creationTimestamp": "2026-03-14T09:21:44Z"});
        let got = written(
            json!({"metadata": set.clone(), "status": {"phase": "Bound"}}),
            GoType::PersistentVolumeClaim,
        );
        assert_eq!(got["metadata"], set);
        assert_eq!(got["status"], json!({"phase": "Bound"}));
        let got = written(json!({"spec": {}}), GoType::NetworkAttachmentDefinition);
        assert_eq!(
            got,
            json!({"spec": {}, "metadata": {"creationTimestamp": null}})
        );
    }

    #[test]
    fn empty_omitempty_metadata_fields_are_left_out_and_others_kept() {
        let got = written(
            json!({"metadata": {
                "name": "v", "generateName": "", "namespace": null, "uid": "", "generation": 0,
                "deletionTimestamp": null, "deletionGracePeriodSeconds": 0,
                "labels": {}, "annotations": null, "ownerReferences": [], "finalizers": ["f"],
                "managedFields": [], "unknownToGo": {}
            }}),
            GoType::VolumeSnapshot,
        );
        assert_eq!(
            got["metadata"],
            json!({"name": "v", "deletionGracePeriodSeconds": 0, "finalizers": ["f"],
                   "unknownToGo": {}, "creationTimestamp": null})
        );
    }

    #[test]
    fn a_struct_status_is_written_empty_and_a_pointer_status_is_left_out_when_null() {
        for go_type in [
            GoType::VirtualMachine,
            GoType::DataVolume,
            GoType::PersistentVolumeClaim,
        ] {
            assert_eq!(
                written(json!({}), go_type)["status"],
                json!({}),
                "{go_type:?}"
            );
            assert_eq!(
                written(json!({"status": null}), go_type)["status"],
                json!({})
            );
        }
        assert_eq!(
            written(json!({"status": null}), GoType::VolumeSnapshot).get("status"),
            None
        );
        assert_eq!(
            written(json!({}), GoType::VolumeSnapshot).get("status"),
            None
        );
        assert_eq!(
            written(json!({}), GoType::NetworkAttachmentDefinition).get("status"),
            None
        );
    }

    #[test]
    fn a_vms_template_and_data_volume_templates_carry_their_own_object_meta() {
        let got = written(
            json!({"metadata": {"name": "vm"}, "spec": {
                "template": {"spec": {}},
                "dataVolumeTemplates": [{"metadata": {"name": "d", "labels": {}}, "spec": {}}, {"spec": {}}]
            }}),
            GoType::VirtualMachine,
        );
        assert_eq!(
            got["spec"]["template"]["metadata"],
            json!({"creationTimestamp": null})
        );
        assert_eq!(
            got["spec"]["dataVolumeTemplates"],
            json!([{"metadata": {"name": "d", "creationTimestamp": null}, "spec": {}},
                   {"spec": {}, "metadata": {"creationTimestamp": null}}])
        );
        // Other types have no templates: their spec is left as it is.
        let pvc = written(
            json!({"spec": {"template": {"spec": {}}}}),
            GoType::PersistentVolumeClaim,
        );
        assert_eq!(pvc["spec"], json!({"template": {"spec": {}}}));
    }

    #[test]
    fn values_of_the_wrong_json_type_are_left_alone() {
        let got = written(
            json!({"metadata": {"name": 5, "labels": "x", "generation": "0"}, "status": "odd"}),
            GoType::VirtualMachine,
        );
        assert_eq!(
            got,
            json!({"metadata": {"name": 5, "labels": "x", "generation": "0", "creationTimestamp": null},
                   "status": "odd"})
        );
        let got = written(json!({"metadata": "odd"}), GoType::VirtualMachine);
        assert_eq!(got["metadata"], "odd");
    }
}
