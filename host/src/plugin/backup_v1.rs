//! `generated.BackupItemAction`: BackupItemAction v1 (docs/plugin-protocol.md#s6-3, #s9-2).

use tonic::{Request, Response, Status};

use super::convert::resource_identifiers;
use super::dispatch::{call_span, traced, Dispatch};
use super::proto::generated::backup_item_action_server::BackupItemAction;
use super::proto::generated::{
    BackupItemActionAppliesToRequest, BackupItemActionAppliesToResponse, ExecuteRequest,
    ExecuteResponse,
};
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::Backup;

/// The service, serving the loaded `backup` actions.
pub(crate) struct BackupV1(pub Dispatch);

#[tonic::async_trait]
impl BackupItemAction for BackupV1 {
    async fn applies_to(
        &self,
        request: Request<BackupItemActionAppliesToRequest>,
    ) -> Result<Response<BackupItemActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin).await?;
        Ok(Response::new(BackupItemActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn execute(
        &self,
        request: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        let r = request.into_inner();
        traced(call_span(KIND, "Execute", &r.plugin), async {
            let outcome = self.0.backup(KIND, &r.plugin, r.item, r.backup).await?;
            Ok(ExecuteResponse {
                item: outcome.item.into_bytes(),
                additional_items: resource_identifiers(outcome.additional_items),
            })
        })
        .await
    }
}
