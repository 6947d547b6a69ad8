//! S3 presigned GET URLs (docs/signing.md#s6-2): the address the AWS SDKs choose ([`target`]), signed by
//! `aws-sigv4` with query-parameter authentication ([`presign_target`]).
//!
//! Our own code is what the crate has no API for: the S3 address (host and path style), the S3 key
//! encoding of the path (the crate signs the path it is given, as S3 wants) and the URL in the form
//! docs/signing.md#s6-2 gives (all parameters sorted; the crate lists them in its own order).

use std::borrow::Cow;
use std::time::{Duration, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SessionTokenMode, SignableBody,
    SignableRequest, SignatureLocation, SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;

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

/// Checks the names of a request that reach the URL: the bucket, the region and the endpoint, as
/// botocore checks them before it presigns (so every request botocore signs is signed here too, and
/// no other). A bucket goes into the host only when it is also [`virtual_hostable`], else into the
/// path; the region is always part of the host on AWS and of the credential scope.
pub fn check(request: &Presign) -> Result<(), Error> {
    if request.bucket.is_empty() || request.key.is_empty() || request.region.is_empty() {
        return Err(Error::Invalid(
            "bucket, key, and region are required".into(),
        ));
    }
    check_bucket(&request.bucket)?;
    check_region(&request.region)?;
    if let Some(endpoint) = &request.endpoint {
        Endpoint::parse(endpoint)?;
    }
    Ok(())
}

/// A bucket name as botocore's `validate_bucket_name` allows it (its `VALID_BUCKET`): 1 to 255
/// ASCII letters, digits, `.`, `-` and `_`. Names outside S3's current rules (upper case, `_`, an IP
/// address) are legacy names botocore still addresses, path style; S3 access point ARNs, which
/// botocore also takes, need a host of their own and are not supported.
pub fn check_bucket(bucket: &str) -> Result<(), Error> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_');
    if (1..=255).contains(&bucket.len()) && bucket.bytes().all(allowed) {
        return Ok(());
    }
    let arn = if bucket.starts_with("arn:") {
        " (access point ARNs are not supported)"
    } else {
        ""
    };
    Err(Error::Invalid(format!(
        "invalid bucket name {bucket:?}: 1 to 255 letters, digits, '.', '-' and '_'{arn}"
    )))
}

/// A region as botocore's `validate_region_name` allows it: one DNS label (up to 63 letters,
/// digits and hyphens, neither starting nor ending with a hyphen) that is not only digits. It
/// becomes a label of the host `s3.<region>.<suffix>`, so a dot, `@`, `/` or `#` would point the
/// URL at another host.
pub fn check_region(region: &str) -> Result<(), Error> {
    let bytes = region.as_bytes();
    if (1..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        && !bytes.starts_with(b"-")
        && !bytes.ends_with(b"-")
        && !bytes.iter().all(u8::is_ascii_digit)
    {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "invalid region {region:?}: one DNS label of up to 63 letters, digits and hyphens, not \
         only digits, neither starting nor ending with a hyphen (such as us-east-1)"
    )))
}

/// Scheme, host and encoded path for a request (docs/signing.md#s6-2 step 3, with the SDKs' choice of style):
/// a custom endpoint is addressed path style; on AWS the bucket goes into the host only when it is
/// [`virtual_hostable`] and path style is not forced.
pub fn target(request: &Presign) -> Result<Target, Error> {
    check(request)?;
    let path_style = format!("/{}/{}", request.bucket, request.key);
    let (scheme, host, path) = match &request.endpoint {
        Some(endpoint) => {
            let endpoint = Endpoint::parse(endpoint)?;
            (endpoint.scheme, endpoint.authority, path_style)
        }
        None => {
            let service = service_host(&request.region);
            if request.force_path_style || !virtual_hostable(&request.bucket) {
                ("https".to_string(), service, path_style)
            } else {
                (
                    "https".to_string(),
                    format!("{}.{service}", request.bucket),
                    format!("/{}", request.key),
                )
            }
        }
    };
    Ok(Target {
        scheme,
        host,
        path: encode::sigv4_path(&path),
    })
}

/// Whether a bucket can be addressed as `<bucket>.s3.<region>.<suffix>` over HTTPS, by the rule of
/// the SDKs' endpoint rules (`aws.isVirtualHostableS3Bucket` without sub-domains): one DNS label of
/// 3 to 63 lower-case letters, digits and hyphens that starts and ends with a letter or digit. A
/// name with dots would not match the `*.s3.<region>…` certificate; an IP address has dots too.
pub fn virtual_hostable(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let end = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (3..=63).contains(&bytes.len())
        && bytes.first().is_some_and(end)
        && bytes.last().is_some_and(end)
        && bytes.iter().all(|b| end(b) || *b == b'-')
}

/// `s3.<region>.<suffix>`, the regional S3 host (never the global one, docs/signing.md#s6-2 step 3),
/// of a region [`check_region`] allows.
fn service_host(region: &str) -> String {
    format!("s3.{region}.{}", dns_suffix(region))
}

/// The DNS suffix of the region's partition, from the SDKs' partition table: China, the isolated
/// regions and the European Sovereign Cloud have their own; every other region is under `amazonaws.com`.
pub fn dns_suffix(region: &str) -> &'static str {
    const PARTITIONS: [(&str, &str); 6] = [
        ("cn-", "amazonaws.com.cn"),
        ("eusc-", "amazonaws.eu"),
        ("us-iso-", "c2s.ic.gov"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
        ("us-isof-", "csp.hci.ic.gov"),
    ];
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("amazonaws.com", |(_, suffix)| suffix)
}

/// A presigned GET URL (docs/signing.md#s6-2).
pub fn presign(request: &Presign, keys: &Keys, now: &UtcTime) -> Result<String, Error> {
    check(request)?;
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
    presign_target(&target(request)?, &request.region, keys, now, expires)
}

/// A presigned GET of `target`: the crate's SigV4 query signing, set up as S3 presigning is (the
/// path signed as given, neither encoded again nor normalised; `UNSIGNED-PAYLOAD`; the session token
/// signed), then the URL with every parameter sorted, as docs/signing.md#s6-2 writes it.
pub fn presign_target(
    target: &Target,
    region: &str,
    keys: &Keys,
    now: &UtcTime,
    expires: u32,
) -> Result<String, Error> {
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(expires.into()));
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::NoHeader;
    settings.session_token_mode = SessionTokenMode::Include;
    let identity = Credentials::new(
        &keys.access_key_id,
        &keys.secret_access_key,
        (!keys.session_token.is_empty()).then(|| keys.session_token.clone()),
        None,
        "velero-wasm",
    )
    .into();
    let unix = u64::try_from(now.unix()).map_err(|_| Error::Invalid("time before 1970".into()))?;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(UNIX_EPOCH + Duration::from_secs(unix))
        .settings(settings)
        .build()
        .map_err(|e| Error::Invalid(format!("error signing: {e}")))?
        .into();
    let base = format!("{}://{}{}", target.scheme, target.host, target.path);
    let signable = SignableRequest::new(
        "GET",
        base.as_str(),
        std::iter::empty(),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| Error::Invalid(format!("error signing {base}: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| Error::Invalid(format!("error signing {base}: {e}")))?
        .into_parts();
    let query: Vec<(&str, &str)> = instructions
        .params()
        .iter()
        .map(|(name, value): &(&str, Cow<'_, str>)| (*name, value.as_ref()))
        .collect();
    Ok(format!("{base}?{}", encode::sorted_query(&query)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_botocore_checks_them() {
        for bucket in [
            "my-bucket",
            "a",
            "Velero-Backups",
            "a_b",
            "1.2.3.4",
            &"a".repeat(255),
        ] {
            assert!(check_bucket(bucket).is_ok(), "{bucket}");
        }
        for bucket in [
            "",
            "evil.com#",
            "x@evil.com",
            "a/b",
            "a b",
            "é",
            &"a".repeat(256),
        ] {
            assert!(check_bucket(bucket).is_err(), "{bucket}");
        }
        for region in ["us-east-1", "a", "1a", "US-EAST-1", &"a".repeat(63)] {
            assert!(check_region(region).is_ok(), "{region}");
        }
        for region in [
            "",
            "us-east-1.evil.com",
            "x@y",
            "a/b",
            "123",
            "-a",
            "a-",
            "a_b",
            &"a".repeat(64),
        ] {
            assert!(check_region(region).is_err(), "{region}");
        }
    }

    #[test]
    fn only_a_lowercase_dns_label_goes_into_the_host() {
        let request = |bucket: &str| Presign {
            bucket: bucket.into(),
            key: "k".into(),
            region: "eu-west-1".into(),
            ..Presign::default()
        };
        assert_eq!(
            target(&request("my-bucket")).unwrap().host,
            "my-bucket.s3.eu-west-1.amazonaws.com"
        );
        for legacy in ["My-Bucket", "a.b.c", "a_b", "ab", "1.2.3.4"] {
            let t = target(&request(legacy)).unwrap();
            assert_eq!(t.host, "s3.eu-west-1.amazonaws.com", "{legacy}");
        }
        assert!(target(&request("evil.com#")).is_err());
    }
}
