//! velero-wasm as a plugin under abuse: malformed and stalled requests, clients that never read,
//! running out of file descriptors, signals, a parent that dies, a permissive umask. Each test says
//! what a user sees: the bad call fails with a clear status and the process keeps serving (Health and
//! Execute still answer, new connections are accepted), or it stops cleanly and removes its socket.
//!
//! Timeouts here detect hangs ("answers within 10 s"); they are not speed targets.

use std::future::Future;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::UnixStream;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::{self as g};

use crate::support;

use support::plugin::{binary, Plugin};

/// What "answers" means in these tests: well within this, or the server is hung.
const ANSWER: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------------
// Streams that fail.

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_broker_message_followed_by_more_data_fails_the_stream_and_serving_goes_on() {
    let mut plugin = start();
    let (mut client, _connection) = raw_connection(&plugin.socket).await;
    let (response, mut upload) = client
        .send_request(grpc_request("/plugin.GRPCBroker/StartStream"), false)
        .unwrap();
    // A message whose protobuf cannot be decoded (its first key is a varint that never ends, which
    // the decoder rejects without consuming it), then more such messages.
    let malformed = grpc_frame(&[0xff; 16]);
    upload.send_data(malformed.clone(), false).unwrap();
    let more: Vec<u8> = malformed.iter().copied().cycle().take(64 << 10).collect();
    let flood = tokio::spawn(async move {
        for _ in 0..64 {
            if upload.send_data(Bytes::from(more.clone()), false).is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        upload
    });

    let (code, message) = within(ANSWER, "the broker stream ends", grpc_status(response)).await;
    assert_ne!(code, 0, "the stream fails: {message}");
    assert!(
        message.contains("plugin.GRPCBroker/StartStream"),
        "{message}"
    );

    answers_health_and_execute(&plugin).await;
    drop(flood.await);
    answers_health_and_execute(&plugin).await;
    stop_with(&mut plugin, "-TERM");
}

// ---------------------------------------------------------------------------------------------------
// Clients that hold resources.

#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_clients_that_stop_reading_cost_little_and_are_dropped_while_others_are_served()
{
    let mut plugin = start();
    let pid = plugin.child.0.id();
    let before = rss_kib(pid);
    // Each client reads the server's greeting, then starts an Execute announcing a 2 GiB message,
    // sends as much of it as the server's flow-control windows allow, and never reads again.
    let mut clients = Vec::new();
    for _ in 0..200 {
        clients.push(deaf_client(&plugin.socket).await);
    }
    let last_sent = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stalled = rss_kib(pid);
    println!(
        "RSS with 200 clients that stopped reading: {} MiB (before: {} MiB)",
        stalled / 1024,
        before / 1024
    );
    answers_health_and_execute(&plugin).await;
    assert!(
        stalled.saturating_sub(before) < 100 << 10,
        "200 clients that stopped reading hold {} MiB",
        (stalled - before) / 1024
    );

    // The server drops every one of them (their calls stall, then their connections stop answering
    // pings): each socket reaches its end.
    let limit = Duration::from_secs(60);
    for client in &mut clients {
        within(limit, "the server closes a stalled connection", async {
            let mut buf = vec![0u8; 64 << 10];
            while tokio::io::AsyncReadExt::read(client, &mut buf)
                .await
                .is_ok_and(|n| n > 0)
            {}
        })
        .await;
    }
    println!(
        "every stalled connection closed {:.1} s after its client last wrote; RSS now {} MiB",
        last_sent.elapsed().as_secs_f64(),
        rss_kib(pid) / 1024
    );
    answers_health_and_execute(&plugin).await;
    stop_with(&mut plugin, "-TERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_that_stalls_fails_with_deadline_exceeded_and_serving_goes_on() {
    let mut plugin = start();
    let pid = plugin.child.0.id();
    let (mut client, _connection) = raw_connection(&plugin.socket).await;
    let (response, mut upload) = client
        .send_request(grpc_request("/generated.BackupItemAction/Execute"), false)
        .unwrap();
    // Announces a message of 2 GiB − 1, sends 8 MiB of it, and stops.
    let mut start = vec![0u8];
    start.extend_from_slice(&(i32::MAX as u32).to_be_bytes());
    upload.send_data(Bytes::from(start), false).unwrap();
    for _ in 0..8 {
        upload
            .send_data(Bytes::from(vec![b' '; 1 << 20]), false)
            .unwrap();
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "RSS while 8 MiB of a 2 GiB message are held: {} MiB",
        rss_kib(pid) / 1024
    );
    answers_health_and_execute(&plugin).await;

    let limit = velero_wasm::plugin::upload::STALL_TIMEOUT + ANSWER;
    let (code, message) = within(limit, "the stalled call fails", grpc_status(response)).await;
    println!(
        "the stalled call failed after {:.1} s: {message}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(code, Code::DeadlineExceeded as i32, "{message}");
    assert!(message.contains("stalled"), "{message}");
    answers_health_and_execute(&plugin).await;
    drop(upload);
    stop_with(&mut plugin, "-TERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn six_clients_each_sending_150_mib_of_a_message_hold_at_most_the_process_budget() {
    use velero_wasm::plugin::upload::MAX_HELD;
    let mut plugin = start();
    let pid = plugin.child.0.id();
    let before = rss_kib(pid);
    // Six connections, each announcing a 2 GiB message and sending 150 MiB of it (with flow control:
    // each send waits for the window the server opens as it reads), then stopping.
    let mut uploads = Vec::new();
    for _ in 0..6 {
        let (mut client, connection) = raw_connection(&plugin.socket).await;
        let (response, mut upload) = client
            .send_request(grpc_request("/generated.BackupItemAction/Execute"), false)
            .unwrap();
        let sender = tokio::spawn(async move {
            let mut start = vec![0u8];
            start.extend_from_slice(&(i32::MAX as u32).to_be_bytes());
            let _ = upload.send_data(Bytes::from(start), false);
            let chunk = Bytes::from(vec![b' '; 1 << 20]);
            for _ in 0..150 {
                upload.reserve_capacity(chunk.len());
                let mut sent = 0;
                while sent < chunk.len() {
                    match std::future::poll_fn(|cx| upload.poll_capacity(cx)).await {
                        Some(Ok(n)) if n > 0 => {
                            let n = n.min(chunk.len() - sent);
                            if upload
                                .send_data(chunk.slice(sent..sent + n), false)
                                .is_err()
                            {
                                return upload;
                            }
                            sent += n;
                        }
                        Some(Ok(_)) => {}
                        _ => return upload,
                    }
                }
            }
            upload
        });
        let status = tokio::spawn(grpc_status(response));
        uploads.push((status, sender, client, connection));
    }
    // Every sender ends: it sent its 150 MiB, or its stream was refused.
    for (_, sender, _, _) in &mut uploads {
        within(Duration::from_secs(120), "an upload ends", sender)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut refused = 0;
    let mut statuses = Vec::new();
    for (status, _, _, _) in &mut uploads {
        if status.is_finished() {
            let (code, message) = status.await.unwrap();
            if code == Code::ResourceExhausted as i32 {
                refused += 1;
            }
            statuses.push(message);
        }
    }
    let held = rss_kib(pid);
    println!(
        "RSS with six 150 MiB partial messages: {} MiB (before: {} MiB; budget {} MiB); {refused} refused: {statuses:?}",
        held / 1024,
        before / 1024,
        MAX_HELD >> 20
    );
    assert!(refused >= 4, "{refused} of 6 refused: {statuses:?}");
    assert!(
        statuses
            .iter()
            .any(|m| m.contains("the most it holds across all calls")),
        "{statuses:?}"
    );
    // Without the budget all 900 MiB would be held; with it, what is held plus what the allocator
    // keeps of the refused streams' memory.
    assert!(
        held.saturating_sub(before) < ((MAX_HELD as u64) >> 10) + (256 << 10),
        "the six uploads hold {} MiB",
        (held - before) / 1024
    );
    answers_health_and_execute(&plugin).await;
    for (status, _, _, _) in &uploads {
        status.abort();
    }
    drop(uploads);
    stop_with(&mut plugin, "-TERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn forty_clients_that_never_read_8_mib_answers_hold_at_most_the_process_budget_until_dropped()
{
    use prost::Message;
    use velero_wasm::plugin::upload::{MAX_HELD, STALL_TIMEOUT};
    let mut plugin = start();
    let pid = plugin.child.0.id();
    // An Execute of an 8 MiB item, which the `kinds` action answers unchanged.
    let padding = "x".repeat(8 << 20);
    let item = format!(
        r#"{{"kind":"ConfigMap","metadata":{{"name":"big","namespace":"ns"}},"data":{{"pad":"{padding}"}}}}"#
    );
    let request = grpc_frame(
        &g::ExecuteRequest {
            plugin: "test.velero-wasm.io/backup-v1".into(),
            item: item.into_bytes(),
            backup: backup(),
        }
        .encode_to_vec(),
    );
    let execute = |socket: PathBuf, request: Bytes| async move {
        let (mut client, connection) = raw_connection(&socket).await;
        let (response, mut upload) = client
            .send_request(grpc_request("/generated.BackupItemAction/Execute"), false)
            .unwrap();
        upload.send_data(request, true).unwrap();
        (response, (upload, client, connection))
    };
    // Four calls read whole, so that what a call itself takes is in the baseline.
    for _ in 0..4 {
        let (response, _held) = execute(plugin.socket.clone(), request.clone()).await;
        let (code, message) = within(ANSWER, "a large Execute", grpc_status(response)).await;
        assert_eq!(code, 0, "{message}");
    }
    let before = rss_kib(pid);

    // Forty clients, one after the other: each sends its Execute whole, reads the answer's headers
    // and its first data, and never takes another byte. Without a bound each answer stays in memory.
    let (mut refused, mut held_open, mut messages) = (0, Vec::new(), Vec::new());
    for _ in 0..40 {
        let (response, connection) = execute(plugin.socket.clone(), request.clone()).await;
        let response = within(ANSWER, "an answer's headers", response)
            .await
            .expect("a response");
        let (parts, mut body) = response.into_parts();
        match within(ANSWER, "an answer's first data", body.data()).await {
            Some(first) => {
                first.expect("the answer's data");
                held_open.push((body, connection));
            }
            None => {
                // Refused while arriving (a trailers-only answer) or as an answer (in its trailers).
                let trailers = match parts.headers.contains_key("grpc-status") {
                    true => parts.headers,
                    false => body.trailers().await.unwrap().unwrap_or_default(),
                };
                let code = trailers.get("grpc-status").and_then(|c| c.to_str().ok());
                assert_eq!(code, Some("8"), "RESOURCE_EXHAUSTED: {trailers:?}");
                messages.push(percent_decode(
                    trailers.get("grpc-message").unwrap().to_str().unwrap(),
                ));
                refused += 1;
            }
        }
    }
    let held = rss_kib(pid);
    println!(
        "RSS with 40 unread 8 MiB answers: {} MiB (before: {} MiB; budget {} MiB); {refused} refused, {} held open: {:?}",
        held / 1024,
        before / 1024,
        MAX_HELD >> 20,
        held_open.len(),
        messages.first()
    );
    assert!(
        held_open.len() <= MAX_HELD / (8 << 20),
        "{} unread answers held",
        held_open.len()
    );
    assert!(refused >= 8, "{refused} of 40 refused");
    assert!(
        messages
            .iter()
            .all(|m| m.contains("the most it holds across all calls")),
        "{messages:?}"
    );
    assert!(
        held.saturating_sub(before) < ((MAX_HELD as u64) >> 10) + (192 << 10),
        "the unread answers hold {} MiB",
        (held - before) / 1024
    );
    answers_health_and_execute(&plugin).await;

    // Past the stall timeout the unread answers are dropped, with their clients still connected: a
    // large call fits in the budget again.
    tokio::time::sleep(STALL_TIMEOUT + Duration::from_secs(2)).await;
    let (response, _connection) = execute(plugin.socket.clone(), request.clone()).await;
    let (code, message) = within(ANSWER, "a large Execute", grpc_status(response)).await;
    assert_eq!(code, 0, "{message}");
    drop(held_open);
    stop_with(&mut plugin, "-TERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_file_descriptors_the_plugin_waits_without_spinning_and_serves_again() {
    // The child may open few files: a few dozen connections exhaust them. At debug level, so that
    // the end of the background compile can be seen.
    let modules = modules_dir().display().to_string();
    // SAFETY: between fork and exec the child only calls setrlimit, which is async-signal-safe.
    #[allow(unsafe_code)]
    let mut plugin = Plugin::start_with(
        binary(),
        &["--log-level", "debug"],
        &[("VELERO_WASM_MODULES", &modules)],
        |command| unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 96,
                    rlim_max: 96,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        },
    );
    // The modules load after the handshake and compile in the background after that: once both
    // are over, the CPU the plugin uses is what it does for the clients below.
    answers_health_and_execute(&plugin).await;
    let compiled = Instant::now();
    while !String::from_utf8_lossy(&plugin.stderr.lock().unwrap()).contains("modules compiled") {
        assert!(
            compiled.elapsed() < Duration::from_secs(300),
            "the background compile did not end in 300 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pid = plugin.child.0.id();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    assert!(open < 90, "the plugin needs {open} files before any client");
    let mut clients = Vec::new();
    for _ in 0..120 {
        clients.push(UnixStream::connect(&plugin.socket).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu_before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_ticks(pid) - cpu_before;
    println!(
        "CPU used in 3 s out of file descriptors: {} ticks of 1/100 s",
        spent
    );
    assert!(
        spent < 50,
        "the plugin used {spent} ticks of CPU in 3 s while out of file descriptors"
    );
    drop(clients);
    answers_health_and_execute(&plugin).await;
    stop_with(&mut plugin, "-TERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_megabyte_action_name_gets_a_short_not_found_status() {
    let mut plugin = start();
    let name = format!("test.velero-wasm.io/{}", "n".repeat(1 << 20));
    let status = BackupItemActionClient::new(plugin.channel().await)
        .max_encoding_message_size(usize::MAX)
        .execute(g::ExecuteRequest {
            plugin: name,
            item: br#"{"kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns"}}"#.to_vec(),
            backup: backup(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unknown, "{status:?}");
    let message = status.message();
    assert!(
        message.starts_with("BackupItemAction plugin: test.velero-wasm.io/nnn")
            && message.contains("… (1048596 bytes in all) was not found"),
        "{}",
        &message[..message.len().min(400)]
    );
    assert!(message.len() < 1024, "{} bytes", message.len());
    answers_health_and_execute(&plugin).await;
    stop_with(&mut plugin, "-TERM");
}

// ---------------------------------------------------------------------------------------------------
// Process lifecycle.

#[tokio::test(flavor = "multi_thread")]
async fn sighup_stops_the_plugin_cleanly_and_removes_the_socket() {
    let mut plugin = start();
    answers_health_and_execute(&plugin).await;
    stop_with(&mut plugin, "-HUP");
}

#[test]
fn a_plugin_whose_parent_died_stops_and_removes_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout");
    // An intermediate process starts the plugin in the background, says its pid, and waits; the
    // test then kills it as Velero could die.
    let mut sh = Command::new("sh");
    let mut parent = support::run::hermetic(&mut sh)
        .arg("-c")
        .arg(r#""$0" > "$1" 2>/dev/null </dev/null & echo $!; exec sleep 600"#)
        .arg(binary())
        .arg(&out)
        .env("VELERO_PLUGIN", "hello")
        .env("PLUGIN_PROTOCOL_VERSIONS", "2")
        .env("PLUGIN_UNIX_SOCKET_DIR", dir.path())
        .env("VELERO_WASM_MODULES", modules_dir())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pid = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
        &mut pid,
    )
    .unwrap();
    let pid: u32 = pid.trim().parse().unwrap();
    let socket = wait_for(ANSWER * 6, "the handshake line", || {
        let text = std::fs::read_to_string(&out).ok()?;
        let line = text.lines().next()?;
        Some(PathBuf::from(line.split('|').nth(3)?))
    });
    assert!(socket.exists());

    parent.kill().unwrap();
    parent.wait().unwrap();
    wait_for(ANSWER, "the orphaned plugin exits", || {
        (!running(pid)).then_some(())
    });
    assert!(!socket.exists(), "the socket is removed");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_socket_is_private_even_under_umask_000() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: between fork and exec the child only calls umask, which is async-signal-safe.
    #[allow(unsafe_code)]
    let mut plugin = start_adjusted(|command| unsafe {
        command.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    });
    let mode = std::fs::metadata(&plugin.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {:o}", mode & 0o777);
    answers_health_and_execute(&plugin).await;
    stop_with(&mut plugin, "-TERM");
}

// ---------------------------------------------------------------------------------------------------
// Every fault at once, under load.

/// The misbehaving module's cases, with what each call must give: `Some(true)` an answer,
/// `Some(false)` an error status, `None` either.
const FAULT_MATRIX: &[(&str, Option<bool>)] = &[
    ("echo", Some(true)),
    ("label", Some(true)),
    ("trail", Some(true)),
    ("log", Some(true)),
    ("stdout", Some(true)),
    ("granted-kube", Some(true)),
    ("list", Some(true)),
    ("log-fields", Some(true)),
    ("log-flood", Some(true)),
    ("trap", Some(false)),
    ("loop", Some(false)),
    ("sleep", Some(false)),
    ("memory-bomb", Some(false)),
    ("forbidden-kube", Some(false)),
    ("malformed-output", Some(false)),
    ("kindless-output", Some(false)),
    ("exit", Some(false)),
    ("kube-calls", Some(false)),
    ("field-selector", Some(false)),
    ("label-selector", Some(false)),
    ("huge-output", None),
];

#[tokio::test(flavor = "multi_thread")]
async fn under_eight_callers_and_stalled_clients_every_fault_fails_only_its_own_call_and_memory_returns_to_baseline(
) {
    const T: &str = "test.velero-wasm.io/";
    // The cluster: the ConfigMap `granted-kube` reads, and a few for `list`.
    let cluster = tempfile::tempdir().unwrap();
    let objects: Vec<String> = ["settings", "a", "b", "c"]
        .iter()
        .map(|name| format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"shop"}}}}"#))
        .collect();
    support::write(
        cluster.path(),
        "objects.json",
        &format!("[{}]", objects.join(",")),
    );
    let server = support::apiserver::ApiServer::start(&[cluster.path()]);
    let kubeconfig_dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let modules = support::module_dir(
        "misbehave",
        "misbehave",
        "[limits]\ntimeout = \"3s\"\nmemory = \"64MiB\"\ncapability-calls = 100\n\n[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\", \"list\"]\nnamespaces = [\"@item\"]\n\n[settings]\ntarget = \"settings\"\n",
    );
    let dir = modules.path().display().to_string();
    let mut plugin = Plugin::start_as(
        binary(),
        &["--log-level", "info"],
        &[
            ("VELERO_WASM_MODULES", &dir),
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
        ],
    );
    let pid = plugin.child.0.id();
    let item = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"},"data":{"k":"v"}}"#;
    let call = move |channel: tonic::transport::Channel,
                     case: &'static str,
                     expected: Option<bool>| async move {
        let action = format!("{T}{case}");
        let answer = within(
            ANSWER,
            &action,
            BackupItemActionClient::new(channel).execute(g::ExecuteRequest {
                plugin: action.clone(),
                item: item.to_vec(),
                backup: backup(),
            }),
        )
        .await;
        match (answer, expected) {
            (Ok(_), Some(false)) => panic!("{case}: answered, but it must fail"),
            (Err(status), Some(true)) => panic!("{case}: {}", status.message()),
            // The host's own errors name the module, the action and the item; an error the module
            // returns is its own text. Either way a short, clear status.
            (Err(status), _) => assert!(
                !status.message().is_empty() && status.message().len() < 4096,
                "{case}: {:?}",
                status.message()
            ),
            (Ok(_), _) => {}
        }
    };

    // Once each, alone: what the process holds when every path has been taken.
    let channel = plugin.channel().await;
    for (case, expected) in FAULT_MATRIX {
        call(channel.clone(), case, *expected).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = rss_kib(pid);

    // Eight callers, each through every case twice in its own order, while 16 clients stall uploads.
    let mut stalled = Vec::new();
    for _ in 0..16 {
        stalled.push(deaf_client(&plugin.socket).await);
    }
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(baseline));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut callers = Vec::new();
    for caller in 0..8 {
        let channel = plugin.channel().await;
        callers.push(tokio::spawn(async move {
            for round in 0..2 {
                for i in 0..FAULT_MATRIX.len() {
                    let (case, expected) =
                        FAULT_MATRIX[(i + caller * 3 + round) % FAULT_MATRIX.len()];
                    call(channel.clone(), case, expected).await;
                }
            }
        }));
    }
    for caller in callers {
        caller
            .await
            .expect("a caller saw a wrong answer (see above)");
    }
    sampler.abort();
    drop(stalled);
    let fresh = within(ANSWER, "a new connection", plugin.channel()).await;
    call(fresh, "echo", Some(true)).await;

    // What the calls and the stalled clients held is given back.
    let margin = 48 << 10;
    let settled = Instant::now();
    let mut after = rss_kib(pid);
    while after > baseline + margin && settled.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = rss_kib(pid);
    }
    println!(
        "fault matrix, 8 callers x {} calls + 16 stalled uploads: RSS baseline {} MiB, peak {} MiB, after {} MiB",
        2 * FAULT_MATRIX.len(),
        baseline / 1024,
        peak.load(std::sync::atomic::Ordering::Relaxed) / 1024,
        after / 1024
    );
    assert!(
        after <= baseline + margin,
        "RSS stays {} MiB above its baseline of {} MiB",
        (after - baseline) / 1024,
        baseline / 1024
    );
    stop_with(&mut plugin, "-TERM");
}

// ---------------------------------------------------------------------------------------------------
// How the tests play Velero and the attacker.

fn start() -> Plugin {
    start_adjusted(|_| {})
}

fn start_adjusted(adjust: impl FnOnce(&mut Command)) -> Plugin {
    let modules = modules_dir().display().to_string();
    Plugin::start_with(
        binary(),
        &["--log-level", "info"],
        &[("VELERO_WASM_MODULES", &modules)],
        adjust,
    )
}

/// A directory with the `kinds` test component (one action of every kind).
fn modules_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        support::module_dir(
            "kinds",
            "kinds",
            "[limits]\ntimeout = \"90s\"\nmemory = \"1GiB\"\noutput = \"256MiB\"\n",
        )
    })
    .path()
}

/// Health answers SERVING and an Execute answers, on a new connection, each within [`ANSWER`].
async fn answers_health_and_execute(plugin: &Plugin) {
    let channel = within(ANSWER, "a new connection", plugin.channel()).await;
    let health = within(
        ANSWER,
        "Health",
        HealthClient::new(channel.clone()).check(HealthCheckRequest {
            service: "plugin".into(),
        }),
    )
    .await
    .expect("Health answers");
    assert_eq!(health.into_inner().status, 1, "SERVING");
    let item = br#"{"kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns"}}"#.to_vec();
    let executed = within(
        ANSWER,
        "Execute",
        BackupItemActionClient::new(channel).execute(g::ExecuteRequest {
            plugin: "test.velero-wasm.io/backup-v1".into(),
            item: item.clone(),
            backup: backup(),
        }),
    )
    .await
    .expect("Execute answers");
    assert_eq!(executed.into_inner().item, item);
}

/// Sends `signal`; the plugin exits 0 and its socket is gone.
fn stop_with(plugin: &mut Plugin, signal: &str) {
    let pid = plugin.child.0.id().to_string();
    assert!(Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap()
        .success());
    let status = plugin
        .wait(ANSWER)
        .unwrap_or_else(|| panic!("the plugin exits on {signal}"));
    assert_eq!(status.code(), Some(0), "exit status after {signal}");
    assert!(!plugin.socket.exists(), "the socket is removed");
}

async fn within<F: Future>(limit: Duration, what: &str, future: F) -> F::Output {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?}"))
}

fn wait_for<T>(limit: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < until, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` is alive (an exited process not yet reaped counts as gone).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// User and system CPU time of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // Fields 14 and 15 of proc(5), counted after the command name (field 2).
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A client that reads the server's HTTP/2 greeting (SETTINGS and the connection window), starts
/// an Execute announcing a 2 GiB message, sends as much of it as the windows allow, and then never
/// reads: the returned socket is only read once the test wants to see it closed.
async fn deaf_client(socket: &Path) -> UnixStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    let mut stream = UnixStream::connect(socket).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    stream.write_all(&out).await.unwrap();

    // The server's SETTINGS (its stream window) and WINDOW_UPDATE (its connection window).
    let (mut stream_window, mut connection_window) = (65_535u32, 65_535u32);
    let mut settings_seen = false;
    let mut input = Vec::new();
    let greeting = tokio::time::timeout(Duration::from_secs(2), async {
        let mut buf = [0u8; 4096];
        loop {
            while input.len() >= 9 {
                let len = u32::from_be_bytes([0, input[0], input[1], input[2]]) as usize;
                if input.len() < 9 + len {
                    break;
                }
                let (kind, flags, payload) = (input[3], input[4], input[9..9 + len].to_vec());
                input.drain(..9 + len);
                if kind == 0x4 && flags & 1 == 0 {
                    for entry in payload.chunks(6) {
                        if entry[..2] == [0, 4] {
                            stream_window = u32::from_be_bytes(entry[2..6].try_into().unwrap());
                        }
                    }
                    settings_seen = true;
                } else if kind == 0x8 {
                    connection_window += u32::from_be_bytes(payload[..4].try_into().unwrap());
                    if settings_seen {
                        return;
                    }
                }
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "the server closed the connection during its greeting"
            );
            input.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(settings_seen, "the server sent its SETTINGS");
    drop(greeting);

    // SETTINGS ack, the request's headers (HPACK literals), then its data.
    let mut out = frame(0x4, 0x1, 0, &[]);
    let mut headers = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "unused"),
        (":path", "/generated.BackupItemAction/Execute"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        headers.push(0);
        headers.push(name.len() as u8);
        headers.extend_from_slice(name.as_bytes());
        headers.push(value.len() as u8);
        headers.extend_from_slice(value.as_bytes());
    }
    out.extend(frame(0x1, 0x4, 1, &headers));
    let mut data = vec![0u8];
    data.extend_from_slice(&(i32::MAX as u32).to_be_bytes());
    data.resize(stream_window.min(connection_window) as usize, b' ');
    for chunk in data.chunks(16 << 10) {
        out.extend(frame(0x0, 0, 1, chunk));
    }
    stream.write_all(&out).await.unwrap();
    stream
}

/// An HTTP/2 connection over the plugin's socket, driven in the background.
async fn raw_connection(
    socket: &Path,
) -> (h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>) {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let client = client.ready().await.unwrap();
    (client, driver)
}

fn grpc_request(path: &str) -> http::Request<()> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://unused{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// One gRPC message: uncompressed, with its length prefix.
fn grpc_frame(message: &[u8]) -> Bytes {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    Bytes::from(frame)
}

/// The grpc-status and grpc-message of a response (in its headers or its trailers), reading and
/// dropping its messages.
async fn grpc_status(response: h2::client::ResponseFuture) -> (i32, String) {
    let response = response.await.expect("a response");
    let (parts, mut body) = response.into_parts();
    let status_of = |headers: &http::HeaderMap| {
        let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
        let message = headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .map(percent_decode)
            .unwrap_or_default();
        Some((code, message))
    };
    if let Some(status) = status_of(&parts.headers) {
        return status;
    }
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("the body");
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
    status_of(&trailers).expect("a grpc-status")
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Backup as Velero sends it.
fn backup() -> Vec<u8> {
    br#"{"metadata":{"name":"nightly","namespace":"velero","uid":"b-1"},"spec":{}}"#.to_vec()
}
