//! `plugin.GRPCBroker/StartStream` (spec §5.3): go-plugin clients open it at once; Velero never
//! brokers connections. The stream stays open, ignores what arrives, and ends (OK) when the client ends
//! its side.

use std::pin::Pin;

use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::proto::plugin::grpc_broker_server::GrpcBroker;
use super::proto::plugin::ConnInfo;

/// The service.
pub struct Broker;

#[tonic::async_trait]
impl GrpcBroker for Broker {
    type StartStreamStream = Pin<Box<dyn Stream<Item = Result<ConnInfo, Status>> + Send>>;

    async fn start_stream(
        &self,
        request: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        let inbound = request.into_inner();
        let silent = inbound.filter_map(|received| {
            if let Ok(info) = received {
                tracing::debug!(
                    service_id = info.service_id,
                    "broker message ignored: Velero does not broker connections"
                );
            }
            None
        });
        Ok(Response::new(Box::pin(silent)))
    }
}
