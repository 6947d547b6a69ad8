//! The identity of an item (kind, resource, namespace, name, labels), read from its JSON without
//! decoding the rest.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// Who an item is: enough to name it in logs and errors and to match it against a selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ItemRef {
    /// `apiVersion` (`kubevirt.io/v1`, `v1`).
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace` ("" when cluster-scoped).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Header {
    #[serde(default, rename = "apiVersion")]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// Why an item has no identity: it is not a JSON object (serde's reason).
#[derive(Debug, thiserror::Error)]
#[error("item is not a JSON object: {0}")]
pub struct NotAnObject(#[source] pub serde_json::Error);

impl ItemRef {
    /// Reads the identity of a JSON object. Fails on invalid JSON or a non-object; missing fields are
    /// empty.
    pub fn parse(json: &str) -> Result<ItemRef, NotAnObject> {
        let header: Header = serde_json::from_str(json).map_err(NotAnObject)?;
        let metadata = header.metadata.unwrap_or(Metadata {
            namespace: None,
            name: None,
            labels: None,
        });
        Ok(ItemRef {
            api_version: header.api_version.unwrap_or_default(),
            kind: header.kind.unwrap_or_default(),
            namespace: metadata.namespace.unwrap_or_default(),
            name: metadata.name.unwrap_or_default(),
            labels: metadata.labels.unwrap_or_default(),
        })
    }

    /// API group of `apiVersion` ("" for core).
    pub fn group(&self) -> &str {
        match self.api_version.rsplit_once('/') {
            Some((group, _)) => group,
            None => "",
        }
    }

    /// Plural lower-case resource, derived from the kind.
    pub(crate) fn resource(&self) -> String {
        plural_of(&self.kind)
    }

    /// Velero's `resource.group` form.
    pub fn group_resource(&self) -> String {
        let group = self.group();
        if group.is_empty() {
            self.resource()
        } else {
            format!("{}.{}", self.resource(), group)
        }
    }
}

impl fmt::Display for ItemRef {
    /// `resource.group namespace/name`, or `resource.group name` when cluster-scoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.group_resource(), self.name)
        } else {
            write!(
                f,
                "{} {}/{}",
                self.group_resource(),
                self.namespace,
                self.name
            )
        }
    }
}

/// The plural resource name Kubernetes gives a kind (`NetworkPolicy` → `networkpolicies`).
pub use velero_wasm_grant::resources::plural_of;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_follow_the_api_machinery() {
        for (kind, plural) in [
            ("Pod", "pods"),
            ("PersistentVolumeClaim", "persistentvolumeclaims"),
            ("NetworkPolicy", "networkpolicies"),
            ("Ingress", "ingresses"),
            ("Endpoints", "endpoints"),
            ("Gateway", "gateways"),
            ("VirtualMachineInstance", "virtualmachineinstances"),
            ("StorageClass", "storageclasses"),
            ("HCPEtcdBackup", "hcpetcdbackups"),
        ] {
            assert_eq!(plural_of(kind), plural, "{kind}");
        }
    }

    #[test]
    fn identity_is_read_without_the_rest() {
        let item = ItemRef::parse(
            r#"{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns","labels":{"a":"b"}},"spec":{"x":[1,2,3]}}"#,
        )
        .unwrap();
        assert_eq!(item.group_resource(), "virtualmachines.kubevirt.io");
        assert_eq!(item.to_string(), "virtualmachines.kubevirt.io ns/vm");
        assert_eq!(item.labels.get("a").map(String::as_str), Some("b"));
        assert!(ItemRef::parse("[1]").is_err());
        assert!(ItemRef::parse("{").is_err());
    }
}
