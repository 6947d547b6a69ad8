//! Settings against a manifest's `[settings-schema]`: the schema read from manifest TOML, a module's
//! own `[settings]` checked at parse, settings given later (a suite case's, `run --setting`) checked
//! with defaults filled in, and a stock override's settings checked against the stock module's
//! schema (`stock_override::apply`).
//!
//! Input: the manifest's (or override's) text, then `\0` and settings, one `key=value` a line.
#![no_main]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use velero_wasm::modules::settings_schema::{nearest, SettingsSchema};
use velero_wasm::modules::stock_override::{apply, widening};
use velero_wasm::modules::{stock_modules, Manifest, ModuleSource, Origin};

/// The stock modules, read once.
fn stock() -> &'static [ModuleSource] {
    static STOCK: OnceLock<Vec<ModuleSource>> = OnceLock::new();
    STOCK.get_or_init(|| {
        stock_modules()
            .into_iter()
            .map(|m| m.expect("a stock module reads"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let (text, given) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let (Ok(text), Ok(given)) = (std::str::from_utf8(text), std::str::from_utf8(given)) else {
        return;
    };
    // Each value as JSON when it is, else as a string.
    let given: BTreeMap<String, Value> = given
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
            (k.to_string(), value)
        })
        .collect();
    // Settings with the schema's defaults where they set nothing, typed.
    let with_defaults = |schema: &SettingsSchema, settings: &BTreeMap<String, Value>| {
        let mut all = settings.clone();
        for (key, spec) in &schema.entries {
            if let Some(default) = &spec.default {
                all.entry(key.clone()).or_insert_with(|| default.clone());
            }
        }
        all
    };

    if let Ok(manifest) = Manifest::parse(text) {
        let schema = &manifest.settings_schema;
        // What parsing accepted stays accepted, and defaults are values of their own type.
        schema
            .check(&manifest.settings)
            .expect("parse checked them");
        schema
            .check(&with_defaults(schema, &manifest.settings))
            .expect("defaults are checked when declared");
        for spec in schema.entries.values() {
            let _ = spec.to_string();
        }
        match schema.check(&given) {
            Ok(()) => {
                schema
                    .check(&with_defaults(schema, &given))
                    .expect("defaults never make good settings bad");
            }
            Err(e) => {
                // The error names the key it is about, which was given (with the path inside it).
                assert!(given.keys().any(|k| e.key.starts_with(k.as_str())), "{e}");
                assert!(!e.to_string().is_empty());
            }
        }
        let keys: Vec<&str> = schema.entries.keys().map(String::as_str).collect();
        for key in given.keys() {
            if let Some(near) = nearest(key, &keys) {
                assert!(schema.entries.contains_key(near));
            }
        }
    }

    for module in stock() {
        let from = Origin::File(PathBuf::from(format!("{}.toml", module.name)));
        if let Ok(applied) = apply(module, text, from) {
            let manifest = &applied.manifest;
            manifest
                .settings_schema
                .check(&manifest.settings)
                .expect("an applied override's settings are the stock schema's");
            assert_eq!(
                widening(&module.manifest.grant, &manifest.grant),
                None,
                "an override never widens the grant"
            );
            assert_eq!(applied.sha256, module.sha256);
        }
    }
});
