//! The `signing` component: signed object-store URLs for the restore of a Hosted Control Plane.
//!
//! * S3 presigned GET, AWS Signature V4 ([`s3`]), with static keys, a session token, or keys obtained
//!   from STS `AssumeRoleWithWebIdentity` ([`sts`]); AWS credential data parsed by [`credentials`].
//! * Azure Blob SAS ([`azure`]): service SAS with the account key, or user delegation SAS with a key
//!   from Get User Delegation Key ([`delegation`]), itself obtained with an Entra ID token ([`aad`]).
//!
//! Everything here is a pure function of its inputs and an explicit time; remote calls go through a
//! [`transport::Transport`]. The behaviour follows docs/hcp.md#s5-4–docs/signing.md#s6; the
//! README lists where it deliberately differs. The wasm export is the thin wrapper in `component` (wasm builds only).

pub mod aad;
pub mod azure;
#[cfg(target_arch = "wasm32")]
// SAFETY: the only unsafe code here is the export glue `bindings::export!` generates (`export_name`,
// `link_section`, the canonical ABI's raw pointers); component.rs itself has none.
#[allow(unsafe_code)]
mod component;
pub mod credentials;
pub mod delegation;
pub mod encode;
pub mod endpoint;
pub mod error;
pub mod s3;
pub mod snapshot;
pub mod sts;
pub mod time;
pub mod transport;

pub use error::Error;
pub use time::UtcTime;

/// How to authenticate an S3 URL.
#[derive(Clone)]
pub enum AwsCredentials {
    /// Sign with these keys.
    Keys(s3::Keys),
    /// Assume a role first (STS), then sign with the temporary keys.
    WebIdentity(sts::WebIdentity),
}

/// How to authenticate an Azure Blob URL.
#[derive(Clone)]
pub enum AzureCredentials {
    /// Service SAS with the storage account key (base64).
    AccountKey(String),
    /// User delegation SAS with a key already obtained.
    DelegationKey(azure::DelegationKey),
    /// User delegation SAS: token, then delegation key, then SAS.
    Aad(aad::Identity),
}

/// A presigned S3 GET URL (docs/hcp.md#s5-6 steps 4–5). Errors never contain a secret.
pub fn presign_s3(
    transport: &dyn transport::Transport,
    request: &s3::Presign,
    credentials: &AwsCredentials,
    now: &UtcTime,
) -> Result<String, Error> {
    // Bad names are refused before any call to STS.
    s3::check(request)?;
    let keys = match credentials {
        AwsCredentials::Keys(keys) => keys.clone(),
        AwsCredentials::WebIdentity(identity) => sts::assume_role(transport, identity)
            .map_err(|e| e.context("error assuming role via STS"))?,
    };
    s3::presign(request, &keys, now)
        .map_err(|e| e.redact(&[&keys.secret_access_key, &keys.session_token]))
}

/// An Azure Blob URL with a SAS (docs/hcp.md#s5-7 steps 5–6). Errors never contain a secret.
pub fn azure_sas(
    transport: &dyn transport::Transport,
    request: &azure::Sas,
    credentials: &AzureCredentials,
    now: &UtcTime,
) -> Result<String, Error> {
    match credentials {
        AzureCredentials::AccountKey(key) => {
            azure::service_sas(request, key, now).map_err(|e| e.redact(&[key]))
        }
        AzureCredentials::DelegationKey(key) => {
            azure::delegation_sas(request, key, now).map_err(|e| e.redact(&[&key.value]))
        }
        AzureCredentials::Aad(identity) => {
            azure::check(request, now)?;
            let token = aad::token(transport, identity)
                .map_err(|e| e.context("error acquiring AAD token for storage"))?;
            let expires = i64::from(request.expires.max(azure::DEFAULT_EXPIRES));
            let key = delegation::get_key(
                transport,
                &request.account,
                request.endpoint.as_deref(),
                &token,
                now,
                &now.plus(expires)?,
            )
            .map_err(|e| e.context("error getting user delegation key"))?;
            azure::delegation_sas(request, &key, now).map_err(|e| e.redact(&[&key.value, &token]))
        }
    }
}

/// Bindings generated from the WIT package (world `signer`); only the wasm build exports them, so the
/// native build is a plain library for tests.
#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "signer",
        pub_export_macro: true,
    });
}
