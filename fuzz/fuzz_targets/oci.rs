//! What a registry and a module ConfigMap give the OCI puller: the image manifest (or an index, or
//! anything else a registry answers) read as a module's layout, the `<name>.oci` reference, and the
//! docker config a pull secret holds.
//!
//! Input: the manifest's bytes, then `\0` and the reference, then `\0` and the docker config, then
//! `\0` and the registry the credentials are looked up for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use velero_wasm::modules::oci::layout::{self, MAX_COMPONENT, WASM_LAYER};
use velero_wasm::modules::oci::reference::is_digest;
use velero_wasm::modules::oci::{credentials, Reference};

/// A digest every pinned reference may take.
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(4, |&b| b == 0);
    let manifest = parts.next().unwrap_or_default();
    let reference = parts.next().unwrap_or_default();
    let config = parts.next().unwrap_or_default();
    let registry = parts.next().unwrap_or_default();

    if let Ok(module) = layout::read(manifest) {
        // What the puller then fetches must be one bounded, well-named blob.
        assert!(is_digest(&module.component.digest), "{module:?}");
        assert!(module.component.size <= MAX_COMPONENT, "{module:?}");
        assert_eq!(module.component.media_type, WASM_LAYER);
    }

    if let Ok(text) = std::str::from_utf8(reference) {
        if let Ok(parsed) = Reference::parse(text) {
            assert!(
                parsed.tag.is_some() || parsed.digest.is_some(),
                "{parsed:?}"
            );
            assert!(!parsed.api_host().is_empty());
            let _ = parsed.manifest_ref();
            // What the host writes (`<name>.oci`, logs) reads back as the same reference.
            let again = Reference::parse(&parsed.to_string());
            assert_eq!(again.as_ref(), Ok(&parsed), "{parsed}");
            let pinned = parsed.pinned(DIGEST);
            assert_eq!(Reference::parse(&pinned.to_string()), Ok(pinned));
        }
    }

    if let Ok(registry) = std::str::from_utf8(registry) {
        let _ = credentials::for_registry(config, registry);
    }
});
