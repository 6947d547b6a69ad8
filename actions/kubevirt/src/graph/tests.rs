//! Graph order and error handling (checklist items 14–15, 25, 37–39, 72) and extended mode's finishing.

use serde_json::json;
use velero_wasm_sdk::FakeCluster;

use super::*;
use crate::mode::Mode;
use crate::resources::{PERSISTENT_VOLUME_CLAIMS, PODS};
use crate::test_objects::*;

fn tpm() -> serde_json::Value {
    json!({"devices": {"tpm": {"persistent": true}}})
}

fn backend_pvc() -> Object {
    pvc(
        "persistent-state-for-vm1-abcde",
        json!({"persistent-state-for": "vm1"}),
    )
}

#[test]
fn checklist_14_38_backend_after_volumes_credentials_last() {
    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, backend_pvc());
    let item = vm(
        "vm1",
        json!({"domain": tpm(),
        "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "b", "configMap": {"name": "c"}}],
        "accessCredentials": [{"sshPublicKey": {"source": {"secret": {"secretName": "k"}}}},
                              {"userPassword": {"source": {"secret": {"secretName": "p"}}}}]}),
        json!({}),
    );
    let items = vm_backup(&Context::new(&c, Mode::Upstream), &item).unwrap();
    assert_eq!(
        names(&items),
        [
            "persistentvolumeclaims vm-workloads/x",
            "configmaps vm-workloads/c",
            "persistentvolumeclaims vm-workloads/persistent-state-for-vm1-abcde",
            "secrets vm-workloads/k",
            "secrets vm-workloads/p"
        ]
    );
}

#[test]
fn checklist_15_persistent_efi_alone_also_looks_up_the_backend() {
    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, backend_pvc());
    let item = vm(
        "vm1",
        json!({"domain": {"firmware": {"bootloader": {"efi": {"persistent": true}}}},
                                "volumes": [{"name": "a", "secret": {"secretName": "s"}}]}),
        json!({}),
    );
    let items = vm_backup(&Context::new(&c, Mode::Upstream), &item).unwrap();
    assert_eq!(
        names(&items),
        [
            "secrets vm-workloads/s",
            "persistentvolumeclaims vm-workloads/persistent-state-for-vm1-abcde"
        ]
    );
}

#[test]
fn checklist_16_no_persistence_no_lookup() {
    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, backend_pvc());
    let item = vm(
        "vm1",
        json!({"domain": {"devices": {"tpm": {}}}}),
        json!({}),
    );
    assert!(vm_backup(&Context::new(&c, Mode::Upstream), &item)
        .unwrap()
        .is_empty());
    assert!(calls(&c).is_empty());
}

#[test]
fn checklist_25_revisions_come_before_the_vmi() {
    let c = FakeCluster::new();
    let mut item = vm(
        "vm1",
        json!({}),
        json!({"created": true,
        "instancetypeRef": {"controllerRevisionRef": {"name": "cr-i"}}, "preferenceRef": {"controllerRevisionRef": {"name": "cr-p"}}}),
    );
    item.set("/spec/instancetype", json!({"name": "i"}))
        .unwrap();
    item.set("/spec/preference", json!({"name": "p"})).unwrap();
    let items = vm_backup(&Context::new(&c, Mode::Upstream), &item).unwrap();
    assert_eq!(
        names(&items),
        [
            "controllerrevisions.apps vm-workloads/cr-i",
            "controllerrevisions.apps vm-workloads/cr-p",
            "virtualmachineinstances.kubevirt.io vm-workloads/vm1"
        ]
    );
}

#[test]
fn checklist_37_upstream_keeps_duplicates_extended_drops_them() {
    let c = FakeCluster::new();
    let item = vm(
        "vm1",
        json!({"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "x"}},
                                            {"name": "b", "dataVolume": {"name": "x"}},
                                            {"name": "c", "configMap": {}}]}),
        json!({}),
    );
    let upstream = vm_backup(&Context::new(&c, Mode::Upstream), &item).unwrap();
    assert_eq!(
        names(&upstream),
        [
            "persistentvolumeclaims vm-workloads/x",
            "datavolumes.cdi.kubevirt.io vm-workloads/x",
            "persistentvolumeclaims vm-workloads/x",
            "configmaps vm-workloads/"
        ]
    );
    let extended = vm_backup(&Context::new(&c, Mode::Extended), &item).unwrap();
    assert_eq!(
        names(&extended),
        [
            "persistentvolumeclaims vm-workloads/x",
            "datavolumes.cdi.kubevirt.io vm-workloads/x"
        ]
    );
}

#[test]
fn checklist_39_vmi_graph_order_launcher_volumes_backend_credentials() {
    let c = FakeCluster::new()
        .with(PODS, launcher("virt-launcher-vm1-x", "vm1", json!({})))
        .with(PERSISTENT_VOLUME_CLAIMS, backend_pvc());
    let item = vmi(
        "vm1",
        json!({}),
        json!({"domain": tpm(),
        "volumes": [{"name": "a", "dataVolume": {"name": "d"}}],
        "accessCredentials": [{"sshPublicKey": {"source": {"secret": {"secretName": "k"}}}}]}),
        json!({}),
    );
    let items = vmi_backup(&Context::new(&c, Mode::Upstream), &item).unwrap();
    assert_eq!(
        names(&items),
        [
            "pods vm-workloads/virt-launcher-vm1-x",
            "datavolumes.cdi.kubevirt.io vm-workloads/d",
            "persistentvolumeclaims vm-workloads/d",
            "persistentvolumeclaims vm-workloads/persistent-state-for-vm1-abcde",
            "secrets vm-workloads/k"
        ]
    );
    assert_eq!(
        calls(&c),
        [
            "list pods vm-workloads kubevirt.io=virt-launcher",
            "list persistentvolumeclaims vm-workloads persistent-state-for=vm1"
        ]
    );
}

#[test]
fn checklist_72_a_vm_not_created_has_no_vmi_and_no_pod_lookup() {
    let c = FakeCluster::new().with(PODS, launcher("virt-launcher-vm1-x", "vm1", json!({})));
    let item = vm("vm1", json!({}), json!({"created": false}));
    assert!(vm_backup(&Context::new(&c, Mode::Upstream), &item)
        .unwrap()
        .is_empty());
    assert!(calls(&c).is_empty());
}

#[test]
fn a_launcher_list_error_fails_the_graph() {
    let c = FakeCluster::new().failing_list(PODS);
    let item = vm("vm1", json!({}), json!({"created": true}));
    let e = vm_backup(&Context::new(&c, Mode::Upstream), &item).unwrap_err();
    assert!(
        e.starts_with("failed to get launcher pod from VMI vm-workloads/vm1: "),
        "{e}"
    );
}

#[test]
fn two_graph_errors_are_aggregated() {
    let c = FakeCluster::new()
        .failing_list(PODS)
        .failing_list(PERSISTENT_VOLUME_CLAIMS);
    let item = vm("vm1", json!({"domain": tpm()}), json!({"created": true}));
    let e = vm_backup(&Context::new(&c, Mode::Extended), &item).unwrap_err();
    assert!(
        e.starts_with("[failed to get launcher pod from VMI vm-workloads/vm1: ")
            && e.contains(", failed to list the backend"),
        "{e}"
    );
}

#[test]
fn restore_graphs_keep_cross_namespace_followers_out() {
    let c = FakeCluster::new();
    let mut item = vm(
        "vm1",
        json!({"networks": [{"name": "a", "multus": {"networkName": "here"}},
                                                  {"name": "b", "multus": {"networkName": "elsewhere/there"}}]}),
        json!({}),
    );
    item.set("/spec/instancetype", json!({"name": "u1.small"}))
        .unwrap();
    item.set("/spec/dataVolumeTemplates", json!([{"metadata": {"name": "r"}, "spec": {"sourceRef": {"kind": "DataSource", "name": "f", "namespace": "images"}}}])).unwrap();
    let backup_items = vm_backup(&Context::new(&c, Mode::Extended), &item).unwrap();
    assert_eq!(
        names(&backup_items),
        [
            "virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.small",
            "datasources.cdi.kubevirt.io images/f",
            "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/here",
            "network-attachment-definitions.k8s.cni.cncf.io elsewhere/there"
        ]
    );
    let restore_items = vm_restore(&Context::new(&c, Mode::Extended), &item).unwrap();
    assert_eq!(
        names(&restore_items),
        [
            "virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.small",
            "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/here"
        ]
    );
    // Upstream (since #426) names both definitions in its restore graph, the other namespace's too.
    assert_eq!(
        names(&vm_restore(&Context::new(&c, Mode::Upstream), &item).unwrap()),
        [
            "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/here",
            "network-attachment-definitions.k8s.cni.cncf.io elsewhere/there"
        ]
    );
}

#[test]
fn checklist_114_upstream_appends_network_definitions_after_the_credentials() {
    let c = FakeCluster::new();
    let spec = json!({"networks": [{"name": "default", "pod": {}},
                                   {"name": "storage", "multus": {"networkName": "vlan200"}}],
                      "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "x"}},
                                  {"name": "cd", "containerDisk": {"image": "i", "imagePullSecret": "pull"}}],
                      "accessCredentials": [{"sshPublicKey": {"source": {"secret": {"secretName": "k"}}}}]});
    let nad = "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/vlan200";
    let item = vm("vm1", spec.clone(), json!({}));
    let standalone = vmi("vm1", json!({}), spec, json!({"phase": "Running"}));
    let c_pod =
        FakeCluster::new().with(PODS, launcher("virt-launcher-vm1-abcde", "vm1", json!({})));
    let upstream = Context::new(&c, Mode::Upstream);
    let want = [
        "persistentvolumeclaims vm-workloads/x",
        "secrets vm-workloads/k",
        nad,
    ];
    assert_eq!(names(&vm_backup(&upstream, &item).unwrap()), want);
    assert_eq!(names(&vm_restore(&upstream, &item).unwrap()), want);
    assert_eq!(names(&vmi_restore(&upstream, &standalone).unwrap()), want);
    assert_eq!(
        names(&vmi_backup(&Context::new(&c_pod, Mode::Upstream), &standalone).unwrap()),
        [
            "pods vm-workloads/virt-launcher-vm1-abcde",
            want[0],
            want[1],
            nad
        ]
    );
    // Extended mode keeps the definition where it had it before upstream followed it: among its
    // followers, after the pull Secret upstream does not follow.
    assert_eq!(
        names(&vm_backup(&Context::new(&c, Mode::Extended), &item).unwrap()),
        [want[0], want[1], "secrets vm-workloads/pull", nad]
    );
}
