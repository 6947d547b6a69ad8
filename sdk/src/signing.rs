//! Signed object-store URLs, made by the module that exports `signing` (`wit/signing.wit`): the host
//! links a component's `signing` import to it. [`Signer`] is the import as a trait, [`HostSigner`]
//! the host's, and [`FakeSigner`] a recording stand-in for native unit tests.
//!
//! ```
//! use velero_wasm_sdk::signing::{AwsCredentials, AwsKeys, FakeSigner, S3Request, Signer, SnapshotUrl};
//!
//! /// A URL anyone can GET for an hour, for an `s3://` snapshot URL.
//! fn shareable(signer: &dyn Signer, url: &str, keys: AwsKeys) -> Result<String, String> {
//!     let SnapshotUrl::S3((bucket, key)) = signer.parse_snapshot_url(url).map_err(|e| e.message().to_string())? else {
//!         return Ok(url.to_string());
//!     };
//!     let request = S3Request {
//!         bucket, key, region: "us-east-1".into(), endpoint: None, force_path_style: false,
//!         expires_seconds: 3600, now: None,
//!     };
//!     signer
//!         .presign_s3(&request, &AwsCredentials::Keys(keys))
//!         .map_err(|e| format!("signing {url}: {}", e.message()))
//! }
//!
//! let signer = FakeSigner::new();
//! let keys = AwsKeys { access_key_id: "AKID".into(), secret_access_key: "s".into(), session_token: None };
//! let url = shareable(&signer, "s3://backups/etcd/snapshot.db", keys).unwrap();
//! assert_eq!(url, "https://signed.example/backups/etcd/snapshot.db?keys:AKID");
//! assert_eq!(
//!     signer.calls(),
//!     ["presign-s3 backups/etcd/snapshot.db region=us-east-1 endpoint=- path-style=false expires=3600 keys:AKID"]
//! );
//! ```

use std::cell::RefCell;

pub use crate::bindings::velero_wasm::plugin::signing::{
    AadCredentials, AadSecret, AwsCredentialSource, AwsCredentials, AwsKeys, AzureCredentials,
    AzureRequest, DelegationKey, S3Request, SigningError, SnapshotUrl, WebIdentity,
};

/// The `signing` import, so that logic having URLs signed runs against a [`FakeSigner`] in native
/// unit tests.
pub trait Signer {
    /// Classifies a snapshot URL (S3, Azure Blob, or one to pass on unsigned).
    fn parse_snapshot_url(&self, url: &str) -> Result<SnapshotUrl, SigningError>;
    /// Reads AWS credential data (an INI profile, or a web-identity role).
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

/// The host's `signing` import, served by the module that exports `signing`. Outside a wasm32 build
/// (native unit tests) there is no host: every call fails with [`SigningError::Unavailable`].
#[derive(Debug, Default, Clone, Copy)]
pub struct HostSigner;

impl Signer for HostSigner {
    fn parse_snapshot_url(&self, url: &str) -> Result<SnapshotUrl, SigningError> {
        parse_snapshot_url(url)
    }
    fn parse_aws_credentials(&self, data: &str) -> Result<AwsCredentialSource, SigningError> {
        parse_aws_credentials(data)
    }
    fn presign_s3(
        &self,
        request: &S3Request,
        credentials: &AwsCredentials,
    ) -> Result<String, SigningError> {
        presign_s3(request, credentials)
    }
    fn azure_sas(
        &self,
        request: &AzureRequest,
        credentials: &AzureCredentials,
    ) -> Result<String, SigningError> {
        azure_sas(request, credentials)
    }
}

impl SigningError {
    /// The message, without the variant.
    pub fn message(&self) -> &str {
        match self {
            SigningError::Invalid(m)
            | SigningError::Remote(m)
            | SigningError::Transport(m)
            | SigningError::Unavailable(m) => m,
        }
    }
}

/// A signer for native unit tests: it classifies snapshot URLs as the signing module does
/// (`s3://bucket/key`, `https://<account>.blob.<suffix>/<container>/<blob>`, anything else unsigned),
/// answers stand-in URLs that name what it was given (`https://signed.example/<bucket>/<key>?<credentials>`,
/// `https://<account>.blob.core.windows.net/<container>/<blob>?sig=<credentials>`), and records one
/// line per call (see [`FakeSigner::calls`]).
#[derive(Debug, Default)]
pub struct FakeSigner {
    calls: RefCell<Vec<String>>,
    aws_source: Option<AwsCredentialSource>,
    failure: Option<SigningError>,
}

impl FakeSigner {
    /// A signer that signs everything; AWS credential data reads as static keys `AKID`/`SECRET`.
    pub fn new() -> FakeSigner {
        FakeSigner::default()
    }

    /// `parse-aws-credentials` answers `source` whatever the data.
    pub fn with_aws_source(mut self, source: AwsCredentialSource) -> FakeSigner {
        self.aws_source = Some(source);
        self
    }

    /// Every signing call (`presign-s3`, `azure-sas`) fails with `error`.
    pub fn failing(mut self, error: SigningError) -> FakeSigner {
        self.failure = Some(error);
        self
    }

    /// One line per call but `parse-snapshot-url`, in order: `parse-aws "<data>"`,
    /// `presign-s3 <bucket>/<key> region=… endpoint=… path-style=… expires=… <credentials>`,
    /// `azure-sas <account>/<container>/<blob> endpoint=… permissions=… expires=… <credentials>`.
    pub fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }
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
        Ok(self.aws_source.clone().unwrap_or_else(|| {
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
        if let Some(e) = self.failure.clone() {
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
        if let Some(e) = self.failure.clone() {
            return Err(e);
        }
        Ok(format!(
            "https://{}.blob.core.windows.net/{}/{}?sig={creds}",
            request.account, request.container, request.blob
        ))
    }
}

#[cfg(target_arch = "wasm32")]
use crate::bindings::velero_wasm::plugin::signing as wit;

/// Classifies a snapshot URL, through the host.
pub fn parse_snapshot_url(url: &str) -> Result<SnapshotUrl, SigningError> {
    #[cfg(target_arch = "wasm32")]
    return wit::parse_snapshot_url(url);
    #[cfg(not(target_arch = "wasm32"))]
    Err(unavailable(url))
}

/// Reads AWS credential data, through the host.
pub fn parse_aws_credentials(data: &str) -> Result<AwsCredentialSource, SigningError> {
    #[cfg(target_arch = "wasm32")]
    return wit::parse_aws_credentials(data);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = data;
        Err(unavailable("AWS credentials"))
    }
}

/// A presigned S3 GET URL, through the host.
pub fn presign_s3(
    request: &S3Request,
    credentials: &AwsCredentials,
) -> Result<String, SigningError> {
    #[cfg(target_arch = "wasm32")]
    return wit::presign_s3(request, credentials);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = credentials;
        Err(unavailable(&format!(
            "s3://{}/{}",
            request.bucket, request.key
        )))
    }
}

/// An Azure Blob SAS URL, through the host.
pub fn azure_sas(
    request: &AzureRequest,
    credentials: &AzureCredentials,
) -> Result<String, SigningError> {
    #[cfg(target_arch = "wasm32")]
    return wit::azure_sas(request, credentials);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = credentials;
        Err(unavailable(&format!(
            "{}/{}/{}",
            request.account, request.container, request.blob
        )))
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn unavailable(what: &str) -> SigningError {
    SigningError::Unavailable(crate::no_host(&format!("signing {what}")))
}
