//! For benchmarks only (`benches/call.rs`), hidden from the docs: one instance called again and again, to measure what the fresh instance of
//! every served call costs. Serving never does this: state would leak from one item to the next.

use std::sync::Arc;

use wasmtime::Store;

use super::registry::ActionEntry;
use crate::action::BackupRequest;
use crate::bindings::{wit_actions, Plugin};
use crate::capabilities::{CallId, CallState, Services};

/// An instantiated module kept across calls.
pub struct WarmInstance {
    store: Store<CallState>,
    plugin: Plugin,
    action: String,
}

impl WarmInstance {
    /// Instantiates the module of `entry` (whose backup action is `action`) once, under its grant
    /// and limits, in a store of its own.
    pub(super) async fn new(
        engine: &wasmtime::Engine,
        services: &Arc<Services>,
        entry: &ActionEntry,
        action: &str,
    ) -> anyhow::Result<WarmInstance> {
        let module = &entry.module;
        let ctx = CallId::new(module.name.clone(), action, None);
        let state = CallState::new(ctx, module.caps.clone(), services.clone(), &module.limits);
        let mut store = Store::new(engine, state);
        store.limiter(CallState::limiter);
        store.epoch_deadline_async_yield_and_update(1);
        let exports = module
            .exports()
            .await
            .map_err(|problem| anyhow::anyhow!("{problem}"))?;
        let pre = exports
            .pre
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("module {} exports no actions", module.name))?;
        let plugin = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        Ok(WarmInstance {
            store,
            plugin,
            action: action.to_string(),
        })
    }

    /// Calls the backup action on the kept instance; returns the item it produced.
    pub async fn backup(&mut self, request: &BackupRequest) -> anyhow::Result<String> {
        let wit_request = wit_actions::BackupRequest {
            item: request.item.clone(),
            backup: request.backup.clone(),
        };
        let response = self
            .plugin
            .velero_wasm_plugin_actions()
            .call_backup(&mut self.store, &self.action, &wit_request)
            .await
            .map_err(|e| anyhow::anyhow!("{e:#}"))?
            .map_err(|e| anyhow::anyhow!(e))?;
        Ok(response.item.unwrap_or(wit_request.item))
    }
}
