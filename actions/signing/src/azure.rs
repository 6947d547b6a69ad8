//! Azure Blob SAS, `sv=2024-11-04`: the service SAS signed with the account key (docs/signing.md#s6-5) and the
//! user delegation SAS signed with a delegation key (docs/signing.md#s6-6).

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::encode;
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::time::UtcTime;

/// The `sv` of every SAS, and the service version of the REST calls.
pub const VERSION: &str = "2024-11-04";

/// Validity used when none (0) is given.
pub const DEFAULT_EXPIRES: u32 = 3600;

/// Standard base64 with padding, lenient about the unused bits of the last symbol (as Go's and
/// Python's decoders are), for keys.
const KEY_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// The permission letters a blob SAS may carry.
const PERMISSIONS: &str = "racwdxyltmeopi";

/// What to sign.
#[derive(Debug, Clone, Default)]
pub struct Sas {
    /// Storage account.
    pub account: String,
    /// Container.
    pub container: String,
    /// Blob name, decoded.
    pub blob: String,
    /// `storageAccountURI`: its scheme and `host[:port]` replace `<account>.blob.core.windows.net`.
    pub endpoint: Option<String>,
    /// `sp`, e.g. `r`.
    pub permissions: String,
    /// Validity in seconds; 0 means [`DEFAULT_EXPIRES`].
    pub expires: u32,
}

/// A user delegation key, fields verbatim from Get User Delegation Key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DelegationKey {
    /// `SignedOid`.
    pub signed_oid: String,
    /// `SignedTid`.
    pub signed_tid: String,
    /// `SignedStart`.
    pub signed_start: String,
    /// `SignedExpiry`.
    pub signed_expiry: String,
    /// `SignedService`.
    pub signed_service: String,
    /// `SignedVersion`.
    pub signed_version: String,
    /// `Value`: the base64 key.
    pub value: String,
}

impl std::fmt::Debug for DelegationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationKey")
            .field("signed_oid", &self.signed_oid)
            .field("signed_tid", &self.signed_tid)
            .field("signed_start", &self.signed_start)
            .field("signed_expiry", &self.signed_expiry)
            .field("value", &"[redacted]")
            .finish()
    }
}

/// The validated window and resource of a SAS.
struct Window {
    start: String,
    expiry: String,
    resource: String,
}

/// Checks a request and computes its window and canonicalized resource.
fn validate(request: &Sas, now: &UtcTime) -> Result<Window, Error> {
    if request.account.is_empty() || request.container.is_empty() || request.blob.is_empty() {
        return Err(Error::Invalid(
            "account, container, and blob are required".into(),
        ));
    }
    check_account(&request.account)?;
    if request.permissions.is_empty()
        || !request.permissions.chars().all(|c| PERMISSIONS.contains(c))
    {
        return Err(Error::Invalid(format!(
            "permissions {:?} must be letters from {PERMISSIONS:?}",
            request.permissions
        )));
    }
    let expires = if request.expires == 0 {
        DEFAULT_EXPIRES
    } else {
        request.expires
    };
    Ok(Window {
        start: now.extended(),
        expiry: now.plus(i64::from(expires))?.extended(),
        resource: format!(
            "/blob/{}/{}/{}",
            request.account, request.container, request.blob
        ),
    })
}

/// The 16-field string to sign of a service SAS (docs/signing.md#s6-5 step 4).
pub fn service_string_to_sign(
    permissions: &str,
    start: &str,
    expiry: &str,
    resource: &str,
) -> String {
    [
        permissions,
        start,
        expiry,
        resource,
        "",
        "",
        "https",
        VERSION,
        "b",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
    ]
    .join("\n")
}

/// The 24-field string to sign of a user delegation SAS (docs/signing.md#s6-6 step 3).
pub fn delegation_string_to_sign(
    permissions: &str,
    start: &str,
    expiry: &str,
    resource: &str,
    key: &DelegationKey,
) -> String {
    [
        permissions,
        start,
        expiry,
        resource,
        &key.signed_oid,
        &key.signed_tid,
        &key.signed_start,
        &key.signed_expiry,
        &key.signed_service,
        &key.signed_version,
        "",
        "",
        "",
        "",
        "https",
        VERSION,
        "b",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
    ]
    .join("\n")
}

/// base64(HMAC-SHA256(key, string to sign)).
pub fn sign(key: &[u8], string_to_sign: &str) -> Result<String, Error> {
    // HMAC takes keys of any length: this error is never made.
    let mut mac = Hmac::<Sha256>::new_from_slice(key)
        .map_err(|e| Error::Invalid(format!("HMAC key: {e}")))?;
    mac.update(string_to_sign.as_bytes());
    Ok(STANDARD.encode(mac.finalize().into_bytes()))
}

/// A service SAS URL signed with the account key (base64).
pub fn service_sas(request: &Sas, account_key: &str, now: &UtcTime) -> Result<String, Error> {
    let window = validate(request, now)?;
    if account_key.is_empty() {
        return Err(Error::Invalid("account key is required".into()));
    }
    let key = KEY_BASE64
        .decode(account_key)
        .map_err(|e| Error::Invalid(format!("invalid base64 account key: {e}")))?;
    let to_sign = service_string_to_sign(
        &request.permissions,
        &window.start,
        &window.expiry,
        &window.resource,
    );
    let sig = sign(&key, &to_sign)?;
    let params = [
        ("se", window.expiry.as_str()),
        ("sig", sig.as_str()),
        ("sp", request.permissions.as_str()),
        ("spr", "https"),
        ("sr", "b"),
        ("st", window.start.as_str()),
        ("sv", VERSION),
    ];
    Ok(format!(
        "{}?{}",
        blob_url(request)?,
        encode::sorted_query(&params)
    ))
}

/// A user delegation SAS URL signed with a delegation key.
pub fn delegation_sas(request: &Sas, key: &DelegationKey, now: &UtcTime) -> Result<String, Error> {
    let window = validate(request, now)?;
    if key.value.is_empty() {
        return Err(Error::Invalid("delegation key is required".into()));
    }
    let secret = KEY_BASE64
        .decode(&key.value)
        .map_err(|e| Error::Invalid(format!("invalid base64 delegation key: {e}")))?;
    let to_sign = delegation_string_to_sign(
        &request.permissions,
        &window.start,
        &window.expiry,
        &window.resource,
        key,
    );
    let sig = sign(&secret, &to_sign)?;
    let params = [
        ("se", window.expiry.as_str()),
        ("sig", sig.as_str()),
        ("ske", key.signed_expiry.as_str()),
        ("skoid", key.signed_oid.as_str()),
        ("sks", key.signed_service.as_str()),
        ("skt", key.signed_start.as_str()),
        ("sktid", key.signed_tid.as_str()),
        ("skv", key.signed_version.as_str()),
        ("sp", request.permissions.as_str()),
        ("spr", "https"),
        ("sr", "b"),
        ("st", window.start.as_str()),
        ("sv", VERSION),
    ];
    Ok(format!(
        "{}?{}",
        blob_url(request)?,
        encode::sorted_query(&params)
    ))
}

/// `<scheme>://<host>/<P(container)>/<P-encoded blob>` (docs/signing.md#s6-5 steps 6–7).
fn blob_url(request: &Sas) -> Result<String, Error> {
    let base = service_base(&request.account, request.endpoint.as_deref())?;
    Ok(format!(
        "{base}/{}/{}",
        encode::path_segment(&request.container),
        encode::blob_path(&request.blob)
    ))
}

/// Checks a storage account name as Azure defines it: 3 to 24 lowercase letters and digits. The name
/// becomes the first label of the URL's host, so anything else (`evil.com#`, `x@evil.com`, `a/b`)
/// would point the URL at another host.
pub fn check_account(account: &str) -> Result<(), Error> {
    if (3..=24).contains(&account.len())
        && account
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "invalid storage account name {account:?}: 3 to 24 lowercase letters and digits"
    )))
}

/// The Blob service's root: the endpoint (`scheme://host[:port][/path]`), or
/// `https://<account>.blob.core.windows.net`.
pub fn service_base(account: &str, endpoint: Option<&str>) -> Result<String, Error> {
    check_account(account)?;
    match endpoint.filter(|e| !e.is_empty()) {
        Some(endpoint) => Ok(Endpoint::parse(endpoint)?.root()),
        None => Ok(format!("https://{account}.blob.core.windows.net")),
    }
}

/// Checks a request without signing it (so a flow can refuse bad input before any network call).
pub fn check(request: &Sas, now: &UtcTime) -> Result<(), Error> {
    validate(request, now).map(|_| ())
}
