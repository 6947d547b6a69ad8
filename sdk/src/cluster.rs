//! Kubernetes access behind a trait: [`HostCluster`] calls the host's `kube` capability, [`FakeCluster`]
//! serves objects from memory so that action logic can be unit-tested natively, with the calls it made
//! recorded for assertions.

use std::cell::RefCell;

use label_selector::LabelSelector;

use crate::bindings::velero_wasm::plugin::kube;
use crate::grant::KubeGrant;
use crate::Object;

pub use kube::Error as KubeError;

/// A resource type, as constants: `Api::new("kubevirt.io", "v1", "virtualmachines")`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api {
    /// API group, "" for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
}

impl Api {
    /// A resource type.
    pub const fn new(group: &'static str, version: &'static str, resource: &'static str) -> Api {
        Api {
            group,
            version,
            resource,
        }
    }

    /// Velero's `resource.group` form (`resource` alone for the core group).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    fn to_wit(self) -> kube::ApiResource {
        kube::ApiResource {
            group: self.group.to_string(),
            version: self.version.to_string(),
            resource: self.resource.to_string(),
        }
    }
}

impl KubeError {
    /// Whether the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, KubeError::NotFound(_))
    }

    /// The message, without the variant.
    pub fn message(&self) -> &str {
        match self {
            KubeError::NotFound(m)
            | KubeError::Conflict(m)
            | KubeError::Forbidden(m)
            | KubeError::Denied(m)
            | KubeError::Invalid(m)
            | KubeError::Other(m) => m,
        }
    }
}

/// One read of a batch ([`Cluster::read_all`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// [`Cluster::get`] of `name` in `namespace`.
    Get {
        /// The resource type.
        api: Api,
        /// The namespace ("" for cluster-scoped resources).
        namespace: String,
        /// The object's name.
        name: String,
    },
    /// [`Cluster::list`] in `namespace` with a label selector.
    List {
        /// The resource type.
        api: Api,
        /// The namespace ("" for all, or cluster-scoped).
        namespace: String,
        /// The label selector ("" for all).
        label_selector: String,
    },
}

/// The answer to one read of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadAnswer {
    /// The object a [`Read::Get`] read.
    Object(Object),
    /// The objects a [`Read::List`] listed.
    Objects(Vec<Object>),
}

/// The most reads the host takes in one batch; [`HostCluster::read_all`] sends longer ones in parts.
pub const MAX_BATCH: usize = 64;

/// One Kubernetes call, in the shape of the host's `kube` capability: what a [`Cluster`] answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KubeCall<'a> {
    /// Read one object.
    Get {
        /// The resource type.
        api: Api,
        /// The namespace ("" for a cluster-scoped object).
        namespace: &'a str,
        /// The object's name.
        name: &'a str,
    },
    /// List objects in a namespace ("" for all, or cluster-scoped) matching a label selector ("" for
    /// all).
    List {
        /// The resource type.
        api: Api,
        /// The namespace.
        namespace: &'a str,
        /// The label selector.
        label_selector: &'a str,
    },
    /// Create an object; answers it as stored.
    Create {
        /// The resource type.
        api: Api,
        /// The namespace.
        namespace: &'a str,
        /// The object.
        object: &'a Object,
    },
    /// Replace an object; answers it as stored.
    Update {
        /// The resource type.
        api: Api,
        /// The namespace.
        namespace: &'a str,
        /// The object.
        object: &'a Object,
    },
    /// Apply a JSON merge patch; answers the object as stored.
    MergePatch {
        /// The resource type.
        api: Api,
        /// The namespace.
        namespace: &'a str,
        /// The object's name.
        name: &'a str,
        /// The patch.
        patch: &'a serde_json::Value,
    },
    /// Delete an object.
    Delete {
        /// The resource type.
        api: Api,
        /// The namespace.
        namespace: &'a str,
        /// The object's name.
        name: &'a str,
    },
}

impl KubeCall<'_> {
    /// The resource type the call is on.
    pub fn api(&self) -> Api {
        match *self {
            KubeCall::Get { api, .. }
            | KubeCall::List { api, .. }
            | KubeCall::Create { api, .. }
            | KubeCall::Update { api, .. }
            | KubeCall::MergePatch { api, .. }
            | KubeCall::Delete { api, .. } => api,
        }
    }

    /// The verb a grant must allow for it: `get`, `list`, `create`, `update`, `patch` or `delete`.
    pub fn verb(&self) -> &'static str {
        match self {
            KubeCall::Get { .. } => "get",
            KubeCall::List { .. } => "list",
            KubeCall::Create { .. } => "create",
            KubeCall::Update { .. } => "update",
            KubeCall::MergePatch { .. } => "patch",
            KubeCall::Delete { .. } => "delete",
        }
    }
}

/// What a [`KubeCall`] answers: the object read or stored, a list's objects, or nothing for a delete.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeAnswer {
    /// The object read or stored.
    Object(Object),
    /// A list's objects.
    Objects(Vec<Object>),
    /// A delete's answer.
    Deleted,
}

impl KubeAnswer {
    /// The object, for a get, create, update or patch.
    pub fn into_object(self) -> Result<Object, KubeError> {
        match self {
            KubeAnswer::Object(object) => Ok(object),
            other => Err(other.unexpected("an object")),
        }
    }

    /// The objects, for a list.
    pub fn into_objects(self) -> Result<Vec<Object>, KubeError> {
        match self {
            KubeAnswer::Objects(objects) => Ok(objects),
            other => Err(other.unexpected("a list of objects")),
        }
    }

    fn unexpected(&self, wanted: &str) -> KubeError {
        let got = match self {
            KubeAnswer::Object(_) => "an object",
            KubeAnswer::Objects(_) => "a list of objects",
            KubeAnswer::Deleted => "nothing",
        };
        KubeError::Other(format!("the cluster answered {got} where {wanted} was due"))
    }
}

/// The Kubernetes operations an action uses: one method, [`Cluster::call`], in the shape of the host's
/// capability (a test double implements it alone), and typed helpers over it. Objects are
/// [`Object`]s; errors keep "not found" distinct.
pub trait Cluster {
    /// Answers one call.
    fn call(&self, call: KubeCall<'_>) -> Result<KubeAnswer, KubeError>;

    /// Reads one object.
    fn get(&self, api: Api, namespace: &str, name: &str) -> Result<Object, KubeError> {
        self.call(KubeCall::Get {
            api,
            namespace,
            name,
        })?
        .into_object()
    }

    /// Lists objects in a namespace ("" for all, or cluster-scoped) matching a label selector ("" for all).
    fn list(
        &self,
        api: Api,
        namespace: &str,
        label_selector: &str,
    ) -> Result<Vec<Object>, KubeError> {
        self.call(KubeCall::List {
            api,
            namespace,
            label_selector,
        })?
        .into_objects()
    }

    /// Creates an object and returns it as stored.
    fn create(&self, api: Api, namespace: &str, object: &Object) -> Result<Object, KubeError> {
        self.call(KubeCall::Create {
            api,
            namespace,
            object,
        })?
        .into_object()
    }

    /// Replaces an object and returns it as stored.
    fn update(&self, api: Api, namespace: &str, object: &Object) -> Result<Object, KubeError> {
        self.call(KubeCall::Update {
            api,
            namespace,
            object,
        })?
        .into_object()
    }

    /// Applies a JSON merge patch and returns the object as stored.
    fn merge_patch(
        &self,
        api: Api,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Object, KubeError> {
        self.call(KubeCall::MergePatch {
            api,
            namespace,
            name,
            patch,
        })?
        .into_object()
    }

    /// Deletes an object.
    fn delete(&self, api: Api, namespace: &str, name: &str) -> Result<(), KubeError> {
        self.call(KubeCall::Delete {
            api,
            namespace,
            name,
        })
        .map(|_| ())
    }

    /// Several reads that do not depend on each other, answered in order. The host sends them at once
    /// (one round trip instead of one per read, WIT 0.1.1 `kube.read-all`); this default makes them
    /// one after another, as [`FakeCluster`] does.
    fn read_all(&self, reads: &[Read]) -> Vec<Result<ReadAnswer, KubeError>> {
        reads
            .iter()
            .map(|read| match read {
                Read::Get {
                    api,
                    namespace,
                    name,
                } => self.get(*api, namespace, name).map(ReadAnswer::Object),
                Read::List {
                    api,
                    namespace,
                    label_selector,
                } => self
                    .list(*api, namespace, label_selector)
                    .map(ReadAnswer::Objects),
            })
            .collect()
    }
}

/// The host's `kube` capability.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostCluster;

fn parse_answer(json: String) -> Result<Object, KubeError> {
    Object::parse(&json)
        .map_err(|e| KubeError::Other(format!("the host returned a malformed object: {e}")))
}

impl Cluster for HostCluster {
    fn call(&self, call: KubeCall<'_>) -> Result<KubeAnswer, KubeError> {
        let api = call.api().to_wit();
        let object = |json| parse_answer(json).map(KubeAnswer::Object);
        match call {
            KubeCall::Get {
                namespace, name, ..
            } => object(kube::get(&api, namespace, name)?),
            KubeCall::List {
                namespace,
                label_selector,
                ..
            } => {
                let options = kube::ListOptions {
                    label_selector: label_selector.to_string(),
                    field_selector: String::new(),
                };
                kube::list(&api, namespace, &options)?
                    .into_iter()
                    .map(parse_answer)
                    .collect::<Result<_, _>>()
                    .map(KubeAnswer::Objects)
            }
            KubeCall::Create {
                namespace,
                object: o,
                ..
            } => object(kube::create(&api, namespace, &o.to_json())?),
            KubeCall::Update {
                namespace,
                object: o,
                ..
            } => object(kube::update(&api, namespace, &o.to_json())?),
            KubeCall::MergePatch {
                namespace,
                name,
                patch,
                ..
            } => object(kube::patch(
                &api,
                namespace,
                name,
                kube::PatchType::Merge,
                &patch.to_string(),
            )?),
            KubeCall::Delete {
                namespace, name, ..
            } => kube::delete(&api, namespace, name).map(|()| KubeAnswer::Deleted),
        }
    }

    fn read_all(&self, reads: &[Read]) -> Vec<Result<ReadAnswer, KubeError>> {
        let mut answers = Vec::with_capacity(reads.len());
        for part in reads.chunks(MAX_BATCH) {
            let wit_reads: Vec<kube::Read> = part
                .iter()
                .map(|read| match read {
                    Read::Get {
                        api,
                        namespace,
                        name,
                    } => kube::Read::Get(kube::GetRead {
                        api: api.to_wit(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                    }),
                    Read::List {
                        api,
                        namespace,
                        label_selector,
                    } => kube::Read::List(kube::ListRead {
                        api: api.to_wit(),
                        namespace: namespace.clone(),
                        options: kube::ListOptions {
                            label_selector: label_selector.clone(),
                            field_selector: String::new(),
                        },
                    }),
                })
                .collect();
            answers.extend(kube::read_all(&wit_reads).into_iter().map(|answer| {
                match answer? {
                    kube::ReadAnswer::Object(json) => parse_answer(json).map(ReadAnswer::Object),
                    kube::ReadAnswer::Objects(texts) => texts
                        .into_iter()
                        .map(parse_answer)
                        .collect::<Result<_, _>>()
                        .map(ReadAnswer::Objects),
                }
            }));
        }
        answers
    }
}

/// One call a [`FakeCluster`] answered, for assertions: verb, `resource.group`, namespace, and the name
/// or label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `get`, `list`, `create`, `update`, `patch` or `delete`.
    pub verb: &'static str,
    /// `resource.group`.
    pub resource: String,
    /// Namespace.
    pub namespace: String,
    /// Object name (get, create, update, patch, delete) or label selector (list).
    pub target: String,
}

/// An in-memory cluster for native unit tests of action logic. Given the module's manifest
/// ([`FakeCluster::with_manifest`]), it refuses what the grant does not allow, with the error the host
/// gives.
///
/// ```
/// use velero_wasm_sdk::{Api, Cluster, FakeCluster, Object};
///
/// const PVCS: Api = Api::new("", "v1", "persistentvolumeclaims");
/// let pvc = Object::parse(r#"{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
///     "metadata": {"name": "data", "namespace": "apps", "labels": {"app": "web"}}}"#)?;
/// let cluster = FakeCluster::new().with(PVCS, pvc);
/// assert_eq!(cluster.list(PVCS, "apps", "app=web").unwrap().len(), 1);
/// assert!(cluster.get(PVCS, "apps", "logs").unwrap_err().is_not_found());
/// assert_eq!(cluster.calls()[1].verb, "get");
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Default)]
pub struct FakeCluster {
    objects: RefCell<Vec<(String, Object)>>,
    calls: RefCell<Vec<Call>>,
    failing_lists: RefCell<Vec<String>>,
    grant: Option<KubeGrant>,
    item_namespace: Option<String>,
    velero_namespace: String,
}

impl FakeCluster {
    /// An empty cluster.
    pub fn new() -> FakeCluster {
        FakeCluster::default()
    }

    /// Adds an object of resource `api`.
    pub fn with(self, api: Api, object: Object) -> FakeCluster {
        self.objects
            .borrow_mut()
            .push((api.group_resource(), object));
        self
    }

    /// Applies the Kubernetes grant of module `module`'s manifest (the text of its `<name>.toml`) as the
    /// host does: a call no `[[grant.kube]]` rule allows fails with [`KubeError::Denied`] and the host's
    /// message, and is not recorded. Without a manifest every call is allowed.
    ///
    /// ```
    /// use velero_wasm_sdk::{Api, Cluster, FakeCluster, KubeError};
    ///
    /// let manifest = r#"
    ///     [[grant.kube]]
    ///     resources = ["persistentvolumeclaims"]
    ///     verbs = ["get", "list"]
    ///     namespaces = ["@item"]
    /// "#;
    /// let cluster = FakeCluster::new()
    ///     .with_manifest("label-pvcs", manifest)?
    ///     .item_namespace("apps");
    /// let pvs = Api::new("", "v1", "persistentvolumes");
    /// match cluster.get(pvs, "", "pv-1") {
    ///     Err(KubeError::Denied(message)) => assert!(message.ends_with(
    ///         r#"[[grant.kube]] resources = ["persistentvolumes"] verbs = ["get"] namespaces = [""]"#
    ///     )),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), String>(())
    /// ```
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_manifest(mut self, module: &str, manifest: &str) -> Result<FakeCluster, String> {
        self.grant = Some(KubeGrant::from_manifest(module, manifest)?);
        Ok(self)
    }

    /// The namespace of the item the action is called on: what `@item` in the grant means (without it,
    /// `@item` allows nothing, as for a call with no item).
    pub fn item_namespace(mut self, namespace: &str) -> FakeCluster {
        self.item_namespace = Some(namespace.to_string());
        self
    }

    /// The namespace Velero runs in: what `@velero` in the grant means (without it, `@velero` allows
    /// nothing, as when the host does not know it).
    pub fn velero_namespace(mut self, namespace: &str) -> FakeCluster {
        self.velero_namespace = namespace.to_string();
        self
    }

    /// Makes every `list` of `api` fail (to test error paths).
    pub fn failing_list(self, api: Api) -> FakeCluster {
        self.failing_lists.borrow_mut().push(api.group_resource());
        self
    }

    /// The calls answered so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.borrow().clone()
    }

    /// Checks a call against the grant, then records it.
    fn record(
        &self,
        verb: &'static str,
        api: Api,
        namespace: &str,
        target: &str,
    ) -> Result<(), KubeError> {
        if let Some(grant) = &self.grant {
            let item = self.item_namespace.as_deref();
            let gr = api.group_resource();
            if !grant.allows(verb, &gr, namespace, item, &self.velero_namespace) {
                return Err(KubeError::Denied(grant.denial(
                    verb,
                    &gr,
                    namespace,
                    item,
                    &self.velero_namespace,
                )));
            }
        }
        self.calls.borrow_mut().push(Call {
            verb,
            resource: api.group_resource(),
            namespace: namespace.to_string(),
            target: target.to_string(),
        });
        Ok(())
    }

    fn position(&self, api: Api, namespace: &str, name: &str) -> Option<usize> {
        let gr = api.group_resource();
        self.objects
            .borrow()
            .iter()
            .position(|(r, o)| *r == gr && o.namespace() == namespace && o.name() == name)
    }

    fn not_found(api: Api, name: &str) -> KubeError {
        KubeError::NotFound(format!("{} \"{name}\" not found", api.group_resource()))
    }
}

impl Cluster for FakeCluster {
    fn call(&self, call: KubeCall<'_>) -> Result<KubeAnswer, KubeError> {
        match call {
            KubeCall::Get {
                api,
                namespace,
                name,
            } => self.read(api, namespace, name).map(KubeAnswer::Object),
            KubeCall::List {
                api,
                namespace,
                label_selector,
            } => self
                .list_objects(api, namespace, label_selector)
                .map(KubeAnswer::Objects),
            KubeCall::Create {
                api,
                namespace,
                object,
            } => self.insert(api, namespace, object).map(KubeAnswer::Object),
            KubeCall::Update {
                api,
                namespace,
                object,
            } => self.replace(api, namespace, object).map(KubeAnswer::Object),
            KubeCall::MergePatch {
                api,
                namespace,
                name,
                patch,
            } => self
                .patch(api, namespace, name, patch)
                .map(KubeAnswer::Object),
            KubeCall::Delete {
                api,
                namespace,
                name,
            } => self
                .remove(api, namespace, name)
                .map(|()| KubeAnswer::Deleted),
        }
    }
}

impl FakeCluster {
    fn read(&self, api: Api, namespace: &str, name: &str) -> Result<Object, KubeError> {
        self.record("get", api, namespace, name)?;
        let at = self
            .position(api, namespace, name)
            .ok_or_else(|| Self::not_found(api, name))?;
        Ok(self.objects.borrow()[at].1.clone())
    }

    fn list_objects(
        &self,
        api: Api,
        namespace: &str,
        label_selector: &str,
    ) -> Result<Vec<Object>, KubeError> {
        self.record("list", api, namespace, label_selector)?;
        let gr = api.group_resource();
        if self.failing_lists.borrow().contains(&gr) {
            return Err(KubeError::Other(format!("listing {gr} failed (injected)")));
        }
        let selector =
            LabelSelector::parse(label_selector).map_err(|e| KubeError::Invalid(e.to_string()))?;
        Ok(self
            .objects
            .borrow()
            .iter()
            .filter(|(r, o)| *r == gr && (namespace.is_empty() || o.namespace() == namespace))
            .filter(|(_, o)| selector.matches_with(|k| o.label(k)))
            .map(|(_, o)| o.clone())
            .collect())
    }

    fn insert(&self, api: Api, namespace: &str, object: &Object) -> Result<Object, KubeError> {
        self.record("create", api, namespace, object.name())?;
        if self.position(api, namespace, object.name()).is_some() {
            return Err(KubeError::Conflict(format!(
                "{} \"{}\" already exists",
                api.group_resource(),
                object.name()
            )));
        }
        self.objects
            .borrow_mut()
            .push((api.group_resource(), object.clone()));
        Ok(object.clone())
    }

    fn replace(&self, api: Api, namespace: &str, object: &Object) -> Result<Object, KubeError> {
        self.record("update", api, namespace, object.name())?;
        let at = self
            .position(api, namespace, object.name())
            .ok_or_else(|| Self::not_found(api, object.name()))?;
        self.objects.borrow_mut()[at].1 = object.clone();
        Ok(object.clone())
    }

    fn patch(
        &self,
        api: Api,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Object, KubeError> {
        self.record("patch", api, namespace, name)?;
        let at = self
            .position(api, namespace, name)
            .ok_or_else(|| Self::not_found(api, name))?;
        let mut objects = self.objects.borrow_mut();
        let mut value = objects[at].1.clone().into_value();
        merge(&mut value, patch);
        let patched = Object::from_value(value).map_err(KubeError::Invalid)?;
        objects[at].1 = patched.clone();
        Ok(patched)
    }

    fn remove(&self, api: Api, namespace: &str, name: &str) -> Result<(), KubeError> {
        self.record("delete", api, namespace, name)?;
        let at = self
            .position(api, namespace, name)
            .ok_or_else(|| Self::not_found(api, name))?;
        self.objects.borrow_mut().remove(at);
        Ok(())
    }
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            let Some(map) = target.as_object_mut() else {
                return;
            };
            for (k, v) in fields {
                if v.is_null() {
                    map.remove(k);
                } else {
                    merge(map.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PODS: Api = Api::new("", "v1", "pods");

    fn pod(name: &str, labels: serde_json::Value) -> Object {
        Object::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": labels}
        }))
        .unwrap()
    }

    #[test]
    fn fake_cluster_answers_and_records_calls() {
        let c = FakeCluster::new()
            .with(PODS, pod("a", serde_json::json!({"app": "web"})))
            .with(PODS, pod("b", serde_json::json!({})));
        assert_eq!(c.get(PODS, "ns", "a").unwrap().name(), "a");
        assert!(c.get(PODS, "ns", "zz").unwrap_err().is_not_found());
        let listed = c.list(PODS, "ns", "app=web").unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(c.calls().len(), 3);
        assert_eq!(c.calls()[2].target, "app=web");
    }

    #[test]
    fn a_batch_on_the_fake_cluster_is_its_reads_in_order() {
        let c = FakeCluster::new().with(PODS, pod("a", serde_json::json!({"app": "web"})));
        let reads = [
            Read::List {
                api: PODS,
                namespace: "ns".into(),
                label_selector: "app=web".into(),
            },
            Read::Get {
                api: PODS,
                namespace: "ns".into(),
                name: "zz".into(),
            },
            Read::Get {
                api: PODS,
                namespace: "ns".into(),
                name: "a".into(),
            },
        ];
        let answers = c.read_all(&reads);
        assert!(matches!(&answers[0], Ok(ReadAnswer::Objects(o)) if o.len() == 1));
        assert!(answers[1].as_ref().unwrap_err().is_not_found());
        assert!(matches!(&answers[2], Ok(ReadAnswer::Object(o)) if o.name() == "a"));
        let verbs: Vec<_> = c.calls().iter().map(|c| c.verb).collect();
        assert_eq!(verbs, ["list", "get", "get"]);
    }

    #[test]
    fn fake_cluster_with_a_manifest_denies_what_the_grant_does_not_allow_as_the_host_does() {
        let manifest = r#"
            [[grant.kube]]
            resources = ["pods"]
            verbs = ["get", "list"]
            namespaces = ["@item"]
            [[grant.kube]]
            resources = ["configmaps"]
            verbs = ["get"]
            namespaces = ["@velero"]
        "#;
        let c = FakeCluster::new()
            .with(PODS, pod("a", serde_json::json!({})))
            .with_manifest("labeler", manifest)
            .unwrap()
            .item_namespace("ns")
            .velero_namespace("velero");
        assert_eq!(c.get(PODS, "ns", "a").unwrap().name(), "a");
        assert_eq!(c.list(PODS, "ns", "").unwrap().len(), 1);
        let configmaps = Api::new("", "v1", "configmaps");
        assert!(c.get(configmaps, "velero", "x").unwrap_err().is_not_found());
        for (result, message) in [
            (
                c.get(PODS, "kube-system", "a").map(|_| ()),
                r#"permission denied: module labeler is not granted get on pods in namespace kube-system; the manifest rule that allows it: [[grant.kube]] resources = ["pods"] verbs = ["get"] namespaces = ["kube-system"]"#,
            ),
            (
                c.delete(PODS, "ns", "a"),
                r#"permission denied: module labeler is not granted delete on pods in namespace ns; the manifest rule that allows it: [[grant.kube]] resources = ["pods"] verbs = ["delete"] namespaces = ["@item"]"#,
            ),
            (
                c.list(configmaps, "velero", "").map(|_| ()),
                r#"permission denied: module labeler is not granted list on configmaps in namespace velero; the manifest rule that allows it: [[grant.kube]] resources = ["configmaps"] verbs = ["list"] namespaces = ["@velero"]"#,
            ),
        ] {
            match result {
                Err(KubeError::Denied(m)) => assert_eq!(m, message),
                other => panic!("{other:?}"),
            }
        }
        // Denied calls never reached the cluster: the object is still there, and they are not recorded.
        assert_eq!(c.get(PODS, "ns", "a").unwrap().name(), "a");
        assert_eq!(c.calls().len(), 4);
        assert!(FakeCluster::new()
            .with_manifest(
                "m",
                "[[grant.kube]]\nresources = [\"pods\"]\nverbs = [\"watch\"]\nnamespaces = [\"*\"]"
            )
            .is_err());
    }

    #[test]
    fn fake_cluster_applies_writes() {
        let c = FakeCluster::new().with(PODS, pod("a", serde_json::json!({})));
        c.merge_patch(
            PODS,
            "ns",
            "a",
            &serde_json::json!({"metadata": {"labels": {"x": "1"}}}),
        )
        .unwrap();
        assert_eq!(c.get(PODS, "ns", "a").unwrap().label("x"), Some("1"));
        assert!(matches!(
            c.create(PODS, "ns", &pod("a", serde_json::json!({}))),
            Err(KubeError::Conflict(_))
        ));
        c.delete(PODS, "ns", "a").unwrap();
        assert!(c.get(PODS, "ns", "a").is_err());
    }
}
