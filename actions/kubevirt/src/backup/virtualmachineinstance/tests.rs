//! The VMI backup action against checklist items 75–87 (docs/kubevirt.md#s10). Unless stated, a launcher pod
//! annotated with the VMI's name exists and the VMI is running, not paused.

use serde_json::{json, Value};
use velero_wasm_sdk::{Cluster, FakeCluster, Object};

use super::backup;
use crate::context::Context;
use crate::keys;
use crate::mode::Mode;
use crate::resources::{DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS, PODS, VIRTUAL_MACHINES};
use crate::test_objects::*;

const LAUNCHER_OUTSIDE: &str = "VM is running but launcher pod is not included in the backup";
const NO_LAUNCHER: &str = "pod for running VMI not found";
const NOT_RESTORABLE: &str =
    "VM has DataVolume or PVC volumes and DataVolumes/PVCs is not included in the backup";

fn owned(volumes: Value) -> Object {
    vmi(
        "vmi1",
        json!({"ownerReferences": owner("VirtualMachine", "vmi1")}),
        json!({"volumes": volumes}),
        json!({"phase": "Running"}),
    )
}

fn standalone(volumes: Value) -> Object {
    vmi(
        "vmi1",
        json!({}),
        json!({"volumes": volumes}),
        json!({"phase": "Running"}),
    )
}

fn the_vm(labels: Value) -> Object {
    object(
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                  "metadata": {"name": "vmi1", "namespace": NS, "labels": labels}}),
    )
}

fn with_launcher(cluster: FakeCluster) -> FakeCluster {
    cluster.with(PODS, launcher("virt-launcher-vmi1-x", "vmi1", json!({})))
}

fn claim_volume() -> Value {
    json!([{"name": "data", "persistentVolumeClaim": {"claimName": "p"}}])
}

/// The returned item (`None`: unchanged) and the additional items.
fn run(
    cluster: &dyn Cluster,
    mode: Mode,
    item: &Object,
    b: &Object,
) -> Result<(Option<Object>, Vec<String>), String> {
    let out = backup(&Context::new(cluster, mode), item, b)?;
    Ok((
        out.item.map(|i| Object::parse(&i).unwrap()),
        names(&out.additional_items),
    ))
}

#[test]
fn checklist_75_an_owned_vmi_whose_vm_is_out_of_scope_is_left_as_is() {
    let c = FakeCluster::new();
    let b = backup_spec(
        json!({"includedResources": ["virtualmachineinstances"], "excludedResources": ["virtualmachines"]}),
    );
    assert_eq!(
        run(&c, Mode::Upstream, &owned(json!([])), &b).unwrap(),
        (None, vec![])
    );
    assert!(calls(&c).is_empty());
}

#[test]
fn extended_marks_a_vmi_left_to_its_vm_so_the_restore_skips_it() {
    let c = FakeCluster::new();
    let b = backup_spec(
        json!({"includedResources": ["virtualmachineinstances"], "excludedResources": ["virtualmachines"]}),
    );
    let (item, extras) = run(&c, Mode::Extended, &owned(json!([])), &b).unwrap();
    let item = item.unwrap();
    assert_eq!(item.annotation(keys::IS_OWNED), Some("true"));
    assert_eq!(item.annotation(keys::SKIP_FROM_BACKUP), Some("true"));
    assert!(extras.is_empty() && calls(&c).is_empty());
}

#[test]
fn checklist_76_an_owned_vmi_whose_vm_is_labelled_excluded_is_left_as_is() {
    let c = with_launcher(FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(excluded("true"))));
    assert_eq!(
        run(
            &c,
            Mode::Upstream,
            &owned(json!([])),
            &backup_spec(json!({}))
        )
        .unwrap(),
        (None, vec![])
    );
    assert_eq!(
        calls(&c),
        ["get virtualmachines.kubevirt.io vm-workloads/vmi1"]
    );
    let (item, _) = run(
        &c,
        Mode::Extended,
        &owned(json!([])),
        &backup_spec(json!({})),
    )
    .unwrap();
    assert_eq!(item.unwrap().annotation(keys::IS_OWNED), Some("true"));
}

#[test]
fn checklist_77_a_replica_set_vmi_fails_upstream_and_is_recognised_extended() {
    let c = with_launcher(FakeCluster::new());
    let item = vmi(
        "vmi1",
        json!({"ownerReferences": owner("VirtualMachineInstanceReplicaSet", "web")}),
        json!({"volumes": [{"name": "c", "containerDisk": {"image": "i"}}]}),
        json!({"phase": "Running"}),
    );
    assert_eq!(
        run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap_err(),
        "virtualmachines.kubevirt.io \"vmi1\" not found"
    );
    let c = FakeCluster::new();
    let (out, extras) = run(&c, Mode::Extended, &item, &backup_spec(json!({}))).unwrap();
    assert_eq!(out.unwrap().annotation(keys::IS_OWNED), Some("true"));
    assert_eq!(
        extras,
        ["virtualmachineinstancereplicasets.kubevirt.io vm-workloads/web"]
    );
    // Extended mode lists the pods labelled with the VMI's name, then, finding none, every launcher.
    assert_eq!(
        calls(&c),
        [
            "list pods vm-workloads kubevirt.io=virt-launcher,vm.kubevirt.io/name=vmi1",
            "list pods vm-workloads kubevirt.io=virt-launcher"
        ],
        "no VM lookup, no launcher check without disks"
    );
}

#[test]
fn checklist_78_pvcs_in_without_pods_leave_the_launcher_outside() {
    let c = with_launcher(FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(json!({}))));
    let b = backup_spec(
        json!({"includedResources": ["virtualmachineinstances", "virtualmachines", "persistentvolumeclaims"]}),
    );
    assert_eq!(
        run(&c, Mode::Upstream, &owned(json!([])), &b).unwrap_err(),
        LAUNCHER_OUTSIDE
    );
    let e = run(&c, Mode::Extended, &owned(claim_volume()), &b).unwrap_err();
    assert!(
        e.starts_with(LAUNCHER_OUTSIDE) && e.contains("include pods"),
        "{e}"
    );
}

#[test]
fn checklist_79_without_pvcs_in_scope_the_launcher_is_still_looked_up() {
    let b =
        backup_spec(json!({"includedResources": ["virtualmachineinstances", "virtualmachines"]}));
    let c = with_launcher(FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(json!({}))));
    run(&c, Mode::Upstream, &owned(json!([])), &b).unwrap();
    let c = FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(json!({})));
    assert_eq!(
        run(&c, Mode::Upstream, &owned(json!([])), &b).unwrap_err(),
        NO_LAUNCHER
    );
}

#[test]
fn checklist_80_a_launcher_labelled_excluded_is_outside() {
    let c = FakeCluster::new()
        .with(VIRTUAL_MACHINES, the_vm(json!({})))
        .with(
            PODS,
            launcher("virt-launcher-vmi1-x", "vmi1", excluded("true")),
        );
    assert_eq!(
        run(
            &c,
            Mode::Upstream,
            &owned(json!([])),
            &backup_spec(json!({}))
        )
        .unwrap_err(),
        LAUNCHER_OUTSIDE
    );
    let e = run(
        &c,
        Mode::Extended,
        &owned(claim_volume()),
        &backup_spec(json!({})),
    )
    .unwrap_err();
    assert!(
        e.contains("virt-launcher pod vm-workloads/virt-launcher-vmi1-x"),
        "{e}"
    );
}

#[test]
fn checklist_81_no_launcher_pod_is_an_error() {
    let c = FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(json!({})));
    assert_eq!(
        run(
            &c,
            Mode::Upstream,
            &owned(json!([])),
            &backup_spec(json!({}))
        )
        .unwrap_err(),
        NO_LAUNCHER
    );
    let e = run(
        &c,
        Mode::Extended,
        &owned(claim_volume()),
        &backup_spec(json!({})),
    )
    .unwrap_err();
    assert!(
        e.starts_with(NO_LAUNCHER) && e.contains("kubevirt.io/domain=vmi1"),
        "{e}"
    );
}

#[test]
fn checklist_82_a_paused_vmi_skips_the_launcher_checks() {
    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", json!({})));
    let item = vmi(
        "vmi1",
        json!({}),
        json!({"volumes": claim_volume()}),
        json!({"phase": "Running", "conditions": [{"type": "Paused", "status": "True"}]}),
    );
    let b = backup_spec(json!({"excludedResources": ["pods"]}));
    run(&c, Mode::Upstream, &item, &b).unwrap();
    assert_eq!(
        calls(&c),
        [
            "get persistentvolumeclaims vm-workloads/p",
            "list pods vm-workloads kubevirt.io=virt-launcher"
        ],
        "only the restore-possible read and the graph's pod list"
    );
}

#[test]
fn extended_skips_the_launcher_check_for_vmis_without_a_guest() {
    for phase in ["Pending", "Succeeded", "Failed"] {
        let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", json!({})));
        let item = vmi(
            "vmi1",
            json!({}),
            json!({"volumes": claim_volume()}),
            json!({"phase": phase}),
        );
        assert_eq!(
            run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap_err(),
            NO_LAUNCHER,
            "{phase}"
        );
        run(&c, Mode::Extended, &item, &backup_spec(json!({}))).unwrap();
    }
}

#[test]
fn checklist_83_an_owned_vmi_is_annotated_and_not_checked_for_restore() {
    let c = with_launcher(FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(json!({}))));
    let item = owned(json!([{"name": "root", "dataVolume": {"name": "gone"}}]));
    let (out, _) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    let out = out.unwrap();
    assert_eq!(
        out.pointer("/metadata/annotations"),
        Some(&json!({"cdi.kubevirt.io/velero.isOwned": "true"}))
    );
    let mut unannotated = out.clone();
    unannotated.remove("/metadata/annotations");
    assert_eq!(unannotated, item);
    assert!(
        !calls(&c).iter().any(|c| c.contains("datavolumes")),
        "{:?}",
        calls(&c)
    );
}

#[test]
fn checklist_84_a_standalone_vmi_needs_its_data_volumes_in_scope() {
    let c = with_launcher(FakeCluster::new().with(DATA_VOLUMES, datavolume("d", json!({}))));
    let item = standalone(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
    let b = backup_spec(json!({"includedResources": ["virtualmachineinstances", "pods"]}));
    assert_eq!(
        run(&c, Mode::Upstream, &item, &b).unwrap_err(),
        NOT_RESTORABLE
    );
}

#[test]
fn checklist_85_excluded_data_volumes_unless_metadata_only() {
    let c = with_launcher(FakeCluster::new().with(DATA_VOLUMES, datavolume("d", json!({}))));
    let item = standalone(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
    let b = backup_spec(json!({"excludedResources": ["datavolumes"]}));
    assert_eq!(
        run(&c, Mode::Upstream, &item, &b).unwrap_err(),
        NOT_RESTORABLE
    );
    let c = with_launcher(FakeCluster::new().with(DATA_VOLUMES, datavolume("d", json!({}))));
    run(
        &c,
        Mode::Upstream,
        &item,
        &metadata_backup(json!({"excludedResources": ["datavolumes"]})),
    )
    .unwrap();
    assert!(
        !calls(&c).iter().any(|c| c.contains("datavolumes")),
        "{:?}",
        calls(&c)
    );
}

#[test]
fn checklist_86_pvcs_out_of_scope_block_without_a_read() {
    let c = with_launcher(FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", json!({}))));
    let item = standalone(claim_volume());
    for b in [
        backup_spec(json!({"excludedResources": ["persistentvolumeclaims"]})),
        backup_spec(json!({"includedResources": ["virtualmachineinstances", "pods"]})),
    ] {
        assert_eq!(
            run(&c, Mode::Upstream, &item, &b).unwrap_err(),
            NOT_RESTORABLE
        );
    }
    assert!(
        !calls(&c)
            .iter()
            .any(|c| c.starts_with("get persistentvolumeclaims")),
        "{:?}",
        calls(&c)
    );
    let e = run(
        &c,
        Mode::Extended,
        &item,
        &backup_spec(json!({"excludedResources": ["persistentvolumeclaims"]})),
    )
    .unwrap_err();
    assert!(
        e.starts_with(NOT_RESTORABLE) && e.contains("include persistentvolumeclaims"),
        "{e}"
    );
}

#[test]
fn checklist_87_the_graph_names_launcher_pvcs_and_data_volumes() {
    let c = with_launcher(FakeCluster::new());
    let (_, extras) = run(
        &c,
        Mode::Upstream,
        &standalone(json!([])),
        &backup_spec(json!({})),
    )
    .unwrap();
    assert!(
        extras.contains(&"pods vm-workloads/virt-launcher-vmi1-x".to_string()),
        "{extras:?}"
    );

    let c = with_launcher(FakeCluster::new().with(VIRTUAL_MACHINES, the_vm(json!({}))));
    let item = owned(
        json!([{"name": "a", "persistentVolumeClaim": {"claimName": "test-pvc"}},
                            {"name": "b", "dataVolume": {"name": "test-dv"}}]),
    );
    let (_, extras) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    assert!(
        extras.contains(&"persistentvolumeclaims vm-workloads/test-pvc".to_string()),
        "{extras:?}"
    );
    assert!(
        extras.contains(&"datavolumes.cdi.kubevirt.io vm-workloads/test-dv".to_string()),
        "{extras:?}"
    );
}

/// Extended mode applies the Backup's `namespacedFilterPolicies` (Velero 1.18.3+, docs/kubevirt.md#s4-1)
/// to the VMI's VM and launcher pod; upstream mode never reads the policy.
mod namespace_filters {
    use super::*;
    use crate::resources::CONFIG_MAPS;

    fn policy(filters: &str) -> FakeCluster {
        FakeCluster::new().with(
            CONFIG_MAPS,
            policy_configmap(&namespace_filter_policy(filters)),
        )
    }

    fn left_to_its_vm(c: &FakeCluster) {
        let (item, extras) = run(
            c,
            Mode::Extended,
            &owned(claim_volume()),
            &backup_with_policy(json!({})),
        )
        .unwrap();
        let item = item.expect("extended mode returns the VMI marked");
        assert_eq!(item.annotation(keys::IS_OWNED), Some("true"));
        assert_eq!(item.annotation(keys::SKIP_FROM_BACKUP), Some("true"));
        assert!(extras.is_empty());
        assert_eq!(calls(c), ["get configmaps velero/policy"], "no VM read");
    }

    #[test]
    fn a_vm_the_policy_drops_by_name_leaves_the_vmi_to_it() {
        left_to_its_vm(&with_launcher(
            policy("[{kinds: [vms], excludedNames: [\"vmi?\"]}, {kinds: [\"*\"]}]")
                .with(VIRTUAL_MACHINES, the_vm(json!({}))),
        ));
    }

    #[test]
    fn a_vm_kind_the_policy_never_collects_leaves_the_vmi_to_it() {
        left_to_its_vm(&with_launcher(
            policy("[{kinds: [vmi, pods, pvc]}]").with(VIRTUAL_MACHINES, the_vm(json!({}))),
        ));
        // With a catch-all, VMs are collected and the VMI is backed up as owned.
        let c = with_launcher(
            policy("[{kinds: [vmi]}, {kinds: []}]").with(VIRTUAL_MACHINES, the_vm(json!({}))),
        );
        let (item, _) = run(
            &c,
            Mode::Extended,
            &owned(claim_volume()),
            &backup_with_policy(json!({})),
        )
        .unwrap();
        let item = item.unwrap();
        assert_eq!(item.annotation(keys::IS_OWNED), Some("true"));
        assert_eq!(item.annotation(keys::SKIP_FROM_BACKUP), None);
    }

    #[test]
    fn a_launcher_pod_the_policy_drops_by_name_is_outside() {
        let c = with_launcher(
            policy("[{kinds: [pods], names: [\"web-*\"]}, {kinds: []}]")
                .with(VIRTUAL_MACHINES, the_vm(json!({}))),
        );
        let e = run(
            &c,
            Mode::Extended,
            &owned(claim_volume()),
            &backup_with_policy(json!({})),
        )
        .unwrap_err();
        assert!(
            e.starts_with(LAUNCHER_OUTSIDE)
                && e.contains("virt-launcher pod vm-workloads/virt-launcher-vmi1-x")
                && e.contains(
                    "pods in namespace vm-workloads of resource policy ConfigMap velero/policy"
                ),
            "{e}"
        );
        // Upstream mode reads no policy: the same VMI is backed up.
        let c = with_launcher(
            policy("[{kinds: [pods], names: [\"web-*\"]}]")
                .with(VIRTUAL_MACHINES, the_vm(json!({}))),
        );
        run(
            &c,
            Mode::Upstream,
            &owned(json!([])),
            &backup_with_policy(json!({})),
        )
        .unwrap();
    }
}
