//! Modules from OCI registries. A module ConfigMap may hold, instead of the module's files, one key
//! `<name>.oci` naming an artifact — `registry/repository:tag@sha256:<digest>` — that `velero-wasm
//! module push` wrote ([`layout`]). The plugin pulls it when it first sees that ConfigMap version and
//! writes the module's files into the ConfigMap's cache directory, so from there on it is loaded,
//! verified (sha256 pin, trusted keys, version floor) and remembered as any ConfigMap module is.
//!
//! - **Pinned**: the digest is required; a tag alone only with [`TAGS_ENV`]`=resolve`, resolved once
//!   per ConfigMap version and logged. The manifest's sha256 must be the pinned digest and each blob's
//!   sha256 its descriptor's digest, or the pull is refused.
//! - **Kept**: manifests and blobs are kept by digest in `<state>/oci/sha256/` ([`BlobStore`]); a
//!   digest already kept is not asked for again, so a restart or another ConfigMap naming the same
//!   artifact needs no registry. A pull that fails (registry down, refused) leaves the module to its
//!   last good version, as a broken ConfigMap does. Blobs no module directory names any more are
//!   removed after each list of the ConfigMaps ([`collect`]).
//! - **Bounded**: every answer is read with a cap ([`layout::MAX_MANIFEST`], the descriptor's size)
//!   and every exchange within [`EXCHANGE_TIMEOUT`]; all pulls of a start within [`PULL_TIMEOUT`].
//! - **Reached** like any host the plugin talks to: `HTTPS_PROXY`/`NO_PROXY`, the system's roots
//!   (`SSL_CERT_FILE` for a private CA); plain HTTP only for the registries [`PLAIN_HTTP_ENV`](variables::PLAIN_HTTP_ENV) lists.
//!   Credentials come from the docker-config Secrets [`PULL_SECRETS_ENV`] names.

pub(crate) mod collect;
pub mod credentials;
pub(crate) mod error;
pub mod layout;
pub mod reference;
pub(crate) mod registry_client;
mod variables;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;

pub(crate) use credentials::CredentialsError;
pub(crate) use error::OciError;
pub use reference::Reference;
pub(crate) use reference::ReferenceError;
pub(crate) use registry_client::{Credentials, Registry, RegistryError};
pub(crate) use variables::{PULL_SECRETS_ENV, TAGS_ENV};

/// How long one exchange with a registry may take.
pub(crate) const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long all the pulls of one plugin start may take together.
pub(crate) const PULL_TIMEOUT: Duration = Duration::from_secs(60);
/// The key suffix of a module ConfigMap that names an artifact: `<name>.oci`.
pub(crate) const EXTENSION: &str = "oci";

/// Manifests and blobs kept by digest under the state directory (`<state>/oci/sha256/<hex>`).
#[derive(Debug, Clone)]
pub(crate) struct BlobStore {
    root: PathBuf,
    dir: PathBuf,
}

impl BlobStore {
    /// The store of a state directory.
    pub(crate) fn new(state: &Path) -> BlobStore {
        BlobStore {
            root: state.to_path_buf(),
            dir: state.join("oci").join("sha256"),
        }
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        reference::is_digest(digest).then(|| self.dir.join(&digest["sha256:".len()..]))
    }

    /// A kept blob, if it is there, at most `limit` bytes and still has its digest (one that does
    /// not is removed: it is fetched again).
    pub(crate) fn get(&self, digest: &str, limit: u64) -> Option<Vec<u8>> {
        let path = self.path(digest)?;
        crate::state::private_dir(&self.root, &self.dir).ok()?;
        let bytes = crate::regular_file::read(&path, limit).ok()?;
        if format!("sha256:{}", super::identity::sha256_hex(&bytes)) == digest {
            Some(bytes)
        } else {
            tracing::info!(
                path = %path.display(),
                "a kept OCI blob no longer has its digest; removed, to be fetched again"
            );
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Keeps a blob whose digest has been checked.
    pub(crate) fn put(&self, digest: &str, bytes: &[u8]) -> Result<(), OciError> {
        let path = self
            .path(digest)
            .ok_or_else(|| OciError::NotDigest(digest.to_string()))?;
        crate::state::private_dir(&self.root, &self.dir)?;
        crate::state::write_atomically(&path, bytes).map_err(|source| OciError::Keep {
            digest: digest.to_string(),
            dir: self.dir.display().to_string(),
            source,
        })
    }
}

/// How pulls are made: which registries are plain HTTP, whether tags may stand alone, and the
/// docker configs credentials come from.
#[derive(Debug, Clone, Default)]
pub(crate) struct PullSettings {
    /// Registries reached over plain HTTP.
    pub(crate) plain_http: Vec<String>,
    /// Whether a reference may name a tag without a digest.
    pub(crate) allow_tags: bool,
    /// Docker configs (`.dockerconfigjson` contents), searched in order.
    pub(crate) docker_configs: Vec<Vec<u8>>,
    /// The registries references may name ([`REGISTRIES_ENV`](variables::REGISTRIES_ENV)); `None`: any.
    pub(crate) allowed: Option<Vec<String>>,
}

impl PullSettings {
    /// The settings `config` holds (without credentials: those are Secrets).
    pub(crate) fn from_config(config: &crate::config::Config) -> PullSettings {
        let settings = config.oci();
        PullSettings {
            plain_http: settings
                .plain_http
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            allow_tags: settings.tags.is_some_and(|v| v.trim() == "resolve"),
            docker_configs: Vec::new(),
            allowed: settings
                .registries
                .filter(|v| !v.trim().is_empty())
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                }),
        }
    }

    /// Whether a reference may name `registry` ([`REGISTRIES_ENV`](variables::REGISTRIES_ENV)).
    pub(crate) fn is_allowed(&self, registry: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|r| r == registry))
    }

    /// Whether `registry` is reached over plain HTTP.
    pub(crate) fn is_plain_http(&self, registry: &str) -> bool {
        self.plain_http.iter().any(|r| r == registry)
    }

    /// The credentials for `registry`: the first docker config that has some.
    pub(crate) fn credentials(
        &self,
        registry: &str,
    ) -> Result<Option<Credentials>, CredentialsError> {
        for config in &self.docker_configs {
            if let Some(found) = credentials::for_registry(config, registry)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

/// A pulled module: its files as a module directory holds them, and the reference pinned.
#[derive(Debug)]
pub(crate) struct Pulled {
    /// `<name>.wasm`, `<name>.toml`, `<name>.sig` (if signed) and `<name>.oci` (the pinned reference).
    pub(crate) files: Vec<(String, Vec<u8>)>,
    /// The reference with its digest.
    pub(crate) pinned: Reference,
    /// How many blobs (manifest included) came from the registry rather than the store.
    pub(crate) fetched: usize,
}

/// Pulls module `module` from `reference` (kept blobs first), checking every digest; the files it
/// gives are checked further (sha256 pin, signature) when the module is loaded.
pub(crate) async fn pull(
    module: &str,
    reference: &str,
    store: &BlobStore,
    settings: &PullSettings,
) -> Result<Pulled, OciError> {
    let reference = Reference::parse(reference)?;
    if reference.digest.is_none() && !settings.allow_tags {
        return Err(OciError::TagWithoutDigest(reference));
    }
    if !settings.is_allowed(&reference.registry) {
        return Err(OciError::NotAllowed {
            registry: reference.registry.clone(),
            allowed: settings.allowed.clone().unwrap_or_default().join(","),
        });
    }
    let registry = std::sync::OnceLock::new();
    let connect = || connect(&registry, &reference, settings);
    let mut fetched = 0;
    let (manifest, digest) = match kept_manifest(&reference, store) {
        Some(kept) => kept,
        None => {
            fetched += 1;
            fetch_manifest(connect()?, &reference, store).await?
        }
    };
    let pinned = reference.pinned(&digest);
    let module_layout = layout::read(&manifest).map_err(|source| OciError::Layout {
        pinned: pinned.clone(),
        source,
    })?;
    if let Some(name) = &module_layout.name {
        if name != module {
            return Err(OciError::OtherModule {
                pinned,
                name: name.clone(),
                module: module.to_string(),
            });
        }
    }
    let component = &module_layout.component;
    let wasm = match store.get(&component.digest, component.size) {
        Some(bytes) if bytes.len() as u64 == component.size => bytes,
        _ => {
            fetched += 1;
            fetch_component(connect()?, &pinned, component, store).await?
        }
    };
    Ok(Pulled {
        files: module_files(module, &pinned, wasm, module_layout),
        pinned,
        fetched,
    })
}

/// The manifest a pinned reference names, if the store keeps it, with its digest.
fn kept_manifest(reference: &Reference, store: &BlobStore) -> Option<(Vec<u8>, String)> {
    let digest = reference.digest.as_deref()?;
    let bytes = store.get(digest, layout::MAX_MANIFEST)?;
    Some((bytes, digest.to_string()))
}

/// The manifest from the registry, checked against the pinned digest (a tag alone is resolved, and
/// said so), kept in the store; with its digest.
async fn fetch_manifest(
    registry: &Registry,
    reference: &Reference,
    store: &BlobStore,
) -> Result<(Vec<u8>, String), OciError> {
    let bytes = registry
        .manifest(reference.manifest_ref(), layout::MAX_MANIFEST)
        .await?;
    let actual = format!("sha256:{}", super::identity::sha256_hex(&bytes));
    match &reference.digest {
        Some(pinned) if *pinned != actual => {
            return Err(OciError::ManifestDigest {
                reference: reference.clone(),
                actual,
                pinned: pinned.clone(),
            })
        }
        Some(_) => {}
        None => tracing::warn!(
            reference = %reference,
            digest = actual,
            "resolved the tag to a digest ({TAGS_ENV}=resolve); pin it in the ConfigMap to stop following the tag"
        ),
    }
    store.put(&actual, &bytes)?;
    Ok((bytes.to_vec(), actual))
}

/// The component blob from the registry, checked against its descriptor, kept in the store.
async fn fetch_component(
    registry: &Registry,
    pinned: &Reference,
    component: &layout::Descriptor,
    store: &BlobStore,
) -> Result<Vec<u8>, OciError> {
    let bytes = registry
        .blob(&component.digest, component.size)
        .await
        .map_err(|source| OciError::Component {
            pinned: pinned.clone(),
            source,
        })?;
    let actual = format!("sha256:{}", super::identity::sha256_hex(&bytes));
    if actual != component.digest || bytes.len() as u64 != component.size {
        return Err(OciError::ComponentDigest {
            pinned: pinned.clone(),
            digest: component.digest.clone(),
            got: bytes.len(),
            actual,
            size: component.size,
        });
    }
    store.put(&component.digest, &bytes)?;
    Ok(bytes.to_vec())
}

/// The files of a module directory for a pulled module: component, manifest, pinned reference and
/// signature (if signed).
fn module_files(
    module: &str,
    pinned: &Reference,
    wasm: Vec<u8>,
    module_layout: layout::ModuleLayout,
) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        (format!("{module}.wasm"), wasm),
        (
            format!("{module}.toml"),
            module_layout.manifest_text.into_bytes(),
        ),
        (
            format!("{module}.{EXTENSION}"),
            format!("{pinned}\n").into_bytes(),
        ),
    ];
    if let Some(signature) = module_layout.signature_text {
        files.push((format!("{module}.sig"), signature.into_bytes()));
    }
    files
}

/// The registry of `reference`, made when first needed (a pull served from the store makes none).
fn connect<'a>(
    cell: &'a std::sync::OnceLock<Registry>,
    reference: &Reference,
    settings: &PullSettings,
) -> Result<&'a Registry, OciError> {
    if let Some(registry) = cell.get() {
        return Ok(registry);
    }
    let credentials = settings
        .credentials(&reference.registry)
        .map_err(|source| OciError::Credentials {
            registry: reference.registry.clone(),
            source,
        })?;
    Ok(cell.get_or_init(|| {
        Registry::new(
            reference,
            settings.is_plain_http(&reference.registry),
            credentials,
            EXCHANGE_TIMEOUT,
            false,
        )
        .with_plain_hosts(&settings.plain_http)
    }))
}

/// What a push did.
#[derive(Debug)]
pub(crate) struct Pushed {
    /// The reference pushed to, pinned to the manifest's digest: what a ConfigMap names.
    pub(crate) pinned: Reference,
    /// The blobs uploaded, by digest (a blob the registry had already is not uploaded again).
    pub(crate) uploaded: Vec<String>,
}

/// Pushes a laid-out module to `reference` (which names a tag); `progress` is told each step.
pub(crate) async fn push(
    registry: &Registry,
    reference: &Reference,
    artifact: &layout::Artifact,
    component: Bytes,
    progress: &dyn Fn(&str),
) -> Result<Pushed, RegistryError> {
    let tag = reference.tag.as_deref().unwrap_or("latest");
    let mut uploaded = Vec::new();
    let blobs = [
        (
            "config",
            &artifact.parsed.config,
            Bytes::from(artifact.config.clone()),
        ),
        ("component", &artifact.parsed.layers[0], component),
    ];
    for (what, descriptor, bytes) in blobs {
        if registry.has_blob(&descriptor.digest).await? {
            progress(&format!(
                "{what} {} ({} bytes): already there",
                descriptor.digest, descriptor.size
            ));
            continue;
        }
        progress(&format!(
            "uploading the {what} {} ({} bytes)",
            descriptor.digest, descriptor.size
        ));
        registry.upload_blob(&descriptor.digest, bytes).await?;
        uploaded.push(descriptor.digest.clone());
    }
    let digest = format!("sha256:{}", super::identity::sha256_hex(&artifact.manifest));
    progress(&format!("writing the manifest {digest} as tag {tag}"));
    let answered = registry
        .put_manifest(
            tag,
            layout::OCI_MANIFEST,
            Bytes::from(artifact.manifest.clone()),
        )
        .await?;
    if let Some(answered) = answered {
        if answered != digest {
            return Err(RegistryError::Refused(format!(
                "the registry stored the manifest as {answered}, not {digest}: it changed it; refused"
            )));
        }
    }
    Ok(Pushed {
        pinned: reference.pinned(&digest),
        uploaded,
    })
}
