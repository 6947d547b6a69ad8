//! `generated.DeleteItemAction` (spec §6.8, §9.7).

use tonic::{Request, Response, Status};

use super::dispatch::{self, call_span, traced, Dispatch};
use super::proto::generated::delete_item_action_server::DeleteItemAction;
use super::proto::generated::{
    DeleteItemActionAppliesToRequest, DeleteItemActionAppliesToResponse,
    DeleteItemActionExecuteRequest, Empty,
};
use super::status;
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::Delete;

/// The service, serving the loaded `delete` actions.
pub struct Delete(pub Dispatch);

#[tonic::async_trait]
impl DeleteItemAction for Delete {
    async fn applies_to(
        &self,
        request: Request<DeleteItemActionAppliesToRequest>,
    ) -> Result<Response<DeleteItemActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin)?;
        Ok(Response::new(DeleteItemActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn execute(
        &self,
        request: Request<DeleteItemActionExecuteRequest>,
    ) -> Result<Response<Empty>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "Execute", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let item = dispatch::item("item", request.item)?;
            dispatch::tag(&item.id);
            let backup = dispatch::document("backup", request.backup)?;
            self.0
                .runtime()
                .delete(&request.plugin, item.text, backup)
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
            Ok(Empty {})
        })
        .await
    }
}
