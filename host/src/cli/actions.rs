//! `velero-wasm actions`: every loaded action with its kind, what it applies to, its module and the
//! module's grant; a table for people, or `--json`. Exits 1 when a module could not be loaded (after
//! listing the others), so it doubles as a check of a module directory.

use std::sync::Arc;

use serde_json::json;

use super::{load_runtime_with, ModuleArgs, EXIT_FAILED, EXIT_OK};
use crate::action::Selector;
use crate::capabilities::kube::live::{ClusterOptions, LazyCluster};
use crate::capabilities::kube::NoCluster;
use crate::capabilities::{Clock, Environment, Services};
use crate::modules::configmaps;

/// Arguments of `actions`.
#[derive(Debug, clap::Args)]
pub struct ActionsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    modules: ModuleArgs,
}

/// Runs the command; returns the exit status.
pub async fn actions(args: ActionsArgs) -> u8 {
    let services = Services::new(
        Arc::new(NoCluster::default()),
        Clock::System,
        Environment::from_process(),
    );
    // With VELERO_WASM_CONFIGMAPS=on (or in a pod), the module ConfigMaps too, as the plugin reads them.
    let cluster = LazyCluster::new(ClusterOptions::default(), None);
    let velero_namespace = services.environment.velero_namespace().to_string();
    let state = crate::state::default_dir();
    let configmaps = configmaps::read(&cluster, &velero_namespace, state.as_deref()).await;
    let (runtime, problems) = match load_runtime_with(&args.modules, services, configmaps).await {
        Ok(loaded) => loaded,
        Err(failure) => {
            eprintln!("velero-wasm actions: {}", failure.message);
            return failure.code;
        }
    };
    let catalog = runtime.catalog();
    if args.json {
        let actions: Vec<_> = catalog
            .actions()
            .map(|entry| {
                let module = &entry.module;
                json!({
                    "name": entry.info().name,
                    "kind": entry.info().kind,
                    "veleroKind": entry.info().kind.velero_kind(),
                    "appliesTo": entry.info().applies_to,
                    "description": entry.info().description,
                    "needs": entry.info().needs,
                    "module": &*module.name,
                    "origin": module.origin.to_string(),
                    "sha256": module.sha256,
                    "signature": module.signature.as_ref().map(|s| json!({"key": s.key, "verified": s.verified})),
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
                })
            })
            .collect();
        let problems: Vec<_> = problems
            .iter()
            .map(|p| json!({"message": p.message, "broken": p.broken, "served": p.served}))
            .collect();
        let modules: Vec<_> = catalog
            .modules()
            .map(|m| json!({"name": &*m.name, "source": m.origin.to_string(), "settings": m.settings()}))
            .collect();
        let out = json!({ "actions": actions, "modules": modules, "problems": problems });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        let mut rows = vec![[
            "NAME".to_string(),
            "KIND".to_string(),
            "APPLIES TO".to_string(),
            "MODULE".to_string(),
            "GRANT".to_string(),
        ]];
        for entry in catalog.actions() {
            let info = entry.info();
            rows.push([
                info.name.clone(),
                info.kind.to_string(),
                applies_to(&info.applies_to),
                match &entry.module.signature {
                    Some(s) if s.verified => format!("{} (signed {})", entry.module.name, s.key),
                    Some(s) => format!("{} (signed {}, unverified)", entry.module.name, s.key),
                    None => entry.module.name.to_string(),
                },
                entry.module.grant.to_string(),
            ]);
        }
        print!("{}", table(&rows));
        // Where each module comes from (stock, a directory, a ConfigMap, an override).
        let mut sources = vec![[
            "MODULE".to_string(),
            "SOURCE".to_string(),
            String::new(),
            String::new(),
            String::new(),
        ]];
        for m in catalog.modules() {
            sources.push([
                m.name.to_string(),
                m.origin.to_string(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        print!("\n{}", table(&sources));
        for problem in &problems {
            let what = if problem.broken {
                "module left out"
            } else {
                "warning"
            };
            eprintln!("velero-wasm actions: {what}: {problem}");
        }
    }
    if !problems.iter().any(|p| p.broken) {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
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

/// Left-aligned columns separated by two spaces.
fn table(rows: &[[String; 5]]) -> String {
    let mut widths = [0usize; 5];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
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
}
