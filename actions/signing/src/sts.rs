//! STS `AssumeRoleWithWebIdentity` (docs/signing.md#s6-4): a web-identity token for temporary keys.

use crate::error::{quote_body, Error};
use crate::s3::Keys;
use crate::transport::{form, Request, Transport};

/// The global STS endpoint the original always uses.
pub const DEFAULT_ENDPOINT: &str = "https://sts.amazonaws.com";

/// Session name used when none is given.
pub const DEFAULT_SESSION_NAME: &str = "hypershift-oadp";

/// Lifetime asked for, in seconds.
pub const DURATION_SECONDS: &str = "3600";

/// What to exchange.
#[derive(Clone)]
pub struct WebIdentity {
    /// Role to assume.
    pub role_arn: String,
    /// The token, sent verbatim.
    pub token: String,
    /// Role session name ("" for [`DEFAULT_SESSION_NAME`]).
    pub session_name: String,
    /// STS endpoint (`None` for [`DEFAULT_ENDPOINT`]).
    pub endpoint: Option<String>,
}

/// The form request the exchange sends.
pub fn request(identity: &WebIdentity) -> Result<Request, Error> {
    if identity.role_arn.is_empty() {
        return Err(Error::Invalid("roleARN is required".into()));
    }
    if identity.token.is_empty() {
        return Err(Error::Invalid("web identity token is empty".into()));
    }
    let session = if identity.session_name.is_empty() {
        DEFAULT_SESSION_NAME
    } else {
        &identity.session_name
    };
    let endpoint = identity
        .endpoint
        .as_deref()
        .filter(|e| !e.is_empty())
        .unwrap_or(DEFAULT_ENDPOINT);
    let body = form(&[
        ("Action", "AssumeRoleWithWebIdentity"),
        ("DurationSeconds", DURATION_SECONDS),
        ("RoleArn", &identity.role_arn),
        ("RoleSessionName", session),
        ("Version", "2011-06-15"),
        ("WebIdentityToken", &identity.token),
    ]);
    Ok(Request {
        method: "POST",
        url: endpoint.to_string(),
        headers: vec![(
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        )],
        body,
    })
}

/// Exchanges the token for temporary keys. Errors never contain the token.
pub fn assume_role(transport: &dyn Transport, identity: &WebIdentity) -> Result<Keys, Error> {
    let result = request(identity).and_then(|request| {
        let response = transport
            .send(request)
            .map_err(|e| Error::Transport(format!("STS request failed: {e}")))?;
        if response.status != 200 {
            return Err(Error::Remote(format!(
                "STS returned HTTP {}: {}",
                response.status,
                quote_body(&response.body)
            )));
        }
        parse_response(&response.body)
    });
    result.map_err(|e| e.redact(&[&identity.token]))
}

/// Reads `AssumeRoleWithWebIdentityResult/Credentials/{AccessKeyId,SecretAccessKey,SessionToken}`.
pub fn parse_response(body: &[u8]) -> Result<Keys, Error> {
    let text = std::str::from_utf8(body)
        .map_err(|e| Error::Remote(format!("failed to parse STS XML response: {e}")))?;
    let doc = roxmltree::Document::parse(text)
        .map_err(|e| Error::Remote(format!("failed to parse STS XML response: {e}")))?;
    let credentials = doc
        .root_element()
        .children()
        .find(|n| n.has_tag_name("AssumeRoleWithWebIdentityResult"))
        .and_then(|r| r.children().find(|n| n.has_tag_name("Credentials")));
    let field = |name: &str| -> String {
        credentials
            .and_then(|c| c.children().find(|n| n.has_tag_name(name)))
            .and_then(|n| n.text())
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let keys = Keys {
        access_key_id: field("AccessKeyId"),
        secret_access_key: field("SecretAccessKey"),
        session_token: field("SessionToken"),
    };
    if keys.access_key_id.is_empty()
        || keys.secret_access_key.is_empty()
        || keys.session_token.is_empty()
    {
        return Err(Error::Remote("STS response missing credentials".into()));
    }
    Ok(keys)
}
