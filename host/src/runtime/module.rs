//! A loaded module: its actions described and validated, compiled and linked once (`InstancePre`).
//! A module exports `velero-wasm:plugin/actions`, `velero-wasm:plugin/signing`, or both.
//!
//! A module whose description is in the compile cache (the same bytes and manifest loaded before) is
//! put in service from that description, and compiled on first use ([`LoadedModule::exports`]): the
//! plugin answers Velero's first calls without waiting for every module's machine code.

use std::collections::BTreeSet;
use std::sync::Arc;

use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use super::cache::{CompileCache, Interfaces};
use super::error::{Cause, CompileError, InstantiateError, LoadError};
use crate::action::{ActionInfo, AppliesTo};
use crate::bindings::signer::SignerIndices;
use crate::bindings::{PluginPre, ACTIONS};
use crate::capabilities::{signing, CallState, EnvGrant, HttpGrant, KubeGrant, ModuleCaps};
use crate::modules::{sha256_hex, Grant, Limits, ModuleSignature, ModuleSource, Origin};

/// A module ready to run.
pub(crate) struct LoadedModule {
    /// Module name.
    pub(crate) name: Arc<str>,
    /// sha256 of its bytes.
    pub(crate) sha256: String,
    /// Where it came from.
    pub(crate) origin: Origin,
    /// Its signature, as checked when it was read.
    pub(crate) signature: Option<ModuleSignature>,
    /// Per-call limits.
    pub(crate) limits: Limits,
    /// Its grant, as the manifest states it.
    pub(crate) grant: Grant,
    /// One line for people, from the manifest.
    pub(crate) description: String,
    /// The settings it declares (`[settings-schema]`), for `actions` to show.
    pub(crate) settings_schema: crate::modules::settings_schema::SettingsSchema,
    /// The manifest's `version`, if it states one.
    pub(crate) version: Option<String>,
    /// Its actions, as it describes them.
    pub(crate) actions: Vec<ActionInfo>,
    /// The failure policy its manifest states (`on-failure`), if any.
    pub(crate) on_failure: Option<crate::modules::FailurePolicy>,
    /// Set when its actions are refused (a failure policy `refuse` triggered for its name): every
    /// call fails with this reason instead of running.
    refusal: std::sync::OnceLock<Arc<str>>,
    pub(super) applies_to: Vec<AppliesTo>,
    pub(super) caps: Arc<ModuleCaps>,
    /// Which of the two interfaces it exports.
    pub(super) interfaces: Interfaces,
    /// Its compiled and linked exports, made at load or on first use.
    exports: tokio::sync::OnceCell<Result<Arc<Exports>, InstantiateError>>,
    /// What compiles it on first use (`None` once compiled at load).
    compiler: Option<(Compiler, bytes::Bytes)>,
}

/// A module's exports, compiled and linked.
pub(super) struct Exports {
    /// Set when the module exports `actions`.
    pub(crate) pre: Option<PluginPre<CallState>>,
    /// Set when the module exports `signing`.
    pub(crate) signing: Option<SigningExport>,
}

/// What compiling a module needs: the engine, the capabilities to link, the compile cache, and who
/// is told of a compile.
#[derive(Clone)]
pub(super) struct Compiler {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) cache: Option<CompileCache>,
    pub(crate) watch: Option<Arc<dyn CompileWatch>>,
    /// The memory compiles may take at once.
    pub(crate) budget: Arc<super::CompileBudget>,
}

/// Told when a module's code is compiled rather than read from the cache: a large module (an
/// interpreter with it) compiles for seconds to minutes, which a person at a terminal should see.
pub(crate) trait CompileWatch: Send + Sync {
    /// Module `module`, `bytes` long, begins compiling.
    fn started(&self, module: &str, bytes: usize);
    /// Its compile is over (done or failed).
    fn finished(&self, module: &str);
}

/// A module's `signing` export, type-checked at load.
pub(super) struct SigningExport {
    pub(crate) pre: wasmtime::component::InstancePre<CallState>,
    pub(crate) indices: SignerIndices,
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("actions", &self.actions.len())
            .finish()
    }
}

impl LoadedModule {
    /// The prepared selector of action number `index`.
    pub(crate) fn applies_to(&self, index: usize) -> &AppliesTo {
        &self.applies_to[index]
    }

    /// Refuses every call of the module's actions from now on, with `why` (a failure policy
    /// `refuse` that triggered: the module stays listed so that its items fail rather than go
    /// unhandled). A second refusal keeps the first reason.
    pub(crate) fn refuse(&self, why: &str) {
        let _ = self.refusal.set(Arc::from(why));
    }

    /// Why its actions are refused, if they are.
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.refusal.get().map(|why| &**why)
    }

    /// Whether the module exports `velero-wasm:plugin/signing`.
    pub(crate) fn exports_signing(&self) -> bool {
        self.interfaces.signing
    }

    /// Its compiled exports: compiled (or read from the compile cache) on first use when the module
    /// was put in service from its cached description. A failure is kept: every later call sees it.
    pub(super) async fn exports(&self) -> Result<Arc<Exports>, InstantiateError> {
        self.exports
            .get_or_init(|| async {
                let Some((compiler, wasm)) = self.compiler.clone() else {
                    return Err(InstantiateError::NotCompiled {
                        module: self.name.clone(),
                    });
                };
                let (name, origin, sha256) = (
                    self.name.to_string(),
                    self.origin.clone(),
                    self.sha256.clone(),
                );
                let compiled = tokio::task::spawn_blocking(move || {
                    compile(&compiler, &name, &origin, &sha256, &wasm)
                })
                .await;
                match compiled {
                    Ok(Ok(exports)) if exports.interfaces() == self.interfaces => {
                        Ok(Arc::new(exports))
                    }
                    Ok(Ok(_)) => Err(InstantiateError::ExportsDiffer {
                        module: self.name.clone(),
                    }),
                    Ok(Err(problem)) => Err(InstantiateError::Compile {
                        module: self.name.clone(),
                        source: Arc::new(problem),
                    }),
                    Err(e) => Err(InstantiateError::Interrupted {
                        module: self.name.clone(),
                        source: Arc::new(e),
                    }),
                }
            })
            .await
            .clone()
    }

    /// Its settings in effect (the manifest's, with an override's applied).
    pub(crate) fn settings(&self) -> &std::collections::BTreeMap<String, String> {
        &self.caps.settings
    }

    /// Compiles the module now if it is not yet (the plugin does this for every module once it serves).
    pub(crate) async fn compile_now(&self) {
        if let Err(problem) = self.exports().await {
            // A shadow that does not compile fails only its own calls, each counted as its fault.
            if self.caps.shadow {
                tracing::info!(shadow = true, "{problem}");
            } else {
                tracing::error!("{problem}");
            }
        }
    }
}

impl Exports {
    /// Which interfaces these exports provide.
    pub(crate) fn interfaces(&self) -> Interfaces {
        Interfaces {
            actions: self.pre.is_some(),
            signing: self.signing.is_some(),
        }
    }
}

/// A module whose actions are not yet known, with its exports if it was compiled to describe them.
pub(super) struct Linked {
    pub(crate) source: ModuleSource,
    pub(crate) caps: Arc<ModuleCaps>,
    pub(crate) interfaces: Interfaces,
    pub(crate) exports: Option<Exports>,
    pub(crate) compiler: Compiler,
}

impl Linked {
    pub(crate) fn error(&self, problem: impl Into<String>) -> LoadError {
        load_error(&self.source, problem)
    }
}

pub(super) fn load_error(source: &ModuleSource, problem: impl Into<String>) -> LoadError {
    LoadError {
        module: source.name.clone(),
        origin: source.origin.to_string(),
        problem: problem.into(),
    }
}

/// Compiles (or finds in the cache) and links a module (CPU-bound: run it off the async threads).
pub(super) fn link(compiler: &Compiler, source: ModuleSource) -> Result<Linked, LoadError> {
    let exports = compile(
        compiler,
        &source.name,
        &source.origin,
        &source.sha256,
        &source.wasm,
    )
    .map_err(|problem| load_error(&source, problem.to_string()))?;
    Ok(Linked {
        caps: caps(&source)?,
        interfaces: exports.interfaces(),
        exports: Some(exports),
        compiler: compiler.clone(),
        source,
    })
}

/// A module whose description is known (from the compile cache): compiled on first use.
pub(super) fn described(
    compiler: &Compiler,
    source: ModuleSource,
    interfaces: Interfaces,
) -> Result<Linked, LoadError> {
    Ok(Linked {
        caps: caps(&source)?,
        interfaces,
        exports: None,
        compiler: compiler.clone(),
        source,
    })
}

/// Compiles (or finds in the cache) and links a module's code; the error says what is wrong with it.
fn compile(
    compiler: &Compiler,
    name: &str,
    origin: &Origin,
    sha256: &str,
    wasm: &[u8],
) -> Result<Exports, CompileError> {
    let Compiler {
        engine,
        linker,
        cache,
        watch,
        budget,
    } = compiler;
    let cache = cache.as_ref();
    // The cache key is the hash of the bytes at hand, whatever the source says of itself; the bytes
    // of a stock module are the binary's own, hashed when it was built.
    let key = match (cache, origin) {
        (None, _) => String::new(),
        (Some(_), origin) if origin.is_stock_component() => sha256.to_string(),
        (Some(_), _) => sha256_hex(wasm),
    };
    let cached = |cache: &CompileCache| cache.load(engine, &key);
    let component = match cache.and_then(cached) {
        Some(component) => component,
        None => {
            // Another process may be compiling the same module: wait for it, then look again.
            let _lock = cache.and_then(|c| c.lock(engine, &key));
            match cache.and_then(cached) {
                Some(component) => component,
                None => {
                    // The stock modules are small (under 1 MB) and must serve while others
                    // compile: only other modules wait for the budget.
                    let _reservation = match origin.is_stock_component() {
                        true => None,
                        false => Some(budget.reserve(wasm)?),
                    };
                    tracing::debug!(module = name, "compiling");
                    if let Some(watch) = watch {
                        watch.started(name, wasm.len());
                    }
                    let component = match cache {
                        Some(cache) => cache.compile(engine, &key, wasm),
                        None => Component::new(engine, wasm),
                    };
                    if let Some(watch) = watch {
                        watch.finished(name);
                    }
                    component.map_err(|e| CompileError::NotComponent(Cause::from(e)))?
                }
            }
        }
    };
    let instance_pre = linker
        .instantiate_pre(&component)
        .map_err(|e| CompileError::Imports(Cause::from(e)))?;
    let exports = |name: &str| component.get_export_index(None, name).is_some();
    let (has_actions, has_signing) = (exports(ACTIONS), exports(signing::INTERFACE));
    if !has_actions && !has_signing {
        return Err(CompileError::NoExports);
    }
    let pre = match has_actions {
        false => None,
        true => Some(
            PluginPre::new(instance_pre.clone()).map_err(|e| CompileError::Export {
                interface: ACTIONS,
                source: Cause::from(e),
            })?,
        ),
    };
    let signing = match has_signing {
        false => None,
        true => Some(SigningExport {
            indices: SignerIndices::new(&instance_pre).map_err(|e| CompileError::Export {
                interface: signing::INTERFACE,
                source: Cause::from(e),
            })?,
            pre: instance_pre,
        }),
    };
    Ok(Exports { pre, signing })
}

/// What the module's manifest grants it, as the capabilities check it.
fn caps(source: &ModuleSource) -> Result<Arc<ModuleCaps>, LoadError> {
    // The settings it loads with (an override's or a suite case's over the manifest's) against the
    // settings it declares.
    source
        .manifest
        .settings_schema
        .check(&source.manifest.settings)
        .map_err(|e| load_error(source, e.to_string()))?;
    let limits = source.manifest.limits;
    Ok(Arc::new(ModuleCaps {
        module: Arc::from(source.name.as_str()),
        kube: KubeGrant::new(&source.manifest.grant.kube),
        // The host never buffers an answer larger than the guest's memory could take.
        http: HttpGrant::new(
            &source.manifest.grant.http,
            limits.http_response.min(limits.memory),
            limits.http_timeout,
        ),
        env: EnvGrant::new(&source.manifest.grant.env, &source.manifest.grant.env_files),
        settings: source
            .manifest
            .settings_schema
            .with_defaults(&source.manifest.settings),
        read_views: !source.manifest.no_read_views,
        shadow: false,
    }))
}

/// What [`finish`] finds worth telling the operator: warnings (needs its grant does not cover) and
/// deprecations (settings declared in the old vocabulary).
pub(super) type Remarks = (Vec<String>, Vec<String>);

/// Validates what a module says about its actions, and finishes loading it. Returns its remarks.
pub(super) fn finish(
    linked: Linked,
    actions: Vec<ActionInfo>,
) -> Result<(LoadedModule, Remarks), LoadError> {
    if actions.is_empty() && linked.interfaces.actions {
        return Err(linked.error("describes no actions"));
    }
    let mut names = BTreeSet::new();
    let mut applies_to = Vec::with_capacity(actions.len());
    let mut warnings = Vec::new();
    for action in &actions {
        validate_name(&action.name)
            .map_err(|p| linked.error(format!("action name {:?}: {p}", action.name)))?;
        if !names.insert(action.name.as_str()) {
            return Err(linked.error(format!("describes action {} twice", action.name)));
        }
        applies_to.push(
            AppliesTo::new(&action.applies_to)
                .map_err(|e| linked.error(format!("action {}: {e}", action.name)))?,
        );
        for need in &action.needs {
            let grant = &linked.source.manifest.grant;
            if let Some(why) = super::needs::uncovered(grant, need, &action.applies_to) {
                warnings.push(format!(
                    "module {}: action {} needs {need}, which the manifest does not grant ({why}); those calls will be denied",
                    linked.source.name, action.name
                ));
            }
        }
    }
    // A settings schema in the old vocabulary loads, converted: say what to write instead.
    let deprecations: Vec<String> = (linked.source.manifest.settings_schema.deprecations.iter())
        .map(|d| format!("module {}: {d}", linked.source.name))
        .collect();
    let source = linked.source;
    let (exports, compiler) = match linked.exports {
        Some(exports) => (
            tokio::sync::OnceCell::new_with(Some(Ok(Arc::new(exports)))),
            None,
        ),
        None => (
            tokio::sync::OnceCell::new(),
            Some((linked.compiler, source.wasm.clone())),
        ),
    };
    Ok((
        LoadedModule {
            name: Arc::from(source.name.as_str()),
            sha256: source.sha256,
            origin: source.origin,
            signature: source.signature,
            limits: source.manifest.limits,
            grant: source.manifest.grant,
            description: source.manifest.description,
            settings_schema: source.manifest.settings_schema,
            version: source.manifest.version.as_ref().map(ToString::to_string),
            on_failure: source.manifest.on_failure,
            refusal: std::sync::OnceLock::new(),
            actions,
            applies_to,
            caps: linked.caps,
            interfaces: linked.interfaces,
            exports,
            compiler,
        },
        (warnings, deprecations),
    ))
}

/// Velero's rule for plugin names (`ValidatePluginName`): `<DNS-1123 subdomain>/<name without '/'>`.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let (prefix, rest) = name.split_once('/').ok_or(NameError::NoSlash)?;
    if rest.is_empty() || rest.contains('/') {
        return Err(NameError::Name);
    }
    if prefix.is_empty() || prefix.len() > 253 {
        return Err(NameError::PrefixLength);
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !prefix.split('.').all(label_ok) {
        return Err(NameError::PrefixLabels);
    }
    if crate::action::slot::slot_family(name).is_some() {
        return Err(NameError::Reserved);
    }
    Ok(())
}

/// Why an action's name breaks Velero's rule for plugin names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// No `/`.
    #[error("must be <dns-subdomain>/<name>, e.g. example.io/my-action")]
    NoSlash,
    /// Nothing after the `/`, or another `/`.
    #[error("the part after '/' must be non-empty and contain no '/'")]
    Name,
    /// A prefix too short or too long.
    #[error("the part before '/' must be a DNS subdomain of 1 to 253 characters")]
    PrefixLength,
    /// A prefix that is not a lower-case DNS subdomain.
    #[error("the part before '/' must be a lower-case DNS subdomain (a-z, 0-9, '-', '.')")]
    PrefixLabels,
    /// The name of a slot, under which the plugin serves actions Velero has not listed.
    #[error("it is the name of a slot velero-wasm lists itself for actions added while Velero runs (docs/modules.md#s10)")]
    Reserved,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_follow_velero() {
        assert!(validate_name("kubevirt-velero-plugin/backup-virtualmachine-action").is_ok());
        assert!(validate_name("1.2.3.4/5678").is_ok());
        assert!(validate_name("example.io/Mixed_Case.ok").is_ok());
        for bad in [
            "no-slash",
            "a/b/c",
            "/x",
            "x/",
            "Upper.io/x",
            "-a.io/x",
            "a..io/x",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        // The slots' names are valid plugin names, and no module's action may take one.
        for family in crate::action::slot::Family::ALL {
            assert_eq!(
                validate_name(family.slot_name()),
                Err(NameError::Reserved),
                "{family:?}"
            );
        }
    }
}
