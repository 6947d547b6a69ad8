//! The verbs of the Kubernetes API as REST calls: get, list (page by page, each item given the
//! `apiVersion` and `kind` that list items of built-in types lack), create, update, patch and delete,
//! each on the path discovery says its resource lives at.

use kube::api::{DeleteParams, GetParams, ListParams, PatchParams, PostParams};
use kube::core::Request;
use serde_json::Value;

use super::api_server::ApiServer;
use super::discovery::{DiscoveryCache, ResourceInfo};
use super::path_segment::segment;
use crate::answer_charge;
use crate::cluster::json::Json;
use crate::cluster::vocabulary::{
    ApiResource, KubeAnswer, KubeCall, KubeError, ListOptions, Patch,
};

/// Objects asked for per page when listing (kubectl's default chunk size).
pub(super) const LIST_PAGE_SIZE: u32 = 500;

/// The verbs of one client: its API server, its discovery and the size of its list pages.
pub(super) struct Verbs<'a> {
    pub(super) api_server: &'a ApiServer,
    pub(super) discovery: &'a DiscoveryCache,
    pub(super) page_size: u32,
}

impl Verbs<'_> {
    /// Makes `call` on the API server.
    pub(super) async fn call(&self, call: KubeCall) -> Result<KubeAnswer, KubeError> {
        let (api, namespace) = call.target();
        let (api, ns) = (&api.clone(), &namespace.to_string());
        match call {
            KubeCall::Get { name, .. } => self.read(api, ns, &name).await.map(KubeAnswer::Object),
            KubeCall::List { options, .. } => self
                .select(api, ns, &options)
                .await
                .map(KubeAnswer::Objects),
            KubeCall::Create { object, .. } => {
                self.insert(api, ns, object).await.map(KubeAnswer::Object)
            }
            KubeCall::Update { object, .. } => {
                self.replace(api, ns, object).await.map(KubeAnswer::Object)
            }
            KubeCall::Patch { name, patch, .. } => self
                .apply(api, ns, &name, &patch)
                .await
                .map(KubeAnswer::Object),
            KubeCall::Delete { name, .. } => self
                .remove(api, ns, &name)
                .await
                .map(|()| KubeAnswer::Deleted),
        }
    }

    /// Kind and scope of a resource (see [`DiscoveryCache::resolve`]).
    async fn resolve(&self, api: &ApiResource) -> Result<ResourceInfo, KubeError> {
        self.discovery.resolve(self.api_server, api).await
    }

    /// The URL path of the collection `api` in `namespace`, checked against the resource's scope.
    async fn collection(
        &self,
        api: &ApiResource,
        namespace: &str,
        listing: bool,
    ) -> Result<(String, ResourceInfo), KubeError> {
        let info = self.resolve(api).await?;
        let path = collection_path(api, namespace, listing, &info)?;
        Ok((path, info))
    }

    /// The path a read of `api` in `namespace` goes out on while its group version's first discovery
    /// is still on its way; `None` when that group version was discovered (or the read names no
    /// namespace). A read that waited for discovery would make the first call of a fresh process wait
    /// for the API server twice: it goes out on the namespaced path (what a read in a namespace is
    /// nearly always of) beside discovery, and when discovery says the resource is cluster-scoped its
    /// answer is dropped for the error the call got before.
    fn read_blind(&self, api: &ApiResource, namespace: &str) -> Option<String> {
        // A resource missing from a group version already discovered is most likely no resource
        // at all: it waits for discovery to look again, and is never sent when it is not there.
        if namespace.is_empty() || self.discovery.knows(&api.api_version()) {
            return None;
        }
        let assumed = ResourceInfo {
            kind: String::new(),
            namespaced: true,
        };
        collection_path(api, namespace, true, &assumed).ok()
    }

    /// The path of the collection and the object's name, checked.
    async fn object_path(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(Request, String), KubeError> {
        let (path, _) = self.collection(api, namespace, false).await?;
        Ok((Request::new(path), segment("name", name)?.to_string()))
    }

    async fn read(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Json, KubeError> {
        if let (Some(path), Ok(checked)) = (self.read_blind(api, namespace), segment("name", name))
        {
            let request = build(Request::new(path).get(checked, &GetParams::default()))?;
            // Discovery's failure or scope first, as when the read waited for it.
            let (info, answer) = tokio::join!(self.resolve(api), self.api_server.send(request));
            collection_path(api, namespace, false, &info?)?;
            return answer;
        }
        let (request, name) = self.object_path(api, namespace, name).await?;
        self.api_server
            .send(build(request.get(&name, &GetParams::default()))?)
            .await
    }

    async fn select(
        &self,
        api: &ApiResource,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<Vec<Json>, KubeError> {
        let (path, info) = match self.read_blind(api, namespace) {
            Some(path) => (path, None),
            None => {
                let (path, info) = self.collection(api, namespace, true).await?;
                (path, Some(info))
            }
        };
        let pages = self.pages(api, path, options);
        let (info, items) = match info {
            Some(info) => (info, pages.await),
            None => {
                // Discovery's failure or scope first, as when the list waited for it.
                let (info, items) = tokio::join!(self.resolve(api), pages);
                let info = info?;
                collection_path(api, namespace, true, &info)?;
                (info, items)
            }
        };
        let api_version = api.api_version();
        Ok(items?
            .into_iter()
            .map(|item| Json::from_raw(item).with_type(&api_version, &info.kind))
            .collect())
    }

    /// The items of a list of `path`, page by page, as they came.
    async fn pages(
        &self,
        api: &ApiResource,
        path: String,
        options: &ListOptions,
    ) -> Result<Vec<Box<serde_json::value::RawValue>>, KubeError> {
        /// One page of a list: its items as they came, and where the next page starts.
        #[derive(serde::Deserialize)]
        struct Page<'a> {
            #[serde(borrow, default)]
            items: Option<Vec<&'a serde_json::value::RawValue>>,
            #[serde(default)]
            metadata: PageMetadata,
        }
        #[derive(serde::Deserialize, Default)]
        struct PageMetadata {
            #[serde(rename = "continue", default)]
            next: Option<String>,
        }
        let request = Request::new(path);
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.trim().is_empty());
        let mut params = ListParams {
            label_selector: non_empty(&options.label_selector_text),
            field_selector: non_empty(&options.field_selector_text),
            limit: Some(self.page_size),
            ..ListParams::default()
        };
        let mut items = Vec::new();
        // Pages are read only while what they hold could still reach the guest.
        let max = options.max_bytes.unwrap_or(u64::MAX);
        let mut received: u64 = 0;
        loop {
            let left = max.saturating_sub(received);
            let Some(bytes) = self
                .api_server
                .send_capped(build(request.list(&params))?, left)
                .await?
            else {
                return Err(KubeError::list_too_large(api, max));
            };
            received += bytes.len() as u64;
            let page: Page = serde_json::from_slice(&bytes).map_err(|e| {
                KubeError::Other(format!("listing {api}: the answer is not a list: {e}"))
            })?;
            // Each item is copied out of the page and kept until the guest has it; giving one its
            // type makes one more copy of it at a time (its text with both fields, then parsed).
            let page_items = page.items.as_deref().unwrap_or_default();
            let longest = page_items.iter().map(|i| i.get().len()).max().unwrap_or(0);
            for item in page_items {
                answer_charge::hold(item.get().len())
                    .map_err(|refused| KubeError::TooLarge(format!("listing {api}: {refused}")))?;
            }
            let typing = 2 * (longest + 64);
            answer_charge::hold(typing)
                .map_err(|refused| KubeError::TooLarge(format!("listing {api}: {refused}")))?;
            items.extend(
                page.items
                    .unwrap_or_default()
                    .into_iter()
                    .map(|item| item.to_owned()),
            );
            answer_charge::release(typing);
            match page.metadata.next.filter(|c| !c.is_empty()) {
                Some(token) => params.continue_token = Some(token),
                None => return Ok(items),
            }
        }
    }

    async fn insert(
        &self,
        api: &ApiResource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Json, KubeError> {
        let (path, info) = self.collection(api, namespace, false).await?;
        object["apiVersion"] = Value::String(api.api_version());
        if object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            object["kind"] = Value::String(info.kind);
        }
        let request = Request::new(path);
        self.api_server
            .send(build(
                request.create(&PostParams::default(), body(&object)?),
            )?)
            .await
    }

    async fn replace(
        &self,
        api: &ApiResource,
        namespace: &str,
        object: Value,
    ) -> Result<Json, KubeError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let (request, name) = self.object_path(api, namespace, name).await?;
        self.api_server
            .send(build(request.replace(
                &name,
                &PostParams::default(),
                body(&object)?,
            ))?)
            .await
    }

    async fn apply(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<Json, KubeError> {
        let (request, name) = self.object_path(api, namespace, name).await?;
        let params = PatchParams::default();
        let request = match patch {
            Patch::Merge(doc) => request.patch(&name, &params, &kube::api::Patch::Merge(doc)),
            Patch::Json(ops) => {
                request.patch(&name, &params, &kube::api::Patch::<()>::Json(ops.clone()))
            }
            // `application/apply-patch+yaml` (JSON is YAML), `?fieldManager=…&force=true`.
            Patch::Apply {
                field_manager,
                object,
            } => request.patch(
                &name,
                &PatchParams::apply(field_manager).force(),
                &kube::api::Patch::Apply(object),
            ),
        };
        self.api_server.send(build(request)?).await
    }

    async fn remove(
        &self,
        api: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        let (request, name) = self.object_path(api, namespace, name).await?;
        self.api_server
            .send(build(request.delete(&name, &DeleteParams::default()))?)
            .await?;
        Ok(())
    }
}

/// The URL path of the collection `api` in `namespace`, given what discovery says of it.
fn collection_path(
    api: &ApiResource,
    namespace: &str,
    listing: bool,
    info: &ResourceInfo,
) -> Result<String, KubeError> {
    let root = if api.group.is_empty() {
        format!("/api/{}", api.version)
    } else {
        format!("/apis/{}/{}", api.group, api.version)
    };
    let resource = segment("resource", &api.resource)?;
    match (info.namespaced, namespace.is_empty()) {
        (true, false) => Ok(format!(
            "{root}/namespaces/{}/{resource}",
            segment("namespace", namespace)?
        )),
        (true, true) if listing => Ok(format!("{root}/{resource}")),
        (true, true) => Err(KubeError::Invalid(format!(
            "{api} is namespaced: the call needs a namespace"
        ))),
        (false, true) => Ok(format!("{root}/{resource}")),
        (false, false) => Err(KubeError::Invalid(format!(
            "{api} is cluster-scoped: call it with namespace \"\", not {namespace:?}"
        ))),
    }
}

fn build(
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<http::Request<Vec<u8>>, KubeError> {
    request.map_err(|e| KubeError::Invalid(format!("the request cannot be built: {e}")))
}

fn body(object: &Value) -> Result<Vec<u8>, KubeError> {
    serde_json::to_vec(object)
        .map_err(|e| KubeError::Invalid(format!("the object cannot be serialized: {e}")))
}
