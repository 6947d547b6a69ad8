//! `generated.RestoreItemAction`: RestoreItemAction v1 (spec §6.5, §9.4).

use tonic::{Request, Response, Status};

use super::convert::resource_identifiers;
use super::dispatch::{self, call_span, traced, Dispatch};
use super::proto::generated::restore_item_action_server::RestoreItemAction;
use super::proto::generated::{
    RestoreItemActionAppliesToRequest, RestoreItemActionAppliesToResponse,
    RestoreItemActionExecuteRequest, RestoreItemActionExecuteResponse,
};
use super::status;
use crate::action::{ActionKind, RestoreRequest};

const KIND: ActionKind = ActionKind::Restore;

/// The service, serving the loaded `restore` actions.
pub struct RestoreV1(pub Dispatch);

#[tonic::async_trait]
impl RestoreItemAction for RestoreV1 {
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
            Ok(RestoreItemActionExecuteResponse {
                item: outcome.item.into_bytes(),
                additional_items: resource_identifiers(outcome.additional_items),
                skip_restore: outcome.skip_restore,
            })
        })
        .await
    }
}
