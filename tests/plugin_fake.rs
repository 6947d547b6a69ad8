//! Velero's services as Velero sees them, over fake actions: the plugin's own gRPC stack (the router
//! with its gate, whole-message and answer layers, every service, the dispatch) serves on a Unix socket,
//! and behind the dispatch sits a fake [`ServedActions`] instead of the wasm runtime, so no module is
//! compiled or run. Each test asserts what Velero would get: answers, status codes and messages,
//! retired actions, operations followed or cancelled, and what reaches the action.
//!
//! tests/plugin_protocol.rs drives the real binary with real components; these pin the protocol
//! layer's side of the seam (`velero_wasm::plugin::served`) alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};
use tonic::transport::Channel;
use tonic::Code;
use velero_wasm::action::{
    ActionInfo, ActionKind, BackupOutcome, OperationProgress, ResourceId, RestoreOutcome, Selector,
};
use velero_wasm::config::Config;
use velero_wasm::plugin::dispatch::{Dispatch, RETIRED_RESOURCE};
use velero_wasm::plugin::kept_listing::Listed;
use velero_wasm::plugin::lister::{Advertised, Lister};
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient as BiaV1;
use velero_wasm::plugin::proto::generated::delete_item_action_client::DeleteItemActionClient;
use velero_wasm::plugin::proto::generated::plugin_lister_client::PluginListerClient;
use velero_wasm::plugin::proto::generated::restore_item_action_client::RestoreItemActionClient as RiaV1;
use velero_wasm::plugin::proto::generated::{self as g, ResourceIdentifier};
use velero_wasm::plugin::proto::plugin::grpc_controller_client::GrpcControllerClient;
use velero_wasm::plugin::proto::plugin::{self as p};
use velero_wasm::plugin::proto::v1::item_block_action_client::ItemBlockActionClient;
use velero_wasm::plugin::proto::v1::{self as v1};
use velero_wasm::plugin::proto::v2::backup_item_action_client::BackupItemActionClient as BiaV2;
use velero_wasm::plugin::proto::v2::restore_item_action_client::RestoreItemActionClient as RiaV2;
use velero_wasm::plugin::proto::v2::{self as v2};
use velero_wasm::plugin::served::{ServedAction, ServedActions};
use velero_wasm::plugin::{accept, gate};
use velero_wasm::runtime::{calls, CallError, Fault};
use velero_wasm::shadow::{Budget, Mirrored, Shadows};

use crate::support::plugin_socket;

/// What the fake actions were asked, one line per call, in order.
type Calls = Arc<Mutex<Vec<String>>>;

/// How a fake action fails every call.
#[derive(Clone, Copy)]
pub(crate) enum Fails {
    /// With its own error message, as an action returns one.
    Saying(&'static str),
    /// Past its deadline, as a module that hangs.
    Deadline,
}

/// One fake action: answers every call it has from its input, recording it.
#[derive(Clone)]
pub(crate) struct Fake {
    module: String,
    info: ActionInfo,
    /// The operation Execute starts, if any.
    operation: Option<&'static str>,
    fails: Option<Fails>,
    shadow: bool,
    /// Adds its name to the item's trail annotation instead of setting the `seen` one (so that a
    /// chain of actions shows in the answer).
    trail: bool,
    /// Restore Execute asks Velero to skip the item.
    skips: bool,
    calls: Calls,
}

/// A fake action `name` of `kind`, from module `module`, applying to `resources`.
pub(crate) fn fake(module: &str, name: &str, kind: ActionKind, resources: &[&str]) -> Fake {
    Fake {
        module: module.to_string(),
        info: ActionInfo {
            name: name.to_string(),
            kind,
            applies_to: Selector {
                included_resources: resources.iter().map(|r| r.to_string()).collect(),
                label_selector: "app=shop".to_string(),
                ..Selector::default()
            },
            description: format!("fake {kind} action"),
            needs: Vec::new(),
        },
        operation: None,
        fails: None,
        shadow: false,
        trail: false,
        skips: false,
        calls: Calls::default(),
    }
}

impl Fake {
    pub(crate) fn starting(mut self, operation: &'static str) -> Fake {
        self.operation = Some(operation);
        self
    }

    pub(crate) fn failing(mut self, fails: Fails) -> Fake {
        self.fails = Some(fails);
        self
    }

    pub(crate) fn shadowed(mut self) -> Fake {
        self.shadow = true;
        self
    }

    /// Leaves its name in the item's `fake.velero-wasm.io/trail` annotation.
    pub(crate) fn trailing(mut self) -> Fake {
        self.trail = true;
        self
    }

    /// Asks Velero to skip the item it restores.
    pub(crate) fn skipping(mut self) -> Fake {
        self.skips = true;
        self
    }

    /// The item as this action returns it.
    fn changed(&self, item: &str) -> String {
        if !self.trail {
            return annotated(item);
        }
        let mut item: Value = serde_json::from_str(item).unwrap();
        let trail = item["metadata"]["annotations"]["fake.velero-wasm.io/trail"]
            .as_str()
            .map(|t| format!("{t},{}", self.info.name))
            .unwrap_or_else(|| self.info.name.clone());
        item["metadata"]["annotations"]["fake.velero-wasm.io/trail"] = json!(trail);
        item.to_string()
    }

    fn record(&self, line: String) {
        self.calls.lock().unwrap().push(line);
    }

    /// Records `line` and fails as the action is set to, on `item` (" on item …" or "").
    fn called(&self, line: String, item: String) -> Result<(), CallError> {
        self.record(line);
        match self.fails {
            None => Ok(()),
            Some(Fails::Saying(message)) => Err(CallError::Action(message.to_string())),
            Some(Fails::Deadline) => Err(CallError::Fault {
                module: self.module.clone(),
                action: self.info.name.clone(),
                item,
                fault: Fault::Timeout(Duration::from_secs(5)),
            }),
        }
    }
}

/// The PVC a fake action names as an additional (or related, or post-operation) item.
fn claim(namespace: &str) -> ResourceId {
    ResourceId {
        group: String::new(),
        resource: "persistentvolumeclaims".into(),
        namespace: namespace.into(),
        name: "data".into(),
    }
}

/// `item` with the annotation a fake action adds.
fn annotated(item: &str) -> String {
    let mut item: Value = serde_json::from_str(item).unwrap();
    item["metadata"]["annotations"] = json!({"fake.velero-wasm.io/seen": "true"});
    item.to_string()
}

#[async_trait]
impl ServedAction for Fake {
    fn module(&self) -> &str {
        &self.module
    }

    fn info(&self) -> &ActionInfo {
        &self.info
    }

    async fn backup(&self, call: calls::Backup) -> Result<BackupOutcome, CallError> {
        let on = format!(" on item {}", call.item);
        self.called(format!("{} backup {}", self.info.name, call.item), on)?;
        let claims = vec![claim(&call.item.namespace)];
        Ok(BackupOutcome {
            item: self.changed(&call.request.item),
            additional_items: claims.clone(),
            operation_id: self.operation.map(str::to_string),
            post_operation_items: if self.operation.is_some() {
                claims
            } else {
                Vec::new()
            },
        })
    }

    async fn restore(&self, call: calls::Restore) -> Result<RestoreOutcome, CallError> {
        let on = format!(" on item {}", call.item);
        self.called(format!("{} restore {}", self.info.name, call.item), on)?;
        Ok(RestoreOutcome {
            item: self.changed(&call.request.item),
            additional_items: vec![claim(&call.item.namespace)],
            skip_restore: self.skips,
            operation_id: self.operation.map(str::to_string),
            wait_for_additional_items: true,
            additional_items_timeout: Some(Duration::from_secs(90)),
        })
    }

    async fn related_items(&self, call: calls::RelatedItems) -> Result<Vec<ResourceId>, CallError> {
        let on = format!(" on item {}", call.item);
        self.called(format!("{} related {}", self.info.name, call.item), on)?;
        Ok(vec![claim(&call.item.namespace)])
    }

    async fn delete(&self, call: calls::Delete) -> Result<(), CallError> {
        let on = format!(" on item {}", call.item);
        self.called(format!("{} delete {}", self.info.name, call.item), on)
    }

    async fn progress(&self, call: calls::Progress) -> Result<OperationProgress, CallError> {
        let line = format!("{} progress {}", self.info.name, call.operation_id);
        self.called(line, String::new())?;
        Ok(OperationProgress {
            completed: false,
            error: None,
            n_completed: 3,
            n_total: 10,
            units: "GiB".into(),
            description: "copying".into(),
            started: Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            updated: None,
        })
    }

    async fn cancel(&self, call: calls::Cancel) -> Result<(), CallError> {
        let line = format!("{} cancel {}", self.info.name, call.operation_id);
        self.called(line, String::new())
    }

    async fn items_ready(&self, call: calls::ItemsReady) -> Result<bool, CallError> {
        let line = format!("{} ready? {} items", self.info.name, call.items.len());
        self.called(line, String::new())?;
        Ok(call.items.iter().all(|i| !i.name.starts_with("pending")))
    }

    fn has_shadow(&self) -> bool {
        self.shadow
    }

    fn mirror(&self, call: Mirrored) {
        let (call, served) = match &call {
            Mirrored::Backup { call, served, .. } => (
                format!("backup {}", call.item),
                served.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            ),
            Mirrored::Restore { call, served, .. } => (
                format!("restore {}", call.item),
                served.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            ),
            Mirrored::Related { call, served } => (
                format!("related {}", call.item),
                served.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            ),
            Mirrored::Delete { call, served } => (
                format!("delete {}", call.item),
                served.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            ),
        };
        let served = served.err().unwrap_or_else(|| "answered".to_string());
        self.record(format!("{} mirrored {call}: {served}", self.info.name));
    }
}

/// The fake actions in service, ready once `ready` says so.
struct Fakes {
    actions: BTreeMap<String, Fake>,
    ready: watch::Receiver<bool>,
}

#[async_trait]
impl ServedActions for Fakes {
    async fn ready_for(&self, _name: &str) {
        let _ = self.ready.clone().wait_for(|ready| *ready).await;
    }

    async fn all_loaded(&self) {
        let _ = self.ready.clone().wait_for(|ready| *ready).await;
    }

    fn action(&self, name: &str) -> Option<Box<dyn ServedAction>> {
        let action = self.actions.get(name)?.clone();
        Some(Box::new(action))
    }

    fn actions(&self) -> Vec<Listed> {
        self.actions
            .values()
            .map(|a| (a.info.kind, a.info.name.clone()))
            .collect()
    }
}

/// The plugin's gRPC stack serving fake actions on a Unix socket, and a client channel to it.
pub(crate) struct Served {
    pub(crate) channel: Channel,
    pub(crate) dispatch: Dispatch,
    calls: Calls,
    /// Opens the gate in front of Velero's services (the modules are loaded).
    gate: watch::Sender<bool>,
    /// Makes the fake actions ready.
    ready: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Served {
    /// What the actions were asked so far.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

/// Serves `actions` as the plugin serves its modules, loaded and ready.
pub(crate) async fn serve(actions: Vec<Fake>) -> Served {
    let served = serve_loading(actions).await;
    served.gate.send_replace(true);
    served.ready.send_replace(true);
    served
}

/// Serves `actions` as the plugin serves its modules, before they are loaded: the gate is shut and
/// the actions are not ready.
async fn serve_loading(actions: Vec<Fake>) -> Served {
    let calls = Calls::default();
    let (ready, ready_receiver) = watch::channel(false);
    let fakes = Fakes {
        actions: actions
            .into_iter()
            .map(|mut a| {
                a.calls = calls.clone();
                (a.info.name.clone(), a)
            })
            .collect(),
        ready: ready_receiver,
    };
    let dispatch = Dispatch::serving(
        Arc::new(fakes),
        Shadows::new(Budget::from_config(&Config::default())),
    );
    let lister = Lister {
        dispatch: dispatch.clone(),
        command: "/plugins/velero-wasm".to_string(),
        kinds: Advertised::default(),
        listing: None,
    };
    let (gate, loaded) = gate::signal();
    let router =
        velero_wasm::plugin::router(dispatch.clone(), lister, Arc::new(Notify::new()), loaded)
            .await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("plugin.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(router.serve_with_incoming(accept::incoming(listener)));
    let channel = plugin_socket::connect(&socket).await;
    Served {
        channel,
        dispatch,
        calls,
        gate,
        ready,
        _dir: dir,
    }
}

/// The fake actions of every kind, as one module would provide them.
fn every_kind() -> Vec<Fake> {
    vec![
        fake("shop", "fake.io/backup-v1", ActionKind::Backup, &["pods"]),
        fake("shop", "fake.io/backup-v2", ActionKind::BackupV2, &["pods"]).starting("snap-1"),
        fake("shop", "fake.io/restore-v1", ActionKind::Restore, &["pods"]),
        fake(
            "shop",
            "fake.io/restore-v2",
            ActionKind::RestoreV2,
            &["pods"],
        )
        .starting("copy-1"),
        fake(
            "shop",
            "fake.io/item-block",
            ActionKind::ItemBlock,
            &["pods"],
        ),
        fake("shop", "fake.io/delete", ActionKind::Delete, &["pods"]),
    ]
}

pub(crate) fn pod(name: &str) -> Vec<u8> {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"}})
        .to_string()
        .into_bytes()
}

pub(crate) fn backup() -> Vec<u8> {
    br#"{"kind":"Backup","metadata":{"name":"nightly","namespace":"velero","uid":"b-1"}}"#.to_vec()
}

pub(crate) fn restore() -> Vec<u8> {
    br#"{"kind":"Restore","metadata":{"name":"back","namespace":"velero","uid":"r-1"}}"#.to_vec()
}

pub(crate) fn pvc_id(name: &str) -> ResourceIdentifier {
    ResourceIdentifier {
        group: String::new(),
        resource: "persistentvolumeclaims".into(),
        namespace: "shop".into(),
        name: name.into(),
    }
}

pub(crate) fn annotations(item: &[u8]) -> Value {
    serde_json::from_slice::<Value>(item).unwrap()["metadata"]["annotations"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn list_plugins_lists_every_action_under_its_velero_kind_in_go_order() {
    let served = serve(every_kind()).await;
    let listed = PluginListerClient::new(served.channel.clone())
        .list_plugins(g::Empty {})
        .await
        .unwrap()
        .into_inner()
        .plugins;
    let listed: Vec<(String, String, String)> = listed
        .into_iter()
        .map(|p| (p.command, p.kind, p.name))
        .collect();
    // Each family's slot last in its kind (v2 for backup and restore).
    let expected: Vec<(String, String, String)> = [
        ("BackupItemAction", "fake.io/backup-v1"),
        ("BackupItemActionV2", "fake.io/backup-v2"),
        ("BackupItemActionV2", "velero-wasm.io/added-backup-actions"),
        ("RestoreItemAction", "fake.io/restore-v1"),
        ("RestoreItemActionV2", "fake.io/restore-v2"),
        (
            "RestoreItemActionV2",
            "velero-wasm.io/added-restore-actions",
        ),
        ("DeleteItemAction", "fake.io/delete"),
        ("DeleteItemAction", "velero-wasm.io/added-delete-actions"),
        ("ItemBlockAction", "fake.io/item-block"),
        ("ItemBlockAction", "velero-wasm.io/added-item-block-actions"),
    ]
    .into_iter()
    .map(|(kind, name)| ("/plugins/velero-wasm".into(), kind.into(), name.into()))
    .collect();
    assert_eq!(listed, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_service_answers_applies_to_with_the_action_selector() {
    let served = serve(every_kind()).await;
    let c = &served.channel;
    let selectors = [
        BiaV1::new(c.clone())
            .applies_to(g::BackupItemActionAppliesToRequest {
                plugin: "fake.io/backup-v1".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector,
        BiaV2::new(c.clone())
            .applies_to(v2::BackupItemActionAppliesToRequest {
                plugin: "fake.io/backup-v2".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector,
        RiaV1::new(c.clone())
            .applies_to(g::RestoreItemActionAppliesToRequest {
                plugin: "fake.io/restore-v1".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector,
        RiaV2::new(c.clone())
            .applies_to(v2::RestoreItemActionAppliesToRequest {
                plugin: "fake.io/restore-v2".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector,
        ItemBlockActionClient::new(c.clone())
            .applies_to(v1::ItemBlockActionAppliesToRequest {
                plugin: "fake.io/item-block".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector,
        DeleteItemActionClient::new(c.clone())
            .applies_to(g::DeleteItemActionAppliesToRequest {
                plugin: "fake.io/delete".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .resource_selector,
    ];
    for selector in selectors {
        let selector = selector.expect("the selector is always set");
        assert_eq!(selector.included_resources, ["pods"]);
        assert_eq!(selector.selector, "app=shop");
        assert!(selector.included_namespaces.is_empty());
    }
    assert!(
        served.calls().is_empty(),
        "AppliesTo never calls the action"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn backup_execute_v1_and_v2_answer_the_item_as_the_action_returned_it() {
    let served = serve(every_kind()).await;
    let v1 = BiaV1::new(served.channel.clone())
        .execute(g::ExecuteRequest {
            plugin: "fake.io/backup-v1".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        annotations(&v1.item),
        json!({"fake.velero-wasm.io/seen": "true"})
    );
    assert_eq!(v1.additional_items, [pvc_id("data")]);

    let v2 = BiaV2::new(served.channel.clone())
        .execute(v2::ExecuteRequest {
            plugin: "fake.io/backup-v2".into(),
            item: pod("web-1"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v2.operation_id, "snap-1");
    assert_eq!(v2.additional_items, [pvc_id("data")]);
    assert_eq!(v2.post_operation_items, [pvc_id("data")]);
    assert_eq!(
        served.calls(),
        [
            "fake.io/backup-v1 backup pods shop/web-0",
            "fake.io/backup-v2 backup pods shop/web-1"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v1_service_refuses_an_operation_its_v2_action_started() {
    // Velero listed the action as v1; a module update made it v2, and it starts an operation.
    let served = serve(vec![fake(
        "shop",
        "fake.io/moved",
        ActionKind::BackupV2,
        &["pods"],
    )
    .starting("snap-9")])
    .await;
    let e = BiaV1::new(served.channel.clone())
        .execute(g::ExecuteRequest {
            plugin: "fake.io/moved".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unknown);
    assert_eq!(
        e.message(),
        "fake.io/moved started the asynchronous operation snap-9, but Velero knows it as a \
         BackupItemAction (v1) action, which cannot report one: restart Velero (its pod) so that it \
         lists the action again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_execute_v1_and_v2_answer_what_velero_waits_for() {
    let served = serve(every_kind()).await;
    let v1 = RiaV1::new(served.channel.clone())
        .execute(g::RestoreItemActionExecuteRequest {
            plugin: "fake.io/restore-v1".into(),
            item: pod("web-0"),
            restore: restore(),
            item_from_backup: pod("web-0"),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        annotations(&v1.item),
        json!({"fake.velero-wasm.io/seen": "true"})
    );
    assert_eq!(
        (v1.additional_items, v1.skip_restore),
        (vec![pvc_id("data")], false)
    );

    let v2 = RiaV2::new(served.channel.clone())
        .execute(v2::RestoreItemActionExecuteRequest {
            plugin: "fake.io/restore-v2".into(),
            item: pod("web-1"),
            restore: restore(),
            item_from_backup: pod("web-1"),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v2.operation_id, "copy-1");
    assert!(v2.wait_for_additional_items);
    assert_eq!(
        v2.additional_items_ready_timeout.map(|d| d.seconds),
        Some(90)
    );
    let ready = |names: &[&str]| v2::RestoreItemActionItemsReadyRequest {
        plugin: "fake.io/restore-v2".into(),
        restore: restore(),
        additional_items: names.iter().map(|n| pvc_id(n)).collect(),
    };
    let mut client = RiaV2::new(served.channel.clone());
    let answers = [
        client
            .are_additional_items_ready(ready(&["data"]))
            .await
            .unwrap()
            .into_inner()
            .ready,
        client
            .are_additional_items_ready(ready(&["data", "pending-1"]))
            .await
            .unwrap()
            .into_inner()
            .ready,
    ];
    assert_eq!(answers, [true, false]);
    assert_eq!(
        served.calls(),
        [
            "fake.io/restore-v1 restore pods shop/web-0",
            "fake.io/restore-v2 restore pods shop/web-1",
            "fake.io/restore-v2 ready? 1 items",
            "fake.io/restore-v2 ready? 2 items"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_and_cancel_reach_the_action_with_velero_s_operation_id() {
    let served = serve(every_kind()).await;
    let progress = BiaV2::new(served.channel.clone())
        .progress(v2::BackupItemActionProgressRequest {
            plugin: "fake.io/backup-v2".into(),
            operation_id: "snap-1".into(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    assert_eq!(
        (progress.n_completed, progress.n_total, progress.completed),
        (3, 10, false)
    );
    assert_eq!(progress.operation_units, "GiB");
    assert_eq!(progress.started.unwrap().seconds, 1_700_000_000);
    // A time the action does not know goes out as Go's zero time, which Velero reads as unset.
    assert_eq!(
        progress.updated.unwrap().seconds,
        velero_wasm::plugin::convert::GO_ZERO_TIME.seconds
    );
    BiaV2::new(served.channel.clone())
        .cancel(v2::BackupItemActionCancelRequest {
            plugin: "fake.io/backup-v2".into(),
            operation_id: "snap-1".into(),
            backup: backup(),
        })
        .await
        .unwrap();
    let restore_progress = RiaV2::new(served.channel.clone())
        .progress(v2::RestoreItemActionProgressRequest {
            plugin: "fake.io/restore-v2".into(),
            operation_id: "copy-1".into(),
            restore: restore(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    assert_eq!(restore_progress.description, "copying");
    RiaV2::new(served.channel.clone())
        .cancel(v2::RestoreItemActionCancelRequest {
            plugin: "fake.io/restore-v2".into(),
            operation_id: "copy-1".into(),
            restore: restore(),
        })
        .await
        .unwrap();
    assert_eq!(
        served.calls(),
        [
            "fake.io/backup-v2 progress snap-1",
            "fake.io/backup-v2 cancel snap-1",
            "fake.io/restore-v2 progress copy-1",
            "fake.io/restore-v2 cancel copy-1"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn item_block_and_delete_actions_get_the_item_and_the_backup() {
    let served = serve(every_kind()).await;
    let related = ItemBlockActionClient::new(served.channel.clone())
        .get_related_items(v1::ItemBlockActionGetRelatedItemsRequest {
            plugin: "fake.io/item-block".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .related_items;
    assert_eq!(related, [pvc_id("data")]);
    DeleteItemActionClient::new(served.channel.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: "fake.io/delete".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap();
    assert_eq!(
        served.calls(),
        [
            "fake.io/item-block related pods shop/web-0",
            "fake.io/delete delete pods shop/web-0"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_no_action_has_or_an_action_of_another_kind_is_not_found() {
    let served = serve(every_kind()).await;
    let c = &served.channel;
    let unknown = BiaV1::new(c.clone())
        .applies_to(g::BackupItemActionAppliesToRequest {
            plugin: "fake.io/never".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::Unknown);
    assert_eq!(
        unknown.message(),
        "BackupItemAction plugin: fake.io/never was not found or has an invalid name format (no loaded module provides it)"
    );
    let other_kind = DeleteItemActionClient::new(c.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: "fake.io/restore-v1".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        other_kind.message(),
        "DeleteItemAction plugin: fake.io/restore-v1 was not found or has an invalid name format (it is a RestoreItemAction action)"
    );
    // The other version of a kind serves: Velero may know an action as v1 that is v2 now.
    RiaV2::new(c.clone())
        .execute(v2::RestoreItemActionExecuteRequest {
            plugin: "fake.io/restore-v1".into(),
            item: pod("web-0"),
            restore: restore(),
            item_from_backup: pod("web-0"),
        })
        .await
        .unwrap();
    assert_eq!(
        served.calls(),
        ["fake.io/restore-v1 restore pods shop/web-0"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_request_is_invalid_argument_and_never_reaches_the_action() {
    let served = serve(every_kind()).await;
    let mut client = BiaV2::new(served.channel.clone());
    for (item, backup, expected) in [
        (
            Vec::new(),
            backup(),
            "item: is empty (unexpected end of JSON input)",
        ),
        (
            br#"{"metadata":{}}"#.to_vec(),
            backup(),
            "item: Object 'Kind' is missing in '{\"metadata\":{}}'",
        ),
        (
            pod("web-0"),
            b"[]".to_vec(),
            "backup: must be a JSON object, got '[]'",
        ),
    ] {
        let e = client
            .execute(v2::ExecuteRequest {
                plugin: "fake.io/backup-v2".into(),
                item,
                backup,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        assert_eq!(e.message(), expected);
    }
    assert!(served.calls().is_empty(), "{:?}", served.calls());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_s_failure_is_the_status_velero_reports_with_its_message() {
    let served = serve(vec![
        fake("shop", "fake.io/says-no", ActionKind::Backup, &["pods"])
            .failing(Fails::Saying("the disk is not attached")),
        fake("slow", "fake.io/hangs", ActionKind::RestoreV2, &["pods"]).failing(Fails::Deadline),
    ])
    .await;
    let said = BiaV1::new(served.channel.clone())
        .execute(g::ExecuteRequest {
            plugin: "fake.io/says-no".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (said.code(), said.message()),
        (Code::Unknown, "the disk is not attached")
    );
    let hung = RiaV2::new(served.channel.clone())
        .execute(v2::RestoreItemActionExecuteRequest {
            plugin: "fake.io/hangs".into(),
            item: pod("web-0"),
            restore: restore(),
            item_from_backup: pod("web-0"),
        })
        .await
        .unwrap_err();
    assert_eq!(hung.code(), Code::Unknown);
    assert_eq!(
        hung.message(),
        "module slow, action fake.io/hangs on item pods shop/web-0: did not finish within its deadline of 5s"
    );
    let progress = RiaV2::new(served.channel.clone())
        .progress(v2::RestoreItemActionProgressRequest {
            plugin: "fake.io/hangs".into(),
            operation_id: "copy-1".into(),
            restore: restore(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        progress.message(),
        "module slow, action fake.io/hangs: did not finish within its deadline of 5s"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_velero_listed_that_is_gone_does_nothing_and_its_operations_cannot_be_followed() {
    let served = serve(Vec::new()).await;
    served.dispatch.set_retired(BTreeSet::from([
        (ActionKind::Backup, "fake.io/gone".to_string()),
        (ActionKind::BackupV2, "fake.io/gone-v2".to_string()),
        (ActionKind::RestoreV2, "fake.io/gone-restore".to_string()),
        (ActionKind::ItemBlock, "fake.io/gone-block".to_string()),
        (ActionKind::Delete, "fake.io/gone-delete".to_string()),
    ]));
    let c = &served.channel;
    let selector = BiaV1::new(c.clone())
        .applies_to(g::BackupItemActionAppliesToRequest {
            plugin: "fake.io/gone".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resource_selector
        .unwrap();
    assert_eq!(selector.included_resources, [RETIRED_RESOURCE]);
    let item = pod("web-0");
    let answer = BiaV1::new(c.clone())
        .execute(g::ExecuteRequest {
            plugin: "fake.io/gone".into(),
            item: item.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (answer.item, answer.additional_items),
        (item.clone(), vec![])
    );
    let related = ItemBlockActionClient::new(c.clone())
        .get_related_items(v1::ItemBlockActionGetRelatedItemsRequest {
            plugin: "fake.io/gone-block".into(),
            item: item.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(related.related_items.is_empty());
    DeleteItemActionClient::new(c.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: "fake.io/gone-delete".into(),
            item: item.clone(),
            backup: backup(),
        })
        .await
        .unwrap();
    let ready = RiaV2::new(c.clone())
        .are_additional_items_ready(v2::RestoreItemActionItemsReadyRequest {
            plugin: "fake.io/gone-restore".into(),
            restore: restore(),
            additional_items: vec![pvc_id("pending-1")],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ready.ready, "nothing to wait for");
    let progress = BiaV2::new(c.clone())
        .progress(v2::BackupItemActionProgressRequest {
            plugin: "fake.io/gone-v2".into(),
            operation_id: "snap-1".into(),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        progress.message(),
        "fake.io/gone-v2: no module provides this action any more, so its operation cannot be followed; put its module back in the module directory, or restart Velero to drop the action"
    );
    let cancel = BiaV2::new(c.clone())
        .cancel(v2::BackupItemActionCancelRequest {
            plugin: "fake.io/gone-v2".into(),
            operation_id: "snap-1".into(),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(cancel.message(), progress.message());
    // Retired under its kind only: under another kind the name is unknown.
    let e = RiaV1::new(c.clone())
        .applies_to(g::RestoreItemActionAppliesToRequest {
            plugin: "fake.io/gone".into(),
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("was not found"), "{}", e.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_to_a_module_with_a_shadow_is_mirrored_with_what_velero_got() {
    let served = serve(vec![
        fake("shop", "fake.io/shadowed", ActionKind::Backup, &["pods"]).shadowed(),
        fake(
            "shop",
            "fake.io/shadowed-fails",
            ActionKind::Delete,
            &["pods"],
        )
        .shadowed()
        .failing(Fails::Saying("no")),
        fake("shop", "fake.io/alone", ActionKind::Backup, &["pods"]),
    ])
    .await;
    for plugin in ["fake.io/shadowed", "fake.io/alone"] {
        BiaV1::new(served.channel.clone())
            .execute(g::ExecuteRequest {
                plugin: plugin.into(),
                item: pod("web-0"),
                backup: backup(),
            })
            .await
            .unwrap();
    }
    DeleteItemActionClient::new(served.channel.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: "fake.io/shadowed-fails".into(),
            item: pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        served.calls(),
        [
            "fake.io/shadowed backup pods shop/web-0",
            "fake.io/shadowed mirrored backup pods shop/web-0: answered",
            "fake.io/alone backup pods shop/web-0",
            "fake.io/shadowed-fails delete pods shop/web-0",
            "fake.io/shadowed-fails mirrored delete pods shop/web-0: no",
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn velero_s_calls_wait_for_the_modules_while_go_plugin_s_answer_at_once() {
    let served = serve_loading(every_kind()).await;
    let mut execute = {
        let channel = served.channel.clone();
        tokio::spawn(async move {
            BiaV1::new(channel)
                .execute(g::ExecuteRequest {
                    plugin: "fake.io/backup-v1".into(),
                    item: pod("web-0"),
                    backup: backup(),
                })
                .await
        })
    };
    // go-plugin's own services never wait for loading.
    GrpcControllerClient::new(served.channel.clone())
        .shutdown(p::Empty {})
        .await
        .unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(300), &mut execute).await;
    assert!(
        waited.is_err(),
        "Execute answered before the modules loaded"
    );
    // The gate opens when every source is known; the call then waits for its own module.
    served.gate.send_replace(true);
    let waited = tokio::time::timeout(Duration::from_millis(300), &mut execute).await;
    assert!(
        waited.is_err(),
        "Execute answered before its action was ready"
    );
    assert!(served.calls().is_empty());
    served.ready.send_replace(true);
    let answer = execute.await.unwrap().unwrap().into_inner();
    assert_eq!(answer.additional_items, [pvc_id("data")]);
    assert_eq!(served.calls(), ["fake.io/backup-v1 backup pods shop/web-0"]);
}
