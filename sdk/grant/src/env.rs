//! The environment part of a grant: the variables a module may read (`[grant] env`) and those whose
//! file it may read (`[grant] env-files`).

/// A module's environment grant: variables it may read, and variables whose file it may read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvGrant {
    variables: Vec<String>,
    files: Vec<String>,
}

impl EnvGrant {
    /// Compiles the manifest's `env` (names, or prefixes ending in `*`) and `env-files` (names) lists,
    /// already validated by [`EnvGrant::check_entry`].
    pub fn new(variables: &[String], files: &[String]) -> EnvGrant {
        EnvGrant {
            variables: variables.to_vec(),
            files: files.to_vec(),
        }
    }

    /// Checks one grant entry: a variable name (letters, digits, `_`), or with `prefix` allowed, such a
    /// name followed by `*` (`AZURE_*`, or `*` alone for every variable).
    pub fn check_entry(entry: &str, prefix: bool) -> Result<(), String> {
        let name = match entry.strip_suffix('*') {
            Some(stem) if prefix => stem,
            Some(_) => {
                return Err(format!(
                    "{entry:?}: name the variable exactly (no `*` in env-files)"
                ))
            }
            None if entry.is_empty() => return Err("an empty variable name".into()),
            None => entry,
        };
        if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            Ok(())
        } else {
            Err(format!(
                "{entry:?} is not a variable name (letters, digits and _{})",
                if prefix {
                    ", optionally ending in *"
                } else {
                    ""
                }
            ))
        }
    }

    /// Whether the module may read variable `name`.
    pub fn allows_variable(&self, name: &str) -> bool {
        !name.is_empty()
            && self
                .variables
                .iter()
                .any(|entry| match entry.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => entry == name,
                })
    }

    /// Whether the module may read the file named by variable `name`.
    pub fn allows_file(&self, name: &str) -> bool {
        self.files.iter().any(|entry| entry == name)
    }
}
