//! Accepting connections on the plugin's socket so that no client can stop the server from serving
//! others: when the process runs out of file descriptors the accept loop pauses instead of spinning,
//! at most [`MAX_CONNECTIONS`] connections are open at once (more wait in the socket's backlog), and
//! a connection that sends nothing within [`GREETING_TIMEOUT`] of being accepted is closed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_stream::wrappers::ReceiverStream;

/// Connections served at once. Velero opens one per plugin process; the rest is headroom, and the
/// bound on what clients that stopped reading can hold until they are dropped.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// How long a new connection may stay silent before it is closed (a gRPC client sends its HTTP/2
/// preface at once).
pub(crate) const GREETING_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the accept loop pauses after a failure such as running out of file descriptors, which
/// would otherwise repeat at once for as long as it lasts.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);

/// The connections `listener` accepts, for tonic's server. The accepting task stops when the stream
/// is dropped.
pub fn incoming(listener: UnixListener) -> ReceiverStream<io::Result<Connection>> {
    let (sender, receiver) = mpsc::channel(1);
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        // Whether the last accept failed: one warning per run of failures.
        let mut failing = false;
        loop {
            let slot = tokio::select! {
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => return,
                },
                () = sender.closed() => return,
            };
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = sender.closed() => return,
            };
            match accepted {
                Ok((stream, _)) => {
                    if failing {
                        tracing::warn!("accepting connections again");
                        failing = false;
                    }
                    let connection = Connection {
                        stream,
                        greeting: Some(Box::pin(tokio::time::sleep(GREETING_TIMEOUT))),
                        _slot: slot,
                    };
                    if sender.send(Ok(connection)).await.is_err() {
                        return;
                    }
                }
                // The client gave up before we accepted: nothing to wait for.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    if !failing {
                        tracing::warn!(
                            "cannot accept connections ({e}); retrying every {} ms",
                            ACCEPT_BACKOFF.as_millis()
                        );
                        failing = true;
                    }
                    drop(slot);
                    tokio::select! {
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                        () = sender.closed() => return,
                    }
                }
            }
        }
    });
    ReceiverStream::new(receiver)
}

/// An accepted connection: holds its slot until it is closed, and fails its first read if the
/// client sends nothing in time.
pub struct Connection {
    stream: UnixStream,
    greeting: Option<Pin<Box<Sleep>>>,
    _slot: OwnedSemaphorePermit,
}

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.greeting = None;
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let silent_too_long = self
                    .greeting
                    .as_mut()
                    .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
                if !silent_too_long {
                    return Poll::Pending;
                }
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client sent nothing in {} s",
                        GREETING_TIMEOUT.as_secs()
                    ),
                )))
            }
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
