//! The variables that configure pulls from OCI registries: read from the configuration by [`super`],
//! and named in errors so that the operator knows which one to set.

/// Names the `kubernetes.io/dockerconfigjson` Secrets (comma-separated, in Velero's namespace) whose
/// credentials registries are pulled from with.
pub(crate) const PULL_SECRETS_ENV: &str = "VELERO_WASM_OCI_PULL_SECRETS";
/// Lists the registries (`host:port`, comma-separated) reached over plain HTTP instead of HTTPS.
pub(crate) const PLAIN_HTTP_ENV: &str = "VELERO_WASM_OCI_PLAIN_HTTP";
/// Lists the registries (`host[:port]`, comma-separated) module ConfigMaps may name: unset, any; set,
/// a reference to another is refused before anything is sent (whoever writes ConfigMaps in Velero's
/// namespace otherwise chooses where the plugin connects).
pub(crate) const REGISTRIES_ENV: &str = "VELERO_WASM_OCI_REGISTRIES";
/// `resolve` lets a reference name a tag without a digest (resolved once per ConfigMap version).
pub(crate) const TAGS_ENV: &str = "VELERO_WASM_OCI_TAGS";
