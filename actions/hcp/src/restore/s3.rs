//! The S3 presign path (docs/hcp.md#s5-6): region, endpoint and path style from the BSL, credentials from its
//! Secret (profile `default`), static keys or a web identity exchanged at STS.

use velero_wasm_sdk::signing::{AwsCredentialSource, AwsCredentials, S3Request, WebIdentity};
use velero_wasm_sdk::Object;

use super::credentials::fetch;
use crate::bsl;
use crate::context::Context;

/// The variable naming the projected service-account token for IRSA.
pub const TOKEN_FILE_VARIABLE: &str = "AWS_WEB_IDENTITY_TOKEN_FILE";
/// Validity of the URL, in seconds.
pub const EXPIRES: u32 = 3600;
/// AWS's limit on a role session name.
pub const MAX_SESSION_NAME: usize = 64;

/// A presigned GET of `s3://bucket/key`. Errors are unwrapped (the caller adds upstream's prefix).
pub fn presign(
    ctx: &Context,
    backup: &Object,
    resource: &str,
    bucket: String,
    key: String,
) -> Result<String, String> {
    let fetched = fetch(ctx, backup)?;
    let data = fetched.credentials?;
    let data = String::from_utf8_lossy(&data).into_owned();
    let source = ctx
        .signer
        .parse_aws_credentials(&data)
        .map_err(|e| format!("error parsing AWS credentials: {}", e.message()))?;
    let credentials = match source {
        AwsCredentialSource::Keys(keys) => AwsCredentials::Keys(keys),
        AwsCredentialSource::WebIdentity((role_arn, token_file)) => {
            let token = web_identity_token(ctx, &data, &role_arn, token_file.as_deref())?;
            AwsCredentials::WebIdentity(WebIdentity {
                sts_endpoint: sts_endpoint(ctx, &role_arn),
                role_arn,
                token,
                session_name: session_name(resource),
            })
        }
    };
    let endpoint = bsl::config(&fetched.bsl, "s3Url");
    let request = S3Request {
        bucket,
        key,
        region: bsl::config(&fetched.bsl, "region").to_string(),
        endpoint: (!endpoint.is_empty()).then(|| endpoint.to_string()),
        force_path_style: bsl::config(&fetched.bsl, "s3ForcePathStyle") == "true",
        expires_seconds: EXPIRES,
        now: None,
    };
    ctx.signer
        .presign_s3(&request, &credentials)
        .map_err(|e| e.message().to_string())
}

/// `restore-<name>`, cut to AWS's 64 characters.
pub fn session_name(resource: &str) -> String {
    let mut name = format!("restore-{resource}");
    name.truncate(MAX_SESSION_NAME);
    name
}

/// The STS endpoint: the `sts-endpoint` setting, else the regional endpoint of the China and GovCloud
/// partitions (the global one serves neither), else the global one.
pub fn sts_endpoint(ctx: &Context, role_arn: &str) -> Option<String> {
    if let Some(endpoint) = &ctx.settings.sts_endpoint {
        return Some(endpoint.clone());
    }
    if role_arn.starts_with("arn:aws-cn:") {
        Some("https://sts.cn-north-1.amazonaws.com.cn".into())
    } else if role_arn.starts_with("arn:aws-us-gov:") {
        Some("https://sts.us-gov-west-1.amazonaws.com".into())
    } else {
        None
    }
}

/// The projected token, read through the `environment` capability. A module reads no paths of its
/// own: the token file is the one `AWS_WEB_IDENTITY_TOKEN_FILE` names, and a `web_identity_token_file`
/// in the credentials must be that same file.
fn web_identity_token(
    ctx: &Context,
    data: &str,
    role_arn: &str,
    token_file: Option<&str>,
) -> Result<String, String> {
    let variable = ctx
        .env
        .variable(TOKEN_FILE_VARIABLE)
        .map_err(|e| format!("error assuming role via STS: {e}"))?
        .filter(|v| !v.is_empty());
    let path = match (token_file, &variable) {
        (Some(file), Some(named)) if file == named => file.to_string(),
        (Some(file), _) => {
            return Err(format!(
                "error assuming role via STS: failed to read web identity token file {file:?}: velero-wasm reads only the \
                 file {TOKEN_FILE_VARIABLE} names ({}); set web_identity_token_file to it or leave it out",
                variable.as_deref().unwrap_or("unset")
            ))
        }
        (None, Some(named)) => named.clone(),
        (None, None) if data.trim().starts_with("arn:") => {
            return Err(format!(
                "error parsing AWS credentials: credential data is a bare IAM role ARN ({role_arn}) but \
                 {TOKEN_FILE_VARIABLE} is not set: IRSA requires a projected service account token"
            ))
        }
        (None, None) => {
            return Err(format!(
                "error parsing AWS credentials: credential file has role_arn ({role_arn}) but no web_identity_token_file: \
                 assume-role via source_profile or credential_source is not supported; use static credentials \
                 (aws_access_key_id/aws_secret_access_key) or IRSA format (role_arn + web_identity_token_file)"
            ))
        }
    };
    let token = ctx.env.read_env_file(TOKEN_FILE_VARIABLE).map_err(|e| {
        format!("error assuming role via STS: failed to read web identity token file {path:?}: {e}")
    })?;
    if token.is_empty() {
        return Err(format!(
            "error assuming role via STS: web identity token file {path:?} is empty"
        ));
    }
    Ok(String::from_utf8_lossy(&token).into_owned())
}
