//! Fakes for native unit tests: an environment, a clock that moves only when slept on, and a signer
//! that records what it was asked and answers with readable stand-in URLs.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use velero_wasm_sdk::signing::{
    AadSecret, AwsCredentialSource, AwsCredentials, AwsKeys, AzureCredentials, AzureRequest,
    S3Request, SigningError, SnapshotUrl,
};
use velero_wasm_sdk::{Api, Cluster, FakeCluster, KubeError, Object, Timestamp};

use crate::context::{Clock, Context, Environment, Signer};
use crate::settings::Settings;

/// 2026-05-08T12:00:00Z.
pub const START: i64 = 1_778_241_600;

/// An environment from maps.
#[derive(Default)]
pub struct FakeEnv {
    /// Velero's namespace.
    pub namespace: String,
    /// Variables (all granted).
    pub variables: BTreeMap<String, String>,
    /// Files by the variable naming them.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Environment for FakeEnv {
    fn velero_namespace(&self) -> String {
        self.namespace.clone()
    }
    fn variable(&self, name: &str) -> Result<Option<String>, String> {
        Ok(self.variables.get(name).cloned())
    }
    fn read_env_file(&self, variable: &str) -> Result<Vec<u8>, String> {
        if !self.variables.contains_key(variable) {
            return Err(format!("environment variable {variable} is not set"));
        }
        self.files
            .get(variable)
            .cloned()
            .ok_or_else(|| format!("cannot read the file named by {variable}: not found"))
    }
}

/// Virtual time: starts at [`START`], moves by what is slept.
#[derive(Default)]
pub struct FakeClock {
    slept: Cell<Duration>,
    limit: Cell<Option<Duration>>,
}

impl FakeClock {
    /// Time slept so far.
    pub fn slept(&self) -> Duration {
        self.slept.get()
    }

    /// Gives the call a time limit (none by default).
    pub fn set_limit(&self, limit: Duration) {
        self.limit.set(Some(limit));
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        Timestamp {
            seconds: START + self.slept.get().as_secs() as i64,
            nanoseconds: 0,
        }
    }
    fn monotonic(&self) -> Duration {
        self.slept.get()
    }
    fn sleep(&self, duration: Duration) {
        self.slept.set(self.slept.get() + duration);
    }
    fn remaining(&self) -> Duration {
        self.limit.get().map_or(Duration::MAX, |limit| {
            limit.saturating_sub(self.slept.get())
        })
    }
}

/// A signer that answers `https://signed.example/…` URLs naming what it was given.
#[derive(Default)]
pub struct FakeSigner {
    /// One line per signing call.
    pub calls: RefCell<Vec<String>>,
    /// What `parse-aws-credentials` answers (static keys `AKID`/`SECRET` when unset).
    pub aws_source: RefCell<Option<AwsCredentialSource>>,
    /// An error every signing call returns, if set.
    pub failure: RefCell<Option<SigningError>>,
}

impl Signer for FakeSigner {
    fn parse_snapshot_url(&self, url: &str) -> Result<SnapshotUrl, SigningError> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if key.is_empty() {
                return Err(SigningError::Invalid(format!(
                    "error parsing S3 URL {url:?}: missing key in S3 URL {url:?}"
                )));
            }
            return Ok(SnapshotUrl::S3((bucket.into(), key.into())));
        }
        let rest = url.strip_prefix("https://").unwrap_or("");
        if let Some((host, path)) = rest.split_once('/') {
            if let Some((account, _)) = host.split_once(".blob.") {
                let (container, blob) = path.split_once('/').unwrap_or((path, ""));
                return Ok(SnapshotUrl::AzureBlob((
                    account.into(),
                    container.into(),
                    blob.into(),
                )));
            }
        }
        Ok(SnapshotUrl::Unsigned)
    }

    fn parse_aws_credentials(&self, data: &str) -> Result<AwsCredentialSource, SigningError> {
        self.calls.borrow_mut().push(format!("parse-aws {data:?}"));
        Ok(self.aws_source.borrow().clone().unwrap_or_else(|| {
            AwsCredentialSource::Keys(AwsKeys {
                access_key_id: "AKID".into(),
                secret_access_key: "SECRET".into(),
                session_token: None,
            })
        }))
    }

    fn presign_s3(
        &self,
        request: &S3Request,
        credentials: &AwsCredentials,
    ) -> Result<String, SigningError> {
        let creds = match credentials {
            AwsCredentials::Keys(k) => format!("keys:{}", k.access_key_id),
            AwsCredentials::WebIdentity(w) => format!(
                "sts:{}:{}:{}:{}",
                w.role_arn,
                w.session_name,
                w.token,
                w.sts_endpoint.as_deref().unwrap_or("-")
            ),
        };
        self.calls.borrow_mut().push(format!(
            "presign-s3 {}/{} region={} endpoint={} path-style={} expires={} {creds}",
            request.bucket,
            request.key,
            request.region,
            request.endpoint.as_deref().unwrap_or("-"),
            request.force_path_style,
            request.expires_seconds
        ));
        if let Some(e) = self.failure.borrow().clone() {
            return Err(e);
        }
        Ok(format!(
            "https://signed.example/{}/{}?{creds}",
            request.bucket, request.key
        ))
    }

    fn azure_sas(
        &self,
        request: &AzureRequest,
        credentials: &AzureCredentials,
    ) -> Result<String, SigningError> {
        let creds = match credentials {
            AzureCredentials::AccountKey(k) => format!("key:{k}"),
            AzureCredentials::DelegationKey(_) => "delegation-key".to_string(),
            AzureCredentials::Aad(a) => format!(
                "aad:{}:{}:{}:{}:{}",
                a.tenant_id,
                a.client_id,
                match &a.secret {
                    AadSecret::ClientSecret(s) => format!("secret={s}"),
                    AadSecret::FederatedToken(t) => format!("federated={t}"),
                    AadSecret::AccessToken(t) => format!("token={t}"),
                    AadSecret::ManagedIdentity(e) =>
                        format!("managed-identity={}", e.as_deref().unwrap_or("imds")),
                },
                a.cloud_name,
                a.authority.as_deref().unwrap_or("-")
            ),
        };
        self.calls.borrow_mut().push(format!(
            "azure-sas {}/{}/{} endpoint={} permissions={} expires={} {creds}",
            request.account,
            request.container,
            request.blob,
            request.endpoint.as_deref().unwrap_or("-"),
            request.permissions,
            request.expires_seconds
        ));
        if let Some(e) = self.failure.borrow().clone() {
            return Err(e);
        }
        Ok(format!(
            "https://{}.blob.core.windows.net/{}/{}?sig={creds}",
            request.account, request.container, request.blob
        ))
    }
}

/// Every fake, and a [`Context`] over them.
pub struct Fakes<C = FakeCluster> {
    /// The cluster.
    pub cluster: C,
    /// The environment (Velero in `openshift-adp`).
    pub env: FakeEnv,
    /// The clock.
    pub clock: FakeClock,
    /// The signer.
    pub signer: FakeSigner,
    /// Settings.
    pub settings: Settings,
}

impl<C: Cluster> Fakes<C> {
    /// Fakes around `cluster`, with Velero in `openshift-adp` and the default settings.
    pub fn new(cluster: C) -> Fakes<C> {
        Fakes {
            cluster,
            env: FakeEnv {
                namespace: "openshift-adp".into(),
                ..FakeEnv::default()
            },
            clock: FakeClock::default(),
            signer: FakeSigner::default(),
            settings: Settings::default(),
        }
    }

    /// A context over the fakes.
    pub fn context(&self) -> Context<'_> {
        Context {
            cluster: &self.cluster,
            env: &self.env,
            clock: &self.clock,
            signer: &self.signer,
            settings: &self.settings,
        }
    }
}

/// Objects of a HyperShift management cluster, for the unit tests.
pub mod objects {
    use serde_json::{json, Value};
    use velero_wasm_sdk::Object;

    /// Wraps JSON.
    pub fn object(value: Value) -> Object {
        Object::from_value(value).unwrap()
    }

    /// A CustomResourceDefinition named `name`.
    pub fn crd(name: &str) -> Object {
        object(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name}}),
        )
    }

    /// HostedControlPlane `clusters-example/example` on `platform`, with managed etcd.
    pub fn hcp(platform: &str) -> Object {
        object(
            json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlane",
            "metadata": {"name": "example", "namespace": "clusters-example"},
            "spec": {"platform": {"type": platform}, "etcd": {"managementType": "Managed", "managed": {"storage": {"type": "PersistentVolume"}}}}}),
        )
    }

    /// HostedCluster `clusters/example`, with managed etcd backing up to `AWS` with a KMS key.
    pub fn hc() -> Object {
        object(
            json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
            "metadata": {"name": "example", "namespace": "clusters"},
            "spec": {"platform": {"type": "AWS"}, "etcd": {"managementType": "Managed", "managed": {
                "storage": {"type": "PersistentVolume"},
                "backup": {"platform": "AWS", "aws": {"kmsKeyARN": "arn:aws:kms:us-east-1:123456789012:key/k-1"}}}}}}),
        )
    }

    /// BSL `default` in `openshift-adp` for `provider`, with `config`.
    pub fn bsl(provider: &str, config: Value, credential: Option<Value>) -> Object {
        let mut spec = json!({"provider": provider, "objectStorage": {"bucket": "my-bucket", "prefix": "velero"}, "config": config});
        if let Some(c) = credential {
            spec["credential"] = c;
        }
        object(
            json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "default", "namespace": "openshift-adp"}, "spec": spec}),
        )
    }

    /// Secret `name` in `openshift-adp` with `key` = base64 of `value`.
    pub fn secret(name: &str, key: &str, value: &str) -> Object {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(value);
        object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "openshift-adp"}, "data": {key: encoded}}))
    }

    /// The plugin's ConfigMap in `openshift-adp`.
    pub fn config(data: Value) -> Object {
        object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hypershift-oadp-plugin-config", "namespace": "openshift-adp"}, "data": data}))
    }

    /// Backup `nightly` (uid `u-1`) of `clusters` and `clusters-example`, as JSON text, with `extra`
    /// merged into `spec` and `status`.
    pub fn backup(spec: Value, status: Value) -> Value {
        let mut backup = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
            "metadata": {"name": "nightly", "namespace": "openshift-adp", "uid": "u-1"},
            "spec": {"includedNamespaces": ["clusters", "clusters-example"], "storageLocation": "default"},
            "status": status});
        for (k, v) in spec.as_object().unwrap() {
            backup["spec"][k] = v.clone();
        }
        backup
    }

    /// HCPEtcdBackup `name` in `clusters-example` with a BackupCompleted condition.
    pub fn etcd_backup(name: &str, status: &str, reason: &str, url: &str) -> Object {
        object(
            json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HCPEtcdBackup",
            "metadata": {"name": name, "namespace": "clusters-example"},
            "status": {"conditions": [{"type": "BackupCompleted", "status": status, "reason": reason,
                "message": "disk full", "lastTransitionTime": "2026-05-08T12:05:00Z"}], "snapshotURL": url}}),
        )
    }
}

/// A cluster whose HCPEtcdBackups report the next state of a script on each GET, like a HyperShift
/// controller working on them: `(status, reason, snapshotURL)`; the last entry repeats.
pub struct Reconciling {
    /// The objects.
    pub inner: FakeCluster,
    script: Vec<(&'static str, &'static str, &'static str)>,
    reads: Cell<usize>,
}

impl Reconciling {
    /// Around `inner`, with `script`.
    pub fn new(
        inner: FakeCluster,
        script: Vec<(&'static str, &'static str, &'static str)>,
    ) -> Self {
        Reconciling {
            inner,
            script,
            reads: Cell::new(0),
        }
    }
}

impl Cluster for Reconciling {
    fn get(&self, api: Api, namespace: &str, name: &str) -> Result<Object, KubeError> {
        let mut object = self.inner.get(api, namespace, name)?;
        if api.resource == "hcpetcdbackups" && !self.script.is_empty() {
            let n = self.reads.get();
            self.reads.set(n + 1);
            let (status, reason, url) = self.script[n.min(self.script.len() - 1)];
            object
                .set(
                    "/status",
                    serde_json::json!({"conditions": [{"type": "BackupCompleted", "status": status, "reason": reason,
                        "message": "m", "lastTransitionTime": "2026-05-08T12:01:00Z"}], "snapshotURL": url}),
                )
                .unwrap();
        }
        Ok(object)
    }
    fn list(&self, api: Api, namespace: &str, selector: &str) -> Result<Vec<Object>, KubeError> {
        self.inner.list(api, namespace, selector)
    }
    fn create(&self, api: Api, namespace: &str, object: &Object) -> Result<Object, KubeError> {
        self.inner.create(api, namespace, object)
    }
    fn update(&self, api: Api, namespace: &str, object: &Object) -> Result<Object, KubeError> {
        self.inner.update(api, namespace, object)
    }
    fn merge_patch(
        &self,
        api: Api,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Object, KubeError> {
        self.inner.merge_patch(api, namespace, name, patch)
    }
    fn delete(&self, api: Api, namespace: &str, name: &str) -> Result<(), KubeError> {
        self.inner.delete(api, namespace, name)
    }
}
