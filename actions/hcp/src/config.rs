//! The plugin's configuration (docs/hcp.md#s2-1): ConfigMap `hypershift-oadp-plugin-config` in Velero's
//! namespace, with upstream's keys and defaults. Upstream reads it once per plugin process; a
//! component keeps nothing between calls, so it is read by each call that passed the HyperShift gate.

use hypershift::apis::CONFIG_MAPS;
use velero_wasm_sdk::{log, Cluster, Object};

/// The ConfigMap's name.
pub const CONFIG_MAP: &str = "hypershift-oadp-plugin-config";
/// `hoNamespace` when unset or empty.
pub const DEFAULT_HO_NAMESPACE: &str = "hypershift";

const KNOWN_KEYS: [&str; 3] = ["etcdBackupMethod", "hoNamespace", "migration"];

/// How etcd data is backed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Volume snapshots or file-system backup of the etcd volumes (Velero does the work).
    VolumeSnapshot,
    /// An `HCPEtcdBackup` CR: HyperShift takes an etcd snapshot and uploads it to the backup storage.
    EtcdSnapshot,
}

/// The ConfigMap's data (all empty when it does not exist).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginConfig {
    data: Vec<(String, String)>,
}

impl PluginConfig {
    /// Reads the ConfigMap in `namespace`. NotFound is an empty configuration; any other error is
    /// `error getting plugin configuration: <err>`.
    pub fn read(cluster: &dyn Cluster, namespace: &str) -> Result<PluginConfig, String> {
        match cluster.get(CONFIG_MAPS, namespace, CONFIG_MAP) {
            Ok(map) => Ok(PluginConfig::from_object(&map)),
            Err(e) if e.is_not_found() => Ok(PluginConfig::default()),
            Err(e) => Err(format!(
                "error getting plugin configuration: {}",
                e.message()
            )),
        }
    }

    /// The configuration in a ConfigMap object.
    pub fn from_object(map: &Object) -> PluginConfig {
        let data = match map.pointer("/data") {
            Some(serde_json::Value::Object(data)) => data
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect(),
            _ => Vec::new(),
        };
        PluginConfig { data }
    }

    fn get(&self, key: &str) -> &str {
        self.data
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// The backup method, validated as the backup plugin does: empty means `volumeSnapshot`; anything
    /// but the two names is `invalid etcdBackupMethod "<v>": must be "volumeSnapshot" or "etcdSnapshot"`.
    pub fn backup_method(&self) -> Result<Method, String> {
        match self.get("etcdBackupMethod") {
            "" | "volumeSnapshot" => Ok(Method::VolumeSnapshot),
            "etcdSnapshot" => Ok(Method::EtcdSnapshot),
            other => Err(format!(
                "invalid etcdBackupMethod {other:?}: must be \"volumeSnapshot\" or \"etcdSnapshot\""
            )),
        }
    }

    /// Restore reads the method without validating it: only exactly `etcdSnapshot` counts.
    pub fn restore_uses_etcd_snapshot(&self) -> bool {
        self.get("etcdBackupMethod") == "etcdSnapshot"
    }

    /// Where the HyperShift Operator runs (the copied credential Secret goes there).
    pub fn ho_namespace(&self) -> &str {
        match self.get("hoNamespace") {
            "" => DEFAULT_HO_NAMESPACE,
            ns => ns,
        }
    }

    /// Keys upstream does not know (older versions' `dataUploadTimeout`, typos): only a warning.
    pub fn unknown_keys(&self) -> Vec<(&str, &str)> {
        self.data
            .iter()
            .filter(|(k, _)| !KNOWN_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Logs each unknown key as upstream does (`unknown configuration key: <k> with value <v>`).
    pub fn warn_unknown_keys(&self) {
        for (k, v) in self.unknown_keys() {
            log::warn(
                &format!("unknown configuration key: {k} with value {v}"),
                &[],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use velero_wasm_sdk::FakeCluster;

    use super::*;

    fn config(data: serde_json::Value) -> PluginConfig {
        PluginConfig::from_object(
            &Object::from_value(
                json!({"kind": "ConfigMap", "metadata": {"name": CONFIG_MAP}, "data": data}),
            )
            .unwrap(),
        )
    }

    #[test]
    fn absent_config_gives_the_defaults() {
        let c = FakeCluster::new();
        let config = PluginConfig::read(&c, "openshift-adp").unwrap();
        assert_eq!(config.backup_method(), Ok(Method::VolumeSnapshot));
        assert_eq!(config.ho_namespace(), "hypershift");
        assert!(!config.restore_uses_etcd_snapshot());
        assert_eq!(c.calls()[0].namespace, "openshift-adp");
        assert_eq!(c.calls()[0].target, CONFIG_MAP);
    }

    #[test]
    fn keys_and_their_validation() {
        let c = config(
            json!({"etcdBackupMethod": "etcdSnapshot", "hoNamespace": "ho", "migration": "true"}),
        );
        assert_eq!(c.backup_method(), Ok(Method::EtcdSnapshot));
        assert!(c.restore_uses_etcd_snapshot());
        assert_eq!(c.ho_namespace(), "ho");
        assert!(c.unknown_keys().is_empty());
        let c = config(json!({"etcdBackupMethod": "", "hoNamespace": ""}));
        assert_eq!(c.backup_method(), Ok(Method::VolumeSnapshot));
        assert_eq!(c.ho_namespace(), "hypershift");
        let bad = config(json!({"etcdBackupMethod": "EtcdSnapshot", "dataUploadTimeout": "30m"}));
        assert_eq!(
            bad.backup_method(),
            Err("invalid etcdBackupMethod \"EtcdSnapshot\": must be \"volumeSnapshot\" or \"etcdSnapshot\"".into())
        );
        assert!(!bad.restore_uses_etcd_snapshot());
        assert_eq!(bad.unknown_keys(), vec![("dataUploadTimeout", "30m")]);
    }
}
