//! The slots, as Velero sees them (docs/modules.md#s10): one name per family of kinds, listed to
//! Velero beside the actions, through which the plugin serves every action in service that the
//! listing Velero holds lacks — a module added while Velero runs serves in its next backup. Served on
//! the plugin's own gRPC stack over fake actions (tests/plugin_fake.rs); tests/velero drives the same
//! through Velero's own plugin manager with real modules.

use serde_json::json;
use tonic::Code;
use velero_wasm::action::slot::NOTHING_ADDED;
use velero_wasm::action::ActionKind;
use velero_wasm::plugin::kept_listing::Listed;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient as BiaV1;
use velero_wasm::plugin::proto::generated::delete_item_action_client::DeleteItemActionClient;
use velero_wasm::plugin::proto::generated::{self as g};
use velero_wasm::plugin::proto::v1::item_block_action_client::ItemBlockActionClient;
use velero_wasm::plugin::proto::v1::{self as v1};
use velero_wasm::plugin::proto::v2::backup_item_action_client::BackupItemActionClient as BiaV2;
use velero_wasm::plugin::proto::v2::restore_item_action_client::RestoreItemActionClient as RiaV2;
use velero_wasm::plugin::proto::v2::{self as v2};

use crate::plugin_fake::{annotations, backup, fake, pvc_id, restore, serve, Fails, Fake, Served};

const BACKUP_SLOT: &str = "velero-wasm.io/added-backup-actions";
const RESTORE_SLOT: &str = "velero-wasm.io/added-restore-actions";

/// A Pod the fake actions' selectors match (resources `pods`, labels `app=shop`).
fn shop_pod(name: &str) -> Vec<u8> {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "shop", "labels": {"app": "shop"}}})
    .to_string()
    .into_bytes()
}

/// What Velero was told at its start: `names` of `kind`, and the slots.
fn velero_listed(names: &[(ActionKind, &str)]) -> Vec<Listed> {
    let mut listed: Vec<Listed> = names.iter().map(|(k, n)| (*k, n.to_string())).collect();
    listed.push((ActionKind::BackupV2, BACKUP_SLOT.into()));
    listed.push((ActionKind::RestoreV2, RESTORE_SLOT.into()));
    listed
}

/// The one module Velero knew, and two modules added since (backup actions, out of name order).
fn known_and_added() -> Vec<Fake> {
    vec![
        fake("known", "fake.io/known", ActionKind::BackupV2, &["pods"]).trailing(),
        fake("zeta", "z.io/added", ActionKind::BackupV2, &["pods"])
            .trailing()
            .starting("snap-z"),
        fake(
            "alpha",
            "a.io/added",
            ActionKind::Backup,
            &["pods", "persistentvolumeclaims"],
        )
        .trailing(),
        fake("other", "o.io/added", ActionKind::Backup, &["secrets"]).trailing(),
    ]
}

async fn slot_selector(served: &Served, slot: &str) -> g::ResourceSelector {
    BiaV2::new(served.channel.clone())
        .applies_to(v2::BackupItemActionAppliesToRequest {
            plugin: slot.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resource_selector
        .unwrap()
}

async fn slot_execute(
    served: &Served,
    item: Vec<u8>,
) -> Result<v2::ExecuteResponse, tonic::Status> {
    BiaV2::new(served.channel.clone())
        .execute(v2::ExecuteRequest {
            plugin: BACKUP_SLOT.into(),
            item,
            backup: backup(),
        })
        .await
        .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread")]
async fn with_nothing_added_a_slot_matches_no_item_and_leaves_one_unchanged() {
    let served = serve(known_and_added()).await;
    // Everything is listed by its own name.
    served.dispatch.set_listed(velero_listed(&[
        (ActionKind::BackupV2, "fake.io/known"),
        (ActionKind::BackupV2, "z.io/added"),
        (ActionKind::Backup, "a.io/added"),
        (ActionKind::Backup, "o.io/added"),
    ]));
    let selector = slot_selector(&served, BACKUP_SLOT).await;
    assert_eq!(selector.included_resources, [NOTHING_ADDED]);
    let item = shop_pod("web-0");
    let answer = slot_execute(&served, item.clone()).await.unwrap();
    assert_eq!((answer.item, answer.additional_items), (item, vec![]));
    assert!(served.calls().is_empty(), "{:?}", served.calls());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_kept_listing_a_slot_serves_nothing_rather_than_an_action_twice() {
    let served = serve(known_and_added()).await;
    let selector = slot_selector(&served, BACKUP_SLOT).await;
    assert_eq!(selector.included_resources, [NOTHING_ADDED]);
    slot_execute(&served, shop_pod("web-0")).await.unwrap();
    assert!(served.calls().is_empty(), "{:?}", served.calls());
}

#[tokio::test(flavor = "multi_thread")]
async fn added_actions_serve_through_the_slot_in_name_order_each_on_the_last_one_s_output() {
    let served = serve(known_and_added()).await;
    served
        .dispatch
        .set_listed(velero_listed(&[(ActionKind::BackupV2, "fake.io/known")]));

    // AppliesTo covers every added action's selector, and nothing of the one Velero knows.
    let selector = slot_selector(&served, BACKUP_SLOT).await;
    assert_eq!(
        selector.included_resources,
        ["pods", "persistentvolumeclaims", "secrets"]
    );
    assert_eq!(selector.selector, "app=shop");

    let answer = slot_execute(&served, shop_pod("web-0")).await.unwrap();
    // a.io before z.io; o.io applies to Secrets only and is not called; the known action is not
    // called through the slot (Velero calls it by its own name).
    assert_eq!(
        annotations(&answer.item),
        json!({"fake.velero-wasm.io/trail": "a.io/added,z.io/added"})
    );
    assert_eq!(
        served.calls(),
        [
            "a.io/added backup pods shop/web-0",
            "z.io/added backup pods shop/web-0"
        ]
    );
    // Both name the same PVC: Velero gets it once.
    assert_eq!(answer.additional_items, [pvc_id("data")]);
    assert_eq!(answer.post_operation_items, [pvc_id("data")]);
    // The operation names the action that started it, with its own id.
    assert_eq!(answer.operation_id, r#"[["z.io/added","snap-z"]]"#);

    // A Pod without the label: no added action applies.
    let unlabelled = json!({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "x", "namespace": "shop"}})
    .to_string()
    .into_bytes();
    let answer = slot_execute(&served, unlabelled.clone()).await.unwrap();
    assert_eq!(answer.item, unlabelled);
    assert_eq!(served.calls().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_and_cancel_of_a_slot_s_operation_reach_each_action_that_started_one() {
    let served = serve(vec![
        fake("a", "a.io/snap", ActionKind::BackupV2, &["pods"]).starting("snap-a"),
        fake("b", "b.io/copy", ActionKind::BackupV2, &["pods"]).starting("copy-b"),
    ])
    .await;
    served.dispatch.set_listed(velero_listed(&[]));
    let answer = slot_execute(&served, shop_pod("web-0")).await.unwrap();
    assert_eq!(
        answer.operation_id,
        r#"[["a.io/snap","snap-a"],["b.io/copy","copy-b"]]"#
    );
    let progress = BiaV2::new(served.channel.clone())
        .progress(v2::BackupItemActionProgressRequest {
            plugin: BACKUP_SLOT.into(),
            operation_id: answer.operation_id.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    // Each reports 3 of 10 GiB: one operation of 6 of 20.
    assert_eq!(
        (progress.n_completed, progress.n_total, progress.completed),
        (6, 20, false)
    );
    assert_eq!(
        progress.description,
        "a.io/snap: copying; b.io/copy: copying"
    );
    BiaV2::new(served.channel.clone())
        .cancel(v2::BackupItemActionCancelRequest {
            plugin: BACKUP_SLOT.into(),
            operation_id: answer.operation_id,
            backup: backup(),
        })
        .await
        .unwrap();
    assert_eq!(
        served.calls()[2..],
        [
            "a.io/snap progress snap-a",
            "b.io/copy progress copy-b",
            "a.io/snap cancel snap-a",
            "b.io/copy cancel copy-b"
        ]
    );
    // An id the slot never made is refused, and reaches no action.
    let e = BiaV2::new(served.channel.clone())
        .progress(v2::BackupItemActionProgressRequest {
            plugin: BACKUP_SLOT.into(),
            operation_id: "snap-a".into(),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("is not an operation velero-wasm.io/added-backup-actions started"),
        "{}",
        e.message()
    );
    assert_eq!(served.calls().len(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_served_action_s_failure_fails_the_item_and_names_the_action() {
    let served = serve(vec![
        fake("a", "a.io/ok", ActionKind::Backup, &["pods"]),
        fake("b", "b.io/broken", ActionKind::Backup, &["pods"]).failing(Fails::Saying("no disk")),
        fake("c", "c.io/after", ActionKind::Backup, &["pods"]),
    ])
    .await;
    served.dispatch.set_listed(velero_listed(&[]));
    let e = slot_execute(&served, shop_pod("web-0")).await.unwrap_err();
    assert_eq!(e.code(), Code::Unknown);
    assert_eq!(
        e.message(),
        "action b.io/broken (served through velero-wasm.io/added-backup-actions): no disk"
    );
    // As Velero: the item's further actions are not called.
    assert_eq!(
        served.calls(),
        [
            "a.io/ok backup pods shop/web-0",
            "b.io/broken backup pods shop/web-0"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restore_slot_stops_at_a_skip_and_waits_for_what_any_action_waits_for() {
    let served = serve(vec![
        fake("a", "a.io/restore", ActionKind::RestoreV2, &["pods"]).trailing(),
        fake("b", "b.io/skip", ActionKind::Restore, &["pods"])
            .trailing()
            .skipping(),
        fake("c", "c.io/never", ActionKind::RestoreV2, &["pods"]).trailing(),
    ])
    .await;
    served.dispatch.set_listed(velero_listed(&[]));
    let answer = RiaV2::new(served.channel.clone())
        .execute(v2::RestoreItemActionExecuteRequest {
            plugin: RESTORE_SLOT.into(),
            item: shop_pod("web-0"),
            restore: restore(),
            item_from_backup: shop_pod("web-0"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(answer.skip_restore);
    assert!(answer.wait_for_additional_items);
    assert_eq!(
        answer.additional_items_ready_timeout.map(|d| d.seconds),
        Some(90)
    );
    assert_eq!(
        served.calls(),
        [
            "a.io/restore restore pods shop/web-0",
            "b.io/skip restore pods shop/web-0"
        ]
    );
    // Ready when every v2 restore action it serves says so.
    let ready = |names: &[&str]| v2::RestoreItemActionItemsReadyRequest {
        plugin: RESTORE_SLOT.into(),
        restore: restore(),
        additional_items: names.iter().map(|n| pvc_id(n)).collect(),
    };
    let mut client = RiaV2::new(served.channel.clone());
    assert!(
        client
            .are_additional_items_ready(ready(&["data"]))
            .await
            .unwrap()
            .into_inner()
            .ready
    );
    assert!(
        !client
            .are_additional_items_ready(ready(&["pending-1"]))
            .await
            .unwrap()
            .into_inner()
            .ready
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn item_block_and_delete_slots_serve_their_added_actions() {
    let served = serve(vec![
        fake("a", "a.io/block", ActionKind::ItemBlock, &["pods"]),
        fake("b", "b.io/block", ActionKind::ItemBlock, &["pods"]),
        fake("a", "a.io/delete", ActionKind::Delete, &["pods"]),
    ])
    .await;
    served.dispatch.set_listed(velero_listed(&[]));
    let related = ItemBlockActionClient::new(served.channel.clone())
        .get_related_items(v1::ItemBlockActionGetRelatedItemsRequest {
            plugin: "velero-wasm.io/added-item-block-actions".into(),
            item: shop_pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        related.related_items,
        [pvc_id("data")],
        "joined without repeats"
    );
    DeleteItemActionClient::new(served.channel.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: "velero-wasm.io/added-delete-actions".into(),
            item: shop_pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap();
    assert_eq!(
        served.calls(),
        [
            "a.io/block related pods shop/web-0",
            "b.io/block related pods shop/web-0",
            "a.io/delete delete pods shop/web-0"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slot_is_asked_only_under_the_kinds_of_its_family() {
    let served = serve(vec![fake("a", "a.io/added", ActionKind::Backup, &["pods"])]).await;
    served.dispatch.set_listed(velero_listed(&[]));
    // Velero's v1 service may hold the backup slot (when v2 is not listed): it serves v1 actions.
    let answer = BiaV1::new(served.channel.clone())
        .execute(g::ExecuteRequest {
            plugin: BACKUP_SLOT.into(),
            item: shop_pod("web-0"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        annotations(&answer.item),
        json!({"fake.velero-wasm.io/seen": "true"})
    );
    // The restore slot's name is no backup action.
    let e = BiaV2::new(served.channel.clone())
        .applies_to(v2::BackupItemActionAppliesToRequest {
            plugin: RESTORE_SLOT.into(),
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("was not found"), "{}", e.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_added_action_with_a_shadow_is_mirrored_as_any_other() {
    let served = serve(vec![
        fake("a", "a.io/added", ActionKind::Backup, &["pods"]).shadowed()
    ])
    .await;
    served.dispatch.set_listed(velero_listed(&[]));
    slot_execute(&served, shop_pod("web-0")).await.unwrap();
    // The shadow runs after Velero has its answer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while served.calls().len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        served.calls(),
        [
            "a.io/added backup pods shop/web-0",
            "a.io/added mirrored backup pods shop/web-0: answered"
        ]
    );
}
