//! `kubevirt-velero-plugin/restore-nad-action` (docs/kubevirt.md#s6-7): a NetworkAttachmentDefinition
//! restored with a namespace mapping gets the mapped namespace in the `netAttachDefName` of its CNI
//! config. OVN-Kubernetes secondary networks carry their own `namespace/name` there; restored into
//! another namespace without the rewrite, the definition keeps pointing at the old one and the VMs on
//! it do not get their network. Upstream added the action in #431 (June 2026; #452 on release-v0.8).
//!
//! Upstream's rules, in both modes: only a top-level `netAttachDefName` that is a non-empty string of
//! exactly two `/`-separated parts is read, and it is rewritten only when its namespace is a key of
//! the Restore's `spec.namespaceMapping`. Everything else is restored as it is. The modes differ in
//! two places: a config that is not a JSON object fails the item upstream (Velero then does not restore
//! the definition), where extended mode restores it unchanged with a warning saying why; and upstream
//! writes the rewritten config the way Go encodes it (keys sorted, no whitespace), and the rewritten
//! item with its Go type's zero values (`creationTimestamp: null`, [`crate::go_zero_values`]), where
//! extended mode keeps the config's key order and numbers as written and changes nothing else.

use serde_json::{Map, Value};
use velero_wasm_sdk::object::type_name;
use velero_wasm_sdk::{log, Object, RestoreResponse};

use crate::go_json;
use crate::go_zero_values::{self, GoType};
use crate::mode::Mode;

/// The config key upstream rewrites.
pub const NET_ATTACH_DEF_NAME: &str = "netAttachDefName";

/// What the action does with one NetworkAttachmentDefinition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `spec.config` becomes `config`: `netAttachDefName` changed from `from` to `to`.
    Rewrite {
        /// The new `spec.config` text.
        config: String,
        /// The old `netAttachDefName`.
        from: String,
        /// The new one.
        to: String,
    },
    /// Restored as it is, for this reason.
    Keep(String),
    /// The config cannot be read: upstream fails the item with this message.
    Malformed(String),
}

/// Decides what to do with `nad` for `restore` (both JSON objects, as Velero hands them over).
pub fn decide(mode: Mode, nad: &Object, restore: &Object) -> Decision {
    let config_text = match nad.pointer("/spec/config") {
        None | Some(Value::Null) => return Decision::Keep("it has no spec.config".into()),
        Some(Value::String(text)) if text.is_empty() => {
            return Decision::Keep("its spec.config is empty".into())
        }
        Some(Value::String(text)) => text,
        Some(other) => {
            return Decision::Malformed(format!(
                "spec.config is {}, not a string",
                type_name(other)
            ))
        }
    };
    let config: Map<String, Value> = match serde_json::from_str::<Value>(config_text) {
        Ok(Value::Object(map)) => map,
        // Go decodes `null` into a nil map without error: nothing to rewrite.
        Ok(Value::Null) => return Decision::Keep("its spec.config is the JSON null".into()),
        Ok(other) => {
            return Decision::Malformed(format!(
                "spec.config holds {} in JSON, not an object",
                type_name(&other)
            ))
        }
        Err(e) => return Decision::Malformed(format!("spec.config is not JSON: {e}")),
    };
    let name = match config.get(NET_ATTACH_DEF_NAME) {
        None => {
            return Decision::Keep(format!(
                "its config has no {NET_ATTACH_DEF_NAME} (only OVN-Kubernetes secondary networks name their definition there)"
            ))
        }
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        Some(_) => {
            return Decision::Keep(format!(
                "its {NET_ATTACH_DEF_NAME} is not a non-empty string"
            ))
        }
    };
    let parts: Vec<&str> = name.split('/').collect();
    let [namespace, definition] = parts[..] else {
        return Decision::Keep(format!(
            "its {NET_ATTACH_DEF_NAME} {name:?} is not of the form namespace/name"
        ));
    };
    let Some(mapped) = restore
        .pointer("/spec/namespaceMapping")
        .and_then(|m| m.get(namespace))
        .and_then(Value::as_str)
    else {
        return Decision::Keep(format!(
            "the Restore's namespaceMapping does not map namespace {namespace:?} of its {NET_ATTACH_DEF_NAME} {name:?}"
        ));
    };
    let to = format!("{mapped}/{definition}");
    let mut config = config;
    config.insert(NET_ATTACH_DEF_NAME.to_string(), Value::String(to.clone()));
    let config = Value::Object(config);
    let config = match mode {
        Mode::Upstream => go_json::encode(&config),
        Mode::Extended => config.to_string(),
    };
    Decision::Rewrite {
        config,
        from: name,
        to,
    }
}

/// Runs the action: rewrites, keeps (logging why), or fails the item upstream on an unreadable
/// config. Extended mode restores such a definition unchanged with a warning instead: the source
/// cluster had it so, and leaving it out loses it.
pub fn restore(mode: Mode, nad: &Object, restore: &Object) -> Result<RestoreResponse, String> {
    let fields = [("namespace", nad.namespace()), ("name", nad.name())];
    match decide(mode, nad, restore) {
        Decision::Rewrite { config, from, to } => {
            log::info(
                "mapping the namespace of the NetworkAttachmentDefinition's netAttachDefName",
                &[fields[0], fields[1], ("from", &from), ("to", &to)],
            );
            let mut rewritten = nad.clone();
            rewritten.set("/spec/config", Value::String(config))?;
            if mode == Mode::Upstream {
                // Upstream encodes its Go type again only when it rewrites the config.
                go_zero_values::write(&mut rewritten, GoType::NetworkAttachmentDefinition);
            }
            Ok(RestoreResponse::with_item(&rewritten))
        }
        Decision::Keep(why) => {
            log::debug(
                "restoring the NetworkAttachmentDefinition unchanged",
                &[fields[0], fields[1], ("reason", &why)],
            );
            Ok(RestoreResponse::unchanged())
        }
        Decision::Malformed(why) => match mode {
            Mode::Upstream => Err(format!("failed to unmarshal NAD config JSON: {why}")),
            Mode::Extended => {
                log::warn(
                    "restoring the NetworkAttachmentDefinition unchanged: its CNI config cannot be read, so its \
                     netAttachDefName cannot be mapped to the restore's namespace",
                    &[fields[0], fields[1], ("reason", &why)],
                );
                Ok(RestoreResponse::unchanged())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BOTH: [Mode; 2] = [Mode::Upstream, Mode::Extended];

    fn nad(config: Value) -> Object {
        Object::from_value(json!({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "nad-1", "namespace": "testns", "labels": {"team": "net"}},
            "spec": {"config": config}
        }))
        .unwrap()
    }

    fn restore_mapping(mapping: Value) -> Object {
        Object::from_value(json!({"apiVersion": "velero.io/v1", "kind": "Restore",
            "metadata": {"name": "r", "namespace": "velero"},
            "spec": {"backupName": "b", "namespaceMapping": mapping}}))
        .unwrap()
    }

    const OVN: &str = r#"{
        "cniVersion": "0.3.1",
        "name": "nad-1",
        "type": "ovn-k8s-cni-overlay",
        "netAttachDefName": "testns/nad-1",
        "topology": "layer2",
        "mtu": 1400.0
    }"#;

    fn rewritten_config(mode: Mode, nad: &Object, restore: &Object) -> String {
        match decide(mode, nad, restore) {
            Decision::Rewrite { config, .. } => config,
            other => panic!("{mode:?}: expected a rewrite, got {other:?}"),
        }
    }

    #[test]
    fn checklist_115_a_mapped_namespace_is_rewritten_upstream_as_go_encodes_it() {
        let r = restore_mapping(json!({"testns": "testns-restored"}));
        assert_eq!(
            rewritten_config(Mode::Upstream, &nad(json!(OVN)), &r),
            r#"{"cniVersion":"0.3.1","mtu":1400,"name":"nad-1","netAttachDefName":"testns-restored/nad-1","topology":"layer2","type":"ovn-k8s-cni-overlay"}"#
        );
    }

    #[test]
    fn checklist_115_extended_mode_keeps_the_configs_key_order_and_numbers() {
        let r = restore_mapping(json!({"testns": "testns-restored"}));
        assert_eq!(
            rewritten_config(Mode::Extended, &nad(json!(OVN)), &r),
            r#"{"cniVersion":"0.3.1","name":"nad-1","type":"ovn-k8s-cni-overlay","netAttachDefName":"testns-restored/nad-1","topology":"layer2","mtu":1400.0}"#
        );
    }

    #[test]
    fn checklist_115_the_action_changes_spec_config_and_nothing_else() {
        let r = restore_mapping(json!({"testns": "testns-restored", "other": "x"}));
        for mode in BOTH {
            let item = nad(json!(OVN));
            let out = restore(mode, &item, &r).unwrap();
            assert!(!out.skip_restore);
            let mut got = Object::parse(out.item.as_deref().unwrap()).unwrap();
            let config: Value = serde_json::from_str(got.str_at("/spec/config").unwrap()).unwrap();
            assert_eq!(
                config["netAttachDefName"], "testns-restored/nad-1",
                "{mode:?}"
            );
            got.set("/spec/config", json!(OVN)).unwrap();
            // Upstream encodes the rewritten definition from its Go type: Velero removed the
            // creationTimestamp, which comes back as null (docs/kubevirt.md#s8-3).
            let mut expected = item.clone();
            if mode == Mode::Upstream {
                expected
                    .set("/metadata/creationTimestamp", Value::Null)
                    .unwrap();
            }
            assert_eq!(got, expected, "{mode:?}");
        }
    }

    #[test]
    fn checklist_116_unmapped_or_unusable_names_are_kept_with_the_reason() {
        let r = restore_mapping(json!({"testns": "testns-restored"}));
        let keep = |config: Value, restore: &Object, why: &str| {
            for mode in BOTH {
                match decide(mode, &nad(config.clone()), restore) {
                    Decision::Keep(reason) => {
                        assert!(reason.contains(why), "{mode:?}: {reason} (wanted {why})")
                    }
                    other => panic!("{mode:?} {config}: {other:?}"),
                }
                let out = restore_fn(mode, &nad(config.clone()), restore);
                assert_eq!(out.item, None, "{mode:?}: restored unchanged");
                assert!(!out.skip_restore);
            }
        };
        let unmapped = restore_mapping(json!({"elsewhere": "x"}));
        keep(json!(OVN), &unmapped, "does not map namespace \"testns\"");
        let no_mapping = Object::from_value(json!({"kind": "Restore", "spec": {}})).unwrap();
        keep(json!(OVN), &no_mapping, "does not map");
        keep(
            json!(r#"{"cniVersion":"0.3.1","type":"bridge","bridge":"br1"}"#),
            &r,
            "has no netAttachDefName",
        );
        keep(
            json!(r#"{"netAttachDefName":"nad-1"}"#),
            &r,
            "not of the form namespace/name",
        );
        keep(
            json!(r#"{"netAttachDefName":"testns/a/b"}"#),
            &r,
            "not of the form",
        );
        keep(
            json!(r#"{"netAttachDefName":""}"#),
            &r,
            "not a non-empty string",
        );
        keep(
            json!(r#"{"netAttachDefName":7}"#),
            &r,
            "not a non-empty string",
        );
        keep(json!(""), &r, "empty");
        keep(json!("null"), &r, "JSON null");
        keep(Value::Null, &r, "no spec.config");
    }

    fn restore_fn(mode: Mode, item: &Object, r: &Object) -> RestoreResponse {
        restore(mode, item, r).unwrap()
    }

    #[test]
    fn checklist_117_an_unreadable_config_fails_upstream_and_is_restored_as_is_extended() {
        let r = restore_mapping(json!({"testns": "testns-restored"}));
        for (config, why) in [
            (json!("{not json"), "spec.config is not JSON: "),
            (
                json!("[1, 2]"),
                "spec.config holds an array in JSON, not an object",
            ),
            (
                json!({"cniVersion": "0.3.1"}),
                "spec.config is an object, not a string",
            ),
        ] {
            let e = restore(Mode::Upstream, &nad(config.clone()), &r).unwrap_err();
            assert!(
                e.starts_with("failed to unmarshal NAD config JSON: ") && e.contains(why),
                "{e}"
            );
            let out = restore(Mode::Extended, &nad(config), &r).unwrap();
            assert_eq!(out.item, None);
            assert!(!out.skip_restore);
        }
    }
}
