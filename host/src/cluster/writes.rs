//! The writes an action made, logged in front of whatever backend serves the calls (fixture files, a
//! live cluster, a replay), so that `run` reports them the same way for every cluster.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use super::vocabulary::{KubeAnswer, KubeApi, KubeCall, KubeError, Patch};
use crate::action::Verb;
use crate::backend::Backend;

/// One write an action made, as `run` reports it in `clusterWrites`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWrite {
    /// `create`, `update`, `patch` or `delete`.
    pub(crate) verb: Verb,
    /// The object's `apiVersion`.
    pub(crate) api_version: String,
    /// The object's `kind`.
    pub(crate) kind: String,
    /// Namespace ("" when cluster-scoped).
    pub(crate) namespace: String,
    /// Name.
    pub(crate) name: String,
    /// The object as stored (create, update, patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) object: Option<Value>,
    /// The patch document (patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch: Option<Value>,
    /// `merge` or `json` (patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch_type: Option<&'static str>,
}

/// A backend that passes every call on and logs the writes that succeeded.
pub struct WriteLog {
    inner: Arc<dyn Backend<KubeCall>>,
    writes: Mutex<Vec<ClusterWrite>>,
}

impl WriteLog {
    /// Logs the writes made through `inner`.
    pub fn new(inner: Arc<dyn Backend<KubeCall>>) -> WriteLog {
        WriteLog {
            inner,
            writes: Mutex::new(Vec::new()),
        }
    }

    /// The writes so far, in order.
    pub fn writes(&self) -> Vec<ClusterWrite> {
        self.writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait]
impl Backend<KubeCall> for WriteLog {
    async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        let verb = call.verb();
        let (api, namespace) = call.target();
        let (api, namespace) = (api.clone(), namespace.to_string());
        let (name, patch) = match &call {
            KubeCall::Get { .. } | KubeCall::List { .. } => return self.inner.call(call).await,
            KubeCall::Create { .. } | KubeCall::Update { .. } => (None, None),
            KubeCall::Patch { name, patch, .. } => (Some(name.clone()), Some(patch.clone())),
            KubeCall::Delete { name, .. } => (Some(name.clone()), None),
        };
        // The kind of what is deleted is only known from the object itself.
        let before = match &call {
            KubeCall::Delete { name, .. } => self.inner.get(&api, &namespace, name).await.ok(),
            _ => None,
        };
        let answer = self.inner.call(call).await?;
        let written = match (&answer, verb) {
            (KubeAnswer::Object(stored), v) if v != Verb::Delete => stored.to_value().ok(),
            _ => None,
        };
        let stored = match verb {
            Verb::Delete => before.as_ref(),
            _ => written.as_ref(),
        };
        let field = |key: &str| {
            stored
                .and_then(|o| o.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let write = ClusterWrite {
            verb,
            api_version: field("apiVersion").unwrap_or_else(|| api.api_version()),
            kind: field("kind").unwrap_or_default(),
            namespace,
            name: name.unwrap_or_else(|| {
                stored
                    .and_then(|o| o.pointer("/metadata/name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            }),
            object: if verb == Verb::Delete {
                None
            } else {
                stored.cloned()
            },
            patch: patch.as_ref().map(Patch::to_value),
            patch_type: patch.as_ref().map(Patch::kind),
        };
        self.writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(write);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixture::FixtureCluster;
    use crate::cluster::ApiResource;
    use serde_json::json;

    #[tokio::test]
    async fn successful_writes_are_logged_with_the_stored_objects() {
        let pods = ApiResource::new("", "v1", "pods");
        let log = WriteLog::new(Arc::new(FixtureCluster::empty(std::time::UNIX_EPOCH)));
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns"}});
        log.create(&pods, "ns", pod.clone()).await.unwrap();
        assert!(
            log.create(&pods, "ns", pod).await.is_err(),
            "a conflict is not a write"
        );
        log.patch(
            &pods,
            "ns",
            "a",
            &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .unwrap();
        log.delete(&pods, "ns", "a").await.unwrap();
        assert!(log.delete(&pods, "ns", "a").await.is_err());
        let writes = log.writes();
        let verbs: Vec<Verb> = writes.iter().map(|w| w.verb).collect();
        assert_eq!(verbs, [Verb::Create, Verb::Patch, Verb::Delete]);
        assert_eq!(
            writes[0].object.as_ref().unwrap()["metadata"]["creationTimestamp"],
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(writes[1].patch_type, Some("merge"));
        assert_eq!(
            writes[1].object.as_ref().unwrap()["metadata"]["labels"]["x"],
            "1"
        );
        assert_eq!(
            (writes[2].api_version.as_str(), writes[2].kind.as_str()),
            ("v1", "Pod")
        );
        assert!(writes[2].object.is_none());
    }
}
