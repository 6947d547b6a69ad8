//! Read views: what the host read for one backup (or restore), kept to answer the later reads of the
//! same backup without asking the API server again (docs/read-views.md).
//!
//! A view belongs to one Backup or Restore object, named by its `metadata.uid`. The first read of a
//! resource in a namespace lists that resource in the whole namespace, once; that listing then answers
//! every get of an object of it (by name) and every list of it with a label selector or a
//! `metadata.name`/`metadata.namespace` field selector (filtered here, in API order). So a view shows
//! the namespace as it was at the first read, as Velero's own listing at the start of a backup does.
//!
//! What keeps it correct and bounded:
//! - only reads in a namespace are served, never cluster-wide ones, and only of resources the calling
//!   module's grant cannot write there; a module whose manifest says `read-views = false` is never
//!   served from a view; any write through the host drops the listings of its resource and namespace;
//! - a view ends [`IDLE`] after the last read of its backup, and [`LIFETIME`] after it began,
//!   whichever comes first (Velero does not tell a plugin that a backup ended);
//! - the listings of all views together hold at most the process's view budget in bytes
//!   ([`BUDGET_VARIABLE`]); a listing that does not fit is not kept and its reads go to the API server
//!   as without views (read through). A listing that fails is read through too;
//! - a listing is host work done for the module whose read starts it, so it counts against that
//!   module's limits: it is read only while it fits what the module could receive in one answer (its
//!   memory limit), and a listing larger than a module's memory limit never answers that module's
//!   reads (they go through).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::capabilities::memory::MemoryBudget;
use crate::cluster::{ApiResource, Json, KubeAnswer, KubeCall, KubeError, ListOptions};
use crate::config::ReadViewSettings;

/// How long a view lives after the last read of its backup.
pub(crate) const IDLE: Duration = Duration::from_secs(30);
/// How long a view lives at most, however busy its backup.
pub(crate) const LIFETIME: Duration = Duration::from_secs(10 * 60);
/// The variable that sets the bytes all views may hold together (`256MiB`, or bytes).
pub(crate) use crate::config::VELERO_WASM_READ_VIEW_BUDGET as BUDGET_VARIABLE;
/// The budget when [`BUDGET_VARIABLE`] is not set.
pub(crate) const DEFAULT_BUDGET: u64 = 256 << 20;
/// The variable that turns views off for the whole process (`off`, `false` or `0`).
pub(crate) use crate::config::VELERO_WASM_READ_VIEWS as SWITCH_VARIABLE;

/// The bounds of the views of one process.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// See [`IDLE`].
    pub(crate) idle: Duration,
    /// See [`LIFETIME`].
    pub(crate) lifetime: Duration,
    /// Bytes all listings may hold together.
    pub(crate) budget: u64,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            idle: IDLE,
            lifetime: LIFETIME,
            budget: DEFAULT_BUDGET,
        }
    }
}

/// What the views did so far (also exported as metrics, see [`crate::metrics`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Reads answered from a view.
    pub hits: u64,
    /// Reads a view could have answered that went to the API server: the first read of a resource in a
    /// namespace (which lists it), and reads of a listing that failed or did not fit the budget.
    pub misses: u64,
    /// Bytes the listings hold now.
    pub bytes: u64,
    /// Views alive now.
    pub views: usize,
}

/// The views of every backup the process serves.
pub struct ReadViews {
    bounds: Bounds,
    views: Mutex<HashMap<Arc<str>, Arc<View>>>,
    bytes: Arc<AtomicU64>,
    hits: AtomicU64,
    misses: AtomicU64,
    sweeping: AtomicBool,
}

/// A listing being read or read: `None` once its read failed or did not fit (reads go through).
type Slot = Arc<OnceCell<Option<Arc<Listing>>>>;

/// One backup's view: a listing per (resource, namespace), each read at most once.
struct View {
    started: Instant,
    last_read: Mutex<Instant>,
    listings: Mutex<HashMap<(ApiResource, String), Slot>>,
}

/// Why a view's listing was not kept.
enum Failed {
    /// It did not fit what was left of the process's view budget.
    Budget,
    /// The API server refused or failed it, or it passed the memory limit of the module it was made
    /// for: what that module's own unselected list would have answered.
    Module(KubeError),
}

/// One resource in one namespace, as listed: the objects in API order, their names and labels.
struct Listing {
    objects: Vec<Json>,
    /// What the whole listing takes in a guest's memory, counted as a module's own list is.
    answer_bytes: u64,
    /// Per object, `{"metadata": {"name", "namespace", "labels"}}`: what selectors look at.
    selected_by: Vec<Value>,
    by_name: HashMap<String, usize>,
    bytes: u64,
    /// The process's count of bytes held, given back when the listing is dropped.
    held: Arc<AtomicU64>,
    /// The process's memory budget, which a kept listing's bytes are reserved from too (the views
    /// and the calls share the memory the container leaves the plugin); `None` until it is kept.
    budget: Option<&'static MemoryBudget>,
}

impl Drop for Listing {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::AcqRel);
        crate::metrics::note_view_bytes(-(self.bytes as i64));
        if let Some(budget) = self.budget {
            budget.release(self.bytes);
        }
    }
}

impl ReadViews {
    /// The views of a process with these bounds.
    pub fn new(bounds: Bounds) -> Arc<ReadViews> {
        Arc::new(ReadViews {
            bounds,
            views: Mutex::new(HashMap::new()),
            bytes: Arc::new(AtomicU64::new(0)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            sweeping: AtomicBool::new(false),
        })
    }

    /// The views of the plugin process as `config` says: `None` when [`SWITCH_VARIABLE`] turns them off; the budget
    /// from [`BUDGET_VARIABLE`] (an unusable value is reported and the default used).
    pub(crate) fn from_config(config: &crate::config::Config) -> Option<Arc<ReadViews>> {
        Self::from_settings(config.read_views())
    }

    /// [`ReadViews::from_config`] with the settings given.
    pub(crate) fn from_settings(settings: ReadViewSettings) -> Option<Arc<ReadViews>> {
        if let Some(switch) = settings.switch {
            if matches!(
                switch.trim().to_ascii_lowercase().as_str(),
                "off" | "false" | "0" | "no"
            ) {
                tracing::debug!("{SWITCH_VARIABLE}={switch}: reads are not kept per backup");
                return None;
            }
        }
        let mut bounds = Bounds::default();
        if let Some(text) = settings.budget {
            match velero_wasm_grant::parse_byte_size(&text) {
                Some(bytes) => bounds.budget = bytes,
                None => tracing::warn!(
                    "{BUDGET_VARIABLE}={text:?} is not a size like \"256MiB\"; using the default"
                ),
            }
        }
        Some(ReadViews::new(bounds))
    }

    /// What the views did so far.
    pub fn stats(&self) -> Stats {
        Stats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            views: self.lock().len(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<View>>> {
        self.views.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers a read of the backup `key` from its view, listing the resource in the namespace first
    /// when this is the view's first read of it (with `fetch`, the backend under the call's deadline).
    /// `limit` is the reading module's memory limit: the most a listing made for it may hold, and the
    /// largest listing that may answer it. `None`: the view cannot answer this read (not a read a view
    /// serves, or the listing failed, did not fit the budget or is larger than `limit`); the caller
    /// reads through.
    pub(crate) async fn answer<F, Fut>(
        self: &Arc<Self>,
        key: &str,
        call: &KubeCall,
        limit: u64,
        fetch: F,
    ) -> Option<Result<KubeAnswer, KubeError>>
    where
        F: FnOnce(KubeCall) -> Fut,
        Fut: Future<Output = Result<KubeAnswer, KubeError>>,
    {
        let (api, namespace) = servable(call)?;
        let now = Instant::now();
        let view = self.view(key, now);
        let cell = view.cell(api, namespace);
        let mut listed_now = false;
        let mut failed = None;
        let listing = cell
            .get_or_init(|| async {
                listed_now = true;
                match self.list(api, namespace, limit, fetch).await {
                    Ok(listing) => Some(listing),
                    Err(failure) => {
                        failed = Some(failure);
                        None
                    }
                }
            })
            .await
            .clone();
        if let Some(Failed::Module(error)) = failed {
            // The listing failed as this very read would have (an unselected list of the namespace,
            // bounded by the module's own limit): its answer is the read's, without asking again.
            if unselected_list(call) {
                self.misses.fetch_add(1, Ordering::Relaxed);
                crate::metrics::note_view_read(false);
                return Some(Err(error));
            }
        }
        let answer = listing
            .as_deref()
            .filter(|l| l.answer_bytes <= limit)
            .map(|l| l.answer(call, api));
        if answer.is_some() && !listed_now {
            self.hits.fetch_add(1, Ordering::Relaxed);
            crate::metrics::note_view_read(true);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            crate::metrics::note_view_read(false);
        }
        answer
    }

    /// Lists `api` in `namespace` for a view, reading pages only while they fit both what is left of
    /// the budget and `limit`, the memory limit of the module the listing is made for.
    async fn list<F, Fut>(
        &self,
        api: &ApiResource,
        namespace: &str,
        limit: u64,
        fetch: F,
    ) -> Result<Arc<Listing>, Failed>
    where
        F: FnOnce(KubeCall) -> Fut,
        Fut: Future<Output = Result<KubeAnswer, KubeError>>,
    {
        let left = self
            .bounds
            .budget
            .saturating_sub(self.bytes.load(Ordering::Relaxed));
        let options = ListOptions {
            max_bytes: Some(left.min(limit)),
            ..ListOptions::default()
        };
        let call = KubeCall::List {
            api: api.clone(),
            namespace: namespace.to_string(),
            options,
        };
        let objects = match fetch(call).await.and_then(KubeAnswer::objects) {
            Ok(objects) => objects,
            Err(e) => {
                tracing::debug!(
                    "listing {api} in namespace {namespace} for a read view failed; its reads go to the API server: {e}"
                );
                return Err(match e {
                    KubeError::TooLarge(_) if left < limit => Failed::Budget,
                    e => Failed::Module(e),
                });
            }
        };
        let listing = Listing::of(objects, self.bytes.clone());
        // Reserve the listing's bytes; over the budget it is dropped (its Drop gives nothing back).
        let reserved = self
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(listing.bytes)
                    .filter(|&total| total <= self.bounds.budget)
            })
            .is_ok();
        if !reserved {
            tracing::debug!(
                "listing {api} in namespace {namespace} ({} bytes) does not fit the read views' budget of {} bytes ({BUDGET_VARIABLE}); its reads go to the API server",
                listing.bytes,
                self.bounds.budget
            );
            let mut listing = listing;
            listing.bytes = 0;
            return Err(Failed::Budget);
        }
        crate::metrics::note_view_bytes(listing.bytes as i64);
        let mut listing = listing;
        let process = MemoryBudget::process();
        if !process.reserve(listing.bytes) {
            tracing::debug!(
                "listing {api} in namespace {namespace} ({} bytes) does not fit what is left of the process's memory budget of {} MiB; its reads go to the API server",
                listing.bytes,
                process.limit() >> 20
            );
            // Dropped: gives back its place in the views' budget, and nothing of the process's.
            return Err(Failed::Budget);
        }
        listing.budget = Some(process);
        Ok(Arc::new(listing))
    }

    /// The view of `key`, made if there is none (or the one there has ended); ends expired views.
    fn view(self: &Arc<Self>, key: &str, now: Instant) -> Arc<View> {
        let mut views = self.lock();
        self.sweep_locked(&mut views, now);
        let view = views
            .entry(Arc::from(key))
            .or_insert_with(|| {
                Arc::new(View {
                    started: now,
                    last_read: Mutex::new(now),
                    listings: Mutex::new(HashMap::new()),
                })
            })
            .clone();
        *view.last_read.lock().unwrap_or_else(|e| e.into_inner()) = now;
        drop(views);
        self.start_sweeping();
        view
    }

    /// Drops what any view holds of `api` in `namespace` (a write went through the host).
    pub(crate) fn invalidate(&self, api: &ApiResource, namespace: &str) {
        let views: Vec<Arc<View>> = self.lock().values().cloned().collect();
        let key = (api.clone(), namespace.to_string());
        for view in views {
            view.listings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        }
    }

    /// Ends the views past their bounds.
    pub fn sweep(&self) {
        let mut views = self.lock();
        self.sweep_locked(&mut views, Instant::now());
    }

    fn sweep_locked(&self, views: &mut HashMap<Arc<str>, Arc<View>>, now: Instant) {
        views.retain(|_, view| !view.ended(now, &self.bounds));
    }

    /// Starts the task that ends views when no read comes to do it, unless it runs already; it stops
    /// once no view is left.
    fn start_sweeping(self: &Arc<Self>) {
        if self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.sweeping.store(false, Ordering::Release);
            return;
        };
        let weak: Weak<ReadViews> = Arc::downgrade(self);
        let period = (self.bounds.idle / 4).max(Duration::from_millis(10));
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(views) = weak.upgrade() else { return };
                let mut held = views.lock();
                views.sweep_locked(&mut held, Instant::now());
                if held.is_empty() {
                    views.sweeping.store(false, Ordering::Release);
                    return;
                }
            }
        });
    }
}

impl View {
    fn ended(&self, now: Instant, bounds: &Bounds) -> bool {
        let last = *self.last_read.lock().unwrap_or_else(|e| e.into_inner());
        now.duration_since(last) >= bounds.idle
            || now.duration_since(self.started) >= bounds.lifetime
    }

    fn cell(&self, api: &ApiResource, namespace: &str) -> Arc<OnceCell<Option<Arc<Listing>>>> {
        self.listings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((api.clone(), namespace.to_string()))
            .or_default()
            .clone()
    }
}

impl Listing {
    fn of(objects: Vec<Json>, held: Arc<AtomicU64>) -> Listing {
        let mut selected_by = Vec::with_capacity(objects.len());
        let mut by_name = HashMap::with_capacity(objects.len());
        let mut bytes = 0u64;
        let mut answer_bytes = 0u64;
        for (at, object) in objects.iter().enumerate() {
            #[derive(serde::Deserialize, Default)]
            struct Meta {
                #[serde(default)]
                metadata: Value,
            }
            let meta: Meta = serde_json::from_str(object.as_str()).unwrap_or_default();
            let pick = |field: &str| meta.metadata.get(field).cloned().unwrap_or(Value::Null);
            let selected = serde_json::json!({"metadata": {
                "name": pick("name"), "namespace": pick("namespace"), "labels": pick("labels"),
            }});
            if let Some(name) = selected.pointer("/metadata/name").and_then(Value::as_str) {
                by_name.entry(name.to_string()).or_insert(at);
            }
            // The text, and about as much again for the names and labels kept beside it.
            bytes += object.as_str().len() as u64 + selected.to_string().len() as u64 + 64;
            // A string in the guest's list also takes a pointer and a length.
            answer_bytes += object.as_str().len() as u64 + 8;
            selected_by.push(selected);
        }
        Listing {
            objects,
            answer_bytes,
            selected_by,
            by_name,
            bytes,
            held,
            budget: None,
        }
    }

    /// The answer to a get or a list, as the API server would give it for this listing.
    fn answer(&self, call: &KubeCall, api: &ApiResource) -> Result<KubeAnswer, KubeError> {
        match call {
            KubeCall::Get { name, .. } => match self.by_name.get(name) {
                Some(&at) => Ok(KubeAnswer::Object(self.objects[at].clone())),
                None => Err(KubeError::NotFound(format!(
                    "{} \"{name}\" not found",
                    api.group_resource()
                ))),
            },
            KubeCall::List { options, .. } => Ok(KubeAnswer::Objects(
                self.objects
                    .iter()
                    .zip(&self.selected_by)
                    .filter(|(_, selected)| options.matches(selected))
                    .map(|(object, _)| object.clone())
                    .collect(),
            )),
            _ => Err(KubeError::Other("a view answers reads only".into())),
        }
    }
}

/// The resource and namespace of a read a view can answer: a get in a namespace, or a list in a
/// namespace whose field selector names only `metadata.name` and `metadata.namespace` (the fields
/// every resource can be selected by; others are the API server's to judge).
fn servable(call: &KubeCall) -> Option<(&ApiResource, &str)> {
    match call {
        KubeCall::Get { api, namespace, .. } if !namespace.is_empty() => Some((api, namespace)),
        KubeCall::List {
            api,
            namespace,
            options,
        } if !namespace.is_empty() && metadata_fields_only(&options.field_selector_text) => {
            Some((api, namespace))
        }
        _ => None,
    }
}

/// Whether a read is a list of a whole namespace, as a view's own listing is.
fn unselected_list(call: &KubeCall) -> bool {
    matches!(call, KubeCall::List { options, .. }
        if options.label_selector_text.trim().is_empty()
            && options.field_selector_text.trim().is_empty())
}

fn metadata_fields_only(selector: &str) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            let field = term.split(['=', '!']).next().unwrap_or("").trim();
            matches!(field, "metadata.name" | "metadata.namespace")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::capabilities::Clock;
    use crate::cluster::fixture::FixtureCluster;
    use crate::cluster::KubeApi;
    use serde_json::json;
    use std::sync::atomic::AtomicUsize;

    fn pods() -> ApiResource {
        ApiResource::new("", "v1", "pods")
    }

    /// The fixture cluster, counting the calls that reach it.
    struct Counted {
        cluster: FixtureCluster,
        calls: AtomicUsize,
    }

    impl Counted {
        async fn with_pods(names: &[(&str, &str, &str)]) -> Counted {
            let cluster = FixtureCluster::empty(Clock::fixed(std::time::UNIX_EPOCH));
            for (ns, name, app) in names {
                let pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns, "labels": {"app": app}}});
                cluster.create(&pods(), ns, pod).await.unwrap();
            }
            Counted {
                cluster,
                calls: AtomicUsize::new(0),
            }
        }

        async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.cluster.call(call).await
        }

        /// A read through the view, else straight to the cluster, as the capability does.
        async fn read(
            &self,
            views: &Arc<ReadViews>,
            key: &str,
            call: KubeCall,
        ) -> Result<KubeAnswer, KubeError> {
            self.read_as(views, key, call, u64::MAX).await
        }

        /// [`Counted::read`] by a module whose memory limit is `limit`.
        async fn read_as(
            &self,
            views: &Arc<ReadViews>,
            key: &str,
            call: KubeCall,
            limit: u64,
        ) -> Result<KubeAnswer, KubeError> {
            match views.answer(key, &call, limit, |c| self.call(c)).await {
                Some(answer) => answer,
                None => self.call(call).await,
            }
        }
    }

    fn get(ns: &str, name: &str) -> KubeCall {
        KubeCall::Get {
            api: pods(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn list(ns: &str, labels: &str, fields: &str) -> KubeCall {
        KubeCall::List {
            api: pods(),
            namespace: ns.into(),
            options: ListOptions::parse(labels, fields).unwrap(),
        }
    }

    fn names(answer: Result<KubeAnswer, KubeError>) -> Vec<String> {
        answer
            .unwrap()
            .objects()
            .unwrap()
            .iter()
            .map(|o| {
                o.to_value().unwrap()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[tokio::test]
    async fn a_view_answers_as_the_cluster_does_with_one_list_per_namespace() {
        let c = Counted::with_pods(&[
            ("a", "p1", "web"),
            ("a", "p2", "db"),
            ("a", "p3", "web"),
            ("b", "q1", "web"),
        ])
        .await;
        let views = ReadViews::new(Bounds::default());
        let calls = [
            get("a", "p2"),
            get("a", "nope"),
            list("a", "app=web", ""),
            list("a", "app in (db)", "metadata.name!=p9"),
            list("a", "", "metadata.name=p3"),
            get("b", "q1"),
            list("b", "app=db", ""),
        ];
        for call in calls {
            let direct = c.cluster.call(call.clone()).await;
            let viewed = c.read(&views, "backup-1", call).await;
            assert_eq!(viewed, direct);
        }
        // One list of pods in each namespace reached the cluster.
        assert_eq!(c.calls.load(Ordering::SeqCst), 2);
        let stats = views.stats();
        assert_eq!((stats.hits, stats.misses, stats.views), (5, 2, 1));
        assert!(stats.bytes > 0);
        // Another backup has a view of its own.
        assert_eq!(
            names(c.read(&views, "backup-2", list("a", "app=web", "")).await),
            ["p1", "p3"]
        );
        assert_eq!(c.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_view_shows_the_namespace_as_first_read_until_a_write_invalidates_it() {
        let c = Counted::with_pods(&[("a", "p1", "web")]).await;
        let views = ReadViews::new(Bounds::default());
        assert_eq!(names(c.read(&views, "k", list("a", "", "")).await), ["p1"]);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2", "namespace": "a"}});
        c.cluster.create(&pods(), "a", pod).await.unwrap();
        assert_eq!(names(c.read(&views, "k", list("a", "", "")).await), ["p1"]);
        views.invalidate(&pods(), "a");
        assert_eq!(
            names(c.read(&views, "k", list("a", "", "")).await),
            ["p1", "p2"]
        );
    }

    #[tokio::test]
    async fn reads_a_view_does_not_serve_go_through() {
        let c = Counted::with_pods(&[("a", "p1", "web")]).await;
        let views = ReadViews::new(Bounds::default());
        for call in [
            get("", "p1"),
            list("", "app=web", ""),
            list("a", "", "status.phase=Running"),
        ] {
            assert!(views
                .answer("k", &call, u64::MAX, |x| c.call(x))
                .await
                .is_none());
        }
        assert_eq!(views.stats(), Stats::default());
        assert_eq!(c.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn past_the_budget_or_after_a_failed_list_reads_go_through() {
        let c = Counted::with_pods(&[("a", "p1", "web"), ("b", "q1", "web")]).await;
        let views = ReadViews::new(Bounds {
            budget: 500,
            ..Bounds::default()
        });
        // Namespace a fits; b does not fit what is left, so each of its reads goes to the cluster.
        c.read(&views, "k", get("a", "p1")).await.unwrap();
        let held = views.stats().bytes;
        assert!(held > 0 && held <= 500, "{held}");
        for _ in 0..2 {
            assert_eq!(
                c.read(&views, "k", get("b", "q1")).await,
                c.cluster.call(get("b", "q1")).await
            );
        }
        assert_eq!(views.stats().bytes, held);
        // The list for b was tried once (and dropped), then two gets went through.
        assert_eq!(c.calls.load(Ordering::SeqCst), 1 + 1 + 2);
        // A failing list: the view answers nothing, the caller reads through.
        let failed = views
            .answer("other", &get("c", "x"), u64::MAX, |_| async {
                Err::<KubeAnswer, _>(KubeError::Forbidden("no list".into()))
            })
            .await;
        assert!(failed.is_none());
    }

    #[tokio::test]
    async fn a_listing_larger_than_a_modules_memory_never_answers_that_module() {
        let c = Counted::with_pods(&[("a", "p1", "web"), ("a", "p2", "db")]).await;
        let views = ReadViews::new(Bounds::default());
        let big = 1 << 20;
        c.read_as(&views, "k", get("a", "p1"), big).await.unwrap();
        assert_eq!(c.calls.load(Ordering::SeqCst), 1);
        // Two pods are more than 100 bytes: a module of that limit reads through, and gets what the
        // cluster gives it.
        for call in [get("a", "p2"), list("a", "app=web", "")] {
            assert_eq!(
                c.read_as(&views, "k", call.clone(), 100).await,
                c.cluster.call(call).await
            );
        }
        assert_eq!(c.calls.load(Ordering::SeqCst), 3);
        // The module the listing was made for is still answered from it.
        c.read_as(&views, "k", get("a", "p2"), big).await.unwrap();
        assert_eq!(c.calls.load(Ordering::SeqCst), 3);
        let stats = views.stats();
        assert_eq!((stats.hits, stats.misses), (1, 3));
    }

    #[tokio::test]
    async fn a_failed_listing_is_the_answer_of_the_same_list_and_not_of_others() {
        let views = ReadViews::new(Bounds::default());
        let sent = AtomicUsize::new(0);
        let refuse = |_| {
            sent.fetch_add(1, Ordering::SeqCst);
            async { Err::<KubeAnswer, _>(KubeError::TooLarge("past the module's limit".into())) }
        };
        // The whole namespace is what the listing asked: its error is the read's, sent once.
        let whole = views.answer("k", &list("a", "", ""), 64, refuse).await;
        assert_eq!(
            whole,
            Some(Err(KubeError::TooLarge("past the module's limit".into())))
        );
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        // A selected list might fit where the whole namespace did not: it reads through.
        let views = ReadViews::new(Bounds::default());
        assert!(views
            .answer("k", &list("a", "app=web", ""), 64, refuse)
            .await
            .is_none());
        // Past the process's budget (not the module's limit) the same list reads through too.
        let views = ReadViews::new(Bounds {
            budget: 10,
            ..Bounds::default()
        });
        assert!(views
            .answer("k", &list("a", "", ""), 64, refuse)
            .await
            .is_none());
    }

    #[tokio::test]
    async fn views_end_when_idle_or_old_and_give_their_bytes_back() {
        let c = Counted::with_pods(&[("a", "p1", "web")]).await;
        let views = ReadViews::new(Bounds {
            idle: Duration::from_millis(100),
            lifetime: Duration::from_millis(600),
            budget: DEFAULT_BUDGET,
        });
        c.read(&views, "k", get("a", "p1")).await.unwrap();
        assert_eq!(views.stats().views, 1);
        // Idle: the sweeper ends it without any further read.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            views.stats(),
            Stats {
                hits: 0,
                misses: 1,
                bytes: 0,
                views: 0
            }
        );
        // Busy but old: a read past the lifetime starts a new view, which lists again.
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(700) {
            c.read(&views, "k", get("a", "p1")).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(c.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn concurrent_first_reads_share_one_list() {
        let c = Arc::new(Counted::with_pods(&[("a", "p1", "web"), ("a", "p2", "web")]).await);
        let views = ReadViews::new(Bounds::default());
        let reads: Vec<_> = (0..16)
            .map(|i| {
                let (c, views) = (c.clone(), views.clone());
                tokio::spawn(async move {
                    c.read(&views, "k", get("a", if i % 2 == 0 { "p1" } else { "p2" }))
                        .await
                        .unwrap()
                })
            })
            .collect();
        for read in reads {
            read.await.unwrap();
        }
        assert_eq!(c.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn views_can_be_turned_off_and_budgeted_by_variables() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            crate::config::Config::from_vars(pairs.iter().copied()).read_views()
        };
        assert!(ReadViews::from_settings(vars(&[(SWITCH_VARIABLE, "off")])).is_none());
        assert!(ReadViews::from_settings(vars(&[(SWITCH_VARIABLE, "0")])).is_none());
        let on = ReadViews::from_settings(vars(&[(BUDGET_VARIABLE, "1MiB")])).unwrap();
        assert_eq!(on.bounds.budget, 1 << 20);
        let default = ReadViews::from_settings(vars(&[(BUDGET_VARIABLE, "lots")])).unwrap();
        assert_eq!(default.bounds.budget, DEFAULT_BUDGET);
    }
}
