//! How hard the host presses the API server, and what it does when the server says "not now".
//!
//! - As a Velero plugin, the Kubernetes client has no rate limit of its own unless Velero passes its
//!   `--client-qps`/`--client-burst`; then requests are spaced at that rate (seen from the server's side).
//! - `429 Too Many Requests` with `Retry-After` (API Priority and Fairness) is retried after the wait
//!   the server asks for, and the call succeeds.
//! - A `Retry-After` that would end past the call's deadline is not waited for: the module gets a clear
//!   error at once, well before its deadline.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};
use support::apiserver::{ApiServer, Logged};
use support::plugin::Plugin;
use support::run::Run;
use tempfile::TempDir;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::{self as g};

const SECRET_ACTION: &str = "test.velero-wasm.io/kube-secret";

/// A cluster with one Secret, a module directory with the kube probe (whose `kube-secret` action reads
/// that Secret once per call and reports the answer), an item, a Backup, a kubeconfig.
struct Case {
    dir: TempDir,
    server: ApiServer,
}

impl Case {
    /// `limits` is the `[limits]` table of the probe's manifest.
    fn new(limits: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        for sub in ["cluster", "modules", "home", "state"] {
            std::fs::create_dir_all(path(sub)).unwrap();
        }
        let objects = json!([
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "credentials", "namespace": "probe"},
             "data": {"password": "aHVudGVyMg=="}},
        ]);
        std::fs::write(path("cluster/objects.json"), objects.to_string()).unwrap();
        support::add_module(
            &path("modules"),
            "kube-probe",
            "kube-probe",
            &format!(
                "[limits]\n{limits}\n\n[[grant.kube]]\nresources = [\"secrets\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n\n[settings]\nsecret = \"credentials\"\n"
            ),
        );
        std::fs::write(path("item.json"), item().to_string()).unwrap();
        std::fs::write(path("backup.json"), backup().to_string()).unwrap();
        let server = ApiServer::start(&[&path("cluster")]);
        server.write_kubeconfig(&path("kubeconfig"));
        Case { dir, server }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `velero-wasm run` of the secret-reading action against the server.
    fn run(&self) -> Output {
        Run::new(SECRET_ACTION)
            .current_dir(self.dir.path())
            .args(["--item", "item.json", "--backup", "backup.json"])
            .args(["--modules", "modules", "--kubeconfig", "kubeconfig"])
            .env("HOME", self.path("home"))
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
    }

    /// The binary started as Velero starts a plugin, with `args` and this case's cluster and modules.
    fn plugin(&self, args: &[&str]) -> Plugin {
        let (kubeconfig, modules, state, home) = (
            self.path("kubeconfig"),
            self.path("modules"),
            self.path("state"),
            self.path("home"),
        );
        Plugin::start_as(
            "/plugins/velero-wasm",
            args,
            &[
                ("KUBECONFIG", text(&kubeconfig)),
                ("VELERO_WASM_MODULES", text(&modules)),
                ("VELERO_WASM_STATE_DIR", text(&state)),
                ("HOME", text(&home)),
            ],
        )
    }

    /// The requests the server answered for the Secret.
    fn secret_reads(&self) -> Vec<Logged> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.path == "/api/v1/namespaces/probe/secrets/credentials")
            .collect()
    }
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn item() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "item", "namespace": "probe"}})
}

fn backup() -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "nightly", "namespace": "velero"}})
}

/// The action's report of its read: the Secret as read, or `{"error": "<variant>: <message>"}`.
fn report(output: &Output) -> Value {
    let stdout: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); status {:?}; stderr: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    stdout["item"]["report"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn velero_s_client_qps_and_burst_space_the_plugin_s_requests() {
    let case = Case::new("");
    let plugin = case.plugin(&[
        "--uploader-type=kopia",
        "--client-qps=5",
        "--restore-only",
        "--client-burst",
        "1",
    ]);
    let mut client = BackupItemActionClient::new(plugin.channel().await);
    const CALLS: usize = 4;
    for _ in 0..CALLS {
        let answer = client
            .execute(g::ExecuteRequest {
                plugin: SECRET_ACTION.into(),
                item: item().to_string().into_bytes(),
                backup: backup().to_string().into_bytes(),
            })
            .await
            .expect("the call succeeds")
            .into_inner();
        let out: Value = serde_json::from_slice(&answer.item).unwrap();
        assert_eq!(
            out["report"]["object"]["metadata"]["name"], "credentials",
            "{out}"
        );
    }
    plugin.shutdown().await;

    // Discovery and the four reads, each let through one fifth of a second after the one before.
    // What the server sees is when each arrived: on a busy machine one request can arrive late and
    // the next on time, so a single gap may be short; the five together still span four fifths of a
    // second, less what one late start may take from it (without the limit they come as fast as the
    // calls are made).
    let requests = case.server.requests();
    assert_eq!(requests.len(), CALLS + 1, "{requests:#?}");
    let span = requests[CALLS].at.duration_since(requests[0].at);
    let gaps: Vec<Duration> = requests
        .windows(2)
        .map(|pair| pair[1].at.duration_since(pair[0].at))
        .collect();
    assert!(
        span >= Duration::from_millis(150) * CALLS as u32,
        "{} requests came within {span:?} at 5 a second (gaps {gaps:?})",
        CALLS + 1
    );
}

#[test]
fn a_429_with_retry_after_is_retried_after_the_wait_and_the_call_succeeds() {
    let case = Case::new("timeout = \"30s\"");
    // The first request to arrive is refused: "come back in 1 s". Discovery and the read go out
    // together (a group version's first read does not wait for its discovery), so it is either.
    case.server.throttle(1, 1);
    let output = case.run();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report(&output)["object"]["kind"], "Secret");

    let requests = case.server.requests();
    let refused: Vec<&Logged> = requests.iter().filter(|r| r.status == 429).collect();
    assert_eq!(refused.len(), 1, "{requests:#?}");
    // Discovery and the read, the refused one twice.
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let again = requests
        .iter()
        .find(|r| r.status == 200 && r.path == refused[0].path)
        .expect("the refused request is sent again");
    let waited = again.at.duration_since(refused[0].at);
    assert!(
        waited >= Duration::from_millis(900),
        "retried after {waited:?}, before the Retry-After of 1 s"
    );
    let answered: Vec<Logged> = case
        .secret_reads()
        .into_iter()
        .filter(|r| r.status == 200)
        .collect();
    assert_eq!(answered.len(), 1, "{requests:#?}");
}

#[test]
fn a_retry_after_past_the_call_s_deadline_fails_at_once_with_a_clear_error() {
    let case = Case::new("timeout = \"5s\"");
    // Every request refused for a minute: waiting would outlive the 5 s deadline.
    case.server.throttle(100, 60);
    let output = case.run();

    // The module got the error (and reported it) rather than being stopped at its deadline.
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let error = report(&output)["error"].as_str().unwrap_or("").to_string();
    assert!(error.starts_with("other: "), "{error}");
    for words in ["429 Too Many Requests", "retry after 60 s", "deadline"] {
        assert!(error.contains(words), "{words:?} in {error}");
    }
    // Nothing is sent again after a refusal: discovery and the read, which went out together,
    // each once.
    let requests = case.server.requests();
    let mut paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    paths.sort();
    assert_eq!(
        paths,
        ["/api/v1", "/api/v1/namespaces/probe/secrets/credentials"],
        "{requests:#?}"
    );
    assert!(requests.iter().all(|r| r.status == 429), "{requests:#?}");
}
