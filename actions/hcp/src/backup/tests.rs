//! The backup action against fake clusters: the preamble, every kind of docs/hcp.md#s4-2, and the etcd snapshot
//! in both wait modes.

use std::time::Duration;

use hypershift::apis::{
    BACKUP_STORAGE_LOCATIONS, CONFIG_MAPS, CUSTOM_RESOURCE_DEFINITIONS, HCP_ETCD_BACKUPS,
    HOSTED_CLUSTERS, HOSTED_CONTROL_PLANES, SECRETS,
};
use serde_json::{json, Value};
use velero_wasm_sdk::{Cluster, FakeCluster};

use super::*;
use crate::etcd::name::cr_name;
use crate::settings::{EtcdWait, Settings};
use crate::testing::objects::{
    backup as backup_json, bsl, config, crd, etcd_backup, hc, hcp, object, secret,
};
use crate::testing::{Fakes, Reconciling, START};

const HCP_CRD: &str = "hostedcontrolplanes.hypershift.openshift.io";
const ETCD_CRD: &str = "hcpetcdbackups.hypershift.openshift.io";

/// A management cluster: both CRDs, the HostedCluster and HostedControlPlane on `platform`, an AWS
/// BSL with the fallback Secret, and the plugin's ConfigMap with `data`.
fn management(platform: &str, data: Value) -> FakeCluster {
    FakeCluster::new()
        .with(CUSTOM_RESOURCE_DEFINITIONS, crd(HCP_CRD))
        .with(CUSTOM_RESOURCE_DEFINITIONS, crd(ETCD_CRD))
        .with(HOSTED_CONTROL_PLANES, hcp(platform))
        .with(HOSTED_CLUSTERS, hc())
        .with(
            BACKUP_STORAGE_LOCATIONS,
            bsl("aws", json!({"region": "us-east-1"}), None),
        )
        .with(
            SECRETS,
            secret(
                "cloud-credentials",
                "cloud",
                "[default]\naws_access_key_id=AKID\n",
            ),
        )
        .with(CONFIG_MAPS, config(data))
}

fn etcd_snapshot() -> Value {
    json!({"etcdBackupMethod": "etcdSnapshot"})
}

fn nightly() -> String {
    backup_json(json!({}), json!({"phase": "InProgress"})).to_string()
}

fn cr() -> String {
    cr_name(&object(backup_json(json!({}), json!({}))))
}

fn run<C: Cluster>(fakes: &Fakes<C>, item: &Object, backup: &str) -> Result<Outcome, String> {
    super::backup(fakes.context(), &item.to_json(), backup)
}

fn changed(outcome: Outcome) -> Object {
    match outcome {
        Outcome::Changed(item) => item,
        other => panic!("expected a changed item, got {other:?}"),
    }
}

fn pod(name: &str) -> Object {
    object(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "clusters-example"}}),
    )
}

fn pvc(name: &str, labels: Value) -> Object {
    object(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "clusters-example", "labels": labels}}))
}

fn verbs(calls: &[velero_wasm_sdk::Call]) -> Vec<String> {
    calls
        .iter()
        .map(|c| format!("{} {} {}/{}", c.verb, c.resource, c.namespace, c.target))
        .collect()
}

#[test]
fn non_hypershift_backups_pass_through_untouched() {
    let fakes = Fakes::new(FakeCluster::new());
    let no_namespaces = json!({"metadata": {"name": "b"}, "spec": {}}).to_string();
    let outcome = run(&fakes, &hc(), &no_namespaces).unwrap();
    assert!(matches!(outcome, Outcome::PassThrough(ref why) if why == "no namespaces provided"));
    assert!(fakes.cluster.calls().is_empty());
    // No CRD: one GET, then nothing.
    let outcome = run(&fakes, &hc(), &nightly()).unwrap();
    assert!(matches!(outcome, Outcome::PassThrough(_)));
    assert_eq!(
        verbs(&fakes.cluster.calls()),
        [format!(
            "get customresourcedefinitions.apiextensions.k8s.io /{HCP_CRD}"
        )]
    );
}

#[test]
fn without_a_hosted_control_plane_items_pass_through() {
    let fakes = Fakes::new(FakeCluster::new().with(CUSTOM_RESOURCE_DEFINITIONS, crd(HCP_CRD)));
    let outcome = run(&fakes, &hc(), &nightly()).unwrap();
    assert!(
        matches!(outcome, Outcome::PassThrough(ref why) if why.contains("no HostedControlPlane"))
    );
}

#[test]
fn the_configuration_is_validated_for_hypershift_items() {
    let fakes = Fakes::new(management("AWS", json!({"etcdBackupMethod": "etcd"})));
    let e = run(&fakes, &pod("etcd-0"), &nightly()).unwrap_err();
    assert_eq!(
        e,
        "invalid etcdBackupMethod \"etcd\": must be \"volumeSnapshot\" or \"etcdSnapshot\""
    );
    let mut fakes = Fakes::new(management("AWS", json!({})));
    fakes.env.set_namespace("");
    let e = run(&fakes, &pod("etcd-0"), &nightly()).unwrap_err();
    assert!(e.starts_with("error getting current namespace: "), "{e}");
}

#[test]
fn control_planes_on_unsupported_platforms_fail() {
    for platform in ["PowerVS", "GCP", ""] {
        let mut item = hcp("AWS");
        item.set("/spec/platform/type", json!(platform)).unwrap();
        let fakes = Fakes::new(management("AWS", json!({})));
        let e = run(&fakes, &item, &nightly()).unwrap_err();
        assert_eq!(
            e,
            format!("error checking platform configuration: unsupported platform type {platform}")
        );
    }
}

#[test]
fn hosted_clusters_are_marked_restored_from_backup() {
    let fakes = Fakes::new(management("AWS", json!({})));
    let item = changed(run(&fakes, &hc(), &nightly()).unwrap());
    assert_eq!(
        item.annotation("hypershift.openshift.io/restored-from-backup"),
        Some("")
    );
    assert!(item.pointer("/status").is_none());
    // volumeSnapshot never touches HCPEtcdBackups, BSLs or Secrets.
    for call in fakes.cluster.calls() {
        assert!(
            ![
                "hcpetcdbackups.hypershift.openshift.io",
                "backupstoragelocations.velero.io",
                "secrets"
            ]
            .contains(&call.resource.as_str()),
            "{call:?}"
        );
    }
    let hcp_outcome = run(&fakes, &hcp("AWS"), &nightly()).unwrap();
    assert!(matches!(hcp_outcome, Outcome::PassThrough(_)));
}

#[test]
fn etcd_pods_are_labelled_for_fs_backup_only_when_it_is_off_by_default() {
    let fakes = Fakes::new(management("AWS", json!({})));
    let off = backup_json(json!({"defaultVolumesToFsBackup": false}), json!({})).to_string();
    let item = changed(run(&fakes, &pod("etcd-0"), &off).unwrap());
    assert_eq!(item.label("hypershift.openshift.io/fsbackup"), Some("true"));
    let item = changed(run(&fakes, &pod("foo-etcd-bar"), &off).unwrap());
    assert_eq!(item.label("hypershift.openshift.io/fsbackup"), Some("true"));
    let on = backup_json(json!({"defaultVolumesToFsBackup": true}), json!({})).to_string();
    for backup in [on, nightly()] {
        assert!(matches!(
            run(&fakes, &pod("etcd-0"), &backup).unwrap(),
            Outcome::PassThrough(_)
        ));
    }
    assert!(matches!(
        run(&fakes, &pod("kube-apiserver-0"), &off).unwrap(),
        Outcome::PassThrough(_)
    ));
}

#[test]
fn etcd_pods_and_volumes_are_excluded_under_etcd_snapshot() {
    let fakes = Fakes::new(management("AWS", etcd_snapshot()));
    for item in [pod("etcd-0"), pvc("data-etcd-0", json!({}))] {
        match run(&fakes, &item, &nightly()).unwrap() {
            Outcome::Excluded(out) => assert!(
                out.annotation("velero.io/skip-from-backup")
                    .unwrap()
                    .starts_with("hypershift-oadp-plugin"),
                "{out:?}"
            ),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        run(&fakes, &pod("kube-apiserver-0"), &nightly()).unwrap(),
        Outcome::PassThrough(_)
    ));
    assert!(matches!(
        run(&fakes, &pvc("data-other", json!({})), &nightly()).unwrap(),
        Outcome::PassThrough(_)
    ));
    let fakes = Fakes::new(management("AWS", json!({})));
    assert!(matches!(
        run(&fakes, &pvc("data-etcd-0", json!({})), &nightly()).unwrap(),
        Outcome::PassThrough(_)
    ));
}

#[test]
fn kubevirt_rhcos_volumes_are_always_excluded() {
    let fakes = Fakes::new(management("KubeVirt", json!({})));
    let dv = object(
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "rhcos", "namespace": "clusters-example", "labels": {"hypershift.openshift.io/is-kubevirt-rhcos": ""}}}),
    );
    for item in [
        dv,
        pvc(
            "rhcos-pvc",
            json!({"hypershift.openshift.io/is-kubevirt-rhcos": "true"}),
        ),
    ] {
        assert!(matches!(
            run(&fakes, &item, &nightly()).unwrap(),
            Outcome::Excluded(_)
        ));
    }
}

#[test]
fn other_kinds_pass_through() {
    let fakes = Fakes::new(management("AWS", etcd_snapshot()));
    for kind in [
        "Secret",
        "ConfigMap",
        "NodePool",
        "ClusterDeployment",
        "StatefulSet",
    ] {
        let item = object(
            json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "etcd-x", "namespace": "clusters"}}),
        );
        assert!(
            matches!(
                run(&fakes, &item, &nightly()).unwrap(),
                Outcome::PassThrough(_)
            ),
            "{kind}"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// etcd snapshot, blocking

fn blocking<C: Cluster>(cluster: C) -> Fakes<C> {
    let mut fakes = Fakes::new(cluster);
    fakes.settings = Settings {
        etcd_wait: EtcdWait::Blocking,
        ..Settings::default()
    };
    fakes
}

const URL: &str = "s3://my-bucket/velero/backups/nightly/etcd-backup/1778241600.db";

#[test]
fn blocking_creates_the_backup_waits_and_records_the_url() {
    let script = vec![
        ("False", "BackupInProgress", ""),
        ("False", "BackupInProgress", ""),
        ("True", "BackupSucceeded", URL),
    ];
    let fakes = blocking(Reconciling::new(management("AWS", etcd_snapshot()), script));
    let item = changed(run(&fakes, &hc(), &nightly()).unwrap());
    assert_eq!(
        item.annotation("hypershift.openshift.io/etcd-snapshot-url"),
        Some(URL)
    );
    assert_eq!(
        item.str_at("/status/lastSuccessfulEtcdBackupURL"),
        Some(URL)
    );
    assert_eq!(
        item.annotation("hypershift.openshift.io/restored-from-backup"),
        Some("")
    );
    // Verify: 1 read; completion: reads 2 and 3, 5 s apart.
    assert_eq!(fakes.clock.slept(), Duration::from_secs(5));
    let cluster = &fakes.cluster.inner;
    let created = cluster
        .get(HCP_ETCD_BACKUPS, "clusters-example", &cr())
        .unwrap();
    assert_eq!(
        created.pointer("/spec"),
        Some(&json!({"storage": {"storageType": "S3", "s3": {
            "bucket": "my-bucket", "region": "us-east-1", "keyPrefix": "velero/backups/nightly/etcd-backup",
            "credentials": {"name": "etcd-backup-creds-nightly"},
            "kmsKeyARN": "arn:aws:kms:us-east-1:123456789012:key/k-1"}}}))
    );
    // The copied Secret was deleted after success.
    assert!(cluster
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .unwrap_err()
        .is_not_found());
    let writes: Vec<String> = verbs(&cluster.calls())
        .into_iter()
        .filter(|c| !c.starts_with("get") && !c.starts_with("list"))
        .collect();
    assert_eq!(
        writes,
        [
            "create secrets hypershift/etcd-backup-creds-nightly".to_string(),
            format!(
                "create hcpetcdbackups.hypershift.openshift.io clusters-example/{}",
                cr()
            ),
            "delete secrets hypershift/etcd-backup-creds-nightly".to_string(),
        ]
    );
}

#[test]
fn blocking_second_item_finds_the_finished_backup_without_creating_or_sleeping() {
    let cluster = management("AWS", etcd_snapshot()).with(
        HCP_ETCD_BACKUPS,
        etcd_backup(&cr(), "True", "BackupSucceeded", URL),
    );
    let fakes = blocking(cluster);
    let item = changed(run(&fakes, &hcp("AWS"), &nightly()).unwrap());
    assert_eq!(
        item.annotation("hypershift.openshift.io/etcd-snapshot-url"),
        Some(URL)
    );
    assert!(
        item.pointer("/status").is_none(),
        "the HCP gets the annotation only"
    );
    assert_eq!(fakes.clock.slept(), Duration::ZERO);
    assert!(fakes.cluster.calls().iter().all(|c| c.verb != "create"));
}

#[test]
fn blocking_failures_name_the_step_and_delete_the_copy() {
    // The CRD is missing.
    let cluster = FakeCluster::new()
        .with(CUSTOM_RESOURCE_DEFINITIONS, crd(HCP_CRD))
        .with(HOSTED_CONTROL_PLANES, hcp("AWS"))
        .with(CONFIG_MAPS, config(etcd_snapshot()));
    let e = run(&blocking(cluster), &hc(), &nightly()).unwrap_err();
    assert_eq!(e, "error creating HCPEtcdBackup: etcdBackupMethod is \"etcdSnapshot\" but HCPEtcdBackup CRD not found in the cluster");

    // Verify fails.
    let fakes = blocking(Reconciling::new(
        management("AWS", etcd_snapshot()),
        vec![("False", "BackupFailed", "")],
    ));
    let e = run(&fakes, &hcp("AWS"), &nightly()).unwrap_err();
    assert_eq!(e, "error creating HCPEtcdBackup: HCPEtcdBackup failed: m");
    assert!(fakes
        .cluster
        .inner
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_err());

    // Completion fails: the copy goes too (upstream leaks it).
    let fakes = blocking(Reconciling::new(
        management("AWS", etcd_snapshot()),
        vec![
            ("False", "BackupInProgress", ""),
            ("False", "BackupRejected", ""),
        ],
    ));
    let e = run(&fakes, &hcp("AWS"), &nightly()).unwrap_err();
    assert_eq!(e, "HCPEtcdBackup failed: HCPEtcdBackup rejected: m");
    assert!(fakes
        .cluster
        .inner
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_err());

    // An unsupported provider: nothing was copied, nothing created.
    let cluster = management("AWS", etcd_snapshot());
    cluster
        .delete(BACKUP_STORAGE_LOCATIONS, "openshift-adp", "default")
        .unwrap();
    let cluster = cluster.with(BACKUP_STORAGE_LOCATIONS, bsl("gcp", json!({}), None));
    let fakes = blocking(cluster);
    let e = run(&fakes, &hcp("AWS"), &nightly()).unwrap_err();
    assert!(e.starts_with("error creating HCPEtcdBackup: failed to map BSL to HCPEtcdBackup storage: unsupported BSL provider \"gcp\""), "{e}");
    assert!(fakes.cluster.calls().iter().all(|c| c.verb != "create"));
}

#[test]
fn blocking_never_completing_times_out_naming_the_backup() {
    let fakes = blocking(Reconciling::new(
        management("AWS", etcd_snapshot()),
        vec![("False", "BackupInProgress", "")],
    ));
    let e = run(&fakes, &hcp("AWS"), &nightly()).unwrap_err();
    assert_eq!(
        e,
        format!("HCPEtcdBackup failed: timed out after 10m waiting for HCPEtcdBackup clusters-example/{} to complete; last observed: BackupCompleted=False (BackupInProgress): \"m\"", cr())
    );
    assert_eq!(fakes.clock.slept(), Duration::from_secs(600));
}

// ------------------------------------------------------------------------------------------------
// etcd snapshot, async

#[test]
fn async_starts_an_operation_once_and_lists_both_objects() {
    let fakes = Fakes::new(Reconciling::new(
        management("AWS", etcd_snapshot()),
        vec![("False", "BackupInProgress", "")],
    ));
    let Outcome::Started {
        item,
        operation_id,
        post_operation_items,
    } = run(&fakes, &hcp("AWS"), &nightly()).unwrap()
    else {
        panic!("no operation")
    };
    assert_eq!(item, hcp("AWS"));
    assert_eq!(
        operation_id,
        format!(
            "hcpetcdbackup:clusters-example/{}:{START}:hypershift/etcd-backup-creds-nightly",
            cr()
        )
    );
    let posts: Vec<String> = post_operation_items.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        posts,
        [
            "hostedclusters.hypershift.openshift.io clusters/example",
            "hostedcontrolplanes.hypershift.openshift.io clusters-example/example"
        ]
    );
    // Not waited for; the copy stays until the operation ends.
    assert_eq!(fakes.clock.slept(), Duration::ZERO);
    assert!(fakes
        .cluster
        .inner
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_ok());

    // The HostedCluster, next: the CR exists, no operation, no create.
    let creates = fakes
        .cluster
        .inner
        .calls()
        .iter()
        .filter(|c| c.verb == "create")
        .count();
    let item = changed(run(&fakes, &hc(), &nightly()).unwrap());
    assert!(item
        .annotation("hypershift.openshift.io/etcd-snapshot-url")
        .is_none());
    assert_eq!(
        fakes
            .cluster
            .inner
            .calls()
            .iter()
            .filter(|c| c.verb == "create")
            .count(),
        creates
    );
}

#[test]
fn async_finalization_records_the_url_and_deletes_the_copy() {
    let cluster = management("AWS", etcd_snapshot())
        .with(HCP_ETCD_BACKUPS, etcd_backup(&cr(), "True", "BackupSucceeded", URL))
        .with(SECRETS, object(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "etcd-backup-creds-nightly", "namespace": "hypershift"}})));
    let fakes = Fakes::new(cluster);
    let finalizing = backup_json(json!({}), json!({"phase": "Finalizing"})).to_string();
    let item = changed(run(&fakes, &hc(), &finalizing).unwrap());
    assert_eq!(
        item.annotation("hypershift.openshift.io/etcd-snapshot-url"),
        Some(URL)
    );
    assert_eq!(
        item.str_at("/status/lastSuccessfulEtcdBackupURL"),
        Some(URL)
    );
    assert!(fakes
        .cluster
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_err());
    assert!(fakes.cluster.calls().iter().all(|c| c.verb != "create"));
    // A failed snapshot leaves nothing to record, and still no operation.
    let cluster = management("AWS", etcd_snapshot()).with(
        HCP_ETCD_BACKUPS,
        etcd_backup(&cr(), "False", "BackupFailed", ""),
    );
    let fakes = Fakes::new(cluster);
    let partially =
        backup_json(json!({}), json!({"phase": "FinalizingPartiallyFailed"})).to_string();
    assert!(matches!(
        run(&fakes, &hcp("AWS"), &partially).unwrap(),
        Outcome::PassThrough(_)
    ));
}

#[test]
fn async_second_item_records_a_url_that_is_already_there() {
    let cluster = management("AWS", etcd_snapshot()).with(
        HCP_ETCD_BACKUPS,
        etcd_backup(&cr(), "True", "BackupSucceeded", URL),
    );
    let fakes = Fakes::new(cluster);
    let item = changed(run(&fakes, &hcp("AWS"), &nightly()).unwrap());
    assert_eq!(
        item.annotation("hypershift.openshift.io/etcd-snapshot-url"),
        Some(URL)
    );
}

/// A cluster where another item of the same backup creates the HCPEtcdBackup between this call's
/// GET and its create: the first GET of it says NotFound although it exists.
struct Race(Reconciling, std::cell::Cell<bool>);

impl Cluster for Race {
    fn call(
        &self,
        call: velero_wasm_sdk::KubeCall<'_>,
    ) -> Result<velero_wasm_sdk::KubeAnswer, velero_wasm_sdk::KubeError> {
        if let velero_wasm_sdk::KubeCall::Get { api, .. } = call {
            if api.resource == "hcpetcdbackups" && !self.1.replace(true) {
                return Err(velero_wasm_sdk::KubeError::NotFound("not yet".into()));
            }
        }
        self.0.call(call)
    }
}

#[test]
fn a_create_that_loses_a_race_counts_as_created() {
    let cluster = management("AWS", etcd_snapshot()).with(
        HCP_ETCD_BACKUPS,
        etcd_backup(&cr(), "False", "BackupInProgress", ""),
    );
    let race = Race(
        Reconciling::new(cluster, vec![("False", "BackupInProgress", "")]),
        std::cell::Cell::new(false),
    );
    let fakes = Fakes::new(race);
    let outcome = run(&fakes, &hcp("AWS"), &nightly()).unwrap();
    assert!(matches!(outcome, Outcome::Started { .. }), "{outcome:?}");
    let creates: Vec<_> = fakes
        .cluster
        .0
        .inner
        .calls()
        .into_iter()
        .filter(|c| c.verb == "create")
        .collect();
    assert_eq!(
        creates.len(),
        2,
        "the Secret copy, then the CR (AlreadyExists)"
    );
    assert!(fakes
        .cluster
        .0
        .inner
        .get(SECRETS, "hypershift", "etcd-backup-creds-nightly")
        .is_ok());
}
