//! The runtime keeps serving whatever a module does: each misbehaviour fails its own call with an
//! error that names the module, the action and the item, and the next call on the same host succeeds.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use velero_wasm::action::{BackupRequest, ItemRef};
use velero_wasm::backend::Backend;
use velero_wasm::modules::{scan_directory, ModuleSource, Origin};
use velero_wasm::runtime::{CallError, Fault, Runtime};
use velero_wasm::FixtureCluster;
use velero_wasm::{Clock, Services};
use velero_wasm::{KubeAnswer, KubeCall, KubeError};

const MANIFEST: &str = r#"
[limits]
timeout = "1s"
memory = "32MiB"
output = "1MiB"

[[grant.kube]]
resources = ["configmaps"]
verbs = ["get", "create", "patch"]
namespaces = ["@item"]

[settings]
target = "settings"
"#;

const ITEM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"shop"},"data":{"k":"v"}}"#;

/// A backend that counts the calls that reach it.
struct Counting {
    inner: FixtureCluster,
    calls: AtomicUsize,
}

#[async_trait]
impl Backend<KubeCall> for Counting {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.call(call).await
    }
}

async fn host() -> (Runtime, Arc<Counting>, tempfile::TempDir) {
    let modules = support::module_dir("misbehave", "misbehave", MANIFEST);
    let cluster_dir = tempfile::tempdir().unwrap();
    let objects = support::write(
        cluster_dir.path(),
        "objects.json",
        r#"[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"shop"}},
            {"apiVersion":"v1","kind":"Secret","metadata":{"name":"credentials","namespace":"shop"}}]"#,
    );
    let backend = Arc::new(Counting {
        inner: FixtureCluster::load(&[objects], Clock::System).unwrap(),
        calls: AtomicUsize::new(0),
    });
    let runtime = Runtime::new(Services::new(
        backend.clone(),
        Clock::System,
        velero_wasm::Environment::from_config(&velero_wasm::config::Config::from_env()),
    ))
    .unwrap();
    let scan = scan_directory(modules.path(), None).unwrap();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert!(runtime.load_all(scan.modules).await.is_empty());
    (runtime, backend, modules)
}

fn item_ref() -> ItemRef {
    ItemRef::parse(ITEM).expect("the test item is an object")
}

fn request() -> BackupRequest {
    BackupRequest {
        item: ITEM.to_string(),
        backup: r#"{"metadata":{"name":"nightly","namespace":"velero"}}"#.to_string(),
    }
}

async fn call(
    runtime: &Runtime,
    case: &str,
) -> Result<velero_wasm::action::BackupOutcome, CallError> {
    let entry = runtime.resolve(&format!("test.velero-wasm.io/{case}"))?;
    runtime.backup(&entry, item_ref(), request()).await
}

async fn assert_still_serving(runtime: &Runtime) {
    let outcome = call(runtime, "echo")
        .await
        .expect("the host must keep serving");
    assert_eq!(
        outcome.item, ITEM,
        "an unchanged item is echoed byte for byte"
    );
    assert_eq!(outcome.additional_items[0].to_string(), "secrets shop/app");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_misbehaviour_fails_only_its_own_call() {
    let (runtime, _, _dir) = host().await;
    type IsExpected = fn(&Fault) -> bool;
    let cases: &[(&str, IsExpected, &str)] = &[
        (
            "trap",
            |f| matches!(f, Fault::Trap(_)),
            "panicked at tests/components/misbehave/src/lib.rs",
        ),
        (
            "loop",
            |f| matches!(f, Fault::Timeout(_)),
            "did not finish within its deadline of 1s",
        ),
        (
            "sleep",
            |f| matches!(f, Fault::Timeout(_)),
            "did not finish within its deadline of 1s",
        ),
        (
            "memory-bomb",
            |f| matches!(f, Fault::Memory { limit_mib: 32 }),
            "exceeded its memory limit of 32 MiB",
        ),
        (
            "huge-output",
            |f| matches!(f, Fault::Output(_)),
            "over its output limit of 1048576 bytes",
        ),
        (
            "malformed-output",
            |f| matches!(f, Fault::Output(_)),
            "an item that is not a JSON object",
        ),
        (
            "kindless-output",
            |f| matches!(f, Fault::Output(_)),
            "an item without a kind",
        ),
        (
            "exit",
            |f| matches!(f, Fault::Exit(_)),
            "exited with status",
        ),
    ];
    for (case, is_expected, text) in cases {
        let error = call(&runtime, case).await.expect_err(case);
        let message = error.to_string();
        match &error {
            CallError::Fault {
                module,
                action,
                item,
                fault,
            } => {
                assert!(is_expected(fault), "{case}: unexpected fault {fault:?}");
                assert_eq!(module, "misbehave");
                assert_eq!(action, &format!("test.velero-wasm.io/{case}"));
                assert_eq!(item, " on item configmaps shop/app");
            }
            other => panic!("{case}: expected a fault, got {other:?}"),
        }
        assert!(
            message.starts_with(&format!(
                "module misbehave, action test.velero-wasm.io/{case} on item configmaps shop/app: "
            )),
            "{message}"
        );
        assert!(message.contains(text), "{case}: {message}");
        assert_still_serving(&runtime).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outside_the_grant_is_denied_before_it_reaches_the_backend() {
    let (runtime, backend, _dir) = host().await;
    let error = call(&runtime, "forbidden-kube").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"kube: Error::Denied("permission denied: module misbehave is not granted get on secrets in namespace shop; the manifest rule that allows it: [[grant.kube]] resources = [\"secrets\"] verbs = [\"get\"] namespaces = [\"@item\"]")"#
    );
    assert_eq!(
        backend.calls.load(Ordering::SeqCst),
        0,
        "the denied call reached the backend"
    );

    let granted = call(&runtime, "granted-kube").await.unwrap();
    let item: Value = serde_json::from_str(&granted.item).unwrap();
    assert_eq!(
        item["metadata"]["annotations"]["test.velero-wasm.io/found"],
        "settings"
    );
    assert_eq!(backend.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_gets_a_fresh_instance() {
    let (runtime, _, _dir) = host().await;
    for _ in 0..3 {
        let outcome = call(&runtime, "counter").await.unwrap();
        let item: Value = serde_json::from_str(&outcome.item).unwrap();
        assert_eq!(
            item["metadata"]["annotations"]["test.velero-wasm.io/calls"],
            "1"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_side_by_side_while_one_hangs() {
    let (runtime, _, _dir) = host().await;
    let runtime = Arc::new(runtime);
    let hanging = {
        let runtime = runtime.clone();
        tokio::spawn(async move { call(&runtime, "loop").await })
    };
    let mut calls = Vec::new();
    for _ in 0..16 {
        let runtime = runtime.clone();
        calls.push(tokio::spawn(async move { call(&runtime, "echo").await }));
    }
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap().item, ITEM);
    }
    assert!(matches!(
        hanging.await.unwrap(),
        Err(CallError::Fault {
            fault: Fault::Timeout(_),
            ..
        })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_fails_to_load_leaves_the_last_good_one_in_service() {
    let (runtime, _, _dir) = host().await;
    let corrupt = ModuleSource::new(
        "misbehave",
        b"\0asm\x0d\0\x01\0garbage".to_vec(),
        "",
        Origin::File("corrupt/misbehave.wasm".into()),
    )
    .unwrap();
    let error = runtime.load(corrupt).await.unwrap_err().to_string();
    assert!(
        error.starts_with(
            "module misbehave (corrupt/misbehave.wasm): not a valid WebAssembly component"
        ),
        "{error}"
    );
    assert_still_serving(&runtime).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_actions_and_wrong_kinds_are_refused_by_name() {
    let (runtime, _, _dir) = host().await;
    let error = runtime.resolve("test.velero-wasm.io/nope").unwrap_err();
    assert_eq!(
        error.to_string(),
        "no loaded module provides an action named \"test.velero-wasm.io/nope\""
    );
    let echo = runtime.resolve("test.velero-wasm.io/echo").unwrap();
    let error = runtime
        .restore(
            &echo,
            item_ref(),
            velero_wasm::action::RestoreRequest {
                item: ITEM.into(),
                item_from_backup: ITEM.into(),
                restore: "{}".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "action test.velero-wasm.io/echo is a backup action: it has no restore call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_update_of_a_module_falls_back_to_its_last_good_version() {
    use velero_wasm::modules::LastGood;
    use velero_wasm::plan::{self, ModuleConfig};

    let modules = support::module_dir("misbehave", "misbehave", MANIFEST);
    let state = tempfile::tempdir().unwrap();
    let config = ModuleConfig {
        directory: Some(modules.path().to_path_buf()),
        last_good: Some(LastGood::at(state.path().join("last-good"))),
        ..ModuleConfig::default()
    };
    let fresh_runtime = || {
        Runtime::new(Services::new(
            Arc::new(velero_wasm::NoCluster::default()),
            Clock::System,
            velero_wasm::Environment::from_config(&velero_wasm::config::Config::from_env()),
        ))
        .unwrap()
    };

    // A good version loads and is remembered.
    let first = fresh_runtime();
    assert!(plan::load_modules(&first, &config)
        .await
        .unwrap()
        .is_empty());

    // The ConfigMap is updated with a module that does not load (its manifest pinned to it).
    let garbage = b"\0asm\x0d\0\x01\0truncated";
    std::fs::write(modules.path().join("misbehave.wasm"), garbage).unwrap();
    let sha: String = {
        use sha2::Digest;
        sha2::Sha256::digest(garbage)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    std::fs::write(
        modules.path().join("misbehave.toml"),
        format!("sha256 = \"{sha}\"\n{MANIFEST}"),
    )
    .unwrap();

    // The next host (a new plugin process) reports it and serves the last good version.
    let next = fresh_runtime();
    let problems = plan::load_modules(&next, &config).await.unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .message
            .contains("not a valid WebAssembly component"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0]
            .message
            .contains("serving its last good version"),
        "{}",
        problems[0]
    );
    assert_still_serving(&next).await;

    // Without a kept copy, the module is not served, and the problem says so.
    let forgetful = fresh_runtime();
    let problems = plan::load_modules(
        &forgetful,
        &ModuleConfig {
            directory: config.directory.clone(),
            ..ModuleConfig::default()
        },
    )
    .await
    .unwrap();
    assert!(
        problems[0]
            .message
            .contains("module misbehave is not served"),
        "{}",
        problems[0]
    );
    assert!(forgetful.action("test.velero-wasm.io/echo").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_modules_are_cached_and_a_damaged_cache_is_recompiled() {
    use velero_wasm::plan::{self, ModuleConfig};
    use velero_wasm::runtime::CompileCache;

    let modules = support::module_dir("misbehave", "misbehave", MANIFEST);
    let cache_dir = tempfile::tempdir().unwrap();
    let config = ModuleConfig {
        directory: Some(modules.path().to_path_buf()),
        ..ModuleConfig::default()
    };
    let host = || {
        Runtime::new(Services::new(
            Arc::new(velero_wasm::NoCluster::default()),
            Clock::System,
            velero_wasm::Environment::from_config(&velero_wasm::config::Config::from_env()),
        ))
        .unwrap()
        .with_compile_cache(CompileCache::open(cache_dir.path().join("compiled")))
    };
    assert!(plan::load_modules(&host(), &config)
        .await
        .unwrap()
        .is_empty());
    let sha: String = {
        use sha2::Digest;
        let wasm = std::fs::read(modules.path().join("misbehave.wasm")).unwrap();
        sha2::Sha256::digest(wasm)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let cached: Vec<_> = std::fs::read_dir(cache_dir.path().join("compiled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&sha) && name.ends_with(".cwasm")
        })
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    std::fs::write(&cached[0], b"damaged").unwrap();
    let next = host();
    assert!(plan::load_modules(&next, &config).await.unwrap().is_empty());
    assert_still_serving(&next).await;
    assert!(
        std::fs::metadata(&cached[0]).unwrap().len() > 1000,
        "the damaged artifact was replaced"
    );

    let shared = tempfile::tempdir().unwrap();
    let open = std::path::Path::new(shared.path()).join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(
        CompileCache::open(open).is_none(),
        "a directory others can write to is not trusted"
    );
}
