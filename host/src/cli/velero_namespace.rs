//! Velero's namespace for the commands that look in it (`actions`, `module pack`), found as Velero's
//! own CLI finds it (`pkg/client/factory.go` in v1.18): the `--namespace` flag, else the `namespace`
//! of the client config file (`$HOME/.config/velero/config.json`, which `velero client config set
//! namespace=…` writes), else `VELERO_NAMESPACE`, else `velero`. So an operator whose `velero`
//! commands reach their install reaches the same namespace here.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::Config;

/// Velero's default namespace.
pub(super) const DEFAULT: &str = "velero";

/// The largest client config file read: it holds a few short settings.
const MAX_CONFIG: u64 = 1 << 20;

/// Velero's namespace: `flag` when given, else as Velero's CLI finds it (its variables from
/// `config`). A config file that cannot be read is a warning, as in Velero's CLI, and the next source
/// is used.
pub(super) fn resolve(flag: Option<&str>, config: &Config) -> String {
    if let Some(namespace) = flag.filter(|n| !n.is_empty()) {
        return namespace.to_string();
    }
    let from_file = config_file(config).and_then(|path| match config_namespace(&path) {
        Ok(namespace) => namespace,
        Err(why) => {
            eprintln!("velero-wasm: warning: {}: {why}", path.display());
            None
        }
    });
    from_file
        .or_else(|| config.velero_namespace())
        .unwrap_or_else(|| DEFAULT.to_string())
}

/// `$HOME/.config/velero/config.json`, where Velero's CLI keeps its settings.
fn config_file(config: &Config) -> Option<PathBuf> {
    Some(config.home()?.join(".config/velero/config.json"))
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
        assert_eq!(resolve(Some("mine"), &Config::default()), "mine");
        // Then the client config file under HOME, then VELERO_NAMESPACE, then `velero`.
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config/velero")).unwrap();
        let config = Config::from_vars([
            ("HOME", home.display().to_string()),
            ("VELERO_NAMESPACE", "from-variable".to_string()),
        ]);
        assert_eq!(resolve(None, &config), "from-variable");
        std::fs::write(
            home.join(".config/velero/config.json"),
            r#"{"namespace": "from-file"}"#,
        )
        .unwrap();
        assert_eq!(resolve(None, &config), "from-file");
        assert_eq!(resolve(None, &Config::default()), DEFAULT);
    }
}
