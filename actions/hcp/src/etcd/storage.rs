//! The HCPEtcdBackup's storage target, from the backup's BackupStorageLocation (docs/hcp.md#s4-4-2) and the
//! HostedCluster's encryption settings (docs/hcp.md#s4-4-4).

use serde_json::{json, Map, Value};
use velero_wasm_sdk::Object;

use crate::bsl;

/// Where the snapshot goes: `spec.storage` of the CR.
#[derive(Debug, Clone, PartialEq)]
pub struct Storage {
    /// `S3` or `AzureBlob`.
    pub storage_type: &'static str,
    /// `s3` or `azureBlob`: the member matching the type (the CRD forbids the other).
    member: &'static str,
    fields: Map<String, Value>,
}

/// `backups/<backup>/etcd-backup`, under the BSL's prefix if it has one.
pub fn key_prefix(bsl: &Object, backup_name: &str) -> String {
    let base = format!("backups/{backup_name}/etcd-backup");
    match bsl.str_at("/spec/objectStorage/prefix").unwrap_or("") {
        "" => base,
        prefix => format!("{prefix}/{base}"),
    }
}

impl Storage {
    /// Maps the BSL's provider: `aws`/`velero.io/aws` to S3, `azure`/`velero.io/azure` to AzureBlob;
    /// anything else is `unsupported BSL provider "<p>": only aws and azure are supported`.
    pub fn from_bsl(bsl: &Object, backup_name: &str) -> Result<Storage, String> {
        let bucket = bsl.str_at("/spec/objectStorage/bucket").unwrap_or("");
        let prefix = key_prefix(bsl, backup_name);
        match bsl.str_at("/spec/provider").unwrap_or("") {
            "aws" | "velero.io/aws" => Ok(Storage {
                storage_type: "S3",
                member: "s3",
                fields: fields(
                    json!({"bucket": bucket, "region": bsl::config(bsl, "region"), "keyPrefix": prefix}),
                ),
            }),
            "azure" | "velero.io/azure" => Ok(Storage {
                storage_type: "AzureBlob",
                member: "azureBlob",
                fields: fields(
                    json!({"container": bucket, "storageAccount": bsl::config(bsl, "storageAccount"), "keyPrefix": prefix}),
                ),
            }),
            other => Err(format!(
                "unsupported BSL provider {other:?}: only aws and azure are supported"
            )),
        }
    }

    /// Names the credential Secret (in the HyperShift Operator's namespace).
    pub fn set_credentials(&mut self, secret: &str) {
        self.fields
            .insert("credentials".into(), json!({"name": secret}));
    }

    /// Copies the HostedCluster's encryption key when its managed etcd backs up to the same platform:
    /// `kmsKeyARN` for S3 (platform `AWS`), `encryptionKeyURL` for AzureBlob (platform `Azure`).
    pub fn set_encryption(&mut self, hosted_cluster: Option<&Object>) {
        let Some(hc) = hosted_cluster else { return };
        if hc.pointer("/spec/etcd/managed").is_none() {
            return;
        }
        let platform = hc
            .str_at("/spec/etcd/managed/backup/platform")
            .unwrap_or("");
        let (field, value) = match (self.storage_type, platform) {
            ("S3", "AWS") => (
                "kmsKeyARN",
                hc.str_at("/spec/etcd/managed/backup/aws/kmsKeyARN"),
            ),
            ("AzureBlob", "Azure") => (
                "encryptionKeyURL",
                hc.str_at("/spec/etcd/managed/backup/azure/encryptionKeyURL"),
            ),
            _ => return,
        };
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            self.fields.insert(field.into(), json!(value));
        }
    }

    /// `spec.storage`.
    pub fn to_value(&self) -> Value {
        json!({"storageType": self.storage_type, self.member: self.fields})
    }
}

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bsl(provider: &str, bucket: &str, prefix: Option<&str>, config: Value) -> Object {
        let mut object_storage = json!({"bucket": bucket});
        if let Some(p) = prefix {
            object_storage["prefix"] = json!(p);
        }
        Object::from_value(json!({"spec": {"provider": provider, "objectStorage": object_storage, "config": config}}))
            .unwrap()
    }

    #[test]
    fn upstream_mapping_table() {
        let s = Storage::from_bsl(
            &bsl(
                "aws",
                "my-bucket",
                Some("velero-backups"),
                json!({"region": "us-east-1"}),
            ),
            "test-backup",
        )
        .unwrap();
        assert_eq!(
            s.to_value(),
            json!({"storageType": "S3", "s3": {"bucket": "my-bucket", "region": "us-east-1", "keyPrefix": "velero-backups/backups/test-backup/etcd-backup"}})
        );
        let s = Storage::from_bsl(
            &bsl("aws", "my-bucket", None, json!({"region": "eu-west-1"})),
            "test-backup",
        )
        .unwrap();
        assert_eq!(
            s.to_value()["s3"]["keyPrefix"],
            "backups/test-backup/etcd-backup"
        );
        let s = Storage::from_bsl(
            &bsl("velero.io/aws", "my-bucket", Some("my-prefix"), json!({})),
            "test-backup",
        )
        .unwrap();
        assert_eq!(
            s.to_value()["s3"]["keyPrefix"],
            "my-prefix/backups/test-backup/etcd-backup"
        );
        assert_eq!(s.to_value()["s3"]["region"], "");
        let s = Storage::from_bsl(
            &bsl(
                "azure",
                "my-container",
                Some("velero"),
                json!({"storageAccount": "mystorageaccount"}),
            ),
            "test-backup",
        )
        .unwrap();
        assert_eq!(
            s.to_value(),
            json!({"storageType": "AzureBlob", "azureBlob": {"container": "my-container", "storageAccount": "mystorageaccount", "keyPrefix": "velero/backups/test-backup/etcd-backup"}})
        );
        let e = Storage::from_bsl(&bsl("gcp", "", None, json!({})), "test-backup").unwrap_err();
        assert_eq!(
            e,
            "unsupported BSL provider \"gcp\": only aws and azure are supported"
        );
        let bare = Object::from_value(json!({"spec": {"provider": "aws"}})).unwrap();
        assert_eq!(
            Storage::from_bsl(&bare, "b").unwrap().to_value()["s3"],
            json!({"bucket": "", "region": "", "keyPrefix": "backups/b/etcd-backup"})
        );
    }

    #[test]
    fn encryption_comes_only_from_a_matching_platform() {
        let hc = |platform: &str| {
            Object::from_value(json!({"spec": {"etcd": {"managed": {"backup": {"platform": platform,
                "aws": {"kmsKeyARN": "arn:aws:kms:us-east-1:1:key/k"}, "azure": {"encryptionKeyURL": "https://vault/keys/k"}}}}}}))
            .unwrap()
        };
        let aws = bsl("aws", "b", None, json!({"region": "r"}));
        let mut s = Storage::from_bsl(&aws, "x").unwrap();
        s.set_encryption(Some(&hc("AWS")));
        assert_eq!(
            s.to_value()["s3"]["kmsKeyARN"],
            "arn:aws:kms:us-east-1:1:key/k"
        );
        let mut s = Storage::from_bsl(&aws, "x").unwrap();
        s.set_encryption(Some(&hc("Azure")));
        assert!(s.to_value()["s3"].get("kmsKeyARN").is_none());
        s.set_encryption(None);
        let unmanaged =
            Object::from_value(json!({"spec": {"etcd": {"managementType": "Unmanaged"}}})).unwrap();
        s.set_encryption(Some(&unmanaged));
        assert!(s.to_value()["s3"].get("kmsKeyARN").is_none());
        let mut s = Storage::from_bsl(&bsl("azure", "c", None, json!({})), "x").unwrap();
        s.set_encryption(Some(&hc("Azure")));
        s.set_credentials("etcd-backup-creds-x");
        assert_eq!(
            s.to_value()["azureBlob"],
            json!({"container": "c", "storageAccount": "", "keyPrefix": "backups/x/etcd-backup", "encryptionKeyURL": "https://vault/keys/k", "credentials": {"name": "etcd-backup-creds-x"}})
        );
    }
}
