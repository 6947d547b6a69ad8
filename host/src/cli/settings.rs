//! A case's `settings` over its module's manifest: the module read again from where it was loaded
//! and put back in service with them (`velero-wasm test`, and `run` for the suites' cases).

use std::collections::BTreeMap;

use super::failure::Failure;
use super::module_args::ModuleArgs;
use crate::modules::{stock_modules, stock_override, ModuleSource, Origin};
use crate::runtime::Runtime;

/// Puts the module that provides `action` back in service with `settings` over its manifest's
/// (a case's `settings`), read again from where it was loaded: the module describes its actions again,
/// since what it describes may depend on them. An unknown action is left to the caller to report.
pub(super) async fn apply_settings(
    runtime: &Runtime,
    modules: &ModuleArgs,
    action: &str,
    settings: &BTreeMap<String, serde_json::Value>,
) -> Result<(), Failure> {
    let Some(entry) = runtime.action(action) else {
        return Ok(());
    };
    let module = &entry.module;
    let mut source = module_source(&module.name, &module.origin, modules)?;
    if source.sha256 != module.sha256 {
        return Err(Failure::bad_input(format!(
            "settings: module {} changed while the suite ran ({} was loaded, {} is there now)",
            module.name, module.sha256, source.sha256
        )));
    }
    source
        .manifest
        .settings
        .extend(settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    runtime.load(source).await.map_err(|e| {
        Failure::bad_input(format!(
            "settings: module {} does not load with them: {e}",
            module.name
        ))
    })?;
    Ok(())
}

/// A loaded module's source, read again from its origin.
fn module_source(
    name: &str,
    origin: &Origin,
    modules: &ModuleArgs,
) -> Result<ModuleSource, Failure> {
    let stock = || {
        stock_modules()
            .into_iter()
            .flatten()
            .find(|source| source.name == name)
            .ok_or_else(|| Failure::failed(format!("the stock module {name} is not built in")))
    };
    match origin {
        Origin::Stock => stock(),
        Origin::File(path) => crate::modules::read_module(path, modules.trusted_keys()?.as_ref())
            .map_err(|e| Failure::bad_input(format!("settings: {}: {e}", path.display()))),
        Origin::Override(from) => {
            let Origin::File(path) = from.as_ref() else {
                return Err(Failure::bad_input(format!(
                    "settings: module {name} comes from {origin}, which a suite cannot read again"
                )));
            };
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::bad_input(format!("settings: {}: {e}", path.display())))?;
            stock_override::apply(&stock()?, &text, from.as_ref().clone())
                .map_err(|e| Failure::bad_input(format!("settings: {}: {e}", path.display())))
        }
        Origin::ConfigMap { .. } => Err(Failure::bad_input(format!(
            "settings: module {name} comes from {origin}, which a suite cannot read again"
        ))),
    }
}
