//! Microsoft Entra ID (AAD) tokens for Blob storage (docs/signing.md#s6-8): the client-credentials grant of the
//! identity platform v2 endpoint, with a client secret or a federated (workload identity) token, or a
//! managed identity's token from the Azure Instance Metadata Service (IMDS).

use crate::error::{quote_body, Error};
use crate::transport::{form, Request, Transport};

/// How the identity proves itself.
#[derive(Clone)]
pub enum Secret {
    /// A client secret.
    ClientSecret(String),
    /// A federated token (workload identity), sent as a JWT client assertion.
    FederatedToken(String),
    /// A token already acquired: no request is made.
    AccessToken(String),
    /// Managed identity: IMDS ([`IMDS`], or this endpoint) gives the token.
    ManagedIdentity(Option<String>),
}

/// The Azure Instance Metadata Service, reachable from every Azure VM (and so every AKS node).
pub const IMDS: &str = "http://169.254.169.254";

/// An AAD identity.
#[derive(Clone)]
pub struct Identity {
    /// Tenant.
    pub tenant_id: String,
    /// Application (client) ID.
    pub client_id: String,
    /// Its proof.
    pub secret: Secret,
    /// `AZURE_CLOUD_NAME`.
    pub cloud_name: String,
    /// Authority override, e.g. `https://login.microsoftonline.com/`.
    pub authority: Option<String>,
}

impl Identity {
    /// The secret material, for redaction.
    pub fn secret_text(&self) -> &str {
        match &self.secret {
            Secret::ClientSecret(s) | Secret::FederatedToken(s) | Secret::AccessToken(s) => s,
            Secret::ManagedIdentity(_) => "",
        }
    }
}

/// The authority of a cloud (docs/signing.md#s6-8 table).
pub fn authority(cloud_name: &str) -> &'static str {
    match cloud_name.trim().to_lowercase().as_str() {
        "azureusgovernmentcloud" | "azureusgovernment" => "https://login.microsoftonline.us/",
        "azurechinacloud" => "https://login.chinacloudapi.cn/",
        _ => "https://login.microsoftonline.com/",
    }
}

/// The storage scope of a cloud (docs/hcp.md#s5-7 step 6.3): China has its own, every other cloud the public one.
pub fn storage_scope(cloud_name: &str) -> &'static str {
    if cloud_name.trim().eq_ignore_ascii_case("azurechinacloud") {
        "https://storage.azure.cn/.default"
    } else {
        "https://storage.azure.com/.default"
    }
}

/// The token request for an identity, or `None` when it already has a token.
pub fn token_request(identity: &Identity) -> Result<Option<Request>, Error> {
    let proof: Option<[(&str, &str); 2]> = match &identity.secret {
        Secret::ManagedIdentity(endpoint) => {
            return Ok(Some(imds_request(identity, endpoint.as_deref())))
        }
        Secret::AccessToken(_) => None,
        Secret::ClientSecret(secret) => Some([("client_secret", secret.as_str()), ("", "")]),
        Secret::FederatedToken(token) => Some([
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", token.as_str()),
        ]),
    };
    if identity.tenant_id.is_empty() || identity.client_id.is_empty() {
        return Err(Error::Invalid(
            "AZURE_TENANT_ID and AZURE_CLIENT_ID are required".into(),
        ));
    }
    let Some(proof) = proof else {
        return Ok(None);
    };
    if identity.secret_text().is_empty() {
        return Err(Error::Invalid(
            "the AAD client secret or federated token is empty".into(),
        ));
    }
    let mut pairs = vec![
        ("client_id", identity.client_id.as_str()),
        ("grant_type", "client_credentials"),
        ("scope", storage_scope(&identity.cloud_name)),
    ];
    pairs.extend(proof.into_iter().filter(|(k, _)| !k.is_empty()));
    let authority = identity
        .authority
        .clone()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| authority(&identity.cloud_name).to_string());
    let authority = if authority.ends_with('/') {
        authority
    } else {
        format!("{authority}/")
    };
    Ok(Some(Request {
        method: "POST",
        url: format!("{authority}{}/oauth2/v2.0/token", identity.tenant_id),
        headers: vec![(
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        )],
        body: form(&pairs),
    }))
}

/// IMDS's token request (api-version 2018-02-01): the storage resource is the scope without
/// `/.default`; `client_id` picks one of several identities of the node.
fn imds_request(identity: &Identity, endpoint: Option<&str>) -> Request {
    let endpoint = endpoint.filter(|e| !e.is_empty()).unwrap_or(IMDS);
    let resource = storage_scope(&identity.cloud_name).trim_end_matches("/.default");
    let mut query = vec![("api-version", "2018-02-01"), ("resource", resource)];
    if !identity.client_id.is_empty() {
        query.push(("client_id", identity.client_id.as_str()));
    }
    Request {
        method: "GET",
        url: format!(
            "{}/metadata/identity/oauth2/token?{}",
            endpoint.trim_end_matches('/'),
            crate::encode::sorted_query(&query)
        ),
        headers: vec![("Metadata".into(), "true".into())],
        body: Vec::new(),
    }
}

/// A bearer token for Blob storage. Errors never contain the secret or the token.
pub fn token(transport: &dyn Transport, identity: &Identity) -> Result<String, Error> {
    let result = token_request(identity).and_then(|request| {
        let Some(request) = request else {
            return Ok(identity.secret_text().to_string());
        };
        let response = transport
            .send(request)
            .map_err(|e| Error::Transport(format!("calling the token endpoint: {e}")))?;
        if response.status != 200 {
            return Err(Error::Remote(format!(
                "token endpoint returned {}: {}",
                response.status,
                quote_body(&response.body)
            )));
        }
        let json: serde_json::Value = serde_json::from_slice(&response.body)
            .map_err(|e| Error::Remote(format!("parsing token response: {e}")))?;
        match json.get("access_token").and_then(|t| t.as_str()) {
            Some(token) if !token.is_empty() => Ok(token.to_string()),
            _ => Err(Error::Remote(
                "parsing token response: no access_token".into(),
            )),
        }
    });
    result.map_err(|e| e.redact(&[identity.secret_text()]))
}
