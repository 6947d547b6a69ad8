//! `plugin.GRPCBroker/StartStream` (docs/plugin-protocol.md#s5-3): go-plugin clients open it at once; Velero never
//! brokers connections. The stream stays open, ignores what arrives, and ends (OK) when the client ends
//! its side; a message that cannot be read ends it with that error, and nothing more is read.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use super::proto::plugin::grpc_broker_server::GrpcBroker;
use super::proto::plugin::ConnInfo;

/// The method's path: the one client stream of the plugin protocol.
pub(crate) const PATH: &str = "/plugin.GRPCBroker/StartStream";

/// The service.
pub(crate) struct Broker;

#[tonic::async_trait]
impl GrpcBroker for Broker {
    type StartStreamStream = Pin<Box<dyn Stream<Item = Result<ConnInfo, Status>> + Send>>;

    async fn start_stream(
        &self,
        request: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        Ok(Response::new(Box::pin(Ignored {
            inbound: Some(request.into_inner()),
        })))
    }
}

/// How many inbound messages one poll reads before it lets other tasks run: a client that sends
/// without pause must not keep a worker thread to itself.
const MESSAGES_PER_POLL: usize = 32;

/// The broker's answer: reads and drops the client's messages, yields nothing, and ends when the
/// client's side ends (OK) or fails (that status, once). The inbound stream is dropped at once then:
/// a failed decoder is never polled again.
struct Ignored<S> {
    inbound: Option<S>,
}

impl<S> Stream for Ignored<S>
where
    S: Stream<Item = Result<ConnInfo, Status>> + Unpin,
{
    type Item = Result<ConnInfo, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        for _ in 0..MESSAGES_PER_POLL {
            let Some(inbound) = self.inbound.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(inbound).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(info))) => tracing::debug!(
                    service_id = info.service_id,
                    "broker message ignored: Velero does not broker connections"
                ),
                Poll::Ready(Some(Err(status))) => {
                    self.inbound = None;
                    tracing::debug!("broker stream ended: {}", status.message());
                    return Poll::Ready(Some(Err(Status::new(
                        status.code(),
                        format!("plugin.GRPCBroker/StartStream: {}", status.message()),
                    ))));
                }
                Poll::Ready(None) => {
                    self.inbound = None;
                    return Poll::Ready(None);
                }
            }
        }
        // More may be ready: come back after the other tasks had their turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio_stream::StreamExt;

    use super::*;

    /// A stream that fails for ever, as tonic's decoder did after a malformed message, counting polls.
    struct AlwaysFailing(Arc<AtomicUsize>);

    impl Stream for AlwaysFailing {
        type Item = Result<ConnInfo, Status>;
        fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Poll::Ready(Some(Err(Status::internal("failed to decode"))))
        }
    }

    #[tokio::test]
    async fn an_inbound_error_ends_the_stream_with_it_and_is_read_once() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut answer = Ignored {
            inbound: Some(AlwaysFailing(polls.clone())),
        };
        let first = answer.next().await.unwrap().unwrap_err();
        assert_eq!(first.code(), tonic::Code::Internal);
        assert_eq!(
            first.message(),
            "plugin.GRPCBroker/StartStream: failed to decode"
        );
        assert!(answer.next().await.is_none());
        assert!(answer.next().await.is_none());
        assert_eq!(polls.load(Ordering::Relaxed), 1);
    }

    /// A stream with `0` messages all ready at once.
    struct Flood(usize);

    impl Stream for Flood {
        type Item = Result<ConnInfo, Status>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            if self.0 == 0 {
                return Poll::Ready(None);
            }
            self.0 -= 1;
            Poll::Ready(Some(Ok(ConnInfo::default())))
        }
    }

    #[test]
    fn a_flood_of_messages_yields_between_batches() {
        let mut answer = Ignored {
            inbound: Some(Flood(MESSAGES_PER_POLL * 3)),
        };
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        for _ in 0..3 {
            assert!(Pin::new(&mut answer).poll_next(&mut cx).is_pending());
        }
        assert!(matches!(
            Pin::new(&mut answer).poll_next(&mut cx),
            Poll::Ready(None)
        ));
    }
}
