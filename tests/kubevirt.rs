//! The kubevirt component through `velero-wasm run`, against the fixture cluster of
//! `tests/fixtures/kubevirt/` — every expected result of its README, in both modes:
//!
//! - `extended`: the stock module as shipped (its manifest says `mode = "extended"`);
//! - `upstream`: the same component bytes from a module directory whose manifest says
//!   `mode = "upstream"`, which is how an operator reproduces kubevirt-velero-plugin exactly.
//!
//! Upstream's additional items are a prefix of extended mode's, except the Multus
//! NetworkAttachmentDefinitions upstream appends since kubevirt-velero-plugin #426: extended mode
//! followed them first and keeps them among its additions. The lists below spell out upstream's items,
//! its networks, and what extended mode adds. The scenario data (`*_items` functions) is shared with any other
//! transport that runs the same actions (the gRPC plugin path).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support;

use support::run::Run;

// ---------------------------------------------------------------------------------------------
// Running the component

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Upstream,
    Extended,
}

const BOTH: [Mode; 2] = [Mode::Upstream, Mode::Extended];

/// A file of the fixture set (`cluster/…`, `velero/…`, `restore-inputs/…`).
fn fixture(relative: &str) -> PathBuf {
    support::root()
        .join("tests/fixtures/kubevirt")
        .join(relative)
}

/// A module directory with the kubevirt component and its stock manifest switched to `mode`.
fn module_dir(mode_setting: &str) -> tempfile::TempDir {
    let stock =
        std::fs::read_to_string(support::root().join("actions/kubevirt/kubevirt.toml")).unwrap();
    let manifest = stock.replace("mode = \"extended\"", &format!("mode = {mode_setting:?}"));
    assert_ne!(
        manifest, stock,
        "the stock manifest sets mode = \"extended\""
    );
    let dir = tempfile::tempdir().unwrap();
    support::add_module(dir.path(), "kubevirt", "kubevirt", &manifest);
    dir
}

fn upstream_modules() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| module_dir("upstream")).path()
}

/// `run` in `mode`: upstream from its module directory, extended as shipped.
fn in_mode(mode: Mode, run: Run) -> Run {
    match mode {
        Mode::Upstream => run.modules(upstream_modules()),
        Mode::Extended => run,
    }
}

/// `velero-wasm ARGS`, in `mode`.
fn velero_wasm(mode: Mode, args: &[&str]) -> Output {
    in_mode(mode, Run::cli(args)).output()
}

/// What `run` answered: the JSON result, or the exit status and the error line.
#[derive(Debug)]
enum Outcome {
    Done(Value),
    Failed(i32, String),
}

impl Outcome {
    fn done(self) -> Value {
        match self {
            Outcome::Done(v) => v,
            Outcome::Failed(code, e) => panic!("expected success, got exit {code}: {e}"),
        }
    }

    /// The action's error message (exit status 1).
    fn error(self) -> String {
        match self {
            Outcome::Failed(1, e) => e,
            other => panic!("expected the action to fail, got {other:?}"),
        }
    }
}

/// `velero-wasm run` of `action` on `item` (a path) with `--backup` or `--restore` `subject` (a
/// fixture), against the fixture cluster.
fn run(mode: Mode, action: &str, item: &Path, flag: &str, subject: &str) -> Outcome {
    let action = format!("kubevirt-velero-plugin/{action}");
    let run = Run::new(&action)
        .fixtures(fixture(""))
        .item(item)
        .path(flag, subject)
        .cluster(&["cluster"]);
    let output = in_mode(mode, run).output();
    let stderr = String::from_utf8_lossy(&output.stderr)
        .trim_end()
        .to_string();
    match output.status.code() {
        Some(0) => Outcome::Done(
            serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}")),
        ),
        code => Outcome::Failed(
            code.unwrap_or(-1),
            stderr
                .strip_prefix("velero-wasm run: ")
                .unwrap_or(&stderr)
                .to_string(),
        ),
    }
}

fn backup(mode: Mode, action: &str, item: &str, backup: &str) -> Outcome {
    run(
        mode,
        action,
        &fixture(item),
        "--backup",
        &format!("velero/{backup}"),
    )
}

fn restore(mode: Mode, action: &str, item: &Path, restore: &str) -> Outcome {
    run(
        mode,
        action,
        item,
        "--restore",
        &format!("velero/{restore}"),
    )
}

/// Additional items as Velero prints them: `resource.group namespace/name`.
fn extras(result: &Value) -> Vec<String> {
    identifiers(result, "additionalItems")
}

/// The related items of an item-block action, written as [`extras`] writes additional items.
fn related(result: &Value) -> Vec<String> {
    identifiers(result, "relatedItems")
}

fn identifiers(result: &Value, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {result}"))
        .iter()
        .map(|i| {
            let (group, resource) = (
                i["group"].as_str().unwrap(),
                i["resource"].as_str().unwrap(),
            );
            let gr = if group.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}.{group}")
            };
            format!(
                "{gr} {}/{}",
                i["namespace"].as_str().unwrap(),
                i["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Removes each JSON pointer (an object key, `~1` for `/`) from a JSON value.
fn without(mut value: Value, pointers: &[&str]) -> Value {
    for pointer in pointers {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        if let Some(map) = value.pointer_mut(parent).and_then(Value::as_object_mut) {
            map.remove(&key.replace("~1", "/").replace("~0", "~"));
        }
    }
    value
}

/// `item` as upstream mode returns it where upstream encodes its Go type again (docs/kubevirt.md#s8-3):
/// `creationTimestamp: null` added to each `ObjectMeta` at `metas` that has none, and `status: {}`
/// when `status` is set (a struct in that Go type) and the item has none.
fn with_go_zero_values(mut item: Value, metas: &[&str], status: bool) -> Value {
    for meta in metas {
        let meta = item
            .pointer_mut(meta)
            .and_then(Value::as_object_mut)
            .unwrap();
        meta.entry("creationTimestamp").or_insert(Value::Null);
    }
    if status {
        item.as_object_mut()
            .unwrap()
            .entry("status")
            .or_insert(serde_json::json!({}));
    }
    item
}

/// `item` after what Velero's restore removes before the restore actions see it (its
/// `resetMetadataAndStatus`): the server-set metadata, the owners and the status.
fn as_velero_restores_it(item: Value) -> Value {
    without(
        item,
        &[
            "/metadata/generateName",
            "/metadata/selfLink",
            "/metadata/uid",
            "/metadata/resourceVersion",
            "/metadata/generation",
            "/metadata/creationTimestamp",
            "/metadata/deletionTimestamp",
            "/metadata/deletionGracePeriodSeconds",
            "/metadata/ownerReferences",
            "/status",
        ],
    )
}

fn label<'a>(item: &'a Value, key: &str) -> Option<&'a str> {
    item["metadata"]["labels"].get(key).and_then(Value::as_str)
}

fn annotation<'a>(item: &'a Value, key: &str) -> Option<&'a str> {
    item["metadata"]["annotations"]
        .get(key)
        .and_then(Value::as_str)
}

/// Upstream's list, then what extended mode adds.
fn expected(mode: Mode, upstream: &[&str], extended_adds: &[&str]) -> Vec<String> {
    with_networks(mode, upstream, &[], extended_adds)
}

/// Upstream's list, then in upstream mode the NetworkAttachmentDefinitions it appends after the
/// credentials (#426), in extended mode what extended mode adds (those definitions among them).
fn with_networks(
    mode: Mode,
    upstream: &[&str],
    networks: &[&str],
    extended_adds: &[&str],
) -> Vec<String> {
    let adds = match mode {
        Mode::Upstream => networks,
        Mode::Extended => extended_adds,
    };
    upstream.iter().chain(adds).map(|s| s.to_string()).collect()
}

const FEDORA_NETWORK: &str =
    "network-attachment-definitions.k8s.cni.cncf.io vm-workloads/storage-vlan200";

// ---------------------------------------------------------------------------------------------
// Scenario data (fixtures README), shared by every transport

const CR_INSTANCETYPE: &str = "fedora-web-01-u1.medium-b1f0c3d2-6e4a-4f87-9d15-3c8e2a7f0b91-1";
const CR_PREFERENCE: &str = "fedora-web-01-fedora-secure-a47e9c10-58b3-4d2f-8e6a-0c9d1b7f3e52-2";

/// What a backup of the running VM `fedora-web-01` returns (nightly or metadata-only backup).
fn fedora_vm_backup_items(mode: Mode) -> Vec<String> {
    with_networks(
        mode,
        &[
            "controllerrevisions.apps vm-workloads/fedora-web-01-u1.medium-b1f0c3d2-6e4a-4f87-9d15-3c8e2a7f0b91-1",
            "controllerrevisions.apps vm-workloads/fedora-web-01-fedora-secure-a47e9c10-58b3-4d2f-8e6a-0c9d1b7f3e52-2",
            "virtualmachineinstances.kubevirt.io vm-workloads/fedora-web-01",
            "pods vm-workloads/virt-launcher-fedora-web-01-q7m2x",
            "datavolumes.cdi.kubevirt.io vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/web-content",
            "secrets vm-workloads/fedora-web-01-cloudinit-user",
            "secrets vm-workloads/fedora-web-01-cloudinit-net",
            "configmaps vm-workloads/web-frontend-config",
            "serviceaccounts vm-workloads/web-frontend",
            "persistentvolumeclaims vm-workloads/web-logs",
            "persistentvolumeclaims vm-workloads/persistent-state-for-fedora-web-01-x7k2p",
            "secrets vm-workloads/fedora-web-01-ssh-authorized-keys",
            "secrets vm-workloads/fedora-web-01-guest-passwords",
        ],
        &[FEDORA_NETWORK],
        &[
            "virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.medium",
            "virtualmachinepreferences.instancetype.kubevirt.io vm-workloads/fedora-secure",
            "datasources.cdi.kubevirt.io kubevirt-os-images/fedora",
            FEDORA_NETWORK,
        ],
    )
}

/// What a backup of the VMI `fedora-web-01` returns.
fn fedora_vmi_backup_items(mode: Mode) -> Vec<String> {
    with_networks(
        mode,
        &[
            "pods vm-workloads/virt-launcher-fedora-web-01-q7m2x",
            "datavolumes.cdi.kubevirt.io vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/web-content",
            "secrets vm-workloads/fedora-web-01-cloudinit-user",
            "secrets vm-workloads/fedora-web-01-cloudinit-net",
            "configmaps vm-workloads/web-frontend-config",
            "serviceaccounts vm-workloads/web-frontend",
            "persistentvolumeclaims vm-workloads/web-logs",
            "persistentvolumeclaims vm-workloads/persistent-state-for-fedora-web-01-x7k2p",
            "secrets vm-workloads/fedora-web-01-ssh-authorized-keys",
            "secrets vm-workloads/fedora-web-01-guest-passwords",
        ],
        &[FEDORA_NETWORK],
        &[FEDORA_NETWORK],
    )
}

/// What must be restored before the VM `fedora-web-01` (either Restore).
fn fedora_vm_restore_items(mode: Mode) -> Vec<String> {
    with_networks(
        mode,
        &[
            "controllerrevisions.apps vm-workloads/fedora-web-01-u1.medium-b1f0c3d2-6e4a-4f87-9d15-3c8e2a7f0b91-1",
            "controllerrevisions.apps vm-workloads/fedora-web-01-fedora-secure-a47e9c10-58b3-4d2f-8e6a-0c9d1b7f3e52-2",
            "datavolumes.cdi.kubevirt.io vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/web-content",
            "secrets vm-workloads/fedora-web-01-cloudinit-user",
            "secrets vm-workloads/fedora-web-01-cloudinit-net",
            "configmaps vm-workloads/web-frontend-config",
            "serviceaccounts vm-workloads/web-frontend",
            "persistentvolumeclaims vm-workloads/web-logs",
            "persistentvolumeclaims vm-workloads/persistent-state-for-fedora-web-01-x7k2p",
            "secrets vm-workloads/fedora-web-01-ssh-authorized-keys",
            "secrets vm-workloads/fedora-web-01-guest-passwords",
        ],
        &[FEDORA_NETWORK],
        // The DataSource lives in another namespace: left to Velero's normal restore pass.
        &[
            "virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.medium",
            "virtualmachinepreferences.instancetype.kubevirt.io vm-workloads/fedora-secure",
            FEDORA_NETWORK,
        ],
    )
}

/// What a backup of the stopped VM `win2k22-sql` returns.
fn win2k22_vm_backup_items(mode: Mode) -> Vec<String> {
    with_networks(
        mode,
        &[
            "controllerrevisions.apps vm-workloads/win2k22-sql-sql-large-e0a3d9c5-71b4-4f2e-86d0-4b9c2f7e1a83-3",
            "datavolumes.cdi.kubevirt.io vm-workloads/win2k22-sql-rootdisk",
            "persistentvolumeclaims vm-workloads/win2k22-sql-rootdisk",
            "persistentvolumeclaims vm-workloads/persistent-state-for-win2k22-sql",
        ],
        // A network of another namespace: upstream names it too.
        &["network-attachment-definitions.k8s.cni.cncf.io db-net/sql-backend"],
        &[
            "virtualmachineinstancetypes.instancetype.kubevirt.io vm-workloads/sql-large",
            "virtualmachineclusterpreferences.instancetype.kubevirt.io /windows.2k22.virtio",
            "secrets vm-workloads/internal-registry-creds",
            "secrets vm-workloads/internal-registry-pull",
            "configmaps vm-workloads/win2k22-sql-unattend",
            "persistentvolumeclaims vm-workloads/sql-tempdb-golden",
            "network-attachment-definitions.k8s.cni.cncf.io db-net/sql-backend",
        ],
    )
}

/// The backup graph of `rhel9-cache-02`, whose status still says Running while its VMI is gone and
/// no launcher pod exists: the VMI named from `status.created`, its PVC and cloud-init Secret.
fn rhel9_vm_graph() -> Vec<String> {
    [
        "virtualmachineinstances.kubevirt.io vm-workloads/rhel9-cache-02",
        "persistentvolumeclaims vm-workloads/rhel9-cache-02-data",
        "secrets vm-workloads/rhel9-cache-02-userdata",
    ]
    .map(String::from)
    .to_vec()
}

/// What a backup of the standalone VMI `batch-worker-7` returns (both modes).
fn batch_worker_vmi_backup_items() -> Vec<String> {
    [
        "pods vm-workloads/virt-launcher-batch-worker-7-p2w8k",
        "persistentvolumeclaims vm-workloads/batch-scratch-7",
        "secrets vm-workloads/batch-worker-7-userdata",
    ]
    .map(String::from)
    .to_vec()
}

/// What an extended backup of the replica-set VMI `web-replica-8kq2f` returns.
fn replica_vmi_backup_items() -> Vec<String> {
    vec!["virtualmachineinstancereplicasets.kubevirt.io vm-workloads/web-replica".to_string()]
}

/// Every fixture VM with the related items of its item block (its backup graph), in `mode`.
fn fixture_vm_blocks(mode: Mode) -> Vec<(&'static str, Vec<String>)> {
    vec![
        (
            "cluster/vm-fedora-web-01.json",
            fedora_vm_backup_items(mode),
        ),
        ("cluster/vm-win2k22-sql.json", win2k22_vm_backup_items(mode)),
        ("cluster/vm-rhel9-cache-02.json", rhel9_vm_graph()),
    ]
}

/// Every fixture VMI with the related items of its item block (extended mode: its backup graph, then
/// the VM that owns it).
fn fixture_vmi_blocks() -> Vec<(&'static str, Vec<String>)> {
    let mut fedora = fedora_vmi_backup_items(Mode::Extended);
    fedora.push("virtualmachines.kubevirt.io vm-workloads/fedora-web-01".into());
    vec![
        ("cluster/vmi-fedora-web-01.json", fedora),
        (
            "cluster/vmi-batch-worker-7.json",
            batch_worker_vmi_backup_items(),
        ),
        (
            "cluster/vmi-web-replica-8kq2f.json",
            replica_vmi_backup_items(),
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Backup of the running VM (checklist 110, 111)

#[test]
fn running_vm_nightly_backup_pins_revisions_and_names_everything_it_needs() {
    for mode in BOTH {
        let result = backup(
            mode,
            "backup-virtualmachine-action",
            "cluster/vm-fedora-web-01.json",
            "backup-nightly.json",
        )
        .done();
        assert_eq!(extras(&result), fedora_vm_backup_items(mode), "{mode:?}");
        let item = &result["item"];
        assert_eq!(
            item["spec"]["instancetype"]["revisionName"],
            CR_INSTANCETYPE
        );
        assert_eq!(item["spec"]["preference"]["revisionName"], CR_PREFERENCE);
        let original = read(&fixture("cluster/vm-fedora-web-01.json"));
        // Upstream's Go type gives the DataVolume template's metadata a null creationTimestamp.
        let expected = match mode {
            Mode::Upstream => {
                with_go_zero_values(original, &["/spec/dataVolumeTemplates/0/metadata"], false)
            }
            Mode::Extended => original,
        };
        assert_eq!(
            without(
                item.clone(),
                &[
                    "/spec/instancetype/revisionName",
                    "/spec/preference/revisionName"
                ]
            ),
            expected,
            "{mode:?}: nothing else changes, status included"
        );
    }
}

#[test]
fn running_vm_backup_without_pods_is_refused() {
    for mode in BOTH {
        let e = backup(
            mode,
            "backup-virtualmachine-action",
            "cluster/vm-fedora-web-01.json",
            "backup-selected-resources-no-pods.json",
        )
        .error();
        match mode {
            Mode::Upstream => assert_eq!(e, "VM cannot be safely backed up"),
            Mode::Extended => {
                assert!(e.starts_with("VM cannot be safely backed up: VirtualMachine vm-workloads/fedora-web-01 is running"), "{e}");
                assert!(e.contains("include pods in the backup"), "{e}");
            }
        }
    }
}

/// A Backup whose resource policy (tests/fixtures/kubevirt/policy) excludes pods, its spec naming no
/// resources: upstream reads only the spec and lets the running VM through; extended reads the policy
/// as Velero does and refuses, as for a spec that excludes pods (docs/kubevirt.md#s4-1).
#[test]
fn running_vm_backup_whose_resource_policy_excludes_pods() {
    let with_policy = |mode| {
        let run = Run::new("kubevirt-velero-plugin/backup-virtualmachine-action")
            .fixtures(fixture(""))
            .item(fixture("cluster/vm-fedora-web-01.json"))
            .path("--backup", "velero/backup-policy-no-pods.json")
            .cluster(&["cluster", "policy"]);
        in_mode(mode, run).output()
    };
    let upstream = with_policy(Mode::Upstream);
    assert!(
        upstream.status.success(),
        "{}",
        String::from_utf8_lossy(&upstream.stderr)
    );
    let extended = with_policy(Mode::Extended);
    let e = String::from_utf8_lossy(&extended.stderr);
    assert!(!extended.status.success(), "{e}");
    assert!(
        e.contains(
            "VM cannot be safely backed up: VirtualMachine vm-workloads/fedora-web-01 is running"
        ),
        "{e}"
    );
    assert!(e.contains("include pods in the backup"), "{e}");
    // Without the policy ConfigMap in the cluster, extended mode names it and says what to do.
    let run = Run::new("kubevirt-velero-plugin/backup-virtualmachine-action")
        .fixtures(fixture(""))
        .item(fixture("cluster/vm-fedora-web-01.json"))
        .path("--backup", "velero/backup-policy-no-pods.json")
        .cluster(&["cluster"]);
    let missing = in_mode(Mode::Extended, run).output();
    let e = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success(), "{e}");
    assert!(
        e.contains("resource policy ConfigMap velero/vm-backup-policy"),
        "{e}"
    );
}

#[test]
fn running_vm_metadata_only_backup_skips_the_volume_checks() {
    for mode in BOTH {
        let result = backup(
            mode,
            "backup-virtualmachine-action",
            "cluster/vm-fedora-web-01.json",
            "backup-metadata-only.json",
        )
        .done();
        assert_eq!(extras(&result), fedora_vm_backup_items(mode), "{mode:?}");
        assert_eq!(
            result["item"]["spec"]["instancetype"]["revisionName"],
            CR_INSTANCETYPE
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Backup of VMIs (checklist 112)

#[test]
fn owned_vmi_is_marked_for_the_restore_to_skip() {
    for mode in BOTH {
        let result = backup(
            mode,
            "backup-virtualmachineinstance-action",
            "cluster/vmi-fedora-web-01.json",
            "backup-nightly.json",
        )
        .done();
        assert_eq!(extras(&result), fedora_vmi_backup_items(mode), "{mode:?}");
        let item = &result["item"];
        assert_eq!(
            annotation(item, "cdi.kubevirt.io/velero.isOwned"),
            Some("true")
        );
        let original = read(&fixture("cluster/vmi-fedora-web-01.json"));
        assert_eq!(
            without(
                item.clone(),
                &["/metadata/annotations/cdi.kubevirt.io~1velero.isOwned"]
            ),
            without(original, &[])
        );
    }
}

#[test]
fn owned_vmi_backup_without_pods_is_refused() {
    for mode in BOTH {
        let e = backup(
            mode,
            "backup-virtualmachineinstance-action",
            "cluster/vmi-fedora-web-01.json",
            "backup-selected-resources-no-pods.json",
        )
        .error();
        assert!(
            e.starts_with("VM is running but launcher pod is not included in the backup"),
            "{e}"
        );
        assert_eq!(
            mode == Mode::Upstream,
            e == "VM is running but launcher pod is not included in the backup"
        );
    }
}

#[test]
fn standalone_vmi_backup_names_its_pod_pvc_and_secret() {
    for mode in BOTH {
        let result = backup(
            mode,
            "backup-virtualmachineinstance-action",
            "cluster/vmi-batch-worker-7.json",
            "backup-nightly.json",
        )
        .done();
        assert_eq!(extras(&result), batch_worker_vmi_backup_items());
        assert_eq!(
            result["item"],
            read(&fixture("cluster/vmi-batch-worker-7.json")),
            "no isOwned annotation"
        );
    }
}

#[test]
fn replica_set_vmi_fails_upstream_and_is_recognised_extended() {
    let e = backup(
        Mode::Upstream,
        "backup-virtualmachineinstance-action",
        "cluster/vmi-web-replica-8kq2f.json",
        "backup-nightly.json",
    )
    .error();
    assert_eq!(
        e,
        "virtualmachines.kubevirt.io \"web-replica-8kq2f\" not found"
    );
    let result = backup(
        Mode::Extended,
        "backup-virtualmachineinstance-action",
        "cluster/vmi-web-replica-8kq2f.json",
        "backup-nightly.json",
    )
    .done();
    assert_eq!(
        annotation(&result["item"], "cdi.kubevirt.io/velero.isOwned"),
        Some("true")
    );
    assert_eq!(extras(&result), replica_vmi_backup_items());
}

// ---------------------------------------------------------------------------------------------
// Backup of the stopped Windows VM (what upstream does not follow)

#[test]
fn stopped_windows_vm_backup() {
    for mode in BOTH {
        let result = backup(
            mode,
            "backup-virtualmachine-action",
            "cluster/vm-win2k22-sql.json",
            "backup-nightly.json",
        )
        .done();
        let want = win2k22_vm_backup_items(mode);
        assert_eq!(extras(&result), want, "{mode:?}");
        let original = read(&fixture("cluster/vm-win2k22-sql.json"));
        let expected = match mode {
            Mode::Upstream => {
                with_go_zero_values(original, &["/spec/dataVolumeTemplates/0/metadata"], false)
            }
            Mode::Extended => original,
        };
        assert_eq!(
            result["item"], expected,
            "{mode:?}: unchanged but for Go's zero values"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Backup of DataVolumes, PVCs and the VolumeSnapshot

/// Runs Velero's sequence for a PVC (backup-datavolume-action, then backup-pvc-action on its output)
/// and returns the final item and both actions' additional items.
fn backup_pvc(mode: Mode, item: &str, scratch: &Path) -> (Value, Vec<String>) {
    let first = backup(
        mode,
        "backup-datavolume-action",
        item,
        "backup-nightly.json",
    )
    .done();
    let between = scratch.join("after-datavolume-action.json");
    std::fs::write(&between, first["item"].to_string()).unwrap();
    let second = run(
        mode,
        "backup-pvc-action",
        &between,
        "--backup",
        "velero/backup-nightly.json",
    )
    .done();
    let mut all = extras(&first);
    all.extend(extras(&second));
    (second["item"].clone(), all)
}

#[test]
fn data_volumes_record_whether_their_import_finished() {
    for mode in BOTH {
        let done = backup(
            mode,
            "backup-datavolume-action",
            "cluster/dv-fedora-web-01-rootdisk.json",
            "backup-nightly.json",
        )
        .done();
        assert_eq!(
            annotation(&done["item"], "cdi.kubevirt.io/storage.prePopulated"),
            Some("fedora-web-01-rootdisk")
        );
        assert_eq!(
            extras(&done),
            expected(
                mode,
                &["persistentvolumeclaims vm-workloads/fedora-web-01-rootdisk"],
                &["datasources.cdi.kubevirt.io kubevirt-os-images/fedora"]
            )
        );
        let importing = backup(
            mode,
            "backup-datavolume-action",
            "cluster/dv-scratch-import.json",
            "backup-nightly.json",
        )
        .done();
        assert_eq!(
            importing["item"],
            read(&fixture("cluster/dv-scratch-import.json"))
        );
        assert_eq!(
            extras(&importing),
            expected(
                mode,
                &[],
                &[
                    "secrets vm-workloads/image-mirror-credentials",
                    "configmaps vm-workloads/image-mirror-ca"
                ]
            )
        );
    }
}

#[test]
fn pvcs_carry_their_uid_and_population_state() {
    let scratch = tempfile::tempdir().unwrap();
    for mode in BOTH {
        for (file, uid, annotations) in [
            (
                "pvc-fedora-web-01-rootdisk.json",
                "e8f3a6c2-5b19-4e7d-9c04-2a7b1d6e8f53",
                vec![(
                    "cdi.kubevirt.io/storage.populatedFor",
                    "fedora-web-01-rootdisk",
                )],
            ),
            (
                "pvc-scratch-import.json",
                "16b9d4e7-2a8c-4f05-b3e1-5d7c0a4f9e28",
                vec![("kvp.kubevirt.io/storage.inprogress", "scratch-import")],
            ),
            (
                "pvc-web-content.json",
                "3a9d7e15-c2f4-4b86-8e31-7d5f0a2c9b64",
                vec![("velero.kubevirt.io/original-pvc-uid", "legacy-archive-0042")],
            ),
            (
                "pvc-web-logs.json",
                "4b0e8f26-d3a5-4c97-9f42-8e6a1b3d0c75",
                vec![],
            ),
            (
                "pvc-persistent-state-for-fedora-web-01.json",
                "62c1b8e4-0f7a-4d93-b5e2-8c4a1f6d3e07",
                vec![],
            ),
            (
                "pvc-batch-scratch-7.json",
                "70f4c2a9-6b18-4d3e-a7c5-9e2d8b0f1a36",
                vec![],
            ),
        ] {
            let (item, additional) = backup_pvc(mode, &format!("cluster/{file}"), scratch.path());
            assert!(additional.is_empty(), "{file}");
            assert_eq!(
                label(&item, "velero.kubevirt.io/pvc-uid"),
                Some(uid),
                "{file}"
            );
            let original = read(&fixture(&format!("cluster/{file}")));
            let mut expected_item = original.clone();
            expected_item["metadata"]["labels"]["velero.kubevirt.io/pvc-uid"] = Value::from(uid);
            for (key, value) in &annotations {
                expected_item["metadata"]["annotations"][*key] = Value::from(*value);
            }
            assert_eq!(
                item, expected_item,
                "{mode:?} {file}: only the documented keys change"
            );
        }
    }
}

#[test]
fn volume_snapshot_carries_its_source_pvc_uid() {
    for mode in BOTH {
        let result = backup(
            mode,
            "backup-volumesnapshot-action",
            "cluster/volumesnapshot-fedora-web-01-rootdisk.json",
            "backup-nightly.json",
        )
        .done();
        let item = &result["item"];
        assert_eq!(
            label(item, "velero.kubevirt.io/pvc-uid"),
            Some("e8f3a6c2-5b19-4e7d-9c04-2a7b1d6e8f53")
        );
        assert_eq!(
            label(item, "velero.io/backup-name"),
            Some("nightly-2026-05-02")
        );
        assert!(extras(&result).is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Restore (checklist 113)

const ORIGINAL_VM_UUID: &str = "6a1f9e3b-2d4c-5b8a-9e7f-0c3d2b1a4f68";

#[test]
fn vm_restore_without_labels_changes_nothing() {
    for mode in BOTH {
        let input = fixture("restore-inputs/vm-fedora-web-01.restore-input.json");
        let result = restore(mode, "restore-vm-action", &input, "restore-default.json").done();
        assert_eq!(result["skipRestore"], false);
        // Velero removed the creationTimestamp and the status; upstream's Go type writes them back
        // as null and {} (its template's metadata already has the null).
        let expected = match mode {
            Mode::Upstream => with_go_zero_values(
                read(&input),
                &["/metadata", "/spec/dataVolumeTemplates/0/metadata"],
                true,
            ),
            Mode::Extended => read(&input),
        };
        assert_eq!(result["item"], expected, "{mode:?}");
        assert_eq!(extras(&result), fedora_vm_restore_items(mode), "{mode:?}");
    }
}

#[test]
fn vm_restore_as_dr_copy_halts_and_gets_a_new_identity() {
    for mode in BOTH {
        let input = fixture("restore-inputs/vm-fedora-web-01.restore-input.json");
        let result = restore(mode, "restore-vm-action", &input, "restore-dr-copy.json").done();
        assert_eq!(result["skipRestore"], false);
        let (item, original) = (&result["item"], read(&input));
        assert_eq!(item["spec"]["runStrategy"], "Halted");
        assert!(item["spec"].get("running").is_none());
        let domain = &item["spec"]["template"]["spec"]["domain"];
        for interface in domain["devices"]["interfaces"].as_array().unwrap() {
            assert!(interface.get("macAddress").is_none(), "{interface}");
        }
        let uuid = domain["firmware"]["uuid"].as_str().unwrap();
        assert!(
            uuid.len() == 36 && uuid != ORIGINAL_VM_UUID && uuid.as_bytes()[14] == b'4',
            "{uuid}"
        );
        assert_eq!(
            domain["firmware"]["bootloader"],
            original["spec"]["template"]["spec"]["domain"]["firmware"]["bootloader"]
        );
        assert_eq!(
            extras(&result),
            fedora_vm_restore_items(mode),
            "{mode:?}: still in namespace vm-workloads"
        );
    }
}

/// The firmware UUID of a `run` of the DR-copy restore of the running VM, with `extra` arguments.
fn dr_copy_firmware_uuid(extra: &[&str]) -> (Value, String) {
    let (input, restore) = (
        fixture("restore-inputs/vm-fedora-web-01.restore-input.json"),
        fixture("velero/restore-dr-copy.json"),
    );
    let mut args = vec![
        "run".to_string(),
        "--action".into(),
        "kubevirt-velero-plugin/restore-vm-action".into(),
        "--item".into(),
        input.display().to_string(),
        "--restore".into(),
        restore.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = velero_wasm(Mode::Extended, &args);
    assert!(output.status.success(), "{}", support::stderr(&output));
    let result = support::stdout_json(&output);
    let uuid = result["item"]["spec"]["template"]["spec"]["domain"]["firmware"]["uuid"]
        .as_str()
        .unwrap()
        .to_string();
    (result, uuid)
}

#[test]
fn a_recorded_dr_copy_restore_replays_with_the_same_new_firmware_uuid() {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("dr-copy.jsonl");
    let cluster = fixture("cluster").display().to_string();
    let (recorded, uuid) =
        dr_copy_firmware_uuid(&["--cluster", &cluster, "--record", record.to_str().unwrap()]);
    // The 16 random bytes the UUID is made of are in the recording.
    let random: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["capability"] == "random")
        .collect();
    assert_eq!(random.len(), 1, "{random:?}");
    assert_eq!(random[0]["call"], serde_json::json!({"len": 16}));

    let (replayed, replayed_uuid) = dr_copy_firmware_uuid(&["--replay", record.to_str().unwrap()]);
    assert_eq!(replayed_uuid, uuid);
    assert_eq!(replayed, recorded);
    // Not chance: a run that is not replayed draws another.
    let (_, fresh) = dr_copy_firmware_uuid(&["--cluster", &cluster]);
    assert_ne!(fresh, uuid);
}

#[test]
fn owned_vmi_and_kubevirt_pods_are_not_restored() {
    for mode in BOTH {
        for restore_object in ["restore-default.json", "restore-dr-copy.json"] {
            let vmi = restore(
                mode,
                "restore-vmi-action",
                &fixture("restore-inputs/vmi-fedora-web-01.restore-input.json"),
                restore_object,
            )
            .done();
            assert_eq!(vmi["skipRestore"], true);
            for pod in [
                "pod-virt-launcher-fedora-web-01.json",
                "pod-virt-launcher-batch-worker-7.json",
                "pod-hp-volume-fedora-web-01.json",
            ] {
                let result = restore(
                    mode,
                    "restore-pod-action",
                    &fixture(&format!("cluster/{pod}")),
                    restore_object,
                )
                .done();
                assert_eq!(result["skipRestore"], true, "{pod}");
            }
        }
    }
}

#[test]
fn standalone_vmi_restore_drops_reserved_labels() {
    for mode in BOTH {
        let input = fixture("restore-inputs/vmi-batch-worker-7.restore-input.json");
        for restore_object in ["restore-default.json", "restore-dr-copy.json"] {
            let result = restore(mode, "restore-vmi-action", &input, restore_object).done();
            assert_eq!(result["skipRestore"], false);
            let labels = &result["item"]["metadata"]["labels"];
            assert_eq!(
                labels,
                &serde_json::json!({"workload": "batch", "batch.example.internal/shard": "7"})
            );
            assert_eq!(
                extras(&result),
                [
                    "persistentvolumeclaims vm-workloads/batch-scratch-7",
                    "secrets vm-workloads/batch-worker-7-userdata"
                ]
            );
        }
    }
}

#[test]
fn standalone_vmi_dr_copy_keeps_its_identity_upstream_and_gets_a_new_one_extended() {
    let input = fixture("restore-inputs/vmi-batch-worker-7.restore-input.json");
    let upstream = restore(
        Mode::Upstream,
        "restore-vmi-action",
        &input,
        "restore-dr-copy.json",
    )
    .done();
    let domain = &upstream["item"]["spec"]["domain"];
    assert_eq!(
        domain["devices"]["interfaces"][0]["macAddress"],
        "02:9a:3c:00:02:11"
    );
    assert_eq!(
        domain["firmware"]["uuid"],
        "0f4e8d2c-6b1a-5c9e-8d3f-2a7b6c5d4e19"
    );

    let extended = restore(
        Mode::Extended,
        "restore-vmi-action",
        &input,
        "restore-dr-copy.json",
    )
    .done();
    let domain = &extended["item"]["spec"]["domain"];
    assert!(domain["devices"]["interfaces"][0]
        .get("macAddress")
        .is_none());
    let uuid = domain["firmware"]["uuid"].as_str().unwrap();
    assert!(uuid.len() == 36 && uuid != "0f4e8d2c-6b1a-5c9e-8d3f-2a7b6c5d4e19");
}

/// Backs up a fixture with `action` and writes the backed-up item to `scratch`, for a restore test.
fn backed_up(mode: Mode, actions: &[&str], item: &str, scratch: &Path) -> PathBuf {
    let mut current = fixture(item);
    for (i, action) in actions.iter().enumerate() {
        let result = run(
            mode,
            action,
            &current,
            "--backup",
            "velero/backup-nightly.json",
        )
        .done();
        current = scratch.join(format!("{i}-{}", item.replace('/', "-")));
        std::fs::write(&current, result["item"].to_string()).unwrap();
    }
    current
}

#[test]
fn pvc_and_snapshot_restores_undo_the_backup_labels() {
    let scratch = tempfile::tempdir().unwrap();
    let pvc_actions = ["backup-datavolume-action", "backup-pvc-action"];
    for mode in BOTH {
        for restore_object in ["restore-default.json", "restore-dr-copy.json"] {
            let importing = backed_up(
                mode,
                &pvc_actions,
                "cluster/pvc-scratch-import.json",
                scratch.path(),
            );
            assert_eq!(
                restore(mode, "restore-pvc-action", &importing, restore_object).done()
                    ["skipRestore"],
                true
            );

            let root_disk = backed_up(
                mode,
                &pvc_actions,
                "cluster/pvc-fedora-web-01-rootdisk.json",
                scratch.path(),
            );
            let result = restore(mode, "restore-pvc-action", &root_disk, restore_object).done();
            assert_eq!(result["skipRestore"], false);
            assert_eq!(label(&result["item"], "velero.kubevirt.io/pvc-uid"), None);
            assert_eq!(
                annotation(&result["item"], "cdi.kubevirt.io/storage.populatedFor"),
                Some("fedora-web-01-rootdisk")
            );

            let content = backed_up(
                mode,
                &pvc_actions,
                "cluster/pvc-web-content.json",
                scratch.path(),
            );
            let result = restore(mode, "restore-pvc-action", &content, restore_object).done();
            assert_eq!(
                label(&result["item"], "velero.kubevirt.io/pvc-uid"),
                Some("legacy-archive-0042")
            );
            assert_eq!(
                annotation(&result["item"], "velero.kubevirt.io/original-pvc-uid"),
                None
            );

            let snapshot = backed_up(
                mode,
                &["backup-volumesnapshot-action"],
                "cluster/volumesnapshot-fedora-web-01-rootdisk.json",
                scratch.path(),
            );
            let result = restore(
                mode,
                "restore-volumesnapshot-action",
                &snapshot,
                restore_object,
            )
            .done();
            assert_eq!(result["skipRestore"], false);
            assert_eq!(label(&result["item"], "velero.kubevirt.io/pvc-uid"), None);
            assert_eq!(
                label(&result["item"], "velero.io/backup-name"),
                Some("nightly-2026-05-02")
            );
        }
    }
}

/// A PVC and a VolumeSnapshot restored as Velero hands them over (no creationTimestamp, no status):
/// upstream decodes both into their Go types and encodes them again, so upstream mode writes
/// `creationTimestamp: null`, the PVC's `status: {}` (the snapshot's status is a pointer, left out) and
/// leaves out the label map the action emptied; extended mode returns what it was given, edited.
#[test]
fn pvc_and_snapshot_restored_in_upstream_mode_carry_the_zero_values_of_upstreams_go_types() {
    let scratch = tempfile::tempdir().unwrap();
    for mode in BOTH {
        // No labels of its own: after the backup its only label is the UID one.
        let stored = backed_up(
            mode,
            &["backup-datavolume-action", "backup-pvc-action"],
            "cluster/pvc-persistent-state-for-win2k22-sql.json",
            scratch.path(),
        );
        let input = scratch.path().join("pvc.restore-input.json");
        let handed_over = as_velero_restores_it(read(&stored));
        std::fs::write(&input, handed_over.to_string()).unwrap();
        let result = restore(mode, "restore-pvc-action", &input, "restore-default.json").done();
        let mut expected = without(handed_over.clone(), &["/metadata/labels"]);
        match mode {
            Mode::Upstream => expected = with_go_zero_values(expected, &["/metadata"], true),
            Mode::Extended => expected["metadata"]["labels"] = serde_json::json!({}),
        }
        assert_eq!(result["item"], expected, "{mode:?}");

        let stored = backed_up(
            mode,
            &["backup-volumesnapshot-action"],
            "cluster/volumesnapshot-fedora-web-01-rootdisk.json",
            scratch.path(),
        );
        let input = scratch.path().join("snapshot.restore-input.json");
        let handed_over = as_velero_restores_it(read(&stored));
        std::fs::write(&input, handed_over.to_string()).unwrap();
        let result = restore(
            mode,
            "restore-volumesnapshot-action",
            &input,
            "restore-default.json",
        )
        .done();
        let mut expected = without(
            handed_over,
            &["/metadata/labels/velero.kubevirt.io~1pvc-uid"],
        );
        if mode == Mode::Upstream {
            expected = with_go_zero_values(expected, &["/metadata"], false);
        }
        assert_eq!(result["item"], expected, "{mode:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Item blocks (Velero 1.15 and later): the backup graph as related items, so that the launcher
// pod's freeze hooks run around the backup of the VM's disks (actions/kubevirt/README.md)

const BLOCK_VM: &str = "block-vm-action";
const BLOCK_VMI: &str = "block-vmi-action";
const BLOCK_POD: &str = "block-launcher-pod-action";

/// Every fixture pod the pod item-block action applies to, with its related items (extended mode:
/// the launcher pod's VMI, the hotplug pod's launcher pod).
fn fixture_pod_blocks() -> Vec<(&'static str, Vec<String>)> {
    vec![
        (
            "cluster/pod-virt-launcher-fedora-web-01.json",
            vec!["virtualmachineinstances.kubevirt.io vm-workloads/fedora-web-01".into()],
        ),
        (
            "cluster/pod-virt-launcher-batch-worker-7.json",
            vec!["virtualmachineinstances.kubevirt.io vm-workloads/batch-worker-7".into()],
        ),
        (
            "cluster/pod-hp-volume-fedora-web-01.json",
            vec!["pods vm-workloads/virt-launcher-fedora-web-01-q7m2x".into()],
        ),
    ]
}

/// `run` of an item-block action on a fixture item, with the nightly Backup.
fn block(mode: Mode, action: &str, item: &str) -> Outcome {
    backup(mode, action, item, "backup-nightly.json")
}

#[test]
fn every_fixture_vm_is_grouped_with_its_backup_graph_in_order() {
    for mode in BOTH {
        for (vm, want) in fixture_vm_blocks(mode) {
            let result = block(mode, BLOCK_VM, vm).done();
            assert_eq!(related(&result), want, "{mode:?} {vm}");
            assert_eq!(result["clusterWrites"], serde_json::json!([]), "{vm}");
        }
        // The same list, in the same order, as the backup action's additional items.
        let additional = extras(
            &backup(
                mode,
                "backup-virtualmachine-action",
                "cluster/vm-fedora-web-01.json",
                "backup-nightly.json",
            )
            .done(),
        );
        let grouped = related(&block(mode, BLOCK_VM, "cluster/vm-fedora-web-01.json").done());
        assert_eq!(grouped, additional, "{mode:?}");
    }
}

#[test]
fn the_running_vms_block_holds_the_launcher_pod_whose_hooks_freeze_the_guest_and_its_disks() {
    let pod = read(&fixture("cluster/pod-virt-launcher-fedora-web-01.json"));
    let annotations = &pod["metadata"]["annotations"];
    for (hook, verb) in [("pre", "--freeze"), ("post", "--unfreeze")] {
        let command = annotations[format!("{hook}.hook.backup.velero.io/command")]
            .as_str()
            .unwrap();
        assert!(
            command.contains("virt-freezer") && command.contains(verb),
            "{command}"
        );
    }
    let pod_id = format!(
        "pods vm-workloads/{}",
        pod["metadata"]["name"].as_str().unwrap()
    );
    for mode in BOTH {
        let grouped = related(&block(mode, BLOCK_VM, "cluster/vm-fedora-web-01.json").done());
        assert!(grouped.contains(&pod_id), "{mode:?}: {grouped:?}");
        for disk in [
            "persistentvolumeclaims vm-workloads/fedora-web-01-rootdisk",
            "persistentvolumeclaims vm-workloads/web-content",
            "persistentvolumeclaims vm-workloads/web-logs",
            "persistentvolumeclaims vm-workloads/persistent-state-for-fedora-web-01-x7k2p",
        ] {
            assert!(grouped.iter().any(|i| i == disk), "{mode:?}: {disk}");
        }
    }
}

#[test]
fn a_vm_whose_vmi_is_gone_is_grouped_while_its_backup_action_reports_the_missing_vmi() {
    for mode in BOTH {
        let grouped = related(&block(mode, BLOCK_VM, "cluster/vm-rhel9-cache-02.json").done());
        assert_eq!(
            grouped,
            rhel9_vm_graph(),
            "{mode:?}: no launcher pod exists"
        );
        let e = backup(
            mode,
            "backup-virtualmachine-action",
            "cluster/vm-rhel9-cache-02.json",
            "backup-nightly.json",
        )
        .error();
        let upstream = "virtualmachineinstances.kubevirt.io \"rhel9-cache-02\" not found";
        match mode {
            Mode::Upstream => assert_eq!(e, upstream),
            Mode::Extended => assert!(
                e.starts_with(upstream) && e.contains("run the backup again"),
                "{e}"
            ),
        }
    }
}

#[test]
fn a_vm_without_template_is_grouped_as_far_as_it_can_be_read_with_a_warning() {
    let scratch = tempfile::tempdir().unwrap();
    let mut vm = read(&fixture("cluster/vm-fedora-web-01.json"));
    vm["spec"].as_object_mut().unwrap().remove("template");
    let item = scratch.path().join("vm-without-template.json");
    std::fs::write(&item, vm.to_string()).unwrap();
    for mode in BOTH {
        let output = velero_wasm(
            mode,
            &[
                "run",
                "--action",
                &format!("kubevirt-velero-plugin/{BLOCK_VM}"),
                "--item",
                item.to_str().unwrap(),
                "--backup",
                fixture("velero/backup-nightly.json").to_str().unwrap(),
                "--cluster",
                fixture("cluster").to_str().unwrap(),
            ],
        );
        assert!(output.status.success(), "{}", support::stderr(&output));
        // Revisions, VMI and launcher pod; no volumes, backend or credentials without the template.
        let want = expected(
            mode,
            &fedora_vm_backup_items(Mode::Upstream)[..4]
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            &[
                "virtualmachineclusterinstancetypes.instancetype.kubevirt.io /u1.medium",
                "virtualmachinepreferences.instancetype.kubevirt.io vm-workloads/fedora-secure",
                "datasources.cdi.kubevirt.io kubevirt-os-images/fedora",
            ],
        );
        assert_eq!(related(&support::stdout_json(&output)), want, "{mode:?}");
        let stderr = support::stderr(&output);
        assert!(
            stderr.contains("misses what could not be read")
                && stderr.contains("has no spec.template"),
            "{stderr}"
        );
        let e = run(
            mode,
            "backup-virtualmachine-action",
            &item,
            "--backup",
            "velero/backup-nightly.json",
        )
        .error();
        assert!(e.contains("has no spec.template"), "{e}");
    }
}

#[test]
fn every_fixture_vmi_is_grouped_with_its_backup_graph_in_extended_mode_only() {
    for (vmi, want) in fixture_vmi_blocks() {
        let grouped = related(&block(Mode::Extended, BLOCK_VMI, vmi).done());
        assert_eq!(grouped, want, "{vmi}");
        match block(Mode::Upstream, BLOCK_VMI, vmi) {
            Outcome::Failed(2, e) => assert!(e.contains(BLOCK_VMI), "{e}"),
            other => panic!("upstream has no VMI item block, got {other:?}"),
        }
    }
    // The VM action does not apply to VMIs, nor the VMI action to VMs.
    for mode in BOTH {
        match block(mode, BLOCK_VM, "cluster/vmi-batch-worker-7.json") {
            Outcome::Failed(2, e) => assert!(e.contains("does not apply"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
    match block(Mode::Extended, BLOCK_VMI, "cluster/vm-fedora-web-01.json") {
        Outcome::Failed(2, e) => assert!(e.contains("does not apply"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_fixture_launcher_and_hotplug_pod_starts_its_vm_s_block_in_extended_mode_only() {
    for (pod, want) in fixture_pod_blocks() {
        let grouped = related(&block(Mode::Extended, BLOCK_POD, pod).done());
        assert_eq!(grouped, want, "{pod}");
        match block(Mode::Upstream, BLOCK_POD, pod) {
            Outcome::Failed(2, e) => assert!(e.contains(BLOCK_POD), "{e}"),
            other => panic!("upstream has no pod item block, got {other:?}"),
        }
    }
    match block(Mode::Extended, BLOCK_POD, "cluster/vmi-batch-worker-7.json") {
        Outcome::Failed(2, e) => assert!(e.contains("does not apply"), "{e}"),
        other => panic!("{other:?}"),
    }

    // A Backup that selects by labels: Velero would not check an owner in a block against them, so
    // the pod names nothing and the VMI's block leaves out its VM.
    let mut selecting: Value =
        serde_json::from_slice(&std::fs::read(fixture("velero/backup-nightly.json")).unwrap())
            .unwrap();
    selecting["spec"]["labelSelector"] =
        serde_json::json!({"matchLabels": {"kubevirt.io/domain": "fedora-web-01"}});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("backup-selecting.json");
    std::fs::write(&path, selecting.to_string()).unwrap();
    let with_selector = |action: &str, item: &str| {
        run(
            Mode::Extended,
            action,
            &fixture(item),
            "--backup",
            path.to_str().unwrap(),
        )
        .done()
    };
    for (pod, _) in fixture_pod_blocks() {
        assert!(related(&with_selector(BLOCK_POD, pod)).is_empty(), "{pod}");
    }
    assert_eq!(
        related(&with_selector(BLOCK_VMI, "cluster/vmi-fedora-web-01.json")),
        fedora_vmi_backup_items(Mode::Extended)
    );
}

// ---------------------------------------------------------------------------------------------
// Registration (checklist 109) and extended mode's own action

#[test]
fn upstream_mode_registers_exactly_the_twelve_upstream_actions() {
    for mode in BOTH {
        let output = velero_wasm(mode, &["actions", "--json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
        let actions: Vec<(String, String, Value)> = listed["actions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["module"] == "kubevirt")
            .map(|a| {
                (
                    a["name"].as_str().unwrap().to_string(),
                    a["veleroKind"].as_str().unwrap().to_string(),
                    a["appliesTo"].clone(),
                )
            })
            .collect();
        let mut want = vec![
            (
                "backup-datavolume-action",
                "BackupItemAction",
                vec!["PersistentVolumeClaim", "DataVolume"],
            ),
            (
                "backup-pvc-action",
                "BackupItemAction",
                vec!["PersistentVolumeClaim"],
            ),
            (
                "backup-virtualmachine-action",
                "BackupItemAction",
                vec!["VirtualMachine"],
            ),
            (
                "backup-virtualmachineinstance-action",
                "BackupItemAction",
                vec!["VirtualMachineInstance"],
            ),
            (
                "backup-volumesnapshot-action",
                "BackupItemAction",
                vec!["VolumeSnapshot"],
            ),
            (
                "restore-nad-action",
                "RestoreItemAction",
                vec!["network-attachment-definition"],
            ),
            ("restore-pod-action", "RestoreItemAction", vec!["Pod"]),
            (
                "restore-pvc-action",
                "RestoreItemAction",
                vec!["PersistentVolumeClaim"],
            ),
            (
                "restore-vm-action",
                "RestoreItemAction",
                vec!["VirtualMachine"],
            ),
            (
                "restore-vmi-action",
                "RestoreItemAction",
                vec!["VirtualMachineInstance"],
            ),
            (
                "restore-volumesnapshot-action",
                "RestoreItemAction",
                vec!["VolumeSnapshot"],
            ),
        ];
        want.push((
            "block-vm-action",
            "ItemBlockAction",
            vec!["virtualmachines.kubevirt.io"],
        ));
        if mode == Mode::Extended {
            want.push(("block-launcher-pod-action", "ItemBlockAction", vec!["pods"]));
            want.push((
                "block-vmi-action",
                "ItemBlockAction",
                vec!["virtualmachineinstances.kubevirt.io"],
            ));
            want.push(("restore-operation-action", "RestoreItemAction", vec![]));
        }
        want.sort_by_key(|(name, _, _)| *name);
        assert_eq!(actions.len(), want.len(), "{mode:?}: {actions:?}");
        for ((name, kind, applies_to), (want_name, want_kind, want_resources)) in
            actions.iter().zip(&want)
        {
            assert_eq!(name, &format!("kubevirt-velero-plugin/{want_name}"));
            assert_eq!(kind, want_kind, "{name}");
            if !want_resources.is_empty() {
                assert_eq!(
                    applies_to["includedResources"],
                    serde_json::json!(want_resources),
                    "{name}"
                );
            }
            let selector =
                if ["restore-pod-action", "block-launcher-pod-action"].contains(want_name) {
                    "kubevirt.io in (virt-launcher, hotplug-disk)"
                } else {
                    ""
                };
            assert_eq!(applies_to["labelSelector"], selector, "{name}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// NetworkAttachmentDefinitions at restore (upstream #431)

/// The `netAttachDefName` in the CNI config of a restored NetworkAttachmentDefinition (`None`: the
/// action returned the item unchanged), and the config text.
fn restored_nad(mode: Mode, item: &str, restore_file: &str) -> Option<(String, String)> {
    let done = restore(mode, "restore-nad-action", &fixture(item), restore_file).done();
    assert_eq!(done["skipRestore"], false);
    let config = done["item"]["spec"]["config"].as_str().unwrap().to_string();
    let rewritten = config != read(&fixture(item))["spec"]["config"];
    // Upstream encodes a definition it rewrote from its Go type, whose null creationTimestamp comes back.
    let expected = match mode {
        Mode::Upstream if rewritten => {
            with_go_zero_values(read(&fixture(item)), &["/metadata"], false)
        }
        _ => read(&fixture(item)),
    };
    assert_eq!(
        without(done["item"].clone(), &["/spec/config"]),
        without(expected, &["/spec/config"]),
        "{mode:?}: only spec.config changes"
    );
    if !rewritten {
        return None;
    }
    let parsed: Value = serde_json::from_str(&config).unwrap();
    Some((
        parsed["netAttachDefName"].as_str().unwrap().to_string(),
        config,
    ))
}

#[test]
fn a_network_definition_restored_into_a_mapped_namespace_names_itself_there() {
    const NAD: &str = "restore-inputs/nad-storage-vlan200.restore-input.json";
    for mode in BOTH {
        let (name, config) = restored_nad(mode, NAD, "restore-dr-copy.json").unwrap();
        assert_eq!(name, "vm-workloads-dr/storage-vlan200", "{mode:?}");
        // Upstream re-encodes the config as Go does, keys sorted; extended mode keeps their order.
        let first_keys = match mode {
            Mode::Upstream => r#"{"cniVersion":"0.3.1","mtu":1500,"name""#,
            Mode::Extended => r#"{"cniVersion":"0.3.1","name":"storage-vlan200","type""#,
        };
        assert!(config.starts_with(first_keys), "{mode:?}: {config}");
        assert_eq!(
            restored_nad(mode, NAD, "restore-default.json"),
            None,
            "{mode:?}"
        );
    }
}

#[test]
fn a_network_definition_without_net_attach_def_name_is_restored_unchanged() {
    for mode in BOTH {
        assert_eq!(
            restored_nad(
                mode,
                "restore-inputs/nad-mgmt-bridge.restore-input.json",
                "restore-dr-copy.json"
            ),
            None,
            "{mode:?}"
        );
    }
}

#[test]
fn a_network_definition_with_an_unreadable_config_fails_upstream_and_is_restored_as_is_extended() {
    let scratch = tempfile::tempdir().unwrap();
    let item = scratch.path().join("nad.json");
    std::fs::write(
        &item,
        r#"{"apiVersion":"k8s.cni.cncf.io/v1","kind":"NetworkAttachmentDefinition",
            "metadata":{"name":"broken","namespace":"vm-workloads"},
            "spec":{"config":"{\"netAttachDefName\": \"vm-workloads/broken\""}}"#,
    )
    .unwrap();
    let e = restore(
        Mode::Upstream,
        "restore-nad-action",
        &item,
        "restore-dr-copy.json",
    )
    .error();
    assert!(
        e.contains("failed to unmarshal NAD config JSON: spec.config is not JSON"),
        "{e}"
    );
    let done = restore(
        Mode::Extended,
        "restore-nad-action",
        &item,
        "restore-dr-copy.json",
    )
    .done();
    assert_eq!(done["skipRestore"], false);
    assert_eq!(done["item"], read(&item));
}

#[test]
fn the_pod_restore_selector_leaves_other_pods_alone() {
    let scratch = tempfile::tempdir().unwrap();
    let plain = scratch.path().join("pod.json");
    std::fs::write(&plain, r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"vm-workloads","labels":{}}}"#).unwrap();
    match restore(
        Mode::Upstream,
        "restore-pod-action",
        &plain,
        "restore-default.json",
    ) {
        Outcome::Failed(2, e) => {
            assert!(e.contains("does not apply") && e.contains("labels"), "{e}")
        }
        other => panic!("a pod without KubeVirt labels must not match, got {other:?}"),
    }
}

#[test]
fn kubevirt_operation_requests_are_not_restored_in_extended_mode() {
    let scratch = tempfile::tempdir().unwrap();
    let request = scratch.path().join("vmrestore.json");
    std::fs::write(
        &request,
        r#"{"apiVersion":"snapshot.kubevirt.io/v1beta1","kind":"VirtualMachineRestore",
            "metadata":{"name":"roll-back","namespace":"vm-workloads"},
            "spec":{"target":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"fedora-web-01"},"virtualMachineSnapshotName":"s1"}}"#,
    )
    .unwrap();
    let result = restore(
        Mode::Extended,
        "restore-operation-action",
        &request,
        "restore-default.json",
    )
    .done();
    assert_eq!(result["skipRestore"], true);
    match restore(
        Mode::Upstream,
        "restore-operation-action",
        &request,
        "restore-default.json",
    ) {
        Outcome::Failed(2, e) => assert!(e.contains("restore-operation-action"), "{e}"),
        other => panic!("upstream mode has no such action, got {other:?}"),
    }
}

#[test]
fn changed_block_tracking_backups_and_trackers_are_not_restored_in_extended_mode() {
    let scratch = tempfile::tempdir().unwrap();
    for (kind, spec) in [
        (
            "VirtualMachineBackup",
            r#"{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"fedora-web-01"},"pvcName":"backup-target"}"#,
        ),
        (
            "VirtualMachineBackupTracker",
            r#"{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"fedora-web-01"}}"#,
        ),
    ] {
        let item = scratch.path().join(format!("{kind}.json"));
        std::fs::write(
            &item,
            format!(
                r#"{{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"{kind}",
                    "metadata":{{"name":"nightly","namespace":"vm-workloads"}},"spec":{spec}}}"#
            ),
        )
        .unwrap();
        let result = restore(
            Mode::Extended,
            "restore-operation-action",
            &item,
            "restore-default.json",
        )
        .done();
        assert_eq!(result["skipRestore"], true, "{kind}");
    }
}

#[test]
fn a_bad_mode_setting_says_how_to_fix_it() {
    let modules = module_dir("Upstream");
    let output = Run::new("kubevirt-velero-plugin/backup-pvc-action")
        .modules(modules.path())
        .item(fixture("cluster/pvc-web-logs.json"))
        .path("--backup", fixture("velero/backup-nightly.json"))
        .output();
    // The manifest's settings are checked against the ones kubevirt declares when it loads, so the
    // module is refused there, naming the value and the nearest allowed one (the stock module serves).
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("settings.mode: \"Upstream\" is not one of extended, upstream")
            && stderr.contains("did you mean \"upstream\"?"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// The same scenario the way Velero runs it: over the plugin protocol, against a live API server

/// Velero starts the plugin, lists its actions and runs the VM backup action over gRPC; the action
/// reads the cluster through the live backend (the kube client, over HTTP, against a loopback API
/// server serving the fixture cluster) and returns what `run --cluster` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_vm_backup_over_velero_grpc_against_a_live_api_server() {
    use support::apiserver::ApiServer;
    use support::plugin::{binary, Plugin};
    use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
    use velero_wasm::plugin::proto::generated::ExecuteRequest;

    const ACTION: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
    let server = ApiServer::start(&[&fixture("cluster")]);
    let scratch = tempfile::tempdir().unwrap();
    let kubeconfig = scratch.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    // Read views off: this checks each read's own request (A1, A6); with views, a backup's reads are
    // namespace lists (tests/read_views.rs, docs/read-views.md).
    let plugin = Plugin::start_as(
        binary(),
        &["--log-level", "info"],
        &[
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_READ_VIEWS", "off"),
        ],
    );

    let listed = plugin.list().await;
    assert!(
        listed
            .iter()
            .any(|p| p.kind == "BackupItemAction" && p.name == ACTION),
        "{listed:?}"
    );

    let response = BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: ACTION.into(),
            item: std::fs::read(fixture("cluster/vm-fedora-web-01.json")).unwrap(),
            backup: std::fs::read(fixture("velero/backup-nightly.json")).unwrap(),
        })
        .await
        .expect("the backup action succeeds over gRPC")
        .into_inner();
    let extras: Vec<String> = response
        .additional_items
        .iter()
        .map(|id| {
            let resource = if id.group.is_empty() {
                id.resource.clone()
            } else {
                format!("{}.{}", id.resource, id.group)
            };
            format!("{resource} {}/{}", id.namespace, id.name)
        })
        .collect();
    assert_eq!(extras, fedora_vm_backup_items(Mode::Extended));
    let item: Value = serde_json::from_slice(&response.item).unwrap();
    assert_eq!(
        item["spec"]["instancetype"]["revisionName"],
        CR_INSTANCETYPE
    );
    assert_eq!(item["spec"]["preference"]["revisionName"], CR_PREFERENCE);

    // The reads went to the API server over HTTP: the VMI (A1) and the launcher pods (A6).
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert!(
        paths
            .iter()
            .any(|p| p == "/apis/kubevirt.io/v1/namespaces/vm-workloads/virtualmachineinstances/fedora-web-01"),
        "{paths:#?}"
    );
    assert!(
        paths
            .iter()
            .any(|p| p == "/api/v1/namespaces/vm-workloads/pods"),
        "{paths:#?}"
    );
    plugin.shutdown().await;
}

/// Velero's way of writing a resource identifier: `resource.group namespace/name`.
fn grpc_ids(ids: &[velero_wasm::plugin::proto::generated::ResourceIdentifier]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let resource = if id.group.is_empty() {
                id.resource.clone()
            } else {
                format!("{}.{}", id.resource, id.group)
            };
            format!("{resource} {}/{}", id.namespace, id.name)
        })
        .collect()
}

/// The start-up line of a plugin session, which names the kinds listed to Velero.
fn start_up_line(session: &support::plugin::Session) -> serde_json::Map<String, Value> {
    session
        .log_lines()
        .into_iter()
        .find(|l| l["@message"] == "serving Velero's plugin protocol")
        .unwrap_or_else(|| panic!("no start-up line in {}", session.stderr))
}

/// Velero 1.15 lists the item-block actions, asks what they apply to and calls `GetRelatedItems` for
/// every VM and VMI it backs up; the actions read the cluster through the live backend (a loopback
/// API server serving the fixture cluster) and answer what `run --cluster` answers, in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_blocks_over_velero_grpc_against_a_live_api_server() {
    use support::apiserver::ApiServer;
    use support::plugin::{binary, Plugin};
    use velero_wasm::plugin::proto::v1::item_block_action_client::ItemBlockActionClient;
    use velero_wasm::plugin::proto::v1::{
        ItemBlockActionAppliesToRequest, ItemBlockActionGetRelatedItemsRequest,
    };

    let server = ApiServer::start(&[&fixture("cluster")]);
    let scratch = tempfile::tempdir().unwrap();
    let kubeconfig = scratch.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let backup = std::fs::read(fixture("velero/backup-nightly.json")).unwrap();
    for mode in BOTH {
        let mut env = vec![("KUBECONFIG", kubeconfig.to_str().unwrap())];
        if mode == Mode::Upstream {
            env.push(("VELERO_WASM_MODULES", upstream_modules().to_str().unwrap()));
        }
        let plugin = Plugin::start_as(binary(), &["--log-level", "info"], &env);
        let action = |name: &str| format!("kubevirt-velero-plugin/{name}");

        let listed = plugin.listed().await;
        let block = |name: &str| ("ItemBlockAction".to_string(), action(name));
        assert!(listed.contains(&block(BLOCK_VM)), "{mode:?}: {listed:?}");
        assert_eq!(
            listed.contains(&block(BLOCK_VMI)),
            mode == Mode::Extended,
            "{listed:?}"
        );
        assert_eq!(
            listed.contains(&block(BLOCK_POD)),
            mode == Mode::Extended,
            "{listed:?}"
        );

        let mut client = ItemBlockActionClient::new(plugin.channel().await);
        let selector = client
            .applies_to(ItemBlockActionAppliesToRequest {
                plugin: action(BLOCK_VM),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector
            .unwrap();
        assert_eq!(selector.included_resources, ["virtualmachines.kubevirt.io"]);
        if mode == Mode::Extended {
            let selector = client
                .applies_to(ItemBlockActionAppliesToRequest {
                    plugin: action(BLOCK_POD),
                })
                .await
                .unwrap()
                .into_inner()
                .resource_selector
                .unwrap();
            assert_eq!(selector.included_resources, ["pods"]);
            assert_eq!(
                selector.selector,
                "kubevirt.io in (virt-launcher, hotplug-disk)"
            );
        }

        let mut blocks: Vec<(&str, &str, Vec<String>)> = fixture_vm_blocks(mode)
            .into_iter()
            .map(|(item, want)| (BLOCK_VM, item, want))
            .collect();
        blocks.extend(
            fixture_vmi_blocks()
                .into_iter()
                .map(|(item, want)| (BLOCK_VMI, item, want)),
        );
        blocks.extend(
            fixture_pod_blocks()
                .into_iter()
                .map(|(item, want)| (BLOCK_POD, item, want)),
        );
        for (name, item, want) in blocks {
            let answer = client
                .get_related_items(ItemBlockActionGetRelatedItemsRequest {
                    plugin: action(name),
                    item: std::fs::read(fixture(item)).unwrap(),
                    backup: backup.clone(),
                })
                .await;
            match (mode, name) {
                (Mode::Upstream, BLOCK_VMI | BLOCK_POD) => {
                    assert!(answer.is_err(), "upstream has no {name}: {answer:?}")
                }
                _ => assert_eq!(
                    grpc_ids(&answer.unwrap().into_inner().related_items),
                    want,
                    "{mode:?} {item}"
                ),
            }
        }
        drop(client);

        let session = plugin.shutdown().await;
        let line = start_up_line(&session);
        assert_eq!(line["@level"], "info");
        assert_eq!(
            line["kinds"],
            "BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction,ItemBlockAction"
        );
    }
    // The launcher pods were listed from the API server, over HTTP.
    assert!(server
        .requests()
        .iter()
        .any(|r| r.path == "/api/v1/namespaces/vm-workloads/pods"));
}

/// Velero 1.14 refuses a plugin that lists an ItemBlockAction: with `VELERO_WASM_KINDS` naming the
/// other kinds, the VM item block is not listed (the backup action still is), and the start-up line
/// says which kinds were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn for_velero_1_14_the_item_block_is_left_out_and_the_start_up_line_says_so() {
    use support::plugin::{binary, Plugin};

    const KINDS_1_14: &str =
        "BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction";
    let plugin = Plugin::start_as(
        binary(),
        &["--log-level", "info"],
        &[("VELERO_WASM_KINDS", KINDS_1_14)],
    );
    let listed = plugin.listed().await;
    assert!(listed.contains(&(
        "BackupItemAction".to_string(),
        "kubevirt-velero-plugin/backup-virtualmachine-action".to_string()
    )));
    assert!(
        !listed.iter().any(|(kind, _)| kind == "ItemBlockAction"),
        "{listed:?}"
    );
    let session = plugin.shutdown().await;
    let line = start_up_line(&session);
    assert_eq!(line["@level"], "info");
    assert_eq!(line["kinds"], KINDS_1_14);
}
