//! For benchmarks only (`benches/call.rs`), hidden from the docs: one instance called again and again, to measure what the fresh instance of
//! every served call costs. Serving never does this: state would leak from one item to the next.

use wasmtime::Store;

use super::Runtime;
use crate::action::BackupRequest;
use crate::bindings::{wit_actions, Plugin};
use crate::capabilities::{CallId, CallState};

/// An instantiated module kept across calls.
pub struct WarmInstance {
    store: Store<CallState>,
    plugin: Plugin,
    action: String,
}

impl Runtime {
    /// Instantiates the module of a backup action once, for [`WarmInstance::backup`].
    #[doc(hidden)]
    pub async fn warm_instance(&self, action: &str) -> anyhow::Result<WarmInstance> {
        let entry = self
            .action(action)
            .ok_or_else(|| anyhow::anyhow!("no action {action}"))?;
        let module = &entry.module;
        let ctx = CallId::new(module.name.clone(), action, None);
        let state = CallState::new(
            ctx,
            module.caps.clone(),
            self.services.clone(),
            &module.limits,
        );
        let mut store = Store::new(&self.compiler.engine, state);
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
}

impl WarmInstance {
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
