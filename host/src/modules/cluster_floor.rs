//! The version floor kept in the cluster, so that a pod restart does not forget it: the Secret
//! [`SECRET`] in Velero's namespace, one key per module (`<name>.json`, the record
//! [`VersionFloor`] keeps: `{"version", "content"}`).
//!
//! - **At start** ([`pull`]), each record is read into the state directory's floor, which keeps the
//!   higher of the two; a Secret that does not exist is an empty floor. One that cannot be read (RBAC,
//!   the API server down or slow, a record that does not parse) leaves the floor unknown: a module the
//!   state directory has no record of is then refused signed (a new pod's directory has none).
//! - **Once the modules serve** ([`push`]), the state directory's records are written back, each where
//!   it is higher than the Secret's: an update pinned to the resourceVersion read (a conflict reads
//!   again), or a create when there is none. The plugin only ever raises a record; one someone lowered
//!   (or a Secret deleted) is raised again from the state directory by the next plugin process of the
//!   pod.
//!
//! Why a Secret and not a ConfigMap (docs/modules.md §5, threat model): whoever can write ConfigMaps in
//! Velero's namespace is the attacker the floor is for. A Secret of Velero's namespace is written by
//! those who can write the trusted keys' Secret beside it, who can already make any module verify.
//! RBAC needs only `get` and `update` on this one name (`velero-wasm rbac --trusted-keys`); `create`
//! cannot be limited to a name, so `rbac` prints the empty Secret to apply with the Role.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use super::version_floor::{Served, VersionFloor};
use crate::backend::Backend;
use crate::cluster::{ApiResource, KubeApi, KubeCall, KubeError};

/// The name of the Secret that keeps the floor, in Velero's namespace.
pub(crate) const SECRET: &str = "velero-wasm-version-floor";
/// How long each exchange with the API server may take (Velero's calls wait for the modules).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);
/// How many times a write that met a concurrent one reads again.
const ATTEMPTS: usize = 4;

fn secrets() -> ApiResource {
    ApiResource::new("", "v1", "secrets")
}

/// The Secret's records, or `None` when there is no Secret; an error says why it cannot be read.
async fn read(
    cluster: &dyn Backend<KubeCall>,
    namespace: &str,
) -> Result<Option<(Value, BTreeMap<String, Served>)>, String> {
    let got = tokio::time::timeout(TIMEOUT, cluster.get(&secrets(), namespace, SECRET))
        .await
        .map_err(|_| format!("no answer within {} s", TIMEOUT.as_secs()))?;
    let secret = match got {
        Ok(secret) => secret,
        Err(KubeError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut records = BTreeMap::new();
    if let Some(data) = secret.get("data").and_then(Value::as_object) {
        for (key, value) in data {
            let Some(module) = key
                .strip_suffix(".json")
                .filter(|m| super::identity::valid_module_name(m))
            else {
                return Err(format!("key {key:?} is not <module>.json"));
            };
            let not_a_record =
                format!("key {key:?} is not a version record ({{\"version\", \"content\"}})");
            let served = value
                .as_str()
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
                .and_then(|bytes| serde_json::from_slice::<Served>(&bytes).ok())
                .ok_or_else(|| not_a_record.clone())?;
            // Checked here, at the door: a record the state directory could not read back would
            // keep the module refused there after the Secret is fixed.
            served
                .checked()
                .map_err(|e| format!("{not_a_record} of module {module}: {e}"))?;
            records.insert(module.to_string(), served);
        }
    }
    Ok(Some((secret, records)))
}

/// Reads the floor kept in the cluster into `floor` (each module at the higher of the two), or marks
/// it unknown when it cannot be read. Returns what is worth a line: why it could not be read.
pub(crate) async fn pull(
    cluster: &dyn Backend<KubeCall>,
    namespace: &str,
    floor: &VersionFloor,
) -> Option<String> {
    let records = match read(cluster, namespace).await {
        Ok(found) => found.map(|(_, records)| records).unwrap_or_default(),
        Err(why) => {
            let why = format!("Secret {namespace}/{SECRET}: {why}");
            floor.set_cluster_unknown(Some(why.clone()));
            return Some(why);
        }
    };
    for (module, served) in &records {
        if let Err(e) = floor.raise_record(module, served) {
            // The state directory's floor is refused as a whole when it cannot be trusted; this
            // record is then unknown here, which holds the module to nothing: refuse it instead.
            let why = format!(
                "Secret {namespace}/{SECRET}: module {module}'s version {} cannot be kept in the state directory: {e}",
                served.version
            );
            floor.set_cluster_unknown(Some(why.clone()));
            return Some(why);
        }
    }
    floor.set_cluster_unknown(None);
    tracing::debug!(
        namespace,
        modules = records.len(),
        "version floor read from Secret {SECRET}"
    );
    None
}

/// What [`push`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pushed {
    /// The modules whose record was raised in the Secret.
    pub(crate) raised: Vec<String>,
    /// Whether the Secret was created.
    pub(crate) created: bool,
}

/// Writes the records of `floor` into the Secret where they are higher (creating it if there is none).
pub(crate) async fn push(
    cluster: &dyn Backend<KubeCall>,
    namespace: &str,
    floor: &VersionFloor,
) -> Result<Pushed, String> {
    let local = floor.records().map_err(|e| e.to_string())?;
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        let found = read(cluster, namespace)
            .await
            .map_err(|why| format!("Secret {namespace}/{SECRET}: {why}"))?;
        let (secret, records) = match found {
            Some((secret, records)) => (Some(secret), records),
            None => (None, BTreeMap::new()),
        };
        let mut pushed = Pushed::default();
        let mut merged = records.clone();
        for (module, served) in &local {
            let Ok(version) = served.parsed() else {
                continue;
            };
            let higher = match records.get(module).map(Served::parsed) {
                Some(Ok(there)) => version > there,
                Some(Err(_)) | None => true,
            };
            if higher {
                merged.insert(module.clone(), served.clone());
                pushed.raised.push(module.clone());
            }
        }
        if pushed.raised.is_empty() {
            return Ok(pushed);
        }
        let data: serde_json::Map<String, Value> = merged
            .iter()
            .map(|(module, served)| {
                let text = serde_json::to_vec(served).unwrap_or_default();
                (
                    format!("{module}.json"),
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                )
            })
            .collect();
        let written = match secret {
            Some(mut secret) => {
                secret["data"] = Value::Object(data);
                tokio::time::timeout(TIMEOUT, cluster.update(&secrets(), namespace, secret)).await
            }
            None => {
                pushed.created = true;
                let secret = json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": SECRET, "namespace": namespace,
                                 "labels": {"app.kubernetes.io/name": "velero-wasm"}},
                    "data": data,
                });
                tokio::time::timeout(TIMEOUT, cluster.create(&secrets(), namespace, secret)).await
            }
        };
        match written {
            Ok(Ok(_)) => return Ok(pushed),
            // Another plugin process wrote meanwhile (or created it): read again and merge.
            Ok(Err(KubeError::Conflict(e))) => last = e,
            Ok(Err(e)) => return Err(format!("Secret {namespace}/{SECRET}: {e}")),
            Err(_) => {
                return Err(format!(
                    "Secret {namespace}/{SECRET}: no answer within {} s",
                    TIMEOUT.as_secs()
                ))
            }
        }
    }
    Err(format!(
        "Secret {namespace}/{SECRET}: still changing after {ATTEMPTS} attempts: {last}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixture::FixtureCluster;
    use crate::modules::version_floor::Rollback;
    use crate::modules::{ModuleSource, Origin};

    const NAMESPACE: &str = "velero";

    fn module(version: &str) -> ModuleSource {
        let manifest = format!("version = \"{version}\"");
        ModuleSource::new("m", b"m".to_vec(), &manifest, Origin::File("m.wasm".into())).unwrap()
    }

    /// The Secret, holding module `m`'s record `{"version", "content"}`.
    fn secret(version: &str, content: &str) -> Value {
        let record = json!({"version": version, "content": content}).to_string();
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "data": {"m.json": base64::engine::general_purpose::STANDARD.encode(record)},
        })
    }

    fn put(cluster: &FixtureCluster, secret: Value) {
        match cluster.read(&secrets(), NAMESPACE, SECRET) {
            Ok(_) => cluster.replace(&secrets(), NAMESPACE, secret),
            Err(_) => cluster.insert(&secrets(), NAMESPACE, secret),
        }
        .unwrap();
    }

    /// A record whose version (or content) is longer than a record can be is refused when the Secret
    /// is read, with the module and the bound named: the floor is then unknown (a module the state
    /// directory has no record of is refused), and nothing is written into the state directory, so
    /// that once the Secret is fixed the next start reads it and serves.
    #[tokio::test]
    async fn a_record_past_the_version_bound_is_refused_at_the_door_and_never_kept() {
        let state = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        let cluster = FixtureCluster::empty(std::time::UNIX_EPOCH);
        let sha = "0".repeat(64);
        let content = format!("- {sha}");
        let long = format!("1.0.0-{}", "a".repeat(4096));
        put(&cluster, secret(&long, &content));
        let why = pull(&cluster, NAMESPACE, &floor)
            .await
            .expect("the over-long record is refused");
        assert_eq!(
            why,
            format!(
                "Secret velero/{SECRET}: key \"m.json\" is not a version record ({{\"version\", \"content\"}}) of module m: a version of {} bytes is longer than the 256 bytes a version may have: not a version",
                long.len()
            )
        );
        assert!(
            !state.path().join("versions/m.json").exists(),
            "the record was copied into the state directory"
        );
        assert!(matches!(
            floor.check(&module("2.0.0")),
            Err(Rollback::ClusterUnknown(_))
        ));

        // A content that is not two sha256s is refused the same way.
        put(
            &cluster,
            secret("1.0.0", &format!("- {}", "0".repeat(5000))),
        );
        let why = pull(&cluster, NAMESPACE, &floor).await.unwrap();
        assert!(
            why.ends_with("of module m: its content (5002 bytes) is not the sha256 of a component (or -) and of a manifest"),
            "{why}"
        );
        assert!(!state.path().join("versions/m.json").exists());

        // The Secret fixed: the next start reads it, and holds the module to it.
        put(&cluster, secret("1.5.0", &content));
        assert_eq!(pull(&cluster, NAMESPACE, &floor).await, None);
        assert_eq!(floor.check(&module("2.0.0")), Ok(()));
        assert_eq!(
            floor.check(&module("1.0.0")),
            Err(Rollback::Older {
                offered: "1.0.0".into(),
                served: "1.5.0".into()
            })
        );
    }

    /// A Secret nested deeper than the host reads a tree cannot be read: the floor is unknown (a
    /// module the state directory has no record of is refused), never empty, and nothing is written
    /// back over it.
    #[tokio::test]
    async fn a_secret_too_deep_to_read_leaves_the_floor_unknown_not_empty() {
        let state = tempfile::tempdir().unwrap();
        let floor = VersionFloor::at(state.path());
        let cluster = FixtureCluster::empty(std::time::UNIX_EPOCH);
        let mut deep = json!("bottom");
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let mut too_deep = secret("1.5.0", &format!("- {}", "0".repeat(64)));
        too_deep["metadata"]["annotations"] = json!({ "deep": deep });
        put(&cluster, too_deep);
        let why = pull(&cluster, NAMESPACE, &floor)
            .await
            .expect("the floor is unknown");
        assert_eq!(
            why,
            format!("Secret velero/{SECRET}: the API server's answer is nested deeper than 127 levels: not read")
        );
        assert!(matches!(
            floor.check(&module("2.0.0")),
            Err(Rollback::ClusterUnknown(m)) if m.contains("nested deeper than 127 levels")
        ));
        floor.raise(&module("2.0.0")).unwrap();
        let pushed = push(&cluster, NAMESPACE, &floor).await.unwrap_err();
        assert!(
            pushed.contains("nested deeper than 127 levels: not read"),
            "{pushed}"
        );
        // The Secret is left as it was: its text still holds the 200 levels.
        let kept = cluster
            .call(KubeCall::Get {
                api: secrets(),
                namespace: NAMESPACE.into(),
                name: SECRET.into(),
            })
            .await
            .unwrap()
            .object()
            .unwrap();
        assert!(
            kept.as_str().contains(&"[".repeat(200)),
            "{}",
            kept.as_str()
        );
    }
}
