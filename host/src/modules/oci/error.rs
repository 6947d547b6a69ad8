//! Why a reference, an image manifest, a docker config, the blob store or a pull failed: one type per
//! part, so that a caller can tell a refused artifact from an unreachable registry; each says what an
//! operator needs to fix it.

use super::reference::Reference;
use super::registry::RegistryError;
use super::TAGS_ENV;

/// A module reference that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an OCI reference (registry/repository:tag@sha256:…): {why}")]
pub struct ReferenceError {
    /// The reference as written (trimmed).
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// An image manifest that is not a module's.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// Not an image manifest's JSON.
    #[error("the image manifest cannot be read: {0}")]
    Json(#[from] serde_json::Error),
    /// Another schema version.
    #[error("the image manifest has schemaVersion {0}, not 2")]
    SchemaVersion(u32),
    /// An index or a container image.
    #[error("the manifest is a {0}, not an OCI image manifest ({oci}): an index or a container image is not a module", oci = super::layout::OCI_MANIFEST)]
    MediaType(String),
    /// Another artifact's config.
    #[error("its config is a {0}, not a wasm artifact's ({wasm}): push modules with `velero-wasm module push`", wasm = super::layout::WASM_CONFIG)]
    Config(String),
    /// No component layer.
    #[error("it has no {layer} layer", layer = super::layout::WASM_LAYER)]
    NoComponent,
    /// More than one component layer.
    #[error("it has more than one {layer} layer", layer = super::layout::WASM_LAYER)]
    ManyComponents,
    /// The component's digest is not a sha256 one.
    #[error("its component's digest {0:?} is not sha256: and 64 hex digits")]
    Digest(String),
    /// The component is larger than a module may be.
    #[error("its component is {0} bytes, over the {max} bytes a module may have", max = super::layout::MAX_COMPONENT)]
    TooLarge(u64),
    /// No module manifest annotation.
    #[error("it carries no module manifest (annotation {annotation}): push modules with `velero-wasm module push`", annotation = super::layout::MANIFEST)]
    NoManifest,
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

/// Why a pull (or keeping a blob) failed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The ConfigMap's reference cannot be read.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// A tag without a digest, where tags are not resolved.
    #[error("{0} names a tag without a digest: pin it (`velero-wasm module push` prints {0}@sha256:…), or set {TAGS_ENV}=resolve to resolve tags")]
    TagWithoutDigest(Reference),
    /// A registry that [`REGISTRIES_ENV`](super::REGISTRIES_ENV) does not list.
    #[error("registry {registry} is not one {env} lists ({allowed}): refused, nothing was sent to it (add it to {env} to pull from it)", env = super::REGISTRIES_ENV)]
    NotAllowed {
        /// The registry the reference names.
        registry: String,
        /// The registries listed, comma-separated.
        allowed: String,
    },
    /// The pull Secrets' credentials for the registry cannot be read.
    #[error("the credentials for {registry}: {source}")]
    Credentials {
        /// `host[:port]`.
        registry: String,
        /// Why.
        source: CredentialsError,
    },
    /// The registry did not give the manifest.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The manifest the registry gave is not the pinned one.
    #[error("digest mismatch: the registry's manifest for {reference} has digest {actual}, not the pinned {pinned}; refused")]
    ManifestDigest {
        /// The reference pulled.
        reference: Reference,
        /// The digest of what came.
        actual: String,
        /// The digest pinned.
        pinned: String,
    },
    /// The manifest is not a module's.
    #[error("{pinned}: {source}")]
    Layout {
        /// The reference, pinned.
        pinned: Reference,
        /// Why.
        source: LayoutError,
    },
    /// The artifact holds another module than the ConfigMap's label names.
    #[error("{pinned} holds module {name}, not {module} (the ConfigMap's label)")]
    OtherModule {
        /// The reference, pinned.
        pinned: Reference,
        /// The module it holds.
        name: String,
        /// The module the ConfigMap names.
        module: String,
    },
    /// The registry did not give the component.
    #[error("{pinned}: its component: {source}")]
    Component {
        /// The reference, pinned.
        pinned: Reference,
        /// Why.
        source: RegistryError,
    },
    /// The component the registry gave is not the one the manifest describes.
    #[error("{pinned}: the registry's component blob {digest} is {got} bytes with digest {actual}, not the {size} bytes the manifest describes: tampered or corrupt; refused")]
    ComponentDigest {
        /// The reference, pinned.
        pinned: Reference,
        /// The digest the manifest names.
        digest: String,
        /// The bytes that came.
        got: usize,
        /// Their digest.
        actual: String,
        /// The size the manifest names.
        size: u64,
    },
    /// Not a sha256 digest, so not a name in the store.
    #[error("{0:?} is not a sha256 digest")]
    NotDigest(String),
    /// The store's directory cannot be made or kept private.
    #[error(transparent)]
    Store(#[from] crate::state::PrivateDirError),
    /// The store's directory cannot be listed.
    #[error("{}: {source}", dir.display())]
    List {
        /// The store's directory.
        dir: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A blob cannot be written to the store.
    #[error("cannot keep {digest} in {dir}: {source}")]
    Keep {
        /// The blob's digest.
        digest: String,
        /// The store's directory.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
}
