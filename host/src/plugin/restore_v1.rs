//! `generated.RestoreItemAction`: RestoreItemAction v1 (docs/plugin-protocol.md#s6-5, #s9-4).

use tonic::{Request, Response, Status};

use super::convert::resource_identifiers;
use super::dispatch::{call_span, traced, Dispatch};
use super::proto::generated::restore_item_action_server::RestoreItemAction;
use super::proto::generated::{
    RestoreItemActionAppliesToRequest, RestoreItemActionAppliesToResponse,
    RestoreItemActionExecuteRequest, RestoreItemActionExecuteResponse,
};
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::Restore;

/// The service, serving the loaded `restore` actions.
pub(crate) struct RestoreV1(pub Dispatch);

#[tonic::async_trait]
impl RestoreItemAction for RestoreV1 {
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
            })
        })
        .await
    }
}
