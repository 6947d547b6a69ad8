//! `v2.RestoreItemAction`: RestoreItemAction v2, with asynchronous operations and waiting for
//! additional items (docs/plugin-protocol.md#s6-6, #s9-3–#s9-5).

use tonic::{Request, Response, Status};

use super::convert::{duration, operation_progress, resource_id, resource_identifiers};
use super::dispatch::{call_span, traced, Dispatch};
use super::proto::v2::restore_item_action_server::RestoreItemAction;
use super::proto::v2::{
    RestoreItemActionAppliesToRequest, RestoreItemActionAppliesToResponse,
    RestoreItemActionCancelRequest, RestoreItemActionExecuteRequest,
    RestoreItemActionExecuteResponse, RestoreItemActionItemsReadyRequest,
    RestoreItemActionItemsReadyResponse, RestoreItemActionProgressRequest,
    RestoreItemActionProgressResponse,
};
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::RestoreV2;

/// The service, serving the loaded `restore-v2` actions.
pub(crate) struct RestoreV2(pub Dispatch);

#[tonic::async_trait]
impl RestoreItemAction for RestoreV2 {
    async fn applies_to(
        &self,
        request: Request<RestoreItemActionAppliesToRequest>,
    ) -> Result<Response<RestoreItemActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin).await?;
        Ok(Response::new(RestoreItemActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn execute(
        &self,
        request: Request<RestoreItemActionExecuteRequest>,
    ) -> Result<Response<RestoreItemActionExecuteResponse>, Status> {
        let r = request.into_inner();
        traced(call_span(KIND, "Execute", &r.plugin), async {
            let outcome = self
                .0
                .restore(KIND, &r.plugin, r.item, r.item_from_backup, r.restore)
                .await?;
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
        let r = request.into_inner();
        traced(call_span(KIND, "Progress", &r.plugin), async {
            let progress = self
                .0
                .progress(KIND, &r.plugin, &r.operation_id, "restore", r.restore)
                .await?;
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
        let r = request.into_inner();
        traced(call_span(KIND, "Cancel", &r.plugin), async {
            self.0
                .cancel(KIND, &r.plugin, &r.operation_id, "restore", r.restore)
                .await
        })
        .await
    }

    async fn are_additional_items_ready(
        &self,
        request: Request<RestoreItemActionItemsReadyRequest>,
    ) -> Result<Response<RestoreItemActionItemsReadyResponse>, Status> {
        let r = request.into_inner();
        traced(
            call_span(KIND, "AreAdditionalItemsReady", &r.plugin),
            async {
                let items = r.additional_items.into_iter().map(resource_id).collect();
                let ready = self.0.items_ready(&r.plugin, items, r.restore).await?;
                Ok(RestoreItemActionItemsReadyResponse { ready })
            },
        )
        .await
    }
}
