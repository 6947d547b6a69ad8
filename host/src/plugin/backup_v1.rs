//! `generated.BackupItemAction`: BackupItemAction v1 (spec §6.3, §9.2).

use tonic::{Request, Response, Status};

use super::convert::resource_identifiers;
use super::dispatch::{self, call_span, traced, Dispatch};
use super::proto::generated::backup_item_action_server::BackupItemAction;
use super::proto::generated::{
    BackupItemActionAppliesToRequest, BackupItemActionAppliesToResponse, ExecuteRequest,
    ExecuteResponse,
};
use super::status;
use crate::action::{ActionKind, BackupRequest};

const KIND: ActionKind = ActionKind::Backup;

/// The service, serving the loaded `backup` actions.
pub struct BackupV1(pub Dispatch);

#[tonic::async_trait]
impl BackupItemAction for BackupV1 {
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
            Ok(ExecuteResponse {
                item: outcome.item.into_bytes(),
                additional_items: resource_identifiers(outcome.additional_items),
            })
        })
        .await
    }
}
