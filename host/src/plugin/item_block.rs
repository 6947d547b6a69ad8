//! `v1.ItemBlockAction`: ItemBlockAction v1, Velero 1.15 and later (docs/plugin-protocol.md#s6-7, #s9-6).

use tonic::{Request, Response, Status};

use super::convert::resource_identifiers;
use super::dispatch::{call_span, traced, Dispatch};
use super::proto::v1::item_block_action_server::ItemBlockAction;
use super::proto::v1::{
    ItemBlockActionAppliesToRequest, ItemBlockActionAppliesToResponse,
    ItemBlockActionGetRelatedItemsRequest, ItemBlockActionGetRelatedItemsResponse,
};
use crate::action::ActionKind;

const KIND: ActionKind = ActionKind::ItemBlock;

/// The service, serving the loaded `item-block` actions.
pub(crate) struct ItemBlock(pub Dispatch);

#[tonic::async_trait]
impl ItemBlockAction for ItemBlock {
    async fn applies_to(
        &self,
        request: Request<ItemBlockActionAppliesToRequest>,
    ) -> Result<Response<ItemBlockActionAppliesToResponse>, Status> {
        let selector = self.0.applies_to(KIND, &request.get_ref().plugin).await?;
        Ok(Response::new(ItemBlockActionAppliesToResponse {
            resource_selector: Some(selector),
        }))
    }

    async fn get_related_items(
        &self,
        request: Request<ItemBlockActionGetRelatedItemsRequest>,
    ) -> Result<Response<ItemBlockActionGetRelatedItemsResponse>, Status> {
        let r = request.into_inner();
        traced(call_span(KIND, "GetRelatedItems", &r.plugin), async {
            let related = self.0.related_items(&r.plugin, r.item, r.backup).await?;
            Ok(ItemBlockActionGetRelatedItemsResponse {
                related_items: resource_identifiers(related),
            })
        })
        .await
    }
}
