//! The module's settings: the `[settings]` table of its manifest, as the operator set them
//! (`wit/config.wit`). [`Config`] is the capability as a trait, [`HostConfig`] the host's, and
//! [`FakeConfig`] settings from a map for native unit tests, which records the keys read.
//!
//! ```
//! use velero_wasm_sdk::config::{Config, FakeConfig};
//!
//! /// How many times to retry: the `retries` setting, 3 when unset.
//! fn retries(config: &dyn Config) -> Result<u32, String> {
//!     match config.get("retries") {
//!         None => Ok(3),
//!         Some(text) => text
//!             .parse()
//!             .map_err(|_| format!("setting retries = {text:?} is not a number")),
//!     }
//! }
//!
//! assert_eq!(retries(&FakeConfig::new()), Ok(3));
//! let config = FakeConfig::new().with("retries", "5");
//! assert_eq!(retries(&config), Ok(5));
//! assert_eq!(config.reads(), ["retries"]);
//! assert!(retries(&FakeConfig::new().with("retries", "many")).is_err());
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;

/// The `config` capability, so that logic reading settings runs against a [`FakeConfig`] in native
/// unit tests.
pub trait Config {
    /// One setting, if set.
    fn get(&self, key: &str) -> Option<String>;
    /// Every setting, by key.
    fn all(&self) -> Vec<(String, String)>;
}

/// The host's `config` capability. Outside a wasm32 build (native unit tests) there is no host and
/// no setting is set.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostConfig;

impl Config for HostConfig {
    fn get(&self, key: &str) -> Option<String> {
        get(key)
    }
    fn all(&self) -> Vec<(String, String)> {
        all()
    }
}

/// Settings from a map, for native unit tests. It records the keys read.
#[derive(Debug, Default, Clone)]
pub struct FakeConfig {
    settings: BTreeMap<String, String>,
    reads: RefCell<Vec<String>>,
}

impl FakeConfig {
    /// No settings.
    pub fn new() -> FakeConfig {
        FakeConfig::default()
    }

    /// Sets `key`.
    pub fn with(mut self, key: &str, value: &str) -> FakeConfig {
        self.settings.insert(key.to_string(), value.to_string());
        self
    }

    /// The keys read by [`Config::get`], in order.
    pub fn reads(&self) -> Vec<String> {
        self.reads.borrow().clone()
    }
}

impl Config for FakeConfig {
    fn get(&self, key: &str) -> Option<String> {
        self.reads.borrow_mut().push(key.to_string());
        self.settings.get(key).cloned()
    }
    fn all(&self) -> Vec<(String, String)> {
        self.settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// One setting, if set.
pub fn get(key: &str) -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::config::get(key);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = key;
        None
    }
}

/// Every setting, by key.
pub fn all() -> Vec<(String, String)> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::velero_wasm::plugin::config::all();
    #[cfg(not(target_arch = "wasm32"))]
    Vec::new()
}
