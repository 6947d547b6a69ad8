//! The `kube` capability's host side: the grant check first, then one [`KubeCall`] to the
//! `Backend<KubeCall>` of the host's services (one of the clients of [`crate::cluster`]: the fixture
//! cluster, a live cluster; or a recording or replay of either, see
//! [`recording`](crate::capabilities::recording)), or to the backup's read view ([`super::view`]).
//!
//! A call outside the module's grant never reaches the backend: the guest gets `error::denied` and a
//! warning is logged. Inputs are validated here, once, so that every backend gets well-formed requests.
//! What crosses the WIT boundary is converted here too: the clients know nothing of guests.

use std::sync::Arc;

use serde_json::Value;

use super::view::ReadViews;
use crate::action::Verb;
use crate::answer_charge;
use crate::backend::Backend;
use crate::bindings::velero_wasm::plugin::kube::{self as wit, Host};
use crate::capabilities::budget::WorkBudget;
use crate::capabilities::call_id::CallId;
use crate::capabilities::grants::ModuleCaps;
use crate::capabilities::memory::{AnswerAccount, MemoryBudget};
use crate::cluster::live::CALL_DEADLINE;
use crate::cluster::{ApiResource, Json, KubeAnswer, KubeCall, KubeError, ListOptions, Patch};
use crate::heap_cost::allocation;

impl From<KubeError> for wit::Error {
    fn from(e: KubeError) -> Self {
        match e {
            KubeError::NotFound(m) => wit::Error::NotFound(m),
            KubeError::Conflict(m) => wit::Error::Conflict(m),
            KubeError::Forbidden(m) => wit::Error::Forbidden(m),
            KubeError::Denied(m) => wit::Error::Denied(m),
            KubeError::Invalid(m) => wit::Error::Invalid(m),
            KubeError::Other(m) | KubeError::TooLarge(m) => wit::Error::Other(m),
        }
    }
}

/// The most reads one `read-all` may hold.
pub(crate) const MAX_BATCH: usize = 64;

/// Whether `read-all` sends its reads at once, as `config` says (unless
/// [`VELERO_WASM_READ_BATCH`](crate::config::VELERO_WASM_READ_BATCH) says
/// `off`); the plugin and the CLI put it in [`Services::reads_at_once`](crate::capabilities::Services).
pub(crate) fn reads_at_once(config: &crate::config::Config) -> bool {
    let switch = config.read_views().batch;
    !matches!(
        switch.trim().to_ascii_lowercase().as_str(),
        "off" | "false" | "0" | "no"
    )
}

/// The longest name (of an object, a resource, a group, a version) Kubernetes accepts.
const MAX_NAME: usize = 253;
/// The longest namespace name Kubernetes accepts.
const MAX_NAMESPACE: usize = 63;

/// An object name from the guest: at most [`MAX_NAME`] bytes.
fn check_name(name: &str) -> Result<(), KubeError> {
    if name.len() > MAX_NAME {
        return Err(KubeError::Invalid(format!(
            "the name {:?} is longer than {MAX_NAME} bytes",
            crate::shown::shown(name)
        )));
    }
    Ok(())
}

impl From<wit::ApiResource> for ApiResource {
    fn from(api: wit::ApiResource) -> Self {
        ApiResource {
            group: api.group,
            version: api.version,
            resource: api.resource,
        }
    }
}

/// Runs a backend call under the deadline of the module call it is made for, so that a backend that
/// waits (a live cluster asked to retry later) knows how long it may, and charging what it reads to
/// `answers`, the account of the guest's import it is made for.
async fn within<T>(
    deadline: Option<tokio::time::Instant>,
    answers: Arc<AnswerAccount>,
    call: impl std::future::Future<Output = T>,
) -> T {
    let call = answer_charge::scope(answers, call);
    match deadline {
        Some(deadline) => CALL_DEADLINE.scope(deadline, call).await,
        None => call.await,
    }
}

/// What the `kube` capability sees of a call: who calls, the module's grant, the backend and the read
/// views behind it, Velero's namespace (grants name it), the work budget it charges, and the memory
/// limit its answers must fit.
pub(crate) struct KubeView<'a> {
    pub(in crate::capabilities) call: &'a CallId,
    pub(in crate::capabilities) caps: &'a ModuleCaps,
    pub(in crate::capabilities) backend: &'a std::sync::Arc<dyn Backend<KubeCall>>,
    pub(in crate::capabilities) views: Option<&'a std::sync::Arc<ReadViews>>,
    pub(in crate::capabilities) velero_namespace: &'a str,
    pub(in crate::capabilities) budget: &'a mut WorkBudget,
    pub(in crate::capabilities) memory_limit: u64,
    pub(in crate::capabilities) memory_budget: &'static MemoryBudget,
    /// The account of the call's last import, kept until its next one or the call's end: the host
    /// holds that import's answers until the guest has them, after the host function returned.
    pub(in crate::capabilities) last_answers: &'a mut Option<Arc<AnswerAccount>>,
    /// Whether `read-all` sends its reads at once ([`reads_at_once`]).
    pub(in crate::capabilities) reads_at_once: bool,
}

/// The `kube` import's host functions take a [`KubeView`] of the call.
pub(in crate::capabilities) struct KubeHost;

impl wasmtime::component::HasData for KubeHost {
    type Data<'a> = KubeView<'a>;
}

impl KubeView<'_> {
    /// The real-time deadline of the call, if it has one.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        self.budget.deadline()
    }

    /// Checks a call against the module's grant; a refusal is logged and returned as `Denied`.
    fn authorize(
        &mut self,
        verb: Verb,
        api: &ApiResource,
        namespace: &str,
    ) -> Result<(), KubeError> {
        self.budget
            .charge()
            .map_err(|e| KubeError::Denied(e.to_string()))?;
        for (what, text, max) in [
            ("group", api.group.as_str(), MAX_NAME),
            ("version", api.version.as_str(), MAX_NAME),
            ("resource", api.resource.as_str(), MAX_NAME),
            ("namespace", namespace, MAX_NAMESPACE),
        ] {
            if text.len() > max {
                return Err(KubeError::Invalid(format!(
                    "the {what} {:?} is longer than {max} bytes",
                    crate::shown::shown(text)
                )));
            }
        }
        if api.resource.is_empty() || api.version.is_empty() {
            return Err(KubeError::Invalid(format!(
                "a resource type needs a version and a resource, got {{group: {:?}, version: {:?}, resource: {:?}}}",
                api.group, api.version, api.resource
            )));
        }
        let item_namespace = self.call.item().map(|i| i.namespace.as_str());
        if self.caps.shadow && !matches!(verb, Verb::Get | Verb::List) {
            let message = format!(
                "permission denied: module {} runs as a shadow, which may read but not {verb} ({} {})",
                self.caps.module,
                api.group_resource(),
                crate::shown::shown(namespace)
            );
            tracing::debug!(
                module = &*self.call.module,
                action = self.call.action.as_str(),
                "{message}"
            );
            return Err(KubeError::Denied(message));
        }
        let velero_namespace = self.velero_namespace;
        if self.caps.kube.allows(
            verb,
            &api.group_resource(),
            namespace,
            item_namespace,
            velero_namespace,
        ) {
            return Ok(());
        }
        let message = velero_wasm_grant::denial(
            &self.caps.module,
            verb,
            &api.group_resource(),
            namespace,
            item_namespace,
            velero_namespace,
        );
        let item = self.call.item();
        crate::capabilities::call_id::warn_unless_shadow!(
            self.call,
            module = &*self.call.module,
            action = self.call.action.as_str(),
            resource = item.map(|i| i.group_resource()).unwrap_or_default(),
            namespace = item.map(|i| i.namespace.as_str()).unwrap_or_default(),
            name = item.map(|i| i.name.as_str()).unwrap_or_default(),
            "{message}"
        );
        crate::metrics::note_denied();
        Err(KubeError::Denied(message))
    }
}

/// Parses an object the guest sends, and reconciles its namespace with the call's (public for the fuzz
/// targets).
pub fn object_for(namespace: &str, json: &str) -> Result<Value, KubeError> {
    let mut object: Value = serde_json::from_str(json)
        .map_err(|e| KubeError::Invalid(format!("the object is not valid JSON: {e}")))?;
    let metadata = object
        .as_object_mut()
        .ok_or_else(|| KubeError::Invalid("the object is not a JSON object".into()))?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| KubeError::Invalid("metadata is not an object".into()))?;
    match metadata.get("namespace").and_then(Value::as_str) {
        Some(ns) if ns != namespace => {
            return Err(KubeError::Invalid(format!(
                "the object's namespace {ns:?} differs from the call's {namespace:?}"
            )))
        }
        Some(_) => {}
        None if !namespace.is_empty() => {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        }
        None => {}
    }
    Ok(object)
}

impl KubeView<'_> {
    /// Sends an authorized, checked call to the backend, under the deadline of the module call. A
    /// write drops what read views hold of its resource and namespace, whether it succeeds or not.
    fn kube(
        &mut self,
        call: KubeCall,
    ) -> impl std::future::Future<Output = Result<KubeAnswer, KubeError>> + Send + 'static {
        if !matches!(call, KubeCall::Get { .. } | KubeCall::List { .. }) {
            if let Some(views) = self.views {
                let (api, namespace) = call.target();
                views.invalidate(api, namespace);
            }
        }
        let (answers, deadline, backend) = (self.answers(), self.deadline(), self.backend.clone());
        async move { within(deadline, answers, backend.call(call)).await }
    }

    /// A fresh account for the answers of one of the guest's imports (a read-all's reads share one),
    /// kept as the call's last until its next import: the previous import's answers are the guest's
    /// by now, so what that one held goes back to the budget.
    fn answers(&mut self) -> Arc<AnswerAccount> {
        let answers = Arc::new(AnswerAccount::new(self.memory_limit, self.memory_budget));
        *self.last_answers = Some(answers.clone());
        answers
    }

    /// Sends an authorized, checked read: answered from the backup's read view when one may answer it
    /// (docs/read-views.md), else by the backend. The future holds no borrow of the call's state, so
    /// that the reads of a batch run side by side.
    fn read(
        &self,
        call: KubeCall,
        answers: Arc<AnswerAccount>,
    ) -> impl std::future::Future<Output = Result<KubeAnswer, KubeError>> + Send + 'static {
        let view = match (self.views, &self.call.backup) {
            (Some(views), Some(backup)) if self.viewable(&call) => {
                Some((views.clone(), backup.clone()))
            }
            _ => None,
        };
        let (kube, deadline) = (self.backend.clone(), self.deadline());
        // A view's listing is work done for this module: bounded by what it could receive itself.
        let limit = self.memory_limit;
        async move {
            if let Some((views, backup)) = view {
                let fetch = |list| within(deadline, answers.clone(), kube.call(list));
                if let Some(answer) = views.answer(&backup, &call, limit, fetch).await {
                    // The view answers with copies of what it keeps: held until the guest has them.
                    let copies = match &answer {
                        Ok(KubeAnswer::Object(object)) => allocation(object.as_str().len() as u64),
                        Ok(KubeAnswer::Objects(objects)) => objects
                            .iter()
                            .map(|object| allocation(object.as_str().len() as u64))
                            .sum(),
                        _ => 0,
                    };
                    if let Err(refused) = answers.hold(copies) {
                        let (api, namespace) = call.target();
                        return Err(KubeError::TooLarge(format!(
                            "{} in namespace {namespace} from the backup's read view: {refused}",
                            api.group_resource()
                        )));
                    }
                    return answer;
                }
            }
            within(deadline, answers, kube.call(call)).await
        }
    }

    /// Whether a read may come from a view: the module has not opted out, and its grant cannot write
    /// the resource in the namespace (what it could write, it could change under its own view).
    fn viewable(&self, call: &KubeCall) -> bool {
        if !self.caps.read_views {
            return false;
        }
        let (api, namespace) = call.target();
        let item_namespace = self.call.item().map(|i| i.namespace.as_str());
        let velero_namespace = self.velero_namespace;
        let group_resource = api.group_resource();
        ![Verb::Create, Verb::Update, Verb::Patch, Verb::Delete]
            .into_iter()
            .any(|verb| {
                self.caps.kube.allows(
                    verb,
                    &group_resource,
                    namespace,
                    item_namespace,
                    velero_namespace,
                )
            })
    }
}

impl KubeView<'_> {
    /// One read of a `read-all`, checked and counted as the single call would be; a list may return
    /// at most `limit` bytes, the module's memory limit.
    fn batched(&mut self, read: wit::Read, limit: u64) -> Result<KubeCall, KubeError> {
        match read {
            wit::Read::Get(r) => {
                let api = ApiResource::from(r.api);
                self.authorize(Verb::Get, &api, &r.namespace)?;
                check_name(&r.name)?;
                Ok(KubeCall::Get {
                    api,
                    namespace: r.namespace,
                    name: r.name,
                })
            }
            wit::Read::List(r) => {
                let api = ApiResource::from(r.api);
                self.authorize(Verb::List, &api, &r.namespace)?;
                let mut options =
                    ListOptions::parse(&r.options.label_selector, &r.options.field_selector)?;
                options.max_bytes = Some(limit);
                Ok(KubeCall::List {
                    api,
                    namespace: r.namespace,
                    options,
                })
            }
        }
    }
}

impl Host for KubeView<'_> {
    async fn get(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        name: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Get, &api, &namespace)?;
        check_name(&name)?;
        let call = KubeCall::Get {
            api,
            namespace,
            name,
        };
        let answers = self.answers();
        match self.read(call, answers).await {
            // An answer the host would not hold for the module stops the call, as a list does.
            Err(too_large @ KubeError::TooLarge(_)) => {
                let message = too_large.to_string();
                self.budget.exceed(too_large);
                Err(wit::Error::Other(message))
            }
            answer => Ok(answer?.object()?.into_string()),
        }
    }

    async fn list(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        options: wit::ListOptions,
    ) -> Result<Vec<String>, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::List, &api, &namespace)?;
        let mut options = ListOptions::parse(&options.label_selector, &options.field_selector)?;
        // What the guest could accept at most: its memory limit.
        let limit = self.memory_limit;
        options.max_bytes = Some(limit);
        let call = KubeCall::List {
            api: api.clone(),
            namespace,
            options,
        };
        let answers = self.answers();
        let objects = match self.read(call, answers).await.and_then(KubeAnswer::objects) {
            Err(too_large @ KubeError::TooLarge(_)) => {
                let message = too_large.to_string();
                self.budget.exceed(too_large);
                return Err(wit::Error::Other(message));
            }
            other => other?,
        };
        let mut texts = Vec::with_capacity(objects.len());
        let mut total: u64 = 0;
        for object in objects {
            let text = object.into_string();
            // Each string also takes a pointer and a length in the guest's list.
            total += text.len() as u64 + 8;
            if total > limit {
                let too_large = KubeError::list_too_large(&api, limit);
                let message = too_large.to_string();
                self.budget.exceed(too_large);
                return Err(wit::Error::Other(message));
            }
            texts.push(text);
        }
        Ok(texts)
    }

    async fn read_all(
        &mut self,
        reads: Vec<wit::Read>,
    ) -> Vec<Result<wit::ReadAnswer, wit::Error>> {
        if reads.len() > MAX_BATCH {
            let message = format!(
                "read-all takes at most {MAX_BATCH} reads, not {}",
                reads.len()
            );
            return vec![Err(wit::Error::Invalid(message)); reads.len()];
        }
        // Each read is checked and counted as the single call would be, in order; then all are sent.
        let limit = self.memory_limit;
        // One account for all of them: together they must fit what one list may take.
        let answers = self.answers();
        let mut sent = Vec::with_capacity(reads.len());
        for read in reads {
            sent.push(self.batched(read, limit).map(|call| {
                let api = call.target().0.clone();
                (api, self.read(call, answers.clone()))
            }));
        }
        let answered = sent.into_iter().map(|call| async move {
            match call {
                Ok((api, read)) => (Some(api), read.await),
                Err(e) => (None, Err(e)),
            }
        });
        let answers = if self.reads_at_once {
            futures::future::join_all(answered).await
        } else {
            let mut answers = Vec::with_capacity(answered.len());
            for answer in answered {
                answers.push(answer.await);
            }
            answers
        };
        // What reaches the guest at once must fit its memory, as one list must.
        let mut total: u64 = 0;
        let mut out = Vec::with_capacity(answers.len());
        for (api, answer) in answers {
            let answer = match answer {
                Ok(KubeAnswer::Objects(objects)) => {
                    let texts: Vec<String> = objects.into_iter().map(Json::into_string).collect();
                    total += texts.iter().map(|t| t.len() as u64 + 8).sum::<u64>();
                    Ok(wit::ReadAnswer::Objects(texts))
                }
                Ok(other) => other.object().map(|object| {
                    let text = object.into_string();
                    total += text.len() as u64 + 8;
                    wit::ReadAnswer::Object(text)
                }),
                Err(e) => Err(e),
            };
            let refused = match &answer {
                // Its own words: a list past the limit, or answers the host would not hold.
                Err(KubeError::TooLarge(message)) => Some(message.clone()),
                _ if total > limit => {
                    let api = api.unwrap_or_else(|| ApiResource::new("", "", "reads"));
                    Some(KubeError::list_too_large(&api, limit).to_string())
                }
                _ => None,
            };
            if let Some(message) = refused {
                self.budget.exceed(message.clone());
                out.push(Err(wit::Error::Other(message)));
                continue;
            }
            out.push(answer.map_err(wit::Error::from));
        }
        out
    }

    async fn create(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        object: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Create, &api, &namespace)?;
        let object = object_for(&namespace, &object)?;
        let call = KubeCall::Create {
            api,
            namespace,
            object,
        };
        Ok(self.kube(call).await?.object()?.into_string())
    }

    async fn update(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        object: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Update, &api, &namespace)?;
        let object = object_for(&namespace, &object)?;
        let call = KubeCall::Update {
            api,
            namespace,
            object,
        };
        Ok(self.kube(call).await?.object()?.into_string())
    }

    async fn patch(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        name: String,
        kind: wit::PatchType,
        patch: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Patch, &api, &namespace)?;
        check_name(&name)?;
        let patch = match kind {
            wit::PatchType::Merge => Patch::Merge(serde_json::from_str(&patch).map_err(|e| {
                KubeError::Invalid(format!("the merge patch is not valid JSON: {e}"))
            })?),
            wit::PatchType::Json => Patch::Json(serde_json::from_str(&patch).map_err(|e| {
                KubeError::Invalid(format!("the JSON patch is not an RFC 6902 patch: {e}"))
            })?),
        };
        let call = KubeCall::Patch {
            api,
            namespace,
            name,
            patch,
        };
        Ok(self.kube(call).await?.object()?.into_string())
    }

    async fn delete(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        name: String,
    ) -> Result<(), wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Delete, &api, &namespace)?;
        check_name(&name)?;
        let call = KubeCall::Delete {
            api,
            namespace,
            name,
        };
        self.kube(call).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn objects_take_the_call_namespace() {
        let o = object_for("ns", r#"{"kind":"ConfigMap","metadata":{"name":"x"}}"#).unwrap();
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert!(object_for("ns", r#"{"metadata":{"namespace":"other"}}"#).is_err());
        assert!(object_for("ns", "[]").is_err());
    }

    mod recorded {
        use super::super::*;
        use crate::capabilities::recording::{
            Header, Recorded, Recorder, Recording, Replay, Replayed,
        };
        use crate::capabilities::Clock;
        use crate::cluster::fixture::FixtureCluster;
        use crate::cluster::KubeApi;
        use serde_json::json;
        use std::path::Path;
        use std::sync::Arc;
        use std::time::{Duration, SystemTime, UNIX_EPOCH};

        fn configmaps() -> ApiResource {
            ApiResource::new("", "v1", "configmaps")
        }

        #[test]
        fn calls_are_recorded_in_the_documented_shape() {
            let api = configmaps();
            let line = |call: KubeCall| serde_json::to_string(&call).unwrap();
            assert_eq!(
                line(KubeCall::Get {
                    api: api.clone(),
                    namespace: "ns".into(),
                    name: "a".into()
                }),
                r#"{"op":"get","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","name":"a"}"#
            );
            assert_eq!(
                line(KubeCall::List {
                    api: api.clone(),
                    namespace: "ns".into(),
                    options: ListOptions::parse("app=web", "").unwrap()
                }),
                r#"{"op":"list","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","labelSelector":"app=web","fieldSelector":""}"#
            );
            assert_eq!(
                line(KubeCall::Patch {
                    api: api.clone(),
                    namespace: "ns".into(),
                    name: "a".into(),
                    patch: Patch::Merge(json!({"data": {"k": "v"}}))
                }),
                r#"{"op":"patch","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","name":"a","patchType":"merge","patch":{"data":{"k":"v"}}}"#
            );
            assert_eq!(
                line(KubeCall::Create {
                    api,
                    namespace: "ns".into(),
                    object: json!({"kind": "ConfigMap"})
                }),
                r#"{"op":"create","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","object":{"kind":"ConfigMap"}}"#
            );
            // A call reads back as itself, its selectors parsed.
            let list: KubeCall = serde_json::from_str(
                r#"{"op":"list","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","labelSelector":"app=web","fieldSelector":"metadata.name=a"}"#,
            )
            .unwrap();
            let KubeCall::List { options, .. } = list else {
                panic!("{list:?}")
            };
            assert!(options.matches(&json!({"metadata": {"name": "a", "labels": {"app": "web"}}})));
            assert!(!options.matches(&json!({"metadata": {"name": "a"}})));
        }

        async fn record_some_calls(
            path: &Path,
            start: SystemTime,
        ) -> Vec<Result<Value, KubeError>> {
            let fixture = FixtureCluster::empty(Clock::fixed(start));
            let header = Header {
                clock_start: start,
                velero_namespace: String::new(),
            };
            let recorder = Recorder::create(path, &header).unwrap();
            let kube = Recorded::<KubeCall>::new(Arc::new(fixture), recorder.clone());
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
            let answers = vec![
                kube.get(&configmaps(), "ns", "a").await,
                kube.create(&configmaps(), "ns", object).await,
                kube.get(&configmaps(), "ns", "a").await,
                kube.list(
                    &configmaps(),
                    "ns",
                    &ListOptions::parse("", "metadata.name=a").unwrap(),
                )
                .await
                .map(Value::from),
            ];
            recorder.finish().unwrap();
            answers
        }

        fn replay_of(path: &Path) -> Replay {
            Replay::new(Recording::read(path).unwrap())
        }

        #[tokio::test]
        async fn a_replay_gives_the_recorded_answers_in_order() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rec.jsonl");
            let start = UNIX_EPOCH + Duration::new(1_777_716_000, 123_456_789);
            let recorded = record_some_calls(&path, start).await;
            assert!(matches!(recorded[0], Err(KubeError::NotFound(_))));

            let replay = replay_of(&path);
            assert_eq!(replay.header().clock_start, start);
            let kube = Replayed::<KubeCall>::new(&replay).unwrap();
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
            // The same call twice gets the two recorded answers, in order: first not found, then the object.
            assert_eq!(kube.get(&configmaps(), "ns", "a").await, recorded[0]);
            assert_eq!(kube.create(&configmaps(), "ns", object).await, recorded[1]);
            assert_eq!(kube.get(&configmaps(), "ns", "a").await, recorded[2]);
            let listed = kube
                .list(
                    &configmaps(),
                    "ns",
                    &ListOptions::parse("", "metadata.name=a").unwrap(),
                )
                .await;
            assert_eq!(listed.map(Value::from), recorded[3]);
            assert!(replay.misses().is_empty());
            assert!(replay.unused().is_empty());
        }

        #[test]
        fn every_error_replays_as_the_error_recorded() {
            let api = configmaps();
            for (error, reason) in [
                (KubeError::NotFound("n".into()), "not-found"),
                (KubeError::Conflict("c".into()), "conflict"),
                (KubeError::Forbidden("f".into()), "forbidden"),
                (KubeError::Denied("d".into()), "denied"),
                (KubeError::Invalid("i".into()), "invalid"),
                (KubeError::Other("o".into()), "other"),
                // A list past the module's memory must stop the replayed call too, not just fail it.
                (KubeError::list_too_large(&api, 1024), "too-large"),
            ] {
                let recorded = serde_json::to_value(&error).unwrap();
                assert_eq!(
                    recorded,
                    json!({"reason": reason, "message": error.to_string()})
                );
                assert_eq!(
                    serde_json::from_value::<KubeError>(recorded).unwrap(),
                    error
                );
            }
        }

        #[tokio::test]
        async fn a_call_not_in_the_recording_fails_naming_it() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rec.jsonl");
            record_some_calls(&path, UNIX_EPOCH).await;
            let replay = replay_of(&path);
            let kube = Replayed::<KubeCall>::new(&replay).unwrap();
            let e = kube
                .delete(
                    &ApiResource::new("apps", "v1", "deployments"),
                    "prod",
                    "web",
                )
                .await
                .unwrap_err();
            let KubeError::Other(message) = e else {
                panic!("{e:?}")
            };
            assert!(
                message.contains("delete deployments.apps v1 in namespace prod named \"web\""),
                "{message}"
            );
            assert!(message.contains("rec.jsonl"), "{message}");
            assert_eq!(
                replay.misses(),
                vec!["kube: delete deployments.apps v1 in namespace prod named \"web\""]
            );
            // A list with other selectors is another call.
            let e = kube
                .list(
                    &configmaps(),
                    "ns",
                    &ListOptions::parse("app=x", "").unwrap(),
                )
                .await
                .unwrap_err();
            assert!(e.to_string().contains("with labels \"app=x\""), "{e}");
            assert_eq!(replay.unused(), vec![("kube", 4)]);
        }

        #[test]
        fn malformed_kube_answers_are_refused_with_the_line() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rec.jsonl");
            let header = r#"{"recording":"velero-wasm","version":1,"clock":{"start":"2026-05-02T10:00:00Z"}}"#;
            let refused = |answer: &str| {
                std::fs::write(
                    &path,
                    format!(
                        "{header}\n{{\"capability\":\"kube\",\"call\":{{}},\"answer\":{answer}}}\n"
                    ),
                )
                .unwrap();
                Replayed::<KubeCall>::new(&replay_of(&path))
                    .err()
                    .expect("refused")
                    .to_string()
            };
            let odd = refused(r#"{"error":{"reason":"odd","message":"m"}}"#);
            assert!(
                odd.contains(":2: the answer is not {\"ok\": …} or {\"error\": {\"reason\": …, \"message\": …}}: ")
                    && odd.contains("unknown variant `odd`"),
                "{odd}"
            );
            assert!(
                refused("{}").contains(":2: the answer is not {\"ok\": …} or {\"error\""),
                "{}",
                refused("{}")
            );
            // Lines of other capabilities are theirs: the kube replay neither checks nor counts them.
            std::fs::write(
                &path,
                format!("{header}\n{{\"capability\":\"http\",\"call\":{{}},\"answer\":{{}}}}\n"),
            )
            .unwrap();
            let replay = replay_of(&path);
            Replayed::<KubeCall>::new(&replay).unwrap();
            assert!(replay.unused().is_empty());
        }
    }
}
