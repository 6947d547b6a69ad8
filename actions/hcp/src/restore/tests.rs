//! The restore action against a fake cluster and a recording signer.

use hypershift::apis::{
    BACKUPS, BACKUP_STORAGE_LOCATIONS, CONFIG_MAPS, CUSTOM_RESOURCE_DEFINITIONS, SECRETS,
};
use serde_json::{json, Value};
use velero_wasm_sdk::signing::{AwsCredentialSource, SigningError};
use velero_wasm_sdk::{FakeCluster, FakeSigner};

use super::*;
use crate::settings::Settings;
use crate::testing::objects::{backup, bsl, config, crd, hc, hcp, object, secret};
use crate::testing::Fakes;

const S3_URL: &str = "s3://my-bucket/path/to/snapshot.db";
const AZURE_URL: &str =
    "https://mystorageaccount.blob.core.windows.net/backups/etcd-snapshot/snapshot.db";

fn restore_json() -> String {
    json!({"apiVersion": "velero.io/v1", "kind": "Restore",
        "metadata": {"name": "nightly-restore", "namespace": "openshift-adp"},
        "spec": {"backupName": "nightly"}})
    .to_string()
}

/// A cluster with the Backup, the HostedControlPlane CRD and `extra` objects.
fn cluster(bsl_object: Object, secrets: Vec<Object>) -> FakeCluster {
    let mut c = FakeCluster::new()
        .with(
            BACKUPS,
            object(backup(json!({}), json!({"phase": "Completed"}))),
        )
        .with(
            CUSTOM_RESOURCE_DEFINITIONS,
            crd("hostedcontrolplanes.hypershift.openshift.io"),
        )
        .with(BACKUP_STORAGE_LOCATIONS, bsl_object);
    for s in secrets {
        c = c.with(SECRETS, s);
    }
    c
}

fn aws() -> FakeCluster {
    cluster(
        bsl("aws", json!({"region": "us-east-1"}), None),
        vec![secret(
            "cloud-credentials",
            "cloud",
            "[default]\naws_access_key_id=AKID\naws_secret_access_key=SECRET\n",
        )],
    )
}

fn with_url(mut item: Object, url: &str) -> Object {
    item.set_annotation("hypershift.openshift.io/etcd-snapshot-url", url);
    item
}

fn run(fakes: &Fakes, item: &Object) -> Result<Outcome, String> {
    super::restore(fakes.context(), &item.to_json(), &restore_json())
}

fn injected(outcome: Result<Outcome, String>) -> Value {
    match outcome {
        Ok(Outcome::Changed(item)) => item
            .pointer("/spec/etcd/managed/storage/restoreSnapshotURL")
            .cloned()
            .unwrap_or(Value::Null),
        other => panic!("expected a changed item, got {other:?}"),
    }
}

fn calls(fakes: &Fakes) -> Vec<String> {
    fakes.signer.calls()
}

#[test]
fn the_backup_is_read_from_the_restore_s_namespace() {
    let fakes = Fakes::new(FakeCluster::new());
    let e = run(&fakes, &hc()).unwrap_err();
    assert!(e.starts_with("fail to get backup for restore: "), "{e}");
    assert_eq!(fakes.cluster.calls()[0].namespace, "openshift-adp");
    assert_eq!(fakes.cluster.calls()[0].target, "nightly");
    // A backup that is not HyperShift: pods pass through, not skipped.
    let plain = FakeCluster::new().with(
        BACKUPS,
        object(json!({"metadata": {"name": "nightly", "namespace": "openshift-adp"}, "spec": {}})),
    );
    let fakes = Fakes::new(plain);
    let pod = object(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}));
    assert!(matches!(
        run(&fakes, &pod).unwrap(),
        Outcome::PassThrough(_)
    ));
}

#[test]
fn pods_are_skipped_and_the_etcd_statefulset_only_under_etcd_snapshot() {
    let pod = object(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-apiserver-0"}}),
    );
    let etcd = object(
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "etcd"}}),
    );
    let other = object(
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "etcd-other"}}),
    );
    let fakes = Fakes::new(aws());
    assert!(matches!(run(&fakes, &pod).unwrap(), Outcome::Skip(_)));
    assert!(matches!(
        run(&fakes, &etcd).unwrap(),
        Outcome::PassThrough(_)
    ));
    let fakes = Fakes::new(aws().with(
        CONFIG_MAPS,
        config(json!({"etcdBackupMethod": "etcdSnapshot"})),
    ));
    assert!(matches!(run(&fakes, &etcd).unwrap(), Outcome::Skip(_)));
    assert!(matches!(
        run(&fakes, &other).unwrap(),
        Outcome::PassThrough(_)
    ));
    // Restore never validates the method: an invalid one just means "not etcdSnapshot".
    let fakes = Fakes::new(aws().with(CONFIG_MAPS, config(json!({"etcdBackupMethod": "bogus"}))));
    assert!(matches!(
        run(&fakes, &etcd).unwrap(),
        Outcome::PassThrough(_)
    ));
}

#[test]
fn hosted_clusters_are_marked_and_get_no_url_without_an_annotation() {
    let fakes = Fakes::new(aws());
    let Outcome::Changed(item) = run(&fakes, &hc()).unwrap() else {
        panic!()
    };
    assert_eq!(
        item.annotation("hypershift.openshift.io/restored-from-backup"),
        Some("")
    );
    assert!(item
        .pointer("/spec/etcd/managed/storage/restoreSnapshotURL")
        .is_none());
    assert!(matches!(
        run(&fakes, &hcp("AWS")).unwrap(),
        Outcome::PassThrough(_)
    ));
    assert!(calls(&fakes).is_empty());
}

#[test]
fn s3_urls_are_presigned_with_the_bsl_settings() {
    let fakes = Fakes::new(aws());
    assert_eq!(
        injected(run(&fakes, &with_url(hcp("AWS"), S3_URL))),
        json!(["https://signed.example/my-bucket/path/to/snapshot.db?keys:AKID"])
    );
    assert_eq!(
        calls(&fakes),
        [
            "parse-aws \"[default]\\naws_access_key_id=AKID\\naws_secret_access_key=SECRET\\n\"".to_string(),
            "presign-s3 my-bucket/path/to/snapshot.db region=us-east-1 endpoint=- path-style=false expires=3600 keys:AKID".to_string(),
        ]
    );
    let minio = cluster(
        bsl(
            "aws",
            json!({"region": "minio", "s3Url": "https://minio.example.com", "s3ForcePathStyle": "true", "profile": "other"}),
            Some(json!({"name": "bsl-creds", "key": "aws"})),
        ),
        vec![secret("bsl-creds", "aws", "[default]\n")],
    );
    let fakes = Fakes::new(minio);
    injected(run(&fakes, &with_url(hc(), S3_URL)));
    assert!(
        calls(&fakes)[1]
            .contains("region=minio endpoint=https://minio.example.com path-style=true"),
        "{:?}",
        calls(&fakes)
    );
}

#[test]
fn other_https_urls_are_injected_unchanged() {
    let url =
        "https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db?X-Amz-Signature=abc123";
    let fakes = Fakes::new(aws());
    assert_eq!(
        injected(run(&fakes, &with_url(hcp("AWS"), url))),
        json!([url])
    );
}

#[test]
fn unmanaged_etcd_is_not_signed_for() {
    let fakes = Fakes::new(
        FakeCluster::new()
            .with(BACKUPS, object(backup(json!({}), json!({}))))
            .with(
                CUSTOM_RESOURCE_DEFINITIONS,
                crd("hostedcontrolplanes.hypershift.openshift.io"),
            ),
    );
    let mut item = with_url(hcp("AWS"), S3_URL);
    item.remove("/spec/etcd/managed");
    assert!(matches!(
        run(&fakes, &item).unwrap(),
        Outcome::PassThrough(_)
    ));
    assert!(calls(&fakes).is_empty());
}

#[test]
fn platform_is_validated_on_control_planes_only() {
    let fakes = Fakes::new(aws());
    let e = run(&fakes, &hcp("PowerVS")).unwrap_err();
    assert_eq!(
        e,
        "error checking platform configuration: unsupported platform type PowerVS"
    );
    let mut cluster_on_gcp = hc();
    cluster_on_gcp
        .set("/spec/platform/type", json!("GCP"))
        .unwrap();
    assert!(matches!(
        run(&fakes, &cluster_on_gcp).unwrap(),
        Outcome::Changed(_)
    ));
}

#[test]
fn s3_signing_errors_carry_upstream_s_prefix() {
    let fakes = Fakes::new(
        FakeCluster::new()
            .with(BACKUPS, object(backup(json!({}), json!({}))))
            .with(
                CUSTOM_RESOURCE_DEFINITIONS,
                crd("hostedcontrolplanes.hypershift.openshift.io"),
            ),
    );
    let e = run(&fakes, &with_url(hcp("AWS"), S3_URL)).unwrap_err();
    assert!(e.starts_with("error generating pre-signed URL for etcd snapshot: error getting BackupStorageLocation \"default\": "), "{e}");
    // The fallback Secret is missing; a named key is missing.
    let fakes = Fakes::new(cluster(bsl("aws", json!({"region": "r"}), None), vec![]));
    let e = run(&fakes, &with_url(hcp("AWS"), S3_URL)).unwrap_err();
    assert!(e.starts_with("error generating pre-signed URL for etcd snapshot: error getting credential secret \"cloud-credentials\": "), "{e}");
    let fakes = Fakes::new(cluster(
        bsl(
            "aws",
            json!({"region": "r"}),
            Some(json!({"name": "c", "key": "aws"})),
        ),
        vec![secret("c", "cloud", "x")],
    ));
    let e = run(&fakes, &with_url(hcp("AWS"), S3_URL)).unwrap_err();
    assert_eq!(
        e,
        "error generating pre-signed URL for etcd snapshot: key \"aws\" not found in secret \"c\""
    );
    let mut fakes = Fakes::new(aws());
    fakes.signer = FakeSigner::new().failing(SigningError::Invalid(
        "bucket, key, and region are required".into(),
    ));
    let e = run(&fakes, &with_url(hc(), S3_URL)).unwrap_err();
    assert_eq!(
        e,
        "error generating pre-signed URL for etcd snapshot: bucket, key, and region are required"
    );
    let e = run(&fakes, &with_url(hc(), "s3://my-bucket")).unwrap_err();
    assert!(
        e.starts_with("error generating pre-signed URL for etcd snapshot: error parsing S3 URL"),
        "{e}"
    );
}

fn web_identity(fakes: &mut Fakes, file: Option<&str>) {
    fakes.signer = FakeSigner::new().with_aws_source(AwsCredentialSource::WebIdentity((
        "arn:aws:iam::123456789012:role/velero".into(),
        file.map(str::to_string),
    )));
}

#[test]
fn web_identity_reads_the_projected_token_and_names_the_session() {
    let mut fakes = Fakes::new(aws());
    web_identity(&mut fakes, None);
    fakes
        .env
        .set_variable("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/token");
    fakes
        .env
        .set_file("AWS_WEB_IDENTITY_TOKEN_FILE", b"eyJ.token\n");
    injected(run(&fakes, &with_url(hc(), S3_URL)));
    assert!(
        calls(&fakes)[1]
            .ends_with("sts:arn:aws:iam::123456789012:role/velero:restore-example:eyJ.token\n:-"),
        "{:?}",
        calls(&fakes)
    );
    // A web_identity_token_file that is the same file is fine; another path is not readable.
    web_identity(&mut fakes, Some("/var/run/secrets/token"));
    injected(run(&fakes, &with_url(hc(), S3_URL)));
    web_identity(&mut fakes, Some("/etc/other"));
    let e = run(&fakes, &with_url(hc(), S3_URL)).unwrap_err();
    assert!(e.contains("failed to read web identity token file \"/etc/other\": velero-wasm reads only the file AWS_WEB_IDENTITY_TOKEN_FILE names (/var/run/secrets/token)"), "{e}");
    // An empty token.
    fakes.env.set_file("AWS_WEB_IDENTITY_TOKEN_FILE", b"");
    web_identity(&mut fakes, None);
    let e = run(&fakes, &with_url(hc(), S3_URL)).unwrap_err();
    assert_eq!(e, "error generating pre-signed URL for etcd snapshot: error assuming role via STS: web identity token file \"/var/run/secrets/token\" is empty");
}

#[test]
fn web_identity_without_a_token_file_says_what_is_missing() {
    let bare = cluster(
        bsl("aws", json!({"region": "r"}), None),
        vec![secret(
            "cloud-credentials",
            "cloud",
            "arn:aws:iam::1:role/r",
        )],
    );
    let mut fakes = Fakes::new(bare);
    web_identity(&mut fakes, None);
    let e = run(&fakes, &with_url(hc(), S3_URL)).unwrap_err();
    assert!(e.contains("error parsing AWS credentials: credential data is a bare IAM role ARN (arn:aws:iam::123456789012:role/velero) but AWS_WEB_IDENTITY_TOKEN_FILE is not set"), "{e}");
    let mut fakes = Fakes::new(aws());
    web_identity(&mut fakes, None);
    let e = run(&fakes, &with_url(hc(), S3_URL)).unwrap_err();
    assert!(e.contains("error parsing AWS credentials: credential file has role_arn (arn:aws:iam::123456789012:role/velero) but no web_identity_token_file"), "{e}");
}

#[test]
fn session_names_and_sts_endpoints() {
    assert_eq!(s3::session_name("example"), "restore-example");
    assert_eq!(s3::session_name(&"x".repeat(100)).len(), 64);
    let fakes = Fakes::new(FakeCluster::new());
    let ctx = fakes.context();
    assert_eq!(s3::sts_endpoint(&ctx, "arn:aws:iam::1:role/r"), None);
    assert_eq!(
        s3::sts_endpoint(&ctx, "arn:aws-cn:iam::1:role/r").as_deref(),
        Some("https://sts.cn-north-1.amazonaws.com.cn")
    );
    assert_eq!(
        s3::sts_endpoint(&ctx, "arn:aws-us-gov:iam::1:role/r").as_deref(),
        Some("https://sts.us-gov-west-1.amazonaws.com")
    );
    let mut fakes = Fakes::new(FakeCluster::new());
    fakes.settings = Settings {
        sts_endpoint: Some("http://127.0.0.1:9".into()),
        ..Settings::default()
    };
    assert_eq!(
        s3::sts_endpoint(&fakes.context(), "arn:aws-cn:iam::1:role/r").as_deref(),
        Some("http://127.0.0.1:9")
    );
}

fn azure(config: Value, credential: Option<Value>, secrets: Vec<Object>) -> FakeCluster {
    cluster(bsl("azure", config, credential), secrets)
}

#[test]
fn azure_account_keys_come_from_dotenv_credentials() {
    let fakes = Fakes::new(azure(
        json!({"storageAccount": "mystorageaccount"}),
        None,
        vec![secret(
            "cloud-credentials",
            "cloud",
            "AZURE_SUBSCRIPTION_ID=s\nAZURE_STORAGE_ACCOUNT_ACCESS_KEY = a2V5\n",
        )],
    ));
    assert_eq!(
        injected(run(&fakes, &with_url(hcp("Azure"), AZURE_URL))),
        json!(["https://mystorageaccount.blob.core.windows.net/backups/etcd-snapshot/snapshot.db?sig=key:a2V5"])
    );
    assert_eq!(
        calls(&fakes),
        ["azure-sas mystorageaccount/backups/etcd-snapshot/snapshot.db endpoint=- permissions=r expires=3600 key:a2V5"]
    );
    let custom = Fakes::new(azure(
        json!({"storageAccountKeyEnvVar": "MY_KEY", "storageAccountURI": "http://127.0.0.1:10000/devstoreaccount1"}),
        None,
        vec![secret("cloud-credentials", "cloud", "MY_KEY=abc=def==\n")],
    ));
    injected(run(&custom, &with_url(hcp("Azure"), AZURE_URL)));
    assert!(calls(&custom)[0].contains(
        "endpoint=http://127.0.0.1:10000/devstoreaccount1 permissions=r expires=3600 key:abc=def=="
    ));
    let missing = Fakes::new(azure(
        json!({}),
        None,
        vec![secret("cloud-credentials", "cloud", "OTHER=1\n")],
    ));
    let e = run(&missing, &with_url(hcp("Azure"), AZURE_URL)).unwrap_err();
    assert_eq!(e, "error generating SAS URL for etcd snapshot: error parsing Azure credentials: AZURE_STORAGE_ACCOUNT_ACCESS_KEY not found in credential data");
}

#[test]
fn azure_entra_id_credentials_from_the_secret_or_the_pod() {
    let from_secret = Fakes::new(azure(json!({"useAAD": "true"}), None,
        vec![secret("cloud-credentials", "cloud", "AZURE_TENANT_ID=tid\nAZURE_CLIENT_ID=cid\nAZURE_CLIENT_SECRET=cs\nAZURE_CLOUD_NAME=AzureChinaCloud\n")]));
    injected(run(&from_secret, &with_url(hc(), AZURE_URL)));
    assert!(
        calls(&from_secret)[0].ends_with("aad:tid:cid:secret=cs:AzureChinaCloud:-"),
        "{:?}",
        calls(&from_secret)
    );
    let lacking = Fakes::new(azure(
        json!({"useAAD": "true"}),
        None,
        vec![secret(
            "cloud-credentials",
            "cloud",
            "AZURE_CLIENT_ID=cid\n",
        )],
    ));
    let e = run(&lacking, &with_url(hc(), AZURE_URL)).unwrap_err();
    assert_eq!(e, "error generating SAS URL for etcd snapshot: error parsing Azure AAD credentials: AZURE_TENANT_ID not found in credential data");

    // No Secret and none named: the pod's workload identity.
    let mut pod = Fakes::new(azure(json!({"useAAD": "true"}), None, vec![]));
    let e = run(&pod, &with_url(hc(), AZURE_URL)).unwrap_err();
    assert_eq!(e, "error generating SAS URL for etcd snapshot: AZURE_TENANT_ID and AZURE_CLIENT_ID env vars are required when no credential data is provided");
    for (k, v) in [
        ("AZURE_TENANT_ID", "tid"),
        ("AZURE_CLIENT_ID", "cid"),
        (
            "AZURE_FEDERATED_TOKEN_FILE",
            "/var/run/secrets/azure/tokens/azure-identity-token",
        ),
    ] {
        pod.env.set_variable(k, v);
    }
    pod.env
        .set_file("AZURE_FEDERATED_TOKEN_FILE", b"eyJ.federated\n");
    pod.settings = Settings {
        aad_authority: Some("http://127.0.0.1:1/".into()),
        ..Settings::default()
    };
    injected(run(&pod, &with_url(hc(), AZURE_URL)));
    assert!(
        calls(&pod)[0].ends_with("aad:tid:cid:federated=eyJ.federated::http://127.0.0.1:1/"),
        "{:?}",
        calls(&pod)
    );
    // A named Secret that is missing is an error, not a fallback.
    let named = Fakes::new(azure(
        json!({"useAAD": "true"}),
        Some(json!({"name": "az", "key": "cloud"})),
        vec![],
    ));
    let e = run(&named, &with_url(hc(), AZURE_URL)).unwrap_err();
    assert!(
        e.starts_with(
            "error generating SAS URL for etcd snapshot: error getting credential secret \"az\""
        ),
        "{e}"
    );
    // Neither a client secret nor workload identity: the node's managed identity of that client.
    let mut neither = Fakes::new(azure(json!({"useAAD": "true"}), None, vec![]));
    neither.env.set_variable("AZURE_TENANT_ID", "t");
    neither.env.set_variable("AZURE_CLIENT_ID", "c");
    injected(run(&neither, &with_url(hc(), AZURE_URL)));
    assert!(
        calls(&neither)[0].ends_with("aad:t:c:managed-identity=imds::-"),
        "{:?}",
        calls(&neither)
    );
}

#[test]
fn urls_longer_than_the_crd_allows_are_refused_clearly() {
    let fakes = Fakes::new(aws());
    let key = "k".repeat(1000);
    let e = run(&fakes, &with_url(hc(), &format!("s3://my-bucket/{key}"))).unwrap_err();
    assert!(
        e.starts_with("error generating pre-signed URL for etcd snapshot: the signed URL is "),
        "{e}"
    );
    assert!(e.contains("at most 1024"), "{e}");
}
