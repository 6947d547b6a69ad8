//! `plugin.GRPCStdio/StreamStdio` (docs/plugin-protocol.md#s5-4): go-plugin clients open this stream at once and keep it
//! for the life of the process. Our logs go to the real stderr (which Velero reads) and nothing else
//! writes to stdout, so the stream stays open and carries nothing until the client goes away.

use std::pin::Pin;

use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::proto::plugin::grpc_stdio_server::GrpcStdio;
use super::proto::plugin::StdioData;

/// The service.
pub(crate) struct Stdio;

#[tonic::async_trait]
impl GrpcStdio for Stdio {
    type StreamStdioStream = Pin<Box<dyn Stream<Item = Result<StdioData, Status>> + Send>>;

    async fn stream_stdio(
        &self,
        _request: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(Box::pin(tokio_stream::pending())))
    }
}
