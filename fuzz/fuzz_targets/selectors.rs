//! Label selectors (the `label-selector` crate: parse, print, match), field selectors and list options
//! (the `kube` capability's `list`), and the AppliesTo check of an action's `ResourceSelector` against
//! an item, all with text a module or Velero controls.
//!
//! Input, split at NUL bytes: label selector, field selector, item JSON, namespace, then the included
//! and excluded resources and namespaces of a selector (each comma-separated).
#![no_main]

use label_selector::LabelSelector;
use libfuzzer_sys::fuzz_target;
use velero_wasm::action::{AppliesTo, ItemRef, Selector};
use velero_wasm::{FieldSelector, ListOptions};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let mut next = || parts.next().unwrap_or_default();
    let (labels, fields, item, namespace) = (next(), next(), next(), next());
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    let selector = Selector {
        included_resources: list(next()),
        excluded_resources: list(next()),
        included_namespaces: list(next()),
        excluded_namespaces: list(next()),
        label_selector: labels.to_string(),
    };
    let object: serde_json::Value = serde_json::from_str(item).unwrap_or_default();
    let item = ItemRef::parse(item).unwrap_or_default();

    let parsed = LabelSelector::parse(labels);
    if let Ok(selector) = &parsed {
        // What a selector prints is a selector that means the same.
        let printed = selector.to_string();
        let reparsed = LabelSelector::parse(&printed).unwrap_or_else(|e| {
            panic!("{labels:?} prints as {printed:?}, which does not parse: {e}")
        });
        assert_eq!(&reparsed, selector, "{labels:?} prints as {printed:?}");
        let pairs: Vec<(&String, &String)> = item.labels.iter().collect();
        assert_eq!(
            selector.matches(&pairs),
            selector.matches_with(|k| item.labels.get(k).map(String::as_str))
        );
    }
    let field_selector = FieldSelector::parse(fields);
    if let Ok(field_selector) = &field_selector {
        field_selector.matches(&object);
    }
    match ListOptions::parse(labels, fields) {
        Ok(options) => {
            assert!(parsed.is_ok() && field_selector.is_ok());
            options.matches(&object);
        }
        Err(_) => assert!(parsed.is_err() || field_selector.is_err()),
    }
    match AppliesTo::new(&selector) {
        Ok(applies_to) => {
            let _ = applies_to.check(&item, namespace);
        }
        Err(_) => assert!(parsed.is_err()),
    }
});
