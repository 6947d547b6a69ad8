//! `plugin.GRPCController/Shutdown` (docs/plugin-protocol.md#s5-2, #s14): Velero asks the plugin to stop, then waits 2 s
//! before it kills it. The call only raises the shutdown signal; [`super::serve`] stops serving,
//! removes the socket and exits.

use std::sync::Arc;

use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use super::proto::plugin::grpc_controller_server::GrpcController;
use super::proto::plugin::Empty;

/// The service: raises `shutdown` when called.
pub(crate) struct Controller {
    /// Raised once Shutdown has been called.
    pub(crate) shutdown: Arc<Notify>,
}

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _request: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::debug!("Shutdown called: stopping");
        self.shutdown.notify_one();
        Ok(Response::new(Empty {}))
    }
}
