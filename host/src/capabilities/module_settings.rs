//! The `config` capability: the module's settings, from the `[settings]` table of its manifest.

use std::collections::BTreeMap;

use crate::bindings::velero_wasm::plugin::config::Host;

/// What the `config` capability sees of a call: the module's settings, nothing else.
pub(crate) struct ConfigView<'a> {
    pub(super) settings: &'a BTreeMap<String, String>,
}

/// The `config` import's host functions take a [`ConfigView`] of the call.
pub(super) struct ConfigHost;

impl wasmtime::component::HasData for ConfigHost {
    type Data<'a> = ConfigView<'a>;
}

impl Host for ConfigView<'_> {
    fn get(&mut self, key: String) -> Option<String> {
        self.settings.get(&key).cloned()
    }

    fn all(&mut self) -> Vec<(String, String)> {
        self.settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
