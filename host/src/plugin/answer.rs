//! Answers as the clients read them. An answer larger than [`SLICE`] is handed to the connection a
//! slice at a time, as the client's flow-control window lets it through, and what is not yet handed
//! on counts against the same process-wide budget as requests still arriving
//! ([`upload::MAX_HELD`]): an answer that would take the process past it fails its call with
//! `RESOURCE_EXHAUSTED` instead, and the others go on. An answer its client has not read for
//! [`upload::STALL_TIMEOUT`] is dropped, and what it held is given back even if the client never
//! reads again (its stream is reset when the connection next looks at it).
//!
//! What is not counted: at most one slice per stream in hand, plus what the HTTP/2 connection
//! buffers per stream before it asks for more (hyper's server keeps at most 400 KiB), so a client
//! that stops reading holds about half a megabyte per open stream beyond the budget.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use tokio::time::Instant;
use tonic::body::Body;
use tonic::Status;

use super::upload;

/// The largest piece of an answer handed to the connection at once; answers up to this size pass
/// through untouched (Velero's answers are an item, a few kilobytes).
pub(crate) const SLICE: usize = 64 << 10;

/// The tower layer that gives every response an [`Answer`] body.
#[derive(Clone, Copy, Default)]
pub struct AnswersLayer;

impl<S> tower::Layer<S> for AnswersLayer {
    type Service = AnswersService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AnswersService { inner }
    }
}

/// See [`AnswersLayer`].
#[derive(Clone)]
pub struct AnswersService<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for AnswersService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future =
        futures::future::MapOk<S::Future, fn(http::Response<Body>) -> http::Response<Body>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        use futures::TryFutureExt;
        self.inner
            .call(request)
            .map_ok(|response| response.map(|body| Body::new(Answer::new(body))))
    }
}

/// A response body that hands large messages on a [`SLICE`] at a time, within the process budget
/// (see the module's doc).
pub(crate) struct Answer {
    inner: Body,
    /// The part of a large message not yet handed on, shared with its stall watchdog.
    rest: Option<Arc<Mutex<Rest>>>,
    /// The answer has ended (refused, dropped for stalling, or the inner body ended).
    ended: bool,
    stall_after: Duration,
}

/// What a large answer still holds, and when its client last took a slice.
struct Rest {
    data: Bytes,
    last_progress: Instant,
    /// The watchdog dropped `data`: the client stopped reading.
    stalled: bool,
}

impl Rest {
    /// Drops what is held and gives it back to the budget.
    fn release(&mut self) {
        upload::give_back(self.data.len());
        self.data = Bytes::new();
    }
}

impl Answer {
    /// Wraps a response body.
    pub(crate) fn new(inner: Body) -> Answer {
        Answer {
            inner,
            rest: None,
            ended: false,
            stall_after: upload::STALL_TIMEOUT,
        }
    }

    /// Keeps a large message to hand on slice by slice, or refuses it when the budget is spent.
    fn hold(&mut self, data: Bytes) -> Result<(), Status> {
        upload::reserve(data.len()).map_err(|held| {
            Status::resource_exhausted(format!(
                "the plugin already holds {} MiB of answers and requests that their clients have not taken, \
                 the most it holds across all calls; this answer ({} bytes) is dropped",
                held >> 20,
                data.len()
            ))
        })?;
        let rest = Arc::new(Mutex::new(Rest {
            data,
            last_progress: Instant::now(),
            stalled: false,
        }));
        tokio::spawn(watch(Arc::downgrade(&rest), self.stall_after));
        self.rest = Some(rest);
        Ok(())
    }

    /// The next slice of the held message, if any is left.
    fn next_slice(&mut self) -> Option<Result<Bytes, Status>> {
        let rest = self.rest.as_ref()?;
        let mut rest = rest.lock().unwrap_or_else(PoisonError::into_inner);
        if rest.stalled {
            drop(rest);
            self.rest = None;
            self.ended = true;
            return Some(Err(Status::deadline_exceeded(format!(
                "the client read nothing of this answer for {}; it is dropped",
                humantime::format_duration(self.stall_after)
            ))));
        }
        if rest.data.is_empty() {
            drop(rest);
            self.rest = None;
            return None;
        }
        let n = rest.data.len().min(SLICE);
        let slice = rest.data.split_to(n);
        upload::give_back(n);
        rest.last_progress = Instant::now();
        Some(Ok(slice))
    }
}

/// Drops a large answer's remainder once its client has taken nothing for `stall_after`; ends when
/// the answer is handed on whole or goes away.
async fn watch(rest: Weak<Mutex<Rest>>, stall_after: Duration) {
    loop {
        let deadline = {
            let Some(rest) = rest.upgrade() else { return };
            let mut rest = rest.lock().unwrap_or_else(PoisonError::into_inner);
            if rest.data.is_empty() {
                return;
            }
            let deadline = rest.last_progress + stall_after;
            if Instant::now() >= deadline {
                tracing::warn!(
                    bytes = rest.data.len(),
                    "a client read nothing of a large answer for {}: the answer is dropped",
                    humantime::format_duration(stall_after)
                );
                rest.release();
                rest.stalled = true;
                return;
            }
            deadline
        };
        tokio::time::sleep_until(deadline).await;
    }
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Some(slice) = this.next_slice() {
            return Poll::Ready(Some(slice.map(Frame::data)));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) if data.len() > SLICE => match this.hold(data) {
                    Ok(()) => Poll::Ready(this.next_slice().map(|slice| slice.map(Frame::data))),
                    Err(status) => {
                        // The headers have gone out: the refusal travels as the answer's trailers.
                        this.ended = true;
                        tracing::warn!("{}", status.message());
                        let mut trailers = http::HeaderMap::new();
                        Poll::Ready(Some(
                            status
                                .add_header(&mut trailers)
                                .map(|()| Frame::trailers(trailers)),
                        ))
                    }
                },
                Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (self.rest.is_none() && self.inner.is_end_stream())
    }
}

impl Drop for Answer {
    /// An answer that goes away (its stream reset, its connection closed) gives back what it held.
    fn drop(&mut self) {
        if let Some(rest) = self.rest.take() {
            rest.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .release();
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn body_of(chunks: Vec<Bytes>) -> Body {
        let frames = chunks.into_iter().map(|c| Ok::<_, Status>(Frame::data(c)));
        Body::new(http_body_util::StreamBody::new(futures::stream::iter(
            frames,
        )))
    }

    #[tokio::test]
    async fn a_large_answer_arrives_whole_in_slices_and_gives_its_budget_back() {
        let message = Bytes::from((0..(SLICE * 3 + 7)).map(|i| i as u8).collect::<Vec<_>>());
        let small = Bytes::from_static(b"small");
        let mut answer = Answer::new(body_of(vec![small.clone(), message.clone()]));
        let mut received = Vec::new();
        let mut frames = 0;
        while let Some(frame) = answer.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() <= SLICE);
            received.extend_from_slice(&data);
            frames += 1;
        }
        assert_eq!(frames, 5, "the small message, then four slices");
        assert_eq!(&received[..5], &small[..]);
        assert_eq!(&received[5..], &message[..]);
    }

    #[tokio::test]
    async fn an_answer_its_client_stops_taking_is_dropped_after_the_stall_timeout() {
        let message = Bytes::from(vec![7u8; SLICE * 4]);
        let mut answer = Answer::new(body_of(vec![message]));
        answer.stall_after = Duration::from_millis(200);
        let first = answer.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap().len(), SLICE);
        let rest = Arc::downgrade(answer.rest.as_ref().unwrap());
        tokio::time::sleep(Duration::from_millis(600)).await;
        {
            let rest = rest.upgrade().unwrap();
            let rest = rest.lock().unwrap();
            assert!(rest.stalled, "the watchdog dropped the rest");
            assert!(rest.data.is_empty(), "and gave its bytes back");
        }
        let status = answer.frame().await.unwrap().unwrap_err();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert!(status.message().contains("read nothing of this answer"));
        assert!(answer.frame().await.is_none());
    }
}
