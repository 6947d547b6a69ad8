//! Builders for the unit tests: objects in namespace `vm-workloads`, Backups, and readable forms of
//! additional items and of the calls a `FakeCluster` answered.

use serde_json::{json, Value};
use velero_wasm_sdk::{FakeCluster, Object, ResourceId};

/// The namespace of every test object.
pub const NS: &str = "vm-workloads";

/// An object from JSON.
pub fn object(value: Value) -> Object {
    Object::from_value(value).expect("a test object is a JSON object")
}

/// A VirtualMachine `name` with this VMI template spec, printable status and extra status fields.
pub fn vm(name: &str, template_spec: Value, status: Value) -> Object {
    object(
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                  "metadata": {"name": name, "namespace": NS, "uid": "vm-uid"},
                  "spec": {"runStrategy": "Always", "template": {"spec": template_spec}},
                  "status": status}),
    )
}

/// A VirtualMachineInstance `name` with this metadata (merged over name and namespace), spec and status.
pub fn vmi(name: &str, metadata: Value, spec: Value, status: Value) -> Object {
    let mut meta = json!({"name": name, "namespace": NS});
    if let (Some(m), Value::Object(extra)) = (meta.as_object_mut(), metadata) {
        m.extend(extra);
    }
    object(
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                  "metadata": meta, "spec": spec, "status": status}),
    )
}

/// An owner reference of this kind and name.
pub fn owner(kind: &str, name: &str) -> Value {
    json!([{"apiVersion": "kubevirt.io/v1", "kind": kind, "name": name, "uid": "owner-uid", "controller": true}])
}

/// A Backup with this spec.
pub fn backup_spec(spec: Value) -> Object {
    object(json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                  "metadata": {"name": "b", "namespace": "velero"}, "spec": spec}))
}

/// A Backup labelled `velero.kubevirt.io/metadataBackup: "true"`.
pub fn metadata_backup(spec: Value) -> Object {
    let mut b = backup_spec(spec);
    b.set_label(crate::keys::METADATA_BACKUP, "true");
    b
}

/// Labels that exclude an object from backups, or not.
pub fn excluded(value: &str) -> Value {
    json!({"velero.io/exclude-from-backup": value})
}

/// A virt-launcher pod running VMI `domain`, labelled as virt-controller labels it.
pub fn launcher(name: &str, domain: &str, labels: Value) -> Object {
    let mut all = json!({"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": domain});
    if let (Some(m), Value::Object(extra)) = (all.as_object_mut(), labels) {
        m.extend(extra);
    }
    object(json!({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "namespace": NS, "labels": all,
                               "annotations": {"kubevirt.io/domain": domain}},
                  "status": {"phase": "Running"}}))
}

/// A PVC with these labels.
pub fn pvc(name: &str, labels: Value) -> Object {
    object(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                  "metadata": {"name": name, "namespace": NS, "uid": format!("{name}-uid"), "labels": labels}}))
}

/// A DataVolume with these labels, phase Succeeded.
pub fn datavolume(name: &str, labels: Value) -> Object {
    object(
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                  "metadata": {"name": name, "namespace": NS, "labels": labels},
                  "status": {"phase": "Succeeded"}}),
    )
}

/// Additional items as Velero prints them.
pub fn names(items: &[ResourceId]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

/// The calls a fake cluster answered: `get <resource> <ns>/<name>` or `list <resource> <ns> <selector>`.
pub fn calls(cluster: &FakeCluster) -> Vec<String> {
    cluster
        .calls()
        .iter()
        .map(|c| match c.verb {
            "list" => format!("list {} {} {}", c.resource, c.namespace, c.target)
                .trim_end()
                .to_string(),
            verb => format!("{verb} {} {}/{}", c.resource, c.namespace, c.target),
        })
        .collect()
}

/// A Backup with this spec that names the resource policy ConfigMap `velero/policy`.
pub fn backup_with_policy(spec: Value) -> Object {
    let mut b = backup_spec(spec);
    b.set(
        "/spec/resourcePolicy",
        json!({"kind": "configmap", "name": "policy"}),
    )
    .expect("a Backup has a spec");
    b
}

/// The ConfigMap `velero/policy` holding one resource policy document.
pub fn policy_configmap(yaml: &str) -> Object {
    object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "policy", "namespace": "velero"},
                  "data": {"policy.yaml": yaml}}))
}

/// A policy document whose `namespacedFilterPolicies` give namespace `vm-workloads` these resource
/// filters (a YAML flow sequence).
pub fn namespace_filter_policy(resource_filters: &str) -> String {
    format!(
        "version: v1\nnamespacedFilterPolicies:\n  - namespaces: [{NS}]\n    resourceFilters: {resource_filters}\n"
    )
}
