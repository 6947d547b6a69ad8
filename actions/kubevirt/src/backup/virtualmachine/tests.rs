//! The VM backup action against checklist items 58–74 (docs/kubevirt.md#s10), in upstream mode unless a test says
//! otherwise; "API" assertions list every call the action made.

use serde_json::{json, Value};
use velero_wasm_sdk::{Cluster, FakeCluster, Object};

use super::backup;
use crate::context::Context;
use crate::mode::Mode;
use crate::resources::{DATA_VOLUMES, PERSISTENT_VOLUME_CLAIMS, PODS, VIRTUAL_MACHINE_INSTANCES};
use crate::test_objects::*;

const UNSAFE: &str = "VM cannot be safely backed up";
const NOT_RESTORABLE: &str = "VM would not be restored correctly";

fn running(status: &str) -> Object {
    vm("vm1", json!({}), json!({"printableStatus": status}))
}

fn stopped_with(volumes: Value) -> Object {
    vm(
        "vm1",
        json!({"volumes": volumes}),
        json!({"printableStatus": "Stopped"}),
    )
}

fn the_vmi(labels: Value) -> Object {
    vmi(
        "vm1",
        json!({"labels": labels}),
        json!({}),
        json!({"phase": "Running"}),
    )
}

fn run(
    cluster: &dyn Cluster,
    mode: Mode,
    item: &Object,
    b: &Object,
) -> Result<(Object, Vec<String>), String> {
    let out = backup(&Context::new(cluster, mode), item, b)?;
    let returned =
        Object::parse(out.item.as_deref().expect("the VM action returns the VM")).unwrap();
    Ok((returned, names(&out.additional_items)))
}

#[test]
fn checklist_58_vms_that_are_not_running_skip_the_safety_check() {
    for status in [
        "Stopped",
        "Provisioning",
        "Paused",
        "Stopping",
        "Terminating",
        "Migrating",
        "Unknown",
    ] {
        let c = FakeCluster::new();
        let b = backup_spec(json!({"includedResources": ["virtualmachines"]}));
        run(&c, Mode::Upstream, &running(status), &b).unwrap();
        assert!(calls(&c).is_empty(), "{status}: {:?}", calls(&c));
    }
}

#[test]
fn extended_mode_checks_a_migrating_vm_like_a_running_one() {
    let c = FakeCluster::new();
    let b = backup_spec(json!({"includedResources": ["virtualmachines"]}));
    let e = run(&c, Mode::Extended, &running("Migrating"), &b).unwrap_err();
    assert!(e.starts_with(UNSAFE), "{e}");
}

#[test]
fn checklist_59_60_64_vmis_out_of_scope_are_unsafe_without_a_call() {
    for status in ["Running", "Starting"] {
        for spec in [
            json!({"includedResources": ["pods"]}),
            json!({"excludedResources": ["virtualmachineinstances"]}),
        ] {
            let c = FakeCluster::new();
            assert_eq!(
                run(&c, Mode::Upstream, &running(status), &backup_spec(spec)).unwrap_err(),
                UNSAFE
            );
            assert!(calls(&c).is_empty());
        }
    }
}

#[test]
fn checklist_61_64_a_vmi_labelled_excluded_is_unsafe() {
    for status in ["Running", "Starting"] {
        let c = FakeCluster::new().with(VIRTUAL_MACHINE_INSTANCES, the_vmi(excluded("true")));
        assert_eq!(
            run(
                &c,
                Mode::Upstream,
                &running(status),
                &backup_spec(json!({}))
            )
            .unwrap_err(),
            UNSAFE
        );
        assert_eq!(
            calls(&c),
            ["get virtualmachineinstances.kubevirt.io vm-workloads/vm1"]
        );
        let c = FakeCluster::new().with(VIRTUAL_MACHINE_INSTANCES, the_vmi(excluded("false")));
        run(
            &c,
            Mode::Upstream,
            &running(status),
            &backup_spec(json!({})),
        )
        .unwrap();
    }
}

#[test]
fn checklist_62_64_pods_out_while_pvcs_in_is_unsafe() {
    for status in ["Running", "Starting"] {
        let c = FakeCluster::new().with(VIRTUAL_MACHINE_INSTANCES, the_vmi(json!({})));
        let b = backup_spec(json!({"excludedResources": ["pods"]}));
        assert_eq!(
            run(&c, Mode::Upstream, &running(status), &b).unwrap_err(),
            UNSAFE
        );
        let b = backup_spec(json!({"excludedResources": ["pods", "persistentvolumeclaims"]}));
        run(&c, Mode::Upstream, &running(status), &b).unwrap();
    }
}

#[test]
fn checklist_63_64_included_pvcs_need_included_pods() {
    for status in ["Running", "Starting"] {
        let c = FakeCluster::new().with(VIRTUAL_MACHINE_INSTANCES, the_vmi(json!({})));
        let b = backup_spec(
            json!({"includedResources": ["virtualmachineinstances", "persistentvolumeclaims"]}),
        );
        assert_eq!(
            run(&c, Mode::Upstream, &running(status), &b).unwrap_err(),
            UNSAFE
        );
        let b = backup_spec(json!({"includedResources": ["virtualmachineinstances"]}));
        run(&c, Mode::Upstream, &running(status), &b).unwrap();
    }
}

#[test]
fn checklist_65_a_missing_vmi_is_an_error_with_the_api_message() {
    let c = FakeCluster::new();
    let e = run(
        &c,
        Mode::Upstream,
        &running("Running"),
        &backup_spec(json!({})),
    )
    .unwrap_err();
    assert_eq!(e, "virtualmachineinstances.kubevirt.io \"vm1\" not found");
    let e = run(
        &c,
        Mode::Extended,
        &running("Running"),
        &backup_spec(json!({})),
    )
    .unwrap_err();
    assert!(e.starts_with("virtualmachineinstances.kubevirt.io \"vm1\" not found: VirtualMachine vm-workloads/vm1"), "{e}");
}

#[test]
fn checklist_66_a_data_volume_out_of_scope_blocks_the_restore() {
    let c = FakeCluster::new().with(DATA_VOLUMES, datavolume("d", json!({})));
    let item = stopped_with(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
    let b = backup_spec(json!({"excludedResources": ["datavolumes"]}));
    assert_eq!(
        run(&c, Mode::Upstream, &item, &b).unwrap_err(),
        NOT_RESTORABLE
    );
    assert_eq!(
        calls(&c),
        ["get datavolumes.cdi.kubevirt.io vm-workloads/d"]
    );
    let e = run(&c, Mode::Extended, &item, &b).unwrap_err();
    assert!(
        e.starts_with(NOT_RESTORABLE) && e.contains("include datavolumes.cdi.kubevirt.io"),
        "{e}"
    );
}

#[test]
fn checklist_67_template_data_volumes_are_not_checked() {
    let c = FakeCluster::new().with(DATA_VOLUMES, datavolume("d", json!({})));
    let mut item = stopped_with(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
    item.set(
        "/spec/dataVolumeTemplates",
        json!([{"metadata": {"name": "d"}}]),
    )
    .unwrap();
    run(
        &c,
        Mode::Upstream,
        &item,
        &backup_spec(json!({"excludedResources": ["datavolumes"]})),
    )
    .unwrap();
    assert!(calls(&c).is_empty(), "{:?}", calls(&c));
}

#[test]
fn checklist_68_a_vanished_data_volume_needs_its_pvc_in_the_backup() {
    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("d", json!({})));
    let item = stopped_with(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
    run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    assert_eq!(
        calls(&c),
        [
            "get datavolumes.cdi.kubevirt.io vm-workloads/d",
            "get persistentvolumeclaims vm-workloads/d"
        ]
    );

    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("d", json!({})));
    let b = backup_spec(json!({"excludedResources": ["persistentvolumeclaims"]}));
    assert_eq!(
        run(&c, Mode::Upstream, &item, &b).unwrap_err(),
        NOT_RESTORABLE
    );
    assert_eq!(
        calls(&c),
        ["get datavolumes.cdi.kubevirt.io vm-workloads/d"]
    );
}

#[test]
fn checklist_69_neither_data_volume_nor_pvc_is_an_error() {
    let c = FakeCluster::new();
    let item = stopped_with(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
    assert_eq!(
        run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap_err(),
        "persistentvolumeclaims \"d\" not found"
    );
    let e = run(&c, Mode::Extended, &item, &backup_spec(json!({}))).unwrap_err();
    assert!(
        e.starts_with("persistentvolumeclaims \"d\" not found: volume \"root\""),
        "{e}"
    );
}

#[test]
fn checklist_70_a_pvc_labelled_excluded_blocks_the_restore() {
    let c = FakeCluster::new().with(PERSISTENT_VOLUME_CLAIMS, pvc("p", excluded("true")));
    let item = stopped_with(json!([{"name": "data", "persistentVolumeClaim": {"claimName": "p"}}]));
    assert_eq!(
        run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap_err(),
        NOT_RESTORABLE
    );
    assert_eq!(calls(&c), ["get persistentvolumeclaims vm-workloads/p"]);
}

#[test]
fn checklist_71_a_metadata_backup_skips_the_volume_checks() {
    let c = FakeCluster::new().with(VIRTUAL_MACHINE_INSTANCES, the_vmi(json!({})));
    let item = vm(
        "vm1",
        json!({"volumes": [{"name": "root", "dataVolume": {"name": "test-dv"}}]}),
        json!({"printableStatus": "Running", "created": true}),
    );
    let b = metadata_backup(
        json!({"excludedResources": ["datavolumes", "persistentvolumeclaims"],
                                   "includedResources": ["virtualmachineinstances"]}),
    );
    let (_, extras) = run(&c, Mode::Upstream, &item, &b).unwrap();
    assert_eq!(
        extras,
        [
            "virtualmachineinstances.kubevirt.io vm-workloads/vm1",
            "datavolumes.cdi.kubevirt.io vm-workloads/test-dv",
            "persistentvolumeclaims vm-workloads/test-dv"
        ]
    );
    assert_eq!(
        calls(&c),
        [
            "get virtualmachineinstances.kubevirt.io vm-workloads/vm1",
            "list pods vm-workloads kubevirt.io=virt-launcher"
        ]
    );
}

#[test]
fn checklist_72_a_created_vm_brings_its_vmi_and_launcher_pod() {
    let c = FakeCluster::new().with(PODS, launcher("virt-launcher-vm1-abcde", "vm1", json!({})));
    let item = vm(
        "vm1",
        json!({}),
        json!({"printableStatus": "Stopped", "created": true}),
    );
    let (_, extras) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    assert_eq!(
        extras,
        [
            "virtualmachineinstances.kubevirt.io vm-workloads/vm1",
            "pods vm-workloads/virt-launcher-vm1-abcde"
        ]
    );

    let c = FakeCluster::new().with(PODS, launcher("virt-launcher-vm1-abcde", "vm1", json!({})));
    let item = vm(
        "vm1",
        json!({}),
        json!({"printableStatus": "Stopped", "created": false}),
    );
    let (_, extras) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    assert!(extras.is_empty());
    assert!(calls(&c).is_empty());
}

#[test]
fn checklist_73_74_revision_names_are_pinned_and_status_kept() {
    let c = FakeCluster::new();
    let mut item = vm(
        "vm1",
        json!({}),
        json!({"printableStatus": "Stopped",
        "instancetypeRef": {"name": "it", "controllerRevisionRef": {"name": "cr-1"}},
        "preferenceRef": {"name": "p", "controllerRevisionRef": {"name": "cr-2"}}}),
    );
    item.set(
        "/spec/instancetype",
        json!({"name": "it", "revisionName": "previous"}),
    )
    .unwrap();
    item.set("/spec/preference", json!({"name": "p"})).unwrap();
    let (out, extras) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    assert_eq!(out.str_at("/spec/instancetype/revisionName"), Some("cr-1"));
    assert_eq!(out.str_at("/spec/preference/revisionName"), Some("cr-2"));
    assert_eq!(out.pointer("/status"), item.pointer("/status"));
    assert_eq!(
        extras,
        [
            "controllerrevisions.apps vm-workloads/cr-1",
            "controllerrevisions.apps vm-workloads/cr-2"
        ]
    );

    let mut item = vm("vm1", json!({}), json!({"printableStatus": "Stopped"}));
    item.set(
        "/spec/instancetype",
        json!({"name": "it", "revisionName": "old"}),
    )
    .unwrap();
    let (out, extras) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    assert_eq!(out.str_at("/spec/instancetype/revisionName"), Some("old"));
    assert_eq!(extras, ["controllerrevisions.apps vm-workloads/old"]);
}

#[test]
fn nothing_but_the_revision_names_changes() {
    let c = FakeCluster::new();
    let mut item = vm(
        "vm1",
        json!({"domain": {"devices": {}}, "unknownFutureField": {"x": 1}}),
        json!({"printableStatus": "Stopped", "instancetypeRef": {"controllerRevisionRef": {"name": "cr"}}}),
    );
    item.set("/spec/instancetype", json!({"name": "it"}))
        .unwrap();
    let (mut out, _) = run(&c, Mode::Extended, &item, &backup_spec(json!({}))).unwrap();
    out.remove("/spec/instancetype/revisionName");
    assert_eq!(out, item, "unknown fields survive, nothing else is touched");
}

/// Upstream decodes the VM into KubeVirt's Go type and encodes it again (docs/kubevirt.md#s8-3): every
/// `ObjectMeta` gets `creationTimestamp: null` when it has none, and emptied metadata maps vanish.
#[test]
fn upstream_mode_writes_the_zero_values_of_upstreams_go_type_and_extended_mode_does_not() {
    let c = FakeCluster::new();
    let mut item = vm("vm1", json!({}), json!({"printableStatus": "Stopped"}));
    item.set(
        "/spec/dataVolumeTemplates",
        json!([{"metadata": {"name": "root"}, "spec": {}}]),
    )
    .unwrap();
    item.set("/metadata/labels", json!({})).unwrap();
    let (upstream, _) = run(&c, Mode::Upstream, &item, &backup_spec(json!({}))).unwrap();
    let mut expected = item.clone();
    expected.remove("/metadata/labels");
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
    assert_eq!(upstream, expected);
    let (extended, _) = run(&c, Mode::Extended, &item, &backup_spec(json!({}))).unwrap();
    assert_eq!(extended, item);
}

#[test]
fn a_null_backup_is_upstreams_nil_error() {
    let c = FakeCluster::new();
    let ctx = Context::new(&c, Mode::Upstream);
    let item = running("Stopped").to_json();
    assert_eq!(
        crate::run_backup(&ctx, crate::catalog::BACKUP_VIRTUALMACHINE, &item, "null").unwrap_err(),
        "backup object nil!"
    );
}

/// Extended mode applies the name globs of the Backup's `namespacedFilterPolicies` (Velero 1.18.3+,
/// docs/kubevirt.md#s4-1) to the objects it checks; upstream mode never reads the policy.
mod namespace_filters {
    use super::*;
    use crate::resources::CONFIG_MAPS;

    fn policy(filters: &str) -> FakeCluster {
        FakeCluster::new().with(
            CONFIG_MAPS,
            policy_configmap(&namespace_filter_policy(filters)),
        )
    }

    #[test]
    fn a_running_vm_whose_vmi_the_policy_drops_by_name_is_unsafe_before_any_vmi_read() {
        let c = policy("[{kinds: [vmi], excludedNames: [\"vm*\"]}, {kinds: []}]")
            .with(VIRTUAL_MACHINE_INSTANCES, the_vmi(json!({})));
        let b = backup_with_policy(json!({}));
        let e = run(&c, Mode::Extended, &running("Running"), &b).unwrap_err();
        assert!(
            e.starts_with(UNSAFE)
                && e.contains("velero/policy")
                && e.contains("virtualmachineinstances in namespace vm-workloads"),
            "{e}"
        );
        assert_eq!(calls(&c), ["get configmaps velero/policy"]);
        // Upstream mode neither reads the policy nor drops the VMI.
        let c = policy("[{kinds: [vmi], excludedNames: [\"vm*\"]}]")
            .with(VIRTUAL_MACHINE_INSTANCES, the_vmi(json!({})));
        run(&c, Mode::Upstream, &running("Running"), &b).unwrap();
        assert!(!calls(&c).iter().any(|call| call.contains("configmaps")));
    }

    #[test]
    fn a_kind_the_policy_does_not_list_is_still_backed_up_as_an_additional_item() {
        // Velero collects no VMIs itself here, but the VM action returns the VMI, and only the
        // name globs apply to that.
        let c = policy("[{kinds: [pvc], names: [\"web-*\"]}]")
            .with(VIRTUAL_MACHINE_INSTANCES, the_vmi(json!({})));
        run(
            &c,
            Mode::Extended,
            &running("Running"),
            &backup_with_policy(json!({})),
        )
        .unwrap();
    }

    #[test]
    fn a_pvc_the_policy_drops_by_name_blocks_the_restore_and_a_kept_one_does_not() {
        let item =
            stopped_with(json!([{"name": "data", "persistentVolumeClaim": {"claimName": "p"}}]));
        let b = backup_with_policy(json!({}));
        let c = policy("[{kinds: [persistentvolumeclaims], names: [\"web-*\"]}]")
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("p", json!({})));
        let e = run(&c, Mode::Extended, &item, &b).unwrap_err();
        assert!(
            e.starts_with(NOT_RESTORABLE)
                && e.contains("uses PVC vm-workloads/p")
                && e.contains("persistentvolumeclaims in namespace vm-workloads of resource policy ConfigMap velero/policy"),
            "{e}"
        );
        assert_eq!(calls(&c), ["get configmaps velero/policy"]);
        let c = policy("[{kinds: [persistentvolumeclaims], names: [\"p\", \"web-*\"]}]")
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("p", json!({})));
        run(&c, Mode::Extended, &item, &b).unwrap();
    }

    #[test]
    fn a_data_volume_the_policy_drops_by_name_blocks_the_restore() {
        let item = stopped_with(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
        let b = backup_with_policy(json!({}));
        let c = policy("[{kinds: [datavolumes.cdi.kubevirt.io], excludedNames: [d]}]")
            .with(DATA_VOLUMES, datavolume("d", json!({})));
        let e = run(&c, Mode::Extended, &item, &b).unwrap_err();
        assert!(
            e.starts_with(NOT_RESTORABLE)
                && e.contains("DataVolume vm-workloads/d")
                && e.contains("datavolumes.cdi.kubevirt.io in namespace vm-workloads"),
            "{e}"
        );
        // A policy for another namespace leaves this one alone.
        let other = "version: v1\nnamespacedFilterPolicies:\n  - namespaces: [\"team-*\"]\n    resourceFilters: [{kinds: [dv], excludedNames: [d]}]\n";
        let c = FakeCluster::new()
            .with(CONFIG_MAPS, policy_configmap(other))
            .with(DATA_VOLUMES, datavolume("d", json!({})));
        run(&c, Mode::Extended, &item, &b).unwrap();
    }

    #[test]
    fn the_pvc_of_a_vanished_data_volume_is_checked_by_name_before_it_is_read() {
        let item = stopped_with(json!([{"name": "root", "dataVolume": {"name": "d"}}]));
        let c = policy("[{kinds: [pvc], excludedNames: [d]}]")
            .with(PERSISTENT_VOLUME_CLAIMS, pvc("d", json!({})));
        let e = run(&c, Mode::Extended, &item, &backup_with_policy(json!({}))).unwrap_err();
        assert!(
            e.contains("which no longer exists") && e.contains("velero/policy"),
            "{e}"
        );
        assert_eq!(
            calls(&c),
            [
                "get configmaps velero/policy",
                "get datavolumes.cdi.kubevirt.io vm-workloads/d"
            ]
        );
    }
}
