//! A module directory: `<name>.wasm` with `<name>.toml` (and optionally `<name>.sig`) beside it, and
//! override manifests (`<name>.toml` alone, see [`stock_override`](super::stock_override)). A module
//! whose files are unreadable, whose manifest is invalid, whose sha256 does not match or whose
//! signature is refused is reported and left out; the others load.
//!
//! A mounted ConfigMap has this shape, the kubelet's way: the files live in a timestamped directory
//! (`..2026_12_02_00_00_00.123456789/`), `..data` is a symbolic link to it, and each file is a link
//! through `..data`. An update writes a new timestamped directory, swaps `..data` by a rename (atomic)
//! and deletes the old directory. Read file by file through the links, a scan during a swap could mix
//! an old manifest with a new component; so the scan resolves `..data` once and reads that one
//! version, and reads again (a few times at most) when `..data` moved while it was reading.

use bytes::Bytes;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::identity::{sha256_hex, valid_module_name};
use super::manifest::{Manifest, ManifestError};
use super::signature::ModuleSignature;
use super::signature::{read_signature_file, verify, SignatureError, TrustedKeys};
use super::source::{ModuleSource, Origin};

/// The kubelet's link to the current version of a mounted ConfigMap or Secret.
const KUBELET_DATA: &str = "..data";

/// How many times a scan starts again because `..data` moved while it was reading.
const SWAP_RETRIES: usize = 5;

/// What a scan found.
#[derive(Debug, Default)]
pub struct DirectoryScan {
    /// Modules ready to compile.
    pub modules: Vec<ModuleSource>,
    /// Manifests without a component: overrides of the stock module of their name.
    pub(crate) overrides: Vec<OverrideFile>,
    /// Files that could not be used, each with the reason.
    pub problems: Vec<(PathBuf, String)>,
}

/// A manifest found without its component (`<name>.toml` and no `<name>.wasm`).
#[derive(Debug, Clone)]
pub(crate) struct OverrideFile {
    /// The module it overrides.
    pub(crate) name: String,
    /// Where it was found.
    pub(crate) path: PathBuf,
    /// The manifest as written.
    pub(crate) text: String,
    /// Its signature, as checked when it was read.
    pub(crate) signature: Option<ModuleSignature>,
}

/// Reads every module in the directory `dir` (one whole version of a kubelet-mounted directory),
/// checking signatures against `trusted` keys (see [`read_module`]). Fails only when the directory
/// itself cannot be read.
pub(crate) fn scan_directory(
    dir: &Path,
    trusted: Option<&TrustedKeys>,
) -> std::io::Result<DirectoryScan> {
    let mut attempt = 0;
    loop {
        let version = std::fs::read_link(dir.join(KUBELET_DATA)).ok();
        let base = match &version {
            Some(target) => dir.join(target),
            None => dir.to_path_buf(),
        };
        let scan = scan_once(&base, trusted);
        let moved = version.is_some() && std::fs::read_link(dir.join(KUBELET_DATA)).ok() != version;
        attempt += 1;
        if moved && attempt < SWAP_RETRIES {
            continue;
        }
        let mut scan = scan?;
        if base != dir {
            // Name files as the operator sees them, not by the kubelet's timestamped directory.
            let shown = |p: &Path| {
                p.file_name()
                    .map_or_else(|| p.to_path_buf(), |n| dir.join(n))
            };
            for module in &mut scan.modules {
                if let Origin::File(path) = &module.origin {
                    module.origin = Origin::File(shown(path));
                }
            }
            for o in &mut scan.overrides {
                o.path = shown(&o.path);
            }
            for (path, _) in &mut scan.problems {
                *path = shown(path);
            }
        }
        return Ok(scan);
    }
}

/// Every module name the directory `dir` may put in service, without reading a module: each file's
/// name up to any of its dots (`a.b.wasm.gz` may be module `a`, `a.b` or `a.b.wasm`). More names than
/// [`scan_directory`] finds, never fewer; none when the directory cannot be read (the scan says why).
pub(super) fn names(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    let mut names = BTreeSet::new();
    for entry in entries.filter_map(Result::ok) {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if file_name.starts_with('.') {
            continue;
        }
        names.extend(
            file_name
                .match_indices('.')
                .map(|(at, _)| file_name[..at].to_string()),
        );
    }
    names
}

fn scan_once(dir: &Path, trusted: Option<&TrustedKeys>) -> std::io::Result<DirectoryScan> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    files.sort();
    let has = |p: &PathBuf, ext: &str| p.extension().is_some_and(|x| x == ext);
    let mut scan = DirectoryScan::default();
    for path in files.iter().filter(|p| has(p, "wasm")) {
        match read_module(path, trusted) {
            Ok(module) => scan.modules.push(module),
            Err(problem) => scan.problems.push((path.clone(), problem.to_string())),
        }
    }
    // `module pack` gzips components: a packed ConfigMap mounted as files holds `<name>.wasm.gz`.
    let packed = |p: &Path| p.with_extension(super::compression::COMPRESSED_EXTENSION);
    for path in files.iter().filter(|p| has(p, "toml")) {
        if files.contains(&path.with_extension("wasm")) {
            continue;
        }
        if files.contains(&packed(path)) {
            match read_module(&packed(path), trusted) {
                Ok(module) => scan.modules.push(module),
                Err(problem) => scan.problems.push((packed(path), problem.to_string())),
            }
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                scan.problems
                    .push((path.clone(), format!("cannot be read: {e}")));
                continue;
            }
        };
        // An override changes a grant as much as a module does: signed the same way, without a
        // component.
        let signature_path = path.with_extension("sig");
        let signed = read_signature_file(&signature_path)
            .map_err(|e| e.to_string())
            .and_then(|signature| {
                verify(name, None, &text, signature.as_deref(), trusted)
                    .map_err(|e| format!("{}: {e}", signature_path.display()))
            });
        match signed {
            Ok(signature) => scan.overrides.push(OverrideFile {
                name: name.to_string(),
                path: path.clone(),
                text,
                signature,
            }),
            Err(problem) => scan.problems.push((path.clone(), problem)),
        }
    }
    Ok(scan)
}

/// Reads one module (`<name>.wasm`, `<name>.toml` and, if present, `<name>.sig` beside it), checking
/// its name, its sha256 and its signature: with `trusted` keys it must be signed by one of them;
/// without, a signature present must be well-formed.
pub(crate) fn read_module(
    wasm_path: &Path,
    trusted: Option<&TrustedKeys>,
) -> Result<ModuleSource, ReadError> {
    let file_name = wasm_path
        .file_name()
        .and_then(|s| s.to_str())
        .ok_or(ReadError::NameNotUtf8)?;
    // `<name>.wasm`, or `<name>.wasm.gz` as `module pack` writes a component (a packed ConfigMap
    // mounted as files).
    let packed_suffix = format!(".{}", super::compression::COMPRESSED_EXTENSION);
    let packed = file_name.ends_with(&packed_suffix);
    let name = file_name
        .strip_suffix(&packed_suffix)
        .or_else(|| file_name.strip_suffix(".wasm"))
        .unwrap_or(file_name)
        .to_string();
    if !valid_module_name(&name) {
        return Err(ReadError::Name(name));
    }
    let beside = |ext: &str| wasm_path.with_file_name(format!("{name}.{ext}"));
    let manifest_path = beside("toml");
    let manifest_text =
        std::fs::read_to_string(&manifest_path).map_err(|source| ReadError::Manifest {
            path: manifest_path.clone(),
            source,
        })?;
    let signature_path = beside("sig");
    let signature = read_signature_file(&signature_path)?;
    let wasm = std::fs::read(wasm_path).map_err(ReadError::Component)?;
    let wasm = if packed {
        // Held to the component cap, as a component pulled from a registry is: the 8 MiB bound of a
        // ConfigMap's would refuse here what loads unzipped beside it.
        super::compression::expanded_within(file_name, wasm, super::oci::layout::MAX_COMPONENT)?.1
    } else {
        wasm
    };
    module_from_parts(
        &name,
        wasm,
        &manifest_text,
        signature.as_deref(),
        Origin::File(wasm_path.to_path_buf()),
        trusted,
    )
    .map_err(|source| ReadError::Parts {
        manifest: manifest_path,
        signature: signature_path,
        source,
    })
}

/// Why a module's files do not make a module.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The component's file name is not UTF-8.
    #[error("the file name is not UTF-8")]
    NameNotUtf8,
    /// The file name is not a module name.
    #[error(
        "module name {0:?} must be lower-case letters, digits and '-', starting with a letter"
    )]
    Name(String),
    /// The manifest beside it cannot be read.
    #[error("its manifest {} cannot be read: {source}", path.display())]
    Manifest {
        /// The manifest's path.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The component cannot be read.
    #[error("cannot be read: {0}")]
    Component(#[source] std::io::Error),
    /// The signature file beside it cannot be read.
    #[error(transparent)]
    SignatureFile(#[from] super::signature::KeyError),
    /// The packed component cannot be expanded.
    #[error(transparent)]
    Packed(#[from] super::compression::KeyExpandError),
    /// The parts were read but do not make a module; the message names the file at fault.
    #[error("{}", parts_message(manifest, signature, source))]
    Parts {
        /// The manifest's path.
        manifest: PathBuf,
        /// The signature's path.
        signature: PathBuf,
        /// What is wrong.
        #[source]
        source: PartError,
    },
}

/// A [`PartError`] as said of files: the manifest or the signature file it concerns named.
fn parts_message(manifest: &Path, signature: &Path, e: &PartError) -> String {
    match e {
        PartError::Manifest(e) => format!("{}: {e}", manifest.display()),
        PartError::Unpinned(sha256) => format!(
            "{} has no sha256: a manifest's grant must be pinned to its module; add the line\n  sha256 = \"{sha256}\"",
            manifest.display()
        ),
        PartError::Mismatch { expected, actual } => format!(
            "sha256 mismatch: {} expects {expected}, the file has {actual} (a partial update, or the wrong file?)",
            manifest.display()
        ),
        PartError::Signature(e) => format!("{}: {e}", signature.display()),
    }
}

/// Why a module's parts do not make a module.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PartError {
    /// The manifest is invalid.
    #[error("manifest: {0}")]
    Manifest(#[from] ManifestError),
    /// The manifest pins no sha256 (the component's is given).
    #[error("the manifest has no sha256: a manifest's grant must be pinned to its module; add the line sha256 = \"{0}\"")]
    Unpinned(String),
    /// The manifest pins another component.
    #[error("sha256 mismatch: the manifest expects {expected}, the component has {actual}")]
    Mismatch {
        /// The sha256 the manifest pins.
        expected: String,
        /// The component's.
        actual: String,
    },
    /// The signature is missing, malformed, by an unknown key or does not match.
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

/// A module from its parts, however they came (files, a packed ConfigMap): the manifest must parse
/// and pin the component's sha256, and the signature must satisfy `trusted` (see [`verify`]).
pub(crate) fn module_from_parts(
    name: &str,
    wasm: Vec<u8>,
    manifest_text: &str,
    signature_text: Option<&str>,
    origin: Origin,
    trusted: Option<&TrustedKeys>,
) -> Result<ModuleSource, PartError> {
    let sha256 = sha256_hex(&wasm);
    // The signature first: with trusted keys, a changed component or manifest is a signature that
    // does not match, whatever else is wrong with it.
    let signature = verify(name, Some(&sha256), manifest_text, signature_text, trusted)?;
    let manifest = Manifest::parse(manifest_text)?;
    match &manifest.sha256 {
        None => return Err(PartError::Unpinned(sha256)),
        Some(expected) if *expected != sha256 => {
            return Err(PartError::Mismatch {
                expected: expected.clone(),
                actual: sha256,
            })
        }
        Some(_) => {}
    }
    Ok(ModuleSource {
        name: name.to_string(),
        wasm: Bytes::from(wasm),
        sha256,
        manifest,
        manifest_text: Arc::from(manifest_text),
        origin,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_every_module_a_scan_may_find() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for file in [
            "plain.wasm",
            "packed.wasm.gz",
            "override.toml",
            "a.b.wasm",
            ".hidden.wasm",
        ] {
            std::fs::write(d.join(file), b"x").unwrap();
        }
        let found = names(d);
        for name in ["plain", "packed", "override", "a", "a.b"] {
            assert!(found.contains(name), "{name} missing from {found:?}");
        }
        assert!(!found.iter().any(|n| n.contains("hidden")), "{found:?}");
        assert!(names(&d.join("absent")).is_empty());
    }

    #[test]
    fn modules_need_a_matching_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("good.wasm"), b"abc").unwrap();
        std::fs::write(
            d.join("good.toml"),
            format!("sha256 = \"{}\"", sha256_hex(b"abc")),
        )
        .unwrap();
        std::fs::write(d.join("unpinned.wasm"), b"abc").unwrap();
        std::fs::write(d.join("unpinned.toml"), "").unwrap();
        std::fs::write(d.join("changed.wasm"), b"abcd").unwrap();
        std::fs::write(
            d.join("changed.toml"),
            format!("sha256 = \"{}\"", sha256_hex(b"abc")),
        )
        .unwrap();
        std::fs::write(d.join("lonely.wasm"), b"abc").unwrap();
        std::fs::write(d.join("notes.txt"), b"ignored").unwrap();
        std::fs::create_dir(d.join("..data")).unwrap();

        let scan = scan_directory(d, None).unwrap();
        let names: Vec<&str> = scan.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        let problems: Vec<String> = scan
            .problems
            .iter()
            .map(|(p, m)| format!("{}: {m}", p.display()))
            .collect();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].contains("changed.wasm") && problems[0].contains("mismatch"));
        assert!(problems[1].contains("lonely.toml") && problems[1].contains("cannot be read"));
        assert!(problems[2].contains("no sha256") && problems[2].contains(&sha256_hex(b"abc")));
    }

    #[test]
    fn a_packed_configmap_mounted_as_a_directory_loads_its_expanded_component() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let gzip = crate::modules::compression::compress(b"abc").unwrap();
        std::fs::write(d.join("packed.wasm.gz"), gzip).unwrap();
        std::fs::write(
            d.join("packed.toml"),
            format!("sha256 = \"{}\"", sha256_hex(b"abc")),
        )
        .unwrap();
        let scan = scan_directory(d, None).unwrap();
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        assert!(scan.overrides.is_empty(), "not read as an override");
        assert_eq!(scan.modules.len(), 1);
        assert_eq!(scan.modules[0].name, "packed");
        assert_eq!(&*scan.modules[0].wasm, b"abc");

        // Damaged: a problem naming the file, and nothing loaded.
        std::fs::write(d.join("packed.wasm.gz"), b"not gzip").unwrap();
        let scan = scan_directory(d, None).unwrap();
        assert!(scan.modules.is_empty() && scan.overrides.is_empty());
        assert_eq!(scan.problems[0].0, d.join("packed.wasm.gz"));
    }

    #[test]
    fn a_gzipped_component_over_a_configmaps_bound_loads_from_a_directory() {
        // Larger than a ConfigMap's component may expand to, as a Python module's is (about 19 MB).
        let wasm =
            vec![7u8; (crate::modules::compression::MAX_COMPONENT_BYTES + (1 << 20)) as usize];
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let gzip = crate::modules::compression::compress(&wasm).unwrap();
        std::fs::write(d.join("big.wasm.gz"), gzip).unwrap();
        std::fs::write(
            d.join("big.toml"),
            format!("sha256 = \"{}\"", sha256_hex(&wasm)),
        )
        .unwrap();
        let scan = scan_directory(d, None).unwrap();
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        assert_eq!(scan.modules.len(), 1);
        assert_eq!(scan.modules[0].wasm.len(), wasm.len());
    }
}
