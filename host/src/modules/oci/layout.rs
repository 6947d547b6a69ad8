//! A module as an OCI artifact, in the CNCF wasm artifact layout so that `wkg`, `oras` and `crane`
//! read it: an image manifest whose config has media type [`WASM_CONFIG`] and whose one layer is the
//! component ([`WASM_LAYER`]). What a component alone does not say — the module's name, its
//! manifest (settings, grant, limits) and its signature — rides in the image manifest's annotations
//! ([`NAME`], [`MANIFEST`], [`SIGNATURE`]), so that one bounded request brings all of it and the
//! manifest's digest, which the reference pins, covers all of it. docs/modules.md describes the
//! layout.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::reference::is_digest;

/// The OCI image manifest media type.
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The wasm artifact's config media type.
pub(crate) const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The wasm artifact's component layer media type.
pub const WASM_LAYER: &str = "application/wasm";
/// Annotation: the module's name.
pub(crate) const NAME: &str = "io.velero-wasm.module.name";
/// Annotation: the module's manifest (TOML), as written.
pub(crate) const MANIFEST: &str = "io.velero-wasm.module.manifest";
/// Annotation: the module's signature (`<name>.sig`), when signed.
pub(crate) const SIGNATURE: &str = "io.velero-wasm.module.signature";
/// The standard title annotation (a layer's file name).
const TITLE: &str = "org.opencontainers.image.title";
/// The standard version annotation.
const VERSION: &str = "org.opencontainers.image.version";

/// The most an image manifest may take (the distribution registry's own limit).
pub(crate) const MAX_MANIFEST: u64 = 4 << 20;
/// The component cap: the largest component pulled, and the most a module directory's gzipped
/// component (`<name>.wasm.gz`) may expand to.
pub const MAX_COMPONENT: u64 = 256 << 20;

/// An OCI descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    pub media_type: String,
    /// `sha256:…`.
    pub digest: String,
    /// Bytes.
    pub size: u64,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub(crate) fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_string(),
            digest: format!("sha256:{}", crate::modules::identity::sha256_hex(bytes)),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }
}

/// An OCI image manifest (the fields used here).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ImageManifest {
    /// Always 2.
    pub(crate) schema_version: u32,
    /// [`OCI_MANIFEST`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) media_type: Option<String>,
    /// The config blob.
    pub(crate) config: Descriptor,
    /// The layers.
    pub(crate) layers: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) annotations: BTreeMap<String, String>,
}

/// A module laid out for pushing: the config blob, the component and the image manifest.
pub(crate) struct Artifact {
    /// The config blob (JSON).
    pub(crate) config: Vec<u8>,
    /// The image manifest (JSON); its sha256 is the digest a reference pins.
    pub(crate) manifest: Vec<u8>,
    /// The parsed manifest.
    pub(crate) parsed: ImageManifest,
}

/// Lays out a module: the same module always gives the same bytes (no timestamps), so pushing it
/// again gives the same digest.
pub(crate) fn artifact(
    name: &str,
    component: &[u8],
    manifest_text: &str,
    signature_text: Option<&str>,
    version: Option<&str>,
) -> Artifact {
    let mut layer = Descriptor::of(WASM_LAYER, component);
    layer
        .annotations
        .insert(TITLE.to_string(), format!("{name}.wasm"));
    // The wasm artifact config: architecture and os are required, layerDigests lists the layers.
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.digest],
    });
    let config = serde_json::to_vec(&config).unwrap_or_default();
    let mut annotations = BTreeMap::new();
    annotations.insert(NAME.to_string(), name.to_string());
    annotations.insert(MANIFEST.to_string(), manifest_text.to_string());
    if let Some(signature) = signature_text {
        annotations.insert(SIGNATURE.to_string(), signature.to_string());
    }
    if let Some(version) = version {
        annotations.insert(VERSION.to_string(), version.to_string());
    }
    let parsed = ImageManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.to_string()),
        config: Descriptor::of(WASM_CONFIG, &config),
        layers: vec![layer],
        annotations,
    };
    let manifest = serde_json::to_vec(&parsed).unwrap_or_default();
    Artifact {
        config,
        manifest,
        parsed,
    }
}

/// What an image manifest says of a module: its component's descriptor, and its manifest and
/// signature texts.
#[derive(Debug)]
pub struct ModuleLayout {
    /// The component layer.
    pub component: Descriptor,
    /// The name it was pushed as.
    pub(crate) name: Option<String>,
    /// The module manifest (TOML).
    pub(crate) manifest_text: String,
    /// The signature, if signed.
    pub(crate) signature_text: Option<String>,
}

/// Reads an image manifest as a module, or says why it is not one.
pub fn read(bytes: &[u8]) -> Result<ModuleLayout, LayoutError> {
    let manifest: ImageManifest = serde_json::from_slice(bytes)?;
    if manifest.schema_version != 2 {
        return Err(LayoutError::SchemaVersion(manifest.schema_version));
    }
    if let Some(media_type) = &manifest.media_type {
        if media_type != OCI_MANIFEST {
            return Err(LayoutError::MediaType(media_type.clone()));
        }
    }
    if manifest.config.media_type != WASM_CONFIG {
        return Err(LayoutError::Config(manifest.config.media_type));
    }
    let mut wasm = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER);
    let component = match (wasm.next(), wasm.next()) {
        (Some(layer), None) => layer.clone(),
        (None, _) => return Err(LayoutError::NoComponent),
        (Some(_), Some(_)) => return Err(LayoutError::ManyComponents),
    };
    if !is_digest(&component.digest) {
        return Err(LayoutError::Digest(component.digest));
    }
    if component.size > MAX_COMPONENT {
        return Err(LayoutError::TooLarge(component.size));
    }
    let manifest_text = manifest
        .annotations
        .get(MANIFEST)
        .cloned()
        .ok_or(LayoutError::NoManifest)?;
    Ok(ModuleLayout {
        component,
        name: manifest.annotations.get(NAME).cloned(),
        manifest_text,
        signature_text: manifest.annotations.get(SIGNATURE).cloned(),
    })
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
    #[error("the manifest is a {0}, not an OCI image manifest ({oci}): an index or a container image is not a module", oci = OCI_MANIFEST)]
    MediaType(String),
    /// Another artifact's config.
    #[error("its config is a {0}, not a wasm artifact's ({wasm}): push modules with `velero-wasm module push`", wasm = WASM_CONFIG)]
    Config(String),
    /// No component layer.
    #[error("it has no {layer} layer", layer = WASM_LAYER)]
    NoComponent,
    /// More than one component layer.
    #[error("it has more than one {layer} layer", layer = WASM_LAYER)]
    ManyComponents,
    /// The component's digest is not a sha256 one.
    #[error("its component's digest {0:?} is not sha256: and 64 hex digits")]
    Digest(String),
    /// The component is larger than a module may be.
    #[error("its component is {0} bytes, over the {max} bytes a module may have", max = MAX_COMPONENT)]
    TooLarge(u64),
    /// No module manifest annotation.
    #[error("it carries no module manifest (annotation {annotation}): push modules with `velero-wasm module push`", annotation = MANIFEST)]
    NoManifest,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_laid_out_module_reads_back_and_lays_out_the_same_again() {
        let one = artifact(
            "m",
            b"\0asm",
            "sha256 = \"x\"\n",
            Some("sig"),
            Some("1.0.0"),
        );
        let two = artifact(
            "m",
            b"\0asm",
            "sha256 = \"x\"\n",
            Some("sig"),
            Some("1.0.0"),
        );
        assert_eq!(one.manifest, two.manifest);
        let read = read(&one.manifest).unwrap();
        assert_eq!(read.name.as_deref(), Some("m"));
        assert_eq!(read.manifest_text, "sha256 = \"x\"\n");
        assert_eq!(read.signature_text.as_deref(), Some("sig"));
        assert_eq!(
            read.component,
            Descriptor::of(WASM_LAYER, b"\0asm").tap_title("m")
        );
        let json: serde_json::Value = serde_json::from_slice(&one.manifest).unwrap();
        assert_eq!(json["config"]["mediaType"], WASM_CONFIG);
        assert_eq!(json["layers"][0]["mediaType"], WASM_LAYER);
    }

    #[test]
    fn other_artifacts_are_refused_with_the_reason() {
        let mut image = artifact("m", b"\0asm", "", None, None).parsed;
        image.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        let error = read(&serde_json::to_vec(&image).unwrap()).unwrap_err();
        assert!(matches!(error, LayoutError::Config(_)), "{error}");
        assert_eq!(
            error.to_string(),
            "its config is a application/vnd.oci.image.config.v1+json, not a wasm artifact's (application/vnd.wasm.config.v0+json): push modules with `velero-wasm module push`"
        );
        let mut bare = artifact("m", b"\0asm", "", None, None).parsed;
        bare.annotations.clear();
        let error = read(&serde_json::to_vec(&bare).unwrap()).unwrap_err();
        assert!(error.to_string().contains("no module manifest"), "{error}");
        assert!(read(b"{\"manifests\": []}").is_err());
    }

    impl Descriptor {
        fn tap_title(mut self, name: &str) -> Descriptor {
            self.annotations
                .insert(TITLE.to_string(), format!("{name}.wasm"));
            self
        }
    }
}
