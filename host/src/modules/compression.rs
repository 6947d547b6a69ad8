//! Compressed components in module ConfigMaps. `velero-wasm module pack` stores a component gzipped,
//! under the key `<name>.wasm.gz`: a component compresses to about a third, so that every stock module
//! fits Kubernetes' 1 MiB object limit with room to grow. The host and `module verify` expand it back
//! to `<name>.wasm` before anything else looks at it, so the manifest's sha256 and the signature cover
//! the component itself, whichever way it was stored; a ConfigMap holding `<name>.wasm` as it is (from
//! earlier releases, or made by hand) reads as before.
//!
//! Expanding is bounded: at most [`MAX_COMPONENT_BYTES`] come out (a deflate stream can expand about a
//! thousandfold, so a small ConfigMap could otherwise exhaust the plugin's memory), one gzip member,
//! nothing after it, and the checksum and length the gzip trailer records must match.

use std::io::{Read as _, Write as _};

/// The file extension of a compressed component (`<name>.wasm.gz`).
pub(crate) const COMPRESSED_EXTENSION: &str = "wasm.gz";

/// The most a compressed component in a ConfigMap may expand to: eight times the object limit, far
/// above any component that fits in a ConfigMap once compressed (components compress to a third or
/// so). A module directory's `<name>.wasm.gz` is not bound by it but by the component cap,
/// [`crate::modules::oci::layout::MAX_COMPONENT`] ([`expanded_within`]).
pub const MAX_COMPONENT_BYTES: u64 = 8 << 20;

/// Why a compressed component cannot be expanded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExpandError {
    /// The bytes are not one whole, intact gzip stream.
    #[error("is not gzip data, or is truncated or corrupt: {0}")]
    Corrupt(std::io::Error),
    /// More follows the gzip stream (another member, or anything else).
    #[error("holds {0} bytes after the end of its gzip stream")]
    Trailing(usize),
    /// It expands to more than the bound.
    #[error(
        "expands to more than {limit} bytes, the most a component may be (a decompression bomb?)"
    )]
    TooLarge {
        /// The bound it exceeded.
        limit: u64,
    },
}

/// The component gzipped at the best compression, with no file name and a zero time in the header, so
/// that packing the same component twice gives the same bytes.
pub fn compress(wasm: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(wasm.len() / 2),
        flate2::Compression::best(),
    );
    encoder.write_all(wasm)?;
    encoder.finish()
}

/// The component a gzip stream holds, at most `limit` bytes of it.
pub(crate) fn expand(gzip: &[u8], limit: u64) -> Result<Vec<u8>, ExpandError> {
    let mut decoder = flate2::bufread::GzDecoder::new(gzip);
    let mut out = Vec::new();
    (&mut decoder)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(ExpandError::Corrupt)?;
    if out.len() as u64 > limit {
        return Err(ExpandError::TooLarge { limit });
    }
    // The header alone, or an empty input, reads as nothing: a component is never empty.
    if out.is_empty() && decoder.header().is_none() {
        return Err(ExpandError::Corrupt(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no gzip header",
        )));
    }
    match decoder.into_inner().len() {
        0 => Ok(out),
        rest => Err(ExpandError::Trailing(rest)),
    }
}

/// A ConfigMap file as the loader sees it: `<name>.wasm.gz` expanded (within
/// [`MAX_COMPONENT_BYTES`]) to `<name>.wasm`; any other key as it is.
pub fn expanded(key: &str, bytes: Vec<u8>) -> Result<(String, Vec<u8>), KeyExpandError> {
    expanded_within(key, bytes, MAX_COMPONENT_BYTES)
}

/// Like [`expanded`], expanding to at most `limit` bytes (a module directory's components may be as
/// large as any component: a gzipped one must not be held to less than the same one unzipped).
pub(crate) fn expanded_within(
    key: &str,
    bytes: Vec<u8>,
    limit: u64,
) -> Result<(String, Vec<u8>), KeyExpandError> {
    let Some(stem) = key.strip_suffix(&format!(".{COMPRESSED_EXTENSION}")) else {
        return Ok((key.to_string(), bytes));
    };
    let wasm = expand(&bytes, limit).map_err(|source| KeyExpandError {
        key: key.to_string(),
        source,
    })?;
    Ok((format!("{stem}.wasm"), wasm))
}

/// A ConfigMap key (or file) whose compressed component cannot be expanded.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {source}")]
pub struct KeyExpandError {
    /// The key, `<name>.wasm.gz`.
    pub(crate) key: String,
    /// Why it cannot be expanded.
    #[source]
    pub(crate) source: ExpandError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_component_expands_to_the_same_bytes_and_packs_the_same_twice() {
        let wasm: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let gzip = compress(&wasm).unwrap();
        assert!(gzip.len() < wasm.len() / 4, "{}", gzip.len());
        assert_eq!(compress(&wasm).unwrap(), gzip);
        assert_eq!(expand(&gzip, MAX_COMPONENT_BYTES).unwrap(), wasm);
        assert_eq!(
            expanded("m.wasm.gz", gzip).unwrap(),
            ("m.wasm".to_string(), wasm)
        );
        assert_eq!(
            expanded("m.toml", b"x".to_vec()).unwrap(),
            ("m.toml".to_string(), b"x".to_vec())
        );
    }

    #[test]
    fn a_bomb_stops_at_the_bound() {
        // 16 MiB of zeros compress to about 16 KiB.
        let bomb = compress(&vec![0u8; 16 << 20]).unwrap();
        assert!(bomb.len() < 40_000, "{}", bomb.len());
        let error = expand(&bomb, MAX_COMPONENT_BYTES).unwrap_err();
        assert!(matches!(error, ExpandError::TooLarge { limit } if limit == MAX_COMPONENT_BYTES));
        let message = expanded("m.wasm.gz", bomb).unwrap_err().to_string();
        assert!(
            message.starts_with("m.wasm.gz: expands to more than 8388608 bytes"),
            "{message}"
        );
        // Exactly at the bound is allowed.
        let full = compress(&vec![7u8; 1000]).unwrap();
        assert_eq!(expand(&full, 1000).unwrap().len(), 1000);
        assert!(expand(&full, 999).is_err());
    }

    #[test]
    fn truncated_corrupt_or_trailing_data_is_refused() {
        let gzip = compress(b"\0asm component").unwrap();
        for bad in [
            &b""[..],
            &b"\0asm"[..],
            &gzip[..gzip.len() - 1],
            &gzip[..10],
        ] {
            assert!(
                matches!(expand(bad, 1 << 20), Err(ExpandError::Corrupt(_))),
                "{bad:?}"
            );
        }
        // A changed byte of the data fails the trailer's CRC.
        let mut flipped = gzip.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x55;
        assert!(expand(&flipped, 1 << 20).is_err());
        // A second member, or junk, after the first.
        let mut two = gzip.clone();
        two.extend_from_slice(&gzip);
        assert!(matches!(
            expand(&two, 1 << 20),
            Err(ExpandError::Trailing(n)) if n == gzip.len()
        ));
        let mut junk = gzip.clone();
        junk.push(0);
        assert!(matches!(
            expand(&junk, 1 << 20),
            Err(ExpandError::Trailing(1))
        ));
    }
}
