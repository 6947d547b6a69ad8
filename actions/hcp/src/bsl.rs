//! BackupStorageLocations: reading one from Velero's namespace and finding its credential Secret
//! (docs/hcp.md#s3-4), for the etcd backup (#s4-4-2) and the restore's signing (#s5-5).

use hypershift::apis::{BACKUP_STORAGE_LOCATIONS, SECRETS};
use velero_wasm_sdk::{Cluster, KubeError, Object};

/// The Secret Velero falls back to when a BSL names none.
pub const FALLBACK_SECRET: &str = "cloud-credentials";
/// Its key.
pub const FALLBACK_KEY: &str = "cloud";

/// Reads the BackupStorageLocation `name` in Velero's namespace.
pub fn get(cluster: &dyn Cluster, namespace: &str, name: &str) -> Result<Object, KubeError> {
    cluster.get(BACKUP_STORAGE_LOCATIONS, namespace, name)
}

/// Where a BSL's credentials are: `spec.credential` (`{name, key}`), else `cloud-credentials`/`cloud`.
/// The second value says whether the BSL named them.
pub fn credential_ref(bsl: &Object) -> ((String, String), bool) {
    let name = bsl.str_at("/spec/credential/name").unwrap_or("");
    let key = bsl.str_at("/spec/credential/key").unwrap_or("");
    if bsl
        .pointer("/spec/credential")
        .is_some_and(|c| c.is_object())
        && !name.is_empty()
    {
        ((name.to_string(), key.to_string()), true)
    } else {
        (
            (FALLBACK_SECRET.to_string(), FALLBACK_KEY.to_string()),
            false,
        )
    }
}

/// A value of `bsl.spec.config` ("" when absent).
pub fn config<'a>(bsl: &'a Object, key: &str) -> &'a str {
    bsl.pointer("/spec/config")
        .and_then(|c| c.get(key))
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

/// Reads a Secret in Velero's namespace.
pub fn secret(cluster: &dyn Cluster, namespace: &str, name: &str) -> Result<Object, KubeError> {
    cluster.get(SECRETS, namespace, name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_credential_reference_falls_back_to_cloud_credentials() {
        let named = Object::from_value(
            json!({"spec": {"credential": {"name": "bsl-creds", "key": "aws"}}}),
        )
        .unwrap();
        assert_eq!(
            credential_ref(&named),
            (("bsl-creds".into(), "aws".into()), true)
        );
        let none = Object::from_value(json!({"spec": {"provider": "aws"}})).unwrap();
        assert_eq!(
            credential_ref(&none),
            (("cloud-credentials".into(), "cloud".into()), false)
        );
    }
}
