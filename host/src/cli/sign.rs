//! `velero-wasm sign s3|azure`: a signed object-store URL, made by the signing component (the module
//! named `signing`: the stock one, or one from `--modules`) exactly as the hcp restore action has it
//! made. The URL goes to stdout; exit 0 on success, 1 when a remote service or the module fails, 2 on
//! bad or missing input.
//!
//! ```text
//! velero-wasm sign s3 --bucket B --key K --region R --expires SECONDS
//!     (--access-key-id A --secret-access-key S [--session-token T]
//!      | --credentials-file F | --role-arn ARN --web-identity-token-file F)
//!     [--endpoint URL] [--path-style] [--session-name N] [--sts-endpoint URL] [--now RFC3339]
//! velero-wasm sign azure --account A --container C --blob B --permissions r --expires SECONDS
//!     (--account-key KEY | --delegation-key-file F
//!      | --tenant-id T --client-id C (--client-secret-file F | --federated-token-file F | --access-token-file F))
//!     [--endpoint URL] [--cloud NAME] [--authority URL] [--now RFC3339]
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use super::failure::{Failure, EXIT_OK};
use super::module_args::ModuleArgs;
use crate::bindings::signer::wit_signing as wit;
use crate::capabilities::{Clock, Environment, Services};
use crate::cluster::NoCluster;
use crate::config::Config;
use crate::modules::{chosen_stock_modules, scan_directory};
use crate::runtime::{CallError, Runtime};

/// The module the command runs.
const MODULE: &str = "signing";

/// Arguments of `sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    #[command(subcommand)]
    target: Target,
}

#[derive(Debug, clap::Subcommand)]
enum Target {
    /// A presigned S3 GET URL (AWS Signature V4).
    S3(S3Args),
    /// An Azure Blob URL with a SAS (account key or user delegation).
    Azure(AzureArgs),
}

/// What every signing command shares.
#[derive(Debug, clap::Args)]
struct Common {
    /// Validity of the URL in seconds (0 means 3600).
    #[arg(long, value_name = "SECONDS")]
    expires: u32,

    /// Sign as of this instant (e.g. 2026-04-08T12:00:00Z) instead of now; the same input then gives the same URL.
    #[arg(long, value_name = "RFC3339")]
    now: Option<String>,

    #[command(flatten)]
    modules: ModuleArgs,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("credentials").required(true).args(["access_key_id", "credentials_file", "role_arn"])))]
struct S3Args {
    /// Bucket.
    #[arg(long)]
    bucket: String,
    /// Object key, not percent-encoded.
    #[arg(long)]
    key: String,
    /// AWS region.
    #[arg(long)]
    region: String,
    /// Static access key ID.
    #[arg(long, requires = "secret_access_key", value_name = "ID")]
    access_key_id: Option<String>,
    /// Static secret access key.
    #[arg(long, requires = "access_key_id", value_name = "KEY")]
    secret_access_key: Option<String>,
    /// Session token of temporary keys.
    #[arg(long, requires = "access_key_id", value_name = "TOKEN")]
    session_token: Option<String>,
    /// AWS credential data as a BSL Secret holds it: a shared-credentials file (profile `default`) or a
    /// bare role ARN (the token file then comes from env AWS_WEB_IDENTITY_TOKEN_FILE).
    #[arg(long, value_name = "FILE")]
    credentials_file: Option<PathBuf>,
    /// Role to assume with a web identity (STS AssumeRoleWithWebIdentity).
    #[arg(long, requires = "web_identity_token_file", value_name = "ARN")]
    role_arn: Option<String>,
    /// File holding the web-identity token.
    #[arg(long, requires = "role_arn", value_name = "FILE")]
    web_identity_token_file: Option<PathBuf>,
    /// Role session name for STS (default `hypershift-oadp`).
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        value_name = "NAME"
    )]
    session_name: String,
    /// STS endpoint (default https://sts.amazonaws.com).
    #[arg(long, value_name = "URL")]
    sts_endpoint: Option<String>,
    /// S3-compatible endpoint, scheme://host[:port] (path-style URLs).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Path-style URL on AWS (s3.<region>.amazonaws.com/<bucket>/<key>).
    #[arg(long)]
    path_style: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("credentials").required(true).args(["account_key", "delegation_key_file", "tenant_id"])))]
#[command(group(clap::ArgGroup::new("aad-secret").args(["client_secret_file", "federated_token_file", "access_token_file"])))]
struct AzureArgs {
    /// Storage account.
    #[arg(long)]
    account: String,
    /// Container.
    #[arg(long)]
    container: String,
    /// Blob name, not percent-encoded.
    #[arg(long)]
    blob: String,
    /// SAS permissions, e.g. `r`.
    #[arg(long)]
    permissions: String,
    /// Storage account key (base64): a service SAS.
    #[arg(long, value_name = "KEY")]
    account_key: Option<String>,
    /// A user delegation key as JSON (signedOid, signedTid, signedStart, signedExpiry, signedService,
    /// signedVersion, value): a user delegation SAS.
    #[arg(long, value_name = "FILE")]
    delegation_key_file: Option<PathBuf>,
    /// Entra ID tenant: get a token, then a delegation key, then sign.
    #[arg(long, requires_all = ["client_id", "aad-secret"], value_name = "ID")]
    tenant_id: Option<String>,
    /// Entra ID application (client) ID.
    #[arg(long, requires = "tenant_id", value_name = "ID")]
    client_id: Option<String>,
    /// File holding the client secret.
    #[arg(long, requires = "tenant_id", value_name = "FILE")]
    client_secret_file: Option<PathBuf>,
    /// File holding a federated (workload identity) token.
    #[arg(long, requires = "tenant_id", value_name = "FILE")]
    federated_token_file: Option<PathBuf>,
    /// File holding a storage access token already acquired.
    #[arg(long, requires = "tenant_id", value_name = "FILE")]
    access_token_file: Option<PathBuf>,
    /// Azure cloud (AzureChinaCloud, AzureUSGovernmentCloud; default public).
    #[arg(
        long,
        default_value = "",
        hide_default_value = true,
        value_name = "NAME"
    )]
    cloud: String,
    /// Entra ID authority (default from --cloud).
    #[arg(long, value_name = "URL")]
    authority: Option<String>,
    /// Blob service endpoint, scheme://host[:port] (storageAccountURI).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Runs the command; returns the exit status.
pub(crate) async fn sign(args: SignArgs, config: &Config) -> u8 {
    let outcome = match args.target {
        Target::S3(args) => s3(args, config).await,
        Target::Azure(args) => azure(args, config).await,
    };
    match outcome {
        Ok(url) => {
            println!("{url}");
            EXIT_OK
        }
        Err(failure) => {
            eprintln!("velero-wasm sign: {}", failure.message);
            failure.code
        }
    }
}

/// The clock and the explicit time of `--now`.
fn time(now: &Option<String>) -> Result<(Clock, Option<wit::Timestamp>), Failure> {
    let Some(text) = now else {
        return Ok((Clock::System, None));
    };
    let instant = humantime::parse_rfc3339_weak(text)
        .map_err(|e| Failure::bad_input(format!("--now {text:?} is not an RFC 3339 time: {e}")))?;
    let seconds = instant
        .duration_since(UNIX_EPOCH)
        .map_err(|_| Failure::bad_input(format!("--now {text:?} is before 1970")))?
        .as_secs() as i64;
    Ok((
        Clock::fixed(instant),
        Some(wit::Timestamp {
            seconds,
            nanoseconds: 0,
        }),
    ))
}

/// A runtime with only the module named `signing` loaded.
async fn runtime(modules: &ModuleArgs, clock: Clock, config: &Config) -> Result<Runtime, Failure> {
    let runtime = Runtime::new(Services::new(
        Arc::new(NoCluster::default()),
        clock,
        Environment::from_config(config),
    ))
    .map_err(|e| Failure::failed(format!("{e:#}")))?
    .with_compile_cache(super::module_args::compile_cache(config))
    .with_compile_budget(crate::runtime::CompileBudget::from_config(config))
    .with_compile_watch(super::compile_progress::watch());
    let mut sources: Vec<_> = chosen_stock_modules(&modules.stock)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|s| s.name == MODULE)
        .collect();
    if let Some(dir) = &modules.modules {
        let scan = scan_directory(dir, modules.trusted_keys()?.as_ref()).map_err(|e| {
            Failure::bad_input(format!("--modules {}: cannot be read: {e}", dir.display()))
        })?;
        sources.extend(scan.modules.into_iter().filter(|s| s.name == MODULE));
    }
    if let Some(error) = runtime.load_all(sources).await.into_iter().last() {
        return Err(Failure::failed(error.to_string()));
    }
    Ok(runtime)
}

/// The text of a file given by `flag`, as it is (a token file is sent verbatim): a regular file of at
/// most 1 MiB, as a module may read through `env-files`.
fn read_text(flag: &str, path: &Path) -> Result<String, Failure> {
    let failure = |e: String| Failure::bad_input(format!("--{flag} {}: {e}", path.display()));
    let bytes = crate::regular_file::read(path, crate::capabilities::environment::MAX_FILE)
        .map_err(|e| failure(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| failure(format!("is not UTF-8 text: {e}")))
}

/// The module's answer: the URL, or a failure (invalid input is exit 2, anything else 1).
fn answer(result: Result<Result<String, wit::SigningError>, CallError>) -> Result<String, Failure> {
    match result {
        Ok(Ok(url)) => Ok(url),
        Ok(Err(error)) => Err(signing_failure(error)),
        Err(CallError::NoSigner) => Err(Failure::failed(format!(
            "no module named {MODULE} is loaded"
        ))),
        Err(error) => Err(Failure::failed(error.to_string())),
    }
}

fn signing_failure(error: wit::SigningError) -> Failure {
    match error {
        wit::SigningError::Invalid(m) => Failure::bad_input(m),
        wit::SigningError::Remote(m)
        | wit::SigningError::Transport(m)
        | wit::SigningError::Unavailable(m) => Failure::failed(m),
    }
}

async fn s3(args: S3Args, config: &Config) -> Result<String, Failure> {
    let (clock, now) = time(&args.common.now)?;
    let runtime = runtime(&args.common.modules, clock, config).await?;
    let web_identity =
        |role_arn: String, token_file: &Path, flag: &str| -> Result<wit::AwsCredentials, Failure> {
            Ok(wit::AwsCredentials::WebIdentity(wit::WebIdentity {
                role_arn,
                token: read_text(flag, token_file)?,
                session_name: args.session_name.clone(),
                sts_endpoint: args.sts_endpoint.clone(),
            }))
        };
    let credentials = if let (Some(id), Some(secret)) =
        (&args.access_key_id, &args.secret_access_key)
    {
        wit::AwsCredentials::Keys(wit::AwsKeys {
            access_key_id: id.clone(),
            secret_access_key: secret.clone(),
            session_token: args.session_token.clone(),
        })
    } else if let (Some(arn), Some(file)) = (&args.role_arn, &args.web_identity_token_file) {
        web_identity(arn.clone(), file, "web-identity-token-file")?
    } else if let Some(path) = &args.credentials_file {
        let data = read_text("credentials-file", path)?;
        let source = runtime.signing().parse_aws_credentials(data).await;
        match source.map_err(|e| Failure::failed(e.to_string()))? {
            Err(error) => return Err(signing_failure(error).prefixed(&format!("--credentials-file {}: ", path.display()))),
            Ok(wit::AwsCredentialSource::Keys(keys)) => wit::AwsCredentials::Keys(keys),
            Ok(wit::AwsCredentialSource::WebIdentity((arn, Some(file)))) => web_identity(arn, Path::new(&file), "credentials-file's web_identity_token_file")?,
            Ok(wit::AwsCredentialSource::WebIdentity((arn, None))) => match config.aws_web_identity_token_file() {
                Some(file) => web_identity(arn, Path::new(&file), "credentials-file's AWS_WEB_IDENTITY_TOKEN_FILE")?,
                None => {
                    return Err(Failure::bad_input(format!(
                        "credential data is a bare IAM role ARN ({arn}) but AWS_WEB_IDENTITY_TOKEN_FILE is not set: IRSA requires a projected service account token"
                    )))
                }
            },
        }
    } else {
        return Err(Failure::bad_input("give --access-key-id and --secret-access-key, --credentials-file, or --role-arn and --web-identity-token-file"));
    };
    let request = wit::S3Request {
        bucket: args.bucket,
        key: args.key,
        region: args.region,
        endpoint: args.endpoint,
        force_path_style: args.path_style,
        expires_seconds: args.common.expires,
        now,
    };
    answer(runtime.signing().presign_s3(request, credentials).await)
}

/// A delegation key file: JSON with the fields of Get User Delegation Key's answer.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DelegationKeyFile {
    #[serde(alias = "SignedOid")]
    signed_oid: String,
    #[serde(alias = "SignedTid")]
    signed_tid: String,
    #[serde(alias = "SignedStart")]
    signed_start: String,
    #[serde(alias = "SignedExpiry")]
    signed_expiry: String,
    #[serde(alias = "SignedService")]
    signed_service: String,
    #[serde(alias = "SignedVersion")]
    signed_version: String,
    #[serde(alias = "Value")]
    value: String,
}

async fn azure(args: AzureArgs, config: &Config) -> Result<String, Failure> {
    let (clock, now) = time(&args.common.now)?;
    let credentials = if let Some(key) = &args.account_key {
        wit::AzureCredentials::AccountKey(key.clone())
    } else if let Some(path) = &args.delegation_key_file {
        let text = read_text("delegation-key-file", path)?;
        // serde's messages name the field, never quote the value.
        let key: DelegationKeyFile = serde_json::from_str(&text).map_err(|e| {
            Failure::bad_input(format!(
                "--delegation-key-file {}: not a delegation key: {e}",
                path.display()
            ))
        })?;
        wit::AzureCredentials::DelegationKey(wit::DelegationKey {
            signed_oid: key.signed_oid,
            signed_tid: key.signed_tid,
            signed_start: key.signed_start,
            signed_expiry: key.signed_expiry,
            signed_service: key.signed_service,
            signed_version: key.signed_version,
            value: key.value,
        })
    } else if let (Some(tenant_id), Some(client_id)) = (&args.tenant_id, &args.client_id) {
        let secret = if let Some(path) = &args.client_secret_file {
            wit::AadSecret::ClientSecret(read_text("client-secret-file", path)?.trim().to_string())
        } else if let Some(path) = &args.federated_token_file {
            wit::AadSecret::FederatedToken(
                read_text("federated-token-file", path)?.trim().to_string(),
            )
        } else if let Some(path) = &args.access_token_file {
            wit::AadSecret::AccessToken(read_text("access-token-file", path)?.trim().to_string())
        } else {
            return Err(Failure::bad_input("give --client-secret-file, --federated-token-file or --access-token-file with --tenant-id"));
        };
        wit::AzureCredentials::Aad(wit::AadCredentials {
            tenant_id: tenant_id.clone(),
            client_id: client_id.clone(),
            secret,
            cloud_name: args.cloud.clone(),
            authority: args.authority.clone(),
        })
    } else {
        return Err(Failure::bad_input(
            "give --account-key, --delegation-key-file, or --tenant-id with --client-id",
        ));
    };
    let runtime = runtime(&args.common.modules, clock, config).await?;
    let request = wit::AzureRequest {
        account: args.account,
        container: args.container,
        blob: args.blob,
        endpoint: args.endpoint,
        permissions: args.permissions,
        expires_seconds: args.common.expires,
        now,
    };
    answer(runtime.signing().azure_sas(request, credentials).await)
}
