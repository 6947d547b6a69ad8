//! __NAME__: a Velero __KIND_NAME__ action, run by velero-wasm as a WebAssembly component.
//!
//! It labels each PersistentVolumeClaim it backs up with the number of PVCs in its namespace. The
//! logic is in `label`, on any `Cluster`: the host's (`HostCluster`) in the component, a `FakeCluster`
//! in the unit tests below. Its setting `suspend` (the manifest's `[settings-schema]`) turns it off.

use velero_wasm_sdk::*;

/// The action's name, as Velero and `velero-wasm run --action` know it.
pub const ACTION: &str = "example.io/__NAME__";

/// The label it sets.
pub const LABEL: &str = "example.io/pvcs-in-namespace";

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
            .description("labels each PVC with the number of PVCs in its namespace")
            // What it calls, and where (the item's namespace): `velero-wasm build` checks that the
            // manifest's grant covers it.
            .needs_kube_in("persistentvolumeclaims", &[Verb::List], &["@item"])]
    }

    fn backup(_action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        let settings: Settings = config::read(&HostConfig)?;
        label(&HostCluster, &settings, &request.item)
    }
}

/// Labels the PVC `item` (JSON) with the number of PVCs in its namespace, unless `settings` suspend
/// the action.
pub fn label(
    cluster: &impl Cluster,
    settings: &Settings,
    item: &str,
) -> Result<BackupResponse, String> {
    let mut item = Object::parse(item)?;
    if settings.suspend {
        return Ok(BackupResponse::with_item(&item));
    }
    let pvcs = cluster
        .list(PVCS, item.namespace(), "")
        .map_err(|e| format!("listing the PVCs of {}: {}", item.namespace(), e.message()))?;
    item.set_label(LABEL, &pvcs.len().to_string());
    Ok(BackupResponse::with_item(&item))
}

// The component's export in a wasm32 build; nothing in a native build, so `cargo test` links.
export_plugin!(Module);

#[cfg(test)]
mod tests {
    use super::*;

    /// The module's manifest: the fake cluster refuses what its grant does not allow, as the host does.
    const MANIFEST: &str = include_str!("../__NAME__.toml");

    fn pvc(namespace: &str, name: &str) -> Object {
        Object::parse(&format!(
            r#"{{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {{"name": "{name}", "namespace": "{namespace}"}}}}"#
        ))
        .unwrap()
    }

    fn cluster() -> FakeCluster {
        FakeCluster::new()
            .with(PVCS, pvc("apps", "data"))
            .with(PVCS, pvc("apps", "logs"))
            .with(PVCS, pvc("other", "cache"))
            .with_manifest("__NAME__", MANIFEST)
            .unwrap()
            .item_namespace("apps")
    }

    #[test]
    fn a_pvc_is_labelled_with_the_number_of_pvcs_in_its_namespace() {
        let cluster = cluster();
        let response = label(
            &cluster,
            &Settings::default(),
            &pvc("apps", "data").to_json(),
        )
        .unwrap();
        let item = Object::parse(&response.item.unwrap()).unwrap();
        assert_eq!(item.label(LABEL), Some("2"));
        assert!(response.additional_items.is_empty());
        let calls = cluster.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].verb, calls[0].namespace.as_str()),
            ("list", "apps")
        );
    }

    #[test]
    fn a_suspended_action_hands_the_pvc_back_as_it_came() {
        let cluster = cluster();
        let settings = config::read(&FakeConfig::new().with("suspend", "true")).unwrap();
        let response = label(&cluster, &settings, &pvc("apps", "data").to_json()).unwrap();
        let item = Object::parse(&response.item.unwrap()).unwrap();
        assert_eq!(item.label(LABEL), None);
        assert!(cluster.calls().is_empty());
    }

    #[test]
    fn the_grant_allows_listing_the_items_namespace_only() {
        let cluster = cluster();
        match cluster.list(PVCS, "other", "") {
            Err(KubeError::Denied(message)) => {
                assert!(message.contains("[[grant.kube]]"), "{message}")
            }
            other => panic!("listing another namespace was not denied: {other:?}"),
        }
    }
}
