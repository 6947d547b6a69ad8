//! The wasm export: the WIT `signing` interface over this crate's functions. The clock, the log and
//! HTTP are the host's capabilities.

use crate::bindings::exports::velero_wasm::plugin::signing as wit;
use crate::bindings::velero_wasm::plugin::{clock, http, log};
use crate::credentials::AwsSource;
use crate::snapshot::SnapshotUrl;
use crate::transport::{Request, Response, Transport};
use crate::{aad, azure, s3, sts, AwsCredentials, AzureCredentials, Error, UtcTime};

/// The exported component.
pub struct Component;

/// Sends requests through the host's `http` capability.
struct HostHttp;

impl Transport for HostHttp {
    fn send(&self, request: Request) -> Result<Response, String> {
        let answer = http::send(&http::Request {
            method: request.method.to_string(),
            url: request.url,
            headers: request.headers,
            body: request.body,
        });
        match answer {
            Ok(response) => Ok(Response {
                status: response.status,
                body: response.body,
            }),
            Err(http::Error::Denied(m)) => Err(format!("denied: {m}")),
            Err(http::Error::Timeout(m)) => Err(format!("timeout: {m}")),
            Err(http::Error::TooLarge(m)) => Err(format!("too large: {m}")),
            Err(http::Error::Transport(m)) => Err(m),
            Err(http::Error::Invalid(m)) => Err(format!("invalid request: {m}")),
        }
    }
}

fn wit_error(error: Error) -> wit::SigningError {
    match error {
        Error::Invalid(m) => wit::SigningError::Invalid(m),
        Error::Remote(m) => wit::SigningError::Remote(m),
        Error::Transport(m) => wit::SigningError::Transport(m),
    }
}

/// The explicit time, or the clock's.
fn instant(now: Option<wit::Timestamp>) -> Result<UtcTime, Error> {
    let now = now.unwrap_or_else(clock::now);
    UtcTime::from_unix(now.seconds)
}

fn debug(message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    log::log(log::Level::Debug, message, &fields);
}

impl wit::Guest for Component {
    fn parse_snapshot_url(url: String) -> Result<wit::SnapshotUrl, wit::SigningError> {
        Ok(match crate::snapshot::parse(&url).map_err(wit_error)? {
            SnapshotUrl::S3 { bucket, key } => wit::SnapshotUrl::S3((bucket, key)),
            SnapshotUrl::AzureBlob {
                account,
                container,
                blob,
            } => wit::SnapshotUrl::AzureBlob((account, container, blob)),
            SnapshotUrl::Unsigned => wit::SnapshotUrl::Unsigned,
        })
    }

    fn parse_aws_credentials(data: String) -> Result<wit::AwsCredentialSource, wit::SigningError> {
        Ok(
            match crate::credentials::parse_aws(&data).map_err(wit_error)? {
                AwsSource::Keys(keys) => wit::AwsCredentialSource::Keys(wit::AwsKeys {
                    access_key_id: keys.access_key_id,
                    secret_access_key: keys.secret_access_key,
                    session_token: (!keys.session_token.is_empty()).then_some(keys.session_token),
                }),
                AwsSource::WebIdentity {
                    role_arn,
                    token_file,
                } => wit::AwsCredentialSource::WebIdentity((role_arn, token_file)),
            },
        )
    }

    fn presign_s3(
        request: wit::S3Request,
        credentials: wit::AwsCredentials,
    ) -> Result<String, wit::SigningError> {
        let now = instant(request.now).map_err(wit_error)?;
        let presign = s3::Presign {
            bucket: request.bucket,
            key: request.key,
            region: request.region,
            endpoint: request.endpoint.filter(|e| !e.is_empty()),
            force_path_style: request.force_path_style,
            expires: request.expires_seconds,
        };
        let credentials = match credentials {
            wit::AwsCredentials::Keys(keys) => AwsCredentials::Keys(s3::Keys {
                access_key_id: keys.access_key_id,
                secret_access_key: keys.secret_access_key,
                session_token: keys.session_token.unwrap_or_default(),
            }),
            wit::AwsCredentials::WebIdentity(identity) => {
                debug("assuming role via STS", &[("role", &identity.role_arn)]);
                AwsCredentials::WebIdentity(sts::WebIdentity {
                    role_arn: identity.role_arn,
                    token: identity.token,
                    session_name: identity.session_name,
                    endpoint: identity.sts_endpoint,
                })
            }
        };
        let style = match (&presign.endpoint, presign.force_path_style) {
            (Some(_), _) => "endpoint",
            (None, true) => "path",
            (None, false) => "virtual-hosted",
        };
        debug(
            "presigning an S3 GET",
            &[
                ("bucket", &presign.bucket),
                ("region", &presign.region),
                ("style", style),
                ("time", &now.basic()),
            ],
        );
        crate::presign_s3(&HostHttp, &presign, &credentials, &now).map_err(wit_error)
    }

    fn azure_sas(
        request: wit::AzureRequest,
        credentials: wit::AzureCredentials,
    ) -> Result<String, wit::SigningError> {
        let now = instant(request.now).map_err(wit_error)?;
        let sas = azure::Sas {
            account: request.account,
            container: request.container,
            blob: request.blob,
            endpoint: request.endpoint.filter(|e| !e.is_empty()),
            permissions: request.permissions,
            expires: request.expires_seconds,
        };
        let (kind, credentials) = match credentials {
            wit::AzureCredentials::AccountKey(key) => {
                ("account key", AzureCredentials::AccountKey(key))
            }
            wit::AzureCredentials::DelegationKey(key) => (
                "user delegation key",
                AzureCredentials::DelegationKey(azure::DelegationKey {
                    signed_oid: key.signed_oid,
                    signed_tid: key.signed_tid,
                    signed_start: key.signed_start,
                    signed_expiry: key.signed_expiry,
                    signed_service: key.signed_service,
                    signed_version: key.signed_version,
                    value: key.value,
                }),
            ),
            wit::AzureCredentials::Aad(identity) => (
                "Entra ID user delegation",
                AzureCredentials::Aad(aad::Identity {
                    tenant_id: identity.tenant_id,
                    client_id: identity.client_id,
                    secret: match identity.secret {
                        wit::AadSecret::ClientSecret(s) => aad::Secret::ClientSecret(s),
                        wit::AadSecret::FederatedToken(t) => aad::Secret::FederatedToken(t),
                        wit::AadSecret::AccessToken(t) => aad::Secret::AccessToken(t),
                        wit::AadSecret::ManagedIdentity(endpoint) => {
                            aad::Secret::ManagedIdentity(endpoint)
                        }
                    },
                    cloud_name: identity.cloud_name,
                    authority: identity.authority,
                }),
            ),
        };
        debug(
            "signing an Azure Blob SAS",
            &[
                ("account", &sas.account),
                ("container", &sas.container),
                ("credentials", kind),
                ("time", &now.extended()),
            ],
        );
        crate::azure_sas(&HostHttp, &sas, &credentials, &now).map_err(wit_error)
    }
}

crate::bindings::export!(Component with_types_in crate::bindings);
