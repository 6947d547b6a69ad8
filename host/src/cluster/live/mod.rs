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
//!
//! One file per concern, each importing only those listed before it: [`path_segment`] (a guest's
//! names kept to one path segment), [`throttle`] (the rate limit and the waits a `429`/`503` asks
//! for), [`options`] (where the configuration comes from), [`api_server`] (one request and its
//! capped answer), [`discovery`], [`verbs`], [`client`] ([`LiveCluster`]) and [`lazy`]
//! ([`LazyCluster`]).
//!
//! [`Json`]: super::Json
//! [`LIST_PAGE_SIZE`]: verbs::LIST_PAGE_SIZE

mod api_server;
mod client;
mod discovery;
mod lazy;
mod options;
mod path_segment;
mod throttle;
mod verbs;

pub use api_server::{MAX_ANSWER_BYTES, MAX_ERROR_BYTES};
pub use client::LiveCluster;
pub(crate) use lazy::LazyCluster;
pub use options::{ClusterOptions, ConnectError};
pub(crate) use throttle::{BadFlag, RateLimit, CALL_DEADLINE};
