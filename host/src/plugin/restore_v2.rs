//! `v2.RestoreItemAction`: RestoreItemAction v2, with asynchronous operations and waiting for
//! additional items (spec §6.6, §9.3–§9.5).

use tonic::{Request, Response, Status};

use super::convert::{duration, operation_progress, resource_id, resource_identifiers};
use super::dispatch::{self, call_span, traced, Dispatch};
use super::proto::v2::restore_item_action_server::RestoreItemAction;
use super::proto::v2::{
    RestoreItemActionAppliesToRequest, RestoreItemActionAppliesToResponse,
    RestoreItemActionCancelRequest, RestoreItemActionExecuteRequest,
    RestoreItemActionExecuteResponse, RestoreItemActionItemsReadyRequest,
    RestoreItemActionItemsReadyResponse, RestoreItemActionProgressRequest,
    RestoreItemActionProgressResponse,
};
use super::status;
use crate::action::{ActionKind, RestoreRequest};

const KIND: ActionKind = ActionKind::RestoreV2;

/// The service, serving the loaded `restore-v2` actions.
pub struct RestoreV2(pub Dispatch);

#[tonic::async_trait]
impl RestoreItemAction for RestoreV2 {
    async fn applies_to(
        &self,
        request: Request<RestoreItemActionAppliesToRequest>,
    ) -> Result<Response<RestoreItemActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin)?;
        Ok(Response::new(RestoreItemActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn execute(
        &self,
        request: Request<RestoreItemActionExecuteRequest>,
    ) -> Result<Response<RestoreItemActionExecuteResponse>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "Execute", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let item = dispatch::item("item", request.item)?;
            dispatch::tag(&item.id);
            let item_from_backup = dispatch::item("itemFromBackup", request.item_from_backup)?;
            let restore = dispatch::document("restore", request.restore)?;
            let outcome = self
                .0
                .runtime()
                .restore(
                    &request.plugin,
                    RestoreRequest {
                        item: item.text,
                        item_from_backup: item_from_backup.text,
                        restore,
                    },
                )
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
            if let Some(id) = &outcome.operation_id {
                tracing::debug!(operation_id = id.as_str(), "operation started");
            }
            Ok(RestoreItemActionExecuteResponse {
                item: outcome.item.into_bytes(),
                additional_items: resource_identifiers(outcome.additional_items),
                skip_restore: outcome.skip_restore,
                operation_id: outcome.operation_id.unwrap_or_default(),
                wait_for_additional_items: outcome.wait_for_additional_items,
                additional_items_ready_timeout: outcome.additional_items_timeout.map(duration),
            })
        })
        .await
    }

    async fn progress(
        &self,
        request: Request<RestoreItemActionProgressRequest>,
    ) -> Result<Response<RestoreItemActionProgressResponse>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "Progress", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let restore = dispatch::document("restore", request.restore)?;
            let progress = self
                .0
                .runtime()
                .progress(&request.plugin, &request.operation_id, restore)
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
            Ok(RestoreItemActionProgressResponse {
                progress: Some(operation_progress(progress)),
            })
        })
        .await
    }

    async fn cancel(
        &self,
        request: Request<RestoreItemActionCancelRequest>,
    ) -> Result<Response<()>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "Cancel", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let restore = dispatch::document("restore", request.restore)?;
            self.0
                .runtime()
                .cancel(&request.plugin, &request.operation_id, restore)
                .await
                .map_err(|e| status::call_failed(KIND, e))
        })
        .await
    }

    async fn are_additional_items_ready(
        &self,
        request: Request<RestoreItemActionItemsReadyRequest>,
    ) -> Result<Response<RestoreItemActionItemsReadyResponse>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "AreAdditionalItemsReady", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let restore = dispatch::document("restore", request.restore)?;
            let items = request
                .additional_items
                .into_iter()
                .map(resource_id)
                .collect();
            let ready = self
                .0
                .runtime()
                .items_ready(&request.plugin, items, restore)
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
            Ok(RestoreItemActionItemsReadyResponse { ready })
        })
        .await
    }
}
