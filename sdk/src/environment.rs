//! The host's environment, as far as the module's grant allows (`wit/environment.wit`):
//! [`Environment`] is the capability as a trait, [`HostEnvironment`] the host's, and
//! [`FakeEnvironment`] one from maps for native unit tests, which records what was read.
//!
//! ```
//! use velero_wasm_sdk::environment::{Environment, FakeEnvironment};
//!
//! /// The web-identity token of the pod, from the file its variable names.
//! fn token(env: &dyn Environment) -> Result<String, String> {
//!     let bytes = env.read_env_file("AWS_WEB_IDENTITY_TOKEN_FILE")?;
//!     String::from_utf8(bytes).map_err(|_| "the token file is not UTF-8".to_string())
//! }
//!
//! let env = FakeEnvironment::new()
//!     .in_namespace("velero")
//!     .with_file("AWS_WEB_IDENTITY_TOKEN_FILE", b"eyJ.token");
//! assert_eq!(token(&env).unwrap(), "eyJ.token");
//! assert_eq!(env.reads(), ["file AWS_WEB_IDENTITY_TOKEN_FILE"]);
//! assert!(token(&FakeEnvironment::new()).unwrap_err().contains("not set"));
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;

/// The `environment` capability, so that logic reading Velero's namespace, variables or token files
/// runs against a [`FakeEnvironment`] in native unit tests.
pub trait Environment {
    /// The namespace Velero runs in ("" when the host does not know it).
    fn velero_namespace(&self) -> String;
    /// An environment variable of the host process (`[grant] env`); `None` when unset.
    fn variable(&self, name: &str) -> Result<Option<String>, String>;
    /// The contents of the file named by the environment variable `variable` (`[grant] env-files`).
    fn read_env_file(&self, variable: &str) -> Result<Vec<u8>, String>;
}

/// The host's `environment` capability. Outside a wasm32 build (native unit tests) there is no host:
/// the namespace is "" and reads fail saying so.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostEnvironment;

impl Environment for HostEnvironment {
    fn velero_namespace(&self) -> String {
        velero_namespace()
    }
    fn variable(&self, name: &str) -> Result<Option<String>, String> {
        variable(name)
    }
    fn read_env_file(&self, variable: &str) -> Result<Vec<u8>, String> {
        read_env_file(variable)
    }
}

/// An environment from maps, for native unit tests: Velero's namespace, variables (all granted) and
/// the files they name. It records each read.
#[derive(Debug, Default, Clone)]
pub struct FakeEnvironment {
    namespace: String,
    variables: BTreeMap<String, String>,
    files: BTreeMap<String, Vec<u8>>,
    reads: RefCell<Vec<String>>,
}

impl FakeEnvironment {
    /// No namespace, no variables.
    pub fn new() -> FakeEnvironment {
        FakeEnvironment::default()
    }

    /// Velero runs in `namespace`.
    pub fn in_namespace(mut self, namespace: &str) -> FakeEnvironment {
        self.set_namespace(namespace);
        self
    }

    /// Sets the variable `name`.
    pub fn with_variable(mut self, name: &str, value: &str) -> FakeEnvironment {
        self.set_variable(name, value);
        self
    }

    /// Sets the variable `variable` (to a path, unless it is set already) and the contents of the file
    /// it names.
    pub fn with_file(mut self, variable: &str, contents: &[u8]) -> FakeEnvironment {
        self.set_file(variable, contents);
        self
    }

    /// Changes Velero's namespace ("": unknown).
    pub fn set_namespace(&mut self, namespace: &str) {
        self.namespace = namespace.to_string();
    }

    /// Sets the variable `name`.
    pub fn set_variable(&mut self, name: &str, value: &str) {
        self.variables.insert(name.to_string(), value.to_string());
    }

    /// Sets the file named by `variable`, and the variable if it is not set.
    pub fn set_file(&mut self, variable: &str, contents: &[u8]) {
        self.variables
            .entry(variable.to_string())
            .or_insert_with(|| format!("/var/run/secrets/{}", variable.to_lowercase()));
        self.files.insert(variable.to_string(), contents.to_vec());
    }

    /// What was read, in order: `variable NAME` or `file VARIABLE`.
    pub fn reads(&self) -> Vec<String> {
        self.reads.borrow().clone()
    }
}

impl Environment for FakeEnvironment {
    fn velero_namespace(&self) -> String {
        self.namespace.clone()
    }
    fn variable(&self, name: &str) -> Result<Option<String>, String> {
        self.reads.borrow_mut().push(format!("variable {name}"));
        Ok(self.variables.get(name).cloned())
    }
    fn read_env_file(&self, variable: &str) -> Result<Vec<u8>, String> {
        self.reads.borrow_mut().push(format!("file {variable}"));
        let Some(path) = self.variables.get(variable) else {
            return Err(format!("environment variable {variable} is not set"));
        };
        self.files
            .get(variable)
            .cloned()
            .ok_or_else(|| format!("cannot read {path} (named by {variable}): not found"))
    }
}

/// The namespace Velero runs in ("" when the host does not know it).
pub fn velero_namespace() -> String {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::environment::velero_namespace();
    #[cfg(not(target_arch = "wasm32"))]
    String::new()
}

/// An environment variable of the host process (`[grant] env`); `None` when unset.
pub fn variable(name: &str) -> Result<Option<String>, String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::environment::variable(name);
    #[cfg(not(target_arch = "wasm32"))]
    Err(crate::no_host(&format!("environment variable {name}")))
}

/// The contents of the file named by the environment variable `variable` (`[grant] env-files`).
pub fn read_env_file(variable: &str) -> Result<Vec<u8>, String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::environment::read_env_file(variable);
    #[cfg(not(target_arch = "wasm32"))]
    Err(crate::no_host(&format!("the file named by {variable}")))
}
