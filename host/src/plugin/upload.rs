//! Request bodies as the services read them. Each gRPC message is passed on only once it has arrived
//! whole, so that no memory is set aside for the length a message merely announces (tonic reserves a
//! message's announced length as soon as it reads the 5-byte prefix). A request that stops arriving
//! fails its call with `DEADLINE_EXCEEDED` after [`STALL_TIMEOUT`] without data, which frees what it
//! held: a unary request until its body ends, a client stream (the broker's) within a message only,
//! since it may rest between messages. Messages of any size up to the services' limit are accepted,
//! as long as all the requests of the process together hold at most [`MAX_HELD`] bytes of messages
//! not yet whole: a request that would take more fails with `RESOURCE_EXHAUSTED`, and the others go on.
//! Answers their clients have not read count against the same budget ([`super::answer`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use tokio::time::{Instant, Sleep};
use tonic::body::Body;
use tonic::Status;

/// How long a message that has started to arrive may receive nothing before its call fails. Velero
/// writes a message it already holds in memory to a local socket: a pause this long means the client
/// is stuck or gone.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The most that the calls of this process may hold, all together, of messages still arriving and of
/// answers not yet taken by their clients.
/// Velero sends one item (and its Backup or Restore) per message, far below this; without a bound
/// across connections, a few clients stalling large messages would take the process's memory.
pub const MAX_HELD: usize = 256 << 20;

/// Bytes held by every [`WholeMessages`] of the process.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Takes `n` bytes of the process budget, or answers what is held already when they do not fit.
pub(super) fn reserve(n: usize) -> Result<(), usize> {
    let before = HELD.fetch_add(n, Ordering::Relaxed);
    if before + n > MAX_HELD {
        HELD.fetch_sub(n, Ordering::Relaxed);
        return Err(before);
    }
    Ok(())
}

/// Gives `n` bytes back to the process budget.
pub(super) fn give_back(n: usize) {
    HELD.fetch_sub(n, Ordering::Relaxed);
}

/// The length prefix of a gRPC message: a compression flag and a big-endian u32 length.
const PREFIX: usize = 5;

/// How many frames one poll takes from the connection before it lets other tasks run.
const FRAMES_PER_POLL: usize = 64;

/// The tower layer that gives every request a [`WholeMessages`] body.
#[derive(Clone, Copy, Default)]
pub struct WholeMessagesLayer;

impl<S> tower::Layer<S> for WholeMessagesLayer {
    type Service = WholeMessagesService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WholeMessagesService { inner }
    }
}

/// See [`WholeMessagesLayer`].
#[derive(Clone)]
pub struct WholeMessagesService<S> {
    inner: S,
}

impl<S> tower::Service<http::Request<Body>> for WholeMessagesService<S>
where
    S: tower::Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let streaming = request.uri().path() == super::broker::PATH;
        self.inner
            .call(request.map(|body| Body::new(WholeMessages::new(body, streaming))))
    }
}

/// A request body that holds back each gRPC message until it is complete (see the module's doc).
pub(crate) struct WholeMessages {
    inner: Body,
    /// Received and not yet passed on, in order.
    held: VecDeque<Bytes>,
    /// Bytes in `held`.
    held_len: usize,
    /// Bytes at the front of `held` that form whole messages: ready to pass on.
    complete: usize,
    /// The full length (prefix included) of the message starting at offset `complete`, once its
    /// prefix is in.
    current: Option<usize>,
    /// The body's trailers, passed on after the data.
    trailers: Option<http::HeaderMap>,
    /// The connection has no more data for this body.
    inner_done: bool,
    /// The body failed (stalled): nothing more is passed on.
    failed: bool,
    /// A client stream, which may rest between messages.
    streaming: bool,
    /// When data last arrived, and the timer that fires `stall_after` ([`STALL_TIMEOUT`]) after it.
    last_progress: Instant,
    stall_after: Duration,
    stall: Option<Pin<Box<Sleep>>>,
}

impl WholeMessages {
    /// Wraps a request body; `streaming` for a client stream, which may rest between messages.
    pub(crate) fn new(inner: Body, streaming: bool) -> WholeMessages {
        WholeMessages {
            inner,
            held: VecDeque::new(),
            held_len: 0,
            complete: 0,
            current: None,
            trailers: None,
            inner_done: false,
            failed: false,
            streaming,
            last_progress: Instant::now(),
            stall_after: STALL_TIMEOUT,
            stall: None,
        }
    }

    /// Adds received data and moves `complete` past every message now whole; fails when the
    /// process would hold more than [`MAX_HELD`].
    fn push(&mut self, data: Bytes) -> Result<(), Status> {
        if let Err(before) = reserve(data.len()) {
            return Err(Status::resource_exhausted(format!(
                "the plugin already holds {} MiB of requests still arriving, the most it holds across all calls; \
                 this request ({} bytes received) is refused",
                before >> 20,
                self.held_len + data.len()
            )));
        }
        self.held_len += data.len();
        self.held.push_back(data);
        loop {
            let pending = self.held_len - self.complete;
            let total = match self.current {
                Some(total) => total,
                None if pending >= PREFIX => {
                    let prefix = self.bytes_at(self.complete);
                    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
                    let total = PREFIX + length as usize;
                    self.current = Some(total);
                    total
                }
                None => return Ok(()),
            };
            if pending < total {
                return Ok(());
            }
            self.complete += total;
            self.current = None;
        }
    }

    /// The [`PREFIX`] bytes at `offset` in `held` (which holds at least `offset + PREFIX` bytes).
    fn bytes_at(&self, mut offset: usize) -> [u8; PREFIX] {
        let mut out = [0u8; PREFIX];
        let mut filled = 0;
        for chunk in &self.held {
            if offset >= chunk.len() {
                offset -= chunk.len();
                continue;
            }
            let n = (chunk.len() - offset).min(PREFIX - filled);
            out[filled..filled + n].copy_from_slice(&chunk[offset..offset + n]);
            filled += n;
            offset = 0;
            if filled == PREFIX {
                break;
            }
        }
        out
    }

    /// Takes the first ready chunk (at most `complete` bytes).
    fn take_complete(&mut self) -> Option<Bytes> {
        let mut chunk = self.held.pop_front()?;
        if chunk.len() > self.complete {
            let rest = chunk.split_off(self.complete);
            self.held.push_front(rest);
        }
        self.complete -= chunk.len();
        self.release(chunk.len());
        Some(chunk)
    }

    /// Gives back `n` held bytes.
    fn release(&mut self, n: usize) {
        self.held_len -= n;
        give_back(n);
    }

    /// Drops everything held: the body has failed.
    fn fail(&mut self) {
        self.failed = true;
        self.held.clear();
        let held = self.held_len;
        self.release(held);
        self.complete = 0;
        self.current = None;
    }

    /// Whether the stall timer has fired; arms it for `cx` otherwise.
    fn stalled(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = self.last_progress + self.stall_after;
        let timer = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        timer.as_mut().poll(cx).is_ready()
    }
}

impl http_body::Body for WholeMessages {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let mut frames = 0;
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            if this.complete > 0 {
                if let Some(chunk) = this.take_complete() {
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
            }
            if this.inner_done {
                if this.held_len > 0 {
                    // Cut short: pass on what came; the decoder reports the truncated message.
                    this.complete = this.held_len;
                    this.current = None;
                    continue;
                }
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            if frames == FRAMES_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    frames += 1;
                    match frame.into_data() {
                        Ok(data) => {
                            if !data.is_empty() {
                                this.last_progress = Instant::now();
                                if let Err(status) = this.push(data) {
                                    this.fail();
                                    return Poll::Ready(Some(Err(status)));
                                }
                            }
                        }
                        Err(frame) => {
                            if let Ok(trailers) = frame.into_trailers() {
                                this.trailers = Some(trailers);
                                this.inner_done = true;
                            }
                        }
                    }
                }
                Poll::Ready(Some(Err(status))) => return Poll::Ready(Some(Err(status))),
                Poll::Ready(None) => this.inner_done = true,
                Poll::Pending => {
                    // Between messages a client stream may rest as long as it likes.
                    if this.streaming && this.held_len == 0 {
                        this.stall = None;
                        return Poll::Pending;
                    }
                    if !this.stalled(cx) {
                        return Poll::Pending;
                    }
                    let received = this.held_len - this.complete;
                    let message = match this.current {
                        Some(total) => format!(
                            "the request stalled: {received} of {total} bytes of a message received, then nothing for {}",
                            humantime::format_duration(this.stall_after)
                        ),
                        None => format!(
                            "the request stalled: it did not end, and nothing arrived for {}",
                            humantime::format_duration(this.stall_after)
                        ),
                    };
                    this.fail();
                    return Poll::Ready(Some(Err(Status::deadline_exceeded(message))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || (self.inner_done && self.held_len == 0 && self.trailers.is_none())
    }
}

impl Drop for WholeMessages {
    /// A request that goes away (its client closed, its call ended) gives back what it held.
    fn drop(&mut self) {
        give_back(self.held_len);
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;

    use super::*;

    /// The stall timeout of these tests.
    const STALL: Duration = Duration::from_millis(300);

    fn message(len: usize) -> Vec<u8> {
        let mut m = vec![0u8];
        m.extend_from_slice(&(len as u32).to_be_bytes());
        m.extend(std::iter::repeat_n(7u8, len));
        m
    }

    fn body_of(chunks: Vec<Vec<u8>>) -> WholeMessages {
        let stream = tokio_stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, Status>(Frame::data(Bytes::from(c)))),
        );
        WholeMessages::new(Body::new(http_body_util::StreamBody::new(stream)), false)
    }

    async fn collect(mut body: WholeMessages) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            out.push(frame.unwrap().into_data().unwrap());
        }
        out
    }

    #[tokio::test]
    async fn messages_split_anywhere_come_out_whole_and_in_order() {
        let mut all = message(3);
        all.extend(message(0));
        all.extend(message(70_000));
        let pieces: Vec<Vec<u8>> = all.chunks(4).map(<[u8]>::to_vec).collect();
        let out = collect(body_of(pieces)).await;
        let joined: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(joined, all);
    }

    fn channel_body(
        streaming: bool,
    ) -> (
        tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Status>>,
        WholeMessages,
    ) {
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        let inner = Body::new(http_body_util::StreamBody::new(
            tokio_stream::wrappers::ReceiverStream::new(receiver),
        ));
        let mut body = WholeMessages::new(inner, streaming);
        body.stall_after = STALL;
        (sender, body)
    }

    #[tokio::test]
    async fn nothing_of_a_message_is_passed_on_before_it_is_whole() {
        let m = message(10);
        let (sender, mut body) = channel_body(false);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        for piece in [&m[..2], &m[2..8]] {
            sender
                .send(Ok(Frame::data(Bytes::copy_from_slice(piece))))
                .await
                .unwrap();
            assert!(Pin::new(&mut body).poll_frame(&mut cx).is_pending());
        }
        sender
            .send(Ok(Frame::data(Bytes::copy_from_slice(&m[8..]))))
            .await
            .unwrap();
        drop(sender);
        assert_eq!(collect(body).await.concat(), m);
    }

    #[tokio::test]
    async fn a_message_that_stops_arriving_fails_after_the_stall_timeout() {
        let (sender, mut body) = channel_body(true);
        // Announces 2 GiB, sends 4 bytes of it.
        let mut start = vec![0u8];
        start.extend_from_slice(&(1u32 << 31).to_be_bytes());
        start.extend_from_slice(b"abcd");
        sender.send(Ok(Frame::data(start.into()))).await.unwrap();
        let started = Instant::now();
        let error = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::DeadlineExceeded);
        assert!(
            error.message().contains("9 of 2147483653 bytes"),
            "{}",
            error.message()
        );
        assert!(started.elapsed() >= STALL);
        assert!(body.is_end_stream());
        drop(sender);
    }

    #[tokio::test]
    async fn a_stream_may_rest_between_messages_and_a_unary_request_may_not() {
        for streaming in [true, false] {
            let (sender, mut body) = channel_body(streaming);
            sender
                .send(Ok(Frame::data(Bytes::from(message(3)))))
                .await
                .unwrap();
            let first = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
            assert_eq!(first.unwrap().unwrap().into_data().unwrap().len(), 8);
            let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
            let rested = tokio::time::timeout(STALL * 4, next).await;
            match (streaming, rested) {
                (true, Err(_)) => {}
                (false, Ok(Some(Err(status)))) => {
                    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
                    assert!(status.message().contains("did not end"), "{status:?}");
                }
                (streaming, other) => panic!("streaming {streaming}: {other:?}"),
            }
        }
    }
}
