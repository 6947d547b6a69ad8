//! The Azure Blob SAS path (docs/hcp.md#s5-7): a service SAS with the storage account key, or a user
//! delegation SAS with a Microsoft Entra ID identity (from the credential Secret, or the workload
//! identity of the Velero pod).

use velero_wasm_sdk::signing::{AadCredentials, AadSecret, AzureCredentials, AzureRequest};
use velero_wasm_sdk::Object;

use super::credentials::{dotenv, fetch};
use crate::bsl;
use crate::context::Context;

/// The default variable of the account key in the credential data.
pub const ACCOUNT_KEY_VARIABLE: &str = "AZURE_STORAGE_ACCOUNT_ACCESS_KEY";
/// The variable naming the projected token of workload identity.
pub const FEDERATED_TOKEN_VARIABLE: &str = "AZURE_FEDERATED_TOKEN_FILE";
/// Validity of the SAS, in seconds.
pub const EXPIRES: u32 = 3600;

/// A SAS URL for a blob. Errors are unwrapped (the caller adds upstream's prefix).
pub fn sas(
    ctx: &Context,
    backup: &Object,
    account: String,
    container: String,
    blob: String,
) -> Result<String, String> {
    let fetched = fetch(ctx, backup)?;
    let use_aad = bsl::config(&fetched.bsl, "useAAD") == "true";
    let data = match fetched.credentials {
        Ok(data) => Some(String::from_utf8_lossy(&data).into_owned()),
        // No Secret, none named, and Entra ID: the pod's workload identity.
        Err(_) if !fetched.named && use_aad => None,
        Err(e) => return Err(e),
    };
    let credentials = if use_aad {
        AzureCredentials::Aad(aad(ctx, data.as_deref())?)
    } else {
        let variable = match bsl::config(&fetched.bsl, "storageAccountKeyEnvVar") {
            "" => ACCOUNT_KEY_VARIABLE,
            v => v,
        };
        let key = data
            .as_deref()
            .and_then(|d| dotenv(d, variable))
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                format!("error parsing Azure credentials: {variable} not found in credential data")
            })?;
        AzureCredentials::AccountKey(key.to_string())
    };
    let endpoint = bsl::config(&fetched.bsl, "storageAccountURI");
    let request = AzureRequest {
        account,
        container,
        blob,
        endpoint: (!endpoint.is_empty()).then(|| endpoint.to_string()),
        permissions: "r".into(),
        expires_seconds: EXPIRES,
        now: None,
    };
    ctx.signer
        .azure_sas(&request, &credentials)
        .map_err(|e| e.message().to_string())
}

/// The Entra ID identity (docs/hcp.md#s5-7 step 6.1, docs/signing.md#s6-8): tenant and client from the credential data (or, with
/// none, from the environment); a client secret from the data, else the workload identity's federated
/// token, else the node's managed identity of that client id (IMDS).
fn aad(ctx: &Context, data: Option<&str>) -> Result<AadCredentials, String> {
    let env = |name: &str| -> Result<String, String> {
        Ok(ctx
            .env
            .variable(name)?
            .unwrap_or_default()
            .trim()
            .to_string())
    };
    let (tenant, client, secret, cloud) = match data {
        Some(data) => {
            let get = |k: &str| dotenv(data, k).unwrap_or("").to_string();
            for required in ["AZURE_TENANT_ID", "AZURE_CLIENT_ID"] {
                if get(required).is_empty() {
                    return Err(format!(
                        "error parsing Azure AAD credentials: {required} not found in credential data"
                    ));
                }
            }
            (
                get("AZURE_TENANT_ID"),
                get("AZURE_CLIENT_ID"),
                get("AZURE_CLIENT_SECRET"),
                get("AZURE_CLOUD_NAME"),
            )
        }
        None => {
            let (tenant, client) = (env("AZURE_TENANT_ID")?, env("AZURE_CLIENT_ID")?);
            if tenant.is_empty() || client.is_empty() {
                return Err("AZURE_TENANT_ID and AZURE_CLIENT_ID env vars are required when no credential data is provided".into());
            }
            (tenant, client, String::new(), env("AZURE_CLOUD_NAME")?)
        }
    };
    let secret = if !secret.is_empty() {
        AadSecret::ClientSecret(secret)
    } else if !env(FEDERATED_TOKEN_VARIABLE)?.is_empty() {
        let token = ctx
            .env
            .read_env_file(FEDERATED_TOKEN_VARIABLE)
            .map_err(|e| format!("error creating AAD token provider: {e}"))?;
        AadSecret::FederatedToken(String::from_utf8_lossy(&token).trim().to_string())
    } else {
        AadSecret::ManagedIdentity(ctx.settings.imds_endpoint.clone())
    };
    Ok(AadCredentials {
        tenant_id: tenant,
        client_id: client,
        secret,
        cloud_name: cloud,
        authority: ctx.settings.aad_authority.clone(),
    })
}
