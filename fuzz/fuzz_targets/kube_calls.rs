//! The `kube` capability's arguments as a guest sends them, on the fixture cluster (`run --cluster`):
//! a sequence of calls, each with a resource type, namespace and name (chosen among the cluster's or
//! made up), selectors, objects (the cluster's, renamed or edited, or arbitrary text) and merge or
//! JSON patches, each checked against a grant and taken through the capability's checks (the object's
//! namespace, the patch's form) to the backend, behind the write log `run` reports from.
#![no_main]

use std::sync::{Arc, OnceLock};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use velero_wasm::action::Verb;
use velero_wasm::documents::read_objects;
use velero_wasm::modules::{KubeRule, NamespaceRule, Verbs};
use velero_wasm::object_for;
use velero_wasm::FixtureCluster;
use velero_wasm::WriteLog;
use velero_wasm::{ApiResource, KubeApi, ListOptions, Patch};
use velero_wasm::{Clock, KubeGrant};
use velero_wasm_fuzz::root;

#[derive(Arbitrary, Debug)]
enum Text {
    /// One of a few names found in the fixture cluster.
    Known(u8),
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Api {
    Known(u8),
    Other {
        group: String,
        version: String,
        resource: String,
    },
}

#[derive(Arbitrary, Debug)]
enum Object {
    /// A cluster object, with its name and namespace possibly replaced and one field set.
    Edited {
        base: u8,
        name: Option<Text>,
        namespace: Option<Text>,
        pointer: String,
        value: String,
    },
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum PatchInput {
    Merge(String),
    Json(String),
    /// RFC 6902 operations built from parts: op, path, value (JSON text), from.
    Ops(Vec<(u8, String, String, String)>),
}

#[derive(Arbitrary, Debug)]
enum Call {
    Get(Api, Text, Text),
    List(Api, Text, String, String),
    Create(Api, Text, Object),
    Update(Api, Text, Object),
    Patch(Api, Text, Text, PatchInput),
    Delete(Api, Text, Text),
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Namespace patterns of the grant (besides `@item` and `*`-free names).
    grant_namespaces: Vec<String>,
    item_namespace: Option<String>,
    calls: Vec<Call>,
}

struct Fixture {
    tokio: tokio::runtime::Runtime,
    objects: Vec<Value>,
    names: Vec<String>,
    namespaces: Vec<String>,
    apis: Vec<ApiResource>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = root().join("tests/fixtures/kubevirt/cluster");
        let objects: Vec<Value> = read_objects(&[dir])
            .expect("the fixture cluster reads")
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        let text = |o: &Value, p: &str| {
            o.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let mut names: Vec<String> = objects.iter().map(|o| text(o, "/metadata/name")).collect();
        let mut namespaces: Vec<String> = objects
            .iter()
            .map(|o| text(o, "/metadata/namespace"))
            .collect();
        names.sort();
        names.dedup();
        namespaces.sort();
        namespaces.dedup();
        let mut apis: Vec<ApiResource> = objects
            .iter()
            .map(|o| {
                let api_version = text(o, "/apiVersion");
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
                let resource = velero_wasm::action::plural_of(&text(o, "/kind"));
                ApiResource::new(group, version, &resource)
            })
            .collect();
        apis.sort_by_key(|a| a.group_resource());
        apis.dedup();
        Fixture {
            tokio: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
            objects,
            names,
            namespaces,
            apis,
        }
    })
}

fn pick<'a>(list: &'a [String], text: &'a Text) -> &'a str {
    match text {
        Text::Known(i) => list
            .get(usize::from(*i) % list.len().max(1))
            .map_or("", String::as_str),
        Text::Other(s) => s,
    }
}

fn api(f: &Fixture, api: &Api) -> ApiResource {
    match api {
        Api::Known(i) => f.apis[usize::from(*i) % f.apis.len()].clone(),
        Api::Other {
            group,
            version,
            resource,
        } => ApiResource::new(group, version, resource),
    }
}

fn object_text(f: &Fixture, object: &Object) -> String {
    match object {
        Object::Raw(text) => text.clone(),
        Object::Edited {
            base,
            name,
            namespace,
            pointer,
            value,
        } => {
            let mut o = f.objects[usize::from(*base) % f.objects.len()].clone();
            if let Some(name) = name {
                o["metadata"]["name"] = Value::String(pick(&f.names, name).to_string());
            }
            if let Some(namespace) = namespace {
                o["metadata"]["namespace"] =
                    Value::String(pick(&f.namespaces, namespace).to_string());
            }
            if let Some(slot) = o.pointer_mut(pointer) {
                *slot = serde_json::from_str(value).unwrap_or(Value::String(value.clone()));
            }
            o.to_string()
        }
    }
}

/// The patch as the capability reads it from the guest's text.
fn patch(input: &PatchInput) -> Option<Patch> {
    const OPS: &[&str] = &["add", "remove", "replace", "move", "copy", "test"];
    match input {
        PatchInput::Merge(text) => serde_json::from_str(text).ok().map(Patch::Merge),
        PatchInput::Json(text) => serde_json::from_str(text).ok().map(Patch::Json),
        PatchInput::Ops(ops) => {
            let ops: Vec<Value> = ops
                .iter()
                .map(|(op, path, value, from)| {
                    serde_json::json!({
                        "op": OPS[usize::from(*op) % OPS.len()],
                        "path": path,
                        "value": serde_json::from_str::<Value>(value).unwrap_or(Value::String(value.clone())),
                        "from": from,
                    })
                })
                .collect();
            serde_json::from_value(Value::Array(ops))
                .ok()
                .map(Patch::Json)
        }
    }
}

fuzz_target!(|input: Input| {
    let f = fixture();
    let mut namespaces = vec!["@item".to_string()];
    namespaces.extend(input.grant_namespaces.iter().take(4).cloned());
    let grant = KubeGrant::new(&[KubeRule {
        resources: vec!["*".into()],
        verbs: Verbs::Any,
        namespaces: namespaces.iter().map(|n| NamespaceRule::read(n)).collect(),
    }]);
    let cluster = FixtureCluster::empty(Clock::fixed(std::time::UNIX_EPOCH));
    let log = WriteLog::new(Arc::new(cluster));
    f.tokio.block_on(async {
        for object in &f.objects {
            let key_api = {
                let api_version = object["apiVersion"].as_str().unwrap_or("");
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                ApiResource::new(
                    group,
                    version,
                    &velero_wasm::action::plural_of(object["kind"].as_str().unwrap_or("")),
                )
            };
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            log.create(&key_api, namespace, object.clone())
                .await
                .expect("a fixture object is created");
        }
        let allowed = |verb: Verb, api: &ApiResource, namespace: &str| {
            grant.allows(
                verb,
                &api.group_resource(),
                namespace,
                input.item_namespace.as_deref(),
                "velero",
            )
        };
        for call in input.calls.iter().take(16) {
            match call {
                Call::Get(a, ns, name) => {
                    let (a, ns) = (api(f, a), pick(&f.namespaces, ns));
                    if allowed(Verb::Get, &a, ns) {
                        let _ = log.get(&a, ns, pick(&f.names, name)).await;
                    }
                }
                Call::List(a, ns, labels, fields) => {
                    let (a, ns) = (api(f, a), pick(&f.namespaces, ns));
                    if let (true, Ok(options)) = (
                        allowed(Verb::List, &a, ns),
                        ListOptions::parse(labels, fields),
                    ) {
                        let listed = log.list(&a, ns, &options).await.expect("the fixture lists");
                        assert!(listed.iter().all(|o| options.matches(o)));
                    }
                }
                Call::Create(a, ns, object) | Call::Update(a, ns, object) => {
                    let (a, ns) = (api(f, a), pick(&f.namespaces, ns));
                    let verb = if matches!(call, Call::Create(..)) {
                        Verb::Create
                    } else {
                        Verb::Update
                    };
                    if !allowed(verb, &a, ns) {
                        continue;
                    }
                    let Ok(object) = object_for(ns, &object_text(f, object)) else {
                        continue;
                    };
                    let written = if verb == Verb::Create {
                        log.create(&a, ns, object).await
                    } else {
                        log.update(&a, ns, object).await
                    };
                    if let Ok(written) = written {
                        // What was written is there to read.
                        let name = written
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        assert_eq!(log.get(&a, ns, name).await.as_ref(), Ok(&written));
                    }
                }
                Call::Patch(a, ns, name, input) => {
                    let (a, ns, name) = (api(f, a), pick(&f.namespaces, ns), pick(&f.names, name));
                    if let (true, Some(patch)) = (allowed(Verb::Patch, &a, ns), patch(input)) {
                        let _ = patch.to_value();
                        if let Ok(patched) = log.patch(&a, ns, name, &patch).await {
                            assert_eq!(log.get(&a, ns, name).await.as_ref(), Ok(&patched));
                        }
                    }
                }
                Call::Delete(a, ns, name) => {
                    let (a, ns, name) = (api(f, a), pick(&f.namespaces, ns), pick(&f.names, name));
                    if allowed(Verb::Delete, &a, ns) && log.delete(&a, ns, name).await.is_ok() {
                        assert!(log.get(&a, ns, name).await.is_err());
                    }
                }
            }
        }
        let _ = log.writes();
    });
});
