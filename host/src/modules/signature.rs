//! Signed modules: whoever can write a module ConfigMap (or a module directory) can otherwise run code
//! with any grant up to Velero's. With trusted keys configured, a module must carry a signature by one
//! of them over its name, its component and its manifest (so the grant is covered), or it is refused.
//!
//! A signature is `<name>.sig` beside the module, TOML with the signing key's id and an ed25519
//! signature (ed25519-dalek) of [`signed_message`]. Keys are PEM files: PKCS#8 private keys for the
//! operator who signs, SPKI public keys (`.pub`) for the host that verifies.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::identity::sha256_hex;

/// The environment variable naming the trusted public keys: a `.pub` file or a directory of them.
pub(crate) use crate::config::VELERO_WASM_TRUSTED_KEYS as TRUSTED_KEYS_ENV;

/// The largest key or signature file read (a PEM key is a few hundred bytes).
const MAX_KEY_FILE: u64 = 16 << 10;

/// The text that is signed: a format line, the module's name, the sha256 of its component (`-` when
/// it has none: a manifest that overrides a stock module) and the sha256 of its manifest (which binds
/// the manifest's `version`, and so rollback protection, see [`VersionFloor`](super::version_floor::VersionFloor)).
/// A signature with an expiry signs format 2, which adds `expires <RFC 3339 time>`; one without
/// signs format 1, which every earlier host verifies.
pub(crate) fn signed_message(
    name: &str,
    component_sha256: Option<&str>,
    manifest_sha256: &str,
    expires: Option<&str>,
) -> String {
    let component = component_sha256.unwrap_or("-");
    match expires {
        None => format!("velero-wasm module v1\n{name}\n{component}\n{manifest_sha256}\n"),
        Some(at) => {
            format!("velero-wasm module v2\n{name}\n{component}\n{manifest_sha256}\nexpires {at}\n")
        }
    }
}

/// A key's id: the first 8 bytes of the sha256 of its raw 32-byte public key, in lower-case hex.
pub(crate) fn key_id(key: &VerifyingKey) -> String {
    sha256_hex(key.as_bytes())[..16].to_string()
}

/// A key file or signature that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    /// The file or directory cannot be read.
    #[error("{}: {why}", path.display())]
    Unreadable {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        why: String,
    },
    /// The file is not a key of the kind expected.
    #[error("{}: not {expected}: {why}", path.display())]
    NotAKey {
        /// The file.
        path: PathBuf,
        /// The kind of key expected.
        expected: &'static str,
        /// What the PEM decoder said.
        why: String,
    },
    /// A directory of trusted keys holds none.
    #[error("{}: holds no public key (<name>.pub)", path.display())]
    NoKeys {
        /// The directory.
        path: PathBuf,
    },
    /// The operating system gave no randomness for a new key.
    #[error("no randomness for a new key: {0}")]
    NoRandomness(#[source] getrandom::Error),
    /// A key could not be written as PEM.
    #[error("cannot encode the {which} key: {why}")]
    Encode {
        /// `private` or `public`.
        which: &'static str,
        /// What the encoder said.
        why: String,
    },
}

fn read_text(path: &Path) -> Result<String, KeyError> {
    let unreadable = |why: String| KeyError::Unreadable {
        path: path.to_path_buf(),
        why,
    };
    let bytes =
        crate::regular_file::read(path, MAX_KEY_FILE).map_err(|e| unreadable(e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| unreadable("is not UTF-8 text".into()))
}

/// A private key for signing modules, read from its PKCS#8 PEM file.
pub struct PrivateKey {
    key: SigningKey,
}

impl PrivateKey {
    /// A fresh key from the operating system's random source.
    pub(crate) fn generate() -> Result<PrivateKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(KeyError::NoRandomness)?;
        let key = SigningKey::from_bytes(&seed);
        seed.fill(0);
        Ok(PrivateKey { key })
    }

    /// Reads a PKCS#8 PEM private key (`PRIVATE KEY`).
    pub(crate) fn read(path: &Path) -> Result<PrivateKey, KeyError> {
        let text = read_text(path)?;
        let key = SigningKey::from_pkcs8_pem(&text).map_err(|e| KeyError::NotAKey {
            path: path.to_path_buf(),
            expected: "an ed25519 private key (PKCS#8 PEM, \"PRIVATE KEY\")",
            why: e.to_string(),
        })?;
        Ok(PrivateKey { key })
    }

    /// The id of its public key.
    pub(crate) fn key_id(&self) -> String {
        key_id(&self.key.verifying_key())
    }

    /// The private key as PKCS#8 PEM (keep it secret), version 1: the seed alone, as OpenSSL and
    /// every other tool read it. (Version 2, which also carries the public key and is what
    /// ed25519-dalek writes by default, is refused by OpenSSL 3.0 as "unsupported"; [`read`](Self::read)
    /// takes both.)
    pub(crate) fn private_pem(&self) -> Result<String, KeyError> {
        ed25519_dalek::pkcs8::KeypairBytes {
            secret_key: self.key.to_bytes(),
            public_key: None,
        }
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map(|pem| pem.to_string())
        .map_err(|e| KeyError::Encode {
            which: "private",
            why: e.to_string(),
        })
    }

    /// The public key as SPKI PEM, for the hosts that verify.
    pub(crate) fn public_pem(&self) -> Result<String, KeyError> {
        self.key
            .verifying_key()
            .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .map_err(|e| KeyError::Encode {
                which: "public",
                why: e.to_string(),
            })
    }

    /// The signature file (`<name>.sig`) of a module, valid for as long as the key is trusted.
    pub fn sign(
        &self,
        name: &str,
        component_sha256: Option<&str>,
        manifest_text: &str,
    ) -> SignatureFile {
        self.sign_until(name, component_sha256, manifest_text, None)
    }

    /// The signature file of a module, refused by hosts after `expires` (when given): an old version
    /// cannot be replayed for longer than that, even to a host that has forgotten it served a newer
    /// one.
    pub(crate) fn sign_until(
        &self,
        name: &str,
        component_sha256: Option<&str>,
        manifest_text: &str,
        expires: Option<SystemTime>,
    ) -> SignatureFile {
        let expires = expires.map(|at| humantime::format_rfc3339_seconds(at).to_string());
        let message = signed_message(
            name,
            component_sha256,
            &sha256_hex(manifest_text.as_bytes()),
            expires.as_deref(),
        );
        let signature = self.key.sign(message.as_bytes());
        SignatureFile {
            key: self.key_id(),
            signature: base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()),
            expires,
        }
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({})", self.key_id())
    }
}

/// One trusted public key and the file it came from.
#[derive(Debug, Clone)]
struct TrustedKey {
    id: String,
    key: VerifyingKey,
}

/// The public keys whose signatures the host accepts (`VELERO_WASM_TRUSTED_KEYS`, `--trusted-keys`).
/// When they are configured, every module that is not stock must be signed by one of them.
#[derive(Debug, Clone)]
pub struct TrustedKeys {
    source: PathBuf,
    keys: Vec<TrustedKey>,
    /// Set when the configured keys could not be read: then no module verifies (fail closed).
    unusable: Option<String>,
}

impl TrustedKeys {
    /// Reads a `.pub` file (SPKI PEM, `PUBLIC KEY`), or every `.pub` file of a directory (a mounted
    /// Secret: its `..data` entries and other dotfiles are skipped, symbolic links followed). A key
    /// file that is not a key is an error naming it.
    pub(crate) fn load(path: &Path) -> Result<TrustedKeys, KeyError> {
        let unreadable = |why: String| KeyError::Unreadable {
            path: path.to_path_buf(),
            why,
        };
        let meta = std::fs::metadata(path).map_err(|e| unreadable(e.to_string()))?;
        let files = if meta.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| unreadable(e.to_string()))?
                .filter_map(Result::ok)
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    !name.starts_with('.') && name.ends_with(".pub")
                })
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(KeyError::NoKeys {
                    path: path.to_path_buf(),
                });
            }
            files
        } else {
            vec![path.to_path_buf()]
        };
        let mut keys: Vec<TrustedKey> = Vec::new();
        for file in files {
            let text = read_text(&file)?;
            let key = VerifyingKey::from_public_key_pem(&text).map_err(|e| KeyError::NotAKey {
                path: file.clone(),
                expected: "an ed25519 public key (SPKI PEM, \"PUBLIC KEY\")",
                why: e.to_string(),
            })?;
            let id = key_id(&key);
            if !keys.iter().any(|k| k.id == id) {
                keys.push(TrustedKey { id, key });
            }
        }
        Ok(TrustedKeys {
            source: path.to_path_buf(),
            keys,
            unusable: None,
        })
    }

    /// Keys that were configured but cannot be read: every module that needs a signature is refused
    /// with `why`, rather than loaded unchecked.
    pub(crate) fn unusable(source: &Path, why: String) -> TrustedKeys {
        TrustedKeys {
            source: source.to_path_buf(),
            keys: Vec::new(),
            unusable: Some(why),
        }
    }

    /// The ids of the keys, in file order.
    pub(crate) fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    fn describe(&self) -> String {
        format!("{} from {}", self.ids().join(", "), self.source.display())
    }
}

/// Why a signature file's text is not a signature file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    /// Not TOML, or fields missing, unknown or of the wrong type.
    #[error("{0}")]
    Syntax(String),
    /// The key is not a key id.
    #[error("key {0:?} is not a key id (16 lower-case hex digits)")]
    KeyId(String),
    /// The signature is not base64.
    #[error("signature is not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    /// The signature has the wrong number of bytes.
    #[error("signature has {0} bytes, not 64")]
    Length(usize),
    /// The expiry is not a time.
    #[error("expires {at:?} is not an RFC 3339 time in UTC: {why}")]
    Expires {
        /// The text given.
        at: String,
        /// What the parser said.
        why: String,
    },
}

/// The signature file, `<name>.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// The id of the signing key (see [`key_id`]).
    pub(crate) key: String,
    /// The ed25519 signature of [`signed_message`], base64 (standard alphabet, padded).
    pub(crate) signature: String,
    /// When hosts stop accepting it (RFC 3339, UTC), if ever; part of the signed message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

impl SignatureFile {
    /// Parses the file's text and checks its form (a key id of 16 lower-case hex digits, a signature
    /// of 64 bytes).
    pub fn parse(text: &str) -> Result<(SignatureFile, ed25519_dalek::Signature), FormError> {
        let file: SignatureFile =
            toml::from_str(text).map_err(|e| FormError::Syntax(e.message().to_string()))?;
        if file.key.len() != 16
            || !file
                .key
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(FormError::KeyId(file.key));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(file.signature.trim())
            .map_err(FormError::NotBase64)?;
        let signature = ed25519_dalek::Signature::from_slice(&bytes)
            .map_err(|_| FormError::Length(bytes.len()))?;
        if let Some(at) = &file.expires {
            humantime::parse_rfc3339(at).map_err(|e| FormError::Expires {
                at: at.clone(),
                why: e.to_string(),
            })?;
        }
        Ok((file, signature))
    }

    /// The file's text.
    pub(crate) fn to_text(&self) -> String {
        let mut text = format!(
            "key = \"{}\"\nsignature = \"{}\"\n",
            self.key, self.signature
        );
        if let Some(at) = &self.expires {
            text.push_str(&format!("expires = \"{at}\"\n"));
        }
        text
    }
}

/// A module's signature, as checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleSignature {
    /// The id of the key it names.
    pub(crate) key: String,
    /// Whether it was verified with a trusted key. Without trusted keys only its form is checked.
    pub(crate) verified: bool,
    /// The signature file as written (kept with the module's last good copy).
    pub(crate) text: Arc<str>,
    /// When it stops being accepted (RFC 3339, as signed), if it has an expiry.
    pub(crate) expires: Option<String>,
}

/// How close to its expiry a serving module's signature is called out by `velero-wasm status` and
/// `velero-wasm actions`: two weeks, the room to sign and apply it again before it stops serving.
pub(crate) const EXPIRY_WARNING_DAYS: u64 = 14;

impl ModuleSignature {
    /// Whole days (rounded up) until the signature expires, when it expires within
    /// [`EXPIRY_WARNING_DAYS`] of `now`; `Some(0)` once it has expired.
    pub(crate) fn expires_within_warning(&self, now: std::time::SystemTime) -> Option<u64> {
        expiry_warning(self.expires.as_deref()?, now)
    }
}

/// Whole days (rounded up) from `now` to the RFC 3339 time `expires`, when that is within
/// [`EXPIRY_WARNING_DAYS`]; `Some(0)` once passed; `None` when further off or not a time.
pub(crate) fn expiry_warning(expires: &str, now: std::time::SystemTime) -> Option<u64> {
    let at = humantime::parse_rfc3339(expires).ok()?;
    let left = match at.duration_since(now) {
        Ok(left) => left.as_secs(),
        Err(_) => return Some(0),
    };
    let days = left.div_ceil(24 * 3600);
    (days <= EXPIRY_WARNING_DAYS).then_some(days)
}

impl fmt::Display for ModuleSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.verified {
            write!(f, "signed by key {}", self.key)
        } else {
            write!(
                f,
                "signed by key {} (not verified: no trusted keys)",
                self.key
            )
        }
    }
}

/// Why a module's signature is refused. Each message names the module and the key concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SignatureError {
    /// Trusted keys are configured and the module has no signature.
    #[error("module {module} is not signed, and only modules signed by a trusted key are loaded (trusted: {trusted})")]
    Missing {
        /// The module.
        module: String,
        /// The trusted key ids and where they came from.
        trusted: String,
    },
    /// The signature file does not parse.
    #[error("module {module}: its signature is malformed: {why}")]
    Malformed {
        /// The module.
        module: String,
        /// What is wrong with it.
        #[source]
        why: FormError,
    },
    /// The signature names a key that is not trusted.
    #[error(
        "module {module} is signed by key {key}, which is not a trusted key (trusted: {trusted})"
    )]
    UnknownKey {
        /// The module.
        module: String,
        /// The key id the signature names.
        key: String,
        /// The trusted key ids and where they came from.
        trusted: String,
    },
    /// The signature does not verify: the component or the manifest changed since it was signed.
    #[error("module {module}: its signature by key {key} does not match its component and manifest (changed since signed, or signed for another module)")]
    Mismatch {
        /// The module.
        module: String,
        /// The key id.
        key: String,
    },
    /// The signature verifies, but its expiry has passed.
    #[error("module {module}: its signature by key {key} expired at {at}: sign it again")]
    Expired {
        /// The module.
        module: String,
        /// The key id.
        key: String,
        /// When it expired.
        at: String,
    },
    /// Trusted keys are configured but cannot be read.
    #[error("module {module} cannot be verified: the trusted keys {keys} cannot be used: {why}")]
    KeysUnusable {
        /// The module.
        module: String,
        /// What names the keys.
        keys: String,
        /// Why they cannot be used.
        why: String,
    },
}

/// Checks a module's signature (`signature_text`, the content of its `<name>.sig`, if any). With
/// `trusted` keys the module must be signed by one of them; without, a signature present must at
/// least be well-formed. `component_sha256` is `None` for a module that is only a manifest.
pub(crate) fn verify(
    name: &str,
    component_sha256: Option<&str>,
    manifest_text: &str,
    signature_text: Option<&str>,
    trusted: Option<&TrustedKeys>,
) -> Result<Option<ModuleSignature>, SignatureError> {
    let module = name.to_string();
    if let Some(TrustedKeys {
        source,
        unusable: Some(why),
        ..
    }) = trusted
    {
        return Err(SignatureError::KeysUnusable {
            module,
            keys: source.display().to_string(),
            why: why.clone(),
        });
    }
    let Some(text) = signature_text else {
        return match trusted {
            Some(keys) => Err(SignatureError::Missing {
                module,
                trusted: keys.describe(),
            }),
            None => Ok(None),
        };
    };
    let (file, signature) =
        SignatureFile::parse(text).map_err(|why| SignatureError::Malformed {
            module: module.clone(),
            why,
        })?;
    let Some(keys) = trusted else {
        return Ok(Some(ModuleSignature {
            key: file.key,
            verified: false,
            text: Arc::from(text),
            expires: file.expires,
        }));
    };
    let Some(key) = keys.keys.iter().find(|k| k.id == file.key) else {
        return Err(SignatureError::UnknownKey {
            module,
            key: file.key,
            trusted: keys.describe(),
        });
    };
    let message = signed_message(
        name,
        component_sha256,
        &sha256_hex(manifest_text.as_bytes()),
        file.expires.as_deref(),
    );
    key.key
        .verify_strict(message.as_bytes(), &signature)
        .map_err(|_| SignatureError::Mismatch {
            module: module.clone(),
            key: file.key.clone(),
        })?;
    if let Some(at) = &file.expires {
        let expired = humantime::parse_rfc3339(at).map_or(true, |t| t <= SystemTime::now());
        if expired {
            return Err(SignatureError::Expired {
                module,
                key: file.key,
                at: at.clone(),
            });
        }
    }
    Ok(Some(ModuleSignature {
        key: file.key,
        verified: true,
        text: Arc::from(text),
        expires: file.expires,
    }))
}

/// The text of the signature file beside a module (`<dir>/<name>.sig`), if there is one.
pub(crate) fn read_signature_file(path: &Path) -> Result<Option<String>, KeyError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    read_text(path).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(dir: &Path, keys: &[&PrivateKey]) -> TrustedKeys {
        for (i, key) in keys.iter().enumerate() {
            std::fs::write(dir.join(format!("k{i}.pub")), key.public_pem().unwrap()).unwrap();
        }
        TrustedKeys::load(dir).unwrap()
    }

    #[test]
    fn a_signature_covers_name_component_and_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate().unwrap();
        let trusted = keys_of(dir.path(), &[&key]);
        let sig = key.sign("m", Some("aa"), "grant").to_text();
        let ok = verify("m", Some("aa"), "grant", Some(&sig), Some(&trusted)).unwrap();
        assert_eq!(ok.unwrap().key, key.key_id());
        for (name, component, manifest) in [
            ("n", Some("aa"), "grant"),
            ("m", Some("ab"), "grant"),
            ("m", None, "grant"),
            ("m", Some("aa"), "grant "),
        ] {
            let error = verify(name, component, manifest, Some(&sig), Some(&trusted)).unwrap_err();
            assert!(
                matches!(&error, SignatureError::Mismatch { key: k, .. } if *k == key.key_id()),
                "{error}"
            );
        }
    }

    #[test]
    fn an_expiry_is_signed_and_enforced() {
        use std::time::Duration;
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate().unwrap();
        let trusted = keys_of(dir.path(), &[&key]);
        let day = Duration::from_secs(86_400);
        let ahead = key.sign_until("m", Some("aa"), "", Some(SystemTime::now() + day));
        assert!(
            ahead.to_text().contains("expires = \""),
            "{}",
            ahead.to_text()
        );
        assert!(verify("m", Some("aa"), "", Some(&ahead.to_text()), Some(&trusted)).is_ok());

        // Moving the expiry breaks the signature; an expiry passed refuses it.
        let mut moved = ahead.clone();
        moved.expires = Some("2099-01-01T00:00:00Z".into());
        let error =
            verify("m", Some("aa"), "", Some(&moved.to_text()), Some(&trusted)).unwrap_err();
        assert!(matches!(error, SignatureError::Mismatch { .. }), "{error}");
        let mut stripped = ahead.clone();
        stripped.expires = None;
        let error = verify(
            "m",
            Some("aa"),
            "",
            Some(&stripped.to_text()),
            Some(&trusted),
        )
        .unwrap_err();
        assert!(matches!(error, SignatureError::Mismatch { .. }), "{error}");
        let past = key.sign_until("m", Some("aa"), "", Some(SystemTime::now() - day));
        let error = verify("m", Some("aa"), "", Some(&past.to_text()), Some(&trusted))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("expired at") && error.contains("sign it again"),
            "{error}"
        );
        let error = SignatureFile::parse(&format!(
            "{}expires = \"soon\"\n",
            key.sign("m", None, "").to_text()
        ))
        .unwrap_err()
        .to_string();
        assert!(error.contains("not an RFC 3339 time"), "{error}");
    }

    #[test]
    fn a_manifest_alone_is_signed_with_a_dash_for_the_component() {
        assert_eq!(
            signed_message("kubevirt", None, "ff", None),
            "velero-wasm module v1\nkubevirt\n-\nff\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate().unwrap();
        let trusted = keys_of(dir.path(), &[&key]);
        let sig = key.sign("kubevirt", None, "[settings]\n").to_text();
        assert!(verify("kubevirt", None, "[settings]\n", Some(&sig), Some(&trusted)).is_ok());
    }

    #[test]
    fn unknown_keys_missing_and_malformed_signatures_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (trusted_key, other) = (
            PrivateKey::generate().unwrap(),
            PrivateKey::generate().unwrap(),
        );
        let trusted = keys_of(dir.path(), &[&trusted_key]);
        let by_other = other.sign("m", Some("aa"), "").to_text();
        let error = verify("m", Some("aa"), "", Some(&by_other), Some(&trusted))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("module m is signed by key")
                && error.contains(&other.key_id())
                && error.contains(&trusted_key.key_id()),
            "{error}"
        );
        let error = verify("m", Some("aa"), "", None, Some(&trusted))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("module m is not signed") && error.contains(&trusted_key.key_id()),
            "{error}"
        );
        // Without trusted keys: unsigned is fine, a signature must still be well-formed.
        assert_eq!(verify("m", Some("aa"), "", None, None), Ok(None));
        let unverified = verify("m", Some("aa"), "", Some(&by_other), None)
            .unwrap()
            .unwrap();
        assert!(!unverified.verified);
        let error = verify("m", Some("aa"), "", Some("key = \"x\""), None).unwrap_err();
        assert!(matches!(error, SignatureError::Malformed { .. }), "{error}");
    }

    #[test]
    fn trusted_keys_skip_dotfiles_and_name_a_bad_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate().unwrap();
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        std::fs::write(dir.path().join(".hidden.pub"), "junk").unwrap();
        std::fs::write(dir.path().join("a.pub"), key.public_pem().unwrap()).unwrap();
        std::fs::write(dir.path().join("README"), "not a key").unwrap();
        let keys = TrustedKeys::load(dir.path()).unwrap();
        assert_eq!(keys.ids(), [key.key_id().as_str()]);

        std::fs::write(dir.path().join("b.pub"), key.private_pem().unwrap()).unwrap();
        let error = TrustedKeys::load(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("b.pub") && error.contains("not an ed25519 public key"),
            "{error}"
        );

        let empty = tempfile::tempdir().unwrap();
        let error = TrustedKeys::load(empty.path()).unwrap_err().to_string();
        assert!(error.contains("holds no public key"), "{error}");
    }

    #[test]
    fn unusable_keys_refuse_every_module() {
        let keys = TrustedKeys::unusable(Path::new("/keys"), "gone".into());
        let error = verify("m", Some("aa"), "", None, Some(&keys))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("module m cannot be verified") && error.contains("gone"),
            "{error}"
        );
    }

    #[test]
    fn keys_survive_their_pem_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate().unwrap();
        std::fs::write(dir.path().join("k.key"), key.private_pem().unwrap()).unwrap();
        let read = PrivateKey::read(&dir.path().join("k.key")).unwrap();
        assert_eq!(read.key_id(), key.key_id());
        assert!(key
            .private_pem()
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(key
            .public_pem()
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----"));
    }
}
