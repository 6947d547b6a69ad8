//! What upstream does not follow (docs/kubevirt.md#s9), returned in extended mode after upstream's items. Each
//! follower is read from the object itself: no Kubernetes call, so the grant stays at upstream's reads.
//! Velero backs up whichever of these exist and its filters keep.

use serde_json::Value;
use velero_wasm_sdk::{Object, ResourceId};

use crate::fields::{list, set, text};
use crate::graph::networks;
use crate::keys;
use crate::resources::{
    id, CLUSTER_INSTANCETYPES, CLUSTER_PREFERENCES, CONFIG_MAPS, DATA_SOURCES, INSTANCETYPES,
    PERSISTENT_VOLUME_CLAIMS, PREFERENCES, SECRETS, VIRTUAL_MACHINE_INSTANCE_PRESETS,
    VIRTUAL_MACHINE_INSTANCE_REPLICA_SETS, VIRTUAL_MACHINE_POOLS, VOLUME_SNAPSHOTS,
};
use crate::workload::{owner_of_kind, volumes};

/// A VM's followers, in this order: its VirtualMachinePool, its instancetype and preference objects,
/// the sources of its DataVolume templates, what its VMI spec refers to (see [`spec_followers`]) and
/// a pending memory dump's PVC.
pub fn vm_followers(vm: &Object, spec: &Value) -> Vec<ResourceId> {
    let ns = vm.namespace();
    let mut items = Vec::new();
    if let Some(pool) = owner_of_kind(vm, "VirtualMachinePool") {
        items.push(id(VIRTUAL_MACHINE_POOLS, ns, text(pool, "/name")));
    }
    items.extend(matcher_object(vm, "instancetype", "instancetypeRef"));
    items.extend(matcher_object(vm, "preference", "preferenceRef"));
    for template in vm.array_at("/spec/dataVolumeTemplates") {
        let template_spec = template.get("spec").unwrap_or(&Value::Null);
        items.extend(datavolume_source_items(ns, template_spec));
    }
    items.extend(spec_followers(ns, spec));
    if let Some(claim) = vm.str_at("/status/memoryDumpRequest/claimName") {
        items.push(id(PERSISTENT_VOLUME_CLAIMS, ns, claim));
    }
    items
}

/// A VMI's followers: the VirtualMachineInstanceReplicaSet that owns it, the presets KubeVirt applied
/// to it (recorded as `virtualmachinepreset.kubevirt.io/<name>` annotations), and what its spec refers
/// to (see [`spec_followers`]).
pub fn vmi_followers(vmi: &Object, spec: &Value) -> Vec<ResourceId> {
    let ns = vmi.namespace();
    let mut items = Vec::new();
    if let Some(set) = owner_of_kind(vmi, "VirtualMachineInstanceReplicaSet") {
        items.push(id(
            VIRTUAL_MACHINE_INSTANCE_REPLICA_SETS,
            ns,
            text(set, "/name"),
        ));
    }
    if let Some(Value::Object(annotations)) = vmi.pointer("/metadata/annotations") {
        for key in annotations.keys() {
            if let Some(preset) = key.strip_prefix(keys::APPLIED_PRESET_PREFIX) {
                items.push(id(VIRTUAL_MACHINE_INSTANCE_PRESETS, ns, preset));
            }
        }
    }
    items.extend(spec_followers(ns, spec));
    items
}

/// What a VMI spec refers to beyond upstream's volume mapping, in volume order: ephemeral volumes'
/// PVCs, sysprep ConfigMaps and Secrets, containerDisk pull Secrets; then the kernel-boot container's
/// pull Secret; then each Multus network's NetworkAttachmentDefinition ([`networks`]; upstream
/// follows those too since #426, but after the credentials, so extended mode keeps its own place).
pub fn spec_followers(namespace: &str, spec: &Value) -> Vec<ResourceId> {
    let mut items = Vec::new();
    for volume in volumes(spec) {
        if set(volume, "/ephemeral/persistentVolumeClaim").is_some() {
            items.push(id(
                PERSISTENT_VOLUME_CLAIMS,
                namespace,
                text(volume, "/ephemeral/persistentVolumeClaim/claimName"),
            ));
        }
        if set(volume, "/sysprep/configMap").is_some() {
            items.push(id(
                CONFIG_MAPS,
                namespace,
                text(volume, "/sysprep/configMap/name"),
            ));
        }
        if set(volume, "/sysprep/secret").is_some() {
            items.push(id(SECRETS, namespace, text(volume, "/sysprep/secret/name")));
        }
        if set(volume, "/containerDisk/imagePullSecret").is_some() {
            items.push(id(
                SECRETS,
                namespace,
                text(volume, "/containerDisk/imagePullSecret"),
            ));
        }
    }
    if set(
        spec,
        "/domain/firmware/kernelBoot/container/imagePullSecret",
    )
    .is_some()
    {
        items.push(id(
            SECRETS,
            namespace,
            text(
                spec,
                "/domain/firmware/kernelBoot/container/imagePullSecret",
            ),
        ));
    }
    items.extend(networks::network_items(namespace, spec));
    items
}

/// What a DataVolume spec (or a VM's DataVolume template) imports from: its DataSource (`sourceRef`),
/// the Secrets and ConfigMaps of its import source, the PVC it clones, the VolumeSnapshot it restores.
/// CDI needs them again when it re-runs an import after a restore.
pub fn datavolume_source_items(namespace: &str, dv_spec: &Value) -> Vec<ResourceId> {
    let mut items = Vec::new();
    if let Some(source_ref) = set(dv_spec, "/sourceRef") {
        let kind = text(source_ref, "/kind");
        if kind.is_empty() || kind == "DataSource" {
            items.push(id(
                DATA_SOURCES,
                or(text(source_ref, "/namespace"), namespace),
                text(source_ref, "/name"),
            ));
        }
    }
    let Some(source) = set(dv_spec, "/source") else {
        return items;
    };
    for kind in ["http", "s3", "gcs", "registry", "imageio", "vddk"] {
        let Some(import) = set(source, &format!("/{kind}")) else {
            continue;
        };
        if let Some(secret) = set(import, "/secretRef").and_then(Value::as_str) {
            items.push(id(SECRETS, namespace, secret));
        }
        for header_secret in list(import, "/secretExtraHeaders") {
            items.extend(header_secret.as_str().map(|s| id(SECRETS, namespace, s)));
        }
        if let Some(config_map) = set(import, "/certConfigMap").and_then(Value::as_str) {
            items.push(id(CONFIG_MAPS, namespace, config_map));
        }
        if let Some(config_map) = set(import, "/extraArgs").and_then(Value::as_str) {
            items.push(id(CONFIG_MAPS, namespace, config_map));
        }
    }
    if let Some(pvc) = set(source, "/pvc") {
        items.push(id(
            PERSISTENT_VOLUME_CLAIMS,
            or(text(pvc, "/namespace"), namespace),
            text(pvc, "/name"),
        ));
    }
    if let Some(snapshot) = set(source, "/snapshot") {
        items.push(id(
            VOLUME_SNAPSHOTS,
            or(text(snapshot, "/namespace"), namespace),
            text(snapshot, "/name"),
        ));
    }
    items
}

fn or<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() {
        default
    } else {
        value
    }
}

/// The instancetype or preference object a VM's matcher names. The kind defaults to the cluster-wide
/// one, as in KubeVirt; a name inferred from a volume is read from the status reference.
fn matcher_object(vm: &Object, matcher: &str, reference: &str) -> Option<ResourceId> {
    let spec = vm
        .pointer(&format!("/spec/{matcher}"))
        .filter(|v| !v.is_null())?;
    let status = vm
        .pointer(&format!("/status/{reference}"))
        .unwrap_or(&Value::Null);
    let name = or(text(spec, "/name"), text(status, "/name"));
    let kind = or(text(spec, "/kind"), text(status, "/kind")).to_lowercase();
    let ns = vm.namespace();
    let api = match (matcher, kind.as_str()) {
        ("instancetype", "virtualmachineinstancetype") => INSTANCETYPES,
        ("instancetype", "" | "virtualmachineclusterinstancetype") => CLUSTER_INSTANCETYPES,
        ("preference", "virtualmachinepreference") => PREFERENCES,
        ("preference", "" | "virtualmachineclusterpreference") => CLUSTER_PREFERENCES,
        _ => return None,
    };
    let namespace = if api == INSTANCETYPES || api == PREFERENCES {
        ns
    } else {
        ""
    };
    Some(id(api, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(items: &[ResourceId]) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
    }

    fn vm(v: Value) -> Object {
        Object::from_value(v).unwrap()
    }

    #[test]
    fn instancetype_and_preference_objects_namespaced_and_cluster_wide() {
        let v = vm(json!({"metadata": {"name": "v", "namespace": "ns"},
            "spec": {"instancetype": {"kind": "VirtualMachineInstancetype", "name": "it"},
                     "preference": {"name": "pref"}, "template": {"spec": {}}}}));
        assert_eq!(
            names(&vm_followers(&v, &json!({}))),
            [
                "virtualmachineinstancetypes.instancetype.kubevirt.io ns/it",
                "virtualmachineclusterpreferences.instancetype.kubevirt.io /pref"
            ]
        );
        let v = vm(json!({"metadata": {"name": "v", "namespace": "ns"},
            "spec": {"instancetype": {"inferFromVolume": "root"}, "preference": {"kind": "virtualmachinepreference", "name": "p"}},
            "status": {"instancetypeRef": {"kind": "VirtualMachineClusterInstancetype", "name": "u1.small"}}}));
        assert_eq!(
            names(&vm_followers(&v, &json!({}))),
            [
                "virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.small",
                "virtualmachinepreferences.instancetype.kubevirt.io ns/p"
            ]
        );
    }

    #[test]
    fn pools_and_memory_dumps_of_a_vm() {
        let v = vm(json!({"metadata": {"name": "v", "namespace": "ns",
                                       "ownerReferences": [{"kind": "VirtualMachinePool", "name": "pool"}]},
                          "status": {"memoryDumpRequest": {"claimName": "dump"}}}));
        assert_eq!(
            names(&vm_followers(&v, &json!({}))),
            [
                "virtualmachinepools.pool.kubevirt.io ns/pool",
                "persistentvolumeclaims ns/dump"
            ]
        );
    }

    #[test]
    fn data_volume_sources() {
        let spec = json!({"sourceRef": {"kind": "DataSource", "name": "fedora", "namespace": "os-images"}});
        assert_eq!(
            names(&datavolume_source_items("ns", &spec)),
            ["datasources.cdi.kubevirt.io os-images/fedora"]
        );
        let spec = json!({"sourceRef": {"kind": "DataSource", "name": "local"}});
        assert_eq!(
            names(&datavolume_source_items("ns", &spec)),
            ["datasources.cdi.kubevirt.io ns/local"]
        );
        let spec = json!({"source": {"http": {"url": "u", "secretRef": "creds", "certConfigMap": "ca",
                                              "secretExtraHeaders": ["hdr"]}}});
        assert_eq!(
            names(&datavolume_source_items("ns", &spec)),
            ["secrets ns/creds", "secrets ns/hdr", "configmaps ns/ca"]
        );
        let spec = json!({"source": {"registry": {"url": "docker://r/i", "secretRef": "pull"}}});
        assert_eq!(
            names(&datavolume_source_items("ns", &spec)),
            ["secrets ns/pull"]
        );
        let spec = json!({"source": {"pvc": {"namespace": "golden", "name": "img"}}});
        assert_eq!(
            names(&datavolume_source_items("ns", &spec)),
            ["persistentvolumeclaims golden/img"]
        );
        let spec = json!({"source": {"snapshot": {"name": "snap"}}});
        assert_eq!(
            names(&datavolume_source_items("ns", &spec)),
            ["volumesnapshots.snapshot.storage.k8s.io ns/snap"]
        );
        assert!(datavolume_source_items("ns", &json!({"source": {"blank": {}}})).is_empty());
    }

    #[test]
    fn volumes_networks_and_kernel_boot_that_upstream_misses() {
        let spec = json!({
            "domain": {"firmware": {"kernelBoot": {"container": {"image": "k", "imagePullSecret": "kernel-pull"}}}},
            "volumes": [
                {"name": "a", "containerDisk": {"image": "i", "imagePullSecret": "pull"}},
                {"name": "b", "sysprep": {"configMap": {"name": "unattend"}}},
                {"name": "c", "sysprep": {"secret": {"name": "unattend-secret"}}},
                {"name": "d", "ephemeral": {"persistentVolumeClaim": {"claimName": "golden"}}},
                {"name": "e", "containerDisk": {"image": "public"}}
            ],
            "networks": [{"name": "default", "pod": {}},
                         {"name": "x", "multus": {"networkName": "vlan"}},
                         {"name": "y", "multus": {"networkName": "other/backend"}}]
        });
        assert_eq!(
            names(&spec_followers("ns", &spec)),
            [
                "secrets ns/pull",
                "configmaps ns/unattend",
                "secrets ns/unattend-secret",
                "persistentvolumeclaims ns/golden",
                "secrets ns/kernel-pull",
                "network-attachment-definitions.k8s.cni.cncf.io ns/vlan",
                "network-attachment-definitions.k8s.cni.cncf.io other/backend"
            ]
        );
    }

    #[test]
    fn replica_sets_and_presets_of_a_vmi() {
        let v = vm(json!({"metadata": {"name": "r-1", "namespace": "ns",
            "ownerReferences": [{"kind": "VirtualMachineInstanceReplicaSet", "name": "r"}],
            "annotations": {"virtualmachinepreset.kubevirt.io/small": "kubevirt.io/v1", "other": "x"}}}));
        assert_eq!(
            names(&vmi_followers(&v, &json!({}))),
            [
                "virtualmachineinstancereplicasets.kubevirt.io ns/r",
                "virtualmachineinstancepresets.kubevirt.io ns/small"
            ]
        );
    }
}
