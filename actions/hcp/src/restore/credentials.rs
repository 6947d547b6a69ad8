//! The restore's view of a BackupStorageLocation and its credentials (docs/hcp.md#s5-5), and the dotenv
//! format Azure credentials use (docs/signing.md#s6-9).

use base64::Engine;
use velero_wasm_sdk::Object;

use crate::bsl;
use crate::context::Context;

/// A BSL and what became of reading its credentials (the Azure path falls back to the environment
/// when the Secret is unavailable).
pub struct Fetched {
    /// The BackupStorageLocation.
    pub bsl: Object,
    /// The raw credential data, or why it could not be read.
    pub credentials: Result<Vec<u8>, String>,
    /// Whether the BSL names its credential (`spec.credential`).
    pub named: bool,
}

/// Reads the Backup's BSL and its credential Secret in Velero's namespace. Only an unreadable BSL is
/// an error here: `error getting BackupStorageLocation "<name>": <err>`.
pub fn fetch(ctx: &Context, backup: &Object) -> Result<Fetched, String> {
    let namespace = ctx.velero_namespace()?;
    let location = backup.str_at("/spec/storageLocation").unwrap_or("");
    let bsl_object = bsl::get(ctx.cluster, &namespace, location).map_err(|e| {
        format!(
            "error getting BackupStorageLocation {location:?}: {}",
            e.message()
        )
    })?;
    let ((name, key), named) = bsl::credential_ref(&bsl_object);
    let credentials = bsl::secret(ctx.cluster, &namespace, &name)
        .map_err(|e| format!("error getting credential secret {name:?}: {}", e.message()))
        .and_then(|secret| {
            let value = secret
                .pointer("/data")
                .and_then(|d| d.get(&key))
                .and_then(|v| v.as_str())
                .ok_or_else(|| format!("key {key:?} not found in secret {name:?}"))?;
            base64::engine::general_purpose::STANDARD
                .decode(value)
                .map_err(|e| {
                    format!(
                        "error getting credential secret {name:?}: data.{key} is not base64: {e}"
                    )
                })
        });
    Ok(Fetched {
        bsl: bsl_object,
        credentials,
        named,
    })
}

/// Dotenv data (docs/signing.md#s6-9): `KEY=value` lines, trimmed, `#` comments, split at the first `=`, quotes
/// kept, later keys win. Returns the value of `key`, if set.
pub fn dotenv<'a>(data: &'a str, key: &str) -> Option<&'a str> {
    data.split('\n')
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_follows_the_spec() {
        let data = "# comment\nKEY = spacedvalue\nB=abc=def==\nQ=\"quoted\"\nB=later\n\n";
        assert_eq!(dotenv(data, "KEY"), Some("spacedvalue"));
        assert_eq!(dotenv(data, "B"), Some("later"));
        assert_eq!(dotenv("B=abc=def==", "B"), Some("abc=def=="));
        assert_eq!(dotenv(data, "Q"), Some("\"quoted\""));
        assert_eq!(dotenv(data, "MISSING"), None);
        assert_eq!(dotenv("", "KEY"), None);
    }
}
