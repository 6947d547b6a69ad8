//! __NAME__: a Velero __KIND_NAME__ action, run by velero-wasm as a WebAssembly component.
//!
//! When a backup is deleted, it deletes for each of its PersistentVolumeClaims the ConfigMap
//! `<backup>-<pvc>` in the PVC's namespace (notes a backup action of yours may have left), if it is
//! still there. The logic is in `forget`, on any `Cluster`: the host's (`HostCluster`) in the
//! component, a `FakeCluster` in the unit tests below. Its setting `suspend` (the manifest's
//! `[settings-schema]`) turns it off.

use velero_wasm_sdk::*;

/// The action's name, as Velero and `velero-wasm run --action` know it.
pub const ACTION: &str = "example.io/__NAME__";

const CONFIGMAPS: Api = Api::new("", "v1", "configmaps");

/// The module's settings, read typed (`config::read`): each is declared in the manifest
/// (`[settings-schema]`), where the host checks what an operator or a suite case sets and fills in its
/// default; changing one needs no rebuild.
#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
pub struct Settings {
    /// `suspend = true`: the action deletes nothing.
    pub suspend: bool,
}

/// The component: its actions and how they are called.
pub struct Module;

impl Plugin for Module {
    /// Every action of the module, one `ActionInfo` each and of any kinds (a backup and a restore
    /// action in one module, say): the kind's method below gets the name of the action called.
    fn describe() -> Vec<ActionInfo> {
        vec![ActionInfo::new(ACTION, Kind::__KIND__)
            .applies_to(Selector::resources(&["persistentvolumeclaims"]))
            .description("deletes the notes ConfigMap of each PVC of a deleted backup")
            // What it calls, and where (the item's namespace): `velero-wasm build` checks that the
            // manifest's grant covers it.
            .needs_kube_in("configmaps", &[Verb::Delete], &["@item"])]
    }

    fn delete(_action: &str, item: &str, backup: &str) -> Result<(), String> {
        let settings: Settings = config::read(&HostConfig)?;
        forget(&HostCluster, &settings, item, backup)
    }
}

/// Deletes the ConfigMap `<backup>-<pvc>` of the PVC `item` (JSON) of the deleted `backup` (JSON); one
/// that is gone already is fine. Suspended by `settings`, it deletes nothing.
pub fn forget(
    cluster: &impl Cluster,
    settings: &Settings,
    item: &str,
    backup: &str,
) -> Result<(), String> {
    if settings.suspend {
        return Ok(());
    }
    let item = Object::parse(item)?;
    let backup = Object::parse(backup)?;
    let notes = format!("{}-{}", backup.name(), item.name());
    match cluster.delete(CONFIGMAPS, item.namespace(), &notes) {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(format!(
            "deleting ConfigMap {}/{notes}: {}",
            item.namespace(),
            e.message()
        )),
    }
}

// The component's export in a wasm32 build; nothing in a native build, so `cargo test` links.
export_plugin!(Module);

#[cfg(test)]
mod tests {
    use super::*;

    /// The module's manifest: the fake cluster refuses what its grant does not allow, as the host does.
    const MANIFEST: &str = include_str!("../__NAME__.toml");
    const BACKUP: &str = include_str!("../tests/fixtures/backup.json");
    const ITEM: &str = include_str!("../tests/fixtures/item.json");

    fn cluster() -> FakeCluster {
        let notes = Object::parse(
            r#"{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "nightly-data", "namespace": "apps"}}"#,
        )
        .unwrap();
        FakeCluster::new()
            .with(CONFIGMAPS, notes)
            .with_manifest("__NAME__", MANIFEST)
            .unwrap()
            .item_namespace("apps")
    }

    #[test]
    fn the_notes_of_the_pvc_in_the_deleted_backup_are_deleted() {
        let cluster = cluster();
        forget(&cluster, &Settings::default(), ITEM, BACKUP).unwrap();
        let calls = cluster.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (
                calls[0].verb,
                calls[0].namespace.as_str(),
                calls[0].target.as_str()
            ),
            ("delete", "apps", "nightly-data")
        );
        // Gone: deleting again finds nothing, which is fine too.
        assert!(cluster
            .delete(CONFIGMAPS, "apps", "nightly-data")
            .unwrap_err()
            .is_not_found());
        forget(&cluster, &Settings::default(), ITEM, BACKUP).unwrap();
    }

    #[test]
    fn a_suspended_action_deletes_nothing() {
        let cluster = cluster();
        let settings = config::read(&FakeConfig::new().with("suspend", "true")).unwrap();
        forget(&cluster, &settings, ITEM, BACKUP).unwrap();
        assert!(cluster.calls().is_empty());
    }

    #[test]
    fn the_grant_allows_deleting_in_the_items_namespace_only() {
        match cluster().delete(CONFIGMAPS, "velero", "nightly-data") {
            Err(KubeError::Denied(message)) => {
                assert!(message.contains("[[grant.kube]]"), "{message}")
            }
            other => panic!("deleting in another namespace was not denied: {other:?}"),
        }
    }
}
