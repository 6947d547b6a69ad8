//! The writes an action made, logged in front of whatever backend serves the calls (fixture files, a
//! live cluster, a replay), so that `run` reports them the same way for every cluster.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use super::{ApiResource, KubeBackend, KubeError, ListOptions, Patch};

/// One write an action made, as `run` reports it in `clusterWrites`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWrite {
    /// `create`, `update`, `patch` or `delete`.
    pub verb: &'static str,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's `kind`.
    pub kind: String,
    /// Namespace ("" when cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The object as stored (create, update, patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The patch document (patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// `merge` or `json` (patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
}

/// A backend that passes every call on and logs the writes that succeeded.
pub struct WriteLog {
    inner: Arc<dyn KubeBackend>,
    writes: Mutex<Vec<ClusterWrite>>,
}

impl WriteLog {
    /// Logs the writes made through `inner`.
    pub fn new(inner: Arc<dyn KubeBackend>) -> WriteLog {
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

    fn log(
        &self,
        verb: &'static str,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        stored: Option<&Value>,
        patch: Option<&Patch>,
    ) {
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
            namespace: namespace.to_string(),
            name: name.to_string(),
            object: if verb == "delete" {
                None
            } else {
                stored.cloned()
            },
            patch: patch.map(Patch::to_value),
            patch_type: patch.map(Patch::kind),
        };
        self.writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(write);
    }
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[async_trait]
impl KubeBackend for WriteLog {
    async fn get(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Value, KubeError> {
        self.inner.get(api, namespace, name).await
    }

    async fn list(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Value>, KubeError> {
        self.inner.list(api, namespace, options).await
    }

    async fn create(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        let stored = self.inner.create(api, namespace, object).await?;
        self.log(
            "create",
            api,
            namespace,
            name_of(&stored),
            Some(&stored),
            None,
        );
        Ok(stored)
    }

    async fn update(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Value, KubeError> {
        let stored = self.inner.update(api, namespace, object).await?;
        self.log(
            "update",
            api,
            namespace,
            name_of(&stored),
            Some(&stored),
            None,
        );
        Ok(stored)
    }

    async fn patch(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        let stored = self.inner.patch(api, namespace, name, patch).await?;
        self.log("patch", api, namespace, name, Some(&stored), Some(patch));
        Ok(stored)
    }

    async fn delete(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        // The kind of what is deleted is only known from the object itself.
        let before = self.inner.get(api, namespace, name).await.ok();
        self.inner.delete(api, namespace, name).await?;
        self.log("delete", api, namespace, name, before.as_ref(), None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::kube::fixture::FixtureCluster;
    use crate::capabilities::Clock;
    use serde_json::json;

    #[tokio::test]
    async fn successful_writes_are_logged_with_the_stored_objects() {
        let pods = ApiResource::new("", "v1", "pods");
        let log = WriteLog::new(Arc::new(FixtureCluster::empty(Clock::fixed(
            std::time::UNIX_EPOCH,
        ))));
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
        let verbs: Vec<&str> = writes.iter().map(|w| w.verb).collect();
        assert_eq!(verbs, ["create", "patch", "delete"]);
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
