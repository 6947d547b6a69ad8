//! `generated.DeleteItemAction` (docs/plugin-protocol.md#s6-8, #s9-7).

use tonic::{Request, Response, Status};

use super::dispatch::{call_span, traced, Dispatch};
use super::proto::generated::delete_item_action_server::DeleteItemAction;
use super::proto::generated::{
    DeleteItemActionAppliesToRequest, DeleteItemActionAppliesToResponse,
    DeleteItemActionExecuteRequest, Empty,
};
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::Delete;

/// The service, serving the loaded `delete` actions.
pub(crate) struct Delete(pub Dispatch);

#[tonic::async_trait]
impl DeleteItemAction for Delete {
    async fn applies_to(
        &self,
        request: Request<DeleteItemActionAppliesToRequest>,
    ) -> Result<Response<DeleteItemActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin).await?;
        Ok(Response::new(DeleteItemActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn execute(
        &self,
        request: Request<DeleteItemActionExecuteRequest>,
    ) -> Result<Response<Empty>, Status> {
        let r = request.into_inner();
        traced(call_span(KIND, "Execute", &r.plugin), async {
            self.0.delete(&r.plugin, r.item, r.backup).await?;
            Ok(Empty {})
        })
        .await
    }
}
