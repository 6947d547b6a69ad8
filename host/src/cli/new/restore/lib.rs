//! __NAME__: a Velero __KIND_NAME__ action, run by velero-wasm as a WebAssembly component.
//!
//! It restores each PersistentVolumeClaim with the label `example.io/restored-by` naming the restore,
//! and skips a PVC that already exists in the cluster. The logic is in `restore`, on any `Cluster`:
//! the host's (`HostCluster`) in the component, a `FakeCluster` in the unit tests below. Its setting
//! `suspend` (the manifest's `[settings-schema]`) turns it off.

use velero_wasm_sdk::*;

/// The action's name, as Velero and `velero-wasm run --action` know it.
pub const ACTION: &str = "example.io/__NAME__";

/// The label it sets.
pub const LABEL: &str = "example.io/restored-by";

const PVCS: Api = Api::new("", "v1", "persistentvolumeclaims");

/// The module's settings, read typed (`config::read`): each is declared in the manifest
/// (`[settings-schema]`), where the host checks what an operator or a suite case sets and fills in its
/// default; changing one needs no rebuild.
#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
pub struct Settings {
    /// `suspend = true`: the action hands each item back as it came and calls nothing.
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
            .description("labels each restored PVC with its restore; skips PVCs that exist")
            // What it calls, and where (the item's namespace): `velero-wasm build` checks that the
            // manifest's grant covers it.
            .needs_kube_in("persistentvolumeclaims", &[Verb::Get], &["@item"])]
    }

    fn restore(_action: &str, request: RestoreRequest) -> Result<RestoreResponse, String> {
        let settings: Settings = config::read(&HostConfig)?;
        restore(&HostCluster, &settings, &request.item, &request.restore)
    }
}

/// Restores the PVC `item` (JSON, as it will be created) labelled with the name of `restore`, unless a
/// PVC of its name exists already or `settings` suspend the action.
pub fn restore(
    cluster: &impl Cluster,
    settings: &Settings,
    item: &str,
    restore: &str,
) -> Result<RestoreResponse, String> {
    let mut item = Object::parse(item)?;
    if settings.suspend {
        return Ok(RestoreResponse::with_item(&item));
    }
    let restore = Object::parse(restore)?;
    match cluster.get(PVCS, item.namespace(), item.name()) {
        Ok(_) => return Ok(RestoreResponse::skip()),
        Err(e) if e.is_not_found() => {}
        Err(e) => {
            return Err(format!(
                "reading PVC {}/{}: {}",
                item.namespace(),
                item.name(),
                e.message()
            ))
        }
    }
    item.set_label(LABEL, restore.name());
    Ok(RestoreResponse::with_item(&item))
}

// The component's export in a wasm32 build; nothing in a native build, so `cargo test` links.
export_plugin!(Module);

#[cfg(test)]
mod tests {
    use super::*;

    /// The module's manifest: the fake cluster refuses what its grant does not allow, as the host does.
    const MANIFEST: &str = include_str!("../__NAME__.toml");
    const RESTORE: &str = include_str!("../tests/fixtures/restore.json");

    fn pvc(namespace: &str, name: &str) -> Object {
        Object::parse(&format!(
            r#"{{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {{"name": "{name}", "namespace": "{namespace}"}}}}"#
        ))
        .unwrap()
    }

    fn cluster() -> FakeCluster {
        FakeCluster::new()
            .with(PVCS, pvc("apps", "logs"))
            .with_manifest("__NAME__", MANIFEST)
            .unwrap()
            .item_namespace("apps")
    }

    #[test]
    fn a_missing_pvc_is_restored_with_the_name_of_its_restore() {
        let cluster = cluster();
        let response = restore(
            &cluster,
            &Settings::default(),
            &pvc("apps", "data").to_json(),
            RESTORE,
        )
        .unwrap();
        assert!(!response.skip_restore);
        let item = Object::parse(&response.item.unwrap()).unwrap();
        assert_eq!(item.label(LABEL), Some("nightly-restore"));
        assert_eq!(cluster.calls()[0].verb, "get");
    }

    #[test]
    fn a_pvc_that_exists_is_skipped() {
        let response = restore(
            &cluster(),
            &Settings::default(),
            &pvc("apps", "logs").to_json(),
            RESTORE,
        )
        .unwrap();
        assert!(response.skip_restore);
    }

    #[test]
    fn a_suspended_action_hands_the_pvc_back_as_it_came() {
        let cluster = cluster();
        let settings = config::read(&FakeConfig::new().with("suspend", "true")).unwrap();
        let response =
            restore(&cluster, &settings, &pvc("apps", "data").to_json(), RESTORE).unwrap();
        assert!(!response.skip_restore);
        let item = Object::parse(&response.item.unwrap()).unwrap();
        assert_eq!(item.label(LABEL), None);
        assert!(cluster.calls().is_empty());
    }

    #[test]
    fn the_grant_allows_reading_the_items_namespace_only() {
        match cluster().get(PVCS, "other", "data") {
            Err(KubeError::Denied(message)) => {
                assert!(message.contains("[[grant.kube]]"), "{message}")
            }
            other => panic!("reading another namespace was not denied: {other:?}"),
        }
    }
}
