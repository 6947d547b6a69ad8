//! A small Kubernetes API server for tests: serves objects over real HTTP on loopback the way
//! kube-apiserver does, so the live backend can be driven with the real `kube` client. The objects live
//! in the host's in-memory cluster (the one behind `run --cluster`): this file is the HTTP in front.
//!
//! What it speaks: discovery (`/api`, `/api/v1`, `/apis`, `/apis/<group>/<version>`); get, list
//! (label and field selectors, `limit`/`continue` pages, `resourceVersion` on objects and lists; list
//! items of built-in groups lack `apiVersion`/`kind`, as the real server's do), create (name or
//! generateName; 409 AlreadyExists), update (409 Conflict on a stale `resourceVersion`), patch
//! (`application/merge-patch+json`, `application/json-patch+json`, and server-side apply,
//! `application/apply-patch+yaml`, as create-or-replace by one field manager), delete; errors as
//! `Status` bodies with the real server's codes, reasons and messages (404 NotFound, 409, 403 Forbidden
//! for resources set as forbidden, 422 Invalid, 415). Every write is held to two of Kubernetes' size
//! limits, refused with 422 as the real server refuses it: all annotations of an object together
//! ([`MAX_ANNOTATION_BYTES`]) and a ConfigMap's `data` and `binaryData` ([`MAX_CONFIGMAP_DATA_BYTES`]).
//! Every request is logged, with the time it arrived, for assertions. Like API Priority and Fairness
//! under load, it can refuse requests with `429 Too Many Requests` and a `Retry-After`
//! ([`ApiServer::throttle`]), and it can delay every answer as a distant server would
//! ([`ApiServer::set_latency`]).
//!
//! The live tests' real peer is kube-apiserver (tests/support/kube_apiserver.rs, whose twins in
//! tests/kube_apiserver.rs check what this imitation assumes). This one stays for what a real server
//! will not do on demand, or where a test counts or times requests:
//! - live_kube.rs: requests counted and read back (pages and their continue tokens, discovery read
//!   once, a denied call never sent), the server stopped mid-test (a recording replays without it);
//!   its endless answers come from a server of its own;
//! - rate_limit.rs: 429 with `Retry-After` ([`ApiServer::throttle`]), request times;
//! - limits.rs: requests counted against a module's call limit, list pages cut at its memory;
//! - module_configmaps.rs, shadow.rs, oci.rs: module ConfigMaps rewritten a hundred times, the list
//!   forbidden or the server gone (the last listing serves), one cheap server per test;
//! - install.rs: packed stock modules written three ways (twin: kube_apiserver::, the real limits);
//! - kubevirt.rs, plugin_faults.rs: a cluster behind the plugin over gRPC (the real server's twin is
//!   kube_apiserver::'s VM backup with and without read views);
//! - hcp.rs: plays HyperShift's controller ([`ApiServer::controller`], [`ApiServer::set_status`]),
//!   which no real server runs.
//!
//! Its size-limit messages are worded as kube-apiserver v1.34.4 words them (`Too long: may not be
//! more than N bytes`).
//!
//! Where kube-apiserver v1.34.4 answers otherwise (seen against the real server; none of it changes
//! what the host does, but a test asserting it here asserts the imitation):
//! - list items of every built-in type lack `apiVersion`/`kind`, dotted groups too
//!   (`rbac.authorization.k8s.io`); only custom resources carry them. Objects come `kind` first;
//! - continue tokens are opaque (base64 JSON), not `offset-N`;
//! - field selectors: a ConfigMap list takes only `metadata.name` and `metadata.namespace` (400
//!   `not a known field selector` for others; this server matches any field);
//! - server-side apply merges by field owner: unchanged, nothing is written (same
//!   `resourceVersion`); a field another manager owns is a 409 `Apply failed with 1 conflict` unless
//!   forced; an apply body without `kind` is a 400; every object carries `managedFields`;
//! - a create carrying `metadata.resourceVersion` is a 500 `resourceVersion should not be set on
//!   objects to be created` (the host reports `other`), before any AlreadyExists;
//! - a failed JSON-patch `test` is a 422 with the generic `the server rejected our request due to an
//!   error in our request`; an unknown patch type a 415 `415: Unsupported Media Type`;
//! - a namespace must exist before anything is created in it (404 `namespaces "x" not found`), and
//!   a pod's service account too (403 from admission); a delete answers a `Status` of `Success`,
//!   not the object.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use velero_wasm::action::plural_of;
use velero_wasm::Clock;
use velero_wasm::FixtureCluster;
use velero_wasm::{ApiResource, KubeError, ListOptions, Patch};

/// The most all annotations of one object may hold, keys and values together (Kubernetes'
/// `TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATION_BYTES: usize = 256 << 10;

/// The most a ConfigMap's `data` values and `binaryData` values (decoded) may hold together
/// (Kubernetes' `MaxSecretSize`, which ConfigMap validation uses).
pub const MAX_CONFIGMAP_DATA_BYTES: usize = 1 << 20;

/// A resource type the server knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural name.
    pub resource: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

impl ResourceType {
    fn new(
        group: &str,
        version: &str,
        resource: &str,
        kind: &str,
        namespaced: bool,
    ) -> ResourceType {
        ResourceType {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced,
        }
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn group_resource(&self) -> String {
        self.api().group_resource()
    }

    fn api(&self) -> ApiResource {
        ApiResource::new(&self.group, &self.version, &self.resource)
    }

    /// Built-in groups: their list items come without apiVersion and kind.
    fn built_in(&self) -> bool {
        !self.group.contains('.')
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Decoded query parameters.
    pub query: BTreeMap<String, String>,
    /// The answer's HTTP status.
    pub status: u16,
    /// When the server received it.
    pub at: std::time::Instant,
}

struct State {
    types: Vec<ResourceType>,
    /// The objects, sorted as the real server's storage keys.
    cluster: FixtureCluster,
    forbidden: BTreeSet<String>,
    /// `resource.group` → the status a controller gives each new object of it.
    controllers: BTreeMap<String, Value>,
    log: Vec<Logged>,
    /// Requests still to refuse with 429, and the `Retry-After` (seconds) to send with each.
    throttle: Option<(usize, u64)>,
    /// How long every answer waits before it is sent (concurrent requests wait side by side).
    latency: std::time::Duration,
}

/// A running server; stops when dropped.
pub struct ApiServer {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn core_types() -> Vec<ResourceType> {
    vec![
        ResourceType::new("", "v1", "configmaps", "ConfigMap", true),
        ResourceType::new("", "v1", "secrets", "Secret", true),
        ResourceType::new("", "v1", "pods", "Pod", true),
        ResourceType::new(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
        ),
        ResourceType::new("", "v1", "namespaces", "Namespace", false),
        ResourceType::new("", "v1", "persistentvolumes", "PersistentVolume", false),
        ResourceType::new("", "v1", "nodes", "Node", false),
        ResourceType::new("apps", "v1", "deployments", "Deployment", true),
    ]
}

impl ApiServer {
    /// Serves the objects of these JSON/YAML files and directories (read as `run --cluster` reads
    /// them). Resource types are the core ones plus one per kind found; a kind's objects with a
    /// namespace make it namespaced.
    pub fn start(paths: &[&Path]) -> ApiServer {
        let files: Vec<std::path::PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
        let objects = velero_wasm::documents::read_objects(&files).expect("fixture objects");
        // Created objects carry this time, as the fixture cluster's clock gives it.
        let created = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_225_600);
        let cluster =
            FixtureCluster::load(&files, Clock::fixed(created)).expect("a fixture cluster");
        let mut types = core_types();
        for (_, object) in objects {
            let api_version = object["apiVersion"]
                .as_str()
                .expect("apiVersion")
                .to_string();
            let kind = object["kind"].as_str().expect("kind").to_string();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let resource = plural_of(&kind);
            if !types
                .iter()
                .any(|t| t.group == group && t.version == version && t.resource == resource)
            {
                types.push(ResourceType::new(
                    group,
                    version,
                    &resource,
                    &kind,
                    !namespace.is_empty(),
                ));
            }
        }
        let state = Arc::new(Mutex::new(State {
            types,
            cluster,
            forbidden: BTreeSet::new(),
            controllers: BTreeMap::new(),
            log: Vec::new(),
            throttle: None,
            latency: std::time::Duration::ZERO,
        }));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let served = state.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(serve(served, stopped, ready_tx));
        });
        let addr = ready_rx.recv().expect("the server starts");
        ApiServer {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers 403 Forbidden to every request on `resource.group`.
    pub fn forbid(&self, group_resource: &str) {
        self.lock().forbidden.insert(group_resource.to_string());
    }

    /// Plays a controller of `resource.group`: each object created from now on gets `status` right
    /// after it is stored (the create answer is the object as sent, like the real server's).
    pub fn controller(&self, group_resource: &str, status: Value) {
        self.lock()
            .controllers
            .insert(group_resource.to_string(), status);
    }

    /// Sets the `status` of a stored object (as its controller would); false when there is none.
    pub fn set_status(
        &self,
        group_resource: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> bool {
        self.lock()
            .set_status(group_resource, namespace, name, status)
            .is_some()
    }

    /// Refuses the next `requests` requests with `429 Too Many Requests` and `Retry-After:
    /// <retry_after_secs>`, as API Priority and Fairness does when a priority level is full.
    pub fn throttle(&self, requests: usize, retry_after_secs: u64) {
        self.lock().throttle = Some((requests, retry_after_secs)).filter(|(n, _)| *n > 0);
    }

    /// Delays every answer by `latency`, as a real API server's answers take a few milliseconds;
    /// requests in flight together wait side by side.
    pub fn set_latency(&self, latency: std::time::Duration) {
        self.lock().latency = latency;
    }

    /// Stores `object` as `kubectl apply` would: created with a new uid, or replacing the object of
    /// that name (keeping its uid); either way with a new `resourceVersion`. Returns it as stored.
    pub fn apply(&self, mut object: Value) -> Value {
        let state = self.lock();
        let api_version = object["apiVersion"].as_str().expect("apiVersion");
        let kind = object["kind"].as_str().expect("kind");
        let api = state
            .types
            .iter()
            .find(|t| t.api_version() == api_version && t.kind == kind)
            .expect("a known resource type")
            .api();
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        let stored = if state.cluster.read(&api, &namespace, &name).is_ok() {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.shift_remove("resourceVersion");
            }
            state.cluster.replace(&api, &namespace, object)
        } else {
            state.cluster.insert(&api, &namespace, object)
        };
        stored.expect("the object is stored")
    }

    /// Deletes a stored object; whether there was one.
    pub fn delete(&self, group_resource: &str, namespace: &str, name: &str) -> bool {
        let state = self.lock();
        state
            .api(group_resource)
            .is_some_and(|api| state.cluster.remove(&api, namespace, name).is_ok())
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Logged> {
        self.lock().log.clone()
    }

    /// Forgets the requests received so far.
    pub fn clear_requests(&self) {
        self.lock().log.clear();
    }

    /// An object as stored.
    pub fn object(&self, group_resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let state = self.lock();
        let api = state.api(group_resource)?;
        state.cluster.read(&api, namespace, name).ok()
    }

    /// A kubeconfig file for this server (context `test`, plus a context `elsewhere` that points to a
    /// port nobody listens on).
    pub fn write_kubeconfig(&self, path: &Path) {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
             clusters:\n- name: test\n  cluster:\n    server: {}\n- name: elsewhere\n  cluster:\n    server: http://127.0.0.1:9\n\
             users:\n- name: tester\n  user:\n    token: test-token\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: tester\n\
             - name: elsewhere\n  context:\n    cluster: elsewhere\n    user: tester\n",
            self.url()
        );
        std::fs::write(path, text).expect("write the kubeconfig");
    }

    /// Stops serving: later connections are refused.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(
    state: Arc<Mutex<State>>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
    ready: std::sync::mpsc::Sender<SocketAddr>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    ready
        .send(listener.local_addr().expect("address"))
        .expect("report the address");
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, request).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        }
    }
}

type Answer = Response<Full<Bytes>>;

fn respond(code: StatusCode, body: &Value) -> Answer {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a response")
}

/// A `Status` body as kube-apiserver writes it.
fn status(code: StatusCode, reason: &str, message: &str, details: Value) -> Answer {
    respond(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "details": details, "code": code.as_u16()}),
    )
}

fn no_route() -> Answer {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        json!({}),
    )
}

async fn handle(state: &Mutex<State>, request: Request<Incoming>) -> Answer {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let query: BTreeMap<String, String> = request
        .uri()
        .query()
        .map(url_decode_pairs)
        .unwrap_or_default();
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let at = std::time::Instant::now();
    let (answer, latency) = {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let throttled = state.throttle.map(|(left, retry_after)| {
            state.throttle = Some((left - 1, retry_after)).filter(|(n, _)| *n > 0);
            retry_after
        });
        let answer = match segments.as_slice() {
            _ if throttled.is_some() => too_many_requests(throttled.unwrap_or(1)),
            ["api"] => respond(
                StatusCode::OK,
                &json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}),
            ),
            ["apis"] => respond(StatusCode::OK, &state.group_list()),
            ["api", version] => state.resource_list("", version),
            ["apis", group, version] => state.resource_list(group, version),
            ["api", version, rest @ ..] => {
                state.object_request(&method, "", version, rest, &query, &content_type, &body)
            }
            ["apis", group, version, rest @ ..] => {
                state.object_request(&method, group, version, rest, &query, &content_type, &body)
            }
            _ => no_route(),
        };
        state.log.push(Logged {
            method: method.to_string(),
            path,
            query,
            status: answer.status().as_u16(),
            at,
        });
        (answer, state.latency)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    answer
}

/// kube-apiserver's answer when API Priority and Fairness rejects a request.
fn too_many_requests(retry_after_secs: u64) -> Answer {
    let mut answer = status(
        StatusCode::TOO_MANY_REQUESTS,
        "TooManyRequests",
        "Too many requests, please try again later.",
        json!({"retryAfterSeconds": retry_after_secs}),
    );
    if let Ok(value) = retry_after_secs.to_string().parse() {
        answer.headers_mut().insert("retry-after", value);
    }
    answer
}

fn url_decode_pairs(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

impl State {
    fn group_list(&self) -> Value {
        let mut groups: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            groups.entry(&t.group).or_default().insert(&t.version);
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|(name, versions)| {
                let versions: Vec<Value> = versions
                    .into_iter()
                    .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
                    .collect();
                json!({"name": name, "versions": versions, "preferredVersion": versions[0]})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    fn resource_list(&self, group: &str, version: &str) -> Answer {
        let types: Vec<&ResourceType> = self
            .types
            .iter()
            .filter(|t| t.group == group && t.version == version)
            .collect();
        if types.is_empty() {
            return no_route();
        }
        let verbs = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        let mut resources = Vec::new();
        for t in &types {
            resources.push(json!({"name": t.resource, "singularName": t.kind.to_lowercase(), "namespaced": t.namespaced,
                                  "kind": t.kind, "verbs": verbs}));
            // A subresource, as the real server lists them: not an object type of its own.
            resources.push(json!({"name": format!("{}/status", t.resource), "singularName": "", "namespaced": t.namespaced,
                                  "kind": t.kind, "verbs": ["get", "patch", "update"]}));
        }
        let group_version = types[0].api_version();
        respond(
            StatusCode::OK,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn object_request(
        &mut self,
        method: &Method,
        group: &str,
        version: &str,
        rest: &[&str],
        query: &BTreeMap<String, String>,
        content_type: &str,
        body: &[u8],
    ) -> Answer {
        let (namespace, resource, name) = match rest {
            ["namespaces", ns, resource] => (*ns, *resource, None),
            ["namespaces", ns, resource, name] => (*ns, *resource, Some(*name)),
            [resource] => ("", *resource, None),
            [resource, name] => ("", *resource, Some(*name)),
            _ => return no_route(),
        };
        let Some(t) = self
            .types
            .iter()
            .find(|t| t.group == group && t.version == version && t.resource == resource)
            .cloned()
        else {
            return no_route();
        };
        if !namespace.is_empty() && !t.namespaced {
            return no_route();
        }
        if self.forbidden.contains(&t.group_resource()) {
            let verb = match (method.as_str(), name) {
                ("GET", None) => "list",
                ("GET", _) => "get",
                ("POST", _) => "create",
                ("PUT", _) => "update",
                ("PATCH", _) => "patch",
                _ => "delete",
            };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{namespace}\"")
            };
            let message = format!(
                "{}{} is forbidden: User \"system:serviceaccount:velero:velero\" cannot {verb} resource \"{}\" in API group \"{}\" {scope}",
                t.group_resource(),
                name.map(|n| format!(" \"{n}\"")).unwrap_or_default(),
                t.resource,
                t.group
            );
            return status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                &message,
                json!({"name": name, "kind": t.resource}),
            );
        }
        let api = t.api();
        match (method.as_str(), name) {
            ("GET", None) => self.list(&t, namespace, query),
            ("GET", Some(name)) => answer(&t, name, "", self.cluster.read(&api, namespace, name)),
            ("POST", None) => self.create(&t, namespace, body),
            ("PUT", Some(name)) => self.update(&t, namespace, name, body),
            ("PATCH", Some(name)) if content_type == "application/apply-patch+yaml" => {
                self.server_side_apply(&t, namespace, name, query, body)
            }
            ("PATCH", Some(name)) => self.patch(&t, namespace, name, content_type, body),
            ("DELETE", Some(name)) => {
                let found = self.cluster.read(&api, namespace, name);
                let deleted = found.and_then(|object| {
                    self.cluster.remove(&api, namespace, name)?;
                    Ok(object)
                });
                answer(&t, name, "", deleted)
            }
            _ => status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                json!({}),
            ),
        }
    }

    /// The type whose `resource.group` this is.
    fn api(&self, group_resource: &str) -> Option<ApiResource> {
        self.types
            .iter()
            .find(|t| t.group_resource() == group_resource)
            .map(ResourceType::api)
    }

    /// Sets the `status` of a stored object, as its controller would: a write with a new
    /// `resourceVersion`.
    fn set_status(
        &self,
        group_resource: &str,
        namespace: &str,
        name: &str,
        status: Value,
    ) -> Option<Value> {
        let api = self.api(group_resource)?;
        let mut object = self.cluster.read(&api, namespace, name).ok()?;
        object["status"] = status;
        self.cluster.replace(&api, namespace, object).ok()
    }

    fn list(
        &mut self,
        t: &ResourceType,
        namespace: &str,
        query: &BTreeMap<String, String>,
    ) -> Answer {
        let get = |k: &str| query.get(k).map(String::as_str).unwrap_or("");
        let options = match ListOptions::parse(get("labelSelector"), get("fieldSelector")) {
            Ok(options) => options,
            Err(e) => {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &e.to_string(),
                    json!({}),
                )
            }
        };
        let matching = self.cluster.select(&t.api(), namespace, &options);
        let start: usize = match get("continue") {
            "" => 0,
            token => match token.strip_prefix("offset-").and_then(|n| n.parse().ok()) {
                Some(n) => n,
                None => {
                    return status(
                        StatusCode::BAD_REQUEST,
                        "BadRequest",
                        "invalid continue token",
                        json!({}),
                    )
                }
            },
        };
        let limit: usize = get("limit")
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(usize::MAX);
        let end = start.saturating_add(limit).min(matching.len());
        let items: Vec<Value> = matching[start.min(end)..end]
            .iter()
            .map(|o| {
                let mut o = o.clone();
                if t.built_in() {
                    if let Some(map) = o.as_object_mut() {
                        map.shift_remove("apiVersion");
                        map.shift_remove("kind");
                    }
                }
                o
            })
            .collect();
        let mut metadata = Map::new();
        metadata.insert(
            "resourceVersion".into(),
            json!(self.cluster.resource_version().to_string()),
        );
        if end < matching.len() {
            metadata.insert("continue".into(), json!(format!("offset-{end}")));
            metadata.insert("remainingItemCount".into(), json!(matching.len() - end));
        }
        respond(
            StatusCode::OK,
            &json!({"kind": format!("{}List", t.kind), "apiVersion": t.api_version(), "metadata": metadata, "items": items}),
        )
    }

    fn create(&mut self, t: &ResourceType, namespace: &str, body: &[u8]) -> Answer {
        let Some(mut object) = json_object(body) else {
            return not_an_object();
        };
        if !namespace.is_empty() {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(invalid) = too_large(t, &object) {
            return invalid;
        }
        let created = self.cluster.insert(&t.api(), namespace, object);
        if let (Ok(object), Some(status)) = (&created, self.controllers.get(&t.group_resource())) {
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            self.set_status(&t.group_resource(), namespace, name, status.clone());
        }
        let name = match &created {
            Ok(object) => object["metadata"]["name"].as_str().unwrap_or(""),
            Err(_) => "",
        };
        match answer(t, name, "AlreadyExists", created.clone()) {
            ok if ok.status() == StatusCode::OK => with_status(ok, StatusCode::CREATED),
            failed => failed,
        }
    }

    fn update(&mut self, t: &ResourceType, namespace: &str, name: &str, body: &[u8]) -> Answer {
        let Some(mut object) = json_object(body) else {
            return not_an_object();
        };
        let named = object.pointer("/metadata/name").and_then(Value::as_str);
        match named {
            None | Some("") => object["metadata"]["name"] = json!(name),
            Some(other) if other != name => {
                let message = format!(
                    "the name of the object ({other}) does not match the name on the URL ({name})"
                );
                return status(StatusCode::BAD_REQUEST, "BadRequest", &message, json!({}));
            }
            Some(_) => {}
        }
        if let Some(invalid) = too_large(t, &object) {
            return invalid;
        }
        let replaced = self.cluster.replace(&t.api(), namespace, object);
        answer(t, name, "Conflict", replaced)
    }

    fn patch(
        &mut self,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        content_type: &str,
        body: &[u8],
    ) -> Answer {
        let document: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!("the patch is not JSON: {e}"),
                    json!({}),
                )
            }
        };
        let patch = match content_type {
            "application/merge-patch+json" => Patch::Merge(document),
            "application/json-patch+json" => match serde_json::from_value(document) {
                Ok(ops) => Patch::Json(ops),
                Err(e) => {
                    return status(
                        StatusCode::BAD_REQUEST,
                        "BadRequest",
                        &e.to_string(),
                        json!({}),
                    )
                }
            },
            other => {
                return status(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    &format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json (got {other:?})"),
                    json!({}),
                )
            }
        };
        // The object as the patch would leave it, held to the limits before anything is stored.
        if let Ok(mut object) = self.cluster.read(&t.api(), namespace, name) {
            let applied = match &patch {
                Patch::Merge(document) => {
                    json_patch::merge(&mut object, document);
                    true
                }
                Patch::Json(ops) => json_patch::patch(&mut object, &ops.0).is_ok(),
                // Never here: an apply patch is a server-side apply (`server_side_apply`).
                Patch::Apply { .. } => false,
            };
            if let Some(invalid) = too_large(t, &object).filter(|_| applied) {
                return invalid;
            }
        }
        let patched = self.cluster.apply(&t.api(), namespace, name, &patch);
        answer(t, name, "Conflict", patched)
    }

    /// Server-side apply by one field manager: the applied object is the whole of what that manager
    /// owns, so it is created, or replaces the stored object (keeping its uid). Unlike a client-side
    /// `kubectl apply`, no annotation is added. Answers 201 when it created the object.
    fn server_side_apply(
        &mut self,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        query: &BTreeMap<String, String>,
        body: &[u8],
    ) -> Answer {
        if query.get("fieldManager").is_none_or(String::is_empty) {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                json!({}),
            );
        }
        let object: Option<Value> = serde_norway::from_slice(body).ok();
        let Some(mut object) = object.filter(Value::is_object) else {
            return not_an_object();
        };
        object["metadata"]["name"] = json!(name);
        if !namespace.is_empty() {
            object["metadata"]["namespace"] = json!(namespace);
        }
        if let Some(invalid) = too_large(t, &object) {
            return invalid;
        }
        if self.cluster.read(&t.api(), namespace, name).is_ok() {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.shift_remove("resourceVersion");
            }
            let replaced = self.cluster.replace(&t.api(), namespace, object);
            answer(t, name, "Conflict", replaced)
        } else {
            let created = self.cluster.insert(&t.api(), namespace, object);
            match answer(t, name, "AlreadyExists", created) {
                ok if ok.status() == StatusCode::OK => with_status(ok, StatusCode::CREATED),
                failed => failed,
            }
        }
    }
}

/// The 422 kube-apiserver answers for an object over one of the size limits it enforces on every
/// write: all annotations together over [`MAX_ANNOTATION_BYTES`] (keys and values), a ConfigMap's
/// `data` and `binaryData` over [`MAX_CONFIGMAP_DATA_BYTES`] (values, binaryData decoded).
fn too_large(t: &ResourceType, object: &Value) -> Option<Answer> {
    let mut causes = Vec::new();
    let annotations: usize = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if annotations > MAX_ANNOTATION_BYTES {
        causes.push(("metadata.annotations", MAX_ANNOTATION_BYTES));
    }
    if t.group.is_empty() && t.kind == "ConfigMap" {
        use base64::Engine as _;
        let values = |section: &str, binary: bool| -> usize {
            object
                .get(section)
                .and_then(Value::as_object)
                .map(|entries| {
                    entries
                        .values()
                        .filter_map(Value::as_str)
                        .map(|v| match binary {
                            true => base64::engine::general_purpose::STANDARD
                                .decode(v)
                                .map_or(v.len(), |b| b.len()),
                            false => v.len(),
                        })
                        .sum()
                })
                .unwrap_or(0)
        };
        if values("data", false) + values("binaryData", true) > MAX_CONFIGMAP_DATA_BYTES {
            causes.push(("[]", MAX_CONFIGMAP_DATA_BYTES));
        }
    }
    if causes.is_empty() {
        return None;
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let text = |field: &str, limit: usize| {
        format!("{field}: Too long: may not be more than {limit} bytes")
    };
    let message = format!(
        "{} \"{name}\" is invalid: {}",
        t.kind,
        causes
            .iter()
            .map(|(field, limit)| text(field, *limit))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let causes: Vec<Value> = causes
        .iter()
        .map(|(field, limit)| {
            json!({"reason": "FieldValueTooLong", "message": format!("Too long: may not be more than {limit} bytes"), "field": field})
        })
        .collect();
    Some(status(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        &message,
        json!({"name": name, "group": t.group, "kind": t.kind, "causes": causes}),
    ))
}

/// The body as a JSON object.
fn json_object(body: &[u8]) -> Option<Value> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Some(Value::Object(o)),
        _ => None,
    }
}

fn not_an_object() -> Answer {
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        "the body is not a JSON object",
        json!({}),
    )
}

fn with_status(mut answer: Answer, code: StatusCode) -> Answer {
    *answer.status_mut() = code;
    answer
}

/// The cluster's answer as kube-apiserver gives it: the object, or a `Status` with the code and
/// reason of the error (`conflict` names a 409: `AlreadyExists` or `Conflict`).
fn answer(
    t: &ResourceType,
    name: &str,
    conflict: &str,
    result: Result<Value, KubeError>,
) -> Answer {
    let details = json!({"name": name, "kind": t.resource});
    match result {
        Ok(object) => respond(StatusCode::OK, &object),
        Err(KubeError::NotFound(m)) => status(StatusCode::NOT_FOUND, "NotFound", &m, details),
        Err(KubeError::Conflict(m)) => status(StatusCode::CONFLICT, conflict, &m, details),
        Err(KubeError::Invalid(m)) => status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            &m,
            json!({"name": name, "kind": t.kind}),
        ),
        Err(e) => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &e.to_string(),
            details,
        ),
    }
}
