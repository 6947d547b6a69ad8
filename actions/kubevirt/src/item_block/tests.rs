//! The item-block actions: the backup graph as related items, and what they do when part of it
//! cannot be read (return the rest; the backup action reports the failure).

use serde_json::{json, Value};
use velero_wasm_sdk::FakeCluster;

use super::*;
use crate::graph;
use crate::mode::Mode;
use crate::resources::{PERSISTENT_VOLUME_CLAIMS, PODS};
use crate::test_objects::*;
use crate::{catalog, run_related_items};

const BOTH: [Mode; 2] = [Mode::Upstream, Mode::Extended];

/// A running VM with a DataVolume disk, a PVC disk, persistent TPM and a Multus network.
fn running_vm() -> Object {
    vm(
        "vm1",
        json!({"domain": {"devices": {"tpm": {"persistent": true}}},
               "networks": [{"name": "storage", "multus": {"networkName": "vlan200"}}],
               "volumes": [{"name": "root", "dataVolume": {"name": "vm1-root"}},
                           {"name": "data", "persistentVolumeClaim": {"claimName": "vm1-data"}}]}),
        json!({"created": true, "printableStatus": "Running"}),
    )
}

fn cluster() -> FakeCluster {
    FakeCluster::new()
        .with(PODS, launcher("virt-launcher-vm1-abcde", "vm1", json!({})))
        .with(
            PERSISTENT_VOLUME_CLAIMS,
            pvc(
                "persistent-state-for-vm1-x1",
                json!({"persistent-state-for": "vm1"}),
            ),
        )
}

/// The graph in both modes: upstream names the Multus network's definition after the backend PVC (no
/// credentials here), where extended mode has it among its followers.
const UPSTREAM_GRAPH: [&str; 7] = [
    "virtualmachineinstances.kubevirt.io vm-workloads/vm1",
    "pods vm-workloads/virt-launcher-vm1-abcde",
    "datavolumes.cdi.kubevirt.io vm-workloads/vm1-root",
    "persistentvolumeclaims vm-workloads/vm1-root",
    "persistentvolumeclaims vm-workloads/vm1-data",
    "persistentvolumeclaims vm-workloads/persistent-state-for-vm1-x1",
    "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/vlan200",
];

#[test]
fn a_vm_block_holds_the_backup_actions_items_in_their_order() {
    for mode in BOTH {
        let c = cluster();
        let ctx = Context::new(&c, mode);
        let related = vm_related(&ctx, &running_vm());
        assert_eq!(
            names(&related),
            names(&graph::vm_backup(&ctx, &running_vm()).unwrap()),
            "{mode:?}"
        );
        assert_eq!(names(&related), UPSTREAM_GRAPH, "{mode:?}");
    }
}

#[test]
fn a_failed_pod_list_leaves_the_pod_out_of_the_block_but_fails_the_backup_action() {
    for mode in BOTH {
        let c = cluster().failing_list(PODS);
        let ctx = Context::new(&c, mode);
        let related = names(&vm_related(&ctx, &running_vm()));
        assert!(
            !related.iter().any(|i| i.starts_with("pods ")),
            "{related:?}"
        );
        assert_eq!(
            related[..5],
            [
                UPSTREAM_GRAPH[0],
                UPSTREAM_GRAPH[2],
                UPSTREAM_GRAPH[3],
                UPSTREAM_GRAPH[4],
                UPSTREAM_GRAPH[5]
            ],
            "{mode:?}"
        );
        let e = graph::vm_backup(&ctx, &running_vm()).unwrap_err();
        assert!(
            e.starts_with("failed to get launcher pod from VMI vm-workloads/vm1"),
            "{e}"
        );
    }
}

#[test]
fn a_vm_whose_vmi_is_gone_and_pod_not_created_names_the_vmi_and_no_pod() {
    for mode in BOTH {
        let c = FakeCluster::new();
        let related = vm_related(&Context::new(&c, mode), &running_vm());
        assert_eq!(
            names(&related)[..4],
            [
                "virtualmachineinstances.kubevirt.io vm-workloads/vm1",
                "datavolumes.cdi.kubevirt.io vm-workloads/vm1-root",
                "persistentvolumeclaims vm-workloads/vm1-root",
                "persistentvolumeclaims vm-workloads/vm1-data",
            ],
            "{mode:?}"
        );
        // The VMI is named from the VM's status, never read: a LIST of pods (extended mode: of those
        // labelled with the VMI's name, then, with none of them, of every launcher pod), one of
        // backend PVCs.
        let mut expected = vec!["list pods vm-workloads kubevirt.io=virt-launcher"];
        if mode == Mode::Extended {
            expected.insert(
                0,
                "list pods vm-workloads kubevirt.io=virt-launcher,vm.kubevirt.io/name=vm1",
            );
        }
        expected.push("list persistentvolumeclaims vm-workloads persistent-state-for=vm1");
        assert_eq!(calls(&c), expected, "{mode:?}");
    }
}

#[test]
fn a_vm_without_template_still_groups_its_revisions_vmi_and_pod() {
    let item = object(
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": NS},
        "spec": {"instancetype": {"name": "u1.small"}},
        "status": {"created": true,
                   "instancetypeRef": {"name": "u1.small", "controllerRevisionRef": {"name": "vm1-u1.small-1"}}}}),
    );
    for mode in BOTH {
        let c = cluster();
        let ctx = Context::new(&c, mode);
        let mut want = vec![
            "controllerrevisions.apps vm-workloads/vm1-u1.small-1",
            "virtualmachineinstances.kubevirt.io vm-workloads/vm1",
            "pods vm-workloads/virt-launcher-vm1-abcde",
        ];
        if mode.extended() {
            want.push("virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.small");
        }
        assert_eq!(names(&vm_related(&ctx, &item)), want, "{mode:?}");
        let e = graph::vm_backup(&ctx, &item).unwrap_err();
        assert!(e.contains("has no spec.template"), "{e}");
    }
}

#[test]
fn extended_mode_leaves_out_a_backend_pvc_it_cannot_list() {
    let c = cluster().failing_list(PERSISTENT_VOLUME_CLAIMS);
    let ctx = Context::new(&c, Mode::Extended);
    let related = names(&vm_related(&ctx, &running_vm()));
    assert_eq!(related[..5], UPSTREAM_GRAPH[..5]);
    assert!(
        !related.iter().any(|i| i.contains("persistent-state-for")),
        "{related:?}"
    );
    assert!(graph::vm_backup(&ctx, &running_vm())
        .unwrap_err()
        .contains("backend-storage PVCs"));
    // Upstream swallows that failure in the backup action too, and names the pre-1.4 PVC.
    let ctx = Context::new(&c, Mode::Upstream);
    assert_eq!(
        names(&vm_related(&ctx, &running_vm()))[5],
        "persistentvolumeclaims vm-workloads/persistent-state-for-vm1"
    );
}

#[test]
fn a_vmi_block_holds_the_vmi_backup_actions_items() {
    let standalone = vmi(
        "vm1",
        json!({}),
        json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "vm1-data"}}]}),
        json!({"phase": "Running"}),
    );
    let c = cluster();
    let ctx = Context::new(&c, Mode::Extended);
    let related = vmi_related(&ctx, &standalone, Owners::Named);
    assert_eq!(
        names(&related),
        names(&graph::vmi_backup(&ctx, &standalone).unwrap())
    );
    assert_eq!(
        names(&related),
        [
            "pods vm-workloads/virt-launcher-vm1-abcde",
            "persistentvolumeclaims vm-workloads/vm1-data"
        ]
    );
    let c = FakeCluster::new().failing_list(PODS);
    assert_eq!(
        names(&vmi_related(
            &Context::new(&c, Mode::Extended),
            &standalone,
            Owners::Named
        )),
        ["persistentvolumeclaims vm-workloads/vm1-data"]
    );
}

/// The VM's running VMI as KubeVirt writes it: owned by the VM, with the VM's volumes and network.
fn owned_vmi() -> Object {
    let template = running_vm();
    vmi(
        "vm1",
        json!({"ownerReferences": owner("VirtualMachine", "vm1")}),
        template.pointer("/spec/template/spec").unwrap().clone(),
        json!({"phase": "Running"}),
    )
}

/// The launcher pod of [`owned_vmi`], as KubeVirt writes it: owned by the VMI.
fn owned_launcher() -> Object {
    owned_by(
        launcher("virt-launcher-vm1-abcde", "vm1", json!({})),
        owner("VirtualMachineInstance", "vm1"),
    )
}

/// `object` with these `metadata.ownerReferences`.
fn owned_by(mut object: Object, owners: Value) -> Object {
    object.0["metadata"]["ownerReferences"] = owners;
    object
}

#[test]
fn a_launcher_pod_s_block_starts_with_its_vmi_and_a_hotplug_pod_s_with_its_launcher() {
    assert_eq!(
        names(&pod_related(&owned_launcher(), Owners::Named)),
        ["virtualmachineinstances.kubevirt.io vm-workloads/vm1"]
    );
    let hotplug = object(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "hp-volume-x7k2p", "namespace": NS, "labels": {"kubevirt.io": "hotplug-disk"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "virt-launcher-vm1-abcde",
                                          "uid": "pod-uid", "controller": true}]}}));
    assert_eq!(
        names(&pod_related(&hotplug, Owners::Named)),
        ["pods vm-workloads/virt-launcher-vm1-abcde"]
    );
    // No owner, an owner of another kind or group, or one without a name: nothing related.
    for owners in [
        json!(null),
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c"}]),
        json!([{"apiVersion": "example.com/v1", "kind": "VirtualMachineInstance", "name": "vm1"}]),
        json!([{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance"}]),
    ] {
        let pod = owned_by(
            launcher("virt-launcher-vm1-abcde", "vm1", json!({})),
            owners.clone(),
        );
        assert!(pod_related(&pod, Owners::Named).is_empty(), "{owners}");
    }
}

#[test]
fn an_owned_vmi_s_block_ends_with_its_vm() {
    let c = cluster();
    let ctx = Context::new(&c, Mode::Extended);
    let related = names(&vmi_related(&ctx, &owned_vmi(), Owners::Named));
    let graph = names(&graph::vmi_backup(&ctx, &owned_vmi()).unwrap());
    assert_eq!(related[..graph.len()], graph[..]);
    assert_eq!(
        related[graph.len()..],
        ["virtualmachines.kubevirt.io vm-workloads/vm1"]
    );
}

#[test]
fn owners_are_named_only_for_a_backup_that_selects_by_no_label() {
    // Velero applies a Backup's label selectors only when it lists items, never to a related item:
    // an owner named here would be backed up although the selector left it out.
    for backup in [
        json!({"spec": {}}),
        json!({"spec": {"labelSelector": null, "orLabelSelectors": []}}),
        json!({"kind": "Backup", "spec": {"includedNamespaces": ["vm-workloads"]}}),
    ] {
        assert_eq!(Owners::of(&backup.to_string()), Owners::Named, "{backup}");
    }
    for backup in [
        json!({"spec": {"labelSelector": {"matchLabels": {"app": "web"}}}}),
        json!({"spec": {"labelSelector": {}}}),
        json!({"spec": {"orLabelSelectors": [{"matchLabels": {"tier": "db"}}]}}),
    ] {
        assert_eq!(Owners::of(&backup.to_string()), Owners::Left, "{backup}");
    }
    assert_eq!(Owners::of("null"), Owners::Left);
    assert_eq!(Owners::of("not json"), Owners::Left);

    let c = cluster();
    let ctx = Context::new(&c, Mode::Extended);
    let selecting =
        json!({"spec": {"labelSelector": {"matchLabels": {"kubevirt.io/domain": "vm1"}}}})
            .to_string();
    let pod = owned_launcher().to_json();
    assert!(
        run_related_items(&ctx, catalog::BLOCK_LAUNCHER_POD, &pod, &selecting)
            .unwrap()
            .is_empty()
    );
    let related = names(
        &run_related_items(&ctx, catalog::BLOCK_VMI, &owned_vmi().to_json(), &selecting).unwrap(),
    );
    assert_eq!(
        related,
        names(&graph::vmi_backup(&ctx, &owned_vmi()).unwrap()),
        "the VMI's graph, without its VM"
    );
    assert_eq!(
        names(&run_related_items(&ctx, catalog::BLOCK_LAUNCHER_POD, &pod, "{}").unwrap()),
        ["virtualmachineinstances.kubevirt.io vm-workloads/vm1"]
    );
}

#[test]
fn an_owner_is_matched_on_kind_and_group_together() {
    // A VirtualMachineInstance owner of another group listed first does not hide KubeVirt's.
    let pod = owned_by(
        launcher("virt-launcher-vm1-abcde", "vm1", json!({})),
        json!([{"apiVersion": "example.com/v1", "kind": "VirtualMachineInstance", "name": "other"},
               {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm1"}]),
    );
    assert_eq!(
        names(&pod_related(&pod, Owners::Named)),
        ["virtualmachineinstances.kubevirt.io vm-workloads/vm1"]
    );
}

/// What Velero does with the item-block actions: starting at the item it reaches first, it adds each
/// related item to the block and runs that item's block actions in turn, once per item.
fn velero_block(ctx: &Context, first: (&str, Object), objects: &[(&str, Object)]) -> Vec<String> {
    let mut block = vec![first.0.to_string()];
    let mut queue = vec![first.1];
    while let Some(item) = queue.pop() {
        let related = match item.str_at("/kind") {
            Some("Pod") => pod_related(&item, Owners::Named),
            Some("VirtualMachineInstance") => vmi_related(ctx, &item, Owners::Named),
            Some("VirtualMachine") => vm_related(ctx, &item),
            _ => Vec::new(),
        };
        for id in names(&related) {
            if block.contains(&id) {
                continue;
            }
            if let Some((_, object)) = objects.iter().find(|(name, _)| *name == id) {
                queue.push(object.clone());
            }
            block.push(id);
        }
    }
    block
}

#[test]
fn a_running_vm_s_block_started_at_its_launcher_pod_holds_every_additional_item_of_its_backup() {
    let c = cluster();
    let ctx = Context::new(&c, Mode::Extended);
    let pod = "pods vm-workloads/virt-launcher-vm1-abcde";
    let block = velero_block(
        &ctx,
        (pod, owned_launcher()),
        &[
            (
                "virtualmachineinstances.kubevirt.io vm-workloads/vm1",
                owned_vmi(),
            ),
            ("virtualmachines.kubevirt.io vm-workloads/vm1", running_vm()),
        ],
    );
    let vm_items = names(&graph::vm_backup(&ctx, &running_vm()).unwrap());
    let vmi_items = names(&graph::vmi_backup(&ctx, &owned_vmi()).unwrap());
    for item in vm_items.iter().chain(&vmi_items) {
        assert!(block.contains(item), "{item} is not in the block {block:?}");
    }
    assert!(block.contains(&"virtualmachines.kubevirt.io vm-workloads/vm1".to_string()));
}

#[test]
fn only_an_item_that_is_not_an_object_is_an_error() {
    let c = cluster();
    for mode in BOTH {
        let ctx = Context::new(&c, mode);
        assert_eq!(
            run_related_items(&ctx, catalog::BLOCK_VM, "null", "{}").unwrap_err(),
            "input object nil!"
        );
        let e = run_related_items(&ctx, catalog::BLOCK_VM, "[1]", "{}").unwrap_err();
        assert!(e.starts_with("the item is not a Kubernetes object"), "{e}");
        let vm =
            object(json!({"kind": "VirtualMachine", "metadata": {"name": "vm1", "namespace": NS}}));
        assert!(
            run_related_items(&ctx, catalog::BLOCK_VM, &vm.to_json(), "{}")
                .unwrap()
                .is_empty()
        );
    }
    let vmi = r#"{"kind": "VirtualMachineInstance", "metadata": {"name": "vm1", "namespace": "vm-workloads"}}"#;
    let e = run_related_items(
        &Context::new(&c, Mode::Upstream),
        catalog::BLOCK_VMI,
        vmi,
        "{}",
    )
    .unwrap_err();
    assert!(
        e.contains("no action kubevirt-velero-plugin/block-vmi-action"),
        "{e}"
    );
    assert!(run_related_items(
        &Context::new(&c, Mode::Extended),
        catalog::BLOCK_VMI,
        vmi,
        "{}"
    )
    .is_ok());
}
