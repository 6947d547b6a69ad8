//! `velero-wasm module push DIR oci://registry/repo:tag`: a module (component, manifest and, if
//! signed, its signature) written to a registry in the wasm artifact layout
//! ([`crate::modules::oci::layout`]), checked first as the host will check it. Prints the reference
//! pinned by digest, which is what a module ConfigMap names.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use bytes::Bytes;
use serde_json::json;

use super::build_freshness::StaleArgs;
use super::failure::{Failure, EXIT_OK};
use super::module_local::{read_directory, read_parts, Parts};
use super::sign_flags::SigningArgs;
use crate::modules::oci::{self, layout, Reference, Registry};

/// How long one exchange with the registry may take while pushing (a large component, a slow link).
const PUSH_EXCHANGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Arguments of `module push`.
#[derive(Debug, clap::Args)]
pub(crate) struct PushArgs {
    /// A module directory holding one module (or name it with --module), or one module's component
    /// (<name>.wasm, with <name>.toml and optionally <name>.sig beside it).
    #[arg(value_name = "DIR|MODULE.wasm")]
    path: PathBuf,

    /// Where to: oci://registry/repository:tag (the tag is required; the digest is printed).
    #[arg(value_name = "oci://REGISTRY/REPO:TAG")]
    target: String,

    /// The module of DIR to push, when it holds several.
    #[arg(long, value_name = "NAME")]
    module: Option<String>,

    /// How the module is signed: --sign KEY, with --expires, --no-expiry, --unversioned.
    #[command(flatten)]
    signing: SigningArgs,

    #[command(flatten)]
    stale: StaleArgs,

    /// A docker config holding the registry's credentials (`docker login` writes one); default:
    /// $DOCKER_CONFIG/config.json, else ~/.docker/config.json, when there is one.
    #[arg(long, value_name = "FILE")]
    credentials: Option<PathBuf>,

    /// Reach the registry over plain HTTP (a registry on loopback or in a test), not HTTPS.
    #[arg(long)]
    plain_http: bool,

    /// Print the result as JSON (reference, digest, module, blobs uploaded).
    #[arg(long)]
    json: bool,
}

/// Runs `module push`.
pub(crate) async fn push(args: &PushArgs, config: &crate::config::Config) -> Result<u8, Failure> {
    let reference = target(args)?;
    let prepared = prepare(args)?;
    let parts = &prepared.parts;
    let artifact = layout::artifact(
        &parts.name,
        &prepared.component,
        &parts.manifest_text,
        parts.signature_text.as_deref(),
        prepared.version.as_deref(),
    );
    let credentials = read_credentials(args.credentials.as_ref(), &reference.registry, config)?;
    let registry = Registry::new(
        &reference,
        args.plain_http,
        credentials,
        PUSH_EXCHANGE_TIMEOUT,
        true,
    );
    let terminal = std::io::stderr().is_terminal();
    let progress = |step: &str| {
        if terminal {
            eprintln!("{step}…");
        } else {
            tracing::debug!("{step}");
        }
    };
    let pushed = oci::push(
        &registry,
        &reference,
        &artifact,
        Bytes::from(prepared.component.clone()),
        &progress,
    )
    .await
    .map_err(|e| Failure::failed(format!("{}: {e}", reference)))?;
    report(args, &reference, &prepared, &artifact, &pushed);
    Ok(EXIT_OK)
}

/// The reference pushed to: it names a tag and no digest.
fn target(args: &PushArgs) -> Result<Reference, Failure> {
    let reference = Reference::parse(&args.target)
        .map_err(|e| Failure::bad_input(format!("the target {e}")))?;
    if reference.digest.is_some() || reference.tag.is_none() {
        return Err(Failure::bad_input(format!(
            "the target {} must name a tag and no digest (the digest is what the push makes)",
            args.target
        )));
    }
    Ok(reference)
}

/// A module checked as the host will check it, and signed when `--sign` says so.
struct Prepared {
    /// Its name, manifest and signature.
    parts: Parts,
    /// Its component.
    component: Vec<u8>,
    /// How it is signed, for the summary line.
    signed: String,
    /// The manifest's version, for the artifact's annotation.
    version: Option<String>,
}

/// The module `args` names, checked, and signed with `--sign`'s key (replacing a signature beside
/// it).
fn prepare(args: &PushArgs) -> Result<Prepared, Failure> {
    let mut parts = module_parts(args)?;
    let signer = args.signing.signer()?;
    if signer.is_some() {
        parts.signature_text = None;
    }
    let checked = parts
        .check(None)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", parts.source)))?;
    let Some(component) = parts.wasm.take() else {
        return Err(Failure::bad_input(format!(
            "{}: is a manifest alone (a stock override); push modules with a component, and keep overrides in ConfigMaps",
            parts.source
        )));
    };
    if let Some(signer) = &signer {
        parts.signature_text = Some(signer.sign(parts.signable(&checked), "nothing pushed")?);
    }
    let signed = match (&signer, &parts.signature_text) {
        (Some(signer), _) => format!("signed by key {} {}", signer.key_id(), signer.until()),
        (None, Some(_)) => "with its signature".to_string(),
        (None, None) => "unsigned".to_string(),
    };
    Ok(Prepared {
        parts,
        component,
        signed,
        version: checked.version.as_ref().map(ToString::to_string),
    })
}

/// What was pushed: JSON with `--json`, else a summary on stderr and the pinned reference on stdout.
fn report(
    args: &PushArgs,
    reference: &Reference,
    prepared: &Prepared,
    artifact: &layout::Artifact,
    pushed: &oci::Pushed,
) {
    let parts = &prepared.parts;
    if args.json {
        let out = json!({
            "reference": pushed.pinned.to_string(),
            "digest": pushed.pinned.digest,
            "module": parts.name,
            "component": {"digest": artifact.parsed.layers[0].digest, "size": prepared.component.len()},
            "signed": parts.signature_text.is_some(),
            "uploaded": pushed.uploaded,
        });
        println!("{out}");
    } else {
        eprintln!(
            "pushed module {} ({} bytes, {}) to {}; name it in a module ConfigMap as {}.oci:",
            parts.name,
            prepared.component.len(),
            prepared.signed,
            reference,
            parts.name
        );
        println!("{}", pushed.pinned);
    }
}

/// The one module `args` names.
fn module_parts(args: &PushArgs) -> Result<Parts, Failure> {
    // Pushing a crate's module/ its sources moved past publishes the last build, not the code on screen.
    args.stale.check(&args.path)?;
    let meta = std::fs::metadata(&args.path)
        .map_err(|e| Failure::bad_input(format!("{}: cannot be read: {e}", args.path.display())))?;
    if !meta.is_dir() {
        return read_parts(&args.path).map_err(Failure::bad_input);
    }
    let modules: Vec<Parts> = read_directory(&args.path)?
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(Failure::bad_input)?;
    let names: Vec<String> = modules.iter().map(|p| p.name.clone()).collect();
    let wanted = match (&args.module, names.as_slice()) {
        (Some(name), _) => name.clone(),
        (None, [one]) => one.clone(),
        (None, []) => {
            return Err(Failure::bad_input(format!(
                "{}: holds no module (<name>.wasm with <name>.toml)",
                args.path.display()
            )))
        }
        (None, many) => {
            return Err(Failure::bad_input(format!(
                "{} holds {} modules ({}): name one with --module",
                args.path.display(),
                many.len(),
                many.join(", ")
            )))
        }
    };
    modules
        .into_iter()
        .find(|p| p.name == wanted)
        .ok_or_else(|| {
            Failure::bad_input(format!(
                "{} holds no module {wanted} (it holds {})",
                args.path.display(),
                names.join(", ")
            ))
        })
}

/// The credentials for `registry` from the docker config named or found (`DOCKER_CONFIG`, else
/// `~/.docker`, of `config`).
fn read_credentials(
    named: Option<&PathBuf>,
    registry: &str,
    config: &crate::config::Config,
) -> Result<Option<oci::Credentials>, Failure> {
    let path = match named {
        Some(path) => path.clone(),
        None => {
            let dir = config.docker_config_dir();
            match dir.map(|d| d.join("config.json")).filter(|p| p.is_file()) {
                Some(path) => path,
                None => return Ok(None),
            }
        }
    };
    let bytes = crate::regular_file::read(&path, 1 << 20)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))?;
    oci::credentials::for_registry(&bytes, registry)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", path.display())))
}
