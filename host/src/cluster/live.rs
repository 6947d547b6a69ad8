//! The live backend: a real API server, configured and authenticated as the `kube` crate does it
//! (rustls, no OpenSSL).
//!
//! One [`LiveCluster`] serves every module of the process: one HTTP client (one connection pool), one
//! discovery cache and, when Velero sets one, one client-side rate limit. Requests are raw REST calls,
//! and an answer is checked to be JSON and passed on as the text the server sent ([`Json`]): a read
//! reaches the guest without being parsed into a tree and written out again. In plugin mode a [`LazyCluster`] connects on the first call a module makes.
//!
//! - **Configuration** ([`ClusterOptions`]): an explicit `--kubeconfig`/`--context` wins; otherwise the
//!   in-cluster service account when `KUBERNETES_SERVICE_HOST` is set (a Velero plugin in its pod);
//!   otherwise `KUBECONFIG` or `~/.kube/config`, as kubectl resolves them.
//! - **Discovery**: each group/version is read once per process (`/api/v1`, `/apis/<group>/<version>`)
//!   to learn each resource's kind and whether it is namespaced; a resource missing from the cached
//!   list is looked up once more, so a CRD installed later is found. Callers that need a group version
//!   while its discovery is on its way share that one request.
//! - **Lists** are read in pages of [`LIST_PAGE_SIZE`] (`limit`/`continue`), and every item gets the
//!   `apiVersion` and `kind` that list items of built-in types lack.
//! - **Rate limit**: none of our own by default: the API server's priority and fairness decides. A
//!   [`RateLimit`] (Velero's `--client-qps`/`--client-burst`, passed to plugins since Velero 1.15) puts
//!   a token bucket in front of every request.
//! - **Too many requests**: a `429` is sent again after its `Retry-After` (1 s when it names none), a
//!   `503` only when it names one, as client-go does, but never past the deadline of the call the
//!   request is made for ([`CALL_DEADLINE`]): a wait that would end too late fails at once, saying so.
//! - **Bounded answers**: no answer is read past a cap, however long the server goes on: a list page
//!   stops at what the guest could still take (its memory limit), any other answer (an object, a
//!   write's result, discovery) at [`MAX_ANSWER_BYTES`], and the body of an error at
//!   [`MAX_ERROR_BYTES`]. A longer answer fails its call and nothing else.
//! - **Errors**: a `Status` with code 404 is `NotFound`, 409 `Conflict`, 401/403 `Forbidden`,
//!   400/422 `Invalid`; anything else, including transport failures, is `Other`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use http_body_util::BodyExt;
use kube::api::{DeleteParams, GetParams, ListParams, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Request;
use serde_json::Value;
use tower::ServiceExt;

use super::json::Json;
use super::vocabulary::{ApiResource, KubeAnswer, KubeCall, KubeError, ListOptions, Patch};
use crate::answer_charge::{self, AnswerBody};
use crate::backend::Backend;
use crate::config::Config;

/// Objects asked for per page when listing (kubectl's default chunk size).
pub(crate) const LIST_PAGE_SIZE: u32 = 500;
/// The most times one request is sent again after `429 Too Many Requests` (client-go's limit).
pub(crate) const MAX_RETRIES: u32 = 10;
/// The most bytes of one answer that is not a list page: an object, a write's result or a group
/// version's discovery. The API server keeps objects of at most about 1.5 MiB (etcd's request limit)
/// and the largest discovery documents are a few hundred KiB; anything longer is a broken or hostile
/// server, and reading it whole could exhaust the process.
pub const MAX_ANSWER_BYTES: u64 = 16 << 20;
/// The most bytes of an error answer's body that are read: a `Status` is a few hundred bytes, and of
/// any other text only the first KiB reaches the message.
pub const MAX_ERROR_BYTES: u64 = 64 << 10;
/// How long a retried request waits when the server's answer names no `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// A retry must leave this much of the call's time, so the module can still act on the error.
const DEADLINE_MARGIN: Duration = Duration::from_millis(50);

tokio::task_local! {
    /// The deadline of the module call a Kubernetes request is made for (set by the capability around
    /// each backend call): waits for a `Retry-After` never go past it.
    pub(crate) static CALL_DEADLINE: tokio::time::Instant;
}

/// A client-side rate limit: `qps` requests a second, `burst` at once after an idle spell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RateLimit {
    /// Sustained requests per second.
    pub(crate) qps: f64,
    /// Requests allowed at once (at least 1).
    pub(crate) burst: u32,
}

impl RateLimit {
    /// `velero server`'s default `--client-qps`, used when only `--client-burst` is given.
    pub(crate) const VELERO_QPS: f64 = 20.0;
    /// `velero server`'s default `--client-burst`, used when only `--client-qps` is given.
    pub(crate) const VELERO_BURST: u32 = 30;

    /// The limit Velero's server runs with, from the values of its `--client-qps` and `--client-burst`
    /// (each optional): `None` when neither is given (no limit of our own) or the rate is not positive,
    /// as in client-go. A value that does not parse is an error naming the flag.
    pub(crate) fn from_flags(
        qps: Option<&str>,
        burst: Option<&str>,
    ) -> Result<Option<RateLimit>, BadFlag> {
        if qps.is_none() && burst.is_none() {
            return Ok(None);
        }
        let qps = match qps {
            None => Self::VELERO_QPS,
            Some(text) => text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|q| q.is_finite())
                .ok_or_else(|| BadFlag {
                    flag: "--client-qps",
                    value: text.to_string(),
                    expected: "a number",
                })?,
        };
        let burst = match burst {
            None => Self::VELERO_BURST,
            Some(text) => text
                .trim()
                .parse::<i64>()
                .map_err(|_| BadFlag {
                    flag: "--client-burst",
                    value: text.to_string(),
                    expected: "a whole number",
                })?
                .clamp(1, i64::from(u32::MAX)) as u32,
        };
        Ok((qps > 0.0).then_some(RateLimit { qps, burst }))
    }
}

/// A rate-limit flag of Velero's whose value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}={value:?} is not {expected}")]
pub(crate) struct BadFlag {
    /// The flag.
    pub(crate) flag: &'static str,
    /// Its value.
    pub(crate) value: String,
    /// What it should be.
    pub(crate) expected: &'static str,
}

/// Where the cluster's address and credentials come from.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// A kubeconfig file (`--kubeconfig`); `None` resolves as kubectl does.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig (`--context`); `None` is its current context.
    pub context: Option<String>,
    /// The process's configuration, which says whether it runs in a pod (`KUBERNETES_SERVICE_HOST`)
    /// and where kubectl's files are (`KUBECONFIG`, `HOME`). The default is an empty one.
    pub config: Config,
}

impl ClusterOptions {
    /// kubectl's defaults, as the process's `config` names them.
    pub(crate) fn new(config: Config) -> ClusterOptions {
        ClusterOptions {
            kubeconfig: None,
            context: None,
            config,
        }
    }

    /// Whether there is any configuration to connect with: explicit options, a pod's service account
    /// (`KUBERNETES_SERVICE_HOST`), `KUBECONFIG`, or `~/.kube/config`.
    pub(crate) fn is_configured(&self) -> bool {
        let config = &self.config;
        self.kubeconfig.is_some()
            || self.context.is_some()
            || config.in_pod()
            || config.is_set("KUBECONFIG")
            || config
                .var_os("HOME")
                .is_some_and(|home| PathBuf::from(home).join(".kube/config").exists())
    }
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig is missing, unreadable, or names no usable cluster or context.
    #[error("kubeconfig{}: {source}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Kubeconfig {
        /// The file, when one was named.
        path: Option<PathBuf>,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Running in a pod, but its service account cannot be used.
    #[error("in-cluster configuration (KUBERNETES_SERVICE_HOST is set): {0}")]
    InCluster(#[source] kube::config::InClusterError),
    /// The configuration is readable but no client can be made from it (e.g. bad certificates).
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// What discovery says about one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceInfo {
    kind: String,
    namespaced: bool,
}

/// Resources of one group/version, by plural name.
type GroupVersion = Arc<HashMap<String, ResourceInfo>>;

/// One group version's discovery on its way: every caller that needs it while it is shares its answer.
type Flight = Arc<tokio::sync::OnceCell<Result<GroupVersion, KubeError>>>;

/// What discovery knows, and what it is asking, by group version (`v1`, `kubevirt.io/v1`).
#[derive(Default)]
struct Discovery {
    known: HashMap<String, GroupVersion>,
    /// Discoveries in flight: the first users of a fresh process's group version (a VM backup lists
    /// PVCs and pods at once) send one request between them, not one each.
    flights: HashMap<String, Flight>,
}

/// The HTTP stack requests go through: kube's base-URI, authentication (tokens, refreshed ones
/// included) and extra-header layers over a hyper connection pool with rustls (client certificates
/// and the cluster's CA are in its TLS configuration). `kube::Client` would add a request buffer (one
/// more task hand-off per request) and a tracing layer that logs every 5xx answer at error level, a
/// line Velero counts against the backup even when the request is retried and succeeds.
type Transport = tower::util::BoxCloneSyncService<
    http::Request<kube::client::Body>,
    http::Response<hyper::body::Incoming>,
    tower::BoxError,
>;

/// A live Kubernetes API server.
pub struct LiveCluster {
    transport: Transport,
    /// The server's URL, for error messages.
    server: String,
    discovery: Mutex<Discovery>,
    limiter: Option<TokenBucket>,
    page_size: u32,
    /// The namespace the configuration names (the pod's, in a pod; the context's, else `default`).
    default_namespace: String,
}

impl LiveCluster {
    /// Connects as `options` say (see the module docs for the order). Nothing is sent yet: the first
    /// request is the first call a module makes.
    pub async fn connect(options: &ClusterOptions) -> Result<LiveCluster, ConnectError> {
        install_crypto_provider();
        let explicit = options.kubeconfig.is_some() || options.context.is_some();
        let config = if !explicit && options.config.var_os("KUBERNETES_SERVICE_HOST").is_some() {
            kube::Config::incluster().map_err(ConnectError::InCluster)?
        } else {
            let kube_options = KubeConfigOptions {
                context: options.context.clone(),
                ..KubeConfigOptions::default()
            };
            let kubeconfig_error = |source| ConnectError::Kubeconfig {
                path: options.kubeconfig.clone(),
                source,
            };
            match &options.kubeconfig {
                Some(path) => {
                    let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
                    kube::Config::from_custom_kubeconfig(file, &kube_options).await
                }
                None => kube::Config::from_kubeconfig(&kube_options).await,
            }
            .map_err(kubeconfig_error)?
        };
        tracing::info!(server = %config.cluster_url, "connecting to the Kubernetes API server");
        let server = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        Ok(LiveCluster {
            transport: transport(&config).map_err(ConnectError::Client)?,
            server,
            discovery: Mutex::new(Discovery::default()),
            limiter: None,
            page_size: LIST_PAGE_SIZE,
            default_namespace: config.default_namespace.clone(),
        })
    }

    /// The namespace the configuration names: the pod's service-account namespace in a pod, the
    /// context's namespace (or `default`) with a kubeconfig.
    pub(crate) fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    /// Puts a client-side rate limit in front of every request (`None`: no limit of our own).
    pub(crate) fn with_rate_limit(mut self, limit: Option<RateLimit>) -> LiveCluster {
        self.limiter = limit.map(|l| TokenBucket::new(l.qps, f64::from(l.burst.max(1))));
        self
    }

    /// Lists in pages of `n` objects instead of [`LIST_PAGE_SIZE`].
    pub fn with_page_size(mut self, n: u32) -> LiveCluster {
        self.page_size = n.max(1);
        self
    }

    /// Sends one request, after the rate limit (if any) allows it, and reads a JSON answer. A `429`
    /// (or `503`) with `Retry-After` is sent again after that wait, unless the wait would end past the
    /// call's deadline.
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<Json, KubeError> {
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let bytes = self
            .send_capped(request, MAX_ANSWER_BYTES)
            .await?
            .ok_or_else(|| {
                KubeError::Other(format!(
                    "{method} {}{uri}: the API server's answer is longer than {} MiB; it was not read further",
                    self.server,
                    MAX_ANSWER_BYTES >> 20
                ))
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Json::null());
        }
        // The text parsed out of the body is a copy, held until the guest has it (the body is freed
        // once it is made).
        answer_charge::hold(bytes.len()).map_err(|refused| {
            KubeError::TooLarge(format!("{method} {}{uri}: {refused}", self.server))
        })?;
        Json::parse(&bytes).map_err(|e| {
            KubeError::Other(format!(
                "{method} {}{uri}: the API server's answer is not JSON: {e}",
                self.server
            ))
        })
    }

    /// Like [`send`](Self::send), reading at most `max` bytes of the answer: `None` when it is longer.
    /// Returns the answer as it came. An error's body is read up to [`MAX_ERROR_BYTES`] at most.
    async fn send_capped(
        &self,
        request: http::Request<Vec<u8>>,
        max: u64,
    ) -> Result<Option<AnswerBody>, KubeError> {
        let (parts, body) = request.into_parts();
        let (method, uri) = (&parts.method, &parts.uri);
        let mut retries = 0;
        loop {
            if let Some(limiter) = &self.limiter {
                limiter.acquire().await;
            }
            tracing::debug!(%method, %uri, "kube request");
            let mut request = http::Request::new(kube::client::Body::from(body.clone()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = uri.clone();
            *request.headers_mut() = parts.headers.clone();
            let response = self.transport.clone().oneshot(request).await.map_err(|e| {
                KubeError::Other(format!("{method} {}{uri}: {}", self.server, chain(&*e)))
            })?;
            let status = response.status();
            if let Some(wait) = retry_after_of(&response) {
                if retries < MAX_RETRIES {
                    retries += 1;
                    self.wait_to_retry(method, uri, status, wait).await?;
                    continue;
                }
            }
            let (head, mut incoming) = response.into_parts();
            let failed = head.status.is_client_error() || head.status.is_server_error();
            let max = if failed {
                max.min(MAX_ERROR_BYTES)
            } else {
                max
            };
            // Read frame by frame, so that an answer past `max` is never held whole; the buffer is
            // charged as it grows, to the account of the guest's import it is read for (if any).
            let mut bytes = AnswerBody::new();
            let mut complete = true;
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| {
                    KubeError::Other(format!(
                        "{method} {}{uri}: reading the answer: {e}",
                        self.server
                    ))
                })?;
                if let Ok(data) = frame.into_data() {
                    if (bytes.len() + data.len()) as u64 > max {
                        complete = false;
                        break;
                    }
                    if let Err(refused) = bytes.extend(&data) {
                        return Err(KubeError::TooLarge(format!(
                            "{method} {}{uri}: {refused}",
                            self.server
                        )));
                    }
                }
            }
            if failed {
                return Err(answer_error(
                    method,
                    &self.server,
                    uri,
                    head.status,
                    &bytes,
                    retries,
                ));
            }
            return Ok(complete.then_some(bytes));
        }
    }

    /// Waits `wait` before sending a request again, or fails when that would end too close to (or past)
    /// the call's deadline.
    async fn wait_to_retry(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        status: http::StatusCode,
        wait: Duration,
    ) -> Result<(), KubeError> {
        let now = tokio::time::Instant::now();
        // Outside a module call (no deadline), a wait of more than a minute is not worth it either.
        let left = CALL_DEADLINE
            .try_with(|deadline| deadline.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(60));
        if wait.saturating_add(DEADLINE_MARGIN) > left {
            return Err(KubeError::Other(format!(
                "{method} {}{uri}: the API server answered {status} and asks to retry after {} s, \
                 past the call's deadline ({} ms left); not retried",
                self.server,
                wait.as_secs(),
                left.as_millis()
            )));
        }
        tracing::debug!(%method, %uri, status = status.as_u16(), wait_ms = wait.as_millis() as u64,
            "the API server asks to retry later; waiting");
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// Kind and scope of a resource, from the discovery cache (read on first use, and re-read once when
    /// the resource is missing from it). Callers that need a group version's discovery while one is
    /// on its way wait for that one rather than sending their own.
    async fn resolve(&self, api: &ApiResource) -> Result<ResourceInfo, KubeError> {
        let group_version = api.api_version();
        let flight = {
            let mut discovery = self.cache();
            if let Some(info) = discovery
                .known
                .get(&group_version)
                .and_then(|gv| gv.get(&api.resource))
            {
                return Ok(info.clone());
            }
            discovery
                .flights
                .entry(group_version.clone())
                .or_default()
                .clone()
        };
        // Should the caller sending it go away, the next one waiting sends it.
        let fresh = flight.get_or_init(|| self.discover(api)).await.clone();
        {
            // The first caller back lands the answer (a failure is not kept: the next caller asks
            // again); one back later leaves alone what a newer discovery may have put there.
            let mut discovery = self.cache();
            if discovery
                .flights
                .get(&group_version)
                .is_some_and(|f| Arc::ptr_eq(f, &flight))
            {
                discovery.flights.remove(&group_version);
                if let Ok(fresh) = &fresh {
                    discovery.known.insert(group_version.clone(), fresh.clone());
                }
            }
        }
        fresh?.get(&api.resource).cloned().ok_or_else(|| {
            KubeError::NotFound(format!(
                "the server has no resource {:?} in {group_version}",
                api.resource
            ))
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Discovery> {
        self.discovery.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn discover(&self, api: &ApiResource) -> Result<GroupVersion, KubeError> {
        let path = if api.group.is_empty() {
            format!("/api/{}", segment("version", &api.version)?)
        } else {
            format!(
                "/apis/{}/{}",
                segment("group", &api.group)?,
                segment("version", &api.version)?
            )
        };
        let request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| KubeError::Invalid(format!("{path}: {e}")))?;
        let list = self
            .send(request)
            .await
            .map_err(|e| match e {
                KubeError::NotFound(_) => KubeError::NotFound(format!(
                    "the server has no API group version {}",
                    api.api_version()
                )),
                other => other,
            })?
            .to_value()
            .map_err(|e| KubeError::Other(format!("{path}: the API server's answer is {e}")))?;
        let resources = list
            .get("resources")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let found = resources
            .iter()
            .filter_map(|r| {
                let name = r.get("name")?.as_str()?;
                // Subresources (`pods/status`) are not objects of their own.
                if name.contains('/') {
                    return None;
                }
                let info = ResourceInfo {
                    kind: r.get("kind")?.as_str()?.to_string(),
                    namespaced: r
                        .get("namespaced")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                };
                Some((name.to_string(), info))
            })
            .collect();
        tracing::debug!(group_version = %api.api_version(), "discovered");
        Ok(Arc::new(found))
    }

    /// The URL path of the collection `api` in `namespace`, checked against the resource's scope.
    async fn collection(
        &self,
        api: &ApiResource,
        namespace: &str,
        listing: bool,
    ) -> Result<(String, ResourceInfo), KubeError> {
        let info = self.resolve(api).await?;
        let path = collection_path(api, namespace, listing, &info)?;
        Ok((path, info))
    }

    /// The path a read of `api` in `namespace` goes out on while its group version's first discovery
    /// is still on its way; `None` when that group version was discovered (or the read names no
    /// namespace). A read that waited for discovery would make the first call of a fresh process wait
    /// for the API server twice: it goes out on the namespaced path (what a read in a namespace is
    /// nearly always of) beside discovery, and when discovery says the resource is cluster-scoped its
    /// answer is dropped for the error the call got before.
    fn read_blind(&self, api: &ApiResource, namespace: &str) -> Option<String> {
        // A resource missing from a group version already discovered is most likely no resource
        // at all: it waits for discovery to look again, and is never sent when it is not there.
        if namespace.is_empty() || self.cache().known.contains_key(&api.api_version()) {
            return None;
        }
        let assumed = ResourceInfo {
            kind: String::new(),
            namespaced: true,
        };
        collection_path(api, namespace, true, &assumed).ok()
    }
}

/// The URL path of the collection `api` in `namespace`, given what discovery says of it.
fn collection_path(
    api: &ApiResource,
    namespace: &str,
    listing: bool,
    info: &ResourceInfo,
) -> Result<String, KubeError> {
    let root = if api.group.is_empty() {
        format!("/api/{}", api.version)
    } else {
        format!("/apis/{}/{}", api.group, api.version)
    };
    let resource = segment("resource", &api.resource)?;
    match (info.namespaced, namespace.is_empty()) {
        (true, false) => Ok(format!(
            "{root}/namespaces/{}/{resource}",
            segment("namespace", namespace)?
        )),
        (true, true) if listing => Ok(format!("{root}/{resource}")),
        (true, true) => Err(KubeError::Invalid(format!(
            "{api} is namespaced: the call needs a namespace"
        ))),
        (false, true) => Ok(format!("{root}/{resource}")),
        (false, false) => Err(KubeError::Invalid(format!(
            "{api} is cluster-scoped: call it with namespace \"\", not {namespace:?}"
        ))),
    }
}

impl LiveCluster {
    /// The path of the collection and the object's name, checked.
    async fn object_path(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(Request, String), KubeError> {
        let (path, _) = self.collection(api, namespace, false).await?;
        Ok((Request::new(path), segment("name", name)?.to_string()))
    }
}

/// The HTTP stack of `config` (see [`Transport`]). Connections have `TCP_NODELAY` and the
/// configuration's connect timeout; a request is bounded by its call's deadline.
fn transport(config: &kube::Config) -> Result<Transport, kube::Error> {
    use kube::client::ConfigExt;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let connector = config.rustls_https_connector_with_connector(http)?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(client);
    Ok(Transport::new(service))
}

/// An error and its causes, `: `-separated (hyper's own message alone says little).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Makes rustls use *ring* unless the process already chose a provider: with both *ring* and aws-lc-rs
/// compiled in (another dependency may bring the latter), rustls cannot pick one by itself.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing one is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A path segment from the guest (name, namespace, group, version, resource): non-empty, not `.` or
/// `..`, printable ASCII without `/ ? # %`, so a request can never address another path.
fn segment<'a>(what: &str, value: &'a str) -> Result<&'a str, KubeError> {
    let ok = !value.is_empty()
        && value != "."
        && value != ".."
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"/?#%\\\"<>^`{|}".contains(&b));
    if ok {
        Ok(value)
    } else {
        Err(KubeError::Invalid(format!(
            "{what} {value:?} is not a valid name"
        )))
    }
}

/// The WIT error of an HTTP status code.
fn by_code(code: u16, message: String) -> KubeError {
    match code {
        404 => KubeError::NotFound(message),
        409 => KubeError::Conflict(message),
        401 | 403 => KubeError::Forbidden(message),
        400 | 422 => KubeError::Invalid(message),
        _ => KubeError::Other(message),
    }
}

/// The error of an answer with a 4xx/5xx status: the message of its `Status` body, else its text.
fn answer_error(
    method: &http::Method,
    server: &str,
    uri: &http::Uri,
    code: http::StatusCode,
    body: &[u8],
    retries: u32,
) -> KubeError {
    let from_status = serde_json::from_slice::<kube::core::Status>(body)
        .ok()
        .map(|s| s.message)
        .filter(|m| !m.is_empty());
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let mut message = match from_status {
        Some(message) => message,
        None if !text.is_empty() && text.len() <= 1024 => {
            format!("{method} {server}{uri}: HTTP {code}: {text}")
        }
        None => format!("{method} {server}{uri}: HTTP {code}"),
    };
    if retries > 0 {
        message.push_str(&format!(" (after {retries} retries)"));
    }
    by_code(code.as_u16(), message)
}

/// How long to wait before sending a request again: a `429` waits its `Retry-After` (in seconds;
/// [`DEFAULT_RETRY_AFTER`] when absent or not a number), a `503` only when it names one. Other answers
/// are not retried.
fn retry_after_of<B>(response: &http::Response<B>) -> Option<Duration> {
    let named = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    match response.status() {
        http::StatusCode::TOO_MANY_REQUESTS => Some(named.unwrap_or(DEFAULT_RETRY_AFTER)),
        http::StatusCode::SERVICE_UNAVAILABLE => named,
        _ => None,
    }
}

fn build(
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<http::Request<Vec<u8>>, KubeError> {
    request.map_err(|e| KubeError::Invalid(format!("the request cannot be built: {e}")))
}

fn body(object: &Value) -> Result<Vec<u8>, KubeError> {
    serde_json::to_vec(object)
        .map_err(|e| KubeError::Invalid(format!("the object cannot be serialized: {e}")))
}

#[async_trait]
impl Backend<KubeCall> for LiveCluster {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        let (api, namespace) = call.target();
        let (api, ns) = (&api.clone(), &namespace.to_string());
        match call {
            KubeCall::Get { name, .. } => self.read(api, ns, &name).await.map(KubeAnswer::Object),
            KubeCall::List { options, .. } => self
                .select(api, ns, &options)
                .await
                .map(KubeAnswer::Objects),
            KubeCall::Create { object, .. } => {
                self.insert(api, ns, object).await.map(KubeAnswer::Object)
            }
            KubeCall::Update { object, .. } => {
                self.replace(api, ns, object).await.map(KubeAnswer::Object)
            }
            KubeCall::Patch { name, patch, .. } => self
                .apply(api, ns, &name, &patch)
                .await
                .map(KubeAnswer::Object),
            KubeCall::Delete { name, .. } => self
                .remove(api, ns, &name)
                .await
                .map(|()| KubeAnswer::Deleted),
        }
    }
}

impl LiveCluster {
    async fn read(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Json, KubeError> {
        if let (Some(path), Ok(checked)) = (self.read_blind(api, namespace), segment("name", name))
        {
            let request = build(Request::new(path).get(checked, &GetParams::default()))?;
            // Discovery's failure or scope first, as when the read waited for it.
            let (info, answer) = tokio::join!(self.resolve(api), self.send(request));
            collection_path(api, namespace, false, &info?)?;
            return answer;
        }
        let (request, name) = self.object_path(api, namespace, name).await?;
        self.send(build(request.get(&name, &GetParams::default()))?)
            .await
    }

    async fn select(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Json>, KubeError> {
        let (path, info) = match self.read_blind(api, namespace) {
            Some(path) => (path, None),
            None => {
                let (path, info) = self.collection(api, namespace, true).await?;
                (path, Some(info))
            }
        };
        let pages = self.pages(api, path, options);
        let (info, items) = match info {
            Some(info) => (info, pages.await),
            None => {
                // Discovery's failure or scope first, as when the list waited for it.
                let (info, items) = tokio::join!(self.resolve(api), pages);
                let info = info?;
                collection_path(api, namespace, true, &info)?;
                (info, items)
            }
        };
        let api_version = api.api_version();
        Ok(items?
            .into_iter()
            .map(|item| Json::from_raw(item).with_type(&api_version, &info.kind))
            .collect())
    }

    /// The items of a list of `path`, page by page, as they came.
    async fn pages(
        &self,
        api: &ApiResource,
        path: String,
        options: &ListOptions,
    ) -> Result<Vec<Box<serde_json::value::RawValue>>, KubeError> {
        /// One page of a list: its items as they came, and where the next page starts.
        #[derive(serde::Deserialize)]
        struct Page<'a> {
            #[serde(borrow, default)]
            items: Option<Vec<&'a serde_json::value::RawValue>>,
            #[serde(default)]
            metadata: PageMetadata,
        }
        #[derive(serde::Deserialize, Default)]
        struct PageMetadata {
            #[serde(rename = "continue", default)]
            next: Option<String>,
        }
        let request = Request::new(path);
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.trim().is_empty());
        let mut params = ListParams {
            label_selector: non_empty(&options.label_selector_text),
            field_selector: non_empty(&options.field_selector_text),
            limit: Some(self.page_size),
            ..ListParams::default()
        };
        let mut items = Vec::new();
        // Pages are read only while what they hold could still reach the guest.
        let max = options.max_bytes.unwrap_or(u64::MAX);
        let mut received: u64 = 0;
        loop {
            let left = max.saturating_sub(received);
            let Some(bytes) = self
                .send_capped(build(request.list(&params))?, left)
                .await?
            else {
                return Err(KubeError::list_too_large(api, max));
            };
            received += bytes.len() as u64;
            let page: Page = serde_json::from_slice(&bytes).map_err(|e| {
                KubeError::Other(format!("listing {api}: the answer is not a list: {e}"))
            })?;
            // Each item is copied out of the page and kept until the guest has it; giving one its
            // type makes one more copy of it at a time (its text with both fields, then parsed).
            let page_items = page.items.as_deref().unwrap_or_default();
            let longest = page_items.iter().map(|i| i.get().len()).max().unwrap_or(0);
            for item in page_items {
                answer_charge::hold(item.get().len())
                    .map_err(|refused| KubeError::TooLarge(format!("listing {api}: {refused}")))?;
            }
            let typing = 2 * (longest + 64);
            answer_charge::hold(typing)
                .map_err(|refused| KubeError::TooLarge(format!("listing {api}: {refused}")))?;
            items.extend(
                page.items
                    .unwrap_or_default()
                    .into_iter()
                    .map(|item| item.to_owned()),
            );
            answer_charge::release(typing);
            match page.metadata.next.filter(|c| !c.is_empty()) {
                Some(token) => params.continue_token = Some(token),
                None => return Ok(items),
            }
        }
    }

    async fn insert(
        &self,
        api: &ApiResource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Json, KubeError> {
        let (path, info) = self.collection(api, namespace, false).await?;
        object["apiVersion"] = Value::String(api.api_version());
        if object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            object["kind"] = Value::String(info.kind);
        }
        let request = Request::new(path);
        self.send(build(
            request.create(&PostParams::default(), body(&object)?),
        )?)
        .await
    }

    async fn replace(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Json, KubeError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let (request, name) = self.object_path(api, namespace, name).await?;
        self.send(build(request.replace(
            &name,
            &PostParams::default(),
            body(&object)?,
        ))?)
        .await
    }

    async fn apply(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Json, KubeError> {
        let (request, name) = self.object_path(api, namespace, name).await?;
        let params = PatchParams::default();
        let request = match patch {
            Patch::Merge(doc) => request.patch(&name, &params, &kube::api::Patch::Merge(doc)),
            Patch::Json(ops) => {
                request.patch(&name, &params, &kube::api::Patch::<()>::Json(ops.clone()))
            }
            // `application/apply-patch+yaml` (JSON is YAML), `?fieldManager=…&force=true`.
            Patch::Apply {
                field_manager,
                object,
            } => request.patch(
                &name,
                &PatchParams::apply(field_manager).force(),
                &kube::api::Patch::Apply(object),
            ),
        };
        self.send(build(request)?).await
    }

    async fn remove(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        let (request, name) = self.object_path(api, namespace, name).await?;
        self.send(build(request.delete(&name, &DeleteParams::default()))?)
            .await?;
        Ok(())
    }
}

/// The live cluster of a plugin process, connected on the first call a module makes rather than at
/// start-up: reading the kubeconfig or the service account and building the client (TLS roots, the
/// connection pool) is then off the path to the handshake, and a process whose actions never call the
/// cluster never does it. A configuration that cannot be used fails every call with the reason (logged
/// once, at error level).
pub(crate) struct LazyCluster {
    options: ClusterOptions,
    rate_limit: Option<RateLimit>,
    cluster: tokio::sync::OnceCell<Result<LiveCluster, Unconnected>>,
}

/// Why a [`LazyCluster`] has no cluster: every call fails with this.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unconnected {
    /// Nothing says where the cluster is.
    #[error("no Kubernetes configuration: not in a pod (KUBERNETES_SERVICE_HOST unset), no KUBECONFIG, no ~/.kube/config")]
    NotConfigured,
    /// The configuration cannot be used.
    #[error("cannot use the Kubernetes API: {0}")]
    Connect(#[source] ConnectError),
}

impl LazyCluster {
    /// A cluster that will connect as `options` say, with `rate_limit` in front of its requests.
    pub(crate) fn new(options: ClusterOptions, rate_limit: Option<RateLimit>) -> LazyCluster {
        LazyCluster {
            options,
            rate_limit,
            cluster: tokio::sync::OnceCell::new(),
        }
    }

    async fn cluster(&self) -> Result<&LiveCluster, KubeError> {
        let connected = self
            .cluster
            .get_or_init(|| async {
                if !self.options.is_configured() {
                    return Err(Unconnected::NotConfigured);
                }
                match LiveCluster::connect(&self.options).await {
                    Ok(cluster) => Ok(cluster.with_rate_limit(self.rate_limit)),
                    Err(e) => {
                        let unconnected = Unconnected::Connect(e);
                        tracing::error!("{unconnected}");
                        Err(unconnected)
                    }
                }
            })
            .await;
        connected
            .as_ref()
            .map_err(|e| KubeError::Other(e.to_string()))
    }

    /// Connects now rather than at the first call: reads the configuration and builds the client
    /// (TLS and the system's root certificates among it) while Velero is busy with the handshake, so
    /// that the first call of a fresh process does not wait for it. Sends nothing; a configuration
    /// that cannot be used is reported as the first call would report it.
    pub(crate) async fn connect_early(&self) {
        if let Err(e) = self.cluster().await {
            tracing::debug!("not connected ahead of the first call: {e}");
        }
    }

    /// The namespace the configuration names (see [`LiveCluster::default_namespace`]); connects.
    pub(crate) async fn default_namespace(&self) -> Result<String, KubeError> {
        Ok(self.cluster().await?.default_namespace().to_string())
    }
}

#[async_trait]
impl Backend<KubeCall> for LazyCluster {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        self.cluster().await?.call(call).await
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up; each request takes one, waiting
/// for it when none is left. Shared by every module of the process.
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(rate: f64, burst: f64) -> TokenBucket {
        TokenBucket {
            rate,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token at `now`; returns how long the caller must wait before using it.
    pub(crate) fn reserve(&self, now: Instant) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = *state;
        let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate)
            .min(self.burst);
        let left = refilled - 1.0;
        *state = (left, now.max(last));
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.rate)
        }
    }

    /// Waits for a token.
    pub(crate) async fn acquire(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            tracing::debug!(
                wait_ms = wait.as_millis() as u64,
                "kube client-side rate limit"
            );
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let bucket = TokenBucket::new(10.0, 3.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        // The fourth waits one interval, the fifth two: reservations queue up.
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
        assert_eq!(bucket.reserve(t0), Duration::from_millis(200));
        // After a long idle spell the bucket is full again, but never fuller than the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(later), Duration::ZERO);
        }
        assert!(bucket.reserve(later) > Duration::ZERO);
    }

    #[test]
    fn guest_names_cannot_leave_their_path_segment() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "x?watch=true",
            "a%2Fb",
            "a#b",
            "a b",
            "é",
        ] {
            assert!(
                matches!(segment("name", bad), Err(KubeError::Invalid(_))),
                "{bad:?}"
            );
        }
        for good in ["web-0", "system:controller:x", "a.b.c", "v1beta1"] {
            assert_eq!(segment("name", good).unwrap(), good);
        }
    }

    #[test]
    fn status_codes_map_to_wit_errors() {
        let err = |code: u16| {
            let status = kube::core::Status::failure("boom", "Reason").with_code(code);
            answer_error(
                &http::Method::GET,
                "https://k8s",
                &http::Uri::from_static("/x"),
                http::StatusCode::from_u16(code).unwrap(),
                &serde_json::to_vec(&status).unwrap(),
                0,
            )
        };
        assert_eq!(err(404), KubeError::NotFound("boom".into()));
        assert_eq!(err(409), KubeError::Conflict("boom".into()));
        assert_eq!(err(401), KubeError::Forbidden("boom".into()));
        assert_eq!(err(403), KubeError::Forbidden("boom".into()));
        assert_eq!(err(400), KubeError::Invalid("boom".into()));
        assert_eq!(err(422), KubeError::Invalid("boom".into()));
        assert_eq!(err(500), KubeError::Other("boom".into()));
        assert_eq!(err(429), KubeError::Other("boom".into()));
        // An answer that is no Status keeps its text, and the request it answered.
        let plain = answer_error(
            &http::Method::GET,
            "https://k8s",
            &http::Uri::from_static("/x"),
            http::StatusCode::BAD_GATEWAY,
            b"upstream down\n",
            2,
        );
        assert_eq!(
            plain,
            KubeError::Other(
                "GET https://k8s/x: HTTP 502 Bad Gateway: upstream down (after 2 retries)".into()
            )
        );
    }

    #[test]
    fn only_too_many_requests_and_unavailable_with_a_wait_are_retried() {
        let answer = |code: u16, retry_after: Option<&str>| {
            let mut response = http::Response::builder().status(code);
            if let Some(value) = retry_after {
                response = response.header("Retry-After", value);
            }
            retry_after_of(&response.body(()).unwrap())
        };
        assert_eq!(answer(429, Some("3")), Some(Duration::from_secs(3)));
        assert_eq!(answer(429, None), Some(DEFAULT_RETRY_AFTER));
        assert_eq!(answer(429, Some("soon")), Some(DEFAULT_RETRY_AFTER));
        assert_eq!(answer(503, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(answer(503, None), None);
        assert_eq!(answer(500, Some("2")), None);
        assert_eq!(answer(200, Some("2")), None);
    }
}
