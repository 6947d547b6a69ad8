//! Discovery: each group/version is read once per process (`/api/v1`, `/apis/<group>/<version>`) to
//! learn each resource's kind and whether it is namespaced ([`ResourceInfo`]); a resource missing
//! from the cached list is looked up once more, so a CRD installed later is found. Callers that need
//! a group version while its discovery is on its way share that one request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::api_server::ApiServer;
use super::path_segment::segment;
use crate::cluster::vocabulary::{ApiResource, KubeError};

/// What discovery says about one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ResourceInfo {
    pub(super) kind: String,
    pub(super) namespaced: bool,
}

/// Resources of one group/version, by plural name.
type GroupVersion = Arc<HashMap<String, ResourceInfo>>;

/// One group version's discovery on its way: every caller that needs it while it is shares its answer.
type Flight = Arc<tokio::sync::OnceCell<Result<GroupVersion, KubeError>>>;

/// What discovery knows, and what it is asking, by group version (`v1`, `kubevirt.io/v1`).
#[derive(Default)]
struct Discovery {
    known: HashMap<String, GroupVersion>,
    /// Discoveries in flight: the first users of a fresh process's group version (a VM backup lists
    /// PVCs and pods at once) send one request between them, not one each.
    flights: HashMap<String, Flight>,
}

/// One client's discovery, shared by every call it makes.
#[derive(Default)]
pub(super) struct DiscoveryCache {
    discovery: Mutex<Discovery>,
}

impl DiscoveryCache {
    /// Kind and scope of a resource, from the discovery cache (read on first use, and re-read once when
    /// the resource is missing from it). Callers that need a group version's discovery while one is
    /// on its way wait for that one rather than sending their own.
    pub(super) async fn resolve(
        &self,
        api_server: &ApiServer,
        api: &ApiResource,
    ) -> Result<ResourceInfo, KubeError> {
        let group_version = api.api_version();
        let flight = {
            let mut discovery = self.cache();
            if let Some(info) = discovery
                .known
                .get(&group_version)
                .and_then(|gv| gv.get(&api.resource))
            {
                return Ok(info.clone());
            }
            discovery
                .flights
                .entry(group_version.clone())
                .or_default()
                .clone()
        };
        // Should the caller sending it go away, the next one waiting sends it.
        let fresh = flight
            .get_or_init(|| discover(api_server, api))
            .await
            .clone();
        {
            // The first caller back lands the answer (a failure is not kept: the next caller asks
            // again); one back later leaves alone what a newer discovery may have put there.
            let mut discovery = self.cache();
            if discovery
                .flights
                .get(&group_version)
                .is_some_and(|f| Arc::ptr_eq(f, &flight))
            {
                discovery.flights.remove(&group_version);
                if let Ok(fresh) = &fresh {
                    discovery.known.insert(group_version.clone(), fresh.clone());
                }
            }
        }
        fresh?.get(&api.resource).cloned().ok_or_else(|| {
            KubeError::NotFound(format!(
                "the server has no resource {:?} in {group_version}",
                api.resource
            ))
        })
    }

    /// Whether `group_version` was discovered (its first discovery is no longer on its way).
    pub(super) fn knows(&self, group_version: &str) -> bool {
        self.cache().known.contains_key(group_version)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Discovery> {
        self.discovery.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn discover(api_server: &ApiServer, api: &ApiResource) -> Result<GroupVersion, KubeError> {
    let path = if api.group.is_empty() {
        format!("/api/{}", segment("version", &api.version)?)
    } else {
        format!(
            "/apis/{}/{}",
            segment("group", &api.group)?,
            segment("version", &api.version)?
        )
    };
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| KubeError::Invalid(format!("{path}: {e}")))?;
    let list = api_server
        .send(request)
        .await
        .map_err(|e| match e {
            KubeError::NotFound(_) => KubeError::NotFound(format!(
                "the server has no API group version {}",
                api.api_version()
            )),
            other => other,
        })?
        .to_value()
        .map_err(|e| KubeError::Other(format!("{path}: the API server's answer is {e}")))?;
    let resources = list
        .get("resources")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let found = resources
        .iter()
        .filter_map(|r| {
            let name = r.get("name")?.as_str()?;
            // Subresources (`pods/status`) are not objects of their own.
            if name.contains('/') {
                return None;
            }
            let info = ResourceInfo {
                kind: r.get("kind")?.as_str()?.to_string(),
                namespaced: r
                    .get("namespaced")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            };
            Some((name.to_string(), info))
        })
        .collect();
    tracing::debug!(group_version = %api.api_version(), "discovered");
    Ok(Arc::new(found))
}
