//! `velero-wasm module …`: what an operator does with modules before they reach a cluster. `keygen`
//! makes a signing key pair, `pack` writes a module (signed or not) as the ConfigMap the host reads,
//! `export` writes a stock module's files to start an override or a variant from, and `verify` checks
//! a module directory or a packed ConfigMap as the host will: sha256 pin and signature. `push` writes a
//! module to an OCI registry ([`super::push`]).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use base64::Engine as _;
use serde_json::{json, Value};

use super::build_freshness::StaleArgs;
use super::failure::{Failure, EXIT_FAILED, EXIT_OK};
use super::module_args::read_trusted_keys;
use super::sign_flags::{Signable, Signer, SigningArgs};
use super::{output_file, pack_guard, velero_namespace};
use crate::modules::compression::{self, COMPRESSED_EXTENSION};
use crate::modules::signature::{self, PrivateKey};
use crate::modules::{
    configmaps, module_from_parts, stock_modules, valid_module_name, Manifest, ModuleSignature,
    Origin, TrustedKeys,
};

/// The label key the host lists module ConfigMaps by; its value is the module's name.
pub(crate) const MODULE_LABEL: &str = configmaps::LABEL;

/// The largest object Kubernetes stores (etcd's limit for a ConfigMap): 1 MiB.
pub(crate) const MAX_OBJECT: usize = 1 << 20;

/// The most all annotations of one object may hold together (Kubernetes' `TotalAnnotationSizeLimitB`).
/// Client-side `kubectl apply` copies the whole object into its `last-applied-configuration`
/// annotation, so a ConfigMap larger than this must be applied server-side or created.
pub(crate) const MAX_ANNOTATIONS: usize = 256 << 10;

/// The annotation in which a client-side `kubectl apply` keeps the object as it was applied.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The bytes a client-side `kubectl apply` of `object` adds to its annotations, as Kubernetes counts
/// them (key and value): the object as compact JSON, in which Go's encoder writes `<`, `>` and `&` as
/// six-byte escapes, and a final newline.
fn last_applied_bytes(object: &Value) -> usize {
    let json = object.to_string();
    let escaped = json
        .bytes()
        .filter(|b| matches!(b, b'<' | b'>' | b'&'))
        .count();
    LAST_APPLIED.len() + json.len() + 5 * escaped + 1
}

/// The largest module file read (well over [`MAX_OBJECT`], so that an oversized one is measured).
const MAX_MODULE_FILE: u64 = 64 << 20;

/// Arguments of `module keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// Where to write: PREFIX.key and PREFIX.pub (neither may exist).
    #[arg(long, value_name = "PREFIX")]
    out: PathBuf,
}

/// Arguments of `module pack`.
#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {
    /// A module directory, one module's component (<name>.wasm, with <name>.toml beside it), or a
    /// manifest alone (<name>.toml: an override of the stock module of that name).
    #[arg(value_name = "DIR|MODULE.wasm|MODULE.toml")]
    path: PathBuf,

    /// The ConfigMap's name (one module only); default: velero-wasm-module-<module name>, with
    /// `-shadow` after it for --shadow.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Label the ConfigMap a shadow (velero-wasm.io/shadow: "true"): the plugin calls it after the
    /// serving module of its name and compares, never serving it (docs/modules.md, "Shadow modules").
    #[arg(long)]
    shadow: bool,

    /// The ConfigMap's namespace: Velero's (default as Velero's CLI finds it: the `namespace` of
    /// ~/.config/velero/config.json, else VELERO_NAMESPACE, else `velero`).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,

    /// How each module is signed: --sign KEY, with --expires, --no-expiry, --unversioned.
    #[command(flatten)]
    signing: SigningArgs,

    #[command(flatten)]
    stale: StaleArgs,

    /// Write the YAML to this file instead of stdout (replaced whole, never through a symbolic link).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,

    /// Overwrite --out even when a module there would change role (shadow ↔ serving) or lose its
    /// signature, or when it holds something else than module ConfigMaps.
    #[arg(long, requires = "out")]
    force: bool,
}

/// The version of the stock components: they are built from this workspace, whose version they share.
const STOCK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Arguments of `module export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The stock module (see `velero-wasm actions`).
    name: String,
    /// The directory to write into (created if missing; existing files are not overwritten).
    dir: PathBuf,
}

/// Arguments of `module verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// A module directory, or a YAML (or JSON) file of module ConfigMaps as `module pack` writes them.
    #[arg(value_name = "DIR|FILE.yaml")]
    path: PathBuf,

    /// Public keys (a .pub file or a directory of them) every module must be signed by; without,
    /// signatures are checked for form only.
    #[arg(long, env = crate::config::VELERO_WASM_TRUSTED_KEYS, value_name = "FILE|DIR")]
    trusted_keys: Option<PathBuf>,

    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(super) fn keygen(args: &KeygenArgs) -> Result<u8, Failure> {
    let with = |ext: &str| {
        let mut path = args.out.clone().into_os_string();
        path.push(ext);
        PathBuf::from(path)
    };
    let (private, public) = (with(".key"), with(".pub"));
    for path in [&private, &public] {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(Failure::bad_input(format!(
                "{} exists: not overwriting a key",
                path.display()
            )));
        }
    }
    let key = PrivateKey::generate().map_err(Failure::failed)?;
    let (private_pem, public_pem) = (
        key.private_pem().map_err(Failure::failed)?,
        key.public_pem().map_err(Failure::failed)?,
    );
    create_new(&private, private_pem.as_bytes(), 0o600)?;
    if let Err(failure) = create_new(&public, public_pem.as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&private);
        return Err(failure);
    }
    eprintln!(
        "wrote {} (the private key: keep it secret) and {} (for VELERO_WASM_TRUSTED_KEYS)",
        private.display(),
        public.display()
    );
    println!("{}", key.key_id());
    Ok(EXIT_OK)
}

/// Writes a file that must not exist yet (nor be a link), with `mode`.
fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Failure> {
    let fail =
        |e: std::io::Error| Failure::failed(format!("{}: cannot be written: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Failure::bad_input(format!("{} exists: not overwriting it", path.display()))
            } else {
                fail(e)
            }
        })?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)
}

/// A module as files (from a directory or a ConfigMap), before it is checked.
pub(super) struct Parts {
    pub(super) name: String,
    /// The component; none for a manifest alone.
    pub(super) wasm: Option<Vec<u8>>,
    pub(super) manifest_text: String,
    pub(super) signature_text: Option<String>,
    /// Where it came from, for messages: a file, or a ConfigMap.
    pub(super) source: String,
}

/// What checking a module found.
pub(super) struct Checked {
    /// The component's sha256; none for a manifest alone.
    pub(super) sha256: Option<String>,
    /// The manifest's version.
    pub(super) version: Option<semver::Version>,
    pub(super) signature: Option<ModuleSignature>,
}

impl Parts {
    /// What a signature of this module, checked as `checked`, covers.
    pub(super) fn signable<'a>(&'a self, checked: &'a Checked) -> Signable<'a> {
        Signable {
            name: &self.name,
            source: &self.source,
            manifest_text: &self.manifest_text,
            sha256: checked.sha256.as_deref(),
            versioned: checked.version.is_some(),
        }
    }

    /// Checks the module as the host's directory loader does (name, manifest, sha256 pin, signature);
    /// a manifest alone is checked for form and signature.
    pub(super) fn check(&self, trusted: Option<&TrustedKeys>) -> anyhow::Result<Checked> {
        if !valid_module_name(&self.name) {
            return Err(anyhow!(
                "module name {:?} must be lower-case letters, digits and '-', starting with a letter",
                self.name
            ));
        }
        let signature_text = self.signature_text.as_deref();
        match &self.wasm {
            Some(wasm) => {
                let module = module_from_parts(
                    &self.name,
                    wasm.clone(),
                    &self.manifest_text,
                    signature_text,
                    Origin::File(PathBuf::from(&self.source)),
                    trusted,
                )?;
                Ok(Checked {
                    sha256: Some(module.sha256),
                    version: module.manifest.version,
                    signature: module.signature,
                })
            }
            None => {
                let signature = signature::verify(
                    &self.name,
                    None,
                    &self.manifest_text,
                    signature_text,
                    trusted,
                )?;
                let manifest =
                    Manifest::parse(&self.manifest_text).map_err(|e| anyhow!("manifest: {e}"))?;
                Ok(Checked {
                    sha256: None,
                    version: manifest.version,
                    signature,
                })
            }
        }
    }
}

fn read_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    crate::regular_file::read(path, MAX_MODULE_FILE).map_err(|e| anyhow!("{}: {e}", path.display()))
}

fn read_text(path: &Path) -> anyhow::Result<String> {
    String::from_utf8(read_file(path)?)
        .map_err(|_| anyhow!("{}: is not UTF-8 text", path.display()))
}

/// The module whose component or manifest is `path` (`<name>.wasm` or `<name>.toml`).
pub(super) fn read_parts(path: &Path) -> anyhow::Result<Parts> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| anyhow!("{}: the file name is not UTF-8", path.display()))?
        .to_string();
    // A manifest with a component beside it is that component's.
    let wasm_path = path.with_extension("wasm");
    let (wasm, source) = if path.extension().is_some_and(|e| e == "wasm") || wasm_path.exists() {
        (Some(read_file(&wasm_path)?), wasm_path)
    } else {
        (None, path.with_extension("toml"))
    };
    let manifest_text = read_text(&path.with_extension("toml"))?;
    let signature_text = signature::read_signature_file(&path.with_extension("sig"))?;
    Ok(Parts {
        name,
        wasm,
        manifest_text,
        signature_text,
        source: source.display().to_string(),
    })
}

/// Every module of a directory: each `<name>.wasm`, and each `<name>.toml` without a component (a
/// manifest alone), in name order; dotfiles (a mounted ConfigMap's `..data`) are skipped. A module
/// that cannot be read is an `Err` in its place.
pub(super) fn read_directory(dir: &Path) -> Result<Vec<anyhow::Result<Parts>>, Failure> {
    let unreadable =
        |e: std::io::Error| Failure::bad_input(format!("{}: cannot be read: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            let ext = p.extension().and_then(|e| e.to_str());
            !hidden
                && (ext == Some("wasm")
                    || (ext == Some("toml") && !p.with_extension("wasm").exists()))
        })
        .collect();
    paths.sort();
    Ok(paths.iter().map(|p| read_parts(p)).collect())
}

pub(super) fn pack(args: &PackArgs, config: &crate::config::Config) -> Result<u8, Failure> {
    let mut modules = modules_to_pack(args)?;
    let signer = args.signing.signer()?;
    let namespace = velero_namespace::resolve(args.namespace.as_deref(), config);
    let mut documents = Vec::new();
    let mut server_side = Vec::new();
    let mut roles = Vec::new();
    let mut reports = Vec::new();
    for parts in &mut modules {
        check_and_sign(parts, signer.as_ref())?;
        let role = pack_guard::Role {
            shadow: args.shadow,
            signed: parts.signature_text.is_some(),
        };
        roles.push((parts.name.clone(), role));
        let name = args.name.clone().unwrap_or_else(|| match args.shadow {
            true => format!("velero-wasm-module-{}-shadow", parts.name),
            false => format!("velero-wasm-module-{}", parts.name),
        });
        let (yaml, too_big_to_apply, report) =
            configmap_yaml(parts, &name, &namespace, args, signer.as_ref())?;
        if too_big_to_apply {
            server_side.push(name);
        }
        documents.push(yaml);
        reports.push(report);
    }
    if let Some(out) = args.out.as_deref().filter(|_| !args.force) {
        let problems = pack_guard::problems(out, &roles);
        if !problems.is_empty() {
            return Err(Failure::bad_input(format!(
                "--out {} exists: not overwriting it: {}; nothing written (--force overwrites it anyway)",
                out.display(),
                problems.join("; ")
            )));
        }
    }
    write_out(args.out.as_deref(), &documents.join("---\n"))?;
    for report in reports {
        eprintln!("{report}");
    }
    if !server_side.is_empty() {
        eprintln!(
            "apply with `kubectl apply --server-side -f` (or `kubectl create -f`): a plain `kubectl apply` copies \
             the object into an annotation, and Kubernetes refuses annotations over {MAX_ANNOTATIONS} bytes \
             ({} would be refused)",
            server_side.join(", ")
        );
    }
    Ok(EXIT_OK)
}

/// The modules `pack` was given: a directory's, or one module's files.
fn modules_to_pack(args: &PackArgs) -> Result<Vec<Parts>, Failure> {
    // Packing a crate's module/ its sources moved past signs the last build, not the code on screen.
    args.stale.check(&args.path)?;
    let meta = std::fs::metadata(&args.path)
        .map_err(|e| Failure::bad_input(format!("{}: cannot be read: {e}", args.path.display())))?;
    let modules = if meta.is_dir() {
        read_directory(&args.path)?
    } else {
        vec![read_parts(&args.path)]
    };
    let modules: Vec<Parts> = modules
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(Failure::bad_input)?;
    if modules.is_empty() {
        return Err(Failure::bad_input(format!(
            "{}: holds no module (<name>.wasm with <name>.toml, or <name>.toml alone)",
            args.path.display()
        )));
    }
    if args.name.is_some() && modules.len() > 1 {
        return Err(Failure::bad_input(format!(
            "--name names one ConfigMap, and {} holds {} modules",
            args.path.display(),
            modules.len()
        )));
    }
    Ok(modules)
}

/// Checks one module as the host would load it and, with a signer, signs it.
fn check_and_sign(parts: &mut Parts, signer: Option<&Signer>) -> Result<(), Failure> {
    if signer.is_some() {
        parts.signature_text = None;
    }
    let checked = parts
        .check(None)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", parts.source)))?;
    if let Some(signer) = signer {
        parts.signature_text = Some(signer.sign(parts.signable(&checked), "nothing written")?);
    }
    Ok(())
}

/// One module as the YAML of ConfigMap `name`, checked against Kubernetes' limit for one object;
/// whether a plain `kubectl apply` would be refused it; and its line for stderr (size, signature).
fn configmap_yaml(
    parts: &Parts,
    name: &str,
    namespace: &str,
    args: &PackArgs,
    signer: Option<&Signer>,
) -> Result<(String, bool, String), Failure> {
    let mut object = configmap(parts, name, namespace).map_err(Failure::failed)?;
    if args.shadow {
        object["metadata"]["labels"][configmaps::SHADOW_LABEL] = Value::from("true");
    }
    let yaml = serde_norway::to_string(&object)
        .map_err(|e| Failure::failed(format!("cannot write YAML: {e}")))?;
    let size = yaml.len();
    let share = size * 100 / MAX_OBJECT;
    if size > MAX_OBJECT {
        return Err(Failure::bad_input(format!(
            "ConfigMap {name} (module {}) would be {size} bytes, over Kubernetes' limit of {MAX_OBJECT} bytes (1 MiB) for one object: nothing written. {}",
            parts.name,
            too_big_hint(parts, &args.path)
        )));
    }
    let signed = match signer {
        Some(signer) => format!(", signed by key {} {}", signer.key_id(), signer.until()),
        None if parts.signature_text.is_some() => ", with its signature".to_string(),
        None => ", unsigned".to_string(),
    };
    let component = match &parts.wasm {
        Some(wasm) => format!(
            ", its {}-byte component gzipped to {}",
            wasm.len(),
            object["binaryData"][format!("{}.{COMPRESSED_EXTENSION}", parts.name)]
                .as_str()
                .map_or(0, |b64| b64.len() / 4 * 3 - b64.matches('=').count())
        ),
        None => String::new(),
    };
    let report = format!(
        "ConfigMap {namespace}/{name}: {size} bytes ({share}% of the {MAX_OBJECT}-byte limit){component}{signed}"
    );
    Ok((yaml, last_applied_bytes(&object) > MAX_ANNOTATIONS, report))
}

/// Where a module too big for a ConfigMap goes instead, with the commands: an OCI registry (a
/// ConfigMap then names it), or a module directory mounted into Velero's pod.
fn too_big_hint(parts: &Parts, path: &Path) -> String {
    let name = &parts.name;
    let from = match path.is_dir() {
        true => path.display().to_string(),
        false => path
            .with_file_name(format!("{name}.wasm"))
            .display()
            .to_string(),
    };
    format!(
        "Push it to an OCI registry instead: `velero-wasm module push {from} oci://REGISTRY/REPOSITORY:TAG --sign KEY` \
         prints a reference pinned by digest, which a ConfigMap names as {name}.oci (`kubectl -n NAMESPACE create configmap \
         velero-wasm-module-{name} --from-literal={name}.oci=REFERENCE` and label it velero-wasm.io/module={name}; \
         docs/modules.md §7). Or mount a directory holding {name}.wasm and {name}.toml into Velero's pod (a volume of \
         an image or a PersistentVolumeClaim) and point VELERO_WASM_MODULES at it (docs/modules.md §1)."
    )
}

/// `text` to `--out`, or to stdout.
fn write_out(out: Option<&std::path::Path>, text: &str) -> Result<(), Failure> {
    match out {
        Some(path) => output_file::replace(path, text.as_bytes()).map_err(|e| match e {
            output_file::WriteError::Io { .. } => Failure::failed(e),
            _ => Failure::bad_input(e),
        }),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::failed(format!("cannot write to stdout: {e}")))
        }
    }
}

/// The ConfigMap of one module: the component gzipped under `binaryData` (`<name>.wasm.gz`, see
/// [`compression`]), manifest and signature under `data`.
fn configmap(parts: &Parts, name: &str, namespace: &str) -> anyhow::Result<Value> {
    let mut data = serde_json::Map::new();
    data.insert(
        format!("{}.toml", parts.name),
        Value::from(parts.manifest_text.as_str()),
    );
    if let Some(signature) = &parts.signature_text {
        data.insert(
            format!("{}.sig", parts.name),
            Value::from(signature.as_str()),
        );
    }
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": { MODULE_LABEL: parts.name },
        },
    });
    if let Some(wasm) = &parts.wasm {
        let gzip = compression::compress(wasm)
            .map_err(|e| anyhow!("cannot compress {}: {e}", parts.source))?;
        object["binaryData"] = json!({
            format!("{}.{COMPRESSED_EXTENSION}", parts.name): base64::engine::general_purpose::STANDARD.encode(gzip),
        });
    }
    object["data"] = Value::Object(data);
    Ok(object)
}

/// The module of a ConfigMap (see [`configmap`]): its name is the label's value. Its keys, their
/// encoding and its size are checked as the host checks them ([`configmaps::files_of`]).
fn configmap_parts(object: &Value, file: &Path) -> anyhow::Result<Parts> {
    let meta = &object["metadata"];
    // Names as Rust escapes them: a control character in a file is not sent to the terminal.
    let shown =
        |value: &Value, absent: &str| value.as_str().unwrap_or(absent).escape_debug().to_string();
    let source = format!(
        "ConfigMap {}/{} in {}",
        shown(&meta["namespace"], ""),
        shown(&meta["name"], "?"),
        file.display()
    );
    if object["kind"] != "ConfigMap" {
        return Err(anyhow!(
            "{source}: is a {}, not a ConfigMap",
            shown(&object["kind"], "?")
        ));
    }
    let Some(name) = meta["labels"][MODULE_LABEL].as_str() else {
        return Err(anyhow!(
            "{source}: has no label {MODULE_LABEL}: it is not a module"
        ));
    };
    let files = configmaps::files_of(object, Some(name)).map_err(|e| anyhow!("{source}: {e}"))?;
    if files.iter().any(|(key, _)| key.ends_with(".oci")) {
        return Err(anyhow!(
            "{source}: names an OCI artifact ({name}.oci), which only the plugin pulls: check the module directory it was pushed from"
        ));
    }
    let name = name.to_string();
    let file_named = |ext: &str| {
        files
            .iter()
            .find(|(key, _)| *key == format!("{name}.{ext}"))
            .map(|(_, bytes)| bytes.clone())
    };
    let text = |ext: &str| -> anyhow::Result<Option<String>> {
        file_named(ext)
            .map(|bytes| {
                String::from_utf8(bytes).map_err(|_| anyhow!("{source}: {name}.{ext} is not UTF-8"))
            })
            .transpose()
    };
    let manifest_text = text("toml")?.ok_or_else(|| anyhow!("{source}: has no {name}.toml"))?;
    Ok(Parts {
        signature_text: text("sig")?,
        wasm: file_named("wasm"),
        manifest_text,
        name,
        source,
    })
}

pub(super) fn export(args: &ExportArgs) -> Result<u8, Failure> {
    let stock: Vec<_> = stock_modules().into_iter().filter_map(Result::ok).collect();
    let Some(module) = stock.iter().find(|m| m.name == args.name) else {
        let names: Vec<&str> = stock.iter().map(|m| m.name.as_str()).collect();
        return Err(Failure::bad_input(format!(
            "no stock module is named {:?} (there are: {})",
            args.name,
            names.join(", ")
        )));
    };
    let (wasm_path, toml_path) = (
        args.dir.join(format!("{}.wasm", module.name)),
        args.dir.join(format!("{}.toml", module.name)),
    );
    for path in [&wasm_path, &toml_path] {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(Failure::bad_input(format!(
                "{} exists: not overwriting it",
                path.display()
            )));
        }
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| Failure::failed(format!("{}: cannot be created: {e}", args.dir.display())))?;
    // A module directory needs the manifest pinned to its component; stock manifests are pinned by
    // the build instead.
    let mut manifest = match module.manifest.sha256 {
        Some(_) => module.manifest_text.to_string(),
        None => format!("sha256 = \"{}\"\n{}", module.sha256, module.manifest_text),
    };
    // The stock version, to raise with each change: hosts with trusted keys refuse an older signed
    // version once a newer one served (docs/modules.md §5), which only works when there is one.
    if module.manifest.version.is_none() {
        manifest = format!(
            "# The stock module's version (velero-wasm {STOCK_VERSION}): raise it with each change.\n\
             version = \"{STOCK_VERSION}\"\n{manifest}"
        );
    }
    create_new(&wasm_path, &module.wasm, 0o644)?;
    create_new(&toml_path, manifest.as_bytes(), 0o644)?;
    eprintln!(
        "wrote {} ({} bytes, sha256 {}) and {}",
        wasm_path.display(),
        module.wasm.len(),
        module.sha256,
        toml_path.display()
    );
    Ok(EXIT_OK)
}

pub(super) fn verify(args: &VerifyArgs) -> Result<u8, Failure> {
    let trusted = read_trusted_keys(args.trusted_keys.as_deref())?;
    let meta = std::fs::metadata(&args.path)
        .map_err(|e| Failure::bad_input(format!("{}: cannot be read: {e}", args.path.display())))?;
    let modules = if meta.is_dir() {
        read_directory(&args.path)?
    } else {
        crate::documents::read_objects(std::slice::from_ref(&args.path))
            .map_err(|e| Failure::bad_input(e.to_string()))?
            .iter()
            .map(|(file, object)| configmap_parts(object, file))
            .collect()
    };
    if modules.is_empty() {
        return Err(Failure::bad_input(format!(
            "{}: holds no module",
            args.path.display()
        )));
    }
    let rows: Vec<Row> = modules
        .into_iter()
        .map(|parts| match parts {
            Err(problem) => Row {
                name: String::new(),
                source: String::new(),
                result: Err(problem),
            },
            Ok(parts) => Row {
                result: parts
                    .check(trusted.as_ref())
                    .map_err(|e| anyhow!("{}: {e}", parts.source)),
                name: parts.name,
                source: parts.source,
            },
        })
        .collect();
    if args.json {
        let modules: Vec<Value> = rows.iter().map(Row::json).collect();
        let out = json!({
            "trustedKeys": trusted.as_ref().map(|k| k.ids()),
            "modules": modules,
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        for row in &rows {
            println!("{}", row.line());
        }
        for row in &rows {
            if let Err(problem) = &row.result {
                eprintln!("velero-wasm module verify: refused: {problem}");
            }
        }
    }
    Ok(if rows.iter().all(|r| r.result.is_ok()) {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// One module's line of `verify`.
struct Row {
    name: String,
    source: String,
    result: anyhow::Result<Checked>,
}

impl Row {
    /// `kubevirt  sha256 0123456789ab…  signed by key …`, short enough for a terminal.
    fn line(&self) -> String {
        let name = if self.name.is_empty() {
            "?"
        } else {
            &self.name
        };
        match &self.result {
            Ok(checked) => {
                let sha = match &checked.sha256 {
                    Some(sha) => format!("sha256 {}…", &sha[..12]),
                    None => "manifest only      ".to_string(),
                };
                let signature = match &checked.signature {
                    Some(s) => s.to_string(),
                    None => "unsigned".to_string(),
                };
                format!("{name:<20}  {sha}  {signature}")
            }
            Err(_) => format!("{name:<20}  BAD (see below)"),
        }
    }

    fn json(&self) -> Value {
        match &self.result {
            Ok(checked) => json!({
                "name": self.name,
                "source": self.source,
                "ok": true,
                "sha256": checked.sha256,
                "signature": checked.signature.as_ref().map(|s| json!({"key": s.key, "verified": s.verified})),
            }),
            Err(problem) => json!({
                "name": self.name,
                "source": self.source,
                "ok": false,
                "problem": problem.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules::sha256_hex;

    #[test]
    fn a_packed_configmap_reads_back_as_the_same_module() {
        let manifest = format!("sha256 = \"{}\"\n", sha256_hex(b"\0asm"));
        let parts = Parts {
            name: "m".into(),
            wasm: Some(b"\0asm".to_vec()),
            manifest_text: manifest.clone(),
            signature_text: Some("key = \"0011223344556677\"\n".into()),
            source: "m.wasm".into(),
        };
        let object = configmap(&parts, "velero-wasm-module-m", "velero").unwrap();
        assert_eq!(object["metadata"]["labels"][MODULE_LABEL], "m");
        // The component is stored gzipped; it reads back as it was.
        let stored = object["binaryData"]["m.wasm.gz"].as_str().unwrap();
        let gzip = base64::engine::general_purpose::STANDARD
            .decode(stored)
            .unwrap();
        assert_eq!(&gzip[..2], [0x1f, 0x8b]);
        assert!(object["binaryData"].get("m.wasm").is_none());
        let yaml = serde_norway::to_string(&object).unwrap();
        let back: Value = serde_norway::from_str(&yaml).unwrap();
        let read = configmap_parts(&back, Path::new("m.yaml")).unwrap();
        assert_eq!(read.name, "m");
        assert_eq!(read.wasm.as_deref(), Some(&b"\0asm"[..]));
        assert_eq!(read.manifest_text, manifest);
        assert_eq!(read.signature_text, parts.signature_text);
        assert_eq!(
            read.source,
            "ConfigMap velero/velero-wasm-module-m in m.yaml"
        );
    }

    #[test]
    fn a_configmap_without_the_module_label_is_not_a_module() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "velero"}});
        let error = configmap_parts(&object, Path::new("x.yaml"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("has no label velero-wasm.io/module"),
            "{error}"
        );
    }
}
