//! Velero's namespace for the commands that look in it (`actions`, `module pack`), found as Velero's
//! own CLI finds it (`pkg/client/factory.go` in v1.18): the `--namespace` flag, else the `namespace`
//! of the client config file (`$HOME/.config/velero/config.json`, which `velero client config set
//! namespace=…` writes), else `VELERO_NAMESPACE`, else `velero`. So an operator whose `velero`
//! commands reach their install reaches the same namespace here.

use std::path::PathBuf;

use serde_json::Value;

/// The variable Velero's CLI (and Deployment) name the namespace with.
const VARIABLE: &str = "VELERO_NAMESPACE";

/// Velero's default namespace.
pub(super) const DEFAULT: &str = "velero";

/// The largest client config file read: it holds a few short settings.
const MAX_CONFIG: u64 = 1 << 20;

/// Velero's namespace: `flag` when given, else as Velero's CLI finds it. A config file that cannot
/// be read is a warning, as in Velero's CLI, and the next source is used.
pub(super) fn resolve(flag: Option<&str>) -> String {
    if let Some(namespace) = flag.filter(|n| !n.is_empty()) {
        return namespace.to_string();
    }
    let config = config_file().and_then(|path| match config_namespace(&path) {
        Ok(namespace) => namespace,
        Err(why) => {
            eprintln!("velero-wasm: warning: {}: {why}", path.display());
            None
        }
    });
    config
        .or_else(|| std::env::var(VARIABLE).ok().filter(|n| !n.is_empty()))
        .unwrap_or_else(|| DEFAULT.to_string())
}

/// `$HOME/.config/velero/config.json`, where Velero's CLI keeps its settings.
fn config_file() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".config/velero/config.json"))
}

/// The `namespace` the config file at `path` sets: `None` when the file does not exist or sets none
/// (or sets something else than a string, which Velero's CLI ignores too).
fn config_namespace(path: &std::path::Path) -> Result<Option<String>, String> {
    let bytes = match crate::regular_file::read(path, MAX_CONFIG) {
        Ok(bytes) => bytes,
        Err(crate::regular_file::FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e.to_string()),
    };
    let config: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("is not Velero's client config: {e}"))?;
    Ok(config["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_names_a_namespace_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        assert_eq!(config_namespace(&path), Ok(None));
        std::fs::write(&path, r#"{"namespace": "oadp", "colorized": "false"}"#).unwrap();
        assert_eq!(config_namespace(&path), Ok(Some("oadp".to_string())));
        std::fs::write(&path, r#"{"namespace": 3}"#).unwrap();
        assert_eq!(config_namespace(&path), Ok(None));
        std::fs::write(&path, "{").unwrap();
        assert!(config_namespace(&path)
            .unwrap_err()
            .contains("is not Velero's client config"));
        // The flag wins over everything.
        assert_eq!(resolve(Some("mine")), "mine");
    }
}
