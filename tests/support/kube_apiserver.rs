//! A real Kubernetes API server for the live tests: kube-apiserver (built from k8s.io/kubernetes by
//! tests/kube/build.sh) with etcd, on loopback, RBAC authorization on, started once per test process
//! by tests/kube/start.sh into a temporary directory ([`shared`]). Each test works in namespaces of
//! its own ([`KubeApiServer::namespace`]). The admin (group `system:masters`) sets a scene up; a
//! service account with a token from the TokenRequest API ([`KubeApiServer::service_account`]) is
//! what RBAC is tried on.
//!
//! Stopping: nothing runs at the end of a test binary (statics are not dropped), so start.sh's
//! watchdog stops etcd and kube-apiserver and removes the directory within a second of this process
//! ending, however it ends (`KUBE_WATCH_PID`): no orphan survives the test binary.
//!
//! Which tests use which server:
//! - this real server: `kube_apiserver::` (tests/kube_apiserver.rs): the live capability calls through
//!   `run --kubeconfig` and `LiveCluster` (get, list in pages, create, update, patch, delete; errors
//!   NotFound, Conflict, Forbidden, Invalid), list items' type, module ConfigMaps (every packed stock
//!   module server-side applied and served; the object and annotation size limits), read views and
//!   batched reads against real answers, and `velero-wasm rbac`'s output applied and enforced on a
//!   service-account token;
//! - the loopback imitation (tests/support/apiserver.rs): what a real server will not do on demand
//!   (see the list there).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};

/// The running server of this test process.
pub struct KubeApiServer {
    /// The directory start.sh keeps everything in (removed by its watchdog when this process ends).
    pub dir: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// `resource` and scope of each `apiVersion` + `kind`, from discovery.
    resources: Mutex<HashMap<(String, String), (String, bool)>>,
    namespaces: AtomicUsize,
}

/// An answer of the server: HTTP status and body (JSON, or a string when it is not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Value,
}

static SERVER: OnceLock<Result<KubeApiServer, String>> = OnceLock::new();

/// The API server of this test process, started by the first test that asks (later ones wait for
/// it). Panics, naming tests/kube/build.sh, when kube-apiserver is not built.
pub fn shared() -> &'static KubeApiServer {
    match SERVER.get_or_init(start) {
        Ok(server) => server,
        Err(e) => panic!("{e}"),
    }
}

fn start() -> Result<KubeApiServer, String> {
    let root = super::root();
    let binary = std::env::var_os("KUBE_APISERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/kube/bin/kube-apiserver"));
    if !binary.exists() {
        return Err(format!(
            "the live tests need a real kube-apiserver and there is none at {}: build it with \
             tests/kube/build.sh (the `kube` stage of make test)",
            binary.display()
        ));
    }
    // Under /dev/shm when there is one: etcd's fsyncs then cost nothing.
    let base = Path::new("/dev/shm");
    let dir = if base.is_dir() {
        tempfile::Builder::new()
            .prefix("velero-wasm-kube-")
            .tempdir_in(base)
    } else {
        tempfile::Builder::new()
            .prefix("velero-wasm-kube-")
            .tempdir()
    }
    .map_err(|e| format!("a directory for the API server: {e}"))?
    .keep();
    let started = std::time::Instant::now();
    let output = Command::new(root.join("tests/kube/start.sh"))
        .arg(&dir)
        .env("KUBE_APISERVER", &binary)
        .env("KUBE_WATCH_PID", std::process::id().to_string())
        .env("KUBE_REMOVE_DIR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("tests/kube/start.sh cannot run: {e}"))?;
    if !output.status.success() {
        let log = |name: &str| {
            let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        return Err(format!(
            "tests/kube/start.sh {} failed ({}):\n{}\n--- etcd.log (end)\n{}\n--- kube-apiserver.log (end)\n{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr),
            log("etcd.log"),
            log("kube-apiserver.log")
        ));
    }
    let info: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "tests/kube/start.sh printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })?;
    eprintln!(
        "kube-apiserver at {} ready in {:.1} s (state in {})",
        info["server"],
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(KubeApiServer {
        url: info["server"].as_str().unwrap_or_default().to_string(),
        dir,
        resources: Mutex::new(HashMap::new()),
        namespaces: AtomicUsize::new(0),
    })
}

/// Runs `future` to its end on a runtime of its own (on a thread of its own, so that async tests may
/// call it too).
fn block_on<F>(future: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(future)
            })
            .join()
            .expect("the request thread")
    })
}

/// A kube client as `kubeconfig` says.
async fn client(kubeconfig: &Path) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .expect("a usable kubeconfig");
    kube::Client::try_from(config).expect("a client")
}

impl KubeApiServer {
    /// The admin's kubeconfig (client certificate, `system:masters`).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The CA that signed the serving certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("pki/ca.crt")
    }

    /// A new namespace named `PREFIX-N` (N counts this process's namespaces), created as the admin.
    pub fn namespace(&self, prefix: &str) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{n}");
        self.create_namespace(&name);
        name
    }

    /// Creates the namespace `name` (as the admin) if it is not there.
    pub fn create_namespace(&self, name: &str) {
        self.apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    }

    /// Sends one request as the admin; `body` as JSON unless `content_type` says otherwise.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Answer {
        self.request_as(&self.admin_kubeconfig(), method, path, None, body)
    }

    /// Sends one request as `kubeconfig`'s user, with `content_type` (default JSON).
    pub fn request_as(
        &self,
        kubeconfig: &Path,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&Value>,
    ) -> Answer {
        let bytes = match (body, content_type) {
            (None, _) => Vec::new(),
            (Some(Value::String(text)), Some(_)) => text.clone().into_bytes(),
            (Some(value), _) => value.to_string().into_bytes(),
        };
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type.unwrap_or("application/json"))
            .header("accept", "application/json")
            .body(bytes)
            .expect("a request");
        block_on(async {
            let client = client(kubeconfig).await;
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
            let status = response.status().as_u16();
            use http_body_util::BodyExt as _;
            let bytes = response
                .into_body()
                .collect()
                .await
                .expect("the answer's body")
                .to_bytes();
            let body = serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            Answer { status, body }
        })
    }

    /// The collection path of `object`'s type in its namespace, and its object path.
    pub fn paths(&self, object: &Value) -> (String, String) {
        let api_version = object["apiVersion"].as_str().expect("apiVersion");
        let kind = object["kind"].as_str().expect("kind");
        let (resource, namespaced) = self.resource(api_version, kind);
        let prefix = match api_version.contains('/') {
            true => format!("/apis/{api_version}"),
            false => format!("/api/{api_version}"),
        };
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
        let collection = match namespaced {
            true => {
                assert!(!namespace.is_empty(), "{kind} is namespaced: {object}");
                format!("{prefix}/namespaces/{namespace}/{resource}")
            }
            false => format!("{prefix}/{resource}"),
        };
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        (collection.clone(), format!("{collection}/{name}"))
    }

    /// The plural resource of `kind` in `api_version` and whether it is namespaced, from discovery.
    fn resource(&self, api_version: &str, kind: &str) -> (String, bool) {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(found) = self.resources.lock().unwrap().get(&key) {
            return found.clone();
        }
        let path = match api_version.contains('/') {
            true => format!("/apis/{api_version}"),
            false => format!("/api/{api_version}"),
        };
        let answer = self.request("GET", &path, None);
        assert_eq!(answer.status, 200, "discovery of {path}: {:?}", answer.body);
        let found = answer.body["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("").contains('/'))
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["namespaced"].as_bool().unwrap_or(false),
                )
            })
            .unwrap_or_else(|| panic!("{path} has no kind {kind}"));
        self.resources.lock().unwrap().insert(key, found.clone());
        found
    }

    /// Server-side applies `object` as the admin (field manager `tests`, forced) and returns the
    /// answer, whatever its status.
    pub fn try_apply(&self, object: &Value) -> Answer {
        let (_, path) = self.paths(object);
        self.request_as(
            &self.admin_kubeconfig(),
            "PATCH",
            &format!("{path}?fieldManager=tests&force=true"),
            Some("application/apply-patch+yaml"),
            Some(object),
        )
    }

    /// Server-side applies `object` as the admin; returns it as stored. Panics when refused.
    pub fn apply(&self, object: &Value) -> Value {
        let answer = self.try_apply(object);
        assert!(
            answer.status < 300,
            "applying {} {}: {} {}",
            object["kind"],
            object["metadata"]["name"],
            answer.status,
            answer.body
        );
        answer.body
    }

    /// Creates many objects as the admin, 16 requests in flight at a time.
    pub fn create_all(&self, objects: &[Value]) {
        let kubeconfig = self.admin_kubeconfig();
        let requests: Vec<(String, Value)> = objects
            .iter()
            .map(|o| (self.paths(o).0, o.clone()))
            .collect();
        block_on(async {
            use futures::StreamExt as _;
            let client = client(&kubeconfig).await;
            let sent = futures::stream::iter(requests.into_iter().map(|(path, object)| {
                let client = client.clone();
                async move {
                    let request = http::Request::post(&path)
                        .header("content-type", "application/json")
                        .body(object.to_string().into_bytes())
                        .expect("a request");
                    client
                        .request_text(request)
                        .await
                        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
                }
            }))
            .buffer_unordered(16)
            .collect::<Vec<()>>();
            sent.await;
        });
    }

    /// The object at `path` as the admin reads it, or `None` when it is not there.
    pub fn get(&self, path: &str) -> Option<Value> {
        let answer = self.request("GET", path, None);
        match answer.status {
            200 => Some(answer.body),
            404 => None,
            other => panic!("GET {path}: {other} {}", answer.body),
        }
    }

    /// Service account `name` in `namespace` (created if missing) and a kubeconfig at `path` that
    /// authenticates as it with a token from the TokenRequest API (valid one hour), its context's
    /// namespace `namespace`.
    pub fn service_account(&self, namespace: &str, name: &str, path: &Path) {
        self.apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": name, "namespace": namespace}}));
        let answer = self.request(
            "POST",
            &format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"),
            Some(
                &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}}),
            ),
        );
        assert_eq!(
            answer.status, 201,
            "a token for {namespace}/{name}: {}",
            answer.body
        );
        let token = answer.body["status"]["token"].as_str().expect("a token");
        self.write_kubeconfig(path, &format!("token: {token}"), namespace);
    }

    /// A kubeconfig at `path` for the admin, its context's namespace `namespace`, plus a context
    /// `elsewhere` whose server is a port nobody listens on.
    pub fn admin_kubeconfig_in(&self, namespace: &str, path: &Path) {
        let pki = self.dir.join("pki");
        let user = format!(
            "client-certificate: {}\n    client-key: {}",
            pki.join("admin.crt").display(),
            pki.join("admin.key").display()
        );
        self.write_kubeconfig(path, &user, namespace);
    }

    fn write_kubeconfig(&self, path: &Path, user: &str, namespace: &str) {
        let ca = self.ca();
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
             clusters:\n- name: test\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\n\
             - name: elsewhere\n  cluster:\n    server: https://127.0.0.1:9\n    certificate-authority: {ca}\n\
             users:\n- name: tester\n  user:\n    {user}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: tester\n    namespace: {namespace}\n\
             - name: elsewhere\n  context:\n    cluster: elsewhere\n    user: tester\n",
            url = self.url,
            ca = ca.display(),
        );
        std::fs::write(path, text).expect("write the kubeconfig");
    }

    /// Whether the user of `kubeconfig` may `verb` `resource` (`group`, in `namespace`, "" for every
    /// namespace or cluster scope), as the server's authorizer decides (a SelfSubjectAccessReview).
    pub fn can(
        &self,
        kubeconfig: &Path,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> bool {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                            "namespace": namespace, "name": name}}});
        let answer = self.request_as(
            kubeconfig,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            None,
            Some(&review),
        );
        assert_eq!(answer.status, 201, "{}", answer.body);
        answer.body["status"]["allowed"] == true
    }
}

impl KubeApiServer {
    /// Stores `objects` as the admin, as a cluster would hold them: their namespaces (each with the
    /// `default` service account that pods name) first, a CustomResourceDefinition for every kind of
    /// a group the server does not serve (any content allowed, scope as the objects say), then the
    /// objects, created (their `resourceVersion` dropped; the server gives them new uids and times).
    pub fn load(&self, objects: &[Value]) {
        let mut namespaces = std::collections::BTreeSet::new();
        let mut custom: std::collections::BTreeMap<(String, String), (bool, Vec<String>)> =
            Default::default();
        for object in objects {
            let api_version = object["apiVersion"].as_str().expect("apiVersion");
            let kind = object["kind"].as_str().expect("kind").to_string();
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
            if !namespace.is_empty() {
                namespaces.insert(namespace.to_string());
            }
            if let Some((group, version)) = api_version.split_once('/') {
                if group.contains('.') && !self.serves(api_version) {
                    let entry = custom
                        .entry((group.to_string(), kind))
                        .or_insert((false, Vec::new()));
                    entry.0 |= !namespace.is_empty();
                    if !entry.1.iter().any(|v| v == version) {
                        entry.1.push(version.to_string());
                    }
                }
            }
        }
        for namespace in &namespaces {
            self.create_namespace(namespace);
            self.apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "default", "namespace": namespace}}));
        }
        for ((group, kind), (namespaced, versions)) in &custom {
            self.custom_resource(group, kind, *namespaced, versions);
        }
        let mut created = Vec::new();
        for object in objects {
            let mut object = object.clone();
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.shift_remove("resourceVersion");
            }
            if object["kind"] == "Namespace" {
                self.apply(&object);
            } else {
                created.push(object);
            }
        }
        self.create_all(&created);
    }

    /// Whether the server serves `api_version` (`group/version`).
    pub fn serves(&self, api_version: &str) -> bool {
        self.request("GET", &format!("/apis/{api_version}"), None)
            .status
            == 200
    }

    /// Defines `kind` of `group` (served at `versions`, the first stored) with a schema that keeps
    /// every field, and waits until the server serves it.
    pub fn custom_resource(&self, group: &str, kind: &str, namespaced: bool, versions: &[String]) {
        let plural = velero_wasm::action::plural_of(kind);
        let versions: Vec<Value> = versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                json!({"name": v, "served": true, "storage": i == 0,
                       "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
            })
            .collect();
        let mut metadata = json!({"name": format!("{plural}.{group}")});
        // Groups under k8s.io and kubernetes.io need this annotation (snapshot.storage.k8s.io).
        if group.ends_with(".k8s.io") || group.ends_with(".kubernetes.io") {
            metadata["annotations"] =
                json!({"api-approved.kubernetes.io": "unapproved, a test fixture"});
        }
        self.apply(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": metadata,
            "spec": {"group": group, "scope": if namespaced { "Namespaced" } else { "Cluster" },
                     "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                               "listKind": format!("{kind}List")},
                     "versions": versions}}));
        let path = format!("/apis/{group}/{}", versions[0]["name"].as_str().unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let answer = self.request("GET", &path, None);
            let served = answer.status == 200
                && answer.body["resources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r["kind"] == kind));
            if served {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{kind}.{group} is not served after 60 s: {} {}",
                answer.status,
                answer.body
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
