//! The hcp and agent components (HyperShift hosted control planes) through `velero-wasm run`, against
//! the fixture clusters of `tests/fixtures/hcp/`: one test per item of the behaviour spec's checklist
//! (docs/hcp.md#s10, named `cNN_…`), then the etcd snapshot in both wait
//! modes (`etcd-wait = "async"`, the stock setting, and `"blocking"` from a module directory), with
//! HCPEtcdBackups that complete, fail and never complete.
//!
//! Progress is asked from a new process holding only the operation id (`run --operation-id`), as
//! Velero does after a restart; the asynchronous flow also runs end to end over Velero's gRPC
//! protocol against a loopback API server whose "HyperShift controller" moves the HCPEtcdBackup on.
//! The restore's URLs are the spec's known-answer vectors (docs/signing.md#s6-10) for a fixed clock (`--now`); the
//! STS and Entra ID exchanges go to loopback servers that answer like the real endpoints.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::loopback::{Loopback, Reply};
use support::run::{failure, Run};

const BACKUP: &str = "hypershift-oadp-plugin/backup-item-action";
const RESTORE: &str = "hypershift-oadp-plugin/restore-item-action";
const AGENT: &str = "hypershift-oadp-plugin/agent-backup-item-action";

/// The HCPEtcdBackup of Backup `aws-nightly` (uid `8f14e45f-…`): derived, so every process finds it.
const AWS_CR: &str = "oadp-aws-nightly-gnvc";
const AZURE_CR: &str = "oadp-azure-nightly-qhgp";

/// The clock of the S3 vectors, and of the Azure ones.
const S3_NOW: &str = "2026-04-08T12:00:00Z";
const AZ_NOW: &str = "2026-05-08T12:00:00Z";

/// docs/signing.md#s6-10 S3-1: `s3://my-bucket/path/to/snapshot.db`, us-east-1, static keys.
const S3_1: &str = "https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=97094fa9811681974b61253db47e92787f66a5c394200e6e0db7c1b69adbd9a0&X-Amz-SignedHeaders=host";
/// docs/signing.md#s6-10 S3-2: S3-1 with the session token `FwoGZXIvYXdzEBYaDHqa0AP`.
const S3_2: &str = "https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Security-Token=FwoGZXIvYXdzEBYaDHqa0AP&X-Amz-Signature=b2cea8ee4dff0adbb14368202d85d4070be0135050b68f9cd5508aac0104980e&X-Amz-SignedHeaders=host";
/// docs/signing.md#s6-10 S3-4: S3-1 on the endpoint `http://minio.example.com:9000/` (path style).
const S3_4: &str = "http://minio.example.com:9000/my-bucket/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=9b0544302dfa5b8251077cfd536eceb9b3f196b5d02a2fad820c067c40986013&X-Amz-SignedHeaders=host";
/// docs/signing.md#s6-10 AZ-1: service SAS for `myaccount/mycontainer/path/to/snapshot.db`.
const AZ_1: &str = "https://myaccount.blob.core.windows.net/mycontainer/path/to/snapshot.db?se=2026-05-08T13%3A00%3A00Z&sig=fUwIj%2Bwe8o2k5vj4aO7D5sCP2pGwJqESSubk2pyXf10%3D&sp=r&spr=https&sr=b&st=2026-05-08T12%3A00%3A00Z&sv=2024-11-04";
/// docs/signing.md#s6-10 AZ-3's query: the user delegation SAS with AZ-3's delegation key.
const AZ_3_QUERY: &str = "se=2026-05-08T13%3A00%3A00Z&sig=frr2rIC4bJTT%2B4xR%2BrEEo%2BbRUExuXitvUxu1pqAvO94%3D&ske=2026-05-08T13%3A00%3A00Z&skoid=oid-1234&sks=b&skt=2026-05-08T12%3A00%3A00Z&sktid=tid-5678&skv=2024-11-04&sp=r&spr=https&sr=b&st=2026-05-08T12%3A00%3A00Z&sv=2024-11-04";

/// The AWS management cluster: CRDs, the hosted cluster `clusters/aws-hc`, its BSL and static keys,
/// the Velero Backup and Restore.
const AWS: &[&str] = &[
    "management",
    "aws/cluster",
    "aws/bsl",
    "aws/static",
    "aws/velero",
];
const ETCD_SNAPSHOT: &str = "config/etcd-snapshot";

// ---------------------------------------------------------------------------------------------
// Running

fn fixture(relative: &str) -> PathBuf {
    support::root().join("tests/fixtures/hcp").join(relative)
}

fn read_fixture(relative: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(relative)).unwrap()).unwrap()
}

/// This file's runs: paths relative to `tests/fixtures/hcp/`, and an item call never returns
/// additional items (checklist 21, checked by [`Run::done`]).
trait HcpRun {
    /// `run --action ACTION` on this file's fixtures.
    fn hcp(action: &str) -> Run;
    /// The backup action on the fixture `item` for Backup `backup`.
    fn backup(item: &str, backup: &str) -> Run;
    /// The restore action on the backed-up fixture `item` for Restore `restore`.
    fn restore(item: &str, restore: &str) -> Run;
    /// Progress (or, with `.arg("--cancel")`, Cancel) of the backup action's operation `id`.
    fn progress(id: &str, backup: &str) -> Run;
}

impl HcpRun for Run {
    fn hcp(action: &str) -> Run {
        Run::new(action)
            .fixtures(fixture(""))
            .without_additional_items()
    }

    fn backup(item: &str, backup: &str) -> Run {
        Run::hcp(BACKUP).item(item).path("--backup", backup)
    }

    fn restore(item: &str, restore: &str) -> Run {
        Run::hcp(RESTORE).item(item).path("--restore", restore)
    }

    fn progress(id: &str, backup: &str) -> Run {
        Run::hcp(BACKUP)
            .arg("--operation-id")
            .arg(id)
            .path("--backup", backup)
    }
}

/// `verb kind namespace/name` of every write in a run's `clusterWrites`.
fn writes(out: &Value) -> Vec<String> {
    out["clusterWrites"]
        .as_array()
        .expect("clusterWrites")
        .iter()
        .map(|w| {
            format!(
                "{} {} {}/{}",
                w["verb"].as_str().unwrap(),
                w["kind"].as_str().unwrap(),
                w["namespace"].as_str().unwrap(),
                w["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// The object of the `n`th write.
fn written(out: &Value, n: usize) -> Value {
    out["clusterWrites"][n]["object"].clone()
}

/// `op resource.group namespace/name` of every Kubernetes call in a recording.
fn recorded_calls(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|v| v["capability"] == "kube")
        .map(|v| {
            let call = &v["call"];
            let api = &call["api"];
            let resource = match api["group"].as_str().unwrap() {
                "" => api["resource"].as_str().unwrap().to_string(),
                g => format!("{}.{g}", api["resource"].as_str().unwrap()),
            };
            let name = call["name"]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    call["object"]["metadata"]["name"]
                        .as_str()
                        .map(str::to_string)
                })
                .unwrap_or_default();
            format!(
                "{} {resource} {}/{name}",
                call["op"].as_str().unwrap(),
                call["namespace"].as_str().unwrap()
            )
        })
        .collect()
}

/// A module directory with the hcp component under its stock manifest, edited by `edits`
/// (`(from, to)` replacements), and, with `signing_origin`, the signing component granted that
/// origin (a loopback STS, Entra ID or Blob server).
fn hcp_modules(edits: &[(&str, &str)], signing_origin: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let stock = std::fs::read_to_string(support::root().join("actions/hcp/hcp.toml")).unwrap();
    let mut manifest = stock.clone();
    for (from, to) in edits {
        assert!(manifest.contains(from), "the stock manifest has {from:?}");
        manifest = manifest.replace(from, to);
    }
    support::add_module(dir.path(), "hcp", "hcp", &manifest);
    if let Some(origin) = signing_origin {
        support::add_module(
            dir.path(),
            "signing",
            "signing",
            &format!("[limits]\nhttp-timeout = \"5s\"\n[grant]\nhttp = [\"{origin}\"]\n"),
        );
    }
    dir
}

/// The hcp module with `etcd-wait = "blocking"` (a BackupItemAction v1 that waits inside Execute).
fn blocking() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        hcp_modules(
            &[("etcd-wait = \"async\"", "etcd-wait = \"blocking\"")],
            None,
        )
    })
    .path()
}

/// `velero-wasm actions --json`, optionally with a module directory.
fn actions(modules: Option<&Path>) -> Vec<Value> {
    let mut args = vec!["actions".to_string(), "--json".to_string()];
    if let Some(dir) = modules {
        args.push("--modules".into());
        args.push(dir.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = support::velero_wasm(&args);
    assert!(output.status.success(), "{}", support::stderr(&output));
    support::stdout_json(&output)["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            a["name"]
                .as_str()
                .unwrap()
                .starts_with("hypershift-oadp-plugin/")
        })
        .cloned()
        .collect()
}

fn action<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {list:?}"))
}

// ---------------------------------------------------------------------------------------------
// docs/hcp.md#s10 checklist: registration and configuration

#[test]
fn c01_two_actions_are_registered_under_upstream_s_names() {
    let stock = actions(None);
    assert_eq!(
        action(&stock, BACKUP)["kind"],
        "backup-v2",
        "async by default"
    );
    assert_eq!(action(&stock, RESTORE)["kind"], "restore");
    assert_eq!(action(&stock, AGENT)["kind"], "backup");
    assert_eq!(action(&stock, AGENT)["module"], "agent");
    // Upstream's exact registration (v1) with etcd-wait = "blocking".
    let upstream = actions(Some(blocking()));
    assert_eq!(action(&upstream, BACKUP)["kind"], "backup");
    assert_eq!(action(&upstream, RESTORE)["kind"], "restore");
}

#[test]
fn c02_the_backup_action_applies_to_every_item() {
    let stock = actions(None);
    let applies = &action(&stock, BACKUP)["appliesTo"];
    for field in [
        "includedNamespaces",
        "excludedNamespaces",
        "includedResources",
        "excludedResources",
    ] {
        assert_eq!(applies[field], json!([]), "{field}: {applies}");
    }
    assert_eq!(applies["labelSelector"], "");
}

#[test]
fn c03_the_restore_action_applies_to_upstream_s_69_resources_in_order() {
    let expected = "hostedclusters, hostedcluster, hostedcontrolplanes, hostedcontrolplane, nodepools, nodepool, \
        hcpetcdbackups, hcpetcdbackup, secrets, secret, configmaps, configmap, persistentvolumes, persistentvolume, \
        persistentvolumeclaims, persistentvolumeclaim, pods, pod, statefulsets, statefulset, deployments, deployment, \
        clusters, cluster, machines, machine, machinedeployments, machinedeployment, machinesets, machineset, \
        serviceaccounts, serviceaccount, roles, role, rolebindings, rolebinding, priorityclasses, priorityclass, \
        poddisruptionbudgets, poddisruptionbudget, \
        awsmachinepools, awsmachines, awsmachinetemplates, awsmanagedmachinepools, awsmanagedmachinepooltemplates, \
        azuremachines, azuremachinetemplates, azuremanagedmachinepools, azuremanagedmachinepooltemplates, \
        ibmpowervsmachines, ibmpowervsmachinetemplates, ibmpowervsclusters, ibmpowervsclustertemplates, \
        openstackmachines, openstackmachinetemplates, openstackclusters, openstackclustertemplates, \
        kubevirtcluster, kubevirtmachinetemplate, datavolume, \
        agents, agentmachines, agentmachinetemplates, agentmachinepools, agentclusters, nmstateconfigs, nmstateconfig, infraenvs, infraenv";
    let expected: Vec<&str> = expected.split(", ").collect();
    assert_eq!(expected.len(), 69);
    let stock = actions(None);
    let applies = &action(&stock, RESTORE)["appliesTo"];
    assert_eq!(applies["includedResources"], json!(expected));
    for field in [
        "includedNamespaces",
        "excludedNamespaces",
        "excludedResources",
    ] {
        assert_eq!(applies[field], json!([]), "{field}");
    }
    assert_eq!(applies["labelSelector"], "");
}

#[test]
fn c04_the_configuration_is_the_config_map_in_velero_s_namespace_and_absent_means_defaults() {
    let off = "aws/backups/fs-backup-off.json";
    // No ConfigMap: volumeSnapshot, so the etcd pod is labelled for FS backup.
    let out = Run::backup("aws/cluster/pod-etcd-0.json", off)
        .cluster(AWS)
        .done();
    assert_eq!(
        out["item"]["metadata"]["labels"]["hypershift.openshift.io/fsbackup"],
        "true"
    );
    // The ConfigMap in Velero's namespace says etcdSnapshot: the pod is left out instead.
    let out = Run::backup("aws/cluster/pod-etcd-0.json", off)
        .cluster(AWS)
        .cluster(&[ETCD_SNAPSHOT])
        .done();
    assert!(out["item"]["metadata"]["labels"]
        .get("hypershift.openshift.io/fsbackup")
        .is_none());
    assert!(out["item"]["metadata"]["annotations"]["velero.io/skip-from-backup"].is_string());
    // Velero elsewhere: that ConfigMap is not the plugin's (and is not read).
    let out = Run::backup("aws/cluster/pod-etcd-0.json", off)
        .cluster(AWS)
        .cluster(&[ETCD_SNAPSHOT])
        .arg("--velero-namespace")
        .arg("velero")
        .done();
    assert_eq!(
        out["item"]["metadata"]["labels"]["hypershift.openshift.io/fsbackup"],
        "true"
    );
}

#[test]
fn c05_defaults_are_volume_snapshot_and_the_hypershift_namespace() {
    // volumeSnapshot: no HCPEtcdBackup for a HostedControlPlane without any configuration.
    let out = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(out["clusterWrites"], json!([]));
    // etcdSnapshot without hoNamespace: the credential Secret is copied to `hypershift`.
    let (output, calls) = create_path(&["aws/bsl", "aws/static"], None);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        calls.as_array().unwrap().contains(&json!(
            "create secrets hypershift/etcd-backup-creds-aws-nightly"
        )),
        "{calls}"
    );
}

#[test]
fn c05_a_ho_namespace_outside_the_grant_is_refused_before_the_cluster_with_what_to_change() {
    let (output, calls) = create_path_with(
        "config/other-ho-namespace",
        &["aws/bsl", "aws/static"],
        None,
    );
    assert_eq!(
        failure(&output),
        "error creating HCPEtcdBackup: failed to copy credential Secret: failed to create credential Secret hypershift-ops/etcd-backup-creds-aws-nightly: permission denied: module hcp is not granted create on secrets in namespace hypershift-ops; the manifest rule that allows it: [[grant.kube]] resources = [\"secrets\"] verbs = [\"create\"] namespaces = [\"hypershift-ops\"]; hoNamespace is \"hypershift-ops\": grant the hcp module get, create and delete on secrets there (its manifest's secrets line, in a module directory)"
    );
    // Nothing was created: the grant stopped it before the cluster.
    assert!(
        calls
            .as_array()
            .unwrap()
            .iter()
            .all(|c| !c.as_str().unwrap().starts_with("create")),
        "{calls}"
    );
}

#[test]
fn c06_an_invalid_method_fails_backup_items_with_upstream_s_message_but_not_restores() {
    let e = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&["config/invalid-method"])
    .fails();
    assert_eq!(
        e,
        "invalid etcdBackupMethod \"etcdsnapshot\": must be \"volumeSnapshot\" or \"etcdSnapshot\""
    );
    // Restore reads the method without validating it.
    let out = Run::restore(
        "aws/cluster/statefulset-etcd.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&["config/invalid-method"])
    .done();
    assert_eq!(out["skipRestore"], false);
    let out = Run::restore(
        "aws/cluster/pod-kube-apiserver-5d8f9c7b6-q2x4z.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&["config/invalid-method"])
    .done();
    assert_eq!(out["skipRestore"], true);
}

#[test]
fn c07_unknown_keys_only_warn_and_migration_changes_nothing() {
    let plain = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .done();
    let output = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&["config/unknown-keys"])
    .output();
    assert!(output.status.success(), "{}", support::stderr(&output));
    let log = support::stderr(&output);
    for line in [
        "unknown configuration key: dataUploadTimeout with value 30m",
        "unknown configuration key: readoptNodes with value true",
    ] {
        assert!(log.contains(line), "{log}");
    }
    assert!(!log.contains("key: migration"), "{log}");
    assert_eq!(support::stdout_json(&output), plain);
}

// ---------------------------------------------------------------------------------------------
// docs/hcp.md#s10 checklist: the gate and discovery

#[test]
fn c08_a_backup_without_namespaces_passes_through_backup_and_restore() {
    let item = read_fixture("aws/cluster/hostedcluster-aws-hc.json");
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/backups/no-namespaces.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(out["item"], item);
    let out = Run::restore(
        "aws/cluster/pod-kube-apiserver-5d8f9c7b6-q2x4z.json",
        "aws/backups/restore-cluster-wide.json",
    )
    .cluster(AWS)
    .cluster(&["aws/backups/no-namespaces.json"])
    .done();
    assert_eq!(out["skipRestore"], false);
    assert_eq!(
        out["item"]["metadata"]["name"],
        "kube-apiserver-5d8f9c7b6-q2x4z"
    );
}

#[test]
fn c09_named_hypershift_resources_pass_the_gate_without_asking_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("calls.jsonl");
    // No CRDs in this cluster: only the backup's includedResources can open the gate.
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/backups/named-resources.json",
    )
    .cluster(&["aws/cluster", "aws/bsl", "aws/static"])
    .arg("--record")
    .arg(record.to_str().unwrap())
    .done();
    assert_eq!(
        out["item"]["metadata"]["annotations"]["hypershift.openshift.io/restored-from-backup"],
        ""
    );
    let calls = recorded_calls(&record);
    assert!(
        calls
            .iter()
            .all(|c| !c.contains("customresourcedefinitions")),
        "{calls:?}"
    );
}

#[test]
fn c10_otherwise_the_hosted_control_plane_crd_decides_and_read_errors_pass_through() {
    let item = read_fixture("aws/cluster/hostedcluster-aws-hc.json");
    let without_crds = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(&["aws/cluster", "aws/bsl", "aws/static"])
    .done();
    assert_eq!(without_crds["item"], item);
    let with_crds = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(
        with_crds["item"]["metadata"]["annotations"]
            ["hypershift.openshift.io/restored-from-backup"],
        ""
    );
    // The CRD cannot be read (the grant says no): pass through, with a warning from the host.
    let no_crd_grant = hcp_modules(
        &[(
            "resources = [\"customresourcedefinitions.apiextensions.k8s.io\"]",
            "resources = [\"customresourcedefinitions.example.io\"]",
        )],
        None,
    );
    let output = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .modules(no_crd_grant.path())
    .output();
    assert!(output.status.success(), "{}", support::stderr(&output));
    assert_eq!(support::stdout_json(&output)["item"], item);
    assert!(support::stderr(&output).contains("not granted get on customresourcedefinitions"));
}

#[test]
fn c11_discovery_lists_the_included_namespaces_in_order_up_to_the_first_hit_on_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let backup = support::write(
        dir.path(),
        "backup.json",
        &json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                "metadata": {"name": "ordered", "namespace": "openshift-adp", "uid": "u-ordered"},
                "spec": {"includedNamespaces": ["apps", "clusters-aws-hc", "clusters-power-hc", "clusters"], "storageLocation": "default"}})
        .to_string(),
    );
    let record = dir.path().join("calls.jsonl");
    Run::hcp(BACKUP)
        .item("aws/cluster/hostedcluster-aws-hc.json")
        .arg("--backup")
        .arg(backup.to_str().unwrap())
        .cluster(AWS)
        .cluster(&["unsupported/cluster"])
        .arg("--record")
        .arg(record.to_str().unwrap())
        .done();
    let lists: Vec<String> = recorded_calls(&record)
        .into_iter()
        .filter(|c| c.starts_with("list"))
        .collect();
    assert_eq!(
        lists,
        [
            "list hostedcontrolplanes.hypershift.openshift.io apps/",
            "list hostedcontrolplanes.hypershift.openshift.io clusters-aws-hc/"
        ]
    );
    // The first HostedControlPlane found decides: PowerVS's namespace first makes it PowerVS's, so
    // an Agent-platform check (the agent module's) does nothing for it. Nothing is cached between
    // calls: each call lists again (a new record shows the same LISTs).
    let again = dir.path().join("again.jsonl");
    Run::hcp(BACKUP)
        .item("aws/cluster/hostedcluster-aws-hc.json")
        .arg("--backup")
        .arg(backup.to_str().unwrap())
        .cluster(AWS)
        .cluster(&["unsupported/cluster"])
        .arg("--record")
        .arg(again.to_str().unwrap())
        .done();
    assert_eq!(
        recorded_calls(&again)
            .iter()
            .filter(|c| c.starts_with("list"))
            .count(),
        2
    );
}

#[test]
fn c12_without_a_hosted_control_plane_items_pass_through_instead_of_failing() {
    // Upstream fails every item with `error getting HCP namespace: no HostedControlPlane found`;
    // a backup of other namespaces on a management cluster is not the plugin's business.
    let item = read_fixture("aws/cluster/hostedcluster-aws-hc.json");
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/backups/other-namespaces.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(out["item"], item);
}

#[test]
fn c13_control_planes_on_unsupported_platforms_fail_the_backup_item() {
    for (item, backup, platform) in [
        (
            "unsupported/cluster/hostedcontrolplane-power-hc.json",
            "unsupported/velero/backup-power-nightly.json",
            "PowerVS",
        ),
        (
            "unsupported/cluster/hostedcontrolplane-gcp-hc.json",
            "unsupported/velero/backup-gcp-nightly.json",
            "GCP",
        ),
    ] {
        let e = Run::backup(item, backup)
            .cluster(&["management", "unsupported/cluster"])
            .fails();
        assert_eq!(
            e,
            format!("error checking platform configuration: unsupported platform type {platform}")
        );
    }
    // Only the HostedControlPlane is validated: its HostedCluster is backed up.
    let out = Run::backup(
        "unsupported/cluster/hostedcluster-power-hc.json",
        "unsupported/velero/backup-power-nightly.json",
    )
    .cluster(&["management", "unsupported/cluster"])
    .done();
    assert_eq!(
        out["item"]["metadata"]["annotations"]["hypershift.openshift.io/restored-from-backup"],
        ""
    );
}

// ---------------------------------------------------------------------------------------------
// docs/hcp.md#s10 checklist: per-kind edits

#[test]
fn c14_hosted_clusters_are_marked_restored_from_backup() {
    let mut expected = read_fixture("aws/cluster/hostedcluster-aws-hc.json");
    expected["metadata"]["annotations"] =
        json!({"hypershift.openshift.io/restored-from-backup": ""});
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(out["item"], expected, "the annotation and nothing else");
}

#[test]
fn c15_a_known_snapshot_url_goes_on_the_hosted_cluster_and_control_plane() {
    let url = "s3://my-bucket/path/to/snapshot.db";
    let cluster = [
        "management",
        "aws/cluster",
        "aws/bsl",
        "aws/static",
        "aws/velero",
        ETCD_SNAPSHOT,
        "aws/etcd/completes",
    ];
    let hc = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(&cluster)
    .modules(blocking())
    .done();
    let annotations = &hc["item"]["metadata"]["annotations"];
    assert_eq!(
        annotations["hypershift.openshift.io/etcd-snapshot-url"],
        url
    );
    assert_eq!(
        annotations["hypershift.openshift.io/restored-from-backup"],
        ""
    );
    assert_eq!(hc["item"]["status"]["lastSuccessfulEtcdBackupURL"], url);
    let hcp = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(&cluster)
    .modules(blocking())
    .done();
    let mut expected = read_fixture("aws/cluster/hostedcontrolplane-aws-hc.json");
    expected["metadata"]["annotations"]["hypershift.openshift.io/etcd-snapshot-url"] = json!(url);
    assert_eq!(hcp["item"], expected, "the annotation only");
}

#[test]
fn c16_etcd_pods_get_the_fs_backup_label_only_when_fs_backup_is_off_by_default() {
    let labels = |backup: &str| {
        Run::backup("aws/cluster/pod-etcd-0.json", backup)
            .cluster(AWS)
            .done()["item"]["metadata"]["labels"]
            .clone()
    };
    assert_eq!(
        labels("aws/backups/fs-backup-off.json"),
        json!({"app": "etcd", "hypershift.openshift.io/control-plane-component": "etcd", "hypershift.openshift.io/fsbackup": "true"})
    );
    let unchanged = read_fixture("aws/cluster/pod-etcd-0.json")["metadata"]["labels"].clone();
    assert_eq!(labels("aws/backups/fs-backup-on.json"), unchanged);
    assert_eq!(labels("aws/velero/backup-aws-nightly.json"), unchanged);
    let other = Run::backup(
        "aws/cluster/pod-kube-apiserver-5d8f9c7b6-q2x4z.json",
        "aws/backups/fs-backup-off.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(
        other["item"],
        read_fixture("aws/cluster/pod-kube-apiserver-5d8f9c7b6-q2x4z.json")
    );
}

/// The item as stored, and whether the action asked Velero to leave it out.
fn excluded(out: &Value) -> bool {
    out["item"]["metadata"]["annotations"]
        .get("velero.io/skip-from-backup")
        .is_some_and(|v| v.as_str().unwrap().starts_with("hypershift-oadp-plugin: "))
}

#[test]
fn c17_etcd_pods_are_excluded_under_etcd_snapshot() {
    let out = Run::backup(
        "aws/cluster/pod-etcd-0.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT])
    .done();
    assert!(excluded(&out), "{out:#}");
    // Nothing else changed: on Velero up to 1.18 the item is stored as it was but for the annotation.
    let mut item = out["item"].clone();
    item["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    assert_eq!(item, read_fixture("aws/cluster/pod-etcd-0.json"));
}

#[test]
fn c18_etcd_volumes_are_excluded_under_etcd_snapshot_only() {
    let under = |config: &[&str]| {
        Run::backup(
            "aws/cluster/pvc-data-etcd-0.json",
            "aws/velero/backup-aws-nightly.json",
        )
        .cluster(AWS)
        .cluster(config)
        .done()
    };
    assert!(excluded(&under(&[ETCD_SNAPSHOT])));
    let out = under(&[]);
    assert_eq!(
        out["item"],
        read_fixture("aws/cluster/pvc-data-etcd-0.json")
    );
}

#[test]
fn c19_kubevirt_rhcos_volumes_are_excluded() {
    let cluster = ["management", "kubevirt/cluster"];
    let backup = "kubevirt/velero/backup-kubevirt-nightly.json";
    for item in [
        "kubevirt/cluster/datavolume-rhcos.json",
        "kubevirt/cluster/pvc-rhcos.json",
    ] {
        let out = Run::backup(item, backup).cluster(&cluster).done();
        assert!(excluded(&out), "{item}: {out:#}");
    }
    let out = Run::backup("kubevirt/cluster/pvc-worker-root.json", backup)
        .cluster(&cluster)
        .done();
    assert_eq!(
        out["item"],
        read_fixture("kubevirt/cluster/pvc-worker-root.json")
    );
}

#[test]
fn c20_other_kinds_are_stored_unchanged_without_a_single_call() {
    let dir = tempfile::tempdir().unwrap();
    for item in [
        "aws/cluster/secret-pull-secret.json",
        "aws/cluster/nodepool-aws-hc-workers.json",
        "aws/cluster/statefulset-etcd.json",
        "aws/bsl/backupstoragelocation-default.json",
    ] {
        for config in [&[][..], &[ETCD_SNAPSHOT][..]] {
            let record = dir.path().join("calls.jsonl");
            let out = Run::backup(item, "aws/velero/backup-aws-nightly.json")
                .cluster(AWS)
                .cluster(config)
                .arg("--record")
                .arg(record.to_str().unwrap())
                .done();
            assert_eq!(out["item"], read_fixture(item), "{item}");
            assert_eq!(recorded_calls(&record), Vec::<String>::new(), "{item}");
        }
    }
    // Restore too: of the 69 resources, only those the action acts on cost a call.
    let record = dir.path().join("restore.jsonl");
    let out = Run::restore(
        "aws/cluster/secret-pull-secret.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .done();
    assert_eq!(out["skipRestore"], false);
    assert_eq!(recorded_calls(&record), Vec::<String>::new());
}

#[test]
fn c21_no_call_returns_additional_items() {
    // `Run::done` checks every item call of this file; here, one of each action and kind.
    Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .done();
    Run::restore(
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .now(S3_NOW)
    .done();
    Run::hcp(AGENT)
        .item("agent/cluster/clusterdeployment-agent-hc.json")
        .path("--backup", "agent/velero/backup-agent-nightly.json")
        .cluster(&["management", "agent/cluster"])
        .done();
}

#[test]
fn c22_volume_snapshot_never_touches_etcd_backups_locations_or_secrets() {
    let dir = tempfile::tempdir().unwrap();
    for (n, item) in [
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/cluster/pod-etcd-0.json",
        "aws/cluster/pvc-data-etcd-0.json",
    ]
    .iter()
    .enumerate()
    {
        let record = dir.path().join(format!("{n}.jsonl"));
        Run::backup(item, "aws/velero/backup-aws-nightly.json")
            .cluster(AWS)
            .arg("--record")
            .arg(record.to_str().unwrap())
            .done();
        for call in recorded_calls(&record) {
            assert!(
                !["hcpetcdbackups", "backupstoragelocations", " secrets "]
                    .iter()
                    .any(|r| call.contains(r)),
                "{item}: {call}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// docs/hcp.md#s10 checklist: the HCPEtcdBackup

#[test]
fn c23_etcd_snapshot_without_the_hcp_etcd_backup_crd_fails_hosted_items() {
    for (item, modules) in [
        ("aws/cluster/hostedcluster-aws-hc.json", None),
        (
            "aws/cluster/hostedcontrolplane-aws-hc.json",
            Some(blocking()),
        ),
    ] {
        let mut run = Run::backup(item, "aws/velero/backup-aws-nightly.json").cluster(&[
            "management-no-etcd-backup",
            "aws/cluster",
            "aws/bsl",
            "aws/static",
            ETCD_SNAPSHOT,
        ]);
        if let Some(dir) = modules {
            run = run.modules(dir);
        }
        assert_eq!(
            run.fails(),
            "error creating HCPEtcdBackup: etcdBackupMethod is \"etcdSnapshot\" but HCPEtcdBackup CRD not found in the cluster"
        );
    }
}

/// The backup of the HostedControlPlane under etcdSnapshot on a cluster where the HCPEtcdBackup is
/// created and then never reports (no controller runs on a fixture cluster): the creation's writes,
/// then the 30 s start check times out and the copy is deleted.
fn create_path(extra: &[&str], modules: Option<&Path>) -> (Output, Value) {
    create_path_with(ETCD_SNAPSHOT, extra, modules)
}

/// [`create_path`] with the plugin ConfigMap of `config`.
fn create_path_with(config: &str, extra: &[&str], modules: Option<&Path>) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = vec!["management", "aws/cluster", "aws/velero", config];
    cluster.extend_from_slice(extra);
    let mut run = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(&cluster)
    .now(S3_NOW)
    .arg("--record")
    .arg(dir.path().join("calls.jsonl").to_str().unwrap());
    if let Some(modules) = modules {
        run = run.modules(modules);
    }
    let output = run.output();
    let calls = recorded_calls(&dir.path().join("calls.jsonl"));
    (output, json!(calls))
}

#[test]
fn c24_the_storage_target_follows_the_bsl_and_unsupported_providers_fail() {
    let (output, calls) = create_path(&["aws/bsl", "aws/static"], None);
    assert_eq!(output.status.code(), Some(1));
    let creates: Vec<&Value> = calls
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.as_str().unwrap().starts_with("create"))
        .collect();
    assert_eq!(creates.len(), 2, "{calls}");
    // The CR itself: see c31. An unsupported provider stops before anything is copied or created.
    let (output, calls) = create_path(&["aws/gcp-bsl", "aws/static"], None);
    assert_eq!(output.status.code(), Some(1));
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error creating HCPEtcdBackup: failed to map BSL to HCPEtcdBackup storage: unsupported BSL provider \"gcp\": only aws and azure are supported"),
        "{stderr}"
    );
    assert!(
        calls
            .as_array()
            .unwrap()
            .iter()
            .all(|c| !c.as_str().unwrap().starts_with("create")),
        "{calls}"
    );
}

#[test]
fn c25_the_credential_secret_is_copied_with_its_label_and_both_keys() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("calls.jsonl");
    let output = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT])
    .now(S3_NOW)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .output();
    assert_eq!(output.status.code(), Some(1));
    let copy = recorded_write(&record, "create", "secrets");
    let source = read_fixture("aws/static/secret-cloud-credentials.json");
    assert_eq!(
        copy,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "etcd-backup-creds-aws-nightly", "namespace": "hypershift",
                            "labels": {"hypershift.openshift.io/etcd-backup": "true"}},
               "data": {"credentials": source["data"]["cloud"], "cloud": source["data"]["cloud"]}})
    );
}

/// The object a recorded `op` call on `resource` sent.
fn recorded_write(record: &Path, op: &str, resource: &str) -> Value {
    std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["call"]["op"] == op && v["call"]["api"]["resource"] == resource)
        .unwrap_or_else(|| panic!("no {op} of {resource}"))["call"]["object"]
        .clone()
}

#[test]
fn c26_an_existing_copy_is_reused_without_reading_the_source() {
    let (output, calls) = create_path(&["aws/bsl", "aws/etcd/copied-secret"], None);
    assert_eq!(output.status.code(), Some(1));
    let calls: Vec<&str> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(calls.contains(&"get secrets hypershift/etcd-backup-creds-aws-nightly"));
    assert!(
        !calls
            .iter()
            .any(|c| c.contains("openshift-adp/cloud-credentials")),
        "{calls:?}"
    );
    assert!(!calls.contains(&"create secrets hypershift/etcd-backup-creds-aws-nightly"));
    assert!(calls.contains(&&*format!(
        "create hcpetcdbackups.hypershift.openshift.io clusters-aws-hc/{AWS_CR}"
    )));
}

#[test]
fn c27_a_missing_source_secret_or_key_fails_the_copy() {
    let (output, _) = create_path(&["aws/bsl"], None);
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error creating HCPEtcdBackup: failed to copy credential Secret: failed to get credential Secret openshift-adp/cloud-credentials: "),
        "{stderr}"
    );
    let (output, _) = create_path(&["aws/wrong-key"], None);
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error creating HCPEtcdBackup: failed to copy credential Secret: credential Secret openshift-adp/bsl-credentials does not contain key \"aws\""),
        "{stderr}"
    );
}

#[test]
fn c28_without_a_credential_reference_cloud_credentials_is_used_for_backup_and_restore() {
    // Backup: c25 copies openshift-adp/cloud-credentials (key cloud). Restore: it signs with it.
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("calls.jsonl");
    let out = Run::restore(
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .now(S3_NOW)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .done();
    assert_eq!(
        out["item"]["spec"]["etcd"]["managed"]["storage"]["restoreSnapshotURL"],
        json!([S3_1])
    );
    assert!(recorded_calls(&record)
        .contains(&"get secrets openshift-adp/cloud-credentials".to_string()));
}

#[test]
fn c29_to_c31_the_hcp_etcd_backup_is_named_from_the_backup_and_created_in_the_hcp_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("calls.jsonl");
    Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT])
    .now(S3_NOW)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .output();
    let cr = recorded_write(&record, "create", "hcpetcdbackups");
    // c30: oadp-<backup>-<4 characters derived from the Backup's uid>; c31: only the S3 member;
    // c29: the HostedCluster's KMS key, its managed etcd backing up to AWS.
    assert_eq!(
        cr,
        json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HCPEtcdBackup",
               "metadata": {"name": AWS_CR, "namespace": "clusters-aws-hc"},
               "spec": {"storage": {"storageType": "S3", "s3": {
                   "bucket": "my-bucket", "region": "us-east-1",
                   "keyPrefix": "velero/backups/aws-nightly/etcd-backup",
                   "credentials": {"name": "etcd-backup-creds-aws-nightly"},
                   "kmsKeyARN": "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}}}})
    );
    assert!(AWS_CR.len() <= 63);
    // The Azure storage target and encryption key, from an Azure BSL and HostedCluster.
    let azure = Run::backup(
        "azure/cluster/hostedcontrolplane-azure-hc.json",
        "azure/velero/backup-azure-nightly.json",
    )
    .cluster(&[
        "management",
        "azure/cluster",
        "azure/account-key",
        "azure/velero",
        ETCD_SNAPSHOT,
    ])
    .now(AZ_NOW)
    .arg("--record")
    .arg(dir.path().join("azure.jsonl").to_str().unwrap())
    .output();
    assert_eq!(azure.status.code(), Some(1));
    let cr = recorded_write(&dir.path().join("azure.jsonl"), "create", "hcpetcdbackups");
    assert_eq!(cr["metadata"]["name"], AZURE_CR);
    assert_eq!(
        cr["spec"]["storage"],
        json!({"storageType": "AzureBlob", "azureBlob": {
            "container": "mycontainer", "storageAccount": "myaccount",
            "keyPrefix": "velero/backups/azure-nightly/etcd-backup",
            "credentials": {"name": "etcd-backup-creds-azure-nightly"},
            "encryptionKeyURL": "https://hcp-vault.vault.azure.net/keys/etcd-backup/0123456789abcdef"}})
    );
    // The Azure credential Secret is named by the BSL (azure-credentials, key cloud).
    let copy = recorded_write(&dir.path().join("azure.jsonl"), "create", "secrets");
    assert_eq!(
        copy["data"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["credentials", "cloud"]
    );
}

#[test]
fn c32_an_existing_hcp_etcd_backup_is_never_created_again() {
    for (etcd, modules) in [
        ("aws/etcd/never", None),
        ("aws/etcd/completes", Some(blocking())),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("calls.jsonl");
        let mut run = Run::backup(
            "aws/cluster/hostedcluster-aws-hc.json",
            "aws/velero/backup-aws-nightly.json",
        )
        .cluster(AWS)
        .cluster(&[ETCD_SNAPSHOT, etcd])
        .now(S3_NOW)
        .arg("--record")
        .arg(record.to_str().unwrap());
        if let Some(m) = modules {
            run = run.modules(m);
        }
        run.done();
        let calls = recorded_calls(&record);
        assert!(
            calls.iter().all(|c| !c.starts_with("create")),
            "{etcd}: {calls:?}"
        );
    }
}

#[test]
fn c33_the_start_check_polls_every_5s_for_30s() {
    let (output, calls) = create_path(&["aws/bsl", "aws/static"], None);
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains(&format!("velero-wasm run: error creating HCPEtcdBackup: timed out after 30s waiting for HCPEtcdBackup clusters-aws-hc/{AWS_CR} to start; last observed: no BackupCompleted condition yet")),
        "{stderr}"
    );
    let reads = calls
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c.as_str().unwrap()
                == format!("get hcpetcdbackups.hypershift.openshift.io clusters-aws-hc/{AWS_CR}")
        })
        .count();
    // One read before creating (does it exist?), then 7 checks: at 0, 5, …, 30 s.
    assert_eq!(reads, 1 + 7, "{calls}");
    // The failure and texts of a started-check that fails are unit tests (etcd::condition, backup).
}

#[test]
fn c34_to_c37_blocking_waits_for_completion_and_records_the_url() {
    let cluster = |etcd: &'static str| {
        let mut c = AWS.to_vec();
        c.extend_from_slice(&[ETCD_SNAPSHOT, etcd, "aws/etcd/copied-secret"]);
        c
    };
    // Completes: one read, no sleep; annotated; the copied Secret deleted (c36, c37).
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("completes.jsonl");
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(&cluster("aws/etcd/completes"))
    .modules(blocking())
    .now(S3_NOW)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .done();
    assert_eq!(
        out["item"]["status"]["lastSuccessfulEtcdBackupURL"],
        "s3://my-bucket/path/to/snapshot.db"
    );
    assert_eq!(
        writes(&out),
        ["delete Secret hypershift/etcd-backup-creds-aws-nightly"]
    );
    let reads: Vec<String> = recorded_calls(&record)
        .into_iter()
        .filter(|c| c.contains("hcpetcdbackups"))
        .collect();
    assert_eq!(
        reads.len(),
        2,
        "does it exist, then the completion check: {reads:?}"
    );

    // Fails (c35): the error wraps the CR's; the copy is deleted too (c36: upstream keeps it).
    let run = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(&cluster("aws/etcd/fails"))
    .modules(blocking())
    .now(S3_NOW)
    .arg("--record")
    .arg(dir.path().join("fails.jsonl").to_str().unwrap());
    assert_eq!(
        run.fails(),
        "HCPEtcdBackup failed: HCPEtcdBackup failed: uploading snapshot: AccessDenied: s3:PutObject on my-bucket"
    );
    assert!(recorded_calls(&dir.path().join("fails.jsonl"))
        .contains(&"delete secrets hypershift/etcd-backup-creds-aws-nightly".to_string()));
}

/// A blocking backup of the AWS HostedControlPlane whose HCPEtcdBackup never completes, with
/// `modules`, recorded: the error, the recorded calls, and the number of reads of the CR.
fn never_completing_backup(modules: &Path, record: &Path) -> (String, Vec<String>, usize) {
    let e = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT, "aws/etcd/never", "aws/etcd/copied-secret"])
    .modules(modules)
    .now(S3_NOW)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .fails();
    let calls = recorded_calls(record);
    let cr = format!("hcpetcdbackups.hypershift.openshift.io clusters-aws-hc/{AWS_CR}");
    let reads = calls.iter().filter(|c| c.contains(&cr)).count();
    (e, calls, reads)
}

#[test]
fn c34_blocking_gives_up_after_10_minutes_naming_the_backup_and_its_last_condition() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("never.jsonl");
    let started = std::time::Instant::now();
    let (e, calls, reads) = never_completing_backup(blocking(), &record);
    eprintln!("blocking, never completes, --now: {:?}", started.elapsed());
    assert_eq!(
        e,
        format!("HCPEtcdBackup failed: timed out after 10m waiting for HCPEtcdBackup clusters-aws-hc/{AWS_CR} to complete; last observed: BackupCompleted=False (BackupInProgress): \"etcd snapshot in progress\"")
    );
    assert_eq!(reads, 1 + 121, "every 5 s from 0 to 600 s");
    assert!(calls.contains(&"delete secrets hypershift/etcd-backup-creds-aws-nightly".to_string()));
    // The recording's clock: 10 minutes of virtual time went by, in 5 s steps.
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&record)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["clock"]["start"], "2026-04-08T12:00:00Z");
}

#[test]
fn c34_a_blocking_wait_ends_before_the_module_s_deadline_and_names_the_limit() {
    // An operator lowered limits.timeout to 2 minutes: the wait stops 10 s before the host would end
    // the call, so the backup still deletes its Secret copy and says which limit cut it short.
    let short = hcp_modules(
        &[
            ("etcd-wait = \"async\"", "etcd-wait = \"blocking\""),
            ("timeout = \"11m\"", "timeout = \"2m\""),
        ],
        None,
    );
    let dir = tempfile::tempdir().unwrap();
    let (e, calls, reads) = never_completing_backup(short.path(), &dir.path().join("short.jsonl"));
    assert_eq!(
        e,
        format!("HCPEtcdBackup failed: timed out after 1m50s waiting for HCPEtcdBackup clusters-aws-hc/{AWS_CR} to complete (the module's limits.timeout leaves no more of the 10m this wait allows: raise it in the hcp manifest); last observed: BackupCompleted=False (BackupInProgress): \"etcd snapshot in progress\"")
    );
    assert_eq!(reads, 1 + 23, "every 5 s from 0 to 110 s");
    assert!(calls.contains(&"delete secrets hypershift/etcd-backup-creds-aws-nightly".to_string()));
}

#[test]
fn c36_the_copy_is_deleted_after_a_create_failure() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("calls.jsonl");
    Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT])
    .modules(blocking())
    .now(S3_NOW)
    .arg("--record")
    .arg(record.to_str().unwrap())
    .fails();
    let writes: Vec<String> = recorded_calls(&record)
        .into_iter()
        .filter(|c| !c.starts_with("get") && !c.starts_with("list"))
        .collect();
    assert_eq!(
        writes,
        [
            "create secrets hypershift/etcd-backup-creds-aws-nightly".to_string(),
            format!("create hcpetcdbackups.hypershift.openshift.io clusters-aws-hc/{AWS_CR}"),
            "delete secrets hypershift/etcd-backup-creds-aws-nightly".to_string(),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// docs/hcp.md#s10 checklist: Agent platform, pausing

#[test]
fn c38_on_the_agent_platform_the_live_cluster_deployment_loses_preserve_on_delete() {
    let input = read_fixture("agent/cluster/clusterdeployment-agent-hc.json");
    let out = Run::hcp(AGENT)
        .item("agent/cluster/clusterdeployment-agent-hc.json")
        .path("--backup", "agent/velero/backup-agent-nightly.json")
        .cluster(&["management", "agent/cluster"])
        .done();
    assert_eq!(out["item"], input, "the item itself is stored unchanged");
    assert_eq!(writes(&out), ["update ClusterDeployment clusters/agent-hc"]);
    let live = written(&out, 0);
    let mut expected = input.clone();
    expected["spec"]
        .as_object_mut()
        .unwrap()
        .remove("preserveOnDelete");
    expected["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"].clone();
    assert_eq!(live, expected, "only spec.preserveOnDelete changed");
    // A stale item conflicts instead of overwriting.
    let dir = tempfile::tempdir().unwrap();
    let mut stale = input.clone();
    stale["metadata"]["resourceVersion"] = json!("7999");
    let stale_path = support::write(dir.path(), "cd.json", &stale.to_string());
    let e = Run::hcp(AGENT)
        .arg("--item")
        .arg(stale_path.to_str().unwrap())
        .path("--backup", "agent/velero/backup-agent-nightly.json")
        .cluster(&["management", "agent/cluster"])
        .fails();
    assert!(
        e.starts_with("error performing migration tasks for agent platform: error updating ClusterDeployment resource with PreserveOnDelete option: Operation cannot be fulfilled"),
        "{e}"
    );
    // The None platform: nothing written.
    let out = Run::hcp(AGENT)
        .item("agent/cluster/clusterdeployment-agent-hc.json")
        .path("--backup", "agent/velero/backup-agent-nightly.json")
        .cluster(&["management", "none/cluster"])
        .done();
    assert_eq!(out["clusterWrites"], json!([]));
    // The hcp backup action leaves ClusterDeployments alone.
    let out = Run::backup(
        "agent/cluster/clusterdeployment-agent-hc.json",
        "agent/velero/backup-agent-nightly.json",
    )
    .cluster(&["management", "agent/cluster"])
    .done();
    assert_eq!(out["clusterWrites"], json!([]));
    assert_eq!(out["item"], input);
}

#[test]
fn c39_nothing_is_paused_or_unpaused() {
    let mut outputs = Vec::new();
    for item in [
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/cluster/nodepool-aws-hc-workers.json",
    ] {
        for config in [&[][..], &[ETCD_SNAPSHOT, "aws/etcd/completes"][..]] {
            outputs.push(
                Run::backup(item, "aws/velero/backup-aws-nightly.json")
                    .cluster(AWS)
                    .cluster(config)
                    .modules(blocking())
                    .done(),
            );
        }
    }
    for out in outputs {
        let text = out.to_string();
        assert!(!text.contains("pausedUntil"), "{text}");
        assert!(!text.contains("cluster.x-k8s.io/paused"), "{text}");
        assert!(!text.contains("oadp.openshift.io/paused"), "{text}");
        assert!(writes(&out)
            .iter()
            .all(|w| !w.contains("HostedCluster") && !w.contains("NodePool")));
    }
}

// ---------------------------------------------------------------------------------------------
// docs/hcp.md#s10 checklist: restore

#[test]
fn c40_restore_reads_the_backup_in_the_restore_s_namespace() {
    let e = Run::restore(
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/backups/restore-missing-backup.json",
    )
    .cluster(AWS)
    .fails();
    assert_eq!(
        e,
        "fail to get backup for restore: backups.velero.io \"deleted-backup\" not found"
    );
}

#[test]
fn c41_every_pod_of_a_hypershift_backup_is_skipped() {
    for pod in [
        "aws/cluster/pod-etcd-0.json",
        "aws/cluster/pod-kube-apiserver-5d8f9c7b6-q2x4z.json",
    ] {
        let out = Run::restore(pod, "aws/velero/restore-aws-nightly.json")
            .cluster(AWS)
            .done();
        assert_eq!(out["skipRestore"], true, "{pod}");
    }
}

#[test]
fn c42_the_etcd_statefulset_is_skipped_iff_the_restore_time_method_is_etcd_snapshot() {
    let skip = |item: &str, config: &[&str]| {
        Run::restore(item, "aws/velero/restore-aws-nightly.json")
            .cluster(AWS)
            .cluster(config)
            .done()["skipRestore"]
            .clone()
    };
    assert_eq!(
        skip("aws/cluster/statefulset-etcd.json", &[ETCD_SNAPSHOT]),
        true
    );
    assert_eq!(skip("aws/cluster/statefulset-etcd.json", &[]), false);
    assert_eq!(
        skip(
            "aws/cluster/statefulset-etcd.json",
            &["config/unknown-keys"]
        ),
        false
    );
    assert_eq!(
        skip(
            "aws/cluster/statefulset-openshift-apiserver-audit.json",
            &[ETCD_SNAPSHOT]
        ),
        false
    );
}

#[test]
fn c43_c44_hosted_clusters_are_marked_and_without_a_url_get_none() {
    for item in [
        "aws/restore-items/hostedcluster-aws-hc-no-url.json",
        "aws/restore-items/hostedcontrolplane-aws-hc-no-url.json",
    ] {
        let out = Run::restore(item, "aws/velero/restore-aws-nightly.json")
            .cluster(AWS)
            .done();
        assert_eq!(out["skipRestore"], false);
        let storage = &out["item"]["spec"]["etcd"]["managed"]["storage"];
        assert!(
            storage.is_object() && storage.get("restoreSnapshotURL").is_none(),
            "{item}"
        );
        if item.contains("hostedcluster") {
            assert_eq!(
                out["item"]["metadata"]["annotations"]
                    ["hypershift.openshift.io/restored-from-backup"],
                ""
            );
        }
    }
}

fn injected(out: &Value) -> Value {
    out["item"]["spec"]["etcd"]["managed"]["storage"]["restoreSnapshotURL"].clone()
}

#[test]
fn c45_s3_snapshot_urls_become_one_presigned_https_url() {
    for item in [
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/restore-items/hostedcontrolplane-aws-hc.json",
    ] {
        let out = Run::restore(item, "aws/velero/restore-aws-nightly.json")
            .cluster(AWS)
            .now(S3_NOW)
            .done();
        assert_eq!(injected(&out), json!([S3_1]), "{item}");
        // The annotation stays on the restored object.
        assert_eq!(
            out["item"]["metadata"]["annotations"]["hypershift.openshift.io/etcd-snapshot-url"],
            "s3://my-bucket/path/to/snapshot.db"
        );
    }
    // Unmanaged etcd: nothing to inject, so nothing is signed (upstream signs first and can fail).
    let out = Run::restore(
        "aws/restore-items/hostedcluster-aws-hc-unmanaged.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(&["management", "aws/velero"])
    .now(S3_NOW)
    .done();
    assert!(out["item"]["spec"]["etcd"].get("managed").is_none());
}

/// A dotted bucket is presigned path style, as the AWS SDKs do (botocore made this URL): the virtual
/// host `my.backup.bucket.s3.…` would not match S3's certificate, so the snapshot could not be read.
#[test]
fn a_dotted_bucket_is_presigned_path_style() {
    let dir = tempfile::tempdir().unwrap();
    let item = dir.path().join("hostedcluster.json");
    let text =
        std::fs::read_to_string(fixture("aws/restore-items/hostedcluster-aws-hc.json")).unwrap();
    std::fs::write(
        &item,
        text.replace("s3://my-bucket/", "s3://my.backup.bucket/"),
    )
    .unwrap();
    let out = Run::restore(
        item.to_str().unwrap(),
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .now(S3_NOW)
    .done();
    assert_eq!(
        injected(&out),
        json!(["https://s3.us-east-1.amazonaws.com/my.backup.bucket/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=21dba156159470693469af8d8883b2bfb5b3baaa67cc0663699f5f053e185e3d&X-Amz-SignedHeaders=host"])
    );
}

#[test]
fn c46_other_https_urls_are_injected_unchanged() {
    let out = Run::restore(
        "aws/restore-items/hostedcluster-aws-hc-presigned.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(AWS)
    .done();
    assert_eq!(
        injected(&out),
        json!(["https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db?X-Amz-Signature=abc123"])
    );
}

const AZURE_ACCOUNT_KEY: &[&str] = &[
    "management",
    "azure/cluster",
    "azure/account-key",
    "azure/velero",
];

#[test]
fn c47_c56_azure_blob_urls_get_an_account_key_sas() {
    for item in [
        "azure/restore-items/hostedcluster-azure-hc.json",
        "azure/restore-items/hostedcontrolplane-azure-hc.json",
    ] {
        let out = Run::restore(item, "azure/velero/restore-azure-nightly.json")
            .cluster(AZURE_ACCOUNT_KEY)
            .now(AZ_NOW)
            .done();
        assert_eq!(injected(&out), json!([AZ_1]), "{item}");
    }
}

#[test]
fn c48_restore_validates_the_platform_of_control_planes_only() {
    let cluster = ["management", "unsupported/cluster", "unsupported/velero"];
    let e = Run::restore(
        "unsupported/restore-items/hostedcontrolplane-power-hc.json",
        "unsupported/velero/restore-power-nightly.json",
    )
    .cluster(&cluster)
    .fails();
    assert_eq!(
        e,
        "error checking platform configuration: unsupported platform type PowerVS"
    );
    let out = Run::restore(
        "unsupported/restore-items/hostedcluster-power-hc.json",
        "unsupported/velero/restore-power-nightly.json",
    )
    .cluster(&cluster)
    .done();
    assert_eq!(out["skipRestore"], false);
}

#[test]
fn c49_c54_presigning_follows_the_bsl_region_endpoint_and_path_style() {
    // S3-4: s3Url and s3ForcePathStyle; the BSL's profile (backup-profile) is ignored.
    let out = Run::restore(
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(&["management", "aws/minio", "aws/static", "aws/velero"])
    .now(S3_NOW)
    .done();
    assert_eq!(injected(&out), json!([S3_4]));
}

#[test]
fn c50_c61_an_s3_bsl_without_a_region_cannot_presign() {
    let e = Run::restore(
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .cluster(&["management", "aws/no-region", "aws/static", "aws/velero"])
    .now(S3_NOW)
    .fails();
    assert_eq!(
        e,
        "error generating pre-signed URL for etcd snapshot: bucket, key, and region are required"
    );
}

// -- STS (c51–c53) ---------------------------------------------------------------------------

const WEB_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token";

/// STS's answer with S3-2's keys and token, so the presigned URL is S3-2's.
fn sts_answer() -> String {
    "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult>\
     <Credentials><AccessKeyId>AKIAIOSFODNN7EXAMPLE</AccessKeyId><SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY</SecretAccessKey>\
     <SessionToken>FwoGZXIvYXdzEBYaDHqa0AP</SessionToken><Expiration>2026-04-08T13:00:00Z</Expiration></Credentials>\
     </AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
        .to_string()
}

/// The modules of an STS restore: hcp with its `sts-endpoint` at `origin`, signing granted `origin`,
/// and the projected web-identity token in the file `token`.
fn sts_modules(origin: &str) -> tempfile::TempDir {
    let modules = hcp_modules(
        &[(
            "# sts-endpoint = \"https://sts.example.internal\"",
            &format!("sts-endpoint = \"{origin}/\""),
        )],
        Some(origin),
    );
    std::fs::write(modules.path().join("token"), WEB_TOKEN).unwrap();
    modules
}

/// The restore of the HostedCluster whose credentials are a bare role ARN, with `modules`.
fn sts_run(modules: &Path) -> Run {
    Run::restore(
        "aws/restore-items/hostedcluster-aws-hc.json",
        "aws/velero/restore-aws-nightly.json",
    )
    .modules(modules)
}

/// The STS restore against the fixture cluster, at S3-2's time, with the token file's variable set
/// (or not).
fn sts_live_run(modules: &Path, token: bool) -> Run {
    let run = sts_run(modules)
        .cluster(&["management", "aws/bsl", "aws/sts", "aws/velero"])
        .now(S3_NOW);
    if token {
        let token_file = modules.join("token");
        run.env("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap())
    } else {
        run
    }
}

/// The STS restore of the HostedCluster against the STS at `origin`, with the token file set (or not).
fn sts_restore(origin: &str, token: bool) -> Output {
    let modules = sts_modules(origin);
    sts_live_run(modules.path(), token).output()
}

#[tokio::test(flavor = "multi_thread")]
async fn c51_to_c53_a_role_arn_is_exchanged_at_sts_for_the_session_token_in_the_url() {
    let sts = Loopback::start(|r| match r.target.as_str() {
        "/" => Reply::new(200, sts_answer()),
        _ => Reply::new(404, "no such path"),
    })
    .await;
    let origin = sts.origin();
    let output = tokio::task::spawn_blocking(move || sts_restore(&origin, true))
        .await
        .unwrap();
    assert!(output.status.success(), "{}", support::stderr(&output));
    let out = support::stdout_json(&output);
    assert_eq!(
        injected(&out),
        json!([S3_2]),
        "S3-2: the token is signed too"
    );
    let received = sts.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].method, "POST");
    assert_eq!(
        received[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        received[0].body,
        format!("Action=AssumeRoleWithWebIdentity&DurationSeconds=3600&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fvelero-hcp-restore&RoleSessionName=restore-aws-hc&Version=2011-06-15&WebIdentityToken={WEB_TOKEN}")
    );
    assert!(!support::stderr(&output).contains(WEB_TOKEN));

    // The bare role ARN needs the projected token's variable.
    let origin = sts.origin();
    let output = tokio::task::spawn_blocking(move || sts_restore(&origin, false))
        .await
        .unwrap();
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error generating pre-signed URL for etcd snapshot: error parsing AWS credentials: credential data is a bare IAM role ARN (arn:aws:iam::123456789012:role/velero-hcp-restore) but AWS_WEB_IDENTITY_TOKEN_FILE is not set"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn c52_c61_sts_refusals_fail_the_item_with_the_status() {
    let sts = Loopback::start(|_| {
        Reply::new(
            403,
            "<ErrorResponse><Error><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>",
        )
    })
    .await;
    let origin = sts.origin();
    let output = tokio::task::spawn_blocking(move || sts_restore(&origin, true))
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error generating pre-signed URL for etcd snapshot: error assuming role via STS: STS returned HTTP 403: "),
        "{stderr}"
    );
}

/// A recording's lines of `capability`.
fn recorded_lines(path: &Path, capability: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["capability"] == capability)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_sts_restore_recorded_once_replays_offline_without_sts_or_the_token_file() {
    let sts = Loopback::start(|r| match r.target.as_str() {
        "/" => Reply::new(200, sts_answer()),
        _ => Reply::new(404, "no such path"),
    })
    .await;
    let origin = sts.origin();
    let modules = sts_modules(&origin);
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("sts.jsonl");
    let (dir, file) = (modules.path().to_path_buf(), record.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        sts_live_run(&dir, true)
            .arg("--record")
            .arg(file.to_str().unwrap())
            .done()
    })
    .await
    .unwrap();
    assert_eq!(injected(&recorded), json!([S3_2]));
    assert_eq!(sts.received().len(), 1);

    // The recording holds every capability's calls: the header's clock and namespace, the granted
    // variable and its file, the STS exchange (the token in its body: a recording is a secret), and
    // the Kubernetes reads.
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&record)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["clock"]["start"], S3_NOW);
    assert_eq!(header["environment"]["veleroNamespace"], "openshift-adp");
    let environment = recorded_lines(&record, "environment");
    assert!(
        environment.contains(&json!({"capability": "environment",
            "call": {"op": "read-env-file", "variable": "AWS_WEB_IDENTITY_TOKEN_FILE"},
            "answer": {"ok": {"text": WEB_TOKEN}}})),
        "{environment:#?}"
    );
    let http = recorded_lines(&record, "http");
    assert_eq!(http.len(), 1, "{http:#?}");
    assert_eq!(http[0]["call"]["method"], "POST");
    assert_eq!(http[0]["call"]["url"], format!("{origin}/"));
    assert!(http[0]["call"]["body"]["text"]
        .as_str()
        .unwrap()
        .ends_with(&format!("&WebIdentityToken={WEB_TOKEN}")));
    assert_eq!(http[0]["answer"]["ok"]["status"], 200);
    assert_eq!(http[0]["answer"]["ok"]["body"]["text"], sts_answer());
    assert!(!recorded_lines(&record, "kube").is_empty());

    // Offline: STS stopped, the token file gone, no variable set, no cluster. The same output.
    let addr = sts.addr;
    drop(sts);
    // Dropping the server aborts its accepting task; the port closes when the runtime drops that task,
    // a moment later on a busy machine.
    let mut closed = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(closed, "STS still answers");
    std::fs::remove_file(modules.path().join("token")).unwrap();
    let (dir, file) = (modules.path().to_path_buf(), record.clone());
    let replayed = tokio::task::spawn_blocking(move || {
        sts_run(&dir)
            .arg("--replay")
            .arg(file.to_str().unwrap())
            .done()
    })
    .await
    .unwrap();
    assert_eq!(replayed, recorded);

    // Strict: without its STS exchange, the recording fails the run naming the call.
    let without_sts = scratch.path().join("without-sts.jsonl");
    let kept: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"capability\":\"http\""))
        .map(str::to_string)
        .collect();
    std::fs::write(&without_sts, kept.join("\n")).unwrap();
    let (dir, file) = (modules.path().to_path_buf(), without_sts.clone());
    let output = tokio::task::spawn_blocking(move || {
        sts_run(&dir)
            .arg("--replay")
            .arg(file.to_str().unwrap())
            .output()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains(&format!("velero-wasm run: the action made calls that are not in the recording:\n  http: POST {origin}/ (with the headers and body sent)")),
        "{stderr}"
    );
    assert!(!stderr.contains(WEB_TOKEN), "{stderr}");

    // The token is the recording's, not the file's: another token is another STS request, a miss.
    let other_token = scratch.path().join("other-token.jsonl");
    let edited: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| {
            if l.contains("\"op\":\"read-env-file\"") {
                l.replace(WEB_TOKEN, "eyJ.another-token")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&other_token, edited.join("\n")).unwrap();
    let (dir, file) = (modules.path().to_path_buf(), other_token.clone());
    let output = tokio::task::spawn_blocking(move || {
        sts_run(&dir)
            .arg("--replay")
            .arg(file.to_str().unwrap())
            .output()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        support::stderr(&output).contains(&format!(
            "  http: POST {origin}/ (with the headers and body sent)"
        )),
        "{}",
        support::stderr(&output)
    );
}

// -- Entra ID (c57–c60) ----------------------------------------------------------------------

const DELEGATION_KEY: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><UserDelegationKey><SignedOid>oid-1234</SignedOid><SignedTid>tid-5678</SignedTid><SignedStart>2026-05-08T12:00:00Z</SignedStart><SignedExpiry>2026-05-08T13:00:00Z</SignedExpiry><SignedService>b</SignedService><SignedVersion>2024-11-04</SignedVersion><Value>dGVzdC1kZWxlZ2F0aW9uLWtleS12YWx1ZSEhISE=</Value></UserDelegationKey>";
const AAD_TOKEN: &str = "eyJ0eXAiOiJKV1QifQ.storage-access-token";

/// Entra ID and Blob storage on one loopback server; the delegation-key answer is `key` (status, body).
async fn entra_and_blob(key: (u16, &'static str)) -> Loopback {
    Loopback::start(move |r| {
        if r.target == "/tid-5678/oauth2/v2.0/token" {
            Reply::new(
                200,
                format!("{{\"token_type\":\"Bearer\",\"expires_in\":3599,\"access_token\":\"{AAD_TOKEN}\"}}"),
            )
        } else if r.target == "/?restype=service&comp=userdelegationkey"
            && r.header("authorization") == Some(&format!("Bearer {AAD_TOKEN}"))
        {
            Reply::new(key.0, key.1)
        } else {
            Reply::new(403, "AuthenticationFailed")
        }
    })
    .await
}

/// The Azure restore of the HostedControlPlane with user delegation, everything at `origin`:
/// the BSL's storageAccountURI, the authority, IMDS, the signing module's grant. `credentials` is the
/// directory of the credential Secret ("" for none), `env` the process's variables.
fn delegation_restore(origin: &str, credentials: &str, env: &[(&str, &str)]) -> Output {
    let modules = hcp_modules(
        &[
            (
                "# aad-authority = \"https://login.example.internal/\"",
                &format!("aad-authority = \"{origin}/\""),
            ),
            (
                "# imds-endpoint = \"http://169.254.169.254\"",
                &format!("imds-endpoint = \"{origin}\""),
            ),
        ],
        Some(origin),
    );
    let mut bsl = read_fixture("azure/user-delegation/backupstoragelocation-default.json");
    bsl["spec"]["config"]["storageAccountURI"] = json!(origin);
    let bsl_path = support::write(modules.path(), "bsl.json", &bsl.to_string());
    let token = support::write(modules.path(), "azure-token", "eyJ.federated-token\n");
    let mut run = Run::restore(
        "azure/restore-items/hostedcontrolplane-azure-hc.json",
        "azure/velero/restore-azure-nightly.json",
    )
    .cluster(&["management", "azure/velero"])
    .arg("--cluster")
    .arg(bsl_path.to_str().unwrap())
    .modules(modules.path())
    .now(AZ_NOW);
    if !credentials.is_empty() {
        run = run.cluster(&[credentials]);
    }
    for (k, v) in env {
        let v = if *v == "<token file>" {
            token.to_str().unwrap()
        } else {
            v
        };
        run = run.env(k, v);
    }
    run.output()
}

/// [`delegation_restore`] against `server`, which must succeed and inject AZ-3's URL on its host.
/// Returns the run's stderr.
async fn az3_restore(
    server: &Loopback,
    credentials: &'static str,
    env: &[(&'static str, &'static str)],
) -> String {
    let (origin, env) = (server.origin(), env.to_vec());
    let output =
        tokio::task::spawn_blocking(move || delegation_restore(&origin, credentials, &env))
            .await
            .unwrap();
    assert!(output.status.success(), "{}", support::stderr(&output));
    // AZ-3, on the storageAccountURI's host.
    assert_eq!(
        injected(&support::stdout_json(&output)),
        json!([format!(
            "{}/mycontainer/path/to/snapshot.db?{AZ_3_QUERY}",
            server.origin()
        )])
    );
    support::stderr(&output)
}

#[tokio::test(flavor = "multi_thread")]
async fn c57_to_c60_entra_id_credentials_from_the_secret_sign_a_user_delegation_sas() {
    let server = entra_and_blob((200, DELEGATION_KEY)).await;
    let log = az3_restore(
        &server,
        "azure/user-delegation/secret-cloud-credentials.json",
        &[],
    )
    .await;
    let received = server.received();
    assert_eq!(received.len(), 2);
    // c58: the storage scope of the public cloud.
    assert_eq!(
        received[0].body,
        "client_id=client-1&client_secret=client-secret-value~42&grant_type=client_credentials&scope=https%3A%2F%2Fstorage.azure.com%2F.default"
    );
    // c59: Get User Delegation Key, with a one-hour window from the fixed clock.
    assert_eq!(received[1].method, "POST");
    assert_eq!(
        received[1].target,
        "/?restype=service&comp=userdelegationkey"
    );
    assert_eq!(received[1].header("x-ms-version"), Some("2024-11-04"));
    assert_eq!(
        received[1].body,
        "<KeyInfo><Start>2026-05-08T12:00:00Z</Start><Expiry>2026-05-08T13:00:00Z</Expiry></KeyInfo>"
    );
    assert!(!log.contains("client-secret-value~42") && !log.contains(AAD_TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn c57_without_a_secret_the_pod_s_workload_identity_is_used() {
    let server = entra_and_blob((200, DELEGATION_KEY)).await;
    az3_restore(
        &server,
        "",
        &[
            ("AZURE_TENANT_ID", "tid-5678"),
            ("AZURE_CLIENT_ID", "client-1"),
            ("AZURE_FEDERATED_TOKEN_FILE", "<token file>"),
        ],
    )
    .await;
    let token_request = &server.received()[0].body;
    assert!(
        token_request.contains("client_assertion=eyJ.federated-token&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"),
        "{token_request}"
    );
    // Without the variables: upstream's message.
    let origin = server.origin();
    let output = tokio::task::spawn_blocking(move || delegation_restore(&origin, "", &[]))
        .await
        .unwrap();
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error generating SAS URL for etcd snapshot: AZURE_TENANT_ID and AZURE_CLIENT_ID env vars are required when no credential data is provided"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn c57_without_a_secret_or_workload_identity_the_node_s_managed_identity_is_used() {
    // docs/signing.md#s6-8's third credential: IMDS gives the token (here a loopback IMDS beside the Blob endpoint).
    let server = Loopback::start(|r| {
        if r.target.starts_with("/metadata/identity/oauth2/token?") && r.header("metadata") == Some("true") {
            Reply::new(
                200,
                format!("{{\"access_token\":\"{AAD_TOKEN}\",\"expires_in\":\"86399\",\"resource\":\"https://storage.azure.com\",\"token_type\":\"Bearer\"}}"),
            )
        } else if r.target == "/?restype=service&comp=userdelegationkey"
            && r.header("authorization") == Some(&format!("Bearer {AAD_TOKEN}"))
        {
            Reply::new(200, DELEGATION_KEY)
        } else {
            Reply::new(400, "unexpected")
        }
    })
    .await;
    let log = az3_restore(
        &server,
        "",
        &[
            ("AZURE_TENANT_ID", "tid-5678"),
            ("AZURE_CLIENT_ID", "client-1"),
        ],
    )
    .await;
    let received = server.received();
    assert_eq!(
        (received[0].method.as_str(), received[0].target.as_str()),
        (
            "GET",
            "/metadata/identity/oauth2/token?api-version=2018-02-01&client_id=client-1&resource=https%3A%2F%2Fstorage.azure.com"
        )
    );
    assert!(!log.contains(AAD_TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn c59_c61_a_refused_delegation_key_fails_the_item_with_its_status() {
    let server = entra_and_blob((403, "AuthorizationPermissionMismatch")).await;
    let origin = server.origin();
    let output = tokio::task::spawn_blocking(move || {
        delegation_restore(
            &origin,
            "azure/user-delegation/secret-cloud-credentials.json",
            &[],
        )
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("velero-wasm run: error generating SAS URL for etcd snapshot: error getting user delegation key: Get User Delegation Key returned 403: AuthorizationPermissionMismatch"),
        "{stderr}"
    );
}

#[test]
fn c62_the_grants_are_exactly_the_spec_s_calls() {
    let stock = actions(None);
    let grant = |name: &str| action(&stock, name)["grant"].clone();
    // hcp: K1, K3, K5, K7–K13 (backup) and R1–R4 (restore); never update, patch, watch or list of
    // anything but the two discovery lists.
    assert_eq!(
        grant(BACKUP)["kube"],
        json!([
            {"resources": ["customresourcedefinitions.apiextensions.k8s.io"], "verbs": ["get"], "namespaces": [""]},
            {"resources": ["configmaps", "backupstoragelocations.velero.io", "backups.velero.io", "secrets"], "verbs": ["get"], "namespaces": ["@velero"]},
            {"resources": ["hostedcontrolplanes.hypershift.openshift.io", "hostedclusters.hypershift.openshift.io"], "verbs": ["list"], "namespaces": ["*"]},
            {"resources": ["hcpetcdbackups.hypershift.openshift.io"], "verbs": ["get", "create"], "namespaces": ["*"]},
            {"resources": ["secrets"], "verbs": ["get", "create", "delete"], "namespaces": ["hypershift"]},
        ])
    );
    assert_eq!(
        grant(BACKUP)["http"],
        json!([]),
        "signing holds the network"
    );
    assert_eq!(
        grant(BACKUP)["env-files"],
        json!(["AWS_WEB_IDENTITY_TOKEN_FILE", "AZURE_FEDERATED_TOKEN_FILE"])
    );
    // agent: K3, K4 and K14 only.
    assert_eq!(
        grant(AGENT)["kube"],
        json!([
            {"resources": ["customresourcedefinitions.apiextensions.k8s.io"], "verbs": ["get"], "namespaces": [""]},
            {"resources": ["hostedcontrolplanes.hypershift.openshift.io"], "verbs": ["list"], "namespaces": ["*"]},
            {"resources": ["clusterdeployments.hive.openshift.io"], "verbs": ["update"], "namespaces": ["@item"]},
        ])
    );
}

// ---------------------------------------------------------------------------------------------
// The etcd snapshot as an asynchronous operation (etcd-wait = "async", the stock setting)

/// An operation of Backup `aws-nightly` started at 2026-04-08T11:00:00Z, as its id says.
fn aws_operation() -> String {
    format!("hcpetcdbackup:clusters-aws-hc/{AWS_CR}:1775646000:hypershift/etcd-backup-creds-aws-nightly")
}

/// `run --operation-id` from a new process against the AWS cluster with `etcd` (completes, fails,
/// never) and the copy the operation's Execute made.
fn progress(etcd: &str, extra: &[&str]) -> Value {
    let mut run = Run::progress(&aws_operation(), "aws/velero/backup-aws-nightly.json")
        .cluster(AWS)
        .cluster(&[ETCD_SNAPSHOT, etcd, "aws/etcd/copied-secret"])
        .now(S3_NOW);
    for arg in extra {
        run = run.arg(arg);
    }
    run.done()
}

#[test]
fn async_progress_reports_a_completed_snapshot_and_deletes_the_copy() {
    let out = progress("aws/etcd/completes", &[]);
    assert_eq!(
        out["progress"],
        json!({"completed": true, "error": null, "nCompleted": 1, "nTotal": 1, "units": "etcd snapshots",
               "description": "etcd snapshot at s3://my-bucket/path/to/snapshot.db",
               "started": "2026-04-08T11:00:00Z", "updated": "2026-04-08T11:04:30Z"})
    );
    assert_eq!(
        writes(&out),
        ["delete Secret hypershift/etcd-backup-creds-aws-nightly"]
    );
}

#[test]
fn async_progress_reports_a_failed_snapshot_as_a_failed_operation() {
    let out = progress("aws/etcd/fails", &[]);
    assert_eq!(out["progress"]["completed"], true);
    assert_eq!(
        out["progress"]["error"],
        "HCPEtcdBackup failed: uploading snapshot: AccessDenied: s3:PutObject on my-bucket"
    );
    assert_eq!(
        writes(&out),
        ["delete Secret hypershift/etcd-backup-creds-aws-nightly"]
    );
}

#[test]
fn async_progress_of_a_snapshot_that_never_completes_stays_in_progress() {
    let started = std::time::Instant::now();
    let out = progress("aws/etcd/never", &[]);
    eprintln!("async progress, never completes: {:?}", started.elapsed());
    assert_eq!(
        out["progress"],
        json!({"completed": false, "error": null, "nCompleted": 0, "nTotal": 1, "units": "etcd snapshots",
               "description": format!("waiting for HCPEtcdBackup clusters-aws-hc/{AWS_CR}: BackupCompleted=False (BackupInProgress): \"etcd snapshot in progress\""),
               "started": "2026-04-08T11:00:00Z", "updated": "2026-04-08T11:01:05Z"})
    );
    assert_eq!(
        out["clusterWrites"],
        json!([]),
        "the copy stays while it runs"
    );
    // Velero's item-operation timeout then cancels: the copy goes, the HCPEtcdBackup stays.
    let out = progress("aws/etcd/never", &["--cancel"]);
    assert_eq!(out["cancelled"], true);
    assert_eq!(
        writes(&out),
        ["delete Secret hypershift/etcd-backup-creds-aws-nightly"]
    );
}

#[test]
fn async_progress_of_an_unknown_or_vanished_operation() {
    let e = Run::progress(
        "oadp-aws-nightly-gnvc",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .fails();
    assert!(
        e.starts_with("operation ID oadp-aws-nightly-gnvc is invalid: "),
        "{e}"
    );
    let out = Run::progress(&aws_operation(), "aws/velero/backup-aws-nightly.json")
        .cluster(AWS)
        .now(S3_NOW)
        .done();
    assert_eq!(out["progress"]["completed"], true);
    assert_eq!(
        out["progress"]["error"],
        format!("HCPEtcdBackup clusters-aws-hc/{AWS_CR} no longer exists")
    );
}

#[test]
fn async_execute_finds_an_existing_snapshot_and_starts_no_second_operation() {
    // In progress: the HostedCluster gets its mark and no operation (the first item's covers it).
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT, "aws/etcd/never"])
    .done();
    assert_eq!(out["operationId"], Value::Null);
    assert_eq!(out["postOperationItems"], json!([]));
    assert!(out["item"]["metadata"]["annotations"]
        .get("hypershift.openshift.io/etcd-snapshot-url")
        .is_none());
    assert_eq!(out["clusterWrites"], json!([]));
    // Completed already: its URL is recorded at once.
    let out = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT, "aws/etcd/completes"])
    .done();
    assert_eq!(
        out["item"]["metadata"]["annotations"]["hypershift.openshift.io/etcd-snapshot-url"],
        "s3://my-bucket/path/to/snapshot.db"
    );
}

#[test]
fn async_finalization_records_the_url_and_starts_nothing() {
    for item in [
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/cluster/hostedcontrolplane-aws-hc.json",
    ] {
        let out = Run::backup(item, "aws/backups/finalizing.json")
            .cluster(AWS)
            .cluster(&[
                ETCD_SNAPSHOT,
                "aws/etcd/completes",
                "aws/etcd/copied-secret",
            ])
            .done();
        assert_eq!(out["operationId"], Value::Null, "{item}");
        assert_eq!(
            out["item"]["metadata"]["annotations"]["hypershift.openshift.io/etcd-snapshot-url"],
            "s3://my-bucket/path/to/snapshot.db"
        );
        assert_eq!(
            writes(&out),
            ["delete Secret hypershift/etcd-backup-creds-aws-nightly"]
        );
    }
    // A failed snapshot: nothing to record, still no operation, still no error (Progress said it).
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/backups/finalizing.json",
    )
    .cluster(AWS)
    .cluster(&[ETCD_SNAPSHOT, "aws/etcd/fails"])
    .done();
    assert_eq!(out["operationId"], Value::Null);
    assert!(out["item"]["metadata"]["annotations"]
        .get("hypershift.openshift.io/etcd-snapshot-url")
        .is_none());
    assert!(out["item"]["status"]
        .get("lastSuccessfulEtcdBackupURL")
        .is_none());
}

/// A loopback API server holding the AWS management cluster under etcdSnapshot, and a kubeconfig for
/// it. A previous backup's HCPEtcdBackup makes the resource known to discovery.
fn live_aws() -> (support::apiserver::ApiServer, tempfile::TempDir, PathBuf) {
    let paths: Vec<PathBuf> = AWS
        .iter()
        .chain(&[ETCD_SNAPSHOT, "aws/etcd/previous"])
        .map(|r| fixture(r))
        .collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let server = support::apiserver::ApiServer::start(&refs);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    (server, dir, kubeconfig)
}

fn condition(status: &str, reason: &str, message: &str) -> Value {
    json!({"type": "BackupCompleted", "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2026-04-08T12:03:00Z"})
}

#[test]
fn async_end_to_end_on_a_live_api_server_with_hypershift_moving_the_backup_on() {
    let (server, dir, kubeconfig) = live_aws();
    let kubeconfig = kubeconfig.to_str().unwrap();
    // HyperShift's controller starts every HCPEtcdBackup as soon as it is created.
    server.controller(
        "hcpetcdbackups.hypershift.openshift.io",
        json!({"conditions": [condition("False", "BackupInProgress", "snapshotting")]}),
    );
    let started = std::time::Instant::now();
    let out = Run::backup(
        "aws/cluster/hostedcontrolplane-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .arg("--kubeconfig")
    .arg(kubeconfig)
    .now(S3_NOW)
    .done();
    eprintln!(
        "async Execute (create, start check): {:?}",
        started.elapsed()
    );
    let id = format!("hcpetcdbackup:clusters-aws-hc/{AWS_CR}:1775649600:hypershift/etcd-backup-creds-aws-nightly");
    assert_eq!(out["operationId"], id);
    assert_eq!(
        out["postOperationItems"],
        json!([
            {"group": "hypershift.openshift.io", "resource": "hostedclusters", "namespace": "clusters", "name": "aws-hc"},
            {"group": "hypershift.openshift.io", "resource": "hostedcontrolplanes", "namespace": "clusters-aws-hc", "name": "aws-hc"},
        ])
    );
    assert!(server
        .object(
            "hcpetcdbackups.hypershift.openshift.io",
            "clusters-aws-hc",
            AWS_CR
        )
        .is_some());
    assert!(server
        .object("secrets", "hypershift", "etcd-backup-creds-aws-nightly")
        .is_some());

    // A new process, with only the id: in progress.
    let progress = |at: &str| {
        Run::progress(&id, "aws/velero/backup-aws-nightly.json")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .now(at)
            .done()["progress"]
            .clone()
    };
    let p = progress("2026-04-08T12:00:10Z");
    assert_eq!(p["completed"], false);
    assert_eq!(p["started"], "2026-04-08T12:00:00Z");

    // HyperShift finishes; the next Progress completes the operation and removes the copy.
    assert!(server.set_status(
        "hcpetcdbackups.hypershift.openshift.io",
        "clusters-aws-hc",
        AWS_CR,
        json!({"conditions": [condition("True", "BackupSucceeded", "uploaded")], "snapshotURL": "s3://my-bucket/path/to/snapshot.db"}),
    ));
    let p = progress("2026-04-08T12:05:00Z");
    assert_eq!(p["completed"], true, "{p}");
    assert_eq!(p["error"], Value::Null);
    assert_eq!(p["updated"], "2026-04-08T12:03:00Z");
    assert!(server
        .object("secrets", "hypershift", "etcd-backup-creds-aws-nightly")
        .is_none());

    // Finalization: Velero backs the post-operation items up again; they get the URL.
    let out = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/backups/finalizing.json",
    )
    .arg("--kubeconfig")
    .arg(kubeconfig)
    .done();
    assert_eq!(
        out["item"]["status"]["lastSuccessfulEtcdBackupURL"],
        "s3://my-bucket/path/to/snapshot.db"
    );
    assert_eq!(out["operationId"], Value::Null);
    drop(dir);
}

#[test]
fn async_execute_fails_when_the_backup_is_rejected_and_leaves_no_copy() {
    let (server, _dir, kubeconfig) = live_aws();
    server.controller(
        "hcpetcdbackups.hypershift.openshift.io",
        json!({"conditions": [condition("False", "BackupRejected", "another backup is running")]}),
    );
    let e = Run::backup(
        "aws/cluster/hostedcluster-aws-hc.json",
        "aws/velero/backup-aws-nightly.json",
    )
    .arg("--kubeconfig")
    .arg(kubeconfig.to_str().unwrap())
    .now(S3_NOW)
    .fails();
    assert_eq!(
        e,
        "error creating HCPEtcdBackup: HCPEtcdBackup rejected: another backup is running"
    );
    assert!(server
        .object("secrets", "hypershift", "etcd-backup-creds-aws-nightly")
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn async_over_velero_s_protocol_progress_comes_from_a_new_plugin_process() {
    use support::plugin::{binary, Plugin};
    use velero_wasm::plugin::proto::v2::backup_item_action_client::BackupItemActionClient;
    use velero_wasm::plugin::proto::v2::{BackupItemActionProgressRequest, ExecuteRequest};

    let (server, _dir, kubeconfig) = live_aws();
    server.controller(
        "hcpetcdbackups.hypershift.openshift.io",
        json!({"conditions": [condition("False", "BackupInProgress", "snapshotting")]}),
    );
    let env = [
        ("VELERO_NAMESPACE", "openshift-adp"),
        ("KUBECONFIG", kubeconfig.to_str().unwrap()),
    ];
    let backup = std::fs::read(fixture("aws/velero/backup-aws-nightly.json")).unwrap();
    let item = std::fs::read(fixture("aws/cluster/hostedcontrolplane-aws-hc.json")).unwrap();

    let first = Plugin::start_as(binary(), &[], &env);
    let answer = BackupItemActionClient::new(first.channel().await)
        .execute(ExecuteRequest {
            plugin: BACKUP.into(),
            item: item.clone(),
            backup: backup.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    first.shutdown().await;
    let id = answer.operation_id;
    assert!(
        id.starts_with(&format!("hcpetcdbackup:clusters-aws-hc/{AWS_CR}:")),
        "{id}"
    );
    let posts: Vec<(String, String)> = answer
        .post_operation_items
        .iter()
        .map(|p| (p.resource.clone(), format!("{}/{}", p.namespace, p.name)))
        .collect();
    assert_eq!(
        posts,
        [
            ("hostedclusters".to_string(), "clusters/aws-hc".to_string()),
            (
                "hostedcontrolplanes".to_string(),
                "clusters-aws-hc/aws-hc".to_string()
            )
        ]
    );

    assert!(server.set_status(
        "hcpetcdbackups.hypershift.openshift.io",
        "clusters-aws-hc",
        AWS_CR,
        json!({"conditions": [condition("True", "BackupSucceeded", "uploaded")], "snapshotURL": "s3://my-bucket/path/to/snapshot.db"}),
    ));
    let second = Plugin::start_as(binary(), &[], &env);
    let progress = BackupItemActionClient::new(second.channel().await)
        .progress(BackupItemActionProgressRequest {
            plugin: BACKUP.into(),
            operation_id: id.clone(),
            backup,
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    second.shutdown().await;
    assert!(
        progress.completed && progress.err.is_empty(),
        "{progress:?}"
    );
    assert_eq!(
        progress.started.unwrap().seconds.to_string(),
        id.split(':').nth(2).unwrap()
    );
    assert!(server
        .object("secrets", "hypershift", "etcd-backup-creds-aws-nightly")
        .is_none());
}
