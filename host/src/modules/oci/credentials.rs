//! Registry credentials from a docker config, as image pulls take them: the `.dockerconfigjson` of a
//! `kubernetes.io/dockerconfigjson` Secret (`{"auths": {"<registry>": {"auth": base64(user:password)}}}`,
//! or `username`/`password`), the older `.dockercfg` (the same map without `auths`), or the
//! `~/.docker/config.json` that `docker login` writes. Credential helpers (`credsStore`) are not
//! run: a host has none.

use base64::Engine as _;
use serde_json::Value;

use super::registry_client::Credentials;

/// The credentials a docker config holds for `registry` (`host[:port]`), if any. Keys are matched
/// without scheme or path (`https://r.io/v1/` is `r.io`); Docker Hub's names stand for each other.
pub fn for_registry(
    config: &[u8],
    registry: &str,
) -> Result<Option<Credentials>, CredentialsError> {
    let config: Value =
        serde_json::from_slice(config).map_err(|e| CredentialsError::Json(e.to_string()))?;
    let auths = config
        .get("auths")
        .and_then(Value::as_object)
        .or_else(|| config.as_object())
        .ok_or(CredentialsError::NoAuths)?;
    let wanted = normalise(registry);
    for (key, entry) in auths {
        if normalise(key) != wanted {
            continue;
        }
        let text = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or("");
        if !text("auth").is_empty() {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(text("auth").trim())
                .map_err(|e| CredentialsError::Base64 {
                    key: key.clone(),
                    why: e.to_string(),
                })?;
            let decoded =
                String::from_utf8(decoded).map_err(|_| CredentialsError::Utf8(key.clone()))?;
            let (username, password) = decoded
                .split_once(':')
                .ok_or_else(|| CredentialsError::NotUserPassword(key.clone()))?;
            return Ok(Some(Credentials {
                username: username.to_string(),
                password: password.to_string(),
            }));
        }
        if !text("username").is_empty() {
            return Ok(Some(Credentials {
                username: text("username").to_string(),
                password: text("password").to_string(),
            }));
        }
        return Err(CredentialsError::Unsupported(key.clone()));
    }
    Ok(None)
}

/// A registry key without scheme, path or Docker Hub's aliases.
fn normalise(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_string()
        }
        _ => host,
    }
}

/// A docker config that cannot give credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// Not JSON.
    #[error("the docker config is not JSON: {0}")]
    Json(String),
    /// No `auths` map.
    #[error("the docker config holds no `auths` object")]
    NoAuths,
    /// An `auth` that is not base64.
    #[error("the `auth` of {key} is not base64: {why}")]
    Base64 {
        /// The entry's key.
        key: String,
        /// The decoder's reason.
        why: String,
    },
    /// An `auth` that is not UTF-8.
    #[error("the `auth` of {0} is not UTF-8")]
    Utf8(String),
    /// An `auth` without `:`.
    #[error("the `auth` of {0} is not user:password")]
    NotUserPassword(String),
    /// An entry with neither `auth` nor `username`.
    #[error("the docker config's entry for {0} has neither `auth` nor `username` (identity tokens and credential helpers are not supported)")]
    Unsupported(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_by_registry_in_either_form() {
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret");
        let config = serde_json::json!({"auths": {
            "https://index.docker.io/v1/": {"auth": auth},
            "127.0.0.1:5000": {"username": "u", "password": "p"},
        }});
        let config = config.to_string();
        let hub = for_registry(config.as_bytes(), "docker.io")
            .unwrap()
            .unwrap();
        assert_eq!(
            (hub.username.as_str(), hub.password.as_str()),
            ("robot", "s3cret")
        );
        let local = for_registry(config.as_bytes(), "127.0.0.1:5000")
            .unwrap()
            .unwrap();
        assert_eq!(
            (local.username.as_str(), local.password.as_str()),
            ("u", "p")
        );
        assert_eq!(for_registry(config.as_bytes(), "ghcr.io").unwrap(), None);
        // The older .dockercfg: the map itself.
        let old = serde_json::json!({"r.io": {"auth": auth}}).to_string();
        assert!(for_registry(old.as_bytes(), "r.io").unwrap().is_some());
        assert!(for_registry(b"[]", "r.io").is_err());
        assert!(!format!("{hub:?}").contains("s3cret"));
    }
}
