//! Why a pull, or keeping a blob, failed: over the errors of each part (a reference, an image
//! manifest, a docker config, the registry, each in its own file), so that a caller can tell a
//! refused artifact from an unreachable registry; each says what an operator needs to fix it.

use super::credentials::CredentialsError;
use super::layout::LayoutError;
use super::reference::{Reference, ReferenceError};
use super::registry_client::RegistryError;
use super::variables::{REGISTRIES_ENV, TAGS_ENV};

/// Why a pull (or keeping a blob) failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OciError {
    /// The ConfigMap's reference cannot be read.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// A tag without a digest, where tags are not resolved.
    #[error("{0} names a tag without a digest: pin it (`velero-wasm module push` prints {0}@sha256:…), or set {TAGS_ENV}=resolve to resolve tags")]
    TagWithoutDigest(Reference),
    /// A registry that [`REGISTRIES_ENV`] does not list.
    #[error("registry {registry} is not one {env} lists ({allowed}): refused, nothing was sent to it (add it to {env} to pull from it)", env = REGISTRIES_ENV)]
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
