//! What every call runs with: the cluster, the host's environment and clock, the signer and the
//! module's settings. Behind traits, so that the logic runs natively in unit tests against fakes
//! (`FakeCluster` and the fakes of `testing`).

use std::time::Duration;

use velero_wasm_sdk::signing::{
    AwsCredentialSource, AwsCredentials, AzureCredentials, AzureRequest, S3Request, SigningError,
    SnapshotUrl,
};
use velero_wasm_sdk::{Cluster, Timestamp};

use crate::settings::Settings;

/// The `environment` capability.
pub trait Environment {
    /// The namespace Velero runs in ("" when unknown).
    fn velero_namespace(&self) -> String;
    /// A granted environment variable; `None` when unset.
    fn variable(&self, name: &str) -> Result<Option<String>, String>;
    /// The file named by a granted environment variable.
    fn read_env_file(&self, variable: &str) -> Result<Vec<u8>, String>;
}

/// The `clock` capability.
pub trait Clock {
    /// Wall-clock time.
    fn now(&self) -> Timestamp;
    /// Time since an arbitrary point (only differences count).
    fn monotonic(&self) -> Duration;
    /// Waits (a virtual clock moves instead).
    fn sleep(&self, duration: Duration);
    /// Time left before the host ends the call (the module's `limits.timeout`).
    fn remaining(&self) -> Duration;
}

/// The `signing` import: the functions of `wit/signing.wit`.
pub trait Signer {
    /// Classifies a snapshot URL.
    fn parse_snapshot_url(&self, url: &str) -> Result<SnapshotUrl, SigningError>;
    /// Reads AWS credential data.
    fn parse_aws_credentials(&self, data: &str) -> Result<AwsCredentialSource, SigningError>;
    /// A presigned S3 GET URL.
    fn presign_s3(
        &self,
        request: &S3Request,
        credentials: &AwsCredentials,
    ) -> Result<String, SigningError>;
    /// An Azure Blob SAS URL.
    fn azure_sas(
        &self,
        request: &AzureRequest,
        credentials: &AzureCredentials,
    ) -> Result<String, SigningError>;
}

/// The message of a signing error, without its variant.
pub fn signing_message(e: &SigningError) -> &str {
    match e {
        SigningError::Invalid(m)
        | SigningError::Remote(m)
        | SigningError::Transport(m)
        | SigningError::Unavailable(m) => m,
    }
}

/// Everything a call can reach.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// Kubernetes.
    pub cluster: &'a dyn Cluster,
    /// Velero's namespace, environment variables, token files.
    pub env: &'a dyn Environment,
    /// Time.
    pub clock: &'a dyn Clock,
    /// URL signing.
    pub signer: &'a dyn Signer,
    /// The module's settings.
    pub settings: &'a Settings,
}

impl Context<'_> {
    /// Velero's namespace, where the plugin's ConfigMap, the BackupStorageLocations and their
    /// credential Secrets live; an error when the host does not know it.
    pub fn velero_namespace(&self) -> Result<String, String> {
        let namespace = self.env.velero_namespace();
        if namespace.is_empty() {
            Err(
                "error getting current namespace: the namespace Velero runs in is unknown \
                 (set VELERO_NAMESPACE on the Velero deployment)"
                    .into(),
            )
        } else {
            Ok(namespace)
        }
    }

    /// Wall-clock seconds since the Unix epoch.
    pub fn unix_now(&self) -> i64 {
        self.clock.now().seconds
    }
}
