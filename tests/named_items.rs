//! Named items (docs/named-items.md) through Velero's protocol, with the stock kubevirt component
//! served by the plugin process against the KubeVirt fixture cluster on a loopback API server: in one
//! backup, a VM's backup action leaves out in extended mode what an item-block action of the module
//! named as related items for another item, and keeps what only its own item's block named; the same
//! VM again (Velero calls an item once per API version) names everything again; another backup
//! starts afresh; a backup action's additional items are not recorded; upstream mode names
//! everything, as upstream does.

use crate::support;

use serde_json::Value;
use support::apiserver::ApiServer;
use support::plugin::{binary, Plugin};
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::{ExecuteRequest, ResourceIdentifier};
use velero_wasm::plugin::proto::v1::item_block_action_client::ItemBlockActionClient;
use velero_wasm::plugin::proto::v1::ItemBlockActionGetRelatedItemsRequest;

const VM_ACTION: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
const VM_BLOCK: &str = "kubevirt-velero-plugin/block-vm-action";

fn fixtures() -> std::path::PathBuf {
    support::root().join("tests/fixtures/kubevirt")
}

fn file(path: &str) -> String {
    std::fs::read_to_string(fixtures().join(path)).unwrap()
}

/// The plugin process serving the kubevirt component in `mode` against the fixture cluster.
struct Served {
    plugin: Plugin,
    _server: ApiServer,
    _scratch: tempfile::TempDir,
}

impl Served {
    fn start(mode: &str) -> Served {
        let server = ApiServer::start(&[&fixtures().join("cluster")]);
        let scratch = tempfile::tempdir().unwrap();
        let kubeconfig = scratch.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig);
        let manifest =
            std::fs::read_to_string(support::root().join("actions/kubevirt/kubevirt.toml"))
                .unwrap()
                .replace("mode = \"extended\"", &format!("mode = \"{mode}\""));
        let modules = scratch.path().join("modules");
        std::fs::create_dir(&modules).unwrap();
        support::add_module(&modules, "kubevirt", "kubevirt", &manifest);
        let env = [
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("VELERO_WASM_MODULES", modules.to_str().unwrap()),
        ];
        let plugin = Plugin::start_as(binary(), &[], &env);
        Served {
            plugin,
            _server: server,
            _scratch: scratch,
        }
    }

    /// The additional items of the VM backup action's Execute on `item` in `backup`.
    async fn execute(&self, item: &str, backup: &str) -> Vec<String> {
        let answer = BackupItemActionClient::new(self.plugin.channel().await)
            .execute(ExecuteRequest {
                plugin: VM_ACTION.into(),
                item: item.as_bytes().to_vec(),
                backup: backup.as_bytes().to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        ids(&answer.additional_items)
    }

    /// The related items of the VM item-block action on `item` in `backup`.
    async fn related(&self, item: &str, backup: &str) -> Vec<String> {
        let answer = ItemBlockActionClient::new(self.plugin.channel().await)
            .get_related_items(ItemBlockActionGetRelatedItemsRequest {
                plugin: VM_BLOCK.into(),
                item: item.as_bytes().to_vec(),
                backup: backup.as_bytes().to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        ids(&answer.related_items)
    }
}

fn ids(ids: &[ResourceIdentifier]) -> Vec<String> {
    ids.iter()
        .map(|id| format!("{} {} {}/{}", id.group, id.resource, id.namespace, id.name))
        .collect()
}

/// The nightly backup with `uid`.
fn backup(uid: &str) -> String {
    let mut backup: Value = serde_json::from_str(&file("velero/backup-nightly.json")).unwrap();
    backup["metadata"]["uid"] = Value::from(uid);
    backup.to_string()
}

/// The fedora VM of the fixtures, or a stopped twin of it named `name`: the same disks' templates,
/// instance type, preference and Secrets, so everything it names but its own revisions is shared.
fn vm(name: &str) -> String {
    let mut vm: Value = serde_json::from_str(&file("cluster/vm-fedora-web-01.json")).unwrap();
    if name != "fedora-web-01" {
        vm["metadata"]["name"] = Value::from(name);
        vm["spec"]["runStrategy"] = Value::from("Halted");
        vm["status"] = serde_json::json!({"printableStatus": "Stopped"});
    }
    vm.to_string()
}

/// `all` without what is in `named`, in order.
fn minus(all: &[String], named: &[String]) -> Vec<String> {
    all.iter().filter(|i| !named.contains(i)).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_leaves_out_what_an_item_block_action_named_for_another_item() {
    let served = Served::start("extended");
    // What each VM names in a backup of its own.
    let first_alone = served
        .execute(&vm("fedora-web-01"), &backup("alone-1"))
        .await;
    let twin_alone = served
        .execute(&vm("fedora-web-02"), &backup("alone-2"))
        .await;
    let shared = twin_alone.len() - minus(&twin_alone, &first_alone).len();
    assert!(
        shared >= 3,
        "the twin shares its disks, instance type, Secrets: {twin_alone:#?}"
    );

    let nightly = backup("nightly-1");
    let block = served.related(&vm("fedora-web-01"), &nightly).await;
    assert!(!block.is_empty());
    // The VM's own block named its graph: its own Execute still names all of it, and so does a
    // second call on it (Velero calls an item once per API version it backs up).
    for _ in 0..2 {
        assert_eq!(
            served.execute(&vm("fedora-web-01"), &nightly).await,
            first_alone
        );
    }
    let twin = served.execute(&vm("fedora-web-02"), &nightly).await;
    assert_eq!(twin, minus(&twin_alone, &block));
    assert!(!twin.is_empty(), "its own revisions stay: {twin_alone:#?}");
    // Another backup starts afresh.
    assert_eq!(
        served
            .execute(&vm("fedora-web-02"), &backup("nightly-2"))
            .await,
        twin_alone
    );
    served.plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_actions_additional_items_are_not_recorded() {
    // Velero stops at the first additional item that fails, so the rest would have been recorded and
    // never backed up: only item-block actions' related items count.
    let served = Served::start("extended");
    let twin_alone = served.execute(&vm("fedora-web-02"), &backup("alone")).await;
    let nightly = backup("executes-1");
    served.execute(&vm("fedora-web-01"), &nightly).await;
    assert_eq!(
        served.execute(&vm("fedora-web-02"), &nightly).await,
        twin_alone
    );
    served.plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_mode_names_everything() {
    let served = Served::start("upstream");
    let twin_alone = served.execute(&vm("fedora-web-02"), &backup("alone")).await;
    let nightly = backup("nightly");
    served.related(&vm("fedora-web-01"), &nightly).await;
    served.execute(&vm("fedora-web-01"), &nightly).await;
    assert_eq!(
        served.execute(&vm("fedora-web-02"), &nightly).await,
        twin_alone
    );
    served.plugin.shutdown().await;
}
