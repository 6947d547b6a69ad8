//! An in-memory cluster built from fixture files (`run --cluster`) or from a backup's items (`diff`):
//! get by name, list by namespace and selectors in API order (namespace, then name, as kube-apiserver
//! returns them), and writes applied to the in-memory state (`run` reports them through
//! [`super::writes::WriteLog`]). The integration tests' loopback API server stores its objects here
//! too, so both answer writes alike.
//!
//! Objects are held as their JSON text, with the labels list selectors match: a parsed
//! `serde_json::Value` takes ten times its text or more (eighty bytes a value, and an object's
//! table), so a cluster of a backup's items would take many times the backup. A read hands the text
//! on as it is; a write, or a field selector on other fields than the name and namespace, parses the
//! one object it needs.

use std::collections::BTreeMap;
use std::mem::size_of;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;

use super::json::Json;
use super::vocabulary::{ApiResource, KubeAnswer, KubeCall, KubeError, ListOptions, Patch};
use crate::action::{plural_of, ItemRef};
use crate::backend::Backend;
use crate::documents::{read_objects, DocumentError};
use crate::heap_cost::{allocation, btree_entry, btree_node, string_map};

/// A fixture file that cannot become part of the cluster.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// Unreadable or unparseable file.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// An object without `apiVersion`, `kind` or `metadata.name`.
    #[error("{}: an object needs apiVersion, kind and metadata.name (found {found})", path.display())]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// What the object had.
        found: String,
    },
    /// The same object twice.
    #[error("{} and {}: both define {what}", first.display(), second.display())]
    Duplicate {
        /// Where it was first defined.
        first: PathBuf,
        /// Where it was defined again.
        second: PathBuf,
        /// The object.
        what: String,
    },
}

/// `(resource.group, namespace, name)`: sorts like kube-apiserver's storage keys.
type Key = (String, String, String);

/// One object as the cluster holds it: shared, as the text of a backup's item is with `diff`'s list
/// of items and between the clusters of its two module sets.
struct Stored {
    /// The object's JSON text.
    text: Arc<str>,
    /// Its `metadata.labels` that are strings (what a label selector can match).
    labels: BTreeMap<String, String>,
}

impl Stored {
    fn of(object: &Value) -> Arc<Stored> {
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Arc::new(Stored {
            text: object.to_string().into(),
            labels,
        })
    }

    /// The object, parsed (the text was JSON when it was stored).
    fn value(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// Whether `options` select the object of `key`: from its name, namespace and labels when the
    /// selectors look at nothing else, else from the parsed object.
    fn matches(&self, key: &Key, options: &ListOptions) -> bool {
        if options.field_selector.reads_only_identity() {
            let skeleton = serde_json::json!({"metadata": {
                "name": key.2, "namespace": key.1, "labels": self.labels,
            }});
            options.matches(&skeleton)
        } else {
            options.matches(&self.value())
        }
    }

    fn json(&self) -> Json {
        Json::parse(self.text.as_bytes()).unwrap_or_else(|_| Json::null())
    }
}

#[derive(Default)]
struct State {
    objects: BTreeMap<Key, Arc<Stored>>,
    counter: u64,
}

/// What a cluster made by [`FixtureCluster::of_items`] holds for one item besides the text it
/// shares, as the allocator takes it: the object's entry and a copy of its labels, shared by the
/// cluster's copies ([`FixtureCluster::copy`]), and in each of `copies` clusters the item's key and
/// its share of the map's nodes. A unit test holds it to what the clusters allocate.
pub(crate) fn held_per_item(identity: &ItemRef, copies: u64) -> u64 {
    let shared = allocation((2 * size_of::<usize>() + size_of::<Stored>()) as u64)
        + string_map(&identity.labels);
    let key = [
        identity.group_resource().len(),
        identity.namespace.len(),
        identity.name.len(),
    ]
    .iter()
    .map(|len| allocation(*len as u64))
    .sum::<u64>()
        + btree_entry(MAP_ENTRY);
    shared + copies * key
}

/// What one cluster holds besides its objects: itself and its map's root node.
pub(crate) fn held_per_cluster() -> u64 {
    allocation(size_of::<FixtureCluster>() as u64 + 2 * size_of::<usize>() as u64)
        + btree_node(MAP_ENTRY)
}

/// One entry of a cluster's map: the key and the shared object.
const MAP_ENTRY: u64 = (size_of::<Key>() + size_of::<Arc<Stored>>()) as u64;

/// The in-memory cluster.
pub struct FixtureCluster {
    state: Mutex<State>,
    clock: Box<dyn Now>,
}

/// Where a fixture cluster reads the time it stamps on what it creates (`creationTimestamp`): the
/// runtime's clock (`capabilities::Clock`), so that a run at a fixed time stamps the same times, or a
/// fixed instant ([`SystemTime`]).
pub trait Now: Send + Sync {
    /// The time now.
    fn now(&self) -> SystemTime;
}

impl Now for SystemTime {
    fn now(&self) -> SystemTime {
        *self
    }
}

fn key_of(object: &Value) -> Option<Key> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str().filter(|k| !k.is_empty())?;
    let name = object
        .pointer("/metadata/name")?
        .as_str()
        .filter(|n| !n.is_empty())?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let resource = plural_of(kind);
    let group_resource = if group.is_empty() {
        resource
    } else {
        format!("{resource}.{group}")
    };
    Some((group_resource, namespace.to_string(), name.to_string()))
}

fn describe(key: &Key) -> String {
    if key.1.is_empty() {
        format!("{} {}", key.0, key.2)
    } else {
        format!("{} {}/{}", key.0, key.1, key.2)
    }
}

fn not_found(api: &ApiResource, name: &str) -> KubeError {
    KubeError::NotFound(format!("{} \"{name}\" not found", api.group_resource()))
}

impl FixtureCluster {
    /// An empty cluster.
    pub fn empty(clock: impl Now + 'static) -> FixtureCluster {
        FixtureCluster {
            state: Mutex::new(State::default()),
            clock: Box::new(clock),
        }
    }

    /// A cluster holding every object in these files and directories.
    pub fn load(
        paths: &[PathBuf],
        clock: impl Now + 'static,
    ) -> Result<FixtureCluster, FixtureError> {
        let mut objects: BTreeMap<Key, (PathBuf, Arc<Stored>)> = BTreeMap::new();
        for (path, object) in read_objects(paths)? {
            let key = key_of(&object).ok_or_else(|| FixtureError::NotAnObject {
                path: path.clone(),
                found: format!(
                    "apiVersion {}, kind {}, name {}",
                    object.get("apiVersion").unwrap_or(&Value::Null),
                    object.get("kind").unwrap_or(&Value::Null),
                    object.pointer("/metadata/name").unwrap_or(&Value::Null)
                ),
            })?;
            if let Some((first, _)) = objects.get(&key) {
                return Err(FixtureError::Duplicate {
                    first: first.clone(),
                    second: path,
                    what: describe(&key),
                });
            }
            objects.insert(key, (path, Stored::of(&object)));
        }
        Ok(FixtureCluster {
            state: Mutex::new(State {
                objects: objects.into_iter().map(|(k, (_, v))| (k, v)).collect(),
                ..State::default()
            }),
            clock: Box::new(clock),
        })
    }

    /// A cluster holding items already read and checked (`diff`'s backup items): each is where it was
    /// read from, its identity and its JSON text, which the cluster shares rather than copies.
    pub fn of_items<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a ItemRef, &'a Arc<str>)>,
        clock: impl Now + 'static,
    ) -> Result<FixtureCluster, FixtureError> {
        let mut objects: BTreeMap<Key, (&str, Arc<Stored>)> = BTreeMap::new();
        for (from, identity, text) in items {
            if identity.api_version.is_empty()
                || identity.kind.is_empty()
                || identity.name.is_empty()
            {
                return Err(FixtureError::NotAnObject {
                    path: from.into(),
                    found: format!(
                        "apiVersion {:?}, kind {:?}, name {:?}",
                        identity.api_version, identity.kind, identity.name
                    ),
                });
            }
            let key = (
                identity.group_resource(),
                identity.namespace.clone(),
                identity.name.clone(),
            );
            if let Some((first, _)) = objects.get(&key) {
                return Err(FixtureError::Duplicate {
                    first: first.into(),
                    second: from.into(),
                    what: describe(&key),
                });
            }
            let stored = Stored {
                text: text.clone(),
                labels: identity.labels.clone(),
            };
            objects.insert(key, (from, Arc::new(stored)));
        }
        Ok(FixtureCluster {
            state: Mutex::new(State {
                objects: objects.into_iter().map(|(k, (_, v))| (k, v)).collect(),
                ..State::default()
            }),
            clock: Box::new(clock),
        })
    }

    /// A cluster of the same objects as this one, sharing their text, whose writes are its own.
    pub(crate) fn copy(&self, clock: impl Now + 'static) -> FixtureCluster {
        let state = self.lock();
        FixtureCluster {
            state: Mutex::new(State {
                objects: state.objects.clone(),
                counter: state.counter,
            }),
            clock: Box::new(clock),
        }
    }

    /// The last `resourceVersion` a write gave (0 before any): what a list reports as its own.
    pub fn resource_version(&self) -> u64 {
        self.lock().counter
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }
}

fn set_meta(object: &mut Value, field: &str, value: Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(field.to_string(), value);
    }
}

fn resource_version(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

#[async_trait]
impl Backend<KubeCall> for FixtureCluster {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        let (api, namespace) = call.target();
        let (api, ns) = (&api.clone(), &namespace.to_string());
        match call {
            KubeCall::Get { name, .. } => self
                .stored(api, ns, &name)
                .map(|stored| KubeAnswer::Object(stored.json())),
            KubeCall::List { options, .. } => Ok(KubeAnswer::Objects(
                self.selected(api, ns, &options)
                    .iter()
                    .map(|stored| stored.json())
                    .collect(),
            )),
            KubeCall::Create { object, .. } => {
                self.insert(api, ns, object).map(KubeAnswer::object_of)
            }
            KubeCall::Update { object, .. } => {
                self.replace(api, ns, object).map(KubeAnswer::object_of)
            }
            KubeCall::Patch { name, patch, .. } => self
                .apply(api, ns, &name, &patch)
                .map(KubeAnswer::object_of),
            KubeCall::Delete { name, .. } => {
                self.remove(api, ns, &name).map(|()| KubeAnswer::Deleted)
            }
        }
    }
}

/// The operations one at a time, for a caller that speaks another protocol (the tests' API server).
impl FixtureCluster {
    /// The object `name` of `api` in `namespace`.
    pub fn read(&self, api: &ApiResource, namespace: &str, name: &str) -> Result<Value, KubeError> {
        self.stored(api, namespace, name)
            .map(|stored| stored.value())
    }

    fn stored(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Stored>, KubeError> {
        let key = (
            api.group_resource(),
            namespace.to_string(),
            name.to_string(),
        );
        self.lock()
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(api, name))
    }

    /// The objects of `api` in `namespace` (every namespace when empty) that `options` select.
    pub fn select(&self, api: &ApiResource, namespace: &str, options: &ListOptions) -> Vec<Value> {
        self.selected(api, namespace, options)
            .iter()
            .map(|stored| stored.value())
            .collect()
    }

    fn selected(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Vec<Arc<Stored>> {
        let group_resource = api.group_resource();
        let state = self.lock();
        state
            .objects
            .iter()
            .filter(|((gr, ns, _), _)| {
                *gr == group_resource && (namespace.is_empty() || ns == namespace)
            })
            .filter(|(key, stored)| stored.matches(key, options))
            .map(|(_, stored)| stored.clone())
            .collect()
    }

    /// Creates `object` (named by `metadata.generateName` when it has no name), with a new uid,
    /// `resourceVersion` and `creationTimestamp`.
    pub fn insert(
        &self,
        api: &ApiResource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, KubeError> {
        let mut state = self.lock();
        let n = state.next();
        if object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            let prefix = object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if prefix.is_empty() {
                // kube-apiserver's words, so that a module sees the same error from both.
                let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
                return Err(KubeError::Invalid(format!(
                    "{kind} \"\" is invalid: metadata.name: Required value: name or generateName is required"
                )));
            }
            let name = format!("{prefix}{n:05x}");
            set_meta(&mut object, "name", Value::String(name));
        }
        object["apiVersion"] = Value::String(api.api_version());
        if object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            return Err(KubeError::Invalid("the object needs a kind".into()));
        }
        let key = key_of(&object)
            .ok_or_else(|| KubeError::Invalid("the object needs a kind and a name".into()))?;
        if key.0 != api.group_resource() || key.1 != namespace {
            return Err(KubeError::Invalid(format!(
                "an object of kind {} in namespace {:?} cannot be created as {} in namespace {namespace:?}",
                object["kind"],
                key.1,
                api.group_resource()
            )));
        }
        if state.objects.contains_key(&key) {
            return Err(KubeError::Conflict(format!(
                "{} \"{}\" already exists",
                key.0, key.2
            )));
        }
        set_meta(
            &mut object,
            "uid",
            Value::String(format!("00000000-0000-4000-8000-{n:012x}")),
        );
        set_meta(&mut object, "resourceVersion", Value::String(n.to_string()));
        let created = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        set_meta(&mut object, "creationTimestamp", Value::String(created));
        state.objects.insert(key, Stored::of(&object));
        Ok(object)
    }

    /// Replaces the object of `object`'s name, keeping its uid and creation time; a `resourceVersion`
    /// in `object` must be the stored one.
    pub fn replace(
        &self,
        api: &ApiResource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, KubeError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let key = (api.group_resource(), namespace.to_string(), name.clone());
        let mut state = self.lock();
        let stored = state
            .objects
            .get(&key)
            .ok_or_else(|| not_found(api, &name))?
            .value();
        if let Some(rv) = resource_version(&object) {
            if Some(rv) != resource_version(&stored) {
                return Err(KubeError::Conflict(format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    key.0
                )));
            }
        }
        for kept in ["uid", "creationTimestamp"] {
            if let Some(v) = stored.pointer(&format!("/metadata/{kept}")).cloned() {
                set_meta(&mut object, kept, v);
            }
        }
        let n = state.next();
        set_meta(&mut object, "resourceVersion", Value::String(n.to_string()));
        state.objects.insert(key, Stored::of(&object));
        Ok(object)
    }

    /// Patches the object `name`; a patch that fails or changes the object's identity changes nothing.
    pub fn apply(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        let key = (
            api.group_resource(),
            namespace.to_string(),
            name.to_string(),
        );
        let mut state = self.lock();
        let mut object = state
            .objects
            .get(&key)
            .ok_or_else(|| not_found(api, name))?
            .value();
        match patch {
            Patch::Merge(doc) => json_patch::merge(&mut object, doc),
            Patch::Json(ops) => apply_json_patch(&mut object, ops)?,
            // As the fields of one manager merged in: no other manager's fields are kept track of
            // here, so fields the manager no longer names are not removed, and an object that is
            // not there is not created.
            Patch::Apply { object: fields, .. } => json_patch::merge(&mut object, fields),
        }
        if key_of(&object).as_ref() != Some(&key) {
            return Err(KubeError::Invalid(
                "a patch may not change apiVersion, kind, name or namespace".into(),
            ));
        }
        let n = state.next();
        set_meta(&mut object, "resourceVersion", Value::String(n.to_string()));
        state.objects.insert(key, Stored::of(&object));
        Ok(object)
    }

    /// Deletes the object `name`.
    pub fn remove(&self, api: &ApiResource, namespace: &str, name: &str) -> Result<(), KubeError> {
        let key = (
            api.group_resource(),
            namespace.to_string(),
            name.to_string(),
        );
        let mut state = self.lock();
        if !state.objects.contains_key(&key) {
            return Err(not_found(api, name));
        }
        state.objects.remove(&key);
        Ok(())
    }
}

/// The most operations a JSON patch may have: the API server's own limit.
pub(crate) const MAX_PATCH_OPERATIONS: usize = 10_000;

/// The most JSON a JSON patch may write into an object (the values it adds, copies and replaces,
/// counted as serialised): twice the API server's 3 MiB request limit. Without it, each `copy` of the
/// whole object into itself doubles it, and 40 operations would ask the host for terabytes.
pub(crate) const MAX_PATCH_WRITES: usize = 6 << 20;

/// Applies an RFC 6902 patch one operation at a time, counting what each one writes against
/// [`MAX_PATCH_WRITES`]. The caller applies it to a copy: a patch that fails changes nothing.
fn apply_json_patch(object: &mut Value, ops: &json_patch::Patch) -> Result<(), KubeError> {
    use json_patch::PatchOperation;
    if ops.len() > MAX_PATCH_OPERATIONS {
        return Err(KubeError::Invalid(format!(
            "the JSON patch has {} operations; at most {MAX_PATCH_OPERATIONS} are allowed",
            ops.len()
        )));
    }
    let mut written = 0usize;
    for op in ops.iter() {
        let writes = match op {
            PatchOperation::Add(op) => Some(&op.value),
            PatchOperation::Replace(op) => Some(&op.value),
            PatchOperation::Copy(op) => object.pointer(op.from.as_str()),
            _ => None,
        };
        if let Some(value) = writes {
            written += json_size(value, MAX_PATCH_WRITES + 1 - written);
            if written > MAX_PATCH_WRITES {
                return Err(KubeError::Invalid(format!(
                    "the JSON patch writes more than {} into the object",
                    crate::regular_file::size(MAX_PATCH_WRITES as u64)
                )));
            }
        }
        json_patch::patch(object, std::slice::from_ref(op))
            .map_err(|e| KubeError::Invalid(format!("the JSON patch does not apply: {e}")))?;
    }
    Ok(())
}

/// The length of `value` serialised, counted up to `limit` (serialising stops there).
fn json_size(value: &Value, limit: usize) -> usize {
    struct Count {
        bytes: usize,
        limit: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes += buf.len();
            if self.bytes >= self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count { bytes: 0, limit };
    let _ = serde_json::to_writer(&mut count, value);
    count.bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::KubeApi;
    use serde_json::json;

    fn cluster(objects: &[Value]) -> FixtureCluster {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("objects.json");
        std::fs::write(&path, Value::Array(objects.to_vec()).to_string()).unwrap();
        FixtureCluster::load(&[path], std::time::UNIX_EPOCH).unwrap()
    }

    fn pod(ns: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels}})
    }

    const PODS: fn() -> ApiResource = || ApiResource::new("", "v1", "pods");

    #[tokio::test]
    async fn get_and_list_in_api_order() {
        let c = cluster(&[
            pod("b", "z", json!({"app": "web"})),
            pod("a", "y", json!({})),
            pod("b", "x", json!({"app": "web"})),
        ]);
        assert_eq!(
            c.get(&PODS(), "a", "y").await.unwrap()["metadata"]["name"],
            "y"
        );
        let e = c.get(&PODS(), "a", "nope").await.unwrap_err();
        assert_eq!(e, KubeError::NotFound("pods \"nope\" not found".into()));
        let all = c.list(&PODS(), "", &ListOptions::default()).await.unwrap();
        let names: Vec<&str> = all
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["y", "x", "z"]);
        let web = c
            .list(
                &PODS(),
                "b",
                &ListOptions::parse("app=web", "metadata.name!=z").unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(web.len(), 1);
        assert!(c
            .list(
                &ApiResource::new("apps", "v1", "pods"),
                "",
                &ListOptions::default()
            )
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn writes_are_applied() {
        let c = cluster(&[pod("ns", "a", json!({}))]);
        let created = c
            .create(
                &PODS(),
                "ns",
                json!({"kind": "Pod", "metadata": {"generateName": "b-", "namespace": "ns"}}),
            )
            .await
            .unwrap();
        let name = created["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("b-"));
        assert_eq!(
            created["metadata"]["creationTimestamp"],
            "1970-01-01T00:00:00Z"
        );
        let dup = c
            .create(&PODS(), "ns", pod("ns", "a", json!({})))
            .await
            .unwrap_err();
        assert!(matches!(dup, KubeError::Conflict(_)));

        let mut stale = c.get(&PODS(), "ns", &name).await.unwrap();
        c.patch(
            &PODS(),
            "ns",
            &name,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .unwrap();
        stale["spec"] = json!({"changed": true});
        assert!(matches!(
            c.update(&PODS(), "ns", stale).await.unwrap_err(),
            KubeError::Conflict(_)
        ));

        c.delete(&PODS(), "ns", "a").await.unwrap();
        assert!(c.get(&PODS(), "ns", "a").await.is_err());
        let patched = c.get(&PODS(), "ns", &name).await.unwrap();
        assert_eq!(patched["metadata"]["labels"]["x"], "1");
    }

    #[test]
    fn duplicates_and_non_objects_are_refused_with_their_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            pod("ns", "a", json!({})).to_string(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.json"),
            pod("ns", "a", json!({})).to_string(),
        )
        .unwrap();
        let e = FixtureCluster::load(&[dir.path().to_path_buf()], SystemTime::now())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("a.json") && e.contains("b.json") && e.contains("pods ns/a"),
            "{e}"
        );
        std::fs::write(dir.path().join("b.json"), r#"{"kind":"Pod"}"#).unwrap();
        let e = FixtureCluster::load(&[dir.path().to_path_buf()], SystemTime::now())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("b.json") && e.contains("metadata.name"), "{e}");
    }

    #[tokio::test]
    async fn a_json_patch_that_doubles_the_object_each_operation_is_refused_and_changes_nothing() {
        let c = cluster(&[pod("ns", "p", json!({"a": "b"}))]);
        let before = c.get(&PODS(), "ns", "p").await.unwrap();
        let ops: Vec<Value> = (0..40)
            .map(|i| json!({"op": "copy", "from": "/metadata", "path": format!("/metadata/m{i}")}))
            .collect();
        let patch = Patch::Json(serde_json::from_value(Value::Array(ops)).unwrap());
        let e = c.patch(&PODS(), "ns", "p", &patch).await.unwrap_err();
        assert_eq!(
            e,
            KubeError::Invalid("the JSON patch writes more than 6 MiB into the object".into())
        );
        assert_eq!(c.get(&PODS(), "ns", "p").await.unwrap(), before);

        let many: Vec<Value> = (0..=MAX_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/kind", "value": "Pod"}))
            .collect();
        let patch = Patch::Json(serde_json::from_value(Value::Array(many)).unwrap());
        let e = c.patch(&PODS(), "ns", "p", &patch).await.unwrap_err();
        assert!(e.to_string().contains("at most 10000 are allowed"), "{e}");

        // A patch of ordinary size still applies.
        let ops =
            json!([{"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"}]);
        let patch = Patch::Json(serde_json::from_value(ops).unwrap());
        let patched = c.patch(&PODS(), "ns", "p", &patch).await.unwrap();
        assert_eq!(patched["metadata"]["annotations"]["a"], "b");
    }

    #[tokio::test]
    async fn an_apply_patch_merges_the_manager_s_fields_and_creates_nothing() {
        let c = cluster(&[pod("ns", "p", json!({"a": "b"}))]);
        let apply = |name: &str| Patch::Apply {
            field_manager: "velero-wasm-status".into(),
            object: json!({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "ns",
                                        "annotations": {"velero-wasm.io/status": "{}"}}}),
        };
        let patched = c.patch(&PODS(), "ns", "p", &apply("p")).await.unwrap();
        assert_eq!(patched["metadata"]["labels"], json!({"a": "b"}), "kept");
        assert_eq!(
            patched["metadata"]["annotations"]["velero-wasm.io/status"],
            "{}"
        );
        assert!(matches!(
            c.patch(&PODS(), "ns", "gone", &apply("gone")).await,
            Err(KubeError::NotFound(_))
        ));
        assert_eq!(apply("p").kind(), "apply");
    }

    /// A cluster of items as `diff` gives them: where each was read from, who it is, its text.
    fn of_texts(texts: &[(&str, &str)]) -> FixtureCluster {
        let items: Vec<(String, ItemRef, Arc<str>)> = texts
            .iter()
            .map(|(from, text)| {
                (
                    from.to_string(),
                    ItemRef::parse(text).unwrap(),
                    Arc::from(*text),
                )
            })
            .collect();
        FixtureCluster::of_items(
            items
                .iter()
                .map(|(from, id, text)| (from.as_str(), id, text)),
            std::time::UNIX_EPOCH,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn items_are_answered_as_their_text_and_a_copy_keeps_its_own_writes() {
        // As Go writes it: `<` escaped, keys in the item's own order.
        let text = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns"},"data":{"x":"\u003cy\u003e"}}"#;
        let original = of_texts(&[("resources/configmaps/namespaces/ns/a.json", text)]);
        let copy = original.copy(std::time::UNIX_EPOCH);
        let api = ApiResource::new("", "v1", "configmaps");
        let get = KubeCall::Get {
            api: api.clone(),
            namespace: "ns".into(),
            name: "a".into(),
        };
        let answer = original.call(get.clone()).await.unwrap().object().unwrap();
        assert_eq!(answer.as_str(), text);
        copy.patch(
            &api,
            "ns",
            "a",
            &Patch::Merge(json!({"data": {"x": "changed"}})),
        )
        .await
        .unwrap();
        assert_eq!(
            copy.get(&api, "ns", "a").await.unwrap()["data"]["x"],
            "changed"
        );
        let answer = original.call(get).await.unwrap().object().unwrap();
        assert_eq!(answer.as_str(), text);
    }

    #[tokio::test]
    async fn selectors_match_held_objects_by_labels_name_and_any_field() {
        let texts = [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","labels":{"app":"web"}},"spec":{"nodeName":"n1"}}"#,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","namespace":"ns","labels":{"app":"db"}},"spec":{"nodeName":"n2"}}"#,
        ];
        let c = of_texts(&[("a.json", texts[0]), ("b.json", texts[1])]);
        let names = |options: ListOptions| {
            let c = &c;
            async move {
                c.list(&PODS(), "ns", &options)
                    .await
                    .unwrap()
                    .iter()
                    .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            names(ListOptions::parse("app=web", "").unwrap()).await,
            ["a"]
        );
        assert_eq!(
            names(ListOptions::parse("", "metadata.name!=a").unwrap()).await,
            ["b"]
        );
        assert_eq!(
            names(ListOptions::parse("", "spec.nodeName=n2").unwrap()).await,
            ["b"]
        );
        assert_eq!(
            names(ListOptions::parse("app", "metadata.namespace=ns").unwrap()).await,
            ["a", "b"]
        );
    }

    #[tokio::test]
    async fn a_label_that_is_not_a_string_matches_no_selector() {
        let c = cluster(&[pod("ns", "a", json!({"n": 1, "app": "web"}))]);
        let list = |selector: &str| {
            let options = ListOptions::parse(selector, "").unwrap();
            let c = &c;
            async move { c.list(&PODS(), "ns", &options).await.unwrap().len() }
        };
        assert_eq!(list("n=1").await, 0);
        assert_eq!(list("!n").await, 1);
        assert_eq!(list("app=web").await, 1);
    }

    #[test]
    fn two_items_of_one_name_are_refused_naming_where_both_were_read() {
        let text = pod("ns", "a", json!({})).to_string();
        let items: Vec<(String, ItemRef, Arc<str>)> = ["first.json", "second.json"]
            .iter()
            .map(|from| {
                (
                    from.to_string(),
                    ItemRef::parse(&text).unwrap(),
                    Arc::from(text.as_str()),
                )
            })
            .collect();
        let e = FixtureCluster::of_items(
            items
                .iter()
                .map(|(from, id, text)| (from.as_str(), id, text)),
            std::time::UNIX_EPOCH,
        )
        .err()
        .unwrap()
        .to_string();
        assert_eq!(e, "first.json and second.json: both define pods ns/a");
    }
}
