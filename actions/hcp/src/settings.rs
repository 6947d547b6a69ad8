//! The module's settings (the `[settings]` table of `hcp.toml`, read through the `config` capability).
//!
//! | setting | values | default |
//! |---|---|---|
//! | `etcd-wait` | `async`: the backup action is a BackupItemAction v2 and the etcd snapshot an asynchronous operation; `blocking`: v1, waiting inside Execute as upstream does (for Velero without v2 operations) | `async` |
//! | `sts-endpoint` | STS URL for web-identity credentials (a private endpoint, a test server) | by the role ARN's partition |
//! | `aad-authority` | Microsoft Entra ID authority URL (Azure Stack, a test server) | by `AZURE_CLOUD_NAME` |
//! | `imds-endpoint` | Azure Instance Metadata Service, for managed identity (a test server) | `http://169.254.169.254` |

use velero_wasm_sdk::Config;

/// How the backup action waits for the HCPEtcdBackup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EtcdWait {
    /// An asynchronous operation (BackupItemAction v2): Execute returns at once; Velero polls Progress.
    #[default]
    Async,
    /// Inside Execute, polling up to 10 minutes (BackupItemAction v1, as upstream).
    Blocking,
}

/// The module's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `etcd-wait`.
    pub etcd_wait: EtcdWait,
    /// `sts-endpoint`.
    pub sts_endpoint: Option<String>,
    /// `aad-authority`.
    pub aad_authority: Option<String>,
    /// `imds-endpoint`.
    pub imds_endpoint: Option<String>,
}

impl Settings {
    /// Reads the settings from `config`; a bad value says how to fix it.
    pub fn read(config: &dyn Config) -> Result<Settings, String> {
        let etcd_wait = match config.get("etcd-wait").as_deref().map(str::trim) {
            None | Some("async") => EtcdWait::Async,
            Some("blocking") => EtcdWait::Blocking,
            Some(other) => {
                return Err(format!(
                    "module setting etcd-wait = {other:?} is not valid: set it to \"async\" (the default: the etcd snapshot is an \
                     asynchronous operation of a BackupItemAction v2) or \"blocking\" (wait inside Execute, for Velero without \
                     v2 operations) in the [settings] table of the hcp module's manifest"
                ))
            }
        };
        let text = |key: &str| {
            config
                .get(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        Ok(Settings {
            etcd_wait,
            sts_endpoint: text("sts-endpoint"),
            aad_authority: text("aad-authority"),
            imds_endpoint: text("imds-endpoint"),
        })
    }
}

#[cfg(test)]
mod tests {
    use velero_wasm_sdk::FakeConfig;

    use super::*;

    #[test]
    fn async_is_the_default_and_bad_values_say_how_to_fix_them() {
        let unset = FakeConfig::new();
        assert_eq!(Settings::read(&unset), Ok(Settings::default()));
        assert_eq!(
            unset.reads(),
            [
                "etcd-wait",
                "sts-endpoint",
                "aad-authority",
                "imds-endpoint"
            ]
        );
        let blocking = Settings::read(&FakeConfig::new().with("etcd-wait", "blocking"));
        assert_eq!(blocking.unwrap().etcd_wait, EtcdWait::Blocking);
        let e = Settings::read(&FakeConfig::new().with("etcd-wait", "sync")).unwrap_err();
        assert!(e.contains("\"sync\"") && e.contains("[settings]"), "{e}");
        let s = Settings::read(&FakeConfig::new().with("sts-endpoint", " https://sts.example "))
            .unwrap();
        assert_eq!(s.sts_endpoint.as_deref(), Some("https://sts.example"));
    }
}
