//! The `config` capability: the module's settings, from the `[settings]` table of its manifest.

use super::CallState;
use crate::bindings::velero_wasm::plugin::config::Host;

impl Host for CallState {
    fn get(&mut self, key: String) -> Option<String> {
        self.caps.settings.get(&key).cloned()
    }

    fn all(&mut self) -> Vec<(String, String)> {
        self.caps
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
