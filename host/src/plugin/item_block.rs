//! `v1.ItemBlockAction`: ItemBlockAction v1, Velero 1.15 and later (spec §6.7, §9.6).

use tonic::{Request, Response, Status};

use super::convert::resource_identifiers;
use super::dispatch::{self, call_span, traced, Dispatch};
use super::proto::v1::item_block_action_server::ItemBlockAction;
use super::proto::v1::{
    ItemBlockActionAppliesToRequest, ItemBlockActionAppliesToResponse,
    ItemBlockActionGetRelatedItemsRequest, ItemBlockActionGetRelatedItemsResponse,
};
use super::status;
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::ItemBlock;

/// The service, serving the loaded `item-block` actions.
pub struct ItemBlock(pub Dispatch);

#[tonic::async_trait]
impl ItemBlockAction for ItemBlock {
    async fn applies_to(
        &self,
        request: Request<ItemBlockActionAppliesToRequest>,
    ) -> Result<Response<ItemBlockActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin)?;
        Ok(Response::new(ItemBlockActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn get_related_items(
        &self,
        request: Request<ItemBlockActionGetRelatedItemsRequest>,
    ) -> Result<Response<ItemBlockActionGetRelatedItemsResponse>, Status> {
        let request = request.into_inner();
        let span = call_span(KIND, "GetRelatedItems", &request.plugin);
        traced(span, async {
            self.0.find(KIND, &request.plugin)?;
            let item = dispatch::item("item", request.item)?;
            dispatch::tag(&item.id);
            let backup = dispatch::document("backup", request.backup)?;
            let related = self
                .0
                .runtime()
                .related_items(&request.plugin, item.text, backup)
                .await
                .map_err(|e| status::call_failed(KIND, e))?;
            Ok(ItemBlockActionGetRelatedItemsResponse {
                related_items: resource_identifiers(related),
            })
        })
        .await
    }
}
