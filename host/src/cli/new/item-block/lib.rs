//! __NAME__: a Velero __KIND_NAME__ action, run by velero-wasm as a WebAssembly component.
//!
//! It puts each PersistentVolumeClaim in one item block with the pods that mount it, so that Velero
//! backs them up together. The logic is in `pods_of`, on any `Cluster`: the host's (`HostCluster`)
//! in the component, a `FakeCluster` in the unit tests below. Its setting `suspend` (the manifest's
//! `[settings-schema]`) turns it off.

use velero_wasm_sdk::*;

/// The action's name, as Velero and `velero-wasm run --action` know it.
pub const ACTION: &str = "example.io/__NAME__";

const PODS: Api = Api::new("", "v1", "pods");

/// The module's settings, read typed (`config::read`): each is declared in the manifest
/// (`[settings-schema]`), where the host checks what an operator or a suite case sets and fills in its
/// default; changing one needs no rebuild.
#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
pub struct Settings {
    /// `suspend = true`: the action relates nothing and calls nothing.
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
            .description("puts each PVC in one item block with the pods that mount it")
            // What it calls, and where (the item's namespace): `velero-wasm build` checks that the
            // manifest's grant covers it.
            .needs_kube_in("pods", &[Verb::List], &["@item"])]
    }

    fn related_items(_action: &str, item: &str, _backup: &str) -> Result<Vec<ResourceId>, String> {
        let settings: Settings = config::read(&HostConfig)?;
        pods_of(&HostCluster, &settings, item)
    }
}

/// The pods in the namespace of the PVC `item` (JSON) that mount it (none while `settings` suspend
/// the action).
pub fn pods_of(
    cluster: &impl Cluster,
    settings: &Settings,
    item: &str,
) -> Result<Vec<ResourceId>, String> {
    let pvc = Object::parse(item)?;
    if settings.suspend {
        return Ok(Vec::new());
    }
    let pods = cluster
        .list(PODS, pvc.namespace(), "")
        .map_err(|e| format!("listing the pods of {}: {}", pvc.namespace(), e.message()))?;
    Ok(pods
        .iter()
        .filter(|pod| {
            pod.array_at("/spec/volumes").iter().any(|volume| {
                volume
                    .pointer("/persistentVolumeClaim/claimName")
                    .and_then(|c| c.as_str())
                    == Some(pvc.name())
            })
        })
        .map(|pod| ResourceId::new("", "pods", pod.namespace(), pod.name()))
        .collect())
}

// The component's export in a wasm32 build; nothing in a native build, so `cargo test` links.
export_plugin!(Module);

#[cfg(test)]
mod tests {
    use super::*;

    /// The module's manifest: the fake cluster refuses what its grant does not allow, as the host does.
    const MANIFEST: &str = include_str!("../__NAME__.toml");
    const ITEM: &str = include_str!("../tests/fixtures/item.json");

    fn pod(name: &str, claim: &str) -> Object {
        Object::parse(&format!(
            r#"{{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {{"name": "{name}", "namespace": "apps"}},
                 "spec": {{"volumes": [{{"name": "v", "persistentVolumeClaim": {{"claimName": "{claim}"}}}}]}}}}"#
        ))
        .unwrap()
    }

    fn cluster() -> FakeCluster {
        FakeCluster::new()
            .with(PODS, pod("shop-0", "data"))
            .with(PODS, pod("logger-0", "logs"))
            .with_manifest("__NAME__", MANIFEST)
            .unwrap()
            .item_namespace("apps")
    }

    #[test]
    fn a_pvc_is_backed_up_with_the_pods_that_mount_it() {
        let related = pods_of(&cluster(), &Settings::default(), ITEM).unwrap();
        let related: Vec<String> = related.iter().map(ResourceId::to_string).collect();
        assert_eq!(related, ["pods apps/shop-0"]);
    }

    #[test]
    fn a_suspended_action_relates_nothing() {
        let cluster = cluster();
        let settings = config::read(&FakeConfig::new().with("suspend", "true")).unwrap();
        assert!(pods_of(&cluster, &settings, ITEM).unwrap().is_empty());
        assert!(cluster.calls().is_empty());
    }

    #[test]
    fn the_grant_allows_listing_the_items_namespace_only() {
        match cluster().list(PODS, "", "") {
            Err(KubeError::Denied(message)) => {
                assert!(message.contains("[[grant.kube]]"), "{message}")
            }
            other => panic!("listing every namespace was not denied: {other:?}"),
        }
    }
}
