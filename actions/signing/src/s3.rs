//! S3 presigned GET URLs: AWS Signature Version 4 with query-string authentication (spec §6.2).
//!
//! Each step is a public function so the spec's known-answer vectors (§6.10) can check the canonical
//! request, the string to sign, the signing key and the signature one by one.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::encode;
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::time::UtcTime;

/// Validity used when none (0) is given.
pub const DEFAULT_EXPIRES: u32 = 3600;

/// Static keys, possibly temporary (with a session token).
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// Access key ID (not a secret: it appears in the URL).
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Session token of temporary keys; "" for none.
    pub session_token: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"[redacted]")
            .field(
                "session_token",
                &if self.session_token.is_empty() {
                    ""
                } else {
                    "[redacted]"
                },
            )
            .finish()
    }
}

/// What to presign.
#[derive(Debug, Clone, Default)]
pub struct Presign {
    /// Bucket name.
    pub bucket: String,
    /// Object key, decoded.
    pub key: String,
    /// AWS region, part of the host and of the credential scope.
    pub region: String,
    /// An S3-compatible endpoint (`scheme://host[:port]`); path style is then used.
    pub endpoint: Option<String>,
    /// Path-style addressing on AWS.
    pub force_path_style: bool,
    /// Validity in seconds; 0 means [`DEFAULT_EXPIRES`].
    pub expires: u32,
}

/// Where the request goes: scheme, host (with port) and the encoded path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https` or `http`.
    pub scheme: String,
    /// `host[:port]`, as signed in the `host` header.
    pub host: String,
    /// The SigV4-encoded path.
    pub path: String,
}

/// Scheme, host and encoded path for a request (spec §6.2 step 3).
pub fn target(request: &Presign) -> Result<Target, Error> {
    let (scheme, host, path) = match &request.endpoint {
        Some(endpoint) => {
            let endpoint = Endpoint::parse(endpoint)?;
            (
                endpoint.scheme,
                endpoint.authority,
                format!("/{}/{}", request.bucket, request.key),
            )
        }
        None if request.force_path_style => (
            "https".to_string(),
            format!("s3.{}.amazonaws.com", request.region),
            format!("/{}/{}", request.bucket, request.key),
        ),
        None => (
            "https".to_string(),
            format!("{}.s3.{}.amazonaws.com", request.bucket, request.region),
            format!("/{}", request.key),
        ),
    };
    Ok(Target {
        scheme,
        host,
        path: encode::sigv4_path(&path),
    })
}

/// The query parameters before signing (spec §6.2 step 4), unsorted.
pub fn query_params(
    keys: &Keys,
    region: &str,
    now: &UtcTime,
    expires: u32,
) -> Vec<(String, String)> {
    let mut params = vec![
        (
            "X-Amz-Algorithm".to_string(),
            "AWS4-HMAC-SHA256".to_string(),
        ),
        (
            "X-Amz-Credential".to_string(),
            format!("{}/{}", keys.access_key_id, scope(now, region, "s3")),
        ),
        ("X-Amz-Date".to_string(), now.basic()),
        ("X-Amz-Expires".to_string(), expires.to_string()),
        ("X-Amz-SignedHeaders".to_string(), "host".to_string()),
    ];
    if !keys.session_token.is_empty() {
        params.push((
            "X-Amz-Security-Token".to_string(),
            keys.session_token.clone(),
        ));
    }
    params
}

/// `<date>/<region>/<service>/aws4_request`.
pub fn scope(now: &UtcTime, region: &str, service: &str) -> String {
    format!("{}/{region}/{service}/aws4_request", now.date())
}

/// The canonical request of a presigned GET (spec §6.2 step 5).
pub fn canonical_request(
    method: &str,
    encoded_path: &str,
    canonical_query: &str,
    host: &str,
) -> String {
    format!("{method}\n{encoded_path}\n{canonical_query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD")
}

/// The string to sign (spec §6.2 step 6).
pub fn string_to_sign(timestamp: &str, scope: &str, canonical_request: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256\n{timestamp}\n{scope}\n{}",
        hex(&Sha256::digest(canonical_request.as_bytes()))
    )
}

/// The signing key: kDate, kRegion, kService, kSigning (spec §6.2 step 7), each returned.
pub fn signing_keys(secret: &str, date: &str, region: &str, service: &str) -> [[u8; 32]; 4] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    let k_signing = hmac(&k_service, b"aws4_request");
    [k_date, k_region, k_service, k_signing]
}

/// The lower-case hex signature of a string to sign.
pub fn signature(signing_key: &[u8; 32], string_to_sign: &str) -> String {
    hex(&hmac(signing_key, string_to_sign.as_bytes()))
}

/// A presigned GET URL (spec §6.2).
pub fn presign(request: &Presign, keys: &Keys, now: &UtcTime) -> Result<String, Error> {
    if request.bucket.is_empty() || request.key.is_empty() || request.region.is_empty() {
        return Err(Error::Invalid(
            "bucket, key, and region are required".into(),
        ));
    }
    if keys.access_key_id.is_empty() || keys.secret_access_key.is_empty() {
        return Err(Error::Invalid(
            "access key ID and secret access key are required".into(),
        ));
    }
    let expires = if request.expires == 0 {
        DEFAULT_EXPIRES
    } else {
        request.expires
    };
    let target = target(request)?;
    let mut params = query_params(keys, &request.region, now, expires);
    let canonical_query = sorted(&params);
    let canonical = canonical_request("GET", &target.path, &canonical_query, &target.host);
    let to_sign = string_to_sign(&now.basic(), &scope(now, &request.region, "s3"), &canonical);
    let [_, _, _, key] = signing_keys(&keys.secret_access_key, &now.date(), &request.region, "s3");
    params.push(("X-Amz-Signature".to_string(), signature(&key, &to_sign)));
    Ok(format!(
        "{}://{}{}?{}",
        target.scheme,
        target.host,
        target.path,
        sorted(&params)
    ))
}

fn sorted(params: &[(String, String)]) -> String {
    let pairs: Vec<(&str, &str)> = params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    encode::sorted_query(&pairs)
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
