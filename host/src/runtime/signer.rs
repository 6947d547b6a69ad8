//! Calls into the module that exports `velero-wasm:plugin/signing`: typed, for the host's own use
//! (the `sign` command), and forwarded, for other modules' `signing` import.
//!
//! Each call runs in a fresh instance of the signing module, in a store of its own: under that
//! module's grant (its HTTP allow-list), memory cap and deadline, with its own log tag. The caller's
//! deadline still bounds it, since the caller's call is cancelled as a whole. Nested instances come
//! from the engine's pool, which has room for one per running call.

use std::sync::Arc;

use wasmtime::component::{Instance, Val};
use wasmtime::{Engine, Store};

use super::call::{run_in_store, CallInput, Host};
use super::error::{CallError, Fault};
use super::registry::Registry;
use crate::bindings::signer::wit_signing as wit;
use crate::bindings::signer::SignerIndices;
use crate::capabilities::signing::{Forwarded, SigningService, INTERFACE};
use crate::capabilities::{CallState, Services};

/// The WIT types of the `signing` interface, as the host sees them.
pub use crate::bindings::signer::wit_signing as types;

/// The route to the signing module.
pub struct Signing {
    engine: Engine,
    registry: Arc<Registry>,
    services: Arc<Services>,
}

type Boxed<'a, R> =
    std::pin::Pin<Box<dyn std::future::Future<Output = wasmtime::Result<R>> + Send + 'a>>;

impl Signing {
    pub(super) fn new(engine: Engine, registry: Arc<Registry>, services: Arc<Services>) -> Signing {
        Signing {
            engine,
            registry,
            services,
        }
    }

    /// Runs `call` in a fresh instance of the signing module. `function` names the call in logs and
    /// errors.
    async fn run<R: Send + 'static>(
        &self,
        function: &str,
        call: impl for<'a> FnOnce(&'a Instance, SignerIndices, &'a mut Store<CallState>) -> Boxed<'a, R>
            + Send,
    ) -> Result<R, CallError> {
        let catalog = self.registry.snapshot();
        let module = catalog.signer().ok_or(CallError::NoSigner)?.clone();
        let input = CallInput::of(&module, function, None);
        if let Some(why) = module.refusal() {
            return Err(CallError::Refused {
                module: module.name.to_string(),
                action: function.to_string(),
                item: String::new(),
                why: Arc::from(why),
            });
        }
        let exports = module
            .exports()
            .await
            .map_err(|problem| CallError::fault(&input.id, Fault::Instantiate(problem)))?;
        let Some(export) = &exports.signing else {
            return Err(CallError::NoSigner);
        };
        let indices = export.indices.clone();
        let host = Host {
            engine: &self.engine,
            services: &self.services,
            signing: None,
        };
        let (result, id) = run_in_store(host, &export.pre, input, move |instance, store| {
            call(instance, indices, store)
        })
        .await;
        result.map_err(|fault| CallError::fault(&id, fault))
    }

    /// A presigned S3 GET URL.
    pub async fn presign_s3(
        &self,
        request: wit::S3Request,
        credentials: wit::AwsCredentials,
    ) -> Result<Result<String, wit::SigningError>, CallError> {
        self.run("presign-s3", move |instance, indices, store| {
            Box::pin(async move {
                let signer = indices.load(&mut *store, instance)?;
                signer
                    .velero_wasm_plugin_signing()
                    .call_presign_s3(&mut *store, &request, &credentials)
                    .await
            })
        })
        .await
    }

    /// An Azure Blob URL with a SAS.
    pub async fn azure_sas(
        &self,
        request: wit::AzureRequest,
        credentials: wit::AzureCredentials,
    ) -> Result<Result<String, wit::SigningError>, CallError> {
        self.run("azure-sas", move |instance, indices, store| {
            Box::pin(async move {
                let signer = indices.load(&mut *store, instance)?;
                signer
                    .velero_wasm_plugin_signing()
                    .call_azure_sas(&mut *store, &request, &credentials)
                    .await
            })
        })
        .await
    }

    /// What AWS credential data says to use.
    pub(crate) async fn parse_aws_credentials(
        &self,
        data: String,
    ) -> Result<Result<wit::AwsCredentialSource, wit::SigningError>, CallError> {
        self.run("parse-aws-credentials", move |instance, indices, store| {
            Box::pin(async move {
                let signer = indices.load(&mut *store, instance)?;
                signer
                    .velero_wasm_plugin_signing()
                    .call_parse_aws_credentials(&mut *store, &data)
                    .await
            })
        })
        .await
    }
}

impl SigningService for Signing {
    fn forward<'a>(
        &'a self,
        caller: &'a str,
        function: &'a str,
        params: Vec<Val>,
        result_count: usize,
    ) -> Forwarded<'a> {
        Box::pin(async move {
            tracing::debug!(module = caller, function, "forwarding a signing call");
            let name = function.to_string();
            let outcome = self
                .run(function, move |instance, _indices, store| {
                    let function = name;
                    Box::pin(async move {
                        let interface = instance
                            .get_export_index(&mut *store, None, INTERFACE)
                            .ok_or_else(|| wasmtime::format_err!("{INTERFACE} is not exported"))?;
                        let index = instance
                            .get_export_index(&mut *store, Some(&interface), &function)
                            .ok_or_else(|| {
                                wasmtime::format_err!("{INTERFACE} has no function {function}")
                            })?;
                        let func = instance.get_func(&mut *store, index).ok_or_else(|| {
                            wasmtime::format_err!("{INTERFACE}#{function} is not a function")
                        })?;
                        let mut results = vec![Val::Bool(false); result_count];
                        func.call_async(&mut *store, &params, &mut results).await?;
                        Ok(results)
                    })
                })
                .await;
            outcome.map_err(|e| e.to_string())
        })
    }
}
