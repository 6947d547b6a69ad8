//! `velero-wasm actions`: every loaded action with its kind, its module and what it applies to, one
//! line each; `--wide` adds each module's grant and settings, `--module NAME` shows one module in full (origin,
//! sha256, limits, grant one rule a line, actions), `--json` everything. Exits 1 when a module could not
//! be loaded or an action declares a need its module's grant does not cover (after listing the rest),
//! so it doubles as a check of a module directory. A shadow module's actions (docs/modules.md#s8) are
//! listed too, marked as the shadow of the module they would replace: they are called, never served.

use std::sync::Arc;

use serde_json::json;

use super::failure::{Failure, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::module_args::{load_runtime_with, ModuleArgs};
use super::text::{self, table, Column};
use super::velero_namespace;
use crate::action::slot::Family;
use crate::action::Selector;
use crate::capabilities::{Clock, Environment, Services};
use crate::cluster::live::{ClusterOptions, LazyCluster};
use crate::cluster::NoCluster;
use crate::config::Config;
use crate::modules::configmaps;
use crate::plan::LoadProblem;
use crate::runtime::{ActionEntry, Catalog, LoadedModule, Runtime};

/// Arguments of `actions`.
#[derive(Debug, clap::Args)]
pub(crate) struct ActionsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,

    /// Add each module's grant and settings to the table, and do not wrap lines to the terminal width.
    #[arg(long)]
    wide: bool,

    /// Show one module in full: origin, sha256, limits, grant (one rule a line), settings (with their
    /// types, defaults and descriptions) and actions.
    #[arg(long, value_name = "NAME")]
    module: Option<String>,

    /// Velero's namespace, where module ConfigMaps are read from (with VELERO_WASM_CONFIGMAPS=on):
    /// default as Velero's CLI finds it, the `namespace` of ~/.config/velero/config.json, else
    /// VELERO_NAMESPACE, else `velero`.
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,

    #[command(flatten)]
    modules: ModuleArgs,
}

/// Runs the command; returns the exit status.
pub(crate) async fn actions(args: ActionsArgs, config: &Config) -> u8 {
    let (runtime, problems) = match load(&args, config).await {
        Ok(loaded) => loaded,
        Err(failure) => {
            eprintln!("velero-wasm actions: {}", text::printable(&failure.message));
            return failure.code;
        }
    };
    let catalog = runtime.catalog();
    let module = match &args.module {
        None => None,
        Some(name) => match catalog.modules().find(|m| &*m.name == name.as_str()) {
            Some(module) => Some(module.clone()),
            None => {
                let loaded: Vec<&str> = catalog.modules().map(|m| &*m.name).collect();
                eprintln!(
                    "velero-wasm actions: --module {name}: no such module; loaded: {}",
                    loaded.join(", ")
                );
                return EXIT_BAD_INPUT;
            }
        },
    };
    let mut entries: Vec<_> = catalog
        .actions()
        .filter(|e| module.as_ref().is_none_or(|m| Arc::ptr_eq(m, &e.module)))
        .cloned()
        .collect();
    entries.extend(shadow_entries(&catalog, args.module.as_deref()));
    if args.json {
        print_json(&entries, &catalog, &problems);
    } else {
        print_table(
            &args,
            module.as_deref(),
            &entries,
            &catalog,
            &problems,
            config,
        );
    }
    // A module left out, or an action that needs more than its module's grant allows (the warnings
    // here): the directory is not ready to go into a ConfigMap.
    if problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

/// The actions of the shadow modules (of `module` only, when given), in their modules' order.
fn shadow_entries(catalog: &Catalog, module: Option<&str>) -> Vec<ActionEntry> {
    catalog
        .shadows()
        .filter(|shadow| module.is_none_or(|name| &*shadow.name == name))
        .flat_map(|shadow| {
            (0..shadow.actions.len()).map(|index| ActionEntry {
                module: shadow.clone(),
                index,
            })
        })
        .collect()
}

/// The module a listed action's module shadows (its own name), if it is a shadow.
fn shadow_of<'c>(catalog: &'c Catalog, module: &Arc<LoadedModule>) -> Option<&'c str> {
    catalog
        .shadow(&module.name)
        .filter(|shadow| Arc::ptr_eq(shadow, module))
        .map(|shadow| &*shadow.name)
}

/// The modules as the plugin would load them if it started now, and what went wrong: a failed
/// pre-flight too when that is not what the cluster holds.
async fn load(args: &ActionsArgs, config: &Config) -> Result<(Runtime, Vec<LoadProblem>), Failure> {
    // Velero's namespace as Velero's CLI finds it: modules see it too (`@velero` in grants).
    let velero_namespace = velero_namespace::resolve(args.namespace.as_deref(), config);
    let services = Services::new(
        Arc::new(NoCluster::default()),
        Clock::System,
        Environment::from_config(config).with_velero_namespace(&velero_namespace),
    );
    // With VELERO_WASM_CONFIGMAPS=on (or in a pod), the module ConfigMaps too, as the plugin reads them.
    let cluster = LazyCluster::new(ClusterOptions::new(config.clone()), None);
    let state = crate::state::default_dir(config);
    let configmaps = configmaps::read(
        &cluster,
        &velero_namespace,
        state.as_deref(),
        config,
        |_| {},
    )
    .await;
    // What the plugin would serve if it started now, and a failed pre-flight when that is not what
    // the cluster holds (the list could not be read: the ConfigMaps shown are an earlier list's).
    let fallback = configmaps.as_ref().and_then(|c| c.fallback.clone());
    let (runtime, mut problems) =
        load_runtime_with(&args.modules, services, configmaps, config).await?;
    if let Some(why) = fallback {
        problems.push(LoadProblem {
            message: format!(
                "{why}: the module ConfigMaps shown are those of the last successful list, which may not be what the cluster holds"
            ),
            broken: false,
            served: true,
            ..LoadProblem::default()
        });
    }
    Ok((runtime, problems))
}

/// `--json`: every action with its module's origin, grant and limits, the modules, the problems.
fn print_json(entries: &[ActionEntry], catalog: &Catalog, problems: &[LoadProblem]) {
    let actions: Vec<_> = entries
        .iter()
        .map(|entry| {
            let module = &entry.module;
            let mut action = json!({
                "name": entry.info().name,
                "kind": entry.info().kind,
                "veleroKind": entry.info().kind.velero_kind(),
                "appliesTo": entry.info().applies_to,
                "description": entry.info().description,
                "needs": entry.info().needs,
                "module": &*module.name,
                "origin": module.origin.to_string(),
                "sha256": module.sha256,
                "signature": module.signature.as_ref().map(|s| json!({
                    "key": s.key,
                    "verified": s.verified,
                    "expires": s.expires,
                    "expiresInDays": s.expires_within_warning(std::time::SystemTime::now()),
                })),
                "grant": {
                    "kube": module.grant.kube.iter().map(|r| json!({
                        "resources": r.resources, "verbs": r.verbs, "namespaces": r.namespaces,
                    })).collect::<Vec<_>>(),
                    "http": module.grant.http,
                    "env": module.grant.env,
                    "env-files": module.grant.env_files,
                },
                "limits": {
                    "timeout": humantime::format_duration(module.limits.timeout).to_string(),
                    "memoryBytes": module.limits.memory,
                    "outputBytes": module.limits.output,
                },
            });
            if let Some(serving) = shadow_of(catalog, module) {
                action["shadowOf"] = json!(serving);
            }
            action
        })
        .collect();
    let problems: Vec<_> = problems
        .iter()
        .map(|p| json!({"message": p.message, "broken": p.broken, "served": p.served}))
        .collect();
    let module = |m: &Arc<LoadedModule>| json!({"name": &*m.name, "source": m.origin.to_string(), "settings": m.settings(), "settingsSchema": m.settings_schema.entries});
    let mut modules: Vec<_> = catalog
        .modules()
        .map(|m| {
            let mut serving = module(m);
            serving["failurePolicy"] = json!(catalog.policy(&m.name));
            serving
        })
        .collect();
    // A module whose failure policy triggered with nothing of its name in service.
    modules.extend(
        catalog
            .policies()
            .filter(|(name, _)| !catalog.modules().any(|m| &*m.name == name.as_str()))
            .map(|(name, policy)| json!({"name": name, "source": null, "failurePolicy": policy})),
    );
    modules.extend(catalog.shadows().map(|m| {
        let mut shadow = module(m);
        shadow["shadowOf"] = json!(&*m.name);
        shadow
    }));
    let slots: Vec<_> = Family::ALL
        .into_iter()
        .map(|f| json!({"name": f.slot_name(), "veleroKind": f.kinds()[0].velero_kind(), "serves": slot_serves(f)}))
        .collect();
    let out =
        json!({ "actions": actions, "modules": modules, "slots": slots, "problems": problems });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
}

/// The table of actions (after one module in full with `--module`), the modules' sources, and the
/// problems on stderr.
fn print_table(
    args: &ActionsArgs,
    module: Option<&LoadedModule>,
    entries: &[ActionEntry],
    catalog: &Catalog,
    problems: &[LoadProblem],
    config: &Config,
) {
    if let Some(module) = &module {
        println!("{}", text::printable(&detail(module)));
    }
    let mut rows = vec![vec![
        "NAME".to_string(),
        "KIND".to_string(),
        "MODULE".to_string(),
        "APPLIES TO".to_string(),
    ]];
    if args.wide {
        rows[0].push("GRANT".to_string());
        rows[0].push("SETTINGS".to_string());
    }
    for entry in entries {
        let info = entry.info();
        let name = match shadow_of(catalog, &entry.module) {
            Some(serving) => format!("{} (shadow of {serving})", entry.module.name),
            None => entry.module.name.to_string(),
        };
        let mut row = vec![
            info.name.clone(),
            info.kind.to_string(),
            match &entry.module.signature {
                Some(s) if s.verified => format!("{name} (signed {}{})", s.key, expiry_note(s)),
                Some(s) => format!("{name} (signed {}, unverified{})", s.key, expiry_note(s)),
                None => name,
            },
            applies_to(&info.applies_to),
        ];
        if args.wide {
            row.push(entry.module.grant.to_string());
            row.push(settings(&entry.module));
        }
        rows.push(row);
    }
    let width = if args.wide {
        usize::MAX
    } else {
        text::width(config)
    };
    let mut columns = vec![Column::Wraps, Column::Fixed, Column::Wraps, Column::Wraps];
    if args.wide {
        columns.extend([Column::Wraps, Column::Wraps]);
    }
    print!("{}", text::printable(&table(&rows, &columns, width)));
    // Where each module comes from (stock, a directory, a ConfigMap, an override).
    // and what happens when a new version of it cannot be loaded (its failure policy), and whether
    // that happened now.
    let mut sources = vec![vec![
        "MODULE".to_string(),
        "SOURCE".to_string(),
        "ON FAILURE".to_string(),
    ]];
    for m in catalog.modules() {
        sources.push(vec![
            m.name.to_string(),
            m.origin.to_string(),
            super::status::policy_cell(catalog.policy(&m.name)),
        ]);
    }
    for (name, policy) in catalog.policies() {
        if !catalog.modules().any(|m| &*m.name == name.as_str()) {
            sources.push(vec![
                name.clone(),
                "not served".to_string(),
                super::status::policy_cell(Some(policy)),
            ]);
        }
    }
    for m in catalog.shadows() {
        sources.push(vec![
            format!("{} (shadow of {})", m.name, m.name),
            m.origin.to_string(),
            "-".to_string(),
        ]);
    }
    print!(
        "\n{}",
        table(
            &sources,
            &[Column::Wraps, Column::Wraps, Column::Wraps],
            width
        )
    );
    // The names the plugin lists beside the actions, for those added while Velero runs.
    if module.is_none() {
        let mut slots = vec![vec![
            "SLOT".to_string(),
            "LISTED AS".to_string(),
            "SERVES".to_string(),
        ]];
        slots.extend(Family::ALL.into_iter().map(|f| {
            vec![
                f.slot_name().to_string(),
                f.kinds()[0].velero_kind().to_string(),
                slot_serves(f),
            ]
        }));
        print!(
            "\n{}",
            table(
                &slots,
                &[Column::Wraps, Column::Fixed, Column::Wraps],
                width
            )
        );
    }
    // Signatures about to expire, each once.
    for m in catalog.modules() {
        if let Some(s) = &m.signature {
            if let Some(days) = s.expires_within_warning(std::time::SystemTime::now()) {
                eprintln!(
                    "velero-wasm actions: warning: module {}: its signature by key {} {} ({}): sign it again and apply it before then, or the module stops serving",
                    m.name,
                    s.key,
                    super::status::expiry_words(days),
                    s.expires.as_deref().unwrap_or("-")
                );
            }
        }
    }
    for problem in problems {
        let what = if problem.broken {
            "module left out"
        } else {
            "warning"
        };
        let problem = problem.to_string();
        eprintln!("velero-wasm actions: {what}: {}", text::printable(&problem));
    }
}

/// What a slot serves, for people.
fn slot_serves(family: Family) -> String {
    let kinds: Vec<&str> = family.kinds().iter().map(|k| k.as_str()).collect();
    format!(
        "{} actions added since Velero listed, until it restarts (docs/modules.md#s10)",
        kinds.join(" and ")
    )
}

/// `, expires in 3 days` when a signature expires within the warning window, else nothing.
fn expiry_note(signature: &crate::modules::ModuleSignature) -> String {
    signature
        .expires_within_warning(std::time::SystemTime::now())
        .map(|days| format!(", {}", super::status::expiry_words(days)))
        .unwrap_or_default()
}

/// One module in full, a field a line (the grant one rule a line), for `--module NAME`.
fn detail(module: &LoadedModule) -> String {
    let limits = &module.limits;
    let mut fields: Vec<(&str, String)> = vec![
        ("module", module.name.to_string()),
        ("origin", module.origin.to_string()),
        ("sha256", module.sha256.clone()),
    ];
    if !module.description.is_empty() {
        fields.push(("description", module.description.clone()));
    }
    fields.push((
        "limits",
        format!(
            "timeout {}, memory {}, output {}, capability-calls {}, http-timeout {}, http-response {}",
            humantime::format_duration(limits.timeout),
            bytes(limits.memory),
            bytes(limits.output),
            limits.capability_calls,
            humantime::format_duration(limits.http_timeout),
            bytes(limits.http_response),
        ),
    ));
    let grant = &module.grant;
    let mut rules: Vec<String> = grant.kube.iter().map(|r| r.to_string()).collect();
    for (what, list) in [
        ("http", &grant.http),
        ("env", &grant.env),
        ("env-files", &grant.env_files),
    ] {
        if !list.is_empty() {
            rules.push(format!("{what} {}", list.join(",")));
        }
    }
    if rules.is_empty() {
        rules.push("none".to_string());
    }
    for (i, rule) in rules.into_iter().enumerate() {
        fields.push((if i == 0 { "grant" } else { "" }, rule));
    }
    // Each setting it declares, with its value in effect; then any it does not declare.
    let mut lines: Vec<String> = module
        .settings_schema
        .entries
        .iter()
        .map(|(key, spec)| match module.settings().get(key) {
            Some(value) => format!("{key} = {value}  ({spec})"),
            None => format!("{key} unset  ({spec})"),
        })
        .collect();
    for (key, value) in module.settings() {
        if !module.settings_schema.entries.contains_key(key) {
            lines.push(format!("{key} = {value}  (not declared: unchecked)"));
        }
    }
    for (i, line) in lines.into_iter().enumerate() {
        fields.push((if i == 0 { "settings" } else { "" }, line));
    }
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    fields
        .iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

/// The settings in effect, `key=value` separated by spaces (`-` for none): `--module NAME` shows each
/// one's type, default and description.
fn settings(module: &LoadedModule) -> String {
    let pairs: Vec<String> = module
        .settings()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if pairs.is_empty() {
        "-".to_string()
    } else {
        pairs.join(" ")
    }
}

/// `256MiB`, `64MiB`, `1000B`: the units a manifest is written in.
fn bytes(n: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= size && n.is_multiple_of(size) {
            return format!("{}{unit}", n / size);
        }
    }
    format!("{n}B")
}

/// How many included resources a table cell shows before it abbreviates.
const SHOWN_RESOURCES: usize = 4;

/// One line for people: `persistentvolumeclaims,datavolumes; labels kubevirt.io in (…)`.
fn applies_to(s: &Selector) -> String {
    let mut parts = Vec::new();
    parts.push(match s.included_resources.len() {
        0 => "all resources".to_string(),
        // A long list (hcp's restore names 69) would make the table unreadable; --json has it all.
        n if n > SHOWN_RESOURCES => format!(
            "{},… ({n} resources)",
            s.included_resources[..SHOWN_RESOURCES].join(",")
        ),
        _ => s.included_resources.join(","),
    });
    if !s.excluded_resources.is_empty() {
        parts.push(format!("not {}", s.excluded_resources.join(",")));
    }
    if !s.included_namespaces.is_empty() {
        parts.push(format!("in {}", s.included_namespaces.join(",")));
    }
    if !s.excluded_namespaces.is_empty() {
        parts.push(format!("not in {}", s.excluded_namespaces.join(",")));
    }
    if !s.label_selector.is_empty() {
        parts.push(format!("labels {}", s.label_selector));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_resource_lists_are_abbreviated_for_people() {
        let many = Selector {
            included_resources: (1..=6).map(|i| format!("r{i}")).collect(),
            label_selector: "a=b".into(),
            ..Selector::default()
        };
        assert_eq!(applies_to(&many), "r1,r2,r3,r4,… (6 resources); labels a=b");
        let few = Selector {
            included_resources: vec!["pods".into()],
            excluded_namespaces: vec!["kube-system".into()],
            ..Selector::default()
        };
        assert_eq!(applies_to(&few), "pods; not in kube-system");
        assert_eq!(applies_to(&Selector::default()), "all resources");
    }

    #[test]
    fn sizes_are_written_in_manifest_units() {
        assert_eq!(bytes(256 << 20), "256MiB");
        assert_eq!(bytes(1 << 30), "1GiB");
        assert_eq!(bytes(1000), "1000B");
    }
}
