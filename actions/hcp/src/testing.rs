//! For native unit tests: the SDK's fakes gathered into a [`Context`], the objects of a HyperShift
//! management cluster, and a cluster whose HCPEtcdBackups move on as HyperShift's controller would.

use std::cell::Cell;

use velero_wasm_sdk::{
    Cluster, FakeClock, FakeCluster, FakeEnvironment, FakeSigner, KubeAnswer, KubeCall, KubeError,
};

use crate::context::Context;
use crate::settings::Settings;

/// 2026-05-08T12:00:00Z.
pub const START: i64 = 1_778_241_600;

/// Every fake, and a [`Context`] over them.
pub struct Fakes<C = FakeCluster> {
    /// The cluster.
    pub cluster: C,
    /// The environment (Velero in `openshift-adp`).
    pub env: FakeEnvironment,
    /// The clock.
    pub clock: FakeClock,
    /// The signer.
    pub signer: FakeSigner,
    /// Settings.
    pub settings: Settings,
}

impl<C: Cluster> Fakes<C> {
    /// Fakes around `cluster`, with Velero in `openshift-adp`, the clock at [`START`] and the default
    /// settings.
    pub fn new(cluster: C) -> Fakes<C> {
        Fakes {
            cluster,
            env: FakeEnvironment::new().in_namespace("openshift-adp"),
            clock: FakeClock::at(START),
            signer: FakeSigner::new(),
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
    fn call(&self, call: KubeCall<'_>) -> Result<KubeAnswer, KubeError> {
        let answer = self.inner.call(call)?;
        let (KubeCall::Get { api, .. }, KubeAnswer::Object(mut object)) = (call, answer.clone())
        else {
            return Ok(answer);
        };
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
        Ok(KubeAnswer::Object(object))
    }
}
