//! velero-wasm as Velero sees it: the binary is started the way Velero's plugin manager starts it
//! (environment, arguments, handshake on stdout), and every service is driven over the Unix socket with
//! clients generated from our own `.proto` files. Each test is named after the item of the conformance
//! checklist it covers (docs/plugin-protocol.md#s19).
//!
//! The modules are the test components: `kinds` (one action of every kind) and `misbehave` (traps,
//! loops, …), loaded from a directory through `VELERO_WASM_MODULES`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::UnixStream;
use tonic::transport::Channel;
use tonic::Code;
use velero_wasm::plugin::convert::GO_ZERO_TIME;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient as BiaV1;
use velero_wasm::plugin::proto::generated::delete_item_action_client::DeleteItemActionClient;
use velero_wasm::plugin::proto::generated::restore_item_action_client::RestoreItemActionClient as RiaV1;
use velero_wasm::plugin::proto::generated::{self as g, ResourceIdentifier};
use velero_wasm::plugin::proto::plugin::grpc_broker_client::GrpcBrokerClient;
use velero_wasm::plugin::proto::plugin::grpc_stdio_client::GrpcStdioClient;
use velero_wasm::plugin::proto::plugin::{self as p};
use velero_wasm::plugin::proto::v1::item_block_action_client::ItemBlockActionClient;
use velero_wasm::plugin::proto::v1::{self as v1};
use velero_wasm::plugin::proto::v2::backup_item_action_client::BackupItemActionClient as BiaV2;
use velero_wasm::plugin::proto::v2::restore_item_action_client::RestoreItemActionClient as RiaV2;
use velero_wasm::plugin::proto::v2::{self as v2};

use crate::support;

use support::loopback::{Loopback, Reply};
use support::plugin::{binary, Plugin};
use support::run::Run;

const T: &str = "test.velero-wasm.io/";
/// Velero 1.14's arguments.
const ARGS_1_14: &[&str] = &["--log-level", "debug", "--features", "EnableCSI"];
/// Velero 1.15+'s: every `velero server` argument, in every form.
const ARGS_1_15: &[&str] = &[
    "--uploader-type=kopia",
    "--features=EnableCSI",
    "--restore-only",
    "--log-level=info",
    "--foo",
    "bar",
];
/// Every kind but ItemBlockAction: what a Velero 1.14 installation sets.
const KINDS_1_14: &str =
    "BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction";

#[test]
fn c01_without_the_cookie_it_explains_itself_and_exits_1() {
    for cookie in [None, Some("bye")] {
        let mut run = Run::cli(ARGS_1_14);
        if let Some(value) = cookie {
            run = run.env("VELERO_PLUGIN", value);
        }
        let output = run.output();
        assert_eq!(output.status.code(), Some(1), "cookie {cookie:?}");
        assert!(
            output.stdout.is_empty(),
            "nothing on stdout: {:?}",
            String::from_utf8_lossy(&output.stdout)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("Velero plugin") && stderr.contains("VELERO_PLUGIN=hello"),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn c02_the_handshake_line_names_a_socket_that_already_accepts() {
    let plugin = start(ARGS_1_14, &[]);
    let fields: Vec<&str> = plugin.handshake.split('|').collect();
    assert_eq!(fields.len(), 6, "{}", plugin.handshake);
    assert_eq!(&fields[..3], ["1", "2", "unix"]);
    assert_eq!(fields[4], "grpc");
    assert_eq!(fields[5], "", "the unused certificate field is empty");
    let path = Path::new(fields[3]);
    assert_eq!(
        path.parent(),
        Some(plugin.socket_dir.path()),
        "the socket is in PLUGIN_UNIX_SOCKET_DIR"
    );
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.strip_prefix("plugin")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
        "{name}"
    );
    // Connect at once: no retry.
    UnixStream::connect(path)
        .await
        .expect("the socket accepts as soon as the line is printed");
    plugin.shutdown().await;
}

/// A go-plugin 1.6+ client that asks for broker multiplexing (`PLUGIN_MULTIPLEX_GRPC`, which Velero
/// never sets) reads a seventh handshake field; a Go server answers `true`, we answer `false`, so
/// such a client stops with go-plugin's own "plugin does not support the feature".
#[tokio::test(flavor = "multi_thread")]
async fn a_client_asking_for_broker_multiplexing_is_told_it_is_not_supported() {
    let plugin = start(ARGS_1_15, &[("PLUGIN_MULTIPLEX_GRPC", "true")]);
    let fields: Vec<&str> = plugin.handshake.split('|').collect();
    assert_eq!(fields.len(), 7, "{}", plugin.handshake);
    assert_eq!(fields[6], "false");
    // The connection still serves a client that did not insist.
    assert!(!plugin.list().await.is_empty());
    let session = plugin.shutdown().await;
    assert!(
        session.stderr.contains("PLUGIN_MULTIPLEX_GRPC"),
        "{}",
        session.stderr
    );
}

/// `PLUGIN_UNIX_SOCKET_GROUP` (go-plugin's `UnixSocketConfig.Group`): the socket belongs to that
/// group and the group may connect, as a Go plugin's does; a group that does not exist stops the
/// start with a message naming the variable.
#[tokio::test(flavor = "multi_thread")]
async fn a_socket_group_from_the_client_owns_the_socket() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    #[allow(unsafe_code)]
    // SAFETY: getgid has no preconditions.
    let gid = unsafe { libc::getgid() };
    let plugin = start(ARGS_1_15, &[("PLUGIN_UNIX_SOCKET_GROUP", &gid.to_string())]);
    let meta = std::fs::metadata(&plugin.socket).unwrap();
    assert_eq!(meta.gid(), gid);
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    plugin.shutdown().await;

    let mut command = Command::new(binary());
    let output = support::run::hermetic(&mut command)
        .env("VELERO_PLUGIN", "hello")
        .env("PLUGIN_UNIX_SOCKET_GROUP", "no-such-group-velero-wasm")
        .env("PLUGIN_UNIX_SOCKET_DIR", std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "no handshake line");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The error line is JSON (hclog), so the variable's quoted value appears escaped.
    assert!(
        stderr.contains("PLUGIN_UNIX_SOCKET_GROUP=")
            && stderr.contains("no-such-group-velero-wasm")
            && stderr.contains("no group of that name exists"),
        "{stderr}"
    );
}

/// The socket is never reachable with wider permissions than asked, not even for a moment: under
/// umask 000 a socket bound in place exists with mode 0777 until it is chowned and chmodded, and a
/// user outside `PLUGIN_UNIX_SOCKET_GROUP` may connect in that window. inotify reports every change
/// to the socket directory's entries, in order: the socket's name appears there once, already with
/// its group and mode (no change of attributes after), and nothing else is left behind.
#[tokio::test(flavor = "multi_thread")]
async fn the_socket_is_never_wider_than_asked_even_for_a_moment() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let watch = DirectoryWatch::on(dir.path());
    #[allow(unsafe_code)]
    // SAFETY: getgid has no preconditions.
    let gid = unsafe { libc::getgid() };
    let (socket_dir, group) = (dir.path().display().to_string(), gid.to_string());
    let env = [
        ("PLUGIN_UNIX_SOCKET_DIR", socket_dir.as_str()),
        ("PLUGIN_UNIX_SOCKET_GROUP", group.as_str()),
        ("VELERO_WASM_STOCK", "none"),
    ];
    // SAFETY: between fork and exec the child only calls umask, which is async-signal-safe.
    #[allow(unsafe_code)]
    let plugin = Plugin::start_with(binary(), ARGS_1_15, &env, |command| unsafe {
        command.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    });
    assert_eq!(plugin.socket.parent(), Some(dir.path()));
    let meta = std::fs::metadata(&plugin.socket).unwrap();
    assert_eq!(
        (meta.gid(), meta.permissions().mode() & 0o777),
        (gid, 0o660)
    );
    let name = plugin
        .socket
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let events = watch.events();
    let on_socket: Vec<u32> = events
        .iter()
        .filter(|(_, n)| *n == name)
        .map(|(mask, _)| *mask)
        .collect();
    let appeared = on_socket
        .iter()
        .filter(|m| *m & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0)
        .count();
    assert_eq!(appeared, 1, "{events:?}");
    assert!(
        on_socket.iter().all(|m| m & libc::IN_ATTRIB == 0),
        "the socket's owner or mode changed once it had its name: {events:?}"
    );
    let entries: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries, std::slice::from_ref(&plugin.socket));
    plugin.shutdown().await;
}

/// inotify's reports on the entries of one directory (not below it).
struct DirectoryWatch(std::os::fd::OwnedFd);

impl DirectoryWatch {
    fn on(dir: &Path) -> DirectoryWatch {
        use std::os::fd::FromRawFd;
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: inotify_init1 takes flags only; the descriptor it returns is owned here alone, and
        // inotify_add_watch gets it with a valid NUL-terminated path.
        #[allow(unsafe_code)]
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0, "{}", std::io::Error::last_os_error());
            let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
            let wd = libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_ALL_EVENTS);
            assert!(wd >= 0, "{}", std::io::Error::last_os_error());
            DirectoryWatch(owned)
        }
    }

    /// The events so far: (mask, name of the entry), in order.
    fn events(&self) -> Vec<(u32, String)> {
        use std::io::Read;
        let mut file = std::fs::File::from(self.0.try_clone().unwrap());
        let mut events = Vec::new();
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            let n = match file.read(&mut buffer) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return events,
                Err(e) => panic!("inotify: {e}"),
            };
            // Each event: wd (i32), mask, cookie, len (u32), then `len` bytes of NUL-padded name.
            let mut at = 0;
            while at + 16 <= n {
                let word =
                    |i: usize| u32::from_ne_bytes(buffer[at + i..at + i + 4].try_into().unwrap());
                let (mask, len) = (word(4), word(12) as usize);
                let name = &buffer[at + 16..at + 16 + len];
                let name = name.split(|b| *b == 0).next().unwrap_or_default();
                events.push((mask, String::from_utf8_lossy(name).into_owned()));
                at += 16 + len;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn c03_starts_with_velero_1_14_and_1_15_arguments() {
    for args in [ARGS_1_14, ARGS_1_15, &[][..]] {
        let plugin = start(args, &[]);
        let plugins = plugin.list().await;
        assert!(
            plugins.iter().any(|p| p.name == format!("{T}backup-v1")),
            "{args:?}"
        );
        plugin.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn c04_nothing_but_the_handshake_reaches_stdout() {
    let plugin = start(ARGS_1_15, &[]);
    // A guest that prints to stdout and stderr, one that logs, one that panics.
    for action in ["stdout", "log", "trap"] {
        let _ = bia_v1(
            &plugin.channel().await,
            &format!("{T}{action}"),
            configmap("cm"),
            backup(),
        )
        .await;
    }
    let session = plugin.shutdown().await;
    assert_eq!(
        session.stdout_after_handshake, "",
        "stdout after the handshake line"
    );
    assert!(
        !session.stderr.contains("this must not reach"),
        "a guest's stdout is not the host's stderr either"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn c05_health_reports_the_plugin_service_serving() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};
    let plugin = start(ARGS_1_15, &[]);
    let mut health = HealthClient::new(plugin.channel().await);
    for service in ["plugin", ""] {
        let answer = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            answer.status(),
            ServingStatus::Serving,
            "service {service:?}"
        );
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "other".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c06_stdio_and_broker_streams_stay_open_beside_other_calls() {
    let plugin = start(ARGS_1_15, &[]);
    let channel = plugin.channel().await;
    let mut stdio = GrpcStdioClient::new(channel.clone())
        .stream_stdio(())
        .await
        .unwrap()
        .into_inner();
    let (to_broker, from_test) = tokio::sync::mpsc::channel::<p::ConnInfo>(4);
    let mut broker = GrpcBrokerClient::new(channel.clone())
        .start_stream(tokio_stream::wrappers::ReceiverStream::new(from_test))
        .await
        .unwrap()
        .into_inner();
    to_broker
        .send(p::ConnInfo {
            service_id: 7,
            ..Default::default()
        })
        .await
        .unwrap();

    // Other calls work while both streams are open, and the streams neither end nor fail meanwhile.
    assert!(!plugin.list().await.is_empty());
    assert!(bia_v1(
        &channel,
        &format!("{T}backup-v1"),
        configmap("cm"),
        backup()
    )
    .await
    .is_ok());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), stdio.message())
            .await
            .is_err(),
        "stdio stays open"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), broker.message())
            .await
            .is_err(),
        "broker stays open"
    );

    // The broker ends with OK when the client ends its side.
    drop(to_broker);
    assert!(broker.message().await.unwrap().is_none());
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c07_list_plugins_lists_every_action_once_with_our_command() {
    let plugin = start_as("/plugins/velero-wasm", ARGS_1_15, &[]);
    let mut plugins = plugin.list_all().await;
    // Every entry: our argv[0] verbatim, a kind Velero knows, a name Velero accepts (a slot's is
    // one no module may take).
    for p in &plugins {
        assert_eq!(p.command, "/plugins/velero-wasm");
        let valid = velero_wasm::runtime::validate_name(&p.name);
        let slot = velero_wasm::action::slot::slot_family(&p.name).is_some();
        assert!(valid.is_ok() || slot, "{}", p.name);
    }
    // Each family's slot, last in its kind (docs/modules.md#s10).
    let slots: Vec<(String, String)> = plugins
        .iter()
        .filter(|p| velero_wasm::action::slot::slot_family(&p.name).is_some())
        .map(|p| (p.kind.clone(), p.name.clone()))
        .collect();
    assert_eq!(
        slots,
        [
            ("BackupItemActionV2", "velero-wasm.io/added-backup-actions"),
            (
                "RestoreItemActionV2",
                "velero-wasm.io/added-restore-actions"
            ),
            ("DeleteItemAction", "velero-wasm.io/added-delete-actions"),
            ("ItemBlockAction", "velero-wasm.io/added-item-block-actions"),
        ]
        .map(|(k, n)| (k.to_string(), n.to_string()))
    );
    for (i, p) in plugins.iter().enumerate() {
        if velero_wasm::action::slot::slot_family(&p.name).is_some() {
            assert!(
                plugins.get(i + 1).is_none_or(|next| next.kind != p.kind),
                "{} is not last in {}",
                p.name,
                p.kind
            );
        }
    }
    plugins.retain(|p| velero_wasm::action::slot::slot_family(&p.name).is_none());
    // The Go framework's order: kinds in a fixed order, names sorted within a kind.
    let order = [
        "BackupItemAction",
        "BackupItemActionV2",
        "RestoreItemAction",
        "RestoreItemActionV2",
        "DeleteItemAction",
        "ItemBlockAction",
    ];
    let keys: Vec<(usize, &str)> = plugins
        .iter()
        .map(|p| {
            (
                order
                    .iter()
                    .position(|k| *k == p.kind)
                    .unwrap_or_else(|| panic!("kind {}", p.kind)),
                p.name.as_str(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "listing order");
    // One entry per action, exactly the actions `velero-wasm actions` reports, each under its kind.
    let listed: BTreeSet<(String, String)> = plugins
        .iter()
        .map(|p| (p.kind.clone(), p.name.clone()))
        .collect();
    assert_eq!(listed.len(), plugins.len(), "no duplicates");
    assert_eq!(
        listed,
        catalog(),
        "the same actions as `velero-wasm actions`"
    );
    for (kind, name) in [
        ("BackupItemAction", "backup-v1"),
        ("BackupItemAction", "backup-v1-labels"),
        ("BackupItemActionV2", "backup-v2"),
        ("RestoreItemAction", "restore-v1"),
        ("RestoreItemActionV2", "restore-v2"),
        ("ItemBlockAction", "item-block"),
        ("DeleteItemAction", "delete"),
        ("BackupItemAction", "trap"),
    ] {
        assert!(
            listed.contains(&(kind.to_string(), format!("{T}{name}"))),
            "{kind} {name}"
        );
    }
    plugin.shutdown().await;

    // Configured for Velero 1.14: no ItemBlockAction, everything else as before.
    let plugin = start(ARGS_1_14, &[("VELERO_WASM_KINDS", KINDS_1_14)]);
    let plugins = plugin.list().await;
    assert!(plugins.iter().all(|p| p.kind != "ItemBlockAction"));
    let without_iba: BTreeSet<_> = listed
        .iter()
        .filter(|(k, _)| k != "ItemBlockAction")
        .cloned()
        .collect();
    assert_eq!(
        plugins
            .iter()
            .map(|p| (p.kind.clone(), p.name.clone()))
            .collect::<BTreeSet<_>>(),
        without_iba
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c08_every_method_answers_at_its_path_and_unknown_plugins_fail() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let bogus = "example.io/does-not-exist".to_string();
    let (item, bk, rs) = (configmap("cm"), backup(), restore());
    let statuses: Vec<(&str, tonic::Status)> = vec![
        (
            "/generated.BackupItemAction/AppliesTo",
            BiaV1::new(c.clone())
                .applies_to(g::BackupItemActionAppliesToRequest {
                    plugin: bogus.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/generated.BackupItemAction/Execute",
            BiaV1::new(c.clone())
                .execute(g::ExecuteRequest {
                    plugin: bogus.clone(),
                    item: item.clone(),
                    backup: bk.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.BackupItemAction/AppliesTo",
            BiaV2::new(c.clone())
                .applies_to(v2::BackupItemActionAppliesToRequest {
                    plugin: bogus.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.BackupItemAction/Execute",
            BiaV2::new(c.clone())
                .execute(v2::ExecuteRequest {
                    plugin: bogus.clone(),
                    item: item.clone(),
                    backup: bk.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.BackupItemAction/Progress",
            BiaV2::new(c.clone())
                .progress(v2::BackupItemActionProgressRequest {
                    plugin: bogus.clone(),
                    operation_id: "op".into(),
                    backup: bk.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.BackupItemAction/Cancel",
            BiaV2::new(c.clone())
                .cancel(v2::BackupItemActionCancelRequest {
                    plugin: bogus.clone(),
                    operation_id: "op".into(),
                    backup: bk.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/generated.RestoreItemAction/AppliesTo",
            RiaV1::new(c.clone())
                .applies_to(g::RestoreItemActionAppliesToRequest {
                    plugin: bogus.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/generated.RestoreItemAction/Execute",
            RiaV1::new(c.clone())
                .execute(g::RestoreItemActionExecuteRequest {
                    plugin: bogus.clone(),
                    item: item.clone(),
                    restore: rs.clone(),
                    item_from_backup: item.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.RestoreItemAction/AppliesTo",
            RiaV2::new(c.clone())
                .applies_to(v2::RestoreItemActionAppliesToRequest {
                    plugin: bogus.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.RestoreItemAction/Execute",
            RiaV2::new(c.clone())
                .execute(v2::RestoreItemActionExecuteRequest {
                    plugin: bogus.clone(),
                    item: item.clone(),
                    restore: rs.clone(),
                    item_from_backup: item.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.RestoreItemAction/Progress",
            RiaV2::new(c.clone())
                .progress(v2::RestoreItemActionProgressRequest {
                    plugin: bogus.clone(),
                    operation_id: "op".into(),
                    restore: rs.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.RestoreItemAction/Cancel",
            RiaV2::new(c.clone())
                .cancel(v2::RestoreItemActionCancelRequest {
                    plugin: bogus.clone(),
                    operation_id: "op".into(),
                    restore: rs.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v2.RestoreItemAction/AreAdditionalItemsReady",
            RiaV2::new(c.clone())
                .are_additional_items_ready(v2::RestoreItemActionItemsReadyRequest {
                    plugin: bogus.clone(),
                    restore: rs.clone(),
                    additional_items: vec![],
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v1.ItemBlockAction/AppliesTo",
            ItemBlockActionClient::new(c.clone())
                .applies_to(v1::ItemBlockActionAppliesToRequest {
                    plugin: bogus.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/v1.ItemBlockAction/GetRelatedItems",
            ItemBlockActionClient::new(c.clone())
                .get_related_items(v1::ItemBlockActionGetRelatedItemsRequest {
                    plugin: bogus.clone(),
                    item: item.clone(),
                    backup: bk.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/generated.DeleteItemAction/AppliesTo",
            DeleteItemActionClient::new(c.clone())
                .applies_to(g::DeleteItemActionAppliesToRequest {
                    plugin: bogus.clone(),
                })
                .await
                .unwrap_err(),
        ),
        (
            "/generated.DeleteItemAction/Execute",
            DeleteItemActionClient::new(c.clone())
                .execute(g::DeleteItemActionExecuteRequest {
                    plugin: bogus.clone(),
                    item: item.clone(),
                    backup: bk.clone(),
                })
                .await
                .unwrap_err(),
        ),
    ];
    for (path, status) in statuses {
        assert_eq!(status.code(), Code::Unknown, "{path}: {status:?}");
        assert!(
            status.message().contains(
                "plugin: example.io/does-not-exist was not found or has an invalid name format"
            ),
            "{path}: {}",
            status.message()
        );
    }
    // An action of another kind is "not found" under this kind, with the reason (the other version of
    // the same kind is served: see an_action_that_moved_between_v1_and_v2_…).
    let wrong = BiaV2::new(c.clone())
        .applies_to(v2::BackupItemActionAppliesToRequest {
            plugin: format!("{T}restore-v1"),
        })
        .await
        .unwrap_err();
    assert!(
        wrong.message().contains("was not found")
            && wrong.message().contains("it is a RestoreItemAction action"),
        "{}",
        wrong.message()
    );
    // ObjectStore and VolumeSnapshotter are not served.
    let object_store = tonic::client::Grpc::new(c.clone());
    assert_eq!(
        unimplemented_call(object_store, "/generated.ObjectStore/Init").await,
        Code::Unimplemented
    );
    // Still serving.
    assert!(
        bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
            .await
            .is_ok()
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c09_applies_to_returns_selectors_that_parse() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    for p in plugin.list().await {
        let plugin = p.name.clone();
        let selector = match p.kind.as_str() {
            "BackupItemAction" => {
                BiaV1::new(c.clone())
                    .applies_to(g::BackupItemActionAppliesToRequest { plugin })
                    .await
                    .unwrap()
                    .into_inner()
                    .resource_selector
            }
            "BackupItemActionV2" => {
                BiaV2::new(c.clone())
                    .applies_to(v2::BackupItemActionAppliesToRequest { plugin })
                    .await
                    .unwrap()
                    .into_inner()
                    .resource_selector
            }
            "RestoreItemAction" => {
                RiaV1::new(c.clone())
                    .applies_to(g::RestoreItemActionAppliesToRequest { plugin })
                    .await
                    .unwrap()
                    .into_inner()
                    .resource_selector
            }
            "RestoreItemActionV2" => {
                RiaV2::new(c.clone())
                    .applies_to(v2::RestoreItemActionAppliesToRequest { plugin })
                    .await
                    .unwrap()
                    .into_inner()
                    .resource_selector
            }
            "ItemBlockAction" => {
                ItemBlockActionClient::new(c.clone())
                    .applies_to(v1::ItemBlockActionAppliesToRequest { plugin })
                    .await
                    .unwrap()
                    .into_inner()
                    .resource_selector
            }
            "DeleteItemAction" => {
                DeleteItemActionClient::new(c.clone())
                    .applies_to(g::DeleteItemActionAppliesToRequest { plugin })
                    .await
                    .unwrap()
                    .into_inner()
                    .resource_selector
            }
            other => panic!("unexpected kind {other}"),
        };
        let selector = selector.unwrap_or_else(|| panic!("{}: the selector is always set", p.name));
        assert!(
            label_selector::LabelSelector::parse(&selector.selector).is_ok(),
            "{}: {:?}",
            p.name,
            selector.selector
        );
        if p.name == format!("{T}backup-v1") {
            assert_eq!(selector.included_resources, ["configmaps", "pods"]);
            assert_eq!(selector.excluded_namespaces, ["kube-system"]);
            assert!(
                selector.included_namespaces.is_empty() && selector.excluded_resources.is_empty()
            );
        }
        if p.name == format!("{T}backup-v1-labels") {
            assert_eq!(selector.selector, "app in (web,db),!skip");
        }
    }
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c10_backup_execute_returns_the_item_bytes_unchanged_or_with_a_kind() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    // Go's encoding: sorted keys, `<>&` escaped; the bytes must come back exactly.
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"web"},"name":"web-0","namespace":"shop"},"spec":{"note":"\u003cb\u003e \u0026 é"}}"#.as_bytes().to_vec();
    let v1 = bia_v1(&c, &format!("{T}backup-v1"), pod.clone(), backup())
        .await
        .unwrap();
    assert_eq!(v1.item, pod);
    let v2 = BiaV2::new(c.clone())
        .execute(v2::ExecuteRequest {
            plugin: format!("{T}backup-v2"),
            item: pod.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v2.item, pod);
    assert!(v2.operation_id.starts_with("op-"), "{}", v2.operation_id);
    // A changed item is a JSON object with its kind.
    let labelled = bia_v1(&c, &format!("{T}backup-v1-labels"), pod.clone(), backup())
        .await
        .unwrap();
    let labelled: Value = serde_json::from_slice(&labelled.item).unwrap();
    assert_eq!(labelled["kind"], "Pod");
    assert_eq!(
        labelled["metadata"]["labels"][format!("{T}labelled")],
        "true"
    );
    assert_eq!(labelled["spec"]["note"], "<b> & é");
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c11_identifiers_use_plural_resources_and_groups_without_versions() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let v1 = bia_v1(&c, &format!("{T}backup-v1"), configmap("app"), backup())
        .await
        .unwrap();
    assert_eq!(
        v1.additional_items,
        [
            id("", "persistentvolumeclaims", "shop", "app-data"),
            id("apps", "deployments", "shop", "app")
        ]
    );
    let v2 = BiaV2::new(c.clone())
        .execute(v2::ExecuteRequest {
            plugin: format!("{T}backup-v2"),
            item: configmap("app"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        v2.post_operation_items,
        [id("", "configmaps", "shop", "app")]
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db-0", "namespace": "shop"},
        "spec": {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data-db-0"}}, {"name": "tmp", "emptyDir": {}}]}});
    let related = ItemBlockActionClient::new(c.clone())
        .get_related_items(v1::ItemBlockActionGetRelatedItemsRequest {
            plugin: format!("{T}item-block"),
            item: pod.to_string().into_bytes(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        related.related_items,
        [id("", "persistentvolumeclaims", "shop", "data-db-0")]
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c12_restore_execute_returns_the_item_even_when_skipping() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let skipped = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "shop", "labels": {format!("{T}skip"): "true"}}})
        .to_string()
        .into_bytes();
    let answer = RiaV1::new(c.clone())
        .execute(g::RestoreItemActionExecuteRequest {
            plugin: format!("{T}restore-v1"),
            item: skipped.clone(),
            restore: restore(),
            item_from_backup: skipped.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(answer.skip_restore);
    assert_eq!(answer.item, skipped);

    // itemFromBackup (field 4) reaches the action: it copies the backed-up uid.
    let from_backup = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "shop", "uid": "u-123"}}).to_string().into_bytes();
    let answer = RiaV1::new(c.clone())
        .execute(g::RestoreItemActionExecuteRequest {
            plugin: format!("{T}restore-v1"),
            item: configmap("cm"),
            restore: restore(),
            item_from_backup: from_backup.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.skip_restore);
    let item: Value = serde_json::from_slice(&answer.item).unwrap();
    assert_eq!(
        item["metadata"]["annotations"][format!("{T}from-backup-uid")],
        "u-123"
    );
    assert_eq!(answer.additional_items, [id("", "secrets", "shop", "cm")]);

    let answer = RiaV2::new(c.clone())
        .execute(v2::RestoreItemActionExecuteRequest {
            plugin: format!("{T}restore-v2"),
            item: configmap("cm"),
            restore: restore(),
            item_from_backup: from_backup,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.item, configmap("cm"));
    assert!(answer.wait_for_additional_items && !answer.skip_restore);
    assert_eq!(
        answer.additional_items_ready_timeout,
        Some(prost_types::Duration {
            seconds: 90,
            nanos: 0
        })
    );
    assert!(answer.operation_id.starts_with("op-"));
    assert_eq!(
        answer.additional_items,
        [id("", "configmaps", "shop", "pending-cm")]
    );

    // AreAdditionalItemsReady: `restore` is field 2 and the items field 3; the action needs both.
    let mut ria = RiaV2::new(c.clone());
    let ready = |items: Vec<ResourceIdentifier>| v2::RestoreItemActionItemsReadyRequest {
        plugin: format!("{T}restore-v2"),
        restore: restore(),
        additional_items: items,
    };
    assert!(
        !ria.are_additional_items_ready(ready(answer.additional_items.clone()))
            .await
            .unwrap()
            .into_inner()
            .ready
    );
    assert!(
        ria.are_additional_items_ready(ready(vec![id("", "configmaps", "shop", "cm")]))
            .await
            .unwrap()
            .into_inner()
            .ready
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c13_progress_is_always_set_and_unknown_operations_fail() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let mut bia = BiaV2::new(c.clone());
    let mut ria = RiaV2::new(c.clone());
    let long = annotated_configmap("cm", &[("duration-ms", "3600000")]);
    let op = bia
        .execute(v2::ExecuteRequest {
            plugin: format!("{T}backup-v2"),
            item: long.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .operation_id;
    let progress = bia
        .progress(v2::BackupItemActionProgressRequest {
            plugin: format!("{T}backup-v2"),
            operation_id: op.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .expect("progress is always set");
    assert!(!progress.completed);
    assert_eq!(
        (progress.n_total, progress.operation_units.as_str()),
        (3_600_000, "milliseconds")
    );
    let (started, updated) = (progress.started.unwrap(), progress.updated.unwrap());
    assert!(
        started.seconds > 1_700_000_000 && updated.seconds >= started.seconds,
        "{started:?} {updated:?}"
    );
    assert_eq!(
        started.seconds.to_string(),
        op.split('-').nth(1).unwrap(),
        "started is the operation's own start"
    );

    // Not started yet: Go's zero time, which Velero reads as unset (a missing time would read as 1970).
    let future = "op-99999999999-0-1000".to_string();
    let progress = bia
        .progress(v2::BackupItemActionProgressRequest {
            plugin: format!("{T}backup-v2"),
            operation_id: future,
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    assert_eq!(
        (progress.started, progress.updated),
        (Some(GO_ZERO_TIME), Some(GO_ZERO_TIME))
    );

    let bogus = bia
        .progress(v2::BackupItemActionProgressRequest {
            plugin: format!("{T}backup-v2"),
            operation_id: "nonsense".into(),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (bogus.code(), bogus.message()),
        (Code::Unknown, "operation ID nonsense is invalid")
    );
    let bogus = ria
        .progress(v2::RestoreItemActionProgressRequest {
            plugin: format!("{T}restore-v2"),
            operation_id: "nonsense".into(),
            restore: restore(),
        })
        .await
        .unwrap_err();
    assert_eq!(bogus.message(), "operation ID nonsense is invalid");

    // Cancel answers (OK for a known operation, an error for a bogus one) and never hangs.
    let cancel = |operation_id: &str| v2::BackupItemActionCancelRequest {
        plugin: format!("{T}backup-v2"),
        operation_id: operation_id.into(),
        backup: backup(),
    };
    let guard = Duration::from_secs(30);
    assert!(tokio::time::timeout(guard, bia.cancel(cancel(&op)))
        .await
        .unwrap()
        .is_ok());
    assert!(tokio::time::timeout(guard, bia.cancel(cancel("nonsense")))
        .await
        .unwrap()
        .is_err());
    let cancel = v2::RestoreItemActionCancelRequest {
        plugin: format!("{T}restore-v2"),
        operation_id: op.clone(),
        restore: restore(),
    };
    assert!(tokio::time::timeout(guard, ria.cancel(cancel))
        .await
        .unwrap()
        .is_ok());
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c14_a_new_process_answers_progress_for_an_operation_of_an_old_one() {
    let first = start(ARGS_1_15, &[]);
    let c = first.channel().await;
    let quick = annotated_configmap("cm", &[("duration-ms", "1")]);
    let backup_op = BiaV2::new(c.clone())
        .execute(v2::ExecuteRequest {
            plugin: format!("{T}backup-v2"),
            item: quick.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .operation_id;
    let restore_op = RiaV2::new(c.clone())
        .execute(v2::RestoreItemActionExecuteRequest {
            plugin: format!("{T}restore-v2"),
            item: quick.clone(),
            restore: restore(),
            item_from_backup: quick,
        })
        .await
        .unwrap()
        .into_inner()
        .operation_id;
    drop(c);
    first.shutdown().await;

    let second = start(ARGS_1_15, &[]);
    let c = second.channel().await;
    let progress = BiaV2::new(c.clone())
        .progress(v2::BackupItemActionProgressRequest {
            plugin: format!("{T}backup-v2"),
            operation_id: backup_op.clone(),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    assert!(
        progress.completed && progress.err.is_empty(),
        "{progress:?}"
    );
    assert_eq!(
        progress.started.unwrap().seconds.to_string(),
        backup_op.split('-').nth(1).unwrap()
    );
    let progress = RiaV2::new(c)
        .progress(v2::RestoreItemActionProgressRequest {
            plugin: format!("{T}restore-v2"),
            operation_id: restore_op,
            restore: restore(),
        })
        .await
        .unwrap()
        .into_inner()
        .progress
        .unwrap();
    assert!(progress.completed, "{progress:?}");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c15_sixteen_calls_run_at_once_on_one_connection_and_processes_coexist() {
    let plugin = start(ARGS_1_15, &[]);
    let other = start(ARGS_1_15, &[]);
    assert_ne!(plugin.socket, other.socket);
    let c = plugin.channel().await;
    let calls = (0..16).map(|i| {
        let c = c.clone();
        tokio::spawn(async move {
            let item = annotated_configmap(&format!("cm-{i}"), &[("sleep-ms", "1500")]);
            bia_v1(&c, &format!("{T}backup-v1"), item, backup()).await
        })
    });
    let mut spans = Vec::new();
    for (i, call) in join_all(calls).await.into_iter().enumerate() {
        let answer = call.unwrap().unwrap_or_else(|e| panic!("call {i}: {e}"));
        let item: Value = serde_json::from_slice(&answer.item).unwrap();
        assert_eq!(item["metadata"]["name"], format!("cm-{i}"));
        let at = |key: &str| {
            item["metadata"]["annotations"][format!("{T}{key}")]
                .as_str()
                .unwrap()
                .parse::<i128>()
                .unwrap()
        };
        spans.push((at("started"), at("finished")));
    }
    // Every call had started before any had finished: all sixteen were in flight together.
    let last_start = spans.iter().map(|s| s.0).max().unwrap();
    let first_finish = spans.iter().map(|s| s.1).min().unwrap();
    assert!(
        last_start < first_finish,
        "calls ran one after another: {spans:?}"
    );
    // The second process serves too.
    assert!(!other.list().await.is_empty());
    other.shutdown().await;
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c16_requests_of_64_mib_are_accepted() {
    let plugin = start(ARGS_1_15, &[]);
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "shop"}, "data": {"blob": "x".repeat(64 << 20)}})
        .to_string()
        .into_bytes();
    assert!(big.len() > 64 << 20);
    let answer = bia_v1(
        &plugin.channel().await,
        &format!("{T}backup-v1"),
        big.clone(),
        backup(),
    )
    .await
    .unwrap();
    assert!(answer.item == big, "the 64 MiB item comes back unchanged");
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c17_guest_errors_and_panics_become_statuses_and_serving_goes_on() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let panic = bia_v1(&c, &format!("{T}trap"), configmap("cm"), backup())
        .await
        .unwrap_err();
    assert_eq!(panic.code(), Code::Aborted);
    assert!(
        panic.message().contains(
            "module misbehave, action test.velero-wasm.io/trap on item configmaps shop/cm: trapped"
        ),
        "{}",
        panic.message()
    );
    assert!(
        panic.message().contains("deliberate panic in trap"),
        "{}",
        panic.message()
    );
    let refused = DeleteItemActionClient::new(c.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: format!("{T}delete"),
            item: annotated_configmap("cm", &[("refuse-delete", "")]),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (refused.code(), refused.message()),
        (
            Code::Unknown,
            "refusing to delete cm: it is annotated test.velero-wasm.io/refuse-delete"
        )
    );
    for action in ["malformed-output", "kindless-output", "exit"] {
        let status = bia_v1(&c, &format!("{T}{action}"), configmap("cm"), backup())
            .await
            .unwrap_err();
        assert!(
            status.message().starts_with("module misbehave, action"),
            "{action}: {}",
            status.message()
        );
    }
    assert!(DeleteItemActionClient::new(c.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: format!("{T}delete"),
            item: configmap("cm"),
            backup: backup()
        })
        .await
        .is_ok());
    assert!(
        bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
            .await
            .is_ok()
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c18_a_guest_that_never_returns_is_stopped_at_its_deadline() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    for action in ["loop", "sleep"] {
        let status = bia_v1(&c, &format!("{T}{action}"), configmap("cm"), backup())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unknown);
        assert!(
            status
                .message()
                .ends_with("did not finish within its deadline of 2s"),
            "{action}: {}",
            status.message()
        );
    }
    assert!(
        bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
            .await
            .is_ok()
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_clear_errors_and_serving_goes_on() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let action = format!("{T}backup-v1");
    let cases: Vec<(Vec<u8>, Vec<u8>, &str)> = vec![
        (
            Vec::new(),
            backup(),
            "item: is empty (unexpected end of JSON input)",
        ),
        (
            b"{\"kind\": \"ConfigMap\", ".to_vec(),
            backup(),
            "item: not valid JSON: EOF while parsing",
        ),
        (
            b"null".to_vec(),
            backup(),
            "item: must be a JSON object, got 'null'",
        ),
        (
            b"{\"metadata\":{\"name\":\"x\"}}".to_vec(),
            backup(),
            "item: Object 'Kind' is missing in '{\"metadata\":{\"name\":\"x\"}}'",
        ),
        (
            configmap("cm"),
            Vec::new(),
            "backup: is empty (unexpected end of JSON input)",
        ),
        (
            configmap("cm"),
            b"[]".to_vec(),
            "backup: must be a JSON object",
        ),
    ];
    for (item, backup, expected) in cases {
        let status = bia_v1(&c, &action, item, backup).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{expected}");
        assert!(
            status.message().starts_with(expected),
            "{expected:?} vs {:?}",
            status.message()
        );
    }
    let unknown = bia_v1(&c, "example.io/nope", configmap("cm"), backup())
        .await
        .unwrap_err();
    assert!(unknown.message().contains("example.io/nope was not found"));
    let empty_restore = RiaV1::new(c.clone())
        .execute(g::RestoreItemActionExecuteRequest {
            plugin: format!("{T}restore-v1"),
            item: configmap("cm"),
            restore: restore(),
            item_from_backup: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        empty_restore.message(),
        "itemFromBackup: is empty (unexpected end of JSON input)"
    );
    assert!(
        bia_v1(&c, &action, configmap("cm"), backup()).await.is_ok(),
        "still serving"
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c19_every_stderr_line_is_an_hclog_json_object_velero_can_read() {
    let plugin = start(&["--log-level", "trace"], &[]);
    let c = plugin.channel().await;
    let _ = bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
        .await
        .unwrap();
    for action in ["log", "trap", "stdout", "forbidden-kube"] {
        let _ = bia_v1(&c, &format!("{T}{action}"), configmap("cm"), backup()).await;
    }
    let _ = bia_v1(&c, "example.io/nope", configmap("cm"), backup()).await;
    drop(c);
    let session = plugin.shutdown().await;
    let lines = session.log_lines();
    assert!(lines.len() > 10, "{}", session.stderr);
    // The guest's info line names the action and the item, and carries its own field.
    let guest = lines
        .iter()
        .find(|l| l["@message"] == "backing up")
        .expect("the guest's line");
    assert_eq!(guest["@level"], "info");
    assert_eq!(guest["action"], format!("{T}backup-v1"));
    assert_eq!(
        (
            guest["resource"].as_str(),
            guest["namespace"].as_str(),
            guest["name"].as_str()
        ),
        (Some("configmaps"), Some("shop"), Some("cm"))
    );
    assert_eq!(guest["step"], "inspect");
    // misbehave/log writes one line at each level; they keep their levels.
    for level in ["debug", "info", "warn", "error"] {
        assert!(
            lines
                .iter()
                .any(|l| l["@message"] == format!("{level} line") && l["@level"] == level),
            "{level}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn c20_the_log_level_follows_the_flag_in_both_forms() {
    let levels = |args: &'static [&'static str]| async move {
        let plugin = start(args, &[]);
        let c = plugin.channel().await;
        let _ = bia_v1(&c, &format!("{T}log"), configmap("cm"), backup())
            .await
            .unwrap();
        let _ = bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
            .await
            .unwrap();
        drop(c);
        let session = plugin.shutdown().await;
        session
            .log_lines()
            .iter()
            .map(|l| l["@level"].as_str().unwrap().to_string())
            .collect::<BTreeSet<String>>()
    };
    assert_eq!(
        levels(&["--restore-only", "--log-level=error"]).await,
        set(&["error"])
    );
    assert_eq!(
        levels(&["--log-level", "warning", "--foo"]).await,
        set(&["warn", "error"])
    );
    assert_eq!(
        levels(&["--uploader-type=kopia"]).await,
        set(&["info", "warn", "error"]),
        "info by default"
    );
    assert_eq!(
        levels(&["--log-level=debug"]).await,
        set(&["debug", "info", "warn", "error"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn c21_shutdown_exits_0_at_once_and_removes_the_socket_even_with_a_call_in_flight() {
    let plugin = start(ARGS_1_15, &[]);
    let c = plugin.channel().await;
    let in_flight = tokio::spawn({
        let c = c.clone();
        async move {
            bia_v1(
                &c,
                &format!("{T}backup-v1"),
                annotated_configmap("cm", &[("sleep-ms", "60000")]),
                backup(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!in_flight.is_finished());
    let (status, elapsed, session) = plugin.shutdown_and_wait().await;
    assert_eq!(status.code(), Some(0), "{}", session.stderr);
    assert!(
        elapsed < Duration::from_secs(2),
        "Velero kills a plugin that is still running 2 s after Shutdown: {elapsed:?}"
    );
    assert!(!session.socket.exists(), "the socket file is removed");
    assert_eq!(
        std::fs::read_dir(&session.socket_dir).unwrap().count(),
        0,
        "nothing is left in the socket directory"
    );
    assert!(
        in_flight.await.unwrap().is_err(),
        "the call in flight is abandoned"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_the_plugin_and_removes_the_socket() {
    let mut plugin = start(ARGS_1_15, &[]);
    let pid = plugin.child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = plugin
        .wait(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert_eq!(status.code(), Some(0));
    assert!(!plugin.socket.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn call_metrics_reach_an_otlp_collector_when_the_plugin_shuts_down() {
    let collector = Loopback::start(|_| Reply::new(200, "")).await;
    let endpoint = collector.origin();
    // No periodic export within the test: what arrives was flushed on the way out.
    let plugin = start(
        ARGS_1_15,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_METRIC_EXPORT_INTERVAL", "3600000"),
        ],
    );
    let c = plugin.channel().await;
    for _ in 0..2 {
        bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
            .await
            .unwrap();
    }
    for action in ["trap", "forbidden-kube", "memory-bomb", "loop"] {
        bia_v1(&c, &format!("{T}{action}"), configmap("cm"), backup())
            .await
            .unwrap_err();
    }
    DeleteItemActionClient::new(c.clone())
        .execute(g::DeleteItemActionExecuteRequest {
            plugin: format!("{T}delete"),
            item: annotated_configmap("cm", &[("refuse-delete", "")]),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert!(collector.received().is_empty(), "nothing before the exit");
    drop(c);
    let session = plugin.shutdown().await;

    let exports = otlp_exports(&collector);
    assert_eq!(
        exports.len(),
        1,
        "one export, at shutdown: {}",
        session.stderr
    );
    let export = &exports[0];
    assert_eq!(export.resource["service.name"], "velero-wasm");
    assert_eq!(export.resource["service.instance.id"].len(), 36);
    let calls = |action: &str| {
        export.sum(
            "velero_wasm.action.calls",
            &[("action", &format!("{T}{action}"))],
        )
    };
    assert_eq!(calls("backup-v1"), 2);
    assert_eq!(
        export.sum(
            "velero_wasm.action.calls",
            &[
                ("module", "misbehave"),
                ("action", &format!("{T}trap")),
                ("call", "Execute")
            ]
        ),
        1
    );
    assert_eq!(
        export.sum(
            "velero_wasm.action.failures",
            &[("action", &format!("{T}backup-v1"))]
        ),
        0
    );
    for (action, kind) in [
        ("trap", "trap"),
        ("forbidden-kube", "denied"),
        ("memory-bomb", "memory"),
        ("loop", "deadline"),
        ("delete", "action"),
    ] {
        let failures = |k: &str| {
            export.sum(
                "velero_wasm.action.failures",
                &[("action", &format!("{T}{action}")), ("kind", k)],
            )
        };
        assert_eq!((action, failures(kind)), (action, 1));
        assert_eq!(
            export.sum(
                "velero_wasm.action.failures",
                &[("action", &format!("{T}{action}"))]
            ),
            1,
            "{action}: one failure, of one kind"
        );
    }
    let (count, seconds) =
        export.histogram("velero_wasm.action.duration", &format!("{T}backup-v1"));
    assert_eq!(count, 2);
    assert!(seconds > 0.0);
    let (count, seconds) = export.histogram("velero_wasm.action.duration", &format!("{T}loop"));
    assert_eq!(count, 1);
    assert!(
        seconds >= 2.0,
        "the loop ran until its 2 s deadline: {seconds}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_also_sends_the_last_metrics() {
    let collector = Loopback::start(|_| Reply::new(200, "")).await;
    let endpoint = format!("{}/custom/metrics", collector.origin());
    let mut plugin = start(
        ARGS_1_15,
        &[
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &endpoint),
            ("OTEL_METRIC_EXPORT_INTERVAL", "3600000"),
        ],
    );
    let c = plugin.channel().await;
    bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
        .await
        .unwrap();
    drop(c);
    let pid = plugin.child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = plugin
        .wait(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert_eq!(status.code(), Some(0));
    let received = collector.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].target, "/custom/metrics",
        "the metrics endpoint is used as given"
    );
    let export = &otlp_exports(&collector)[0];
    assert_eq!(
        export.sum(
            "velero_wasm.action.calls",
            &[("action", &format!("{T}backup-v1"))]
        ),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_that_cannot_load_is_logged_and_left_out() {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(modules_dir()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    std::fs::write(dir.path().join("broken.wasm"), b"not wasm").unwrap();
    std::fs::write(
        dir.path().join("broken.toml"),
        format!(
            "sha256 = \"{}\"\n",
            velero_wasm::modules::sha256_hex(b"not wasm")
        ),
    )
    .unwrap();
    let plugin = start(
        ARGS_1_15,
        &[("VELERO_WASM_MODULES", dir.path().to_str().unwrap())],
    );
    assert_eq!(plugin.listed().await, catalog());
    let session = plugin.shutdown().await;
    let errors: Vec<String> = session
        .log_lines()
        .iter()
        .filter(|l| l["@level"] == "error")
        .map(|l| l["@message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("module broken")
            && errors[0].contains("not a valid WebAssembly component"),
        "{}",
        errors[0]
    );
}

#[tokio::test]
async fn an_action_velero_listed_whose_module_was_removed_does_nothing_until_velero_restarts() {
    // Velero lists plugins once, when its pod starts; every backup then asks for every listed action.
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for file in ["kinds.wasm", "kinds.toml"] {
        std::fs::copy(modules_dir().join(file), dir.path().join(file)).unwrap();
    }
    let env = [
        ("VELERO_WASM_MODULES", dir.path().to_str().unwrap()),
        ("VELERO_WASM_STATE_DIR", state.path().to_str().unwrap()),
    ];
    let discovery = start(ARGS_1_15, &env);
    let listed = discovery.list().await;
    assert!(listed.iter().any(|p| p.name == format!("{T}backup-v1")));
    discovery.shutdown().await;

    // The operator removes the module from the ConfigMap; the next backup starts a new process.
    for file in ["kinds.wasm", "kinds.toml"] {
        std::fs::remove_file(dir.path().join(file)).unwrap();
    }
    let plugin = start(ARGS_1_15, &env);
    let c = plugin.channel().await;
    let selector = BiaV1::new(c.clone())
        .applies_to(g::BackupItemActionAppliesToRequest {
            plugin: format!("{T}backup-v1"),
        })
        .await
        .expect("a listed action is still answered")
        .into_inner()
        .resource_selector
        .unwrap();
    assert_eq!(
        selector.included_resources,
        [velero_wasm::plugin::dispatch::RETIRED_RESOURCE]
    );
    let item = configmap("cm");
    let answer = bia_v1(&c, &format!("{T}backup-v1"), item.clone(), backup())
        .await
        .unwrap();
    assert_eq!((answer.item, answer.additional_items), (item, vec![]));
    let ready = RiaV2::new(c.clone())
        .are_additional_items_ready(v2::RestoreItemActionItemsReadyRequest {
            plugin: format!("{T}restore-v2"),
            additional_items: vec![id("", "configmaps", "shop", "pending-x")],
            restore: restore(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ready.ready);
    let progress = BiaV2::new(c.clone())
        .progress(v2::BackupItemActionProgressRequest {
            plugin: format!("{T}backup-v2"),
            operation_id: "op-1700000000-0-1000".into(),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert!(
        progress
            .message()
            .contains("no module provides this action any more"),
        "{}",
        progress.message()
    );
    // A name Velero never listed, or a listed name under another kind, is still unknown.
    for (name, kind) in [("example.io/never", "v1"), ("restore-v1", "backup v1")] {
        let name = if name.contains('/') {
            name.to_string()
        } else {
            format!("{T}{name}")
        };
        let e = BiaV1::new(c.clone())
            .applies_to(g::BackupItemActionAppliesToRequest { plugin: name })
            .await
            .unwrap_err();
        assert!(
            e.message().contains("was not found"),
            "{kind}: {}",
            e.message()
        );
    }
    let session = plugin.shutdown().await;
    assert!(
        session.log_lines().iter().any(|l| l["@level"] == "warn"
            && l["@message"].as_str().unwrap().contains(&format!(
                "{T}backup-v1 was listed to Velero but no module provides it any more"
            ))),
        "{}",
        session.stderr
    );

    // Velero restarts: its discovery no longer lists the action, and from then on it is unknown.
    let discovery = start(ARGS_1_15, &env);
    assert!(!discovery.list().await.iter().any(|p| p.name.starts_with(T)));
    discovery.shutdown().await;
    let plugin = start(ARGS_1_15, &env);
    let e = BiaV1::new(plugin.channel().await)
        .applies_to(g::BackupItemActionAppliesToRequest {
            plugin: format!("{T}backup-v1"),
        })
        .await
        .unwrap_err();
    assert!(e.message().contains("was not found"), "{}", e.message());
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_stock_modules_velero_wasm_stock_names_are_registered() {
    // kubevirt alone: its actions, none of hcp's (which would clash with OADP's hypershift plugin).
    let plugin = Plugin::start_as(binary(), ARGS_1_15, &[("VELERO_WASM_STOCK", "kubevirt")]);
    let listed = plugin.listed().await;
    assert_eq!(listed, actions_json(&["--stock", "kubevirt"]));
    assert!(!listed.is_empty());
    assert!(
        listed
            .iter()
            .all(|(_, name)| name.starts_with("kubevirt-velero-plugin/")),
        "{listed:?}"
    );
    let session = plugin.shutdown().await;
    let started = session
        .log_lines()
        .into_iter()
        .find(|l| l["@message"] == "serving Velero's plugin protocol")
        .unwrap();
    assert_eq!(started["stock"], "kubevirt");

    // none, with a module directory: only the directory's actions.
    let plugin = start(ARGS_1_15, &[("VELERO_WASM_STOCK", "none")]);
    let listed = plugin.listed().await;
    assert!(!listed.is_empty());
    assert!(
        listed.iter().all(|(_, name)| name.starts_with(T)),
        "{listed:?}"
    );
    assert_eq!(
        listed,
        actions_json(&[
            "--stock",
            "none",
            "--modules",
            modules_dir().to_str().unwrap()
        ])
    );
    plugin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_stock_module_is_an_error_line_and_the_plugin_serves_the_known_ones() {
    let plugin = Plugin::start_as(
        binary(),
        ARGS_1_15,
        &[("VELERO_WASM_STOCK", "hpc,kubevirt")],
    );
    assert_eq!(
        plugin.listed().await,
        actions_json(&["--stock", "kubevirt"])
    );
    let session = plugin.shutdown().await;
    let errors: Vec<String> = session
        .log_lines()
        .iter()
        .filter(|l| l["@level"] == "error")
        .map(|l| l["@message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("VELERO_WASM_STOCK: unknown stock module \"hpc\": the stock modules are agent, hcp, kubevirt, signing"),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].ends_with("loading only kubevirt"),
        "{}",
        errors[0]
    );
}

#[tokio::test]
async fn an_action_that_moved_between_v1_and_v2_is_still_served_under_the_kind_velero_knows() {
    // An update of the module (a setting, like hcp's etcd-wait) makes backup-v1 a v2 action and
    // backup-v2 a v1 action, while Velero still knows them as it listed them at its start.
    let dir = tempfile::tempdir().unwrap();
    support::add_module(
        dir.path(),
        "kinds",
        "kinds",
        "[settings]\nswap-backup-versions = \"true\"\n",
    );
    let plugin = start(
        ARGS_1_15,
        &[("VELERO_WASM_MODULES", dir.path().to_str().unwrap())],
    );
    let listed = plugin.listed().await;
    assert!(listed.contains(&("BackupItemActionV2".to_string(), format!("{T}backup-v1"))));
    let c = plugin.channel().await;

    // Velero's v1 service still runs backup-v1 (now v2): same selector, same answer.
    let selector = BiaV1::new(c.clone())
        .applies_to(g::BackupItemActionAppliesToRequest {
            plugin: format!("{T}backup-v1"),
        })
        .await
        .unwrap()
        .into_inner()
        .resource_selector
        .unwrap();
    assert_eq!(selector.included_resources, ["configmaps", "pods"]);
    let answer = bia_v1(&c, &format!("{T}backup-v1"), configmap("cm"), backup())
        .await
        .unwrap();
    assert_eq!(answer.additional_items.len(), 2);

    // Velero's v2 service still runs backup-v2 (now v1), operation and all.
    let op = BiaV2::new(c.clone())
        .execute(v2::ExecuteRequest {
            plugin: format!("{T}backup-v2"),
            item: configmap("cm"),
            backup: backup(),
        })
        .await
        .unwrap()
        .into_inner()
        .operation_id;
    assert!(op.starts_with("op-"), "{op}");

    // A v1 service cannot pass an operation on: refused, saying what to do.
    let e = bia_v1(&c, &format!("{T}backup-v2"), configmap("cm"), backup())
        .await
        .unwrap_err();
    assert!(
        e.message()
            .contains("started the asynchronous operation op-")
            && e.message().contains("restart Velero"),
        "{}",
        e.message()
    );
    plugin.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------
// The OTLP collector's side: what the plugin exported, decoded from protobuf.

/// One decoded export: the resource's attributes and every data point.
struct OtlpExport {
    resource: std::collections::BTreeMap<String, String>,
    /// (metric name, attributes, point) for every data point.
    points: Vec<(String, Attributes, Point)>,
}

/// A data point's attributes as (key, value) text.
type Attributes = BTreeSet<(String, String)>;

enum Point {
    Sum(i64, i32),
    Histogram(u64, f64, i32),
}

impl OtlpExport {
    /// The sum of the counter `metric` over the points whose attributes include `having`; every
    /// point must be cumulative.
    fn sum(&self, metric: &str, having: &[(&str, &str)]) -> i64 {
        self.matching(metric, having)
            .map(|p| match p {
                Point::Sum(value, temporality) => {
                    assert_eq!(*temporality, 2, "cumulative");
                    *value
                }
                Point::Histogram(..) => panic!("{metric} is a histogram"),
            })
            .sum()
    }

    /// The count and the sum (seconds) of the histogram `metric` for `action`.
    fn histogram(&self, metric: &str, action: &str) -> (u64, f64) {
        self.matching(metric, &[("action", action)])
            .map(|p| match p {
                Point::Histogram(count, sum, temporality) => {
                    assert_eq!(*temporality, 2, "cumulative");
                    (*count, *sum)
                }
                Point::Sum(..) => panic!("{metric} is a counter"),
            })
            .fold((0, 0.0), |(c, s), (count, sum)| (c + count, s + sum))
    }

    fn matching<'a>(
        &'a self,
        metric: &'a str,
        having: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Point> + 'a {
        self.points
            .iter()
            .filter(move |(name, attributes, _)| {
                name == metric
                    && having
                        .iter()
                        .all(|(k, v)| attributes.contains(&(k.to_string(), v.to_string())))
            })
            .map(|(_, _, point)| point)
    }
}

/// Every export the collector received, checked to be OTLP/HTTP protobuf posts and decoded.
fn otlp_exports(collector: &Loopback) -> Vec<OtlpExport> {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
    use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
    use prost::Message;
    fn text(attributes: &[KeyValue]) -> impl Iterator<Item = (String, String)> + '_ {
        attributes.iter().map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
    }
    collector
        .received()
        .iter()
        .map(|r| {
            assert_eq!(r.method, "POST");
            assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
            let request = ExportMetricsServiceRequest::decode(r.bytes.as_slice()).unwrap();
            let mut export = OtlpExport {
                resource: Default::default(),
                points: Vec::new(),
            };
            for rm in &request.resource_metrics {
                if let Some(resource) = &rm.resource {
                    export.resource.extend(text(&resource.attributes));
                }
                for m in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                    match &m.data {
                        Some(metric::Data::Sum(sum)) => {
                            for p in &sum.data_points {
                                let value = match p.value {
                                    Some(number_data_point::Value::AsInt(v)) => v,
                                    other => panic!("{}: {other:?}", m.name),
                                };
                                let point = Point::Sum(value, sum.aggregation_temporality);
                                export.points.push((
                                    m.name.clone(),
                                    text(&p.attributes).collect(),
                                    point,
                                ));
                            }
                        }
                        Some(metric::Data::Histogram(h)) => {
                            for p in &h.data_points {
                                let point = Point::Histogram(
                                    p.count,
                                    p.sum.unwrap_or_default(),
                                    h.aggregation_temporality,
                                );
                                export.points.push((
                                    m.name.clone(),
                                    text(&p.attributes).collect(),
                                    point,
                                ));
                            }
                        }
                        other => panic!("{}: unexpected data {other:?}", m.name),
                    }
                }
            }
            export
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------------
// How the tests play Velero.

/// Starts the plugin as Velero does, with the test modules.
fn start(args: &[&str], env: &[(&str, &str)]) -> Plugin {
    start_as(binary(), args, env)
}

/// Starts the plugin with `argv[0]` = `arg0`, with the test modules.
fn start_as(arg0: &str, args: &[&str], env: &[(&str, &str)]) -> Plugin {
    let modules = modules_dir().display().to_string();
    let mut env = env.to_vec();
    if !env.iter().any(|(k, _)| *k == "VELERO_WASM_MODULES") {
        env.push(("VELERO_WASM_MODULES", &modules));
    }
    Plugin::start_as(arg0, args, &env)
}

/// A directory with the test components and their manifests (the misbehaving one with a 2 s deadline).
fn modules_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("plugin-protocol-modules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let built = Path::new(env!("VELERO_WASM_TEST_COMPONENTS"));
        for (name, limits) in [
            (
                "kinds",
                "timeout = \"90s\"\nmemory = \"1GiB\"\noutput = \"256MiB\"",
            ),
            ("misbehave", "timeout = \"2s\"\nmemory = \"64MiB\""),
        ] {
            let wasm = std::fs::read(built.join(format!("{name}.wasm"))).unwrap();
            std::fs::write(dir.join(format!("{name}.wasm")), &wasm).unwrap();
            let manifest = format!(
                "sha256 = \"{}\"\n[limits]\n{limits}\n",
                velero_wasm::modules::sha256_hex(&wasm)
            );
            std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
        }
        dir
    })
}

/// The actions `velero-wasm actions --json` reports for the same modules, as (Velero kind, name).
fn catalog() -> BTreeSet<(String, String)> {
    actions_json(&["--modules", modules_dir().to_str().unwrap()])
}

/// `velero-wasm actions --json` with `args`, as (Velero kind, name) pairs.
fn actions_json(args: &[&str]) -> BTreeSet<(String, String)> {
    let output = Run::cli(["actions", "--json"]).args(args).output();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    listing["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["veleroKind"].as_str().unwrap().to_string(),
                a["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn bia_v1(
    c: &Channel,
    plugin: &str,
    item: Vec<u8>,
    backup: Vec<u8>,
) -> Result<g::ExecuteResponse, tonic::Status> {
    BiaV1::new(c.clone())
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
        .execute(g::ExecuteRequest {
            plugin: plugin.to_string(),
            item,
            backup,
        })
        .await
        .map(|r| r.into_inner())
}

/// Calls a method no service provides, with an empty message; returns the status code.
async fn unimplemented_call(mut grpc: tonic::client::Grpc<Channel>, path: &'static str) -> Code {
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<g::Empty, g::Empty>::default();
    grpc.unary(
        tonic::Request::new(g::Empty {}),
        tonic::codegen::http::uri::PathAndQuery::from_static(path),
        codec,
    )
    .await
    .unwrap_err()
    .code()
}

/// Starts every future (spawning happens as the iterator is collected), then awaits them in order.
async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut out = Vec::new();
    for f in futures.collect::<Vec<_>>() {
        out.push(f.await);
    }
    out
}

fn configmap(name: &str) -> Vec<u8> {
    annotated_configmap(name, &[])
}

fn annotated_configmap(name: &str, annotations: &[(&str, &str)]) -> Vec<u8> {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("{T}{k}"), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "shop", "annotations": annotations}, "data": {"k": "v"}})
        .to_string()
        .into_bytes()
}

fn backup() -> Vec<u8> {
    json!({"metadata": {"name": "nightly", "namespace": "velero", "uid": "b-1"}, "spec": {"includedNamespaces": ["*"]}, "status": {"phase": "InProgress"}})
        .to_string()
        .into_bytes()
}

fn restore() -> Vec<u8> {
    json!({"metadata": {"name": "nightly-restore", "namespace": "velero"}, "spec": {"backupName": "nightly"}, "status": {"phase": "InProgress"}})
        .to_string()
        .into_bytes()
}

fn id(group: &str, resource: &str, namespace: &str, name: &str) -> ResourceIdentifier {
    ResourceIdentifier {
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn set(levels: &[&str]) -> BTreeSet<String> {
    levels.iter().map(|s| s.to_string()).collect()
}
