//! Get User Delegation Key (docs/signing.md#s6-7): trades an AAD token for a key that signs user delegation SAS.

use crate::azure::{service_base, DelegationKey, VERSION};
use crate::error::{quote_body, Error};
use crate::time::UtcTime;
use crate::transport::{Request, Transport};

/// The request for a key valid from `start` to `expiry`.
pub fn request(
    account: &str,
    endpoint: Option<&str>,
    token: &str,
    start: &UtcTime,
    expiry: &UtcTime,
) -> Result<Request, Error> {
    let base = service_base(account, endpoint)?;
    Ok(Request {
        method: "POST",
        url: format!("{base}/?restype=service&comp=userdelegationkey"),
        headers: vec![
            ("Authorization".into(), format!("Bearer {token}")),
            ("x-ms-version".into(), VERSION.into()),
            ("Content-Type".into(), "application/xml".into()),
        ],
        body: format!(
            "<KeyInfo><Start>{}</Start><Expiry>{}</Expiry></KeyInfo>",
            start.extended(),
            expiry.extended()
        )
        .into_bytes(),
    })
}

/// Gets a user delegation key. Errors never contain the token.
pub fn get_key(
    transport: &dyn Transport,
    account: &str,
    endpoint: Option<&str>,
    token: &str,
    start: &UtcTime,
    expiry: &UtcTime,
) -> Result<DelegationKey, Error> {
    let result = request(account, endpoint, token, start, expiry).and_then(|request| {
        let response = transport
            .send(request)
            .map_err(|e| Error::Transport(format!("calling Get User Delegation Key: {e}")))?;
        if response.status != 200 {
            return Err(Error::Remote(format!(
                "Get User Delegation Key returned {}: {}",
                response.status,
                quote_body(&response.body)
            )));
        }
        parse_key(&response.body)
    });
    result.map_err(|e| e.redact(&[token]))
}

/// Reads the `UserDelegationKey` document.
pub fn parse_key(body: &[u8]) -> Result<DelegationKey, Error> {
    let fail =
        |e: &dyn std::fmt::Display| Error::Remote(format!("parsing delegation key response: {e}"));
    let text = std::str::from_utf8(body).map_err(|e| fail(&e))?;
    let doc =
        roxmltree::Document::parse(text.trim_start_matches('\u{feff}')).map_err(|e| fail(&e))?;
    let root = doc.root_element();
    if !root.has_tag_name("UserDelegationKey") {
        return Err(fail(&format!(
            "expected a UserDelegationKey element, got {}",
            root.tag_name().name()
        )));
    }
    let field = |name: &str| -> String {
        root.children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .unwrap_or("")
            .to_string()
    };
    let key = DelegationKey {
        signed_oid: field("SignedOid"),
        signed_tid: field("SignedTid"),
        signed_start: field("SignedStart"),
        signed_expiry: field("SignedExpiry"),
        signed_service: field("SignedService"),
        signed_version: field("SignedVersion"),
        value: field("Value"),
    };
    if key.value.is_empty() {
        return Err(fail(&"no Value"));
    }
    Ok(key)
}
