//! The `signing` import: a module's calls are forwarded to the module that exports
//! `velero-wasm:plugin/signing`, which runs them in a fresh instance of its own, under its own grant
//! and limits (see [`crate::runtime::Signing`]).
//!
//! The forwarding is generic: each function of the interface is defined with dynamic values, which
//! the host passes through unchanged (the interface has no resources). When the call cannot be made
//! (no signing module, a trap, a deadline), the importer gets `signing-error::unavailable` with the
//! reason instead of trapping.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use wasmtime::component::{Linker, Val};

use super::budget::WorkBudget;

/// The interface, as imported and exported.
pub(crate) const INTERFACE: &str = "velero-wasm:plugin/signing@0.1.2";

/// Its functions. Every one returns `result<_, signing-error>`.
pub(crate) const FUNCTIONS: &[&str] = &[
    "parse-snapshot-url",
    "parse-aws-credentials",
    "presign-s3",
    "azure-sas",
];

/// A boxed future of a forwarded call.
pub(crate) type Forwarded<'a> = Pin<Box<dyn Future<Output = Result<Vec<Val>, String>> + Send + 'a>>;

/// Where the import's calls go: the runtime's [`crate::runtime::Signing`].
pub(crate) trait SigningService: Send + Sync {
    /// Calls `function` of the signing module with `params`, on behalf of module `caller`; returns
    /// its `results` (as many as `result_count`), or why the call could not be made.
    fn forward<'a>(
        &'a self,
        caller: &'a str,
        function: &'a str,
        params: Vec<Val>,
        result_count: usize,
    ) -> Forwarded<'a>;
}

/// What the `signing` import sees of a call: the calling module's name, where its calls go, and the
/// work budget it charges.
pub(crate) struct SigningView<'a> {
    pub(super) caller: &'a Arc<str>,
    /// A shadow's call: its signing trouble is logged below warn (docs/operation.md#what-velero-counts).
    pub(super) shadow: bool,
    pub(super) service: Option<&'a Arc<dyn SigningService>>,
    pub(super) budget: &'a mut WorkBudget,
}

/// Defines the `signing` import in the linker (modules that do not import it are unaffected); each
/// call sees the store's data through `view`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> SigningView<'_>,
) -> wasmtime::Result<()> {
    let mut instance = linker.instance(INTERFACE)?;
    for &function in FUNCTIONS {
        instance.func_new_async(function, move |mut store, ty, params, results| {
            Box::new(async move {
                let view = view(store.data_mut());
                let counted = view.budget.charge();
                let service = view.service.cloned();
                let caller = view.caller.clone();
                let shadow = view.shadow;
                let outcome = match (counted, service) {
                    (Err(limit), _) => Err(limit.to_string()),
                    (Ok(()), None) => {
                        Err("signing is not available inside a signing call".to_string())
                    }
                    (Ok(()), Some(service)) => {
                        service
                            .forward(&caller, function, params.to_vec(), ty.results().len())
                            .await
                    }
                };
                match outcome {
                    Ok(values) if values.len() == results.len() => {
                        results.clone_from_slice(&values)
                    }
                    Ok(values) => {
                        return Err(wasmtime::format_err!(
                            "signing {function} returned {} values where {} were expected",
                            values.len(),
                            results.len()
                        ))
                    }
                    Err(reason) => {
                        if shadow {
                            tracing::info!(
                                shadow = true,
                                module = &*caller,
                                function,
                                "signing unavailable: {reason}"
                            );
                        } else {
                            tracing::warn!(
                                module = &*caller,
                                function,
                                "signing unavailable: {reason}"
                            );
                        }
                        if let Some(slot) = results.first_mut() {
                            *slot = unavailable(reason);
                        }
                    }
                }
                Ok(())
            })
        })?;
    }
    Ok(())
}

/// `err(signing-error::unavailable(reason))`.
fn unavailable(reason: String) -> Val {
    Val::Result(Err(Some(Box::new(Val::Variant(
        "unavailable".to_string(),
        Some(Box::new(Val::String(reason))),
    )))))
}
