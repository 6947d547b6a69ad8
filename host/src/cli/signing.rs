//! The signing flags `module pack` and `module push` share, and what they sign by default: a module
//! signed for hosts that trust keys carries a `version` (the host's rollback floor compares it) and an
//! expiry of [`DEFAULT_EXPIRY_DAYS`] (what still holds where the floor is lost with the pod). Leaving
//! either out takes a flag that says so: `--unversioned`, `--no-expiry` (docs/modules.md §5).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::module::{expiry, signing_key, Checked, Parts};
use super::Failure;
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
    pub(super) fn sign(
        &self,
        parts: &Parts,
        checked: &Checked,
        nothing: &str,
    ) -> Result<String, Failure> {
        if checked.version.is_none() {
            if !self.unversioned {
                return Err(Failure::bad_input(format!(
                    "{}: module {}: its manifest has no version, so hosts cannot refuse an older signed \
                     copy in its place: add version = \"1.0.0\" near its top, before any [table] (and \
                     raise it with each change), or sign it without one with --unversioned; {nothing}",
                    parts.source, parts.name
                )));
            }
            eprintln!(
                "module {}: its manifest has no version, so hosts cannot refuse an older signed copy \
                 in its place (signed anyway: --unversioned)",
                parts.name
            );
        }
        let signature = self.key.sign_until(
            &parts.name,
            checked.sha256.as_deref(),
            &parts.manifest_text,
            self.expires,
        );
        Ok(signature.to_text())
    }
}
