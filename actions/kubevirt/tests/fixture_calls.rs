//! The Kubernetes calls of every scenario in `tests/fixtures/kubevirt/README.md` ("API" lines, docs/kubevirt.md#s7
//! numbering), run natively against a fake cluster holding the fixture cluster's objects. The CLI
//! tests (`tests/kubevirt.rs`) check the same scenarios' results through the host; these check that
//! the component reads exactly what the README says, in both modes.
// Helpers of these tests may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use kubevirt::resources::{
    CONFIG_MAPS, CONTROLLER_REVISIONS, DATA_VOLUMES, NETWORK_ATTACHMENT_DEFINITIONS,
    PERSISTENT_VOLUME_CLAIMS, PODS, SECRETS, SERVICE_ACCOUNTS, VIRTUAL_MACHINES,
    VIRTUAL_MACHINE_INSTANCES, VOLUME_SNAPSHOTS,
};
use kubevirt::{catalog, run_backup, run_related_items, run_restore, Context, Mode};
use velero_wasm_sdk::{Api, FakeCluster, Object};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kubevirt")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(fixtures().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn api_of(kind: &str) -> Api {
    match kind {
        "ConfigMap" => CONFIG_MAPS,
        "ControllerRevision" => CONTROLLER_REVISIONS,
        "DataVolume" => DATA_VOLUMES,
        "NetworkAttachmentDefinition" => NETWORK_ATTACHMENT_DEFINITIONS,
        "PersistentVolumeClaim" => PERSISTENT_VOLUME_CLAIMS,
        "Pod" => PODS,
        "Secret" => SECRETS,
        "ServiceAccount" => SERVICE_ACCOUNTS,
        "VirtualMachine" => VIRTUAL_MACHINES,
        "VirtualMachineInstance" => VIRTUAL_MACHINE_INSTANCES,
        "VolumeSnapshot" => VOLUME_SNAPSHOTS,
        other => panic!("the fixture cluster has a {other}: add it here"),
    }
}

/// The fixture cluster, objects in API order (resource, namespace, name).
fn cluster() -> FakeCluster {
    let mut objects: Vec<(String, String, String, Api, Object)> =
        std::fs::read_dir(fixtures().join("cluster"))
            .unwrap()
            .map(|e| Object::parse(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap())
            .map(|o| {
                let api = api_of(o.kind());
                (
                    api.group_resource(),
                    o.namespace().to_string(),
                    o.name().to_string(),
                    api,
                    o,
                )
            })
            .collect();
    objects.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    objects
        .into_iter()
        .fold(FakeCluster::new(), |c, (_, _, _, api, o)| c.with(api, o))
}

fn calls(cluster: &FakeCluster) -> Vec<String> {
    cluster
        .calls()
        .iter()
        .map(|c| format!("{} {} {}/{}", c.verb, c.resource, c.namespace, c.target))
        .collect()
}

const A1_VMI: &str = "get virtualmachineinstances.kubevirt.io vm-workloads/fedora-web-01";
const A2_VM: &str = "get virtualmachines.kubevirt.io vm-workloads/fedora-web-01";
const A6_PODS: &str = "list pods vm-workloads/kubevirt.io=virt-launcher";

/// A6 for VMI `vmi` in `mode`: upstream lists every launcher pod; extended mode first lists those
/// labelled with the VMI's name, and every launcher pod when none of those is the VMI's (`found`:
/// whether the labelled list finds it; the batch-worker-7 fixture's pod has no such label).
fn a6(mode: Mode, vmi: &str, found: bool) -> Vec<String> {
    let labelled =
        format!("list pods vm-workloads/kubevirt.io=virt-launcher,vm.kubevirt.io/name={vmi}");
    match (mode, found) {
        (Mode::Upstream, _) => vec![A6_PODS.to_string()],
        (Mode::Extended, true) => vec![labelled],
        (Mode::Extended, false) => vec![labelled, A6_PODS.to_string()],
    }
}

/// `calls` joined into one list.
fn seq(calls: &[&[String]]) -> Vec<String> {
    calls.concat()
}

fn s(call: &str) -> Vec<String> {
    vec![call.to_string()]
}

const BOTH: [Mode; 2] = [Mode::Upstream, Mode::Extended];
const A7_FEDORA: &str =
    "list persistentvolumeclaims vm-workloads/persistent-state-for=fedora-web-01";

/// Runs a backup action in both modes; returns the calls of each run and whether each succeeded.
fn backup_calls(
    action: &str,
    item: &str,
    backup: &str,
) -> [(Vec<String>, Result<usize, String>); 2] {
    [Mode::Upstream, Mode::Extended].map(|mode| {
        let c = cluster();
        let result = run_backup(&Context::new(&c, mode), action, &read(item), &read(backup))
            .map(|r| r.additional_items.len());
        (calls(&c), result)
    })
}

#[test]
fn running_vm_with_nightly_backup() {
    for ((calls, result), mode) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINE,
        "cluster/vm-fedora-web-01.json",
        "velero/backup-nightly.json",
    )
    .into_iter()
    .zip(BOTH)
    {
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            calls,
            seq(&[
                &s(A1_VMI),
                &s("get persistentvolumeclaims vm-workloads/web-content"),
                &s("get persistentvolumeclaims vm-workloads/web-logs"),
                &a6(mode, "fedora-web-01", true),
                &s(A7_FEDORA),
            ])
        );
    }
}

#[test]
fn running_vm_with_a_backup_without_pods() {
    for (calls, result) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINE,
        "cluster/vm-fedora-web-01.json",
        "velero/backup-selected-resources-no-pods.json",
    ) {
        assert!(result
            .unwrap_err()
            .starts_with("VM cannot be safely backed up"));
        assert_eq!(calls, [A1_VMI]);
    }
}

#[test]
fn running_vm_with_a_metadata_only_backup() {
    for ((calls, result), mode) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINE,
        "cluster/vm-fedora-web-01.json",
        "velero/backup-metadata-only.json",
    )
    .into_iter()
    .zip(BOTH)
    {
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            calls,
            seq(&[&s(A1_VMI), &a6(mode, "fedora-web-01", true), &s(A7_FEDORA)])
        );
    }
}

#[test]
fn owned_vmi_with_nightly_backup() {
    for ((calls, result), mode) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINEINSTANCE,
        "cluster/vmi-fedora-web-01.json",
        "velero/backup-nightly.json",
    )
    .into_iter()
    .zip(BOTH)
    {
        assert!(result.is_ok(), "{result:?}");
        let a6 = a6(mode, "fedora-web-01", true);
        assert_eq!(calls, seq(&[&s(A2_VM), &a6, &a6, &s(A7_FEDORA)]));
    }
}

#[test]
fn owned_vmi_with_a_backup_without_pods() {
    for (calls, result) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINEINSTANCE,
        "cluster/vmi-fedora-web-01.json",
        "velero/backup-selected-resources-no-pods.json",
    ) {
        assert!(result
            .unwrap_err()
            .starts_with("VM is running but launcher pod is not included in the backup"));
        assert_eq!(calls, [A2_VM]);
    }
}

#[test]
fn standalone_vmi_with_nightly_backup() {
    for ((calls, result), mode) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINEINSTANCE,
        "cluster/vmi-batch-worker-7.json",
        "velero/backup-nightly.json",
    )
    .into_iter()
    .zip(BOTH)
    {
        assert_eq!(result, Ok(3));
        // Its launcher pod lacks the `vm.kubevirt.io/name` label (as an older KubeVirt's would).
        let a6 = a6(mode, "batch-worker-7", false);
        assert_eq!(
            calls,
            seq(&[
                &a6,
                &s("get persistentvolumeclaims vm-workloads/batch-scratch-7"),
                &a6
            ])
        );
    }
}

#[test]
fn replica_set_vmi_fails_upstream_and_succeeds_extended() {
    let [(upstream_calls, upstream), (extended_calls, extended)] = backup_calls(
        catalog::BACKUP_VIRTUALMACHINEINSTANCE,
        "cluster/vmi-web-replica-8kq2f.json",
        "velero/backup-nightly.json",
    );
    assert_eq!(
        upstream,
        Err("virtualmachines.kubevirt.io \"web-replica-8kq2f\" not found".to_string())
    );
    assert_eq!(
        upstream_calls,
        ["get virtualmachines.kubevirt.io vm-workloads/web-replica-8kq2f"]
    );
    assert_eq!(extended, Ok(1));
    assert_eq!(
        extended_calls,
        a6(Mode::Extended, "web-replica-8kq2f", false)
    );
}

#[test]
fn stopped_windows_vm_with_nightly_backup() {
    for (calls, result) in backup_calls(
        catalog::BACKUP_VIRTUALMACHINE,
        "cluster/vm-win2k22-sql.json",
        "velero/backup-nightly.json",
    ) {
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            calls,
            ["list persistentvolumeclaims vm-workloads/persistent-state-for=win2k22-sql"]
        );
    }
}

#[test]
fn vm_whose_vmi_is_gone_with_nightly_backup() {
    let [(upstream_calls, upstream), (extended_calls, extended)] = backup_calls(
        catalog::BACKUP_VIRTUALMACHINE,
        "cluster/vm-rhel9-cache-02.json",
        "velero/backup-nightly.json",
    );
    let missing = "virtualmachineinstances.kubevirt.io \"rhel9-cache-02\" not found";
    assert_eq!(upstream, Err(missing.to_string()));
    assert!(extended.unwrap_err().starts_with(missing));
    for calls in [upstream_calls, extended_calls] {
        assert_eq!(
            calls,
            ["get virtualmachineinstances.kubevirt.io vm-workloads/rhel9-cache-02"]
        );
    }
}

/// The item-block actions make the backup graph's calls and no other: A6 for a created VM or any
/// VMI, A7 for persistent TPM/EFI.
#[test]
fn item_blocks_read_what_the_backup_graph_reads() {
    for mode in [Mode::Upstream, Mode::Extended] {
        let mut cases = vec![
            (
                catalog::BLOCK_VM,
                "cluster/vm-fedora-web-01.json",
                16,
                seq(&[&a6(mode, "fedora-web-01", true), &s(A7_FEDORA)]),
            ),
            (
                catalog::BLOCK_VM,
                "cluster/vm-win2k22-sql.json",
                5,
                s("list persistentvolumeclaims vm-workloads/persistent-state-for=win2k22-sql"),
            ),
            (
                catalog::BLOCK_VM,
                "cluster/vm-rhel9-cache-02.json",
                3,
                a6(mode, "rhel9-cache-02", false),
            ),
        ];
        if mode == Mode::Extended {
            cases[0].2 = 19;
            cases[1].2 = 11;
            cases.extend([
                (
                    catalog::BLOCK_VMI,
                    "cluster/vmi-fedora-web-01.json",
                    14,
                    seq(&[&a6(mode, "fedora-web-01", true), &s(A7_FEDORA)]),
                ),
                (
                    catalog::BLOCK_VMI,
                    "cluster/vmi-batch-worker-7.json",
                    3,
                    a6(mode, "batch-worker-7", false),
                ),
                (
                    catalog::BLOCK_VMI,
                    "cluster/vmi-web-replica-8kq2f.json",
                    1,
                    a6(mode, "web-replica-8kq2f", false),
                ),
            ]);
        }
        for (action, item, related, expected) in cases {
            let c = cluster();
            let backup = read("velero/backup-nightly.json");
            let items = run_related_items(&Context::new(&c, mode), action, &read(item), &backup)
                .unwrap_or_else(|e| panic!("{mode:?} {item}: {e}"));
            assert_eq!(items.len(), related, "{mode:?} {item}");
            assert_eq!(calls(&c), expected, "{mode:?} {item}");
        }
    }
}

#[test]
fn data_volumes_and_pvcs() {
    for (item, expected) in [
        ("cluster/dv-fedora-web-01-rootdisk.json", vec![]),
        ("cluster/dv-scratch-import.json", vec![]),
        (
            "cluster/pvc-fedora-web-01-rootdisk.json",
            vec!["get datavolumes.cdi.kubevirt.io vm-workloads/fedora-web-01-rootdisk"],
        ),
        (
            "cluster/pvc-scratch-import.json",
            vec!["get datavolumes.cdi.kubevirt.io vm-workloads/scratch-import"],
        ),
        ("cluster/pvc-web-content.json", vec![]),
        (
            "cluster/pvc-persistent-state-for-fedora-web-01.json",
            vec![],
        ),
    ] {
        for action in [catalog::BACKUP_DATAVOLUME, catalog::BACKUP_PVC] {
            for (calls, result) in backup_calls(action, item, "velero/backup-nightly.json") {
                assert!(result.is_ok(), "{item}: {result:?}");
                let expected: &[&str] = if action == catalog::BACKUP_PVC {
                    &[]
                } else {
                    &expected
                };
                assert_eq!(calls, expected, "{action} on {item}");
            }
        }
    }
}

#[test]
fn volume_snapshot_lists_the_namespace_once() {
    for (calls, result) in backup_calls(
        catalog::BACKUP_VOLUMESNAPSHOT,
        "cluster/volumesnapshot-fedora-web-01-rootdisk.json",
        "velero/backup-nightly.json",
    ) {
        assert_eq!(result, Ok(0));
        assert_eq!(calls, ["list persistentvolumeclaims vm-workloads/"]);
    }
}

#[test]
fn restores_read_only_the_backend_pvcs() {
    for mode in [Mode::Upstream, Mode::Extended] {
        for restore in ["velero/restore-default.json", "velero/restore-dr-copy.json"] {
            let c = cluster();
            let ctx = Context::new(&c, mode);
            run_restore(
                &ctx,
                catalog::RESTORE_VM,
                &read("restore-inputs/vm-fedora-web-01.restore-input.json"),
                &read(restore),
            )
            .unwrap();
            assert_eq!(calls(&c), [A7_FEDORA]);
            let c = cluster();
            let ctx = Context::new(&c, mode);
            for (action, item) in [
                (
                    catalog::RESTORE_VMI,
                    "restore-inputs/vmi-fedora-web-01.restore-input.json",
                ),
                (
                    catalog::RESTORE_VMI,
                    "restore-inputs/vmi-batch-worker-7.restore-input.json",
                ),
                (
                    catalog::RESTORE_POD,
                    "cluster/pod-virt-launcher-fedora-web-01.json",
                ),
            ] {
                run_restore(&ctx, action, &read(item), &read(restore)).unwrap();
            }
            assert!(calls(&c).is_empty(), "{:?}", calls(&c));
        }
    }
}
