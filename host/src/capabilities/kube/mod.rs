//! The `kube` capability: the grant check first, then one of the backends behind [`KubeBackend`]
//! (the in-memory [`fixture`] cluster; a [`live`] cluster; a replay of recorded answers, see [`record`]).
//!
//! A call outside the module's grant never reaches the backend: the guest gets `error::denied` and a
//! warning is logged. Inputs are validated here, once, so that every backend gets well-formed requests.

pub mod fixture;
mod grant;
pub mod live;
pub mod record;
pub mod resources;
pub mod writes;

use std::fmt;

use async_trait::async_trait;
use label_selector::LabelSelector;
use serde_json::Value;

use super::CallState;
use crate::action::Verb;
use crate::bindings::velero_wasm::plugin::kube::{self as wit, Host};
pub use grant::KubeGrant;

/// A resource type: group ("" for core), version, plural resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
}

impl ApiResource {
    /// A resource type.
    pub fn new(group: &str, version: &str, resource: &str) -> ApiResource {
        ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
        }
    }

    /// `resource.group` (`resource` alone for the core group).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// `group/version` (`version` alone for the core group), as in an object's `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for ApiResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.group_resource())
    }
}

/// Why a Kubernetes call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// HTTP 404.
    #[error("{0}")]
    NotFound(String),
    /// HTTP 409: already exists, or stale `resourceVersion`.
    #[error("{0}")]
    Conflict(String),
    /// HTTP 401/403 from the API server.
    #[error("{0}")]
    Forbidden(String),
    /// Outside the module's grant; nothing was sent.
    #[error("{0}")]
    Denied(String),
    /// HTTP 400/422, or a malformed request caught before sending.
    #[error("{0}")]
    Invalid(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
    /// A list larger than [`ListOptions::max_bytes`]: the guest could not take it (`other` to the
    /// guest, and the call is stopped).
    #[error("{0}")]
    TooLarge(String),
}

impl KubeError {
    /// The error for a list of `api` that went past `limit` bytes, the module's memory limit.
    pub fn list_too_large(api: &ApiResource, limit: u64) -> KubeError {
        KubeError::TooLarge(format!(
            "list of {api} returned more than {limit} bytes, the module's memory limit (manifest [limits] memory)"
        ))
    }
}

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

/// The most terms a field selector may have.
pub const MAX_FIELD_SELECTOR_TERMS: usize = 100;

/// A parsed field selector: `metadata.name=x,metadata.namespace!=y`. At most
/// [`MAX_FIELD_SELECTOR_TERMS`] terms and `label_selector::MAX_LENGTH` bytes, so that matching a
/// list costs time linear in the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    /// The field as a JSON pointer (`/metadata/name`), computed once.
    pointer: String,
    equals: bool,
    value: String,
}

impl FieldSelector {
    /// Parses `field=value`, `field==value` and `field!=value` terms separated by commas.
    pub fn parse(text: &str) -> Result<FieldSelector, String> {
        let max = label_selector::MAX_LENGTH;
        if text.len() > max {
            return Err(format!(
                "the field selector is {} bytes long, more than the {max} allowed",
                text.len()
            ));
        }
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if terms.len() == MAX_FIELD_SELECTOR_TERMS {
                return Err(format!(
                    "the field selector has more than the {MAX_FIELD_SELECTOR_TERMS} terms allowed"
                ));
            }
            let (field, equals, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "field selector term {:?} is not field=value or field!=value",
                    super::shown(term)
                ));
            };
            terms.push(FieldTerm {
                pointer: format!("/{}", field.trim().replace('.', "/")),
                equals,
                value: value.trim().to_string(),
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether an object satisfies every term (a missing field reads as ""; an object or an array
    /// equals no value).
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|term| {
            let same = match object.pointer(&term.pointer) {
                Some(Value::String(s)) => *s == term.value,
                Some(Value::Null) | None => term.value.is_empty(),
                Some(Value::Bool(b)) => term.value == if *b { "true" } else { "false" },
                Some(Value::Number(n)) => term.value == n.to_string(),
                Some(Value::Array(_) | Value::Object(_)) => false,
            };
            same == term.equals
        })
    }
}

/// Which objects a list returns.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// The label selector as written (for backends that pass it on).
    pub label_selector_text: String,
    /// The label selector, parsed.
    pub label_selector: LabelSelector,
    /// The field selector as written.
    pub field_selector_text: String,
    /// The field selector, parsed.
    pub field_selector: FieldSelector,
    /// The most bytes of objects the list may return (the module's memory limit); a backend stops
    /// reading pages past it and fails with [`KubeError::TooLarge`]. `None`: no limit.
    pub max_bytes: Option<u64>,
}

impl ListOptions {
    /// Parses both selectors; a malformed one is `Invalid`.
    pub fn parse(label_selector: &str, field_selector: &str) -> Result<ListOptions, KubeError> {
        Ok(ListOptions {
            label_selector_text: label_selector.to_string(),
            label_selector: LabelSelector::parse(label_selector).map_err(|e| {
                KubeError::Invalid(format!(
                    "label selector {:?}: {e}",
                    super::shown(label_selector)
                ))
            })?,
            field_selector_text: field_selector.to_string(),
            field_selector: FieldSelector::parse(field_selector).map_err(KubeError::Invalid)?,
            max_bytes: None,
        })
    }

    /// Whether an object matches both selectors.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.label_selector
            .matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
            && self.field_selector.matches(object)
    }
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
            super::shown(name)
        )));
    }
    Ok(())
}

/// A patch.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// RFC 7386 JSON merge patch.
    Merge(Value),
    /// RFC 6902 JSON patch.
    Json(json_patch::Patch),
}

impl Patch {
    /// The patch document, as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            Patch::Merge(v) => v.clone(),
            Patch::Json(p) => serde_json::to_value(p).unwrap_or(Value::Null),
        }
    }

    /// `merge` or `json`.
    pub fn kind(&self) -> &'static str {
        match self {
            Patch::Merge(_) => "merge",
            Patch::Json(_) => "json",
        }
    }
}

/// A Kubernetes API: what the capability calls once a request is authorized and well-formed.
/// `namespace` is "" for cluster-scoped resources (and, for `list`, for all namespaces).
#[async_trait]
pub trait KubeBackend: Send + Sync {
    /// Reads one object.
    async fn get(&self, api: &ApiResource, namespace: &str, name: &str)
        -> Result<Value, KubeError>;
    /// Lists objects in API order, every page, each with `apiVersion` and `kind`.
    async fn list(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Value>, KubeError>;
    /// Creates an object; returns it as stored.
    async fn create(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError>;
    /// Replaces an object; returns it as stored.
    async fn update(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError>;
    /// Patches an object; returns it as stored.
    async fn patch(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Value, KubeError>;
    /// Deletes an object.
    async fn delete(&self, api: &ApiResource, namespace: &str, name: &str)
        -> Result<(), KubeError>;
}

/// The backend when there is no cluster: every call fails, saying so.
pub struct NoCluster(String);

impl NoCluster {
    /// A backend whose every call fails with `reason`.
    pub fn because(reason: impl Into<String>) -> NoCluster {
        NoCluster(reason.into())
    }

    fn error(&self) -> KubeError {
        KubeError::Other(self.0.clone())
    }
}

impl Default for NoCluster {
    fn default() -> NoCluster {
        NoCluster::because("no Kubernetes cluster is configured")
    }
}

#[async_trait]
impl KubeBackend for NoCluster {
    async fn get(&self, _: &ApiResource, _: &str, _: &str) -> Result<Value, KubeError> {
        Err(self.error())
    }
    async fn list(
        &self,
        _: &ApiResource,
        _: &str,
        _: &ListOptions,
    ) -> Result<Vec<Value>, KubeError> {
        Err(self.error())
    }
    async fn create(&self, _: &ApiResource, _: &str, _: Value) -> Result<Value, KubeError> {
        Err(self.error())
    }
    async fn update(&self, _: &ApiResource, _: &str, _: Value) -> Result<Value, KubeError> {
        Err(self.error())
    }
    async fn patch(
        &self,
        _: &ApiResource,
        _: &str,
        _: &str,
        _: &Patch,
    ) -> Result<Value, KubeError> {
        Err(self.error())
    }
    async fn delete(&self, _: &ApiResource, _: &str, _: &str) -> Result<(), KubeError> {
        Err(self.error())
    }
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
/// waits (a live cluster asked to retry later) knows how long it may.
async fn within<T>(
    deadline: Option<tokio::time::Instant>,
    call: impl std::future::Future<Output = T>,
) -> T {
    match deadline {
        Some(deadline) => live::CALL_DEADLINE.scope(deadline, call).await,
        None => call.await,
    }
}

impl CallState {
    /// The real-time deadline of the call, if it has one.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        self.limit.map(|limit| limit.deadline)
    }

    /// Checks a call against the module's grant; a refusal is logged and returned as `Denied`.
    fn authorize(
        &mut self,
        verb: Verb,
        api: &ApiResource,
        namespace: &str,
    ) -> Result<(), KubeError> {
        self.count_capability_call().map_err(KubeError::Denied)?;
        for (what, text, max) in [
            ("group", api.group.as_str(), MAX_NAME),
            ("version", api.version.as_str(), MAX_NAME),
            ("resource", api.resource.as_str(), MAX_NAME),
            ("namespace", namespace, MAX_NAMESPACE),
        ] {
            if text.len() > max {
                return Err(KubeError::Invalid(format!(
                    "the {what} {:?} is longer than {max} bytes",
                    super::shown(text)
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
        let velero_namespace = self.services.environment.velero_namespace();
        if self.caps.kube.allows(
            verb,
            &api.group_resource(),
            namespace,
            item_namespace,
            velero_namespace,
        ) {
            return Ok(());
        }
        let scope = if namespace.is_empty() {
            "cluster-wide".to_string()
        } else {
            format!("in namespace {namespace}")
        };
        let message = format!(
            "permission denied: module {} is not granted {verb} on {} {scope}; the manifest rule that allows it: {}",
            self.caps.module,
            api.group_resource(),
            grant::rule_allowing(
                verb,
                &api.group_resource(),
                namespace,
                item_namespace,
                velero_namespace
            )
        );
        let item = self.call.item();
        tracing::warn!(
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

    /// Parses an object the guest sends, and reconciles its namespace with the call's (public for the
    /// fuzz targets).
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
}

impl Host for CallState {
    async fn get(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        name: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Get, &api, &namespace)?;
        check_name(&name)?;
        let object = within(
            self.deadline(),
            self.services.kube.get(&api, &namespace, &name),
        )
        .await?;
        Ok(object.to_string())
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
        let limit = self.memory.limit();
        options.max_bytes = Some(limit);
        let listed = within(
            self.deadline(),
            self.services.kube.list(&api, &namespace, &options),
        )
        .await;
        let objects = match listed {
            Err(KubeError::TooLarge(message)) => {
                self.stop(message.clone());
                return Err(wit::Error::Other(message));
            }
            other => other?,
        };
        let mut texts = Vec::with_capacity(objects.len());
        let mut total: u64 = 0;
        for object in objects {
            let text = object.to_string();
            // Each string also takes a pointer and a length in the guest's list.
            total += text.len() as u64 + 8;
            if total > limit {
                let message = KubeError::list_too_large(&api, limit).to_string();
                self.stop(message.clone());
                return Err(wit::Error::Other(message));
            }
            texts.push(text);
        }
        Ok(texts)
    }

    async fn create(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        object: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Create, &api, &namespace)?;
        let object = Self::object_for(&namespace, &object)?;
        let deadline = self.deadline();
        Ok(within(
            deadline,
            self.services.kube.create(&api, &namespace, object),
        )
        .await?
        .to_string())
    }

    async fn update(
        &mut self,
        api: wit::ApiResource,
        namespace: String,
        object: String,
    ) -> Result<String, wit::Error> {
        let api = ApiResource::from(api);
        self.authorize(Verb::Update, &api, &namespace)?;
        let object = Self::object_for(&namespace, &object)?;
        let deadline = self.deadline();
        Ok(within(
            deadline,
            self.services.kube.update(&api, &namespace, object),
        )
        .await?
        .to_string())
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
        let deadline = self.deadline();
        Ok(within(
            deadline,
            self.services.kube.patch(&api, &namespace, &name, &patch),
        )
        .await?
        .to_string())
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
        Ok(within(
            self.deadline(),
            self.services.kube.delete(&api, &namespace, &name),
        )
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selectors_parse_and_match() {
        let f = FieldSelector::parse("metadata.name=a, metadata.namespace!=kube-system").unwrap();
        assert!(f.matches(&serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}})));
        assert!(
            !f.matches(&serde_json::json!({"metadata": {"name": "a", "namespace": "kube-system"}}))
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
        let n = FieldSelector::parse("spec.replicas=3,spec.paused=false,status!=x").unwrap();
        assert!(n.matches(
            &serde_json::json!({"spec": {"replicas": 3, "paused": false}, "status": {"a": 1}})
        ));
    }

    #[test]
    fn field_selectors_are_bounded() {
        let many = vec!["metadata.name=a"; MAX_FIELD_SELECTOR_TERMS + 1].join(",");
        assert!(FieldSelector::parse(&many)
            .unwrap_err()
            .contains("more than the 100 terms"));
        let long = format!("metadata.name={}", "a".repeat(label_selector::MAX_LENGTH));
        assert!(FieldSelector::parse(&long)
            .unwrap_err()
            .contains("more than the 8192 allowed"));
    }

    #[test]
    fn objects_take_the_call_namespace() {
        let o =
            CallState::object_for("ns", r#"{"kind":"ConfigMap","metadata":{"name":"x"}}"#).unwrap();
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert!(CallState::object_for("ns", r#"{"metadata":{"namespace":"other"}}"#).is_err());
        assert!(CallState::object_for("ns", "[]").is_err());
    }
}
