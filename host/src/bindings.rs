//! Host bindings generated from the WIT package (`wit/`), and their conversions to and from the domain
//! types of [`crate::action`]. Only the runtime and the capabilities use these types.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::action::{
    ActionInfo, ActionKind, BackupOutcome, Need, OperationProgress, ResourceId, RestoreOutcome,
    Selector, Verb,
};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
    imports: {
        "velero-wasm:plugin/kube": async,
        "velero-wasm:plugin/http": async,
        "velero-wasm:plugin/clock.sleep": async,
        "velero-wasm:plugin/random.bytes": async | trappable,
        "velero-wasm:plugin/environment.variable": async,
        "velero-wasm:plugin/environment.read-env-file": async,
        "velero-wasm:plugin/named-items.named-before": trappable,
    },
    exports: { default: async },
});

pub use self::exports::velero_wasm::plugin::actions as wit_actions;

/// The export that makes a module a provider of actions. Export names are looked up
/// semver-compatibly: a component built against 0.1.0 exports `actions@0.1.0`, which this finds
/// (docs/wit-versioning.md).
pub const ACTIONS: &str = "velero-wasm:plugin/actions@0.1.2";

/// The `signer` world: the exports of the module that exports `signing`. Its imports are the ones
/// generated above (the same linker serves both worlds). Its items are generated: their docs are the
/// WIT package's.
#[allow(missing_docs)]
pub mod signer {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "signer",
        exports: { default: async },
        with: {
            "velero-wasm:plugin/types": crate::bindings::velero_wasm::plugin::types,
            "velero-wasm:plugin/http": crate::bindings::velero_wasm::plugin::http,
            "velero-wasm:plugin/clock": crate::bindings::velero_wasm::plugin::clock,
            "velero-wasm:plugin/log": crate::bindings::velero_wasm::plugin::log,
        },
    });

    pub use exports::velero_wasm::plugin::signing as wit_signing;
}
pub use self::velero_wasm::plugin::types as wit_types;

impl From<wit_actions::Kind> for ActionKind {
    fn from(kind: wit_actions::Kind) -> Self {
        match kind {
            wit_actions::Kind::Backup => ActionKind::Backup,
            wit_actions::Kind::BackupV2 => ActionKind::BackupV2,
            wit_actions::Kind::Restore => ActionKind::Restore,
            wit_actions::Kind::RestoreV2 => ActionKind::RestoreV2,
            wit_actions::Kind::ItemBlock => ActionKind::ItemBlock,
            wit_actions::Kind::Delete => ActionKind::Delete,
        }
    }
}

impl From<wit_types::Verb> for Verb {
    fn from(verb: wit_types::Verb) -> Self {
        match verb {
            wit_types::Verb::Get => Verb::Get,
            wit_types::Verb::List => Verb::List,
            wit_types::Verb::Create => Verb::Create,
            wit_types::Verb::Update => Verb::Update,
            wit_types::Verb::Patch => Verb::Patch,
            wit_types::Verb::Delete => Verb::Delete,
        }
    }
}

impl From<wit_actions::ActionInfo> for ActionInfo {
    fn from(info: wit_actions::ActionInfo) -> Self {
        let s = info.applies_to;
        ActionInfo {
            name: info.name,
            kind: info.kind.into(),
            applies_to: Selector {
                included_namespaces: s.included_namespaces,
                excluded_namespaces: s.excluded_namespaces,
                included_resources: s.included_resources,
                excluded_resources: s.excluded_resources,
                label_selector: s.label_selector,
            },
            description: info.description,
            needs: info
                .needs
                .into_iter()
                .map(|n| match n {
                    wit_actions::Need::Kube((resource, verbs)) => {
                        Need::kube(&resource, verbs.into_iter().map(Verb::from).collect())
                    }
                    wit_actions::Need::Http(host) => Need::Http(host),
                })
                .collect(),
        }
    }
}

impl From<wit_types::ResourceId> for ResourceId {
    fn from(id: wit_types::ResourceId) -> Self {
        ResourceId {
            group: id.group,
            resource: id.resource,
            namespace: id.namespace,
            name: id.name,
        }
    }
}

impl From<ResourceId> for wit_types::ResourceId {
    fn from(id: ResourceId) -> Self {
        wit_types::ResourceId {
            group: id.group,
            resource: id.resource,
            namespace: id.namespace,
            name: id.name,
        }
    }
}

/// A backup response, with the input item substituted when the action returned none.
pub fn backup_outcome(response: wit_actions::BackupResponse, input_item: String) -> BackupOutcome {
    BackupOutcome {
        item: response.item.unwrap_or(input_item),
        additional_items: response
            .additional_items
            .into_iter()
            .map(ResourceId::from)
            .collect(),
        operation_id: response.operation_id.filter(|id| !id.is_empty()),
        post_operation_items: response
            .post_operation_items
            .into_iter()
            .map(ResourceId::from)
            .collect(),
    }
}

/// A restore response, with the input item substituted when the action returned none.
pub fn restore_outcome(
    response: wit_actions::RestoreResponse,
    input_item: String,
) -> RestoreOutcome {
    RestoreOutcome {
        item: response.item.unwrap_or(input_item),
        additional_items: response
            .additional_items
            .into_iter()
            .map(ResourceId::from)
            .collect(),
        skip_restore: response.skip_restore,
        operation_id: response.operation_id.filter(|id| !id.is_empty()),
        wait_for_additional_items: response.wait_for_additional_items,
        additional_items_timeout: response.additional_items_timeout.map(Duration::from_nanos),
    }
}

/// A wall-clock time as the WIT `timestamp`.
pub fn timestamp(time: SystemTime) -> wit_types::Timestamp {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => wit_types::Timestamp {
            seconds: d.as_secs() as i64,
            nanoseconds: d.subsec_nanos(),
        },
        Err(before) => {
            let d = before.duration();
            let (secs, nanos) = if d.subsec_nanos() == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
            };
            wit_types::Timestamp {
                seconds: secs,
                nanoseconds: nanos,
            }
        }
    }
}

fn system_time(t: wit_types::Timestamp) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(t.nanoseconds.min(999_999_999)));
    if t.seconds >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.seconds as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(t.seconds.unsigned_abs()) + nanos
    }
}

impl From<wit_actions::OperationProgress> for OperationProgress {
    fn from(p: wit_actions::OperationProgress) -> Self {
        OperationProgress {
            completed: p.completed,
            error: p.error.filter(|e| !e.is_empty()),
            n_completed: p.n_completed,
            n_total: p.n_total,
            units: p.units,
            description: p.description,
            started: p.started.map(system_time),
            updated: p.updated.map(system_time),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_on_both_sides_of_the_epoch() {
        for t in [
            UNIX_EPOCH + Duration::new(1_700_000_000, 5),
            UNIX_EPOCH - Duration::new(10, 250),
            UNIX_EPOCH - Duration::from_secs(3),
        ] {
            assert_eq!(system_time(timestamp(t)), t);
        }
    }

    /// The SDK carries its own copy of the contract (so that it builds outside this repository): it
    /// must be the contract the host implements, file for file, byte for byte.
    #[test]
    fn the_sdk_s_copy_of_the_wit_package_is_identical_to_wit() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let files = |dir: &str| -> std::collections::BTreeMap<std::ffi::OsString, Vec<u8>> {
            std::fs::read_dir(root.join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .map(|entry| {
                    let entry = entry.unwrap();
                    assert!(
                        entry.file_type().unwrap().is_file(),
                        "{dir}/{:?} is not a file",
                        entry.file_name()
                    );
                    (entry.file_name(), std::fs::read(entry.path()).unwrap())
                })
                .collect()
        };
        let (contract, copy) = (files("wit"), files("sdk/wit"));
        assert_eq!(
            contract.keys().collect::<Vec<_>>(),
            copy.keys().collect::<Vec<_>>(),
            "sdk/wit must hold the files of wit/: cp wit/* sdk/wit/"
        );
        for (name, bytes) in &contract {
            assert!(
                copy[name] == *bytes,
                "sdk/wit/{name:?} differs from wit/{name:?}: cp wit/* sdk/wit/"
            );
        }
    }
}
