//! `v2.BackupItemAction`: BackupItemAction v2, with asynchronous operations (docs/plugin-protocol.md#s6-4, #s9-2, #s9-3).
//! An operation id is the action's own: the host keeps nothing about it, so any later process answers
//! `Progress` for it.

use tonic::{Request, Response, Status};

use super::convert::{operation_progress, resource_identifiers};
use super::dispatch::{call_span, traced, Dispatch};
use super::proto::v2::backup_item_action_server::BackupItemAction;
use super::proto::v2::{
    BackupItemActionAppliesToRequest, BackupItemActionAppliesToResponse,
    BackupItemActionCancelRequest, BackupItemActionProgressRequest,
    BackupItemActionProgressResponse, ExecuteRequest, ExecuteResponse,
};
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::BackupV2;

/// The service, serving the loaded `backup-v2` actions.
pub(crate) struct BackupV2(pub Dispatch);

#[tonic::async_trait]
impl BackupItemAction for BackupV2 {
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
                operation_id: outcome.operation_id.unwrap_or_default(),
                post_operation_items: resource_identifiers(outcome.post_operation_items),
            })
        })
        .await
    }

    async fn progress(
        &self,
        request: Request<BackupItemActionProgressRequest>,
    ) -> Result<Response<BackupItemActionProgressResponse>, Status> {
        let r = request.into_inner();
        traced(call_span(KIND, "Progress", &r.plugin), async {
            let progress = self
                .0
                .progress(KIND, &r.plugin, &r.operation_id, "backup", r.backup)
                .await?;
            Ok(BackupItemActionProgressResponse {
                progress: Some(operation_progress(progress)),
            })
        })
        .await
    }

    async fn cancel(
        &self,
        request: Request<BackupItemActionCancelRequest>,
    ) -> Result<Response<()>, Status> {
        let r = request.into_inner();
        traced(call_span(KIND, "Cancel", &r.plugin), async {
            self.0
                .cancel(KIND, &r.plugin, &r.operation_id, "backup", r.backup)
                .await
        })
        .await
    }
}
