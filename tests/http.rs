//! The `http` capability, exercised by a component (`tests/components/probe`) against a loopback
//! server: a module reaches exactly the origins its grant lists, within its size and time limits, and
//! every refusal is a clear error the module can read.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use support::loopback::{test_ca, Loopback, Reply};
use support::proxy::{Connect, ConnectProxy};
use support::run::Run;
use velero_wasm::action::{BackupRequest, ItemRef};
use velero_wasm::modules::{ModuleSource, Origin};
use velero_wasm::runtime::Runtime;
use velero_wasm::NoCluster;
use velero_wasm::{Clock, Services};

/// A runtime with the probe module under `manifest`.
async fn probe(manifest: &str) -> Runtime {
    let path = std::path::Path::new(env!("VELERO_WASM_TEST_COMPONENTS")).join("probe.wasm");
    let wasm = std::fs::read(&path).expect("the probe component is built by host/build.rs");
    let runtime = Runtime::new(Services::new(
        Arc::new(NoCluster::default()),
        Clock::System,
        velero_wasm::Environment::from_config(&velero_wasm::config::Config::from_env()),
    ))
    .unwrap();
    let source =
        ModuleSource::new("probe", wasm, manifest, Origin::File(path)).expect("test manifest");
    runtime.load(source).await.expect("the probe loads");
    runtime
}

/// Runs `http-get` on `url`; returns the item's `data` (with `result` or `error`).
async fn get(runtime: &Runtime, url: &str) -> Value {
    let item = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": "test"}, "data": {"url": url}});
    let entry = runtime.resolve("test.velero-wasm.io/http-get").unwrap();
    let id = ItemRef::parse(&item.to_string()).unwrap();
    let outcome = runtime
        .backup(
            &entry,
            id,
            BackupRequest {
                item: item.to_string(),
                backup: "{}".into(),
            },
        )
        .await
        .expect("the action returns");
    let item: Value = serde_json::from_str(&outcome.item).unwrap();
    item["data"].clone()
}

#[tokio::test]
async fn an_allowed_origin_is_reached_and_its_answer_returned() {
    let server = Loopback::start(|r| Reply::new(200, format!("hello {}", r.target))).await;
    let runtime = probe(&format!("[grant]\nhttp = [\"{}\"]", server.origin())).await;
    let data = get(&runtime, &format!("{}/greeting?x=1", server.origin())).await;
    assert_eq!(data["result"], "200 hello /greeting?x=1", "{data}");
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        (received[0].method.as_str(), received[0].header("accept")),
        ("GET", Some("text/plain"))
    );
}

#[tokio::test]
async fn error_statuses_and_redirects_come_back_as_they_are() {
    let server = Loopback::start(|r| match r.target.as_str() {
        "/redirect" => Reply::new(302, "elsewhere"),
        _ => Reply::new(403, "forbidden"),
    })
    .await;
    let runtime = probe(&format!("[grant]\nhttp = [\"{}\"]", server.origin())).await;
    assert_eq!(
        get(&runtime, &format!("{}/x", server.origin())).await["result"],
        "403 forbidden"
    );
    assert_eq!(
        get(&runtime, &format!("{}/redirect", server.origin())).await["result"],
        "302 elsewhere"
    );
}

#[tokio::test]
async fn anything_outside_the_grant_is_denied_before_a_connection() {
    let server = Loopback::start(|_| Reply::new(200, "should not be reached")).await;
    let other = Loopback::start(|_| Reply::new(200, "should not be reached")).await;
    // A bare host name allows HTTPS on 443 only: plain HTTP to it needs an http:// entry.
    let runtime = probe(&format!(
        "[grant]\nhttp = [\"127.0.0.1\", \"{}\"]",
        other.origin()
    ))
    .await;
    for url in [
        format!("{}/x", server.origin()),
        format!("https://127.0.0.1:{}/x", server.addr.port()),
        "https://sts.amazonaws.com/".to_string(),
    ] {
        let data = get(&runtime, &url).await;
        let error = data["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("Error::Denied(")
                && error.contains("is not in the HTTP grant of module probe"),
            "{url}: {data}"
        );
    }
    assert!(server.received().is_empty());
    let data = get(&runtime, "ftp://127.0.0.1/x").await;
    assert!(
        data["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Error::Invalid("),
        "{data}"
    );
}

#[tokio::test]
async fn an_answer_over_the_size_limit_is_refused() {
    let server = Loopback::start(|r| match r.target.as_str() {
        "/small" => Reply::new(200, vec![b'a'; 1000]),
        _ => Reply::new(200, vec![b'a'; 2 << 20]),
    })
    .await;
    let runtime = probe(&format!(
        "[limits]\nhttp-response = \"64KiB\"\n[grant]\nhttp = [\"{}\"]",
        server.origin()
    ))
    .await;
    let data = get(&runtime, &format!("{}/big", server.origin())).await;
    let error = data["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("Error::TooLarge(") && error.contains("65536 bytes"),
        "{data}"
    );
    assert!(
        get(&runtime, &format!("{}/small", server.origin())).await["result"]
            .as_str()
            .unwrap()
            .starts_with("200 aaa")
    );
}

#[tokio::test]
async fn a_slow_answer_times_out_and_the_call_goes_on() {
    let server = Loopback::start(|r| Reply {
        status: 200,
        body: b"late".to_vec(),
        delay: if r.target == "/slow" {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        },
    })
    .await;
    let runtime = probe(&format!(
        "[limits]\nhttp-timeout = \"300ms\"\n[grant]\nhttp = [\"{}\"]",
        server.origin()
    ))
    .await;
    let data = get(&runtime, &format!("{}/slow", server.origin())).await;
    let error = data["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("Error::Timeout(") && error.contains("300ms"),
        "{data}"
    );
    assert_eq!(
        get(&runtime, &format!("{}/fast", server.origin())).await["result"],
        "200 late"
    );
}

#[tokio::test]
async fn the_call_deadline_bounds_a_request() {
    let server = Loopback::start(|_| Reply {
        status: 200,
        body: vec![],
        delay: Duration::from_secs(5),
    })
    .await;
    let runtime = probe(&format!(
        "[limits]\ntimeout = \"400ms\"\nhttp-timeout = \"30s\"\n[grant]\nhttp = [\"{}\"]",
        server.origin()
    ))
    .await;
    let data = get(&runtime, &format!("{}/slow", server.origin())).await;
    assert!(
        data["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Error::Timeout("),
        "{data}"
    );
}

/// `velero-wasm run` of the probe's `http-get` on `url`, in a process of its own (the proxy variables
/// are read once per process): the probe granted `origin`, the test CA trusted (`SSL_CERT_FILE`), no
/// proxy variable but those of `env`. Returns the item's `data` and the process's stderr.
async fn run_get(url: &str, origin: &str, env: &[(&str, &str)]) -> (Value, String) {
    run_get_with("", url, origin, env).await
}

/// [`run_get`] with `manifest` (e.g. a `[limits]` table) before the probe's grant.
async fn run_get_with(
    manifest: &str,
    url: &str,
    origin: &str,
    env: &[(&str, &str)],
) -> (Value, String) {
    let modules = support::module_dir(
        "probe",
        "probe",
        &format!("{manifest}[grant]\nhttp = [\"{origin}\"]"),
    );
    let dir = tempfile::tempdir().unwrap();
    let item = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": "test"}, "data": {"url": url}});
    let item = support::write(dir.path(), "item.json", &item.to_string());
    let backup = support::write(
        dir.path(),
        "backup.json",
        r#"{"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "b", "namespace": "velero"}}"#,
    );
    let run = Run::new("test.velero-wasm.io/http-get")
        .args(["--log-level", "trace"])
        .item(&item)
        .path("--backup", &backup)
        .modules(modules.path())
        .env("SSL_CERT_FILE", test_ca());
    let proxies = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ];
    let run = proxies.iter().fold(run, |run, name| run.env_remove(name));
    let mut command = tokio::process::Command::from(run.envs(env).command());
    let output = command.output().await.expect("run velero-wasm");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    (out["item"]["data"].clone(), stderr)
}

#[tokio::test]
async fn https_goes_through_the_proxy_https_proxy_names_with_tls_end_to_end() {
    // The proxy alone knows where sts.proxied.test is: the answer can only come through it.
    let server = Loopback::start_tls(|r| Reply::new(200, format!("hello {}", r.target))).await;
    let proxy = ConnectProxy::start(server.addr, None).await;
    let (data, _) = run_get(
        "https://sts.proxied.test/token?x=1",
        "sts.proxied.test",
        &[
            ("HTTPS_PROXY", &proxy.url()),
            ("NO_PROXY", "localhost,.svc"),
        ],
    )
    .await;
    assert_eq!(data["result"], "200 hello /token?x=1", "{data}");
    assert_eq!(
        proxy.connects(),
        vec![Connect {
            authority: "sts.proxied.test:443".into(),
            authorization: None
        }]
    );
    assert_eq!(
        server.received()[0].header("host"),
        Some("sts.proxied.test")
    );
}

#[tokio::test]
async fn hosts_no_proxy_names_are_reached_directly() {
    let server = Loopback::start_tls(|_| Reply::new(200, "direct")).await;
    let proxy = ConnectProxy::start(server.addr, None).await;
    let origin = format!("https://localhost:{}", server.port());
    let (data, _) = run_get(
        &format!("{origin}/x"),
        &origin,
        &[("https_proxy", &proxy.url()), ("no_proxy", "localhost")],
    )
    .await;
    assert_eq!(data["result"], "200 direct", "{data}");
    assert_eq!(proxy.connects(), vec![]);
}

#[tokio::test]
async fn proxy_credentials_reach_the_proxy_only_and_a_refusal_is_a_clear_error() {
    let server = Loopback::start_tls(|_| Reply::new(200, "through")).await;
    // "Basic " + base64("backup:p@ss")
    let proxy = ConnectProxy::start(server.addr, Some("Basic YmFja3VwOnBAc3M=")).await;
    let with = |password: &str| format!("http://backup:{password}@{}", proxy.addr);

    let (data, accepted) = run_get(
        "https://sts.proxied.test/",
        "sts.proxied.test",
        &[("HTTPS_PROXY", &with("p%40ss"))],
    )
    .await;
    assert_eq!(data["result"], "200 through", "{data}");
    assert_eq!(
        proxy.connects()[0].authorization.as_deref(),
        Some("Basic YmFja3VwOnBAc3M=")
    );
    assert!(
        accepted.contains(&format!("http://{}", proxy.addr)),
        "trace logs name the proxy: {accepted}"
    );

    let (data, refused) = run_get(
        "https://sts.proxied.test/",
        "sts.proxied.test",
        &[("HTTPS_PROXY", &with("n0t-this-1"))],
    )
    .await;
    let error = data["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!(
            "GET https://sts.proxied.test:443 (through the proxy http://{}): ",
            proxy.addr
        )) && error.contains("proxy authorization required"),
        "{data}"
    );
    for secret in ["p%40ss", "p@ss", "n0t-this-1", "YmFja3Vw"] {
        for shown in [&accepted, &refused, error] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
    }
}

/// What the host holds of an answer is charged to the process's memory budget as it arrives, before
/// it is kept: with a budget of 24 MiB, of which the guest holds at least its first MiB, an answer of
/// 23.75 MiB is not read to the end, and the module is told why (before, the host read it whole and
/// the guest then failed to grow).
#[tokio::test]
async fn an_answer_is_charged_to_the_process_memory_budget_as_it_arrives() {
    let server = Loopback::start(|_| Reply::new(200, vec![b'a'; (24 << 20) - (256 << 10)])).await;
    let (data, stderr) = run_get_with(
        "[limits]\nhttp-response = \"32MiB\"\n",
        &format!("{}/big", server.origin()),
        &server.origin(),
        &[("VELERO_WASM_MEMORY_BUDGET", "24MiB")],
    )
    .await;
    let error = data["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the process's memory budget of 24 MiB for all calls is in use"),
        "{data}\n{stderr}"
    );
}
