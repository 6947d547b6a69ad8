//! Which signing a snapshot URL needs (docs/hcp.md#s5-4), with upstream's outer error texts. The signing
//! itself is done by the `signing` module, through the `signing` import.

use velero_wasm_sdk::signing::SnapshotUrl;
use velero_wasm_sdk::Object;

use super::{azure, s3, MAX_URL};
use crate::context::Context;

const S3_ERROR: &str = "error generating pre-signed URL for etcd snapshot";
const AZURE_ERROR: &str = "error generating SAS URL for etcd snapshot";

/// The URL to restore from: an `s3://` URL presigned, an Azure Blob URL with a SAS, anything else as
/// it is. `resource` is the HostedCluster's or HostedControlPlane's name (the STS session name).
pub fn sign(ctx: &Context, backup: &Object, resource: &str, url: &str) -> Result<String, String> {
    let context = if url.starts_with("s3://") {
        S3_ERROR
    } else {
        AZURE_ERROR
    };
    let parsed = ctx
        .signer
        .parse_snapshot_url(url)
        .map_err(|e| format!("{context}: {}", e.message()))?;
    let (context, signed) = match parsed {
        SnapshotUrl::S3((bucket, key)) => {
            (S3_ERROR, s3::presign(ctx, backup, resource, bucket, key))
        }
        SnapshotUrl::AzureBlob((account, container, blob)) => (
            AZURE_ERROR,
            azure::sas(ctx, backup, account, container, blob),
        ),
        SnapshotUrl::Unsigned => return Ok(url.to_string()),
    };
    let signed = signed.map_err(|e| format!("{context}: {e}"))?;
    if signed.len() > MAX_URL {
        return Err(format!(
            "{context}: the signed URL is {} characters long, and restoreSnapshotURL accepts at most {MAX_URL} \
             (a long STS session token does that: use static credentials for the restore)",
            signed.len()
        ));
    }
    Ok(signed)
}
