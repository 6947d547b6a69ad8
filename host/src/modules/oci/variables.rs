//! The variables that configure pulls from OCI registries: read from the configuration by [`super`],
//! and named in errors so that the operator knows which one to set.

/// Lists the registries (`host:port`, comma-separated) reached over plain HTTP instead of HTTPS.
pub(crate) use crate::config::VELERO_WASM_OCI_PLAIN_HTTP as PLAIN_HTTP_ENV;
/// Names the `kubernetes.io/dockerconfigjson` Secrets (comma-separated, in Velero's namespace) whose
/// credentials registries are pulled from with.
pub(crate) use crate::config::VELERO_WASM_OCI_PULL_SECRETS as PULL_SECRETS_ENV;
/// Lists the registries (`host[:port]`, comma-separated) module ConfigMaps may name: unset, any; set,
/// a reference to another is refused before anything is sent (whoever writes ConfigMaps in Velero's
/// namespace otherwise chooses where the plugin connects).
pub(crate) use crate::config::VELERO_WASM_OCI_REGISTRIES as REGISTRIES_ENV;
/// `resolve` lets a reference name a tag without a digest (resolved once per ConfigMap version).
pub(crate) use crate::config::VELERO_WASM_OCI_TAGS as TAGS_ENV;
