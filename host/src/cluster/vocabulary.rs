//! The Kubernetes calls as values: one [`KubeCall`] (get, list, create, update, patch, delete) on an
//! [`ApiResource`], its [`KubeAnswer`] or [`KubeError`], and [`KubeApi`], the six calls typed on any
//! backend of them. Every client of this room speaks it (the live API server, the fixture cluster,
//! the write log), and so do the `kube` capability, a recording and a replay.
//!
//! In a recording, a call is its `op` (the [`Verb`]), `api`, `namespace`, and `name`,
//! `labelSelector`/`fieldSelector`, `object`, or `patchType`/`patch` as the op needs; the answer is
//! the object, the list of objects, or null for a delete; an error is `{"reason", "message"}` with the
//! WIT error's name as `reason` (`too-large`: a list past the module's memory, `other` to the guest):
//!
//! ```text
//! {"capability":"kube","call":{"op":"get","api":{"group":"","version":"v1","resource":"configmaps"},"namespace":"ns","name":"a"},"answer":{"ok":{…}}}
//! {"capability":"kube","call":{"op":"list","api":{…},"namespace":"ns","labelSelector":"app=web","fieldSelector":""},"answer":{"ok":[…]}}
//! {"capability":"kube","call":{"op":"patch","api":{…},"namespace":"ns","name":"a","patchType":"merge","patch":{…}},"answer":{"error":{"reason":"not-found","message":"…"}}}
//! ```

use std::fmt;

use async_trait::async_trait;
use label_selector::LabelSelector;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json::Json;
use crate::action::Verb;
use crate::backend::{Backend, Call};

/// A resource type: group ("" for core), version, plural resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ApiResource {
    /// API group.
    pub(crate) group: String,
    /// API version.
    pub(crate) version: String,
    /// Plural resource.
    pub(crate) resource: String,
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
    pub(crate) fn api_version(&self) -> String {
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

/// Why a Kubernetes call failed; recorded as `{"reason": "not-found", "message": …}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "reason", content = "message", rename_all = "kebab-case")]
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
    /// A list larger than [`ListOptions::max_bytes`], or answers the host would not hold for the guest
    /// (past its memory limit, or the process's budget: see [`crate::answer_charge`]): `other` to the
    /// guest, and the call is stopped.
    #[error("{0}")]
    TooLarge(String),
}

impl KubeError {
    /// The error for a list of `api` that went past `limit` bytes, the module's memory limit.
    pub(crate) fn list_too_large(api: &ApiResource, limit: u64) -> KubeError {
        KubeError::TooLarge(format!(
            "list of {api} returned more than {limit} bytes, the module's memory limit (manifest [limits] memory)"
        ))
    }
}

/// The most terms a field selector may have.
pub(crate) const MAX_FIELD_SELECTOR_TERMS: usize = 100;

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

/// Why a field selector cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadFieldSelector {
    /// Longer than a label selector may be.
    #[error(
        "the field selector is {len} bytes long, more than the {} allowed",
        label_selector::MAX_LENGTH
    )]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// More terms than [`MAX_FIELD_SELECTOR_TERMS`].
    #[error("the field selector has more than the {MAX_FIELD_SELECTOR_TERMS} terms allowed")]
    TooManyTerms,
    /// A term that is not `field=value`, `field==value` or `field!=value` (as shown in messages).
    #[error("field selector term {0:?} is not field=value or field!=value")]
    Term(String),
}

impl FieldSelector {
    /// Parses `field=value`, `field==value` and `field!=value` terms separated by commas.
    pub fn parse(text: &str) -> Result<FieldSelector, BadFieldSelector> {
        if text.len() > label_selector::MAX_LENGTH {
            return Err(BadFieldSelector::TooLong { len: text.len() });
        }
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if terms.len() == MAX_FIELD_SELECTOR_TERMS {
                return Err(BadFieldSelector::TooManyTerms);
            }
            let (field, equals, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(BadFieldSelector::Term(
                    crate::shown::shown(term).into_owned(),
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

    /// Whether every term reads the object's `metadata.name` or `metadata.namespace` (true with no
    /// term): then an object's identity answers the selector without the object.
    pub(crate) fn reads_only_identity(&self) -> bool {
        self.terms
            .iter()
            .all(|t| t.pointer == "/metadata/name" || t.pointer == "/metadata/namespace")
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

/// Which objects a list returns. A call carries (and a recording holds) the selectors as written;
/// the limit is not part of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(try_from = "Selectors")]
pub struct ListOptions {
    /// The label selector as written (for backends that pass it on).
    #[serde(rename = "labelSelector")]
    pub(crate) label_selector_text: String,
    /// The label selector, parsed.
    #[serde(skip)]
    pub(crate) label_selector: LabelSelector,
    /// The field selector as written.
    #[serde(rename = "fieldSelector")]
    pub(crate) field_selector_text: String,
    /// The field selector, parsed.
    #[serde(skip)]
    pub(crate) field_selector: FieldSelector,
    /// The most bytes of objects the list may return (the module's memory limit); a backend stops
    /// reading pages past it and fails with [`KubeError::TooLarge`]. `None`: no limit.
    #[serde(skip)]
    pub(crate) max_bytes: Option<u64>,
}

/// The selectors of a list as written, parsed into [`ListOptions`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Selectors {
    label_selector: String,
    field_selector: String,
}

impl TryFrom<Selectors> for ListOptions {
    type Error = KubeError;

    fn try_from(s: Selectors) -> Result<ListOptions, KubeError> {
        ListOptions::parse(&s.label_selector, &s.field_selector)
    }
}

impl ListOptions {
    /// Parses both selectors; a malformed one is `Invalid`.
    pub fn parse(label_selector: &str, field_selector: &str) -> Result<ListOptions, KubeError> {
        Ok(ListOptions {
            label_selector_text: label_selector.to_string(),
            label_selector: LabelSelector::parse(label_selector).map_err(|e| {
                KubeError::Invalid(format!(
                    "label selector {:?}: {e}",
                    crate::shown::shown(label_selector)
                ))
            })?,
            field_selector_text: field_selector.to_string(),
            field_selector: FieldSelector::parse(field_selector)
                .map_err(|e| KubeError::Invalid(e.to_string()))?,
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

/// A patch: `"patchType": "merge" | "json" | "apply"` and `"patch"` in a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "patchType", content = "patch", rename_all = "lowercase")]
pub enum Patch {
    /// RFC 7386 JSON merge patch.
    Merge(Value),
    /// RFC 6902 JSON patch.
    Json(json_patch::Patch),
    /// Kubernetes server-side apply, forced: `object` names only the fields `field_manager` owns, so
    /// the host's own writes (the state it writes on module ConfigMaps) never touch what others
    /// wrote. Guests cannot send one: their patches are merge or JSON (WIT `patch-type`).
    Apply {
        /// The field manager the fields are owned by.
        #[serde(rename = "fieldManager")]
        field_manager: String,
        /// The fields, with `apiVersion`, `kind` and `metadata.name`.
        object: Value,
    },
}

impl Patch {
    /// The patch document, as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            Patch::Merge(v) => v.clone(),
            Patch::Json(p) => serde_json::to_value(p).unwrap_or(Value::Null),
            Patch::Apply { object, .. } => object.clone(),
        }
    }

    /// `merge`, `json` or `apply`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Patch::Merge(_) => "merge",
            Patch::Json(_) => "json",
            Patch::Apply { .. } => "apply",
        }
    }
}

/// One Kubernetes call, once the capability has authorized it and checked its input. `namespace` is
/// "" for cluster-scoped resources (and, for `list`, for all namespaces).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum KubeCall {
    /// Reads one object.
    Get {
        /// The resource type.
        api: ApiResource,
        /// The namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
    /// Lists objects in API order, every page, each with `apiVersion` and `kind`.
    List {
        /// The resource type.
        api: ApiResource,
        /// The namespace ("" for every namespace).
        namespace: String,
        /// The selectors and the limit.
        #[serde(flatten)]
        options: ListOptions,
    },
    /// Creates an object; answers it as stored.
    Create {
        /// The resource type.
        api: ApiResource,
        /// The namespace.
        namespace: String,
        /// The object.
        object: Value,
    },
    /// Replaces an object; answers it as stored.
    Update {
        /// The resource type.
        api: ApiResource,
        /// The namespace.
        namespace: String,
        /// The object.
        object: Value,
    },
    /// Patches an object; answers it as stored.
    Patch {
        /// The resource type.
        api: ApiResource,
        /// The namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The patch.
        #[serde(flatten)]
        patch: Patch,
    },
    /// Deletes an object.
    Delete {
        /// The resource type.
        api: ApiResource,
        /// The namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
}

impl KubeCall {
    /// The verb a grant must allow for this call.
    pub(crate) fn verb(&self) -> Verb {
        match self {
            KubeCall::Get { .. } => Verb::Get,
            KubeCall::List { .. } => Verb::List,
            KubeCall::Create { .. } => Verb::Create,
            KubeCall::Update { .. } => Verb::Update,
            KubeCall::Patch { .. } => Verb::Patch,
            KubeCall::Delete { .. } => Verb::Delete,
        }
    }

    /// The resource type and namespace the call is on.
    pub(crate) fn target(&self) -> (&ApiResource, &str) {
        match self {
            KubeCall::Get { api, namespace, .. }
            | KubeCall::List { api, namespace, .. }
            | KubeCall::Create { api, namespace, .. }
            | KubeCall::Update { api, namespace, .. }
            | KubeCall::Patch { api, namespace, .. }
            | KubeCall::Delete { api, namespace, .. } => (api, namespace),
        }
    }
}

/// What a Kubernetes call answers: null for a delete, the objects of a list, the object otherwise.
/// Objects are kept as the text they came as ([`Json`]), so that a read reaches the guest unparsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KubeAnswer {
    /// A delete's answer.
    Deleted,
    /// A list's objects.
    Objects(Vec<Json>),
    /// The object read or stored.
    Object(Json),
}

impl KubeAnswer {
    /// The answer holding `object`, written out as JSON.
    pub(crate) fn object_of(object: Value) -> KubeAnswer {
        KubeAnswer::Object(Json::from(object))
    }

    /// The object of a get, create, update or patch.
    pub(crate) fn object(self) -> Result<Json, KubeError> {
        match self {
            KubeAnswer::Object(object) => Ok(object),
            KubeAnswer::Deleted => Ok(Json::null()),
            KubeAnswer::Objects(_) => Err(KubeError::Other(
                "the answer is a list of objects, not an object".into(),
            )),
        }
    }

    /// The objects of a list.
    pub(crate) fn objects(self) -> Result<Vec<Json>, KubeError> {
        match self {
            KubeAnswer::Objects(objects) => Ok(objects),
            _ => Err(KubeError::Other(
                "the answer is not a list of objects".into(),
            )),
        }
    }
}

impl Call for KubeCall {
    const CAPABILITY: &'static str = "kube";
    type Answer = KubeAnswer;
    type Error = KubeError;

    /// `get configmaps.example.io v1 in ns named "a"`.
    fn describe(&self) -> String {
        let (api, namespace) = self.target();
        let scope = if namespace.is_empty() {
            "cluster-wide".to_string()
        } else {
            format!("in namespace {namespace}")
        };
        let target = match self {
            KubeCall::List { options, .. } => format!(
                " with labels {:?} and fields {:?}",
                options.label_selector_text, options.field_selector_text
            ),
            KubeCall::Create { object, .. } | KubeCall::Update { object, .. } => format!(
                " named {:?} (the object differs or was not recorded)",
                object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            KubeCall::Patch { name, patch, .. } => format!(
                " named {name:?} with this {} patch: {}",
                patch.kind(),
                patch.to_value()
            ),
            KubeCall::Get { name, .. } | KubeCall::Delete { name, .. } => {
                format!(" named {name:?}")
            }
        };
        format!(
            "{} {} {} {scope}{target}",
            self.verb(),
            api.group_resource(),
            api.version
        )
    }

    fn unanswered(message: String) -> KubeError {
        KubeError::Other(message)
    }
}

/// The six Kubernetes calls, typed, on any backend of kube calls: each makes its [`KubeCall`] and
/// takes the answer apart (for the host's own calls and for tests).
#[async_trait]
pub trait KubeApi: Backend<KubeCall> {
    /// Reads one object.
    async fn get(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Value, KubeError> {
        let (api, namespace, name) = (api.clone(), namespace.into(), name.into());
        self.call(KubeCall::Get {
            api,
            namespace,
            name,
        })
        .await?
        .object()
        .and_then(tree)
    }

    /// Lists objects.
    async fn list(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Value>, KubeError> {
        let (api, namespace, options) = (api.clone(), namespace.into(), options.clone());
        self.call(KubeCall::List {
            api,
            namespace,
            options,
        })
        .await?
        .objects()
        .map(|objects| {
            // An item too deep to read is `null`, which the list's reader takes for junk: one such
            // item does not make the whole list unreadable (a module ConfigMap that could, would keep
            // a deleted module serving from the last list: docs/modules.md §5, freezing).
            objects
                .iter()
                .map(|item| item.to_value().unwrap_or(Value::Null))
                .collect()
        })
    }

    /// Creates an object.
    async fn create(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        let (api, namespace) = (api.clone(), namespace.into());
        self.call(KubeCall::Create {
            api,
            namespace,
            object,
        })
        .await?
        .object()
        .and_then(tree)
    }

    /// Replaces an object.
    async fn update(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        let (api, namespace) = (api.clone(), namespace.into());
        self.call(KubeCall::Update {
            api,
            namespace,
            object,
        })
        .await?
        .object()
        .and_then(tree)
    }

    /// Patches an object.
    async fn patch(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        let (api, namespace, name, patch) =
            (api.clone(), namespace.into(), name.into(), patch.clone());
        self.call(KubeCall::Patch {
            api,
            namespace,
            name,
            patch,
        })
        .await?
        .object()
        .and_then(tree)
    }

    /// Deletes an object.
    async fn delete(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        let (api, namespace, name) = (api.clone(), namespace.into(), name.into());
        self.call(KubeCall::Delete {
            api,
            namespace,
            name,
        })
        .await?;
        Ok(())
    }
}

impl<B: Backend<KubeCall> + ?Sized> KubeApi for B {}

/// An object answer as a tree for the host's own calls; one too deep to read is an error that says so
/// (a `null` would read as an object with nothing in it: an empty version floor, for one).
fn tree(object: Json) -> Result<Value, KubeError> {
    object
        .to_value()
        .map_err(|e| KubeError::Other(format!("the API server's answer is {e}")))
}

/// The backend when there is no cluster: every call fails, saying so.
pub struct NoCluster(String);

impl NoCluster {
    /// A backend whose every call fails with `reason`.
    pub(crate) fn because(reason: impl Into<String>) -> NoCluster {
        NoCluster(reason.into())
    }
}

impl Default for NoCluster {
    fn default() -> NoCluster {
        NoCluster::because("no Kubernetes cluster is configured")
    }
}

#[async_trait]
impl Backend<KubeCall> for NoCluster {
    async fn call(&self, _: KubeCall) -> Result<KubeAnswer, KubeError> {
        Err(KubeError::Other(self.0.clone()))
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
            .to_string()
            .contains("more than the 100 terms"));
        let long = format!("metadata.name={}", "a".repeat(label_selector::MAX_LENGTH));
        assert!(FieldSelector::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("more than the 8192 allowed"));
    }
}
