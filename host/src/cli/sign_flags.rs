//! The signing flags `module pack` and `module push` share, and what they sign by default: a module
//! signed for hosts that trust keys carries a `version` (the host's rollback floor compares it) and an
//! expiry of [`DEFAULT_EXPIRY_DAYS`] (what still holds where the floor is lost with the pod). Leaving
//! either out takes a flag that says so: `--unversioned`, `--no-expiry` (docs/modules.md §5).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::failure::Failure;
use crate::modules::signature::PrivateKey;

/// How long a signature made without `--expires` is accepted: a replay window of one quarter, which
/// an operator who re-signs with each release keeps well ahead of (docs/modules.md, "Versions and
/// rollback protection").
pub(super) const DEFAULT_EXPIRY_DAYS: u64 = 90;

/// The signing flags of `module pack` and `module push`.
#[derive(Debug, clap::Args)]
pub(super) struct SigningArgs {
    /// Sign with this private key (from `module keygen`), replacing any signature beside the module.
    #[arg(long, value_name = "KEYFILE")]
    pub(super) sign: Option<PathBuf>,

    /// With --sign: hosts refuse the signature after this long (`30d`, `12h`) or this time (RFC 3339,
    /// `2027-06-30T00:00:00Z`), so that nobody can replay this version for longer; default: 90d.
    #[arg(
        long,
        value_name = "DURATION|TIME",
        requires = "sign",
        conflicts_with = "no_expiry"
    )]
    pub(super) expires: Option<String>,

    /// With --sign: sign with no expiry. Hosts accept the signature for as long as the key is trusted,
    /// so once a host's version floor is lost (a restarted pod's emptyDir) it can be replayed forever.
    #[arg(long, requires = "sign")]
    pub(super) no_expiry: bool,

    /// With --sign: sign a manifest that has no `version`. Hosts can then refuse no older signed copy
    /// in its place (rollback protection compares versions); default: such a manifest is refused.
    #[arg(long, requires = "sign")]
    pub(super) unversioned: bool,
}

/// A key, and how it signs: until when, and whether a manifest without a version may be signed.
pub(super) struct Signer {
    key: PrivateKey,
    expires: Option<SystemTime>,
    unversioned: bool,
}

impl SigningArgs {
    /// The signer `--sign` asks for (none without it), its expiry resolved now: `--expires`, else
    /// [`DEFAULT_EXPIRY_DAYS`], else none with `--no-expiry`.
    pub(super) fn signer(&self) -> Result<Option<Signer>, Failure> {
        let Some(key) = signing_key(self.sign.as_deref())? else {
            return Ok(None);
        };
        let expires = match (&self.expires, self.no_expiry) {
            (Some(text), _) => Some(expiry(text)?),
            (None, true) => None,
            (None, false) => {
                Some(SystemTime::now() + Duration::from_secs(DEFAULT_EXPIRY_DAYS * 24 * 60 * 60))
            }
        };
        Ok(Some(Signer {
            key,
            expires,
            unversioned: self.unversioned,
        }))
    }
}

impl Signer {
    /// The key's id, for reports.
    pub(super) fn key_id(&self) -> String {
        self.key.key_id()
    }

    /// How the signature ends, for reports: `until <time>` or `with no expiry`.
    pub(super) fn until(&self) -> String {
        match self.expires {
            Some(at) => format!("until {}", humantime::format_rfc3339_seconds(at)),
            None => "with no expiry".to_string(),
        }
    }

    /// The signature file of the checked module `parts`. A manifest without a version is refused
    /// unless `--unversioned` was given (then signed with a warning); `nothing` says what was not done
    /// (`nothing written`), for the message.
    pub(super) fn sign(&self, module: Signable<'_>, nothing: &str) -> Result<String, Failure> {
        let Signable {
            name,
            source,
            manifest_text,
            sha256,
            versioned,
        } = module;
        if !versioned {
            if !self.unversioned {
                return Err(Failure::bad_input(format!(
                    "{}: module {}: its manifest has no version, so hosts cannot refuse an older signed \
                     copy in its place: add version = \"1.0.0\" near its top, before any [table] (and \
                     raise it with each change), or sign it without one with --unversioned; {nothing}",
                    source, name
                )));
            }
            eprintln!(
                "module {}: its manifest has no version, so hosts cannot refuse an older signed copy \
                 in its place (signed anyway: --unversioned)",
                name
            );
        }
        let signature = self
            .key
            .sign_until(name, sha256, manifest_text, self.expires);
        Ok(signature.to_text())
    }
}

/// What a signature covers of a checked module, and what its messages name.
pub(super) struct Signable<'a> {
    /// The module's name.
    pub(super) name: &'a str,
    /// Where it came from (a file, a ConfigMap).
    pub(super) source: &'a str,
    /// The manifest, as signed.
    pub(super) manifest_text: &'a str,
    /// The component's sha256; none for a manifest alone.
    pub(super) sha256: Option<&'a str>,
    /// Whether the manifest has a version.
    pub(super) versioned: bool,
}

/// The private key `--sign` names, if it names one.
pub(super) fn signing_key(path: Option<&Path>) -> Result<Option<PrivateKey>, Failure> {
    path.map(PrivateKey::read)
        .transpose()
        .map_err(|e| Failure::bad_input(format!("--sign {e}")))
}

/// When a signature made now stops being accepted: `now + DURATION`, or a time, which must be ahead.
pub(super) fn expiry(text: &str) -> Result<std::time::SystemTime, Failure> {
    let now = std::time::SystemTime::now();
    let at = match humantime::parse_duration(text) {
        Ok(after) => now + after,
        Err(_) => humantime::parse_rfc3339_weak(text).map_err(|e| {
            Failure::bad_input(format!(
                "--expires {text:?}: neither a duration (90d, 12h) nor a time (2027-06-30T00:00:00Z): {e}"
            ))
        })?,
    };
    if at <= now {
        return Err(Failure::bad_input(format!(
            "--expires {text:?}: that time has passed"
        )));
    }
    Ok(at)
}
