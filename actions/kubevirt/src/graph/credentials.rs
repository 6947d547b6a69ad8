//! The Secrets a VM's access credentials read (docs/kubevirt.md#s4-8): SSH public keys and user passwords.

use serde_json::Value;
use velero_wasm_sdk::ResourceId;

use crate::fields::{set, text};
use crate::resources::{id, SECRETS};

/// One Secret per credential whose source is a Secret, in order.
pub fn credential_items(namespace: &str, credentials: &[Value]) -> Vec<ResourceId> {
    credentials
        .iter()
        .filter_map(|c| {
            if set(c, "/sshPublicKey").is_some() && set(c, "/sshPublicKey/source/secret").is_some()
            {
                Some(text(c, "/sshPublicKey/source/secret/secretName"))
            } else if set(c, "/userPassword").is_some()
                && set(c, "/userPassword/source/secret").is_some()
            {
                Some(text(c, "/userPassword/source/secret/secretName"))
            } else {
                None
            }
        })
        .map(|name| id(SECRETS, namespace, name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(credentials: Value) -> Vec<String> {
        let list = credentials.as_array().cloned().unwrap_or_default();
        credential_items("ns", &list)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn ssh_public_key_secret() {
        let c = json!([{"sshPublicKey": {"source": {"secret": {"secretName": "k"}},
                                         "propagationMethod": {"noCloud": {}}}}]);
        assert_eq!(items(c), ["secrets ns/k"]);
    }

    #[test]
    fn user_password_secret() {
        let c = json!([{"userPassword": {"source": {"secret": {"secretName": "p"}},
                                         "propagationMethod": {"qemuGuestAgent": {}}}}]);
        assert_eq!(items(c), ["secrets ns/p"]);
    }

    #[test]
    fn credentials_keep_their_order_and_skip_sources_that_are_not_secrets() {
        let c = json!([
            {"sshPublicKey": {"source": {"secret": {"secretName": "k"}}}},
            {"sshPublicKey": {"source": {}}},
            {"userPassword": {"source": {"secret": {"secretName": "p"}}}}
        ]);
        assert_eq!(items(c), ["secrets ns/k", "secrets ns/p"]);
    }
}
