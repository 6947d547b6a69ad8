//! `v2.BackupItemAction`: BackupItemAction v2, with asynchronous operations (spec §6.4, §9.2, §9.3).
//! An operation id is the action's own: the host keeps nothing about it, so any later process answers
//! `Progress` for it.

use tonic::{Request, Response, Status};

use super::convert::{operation_progress, resource_identifiers};
use super::dispatch::{self, call_span, traced, Dispatch};
use super::proto::v2::backup_item_action_server::BackupItemAction;
use super::proto::v2::{
    BackupItemActionAppliesToRequest, BackupItemActionAppliesToResponse,
    BackupItemActionCancelRequest, BackupItemActionProgressRequest,
    BackupItemActionProgressResponse, ExecuteRequest, ExecuteResponse,
};
use super::status;
use crate::action::{ActionKind, BackupRequest};

const KIND: ActionKind = ActionKind::BackupV2;

/// The service, serving the loaded `backup-v2` actions.
pub struct BackupV2(pub Dispatch);

#[tonic::async_trait]
impl BackupItemAction for BackupV2 {
    async fn applies_to(
        &self,
        request: Request<BackupItemActionAppliesToRequest>,
    ) -> Result<Response<BackupItemActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin)?;
        Ok(Response::new(BackupItemActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn execute(
        &self,
        request: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "Execute", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let item = dispatch::item("item", request.item)?;
            dispatch::tag(&item.id);
            let backup = dispatch::document("backup", request.backup)?;
            let outcome = self
                .0
                .runtime()
                .backup(
                    &request.plugin,
                    BackupRequest {
                        item: item.text,
                        backup,
                    },
                )
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
            if let Some(id) = &outcome.operation_id {
                tracing::debug!(operation_id = id.as_str(), "operation started");
            }
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
        let request = request.into_inner();
        let span = call_span(KIND, "Progress", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let backup = dispatch::document("backup", request.backup)?;
            let progress = self
                .0
                .runtime()
                .progress(&request.plugin, &request.operation_id, backup)
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
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
        let request = request.into_inner();
        let span = call_span(KIND, "Cancel", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let backup = dispatch::document("backup", request.backup)?;
            self.0
                .runtime()
                .cancel(&request.plugin, &request.operation_id, backup)
                .await
                .map_err(|e| status::call_failed(KIND, e))
        })
        .await
    }
}
