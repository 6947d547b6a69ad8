//! The storage credentials HyperShift needs to upload the snapshot (docs/hcp.md#s4-4-3, #s4-4-6): the BSL's
//! credential Secret, copied from Velero's namespace to the HyperShift Operator's, and deleted again
//! once the backup no longer needs it.

use hypershift::apis::SECRETS;
use serde_json::{json, Value};
use velero_wasm_sdk::{log, Cluster, KubeError, Object};

use crate::bsl;

/// The label on the copy.
pub const COPY_LABEL: &str = "hypershift.openshift.io/etcd-backup";
/// The key HyperShift reads.
pub const CREDENTIALS_KEY: &str = "credentials";

/// `etcd-backup-creds-<backup>`.
pub fn copied_name(backup_name: &str) -> String {
    format!("etcd-backup-creds-{backup_name}")
}

/// Makes sure `<ho_namespace>/etcd-backup-creds-<backup>` exists: an existing one is reused as it is
/// (the source is then not read); otherwise the BSL's credential Secret is copied, its value under
/// `credentials` (and under its own key too when that differs). Returns the copy's name. Errors are
/// `failed to copy credential Secret: …`.
pub fn copy(
    cluster: &dyn Cluster,
    bsl_object: &Object,
    velero_namespace: &str,
    ho_namespace: &str,
    backup_name: &str,
) -> Result<String, String> {
    let wrap = |e: String| format!("failed to copy credential Secret: {e}");
    let ((source, key), named) = bsl::credential_ref(bsl_object);
    if !named {
        log::info(
            "the BackupStorageLocation names no credential: using cloud-credentials/cloud",
            &[],
        );
    }
    let name = copied_name(backup_name);
    if cluster.get(SECRETS, ho_namespace, &name).is_ok() {
        log::info(
            "reusing the credential Secret for the etcd backup",
            &[("secret", &format!("{ho_namespace}/{name}"))],
        );
        return Ok(name);
    }
    let secret = bsl::secret(cluster, velero_namespace, &source).map_err(|e| {
        wrap(format!(
            "failed to get credential Secret {velero_namespace}/{source}: {}",
            e.message()
        ))
    })?;
    let value = secret
        .pointer("/data")
        .and_then(|d| d.get(&key))
        .cloned()
        .ok_or_else(|| {
            wrap(format!(
                "credential Secret {velero_namespace}/{source} does not contain key {key:?}"
            ))
        })?;
    let mut data = serde_json::Map::new();
    data.insert(CREDENTIALS_KEY.into(), value.clone());
    if key != CREDENTIALS_KEY {
        data.insert(key.clone(), value);
    }
    let copy = Object::from_value(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ho_namespace, "labels": {COPY_LABEL: "true"}},
        "data": Value::Object(data),
    }))
    .map_err(wrap)?;
    match cluster.create(SECRETS, ho_namespace, &copy) {
        Ok(_) => Ok(name),
        // Another item of the same backup copied it a moment ago.
        Err(KubeError::Conflict(_)) => Ok(name),
        Err(KubeError::Denied(m)) => Err(wrap(format!(
            "failed to create credential Secret {ho_namespace}/{name}: {m}; hoNamespace is {ho_namespace:?}: \
             grant the hcp module get, create and delete on secrets there (its manifest's secrets line, in a module directory)"
        ))),
        Err(e) => Err(wrap(format!(
            "failed to create credential Secret {ho_namespace}/{name}: {}",
            e.message()
        ))),
    }
}

/// Deletes the copy; NotFound is fine, and any other failure is only logged.
pub fn delete(cluster: &dyn Cluster, ho_namespace: &str, name: &str) {
    if name.is_empty() {
        return;
    }
    match cluster.delete(SECRETS, ho_namespace, name) {
        Ok(()) => log::info(
            "deleted the credential Secret copied for the etcd backup",
            &[("secret", &format!("{ho_namespace}/{name}"))],
        ),
        Err(e) if e.is_not_found() => {}
        Err(e) => log::info(
            "cannot delete the credential Secret copied for the etcd backup",
            &[
                ("secret", &format!("{ho_namespace}/{name}")),
                ("error", e.message()),
            ],
        ),
    }
}

#[cfg(test)]
mod tests {
    use hypershift::apis::SECRETS;
    use serde_json::json;
    use velero_wasm_sdk::FakeCluster;

    use super::*;

    fn object(v: Value) -> Object {
        Object::from_value(v).unwrap()
    }

    fn source(name: &str, data: Value) -> Object {
        object(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "openshift-adp"}, "data": data}),
        )
    }

    fn bsl(credential: Value) -> Object {
        object(json!({"spec": {"provider": "aws", "credential": credential}}))
    }

    #[test]
    fn the_fallback_secret_is_copied_under_both_keys() {
        let c = FakeCluster::new().with(
            SECRETS,
            source("cloud-credentials", json!({"cloud": "W2RlZmF1bHRd"})),
        );
        let name = copy(
            &c,
            &object(json!({"spec": {}})),
            "openshift-adp",
            "hypershift",
            "nightly",
        )
        .unwrap();
        assert_eq!(name, "etcd-backup-creds-nightly");
        let copied = c.get(SECRETS, "hypershift", &name).unwrap();
        assert_eq!(
            copied.into_value(),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "etcd-backup-creds-nightly", "namespace": "hypershift",
                                "labels": {"hypershift.openshift.io/etcd-backup": "true"}},
                   "data": {"credentials": "W2RlZmF1bHRd", "cloud": "W2RlZmF1bHRd"}})
        );
    }

    #[test]
    fn a_credentials_key_is_copied_once() {
        let c = FakeCluster::new().with(
            SECRETS,
            source("bsl", json!({"credentials": "eA==", "other": "eQ=="})),
        );
        copy(
            &c,
            &bsl(json!({"name": "bsl", "key": "credentials"})),
            "openshift-adp",
            "ho",
            "b",
        )
        .unwrap();
        let copied = c.get(SECRETS, "ho", "etcd-backup-creds-b").unwrap();
        assert_eq!(
            copied.pointer("/data"),
            Some(&json!({"credentials": "eA=="}))
        );
    }

    #[test]
    fn an_existing_copy_is_reused_without_reading_the_source() {
        let existing = object(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "etcd-backup-creds-b", "namespace": "hypershift"}}),
        );
        let c = FakeCluster::new().with(SECRETS, existing);
        copy(
            &c,
            &bsl(json!({"name": "bsl", "key": "cloud"})),
            "openshift-adp",
            "hypershift",
            "b",
        )
        .unwrap();
        let calls: Vec<_> = c
            .calls()
            .iter()
            .map(|c| (c.verb, c.namespace.clone()))
            .collect();
        assert_eq!(calls, [("get", "hypershift".to_string())]);
    }

    #[test]
    fn missing_sources_and_keys_are_explained() {
        let c = FakeCluster::new();
        let e = copy(
            &c,
            &bsl(json!({"name": "bsl", "key": "cloud"})),
            "openshift-adp",
            "hypershift",
            "b",
        )
        .unwrap_err();
        assert!(e.starts_with("failed to copy credential Secret: failed to get credential Secret openshift-adp/bsl: "), "{e}");
        let e = copy(
            &c,
            &object(json!({"spec": {}})),
            "openshift-adp",
            "hypershift",
            "b",
        )
        .unwrap_err();
        assert!(
            e.contains("failed to get credential Secret openshift-adp/cloud-credentials"),
            "{e}"
        );
        let c = FakeCluster::new().with(SECRETS, source("bsl", json!({"aws": "eA=="})));
        let e = copy(
            &c,
            &bsl(json!({"name": "bsl", "key": "cloud"})),
            "openshift-adp",
            "hypershift",
            "b",
        )
        .unwrap_err();
        assert_eq!(e, "failed to copy credential Secret: credential Secret openshift-adp/bsl does not contain key \"cloud\"");
    }

    #[test]
    fn deleting_an_absent_copy_or_no_name_is_fine() {
        let c = FakeCluster::new();
        delete(&c, "hypershift", "etcd-backup-creds-b");
        delete(&c, "hypershift", "");
        assert_eq!(c.calls().len(), 1);
    }
}
