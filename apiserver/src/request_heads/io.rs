//! The socket under hyper, read through the [`Follower`]; the shutdown that answers a refused
//! head with Go's 431 (`net/http/server.go`: `(*conn).serve`, `closeWriteAndWait`).

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::{Follower, Shared, TOO_LARGE_RESPONSE};

/// How long the connection of a refused head keeps reading (and dropping) what the client
/// still sends after the 431, so that closing it does not reset the answer away (Go's
/// `rstAvoidanceDelay`).
const REFUSAL_DRAIN: Duration = Duration::from_millis(500);

/// Bytes read from the socket at a time (into a buffer on the stack: an idle connection
/// keeps none).
const READ_CHUNK: usize = 16 * 1024;

/// Capacity of the buffer for hyper kept between reads; a larger one (a long head) is freed.
const KEEP_CAPACITY: usize = 16 * 1024;

/// Where the 431 of a refused head is.
enum Refusal {
    /// Writing Go's bytes: how many have gone.
    Writing(usize),
    /// Reading what the client still sends until it closes or the drain time is over.
    Draining(Pin<Box<Sleep>>),
    Done,
}

/// A connection's socket as hyper reads it: through a [`Follower`]. A head over
/// [`super::MAX_HEAD_BYTES`] ends hyper's stream once the requests before it are answered; hyper then
/// shuts the connection down, and the shutdown sends Go's 431 first.
pub struct Following<T> {
    io: T,
    follower: Follower,
    shared: Arc<Shared>,
    out: Vec<u8>,
    out_pos: usize,
    eof: bool,
    refusal: Refusal,
}

impl<T> Following<T> {
    /// Follows the requests read from `io`.
    pub fn new(io: T, shared: Arc<Shared>) -> Following<T> {
        Following {
            io,
            follower: Follower::new(),
            shared,
            out: Vec::new(),
            out_pos: 0,
            eof: false,
            refusal: Refusal::Writing(0),
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Following<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = (this.out.len() - this.out_pos).min(buf.remaining());
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out_pos = 0;
                    if this.out.capacity() > KEEP_CAPACITY {
                        this.out = Vec::new();
                    } else {
                        this.out.clear();
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if this.follower.too_large() {
                // The stream ends for hyper once everything before the head is answered (an
                // end while a response is under way would cut it).
                this.shared.register_reader(cx.waker());
                return if this.shared.settled() {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                };
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.shared.backlogged() {
                this.shared.register_reader(cx.waker());
                if this.shared.backlogged() {
                    return Poll::Pending;
                }
            }
            let mut chunk = [0u8; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // A head cut short is dropped: Go does not answer it either.
                this.eof = true;
                continue;
            }
            this.follower
                .feed(read.filled(), &mut this.out, &this.shared);
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Following<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.follower.too_large() {
            return Pin::new(&mut this.io).poll_shutdown(cx);
        }
        loop {
            match &mut this.refusal {
                Refusal::Writing(sent) => {
                    while *sent < TOO_LARGE_RESPONSE.len() {
                        let n = ready!(
                            Pin::new(&mut this.io).poll_write(cx, &TOO_LARGE_RESPONSE[*sent..])
                        )?;
                        if n == 0 {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                        }
                        *sent += n;
                    }
                    ready!(Pin::new(&mut this.io).poll_flush(cx))?;
                    ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    this.refusal = Refusal::Draining(Box::pin(tokio::time::sleep(REFUSAL_DRAIN)));
                }
                Refusal::Draining(timer) => {
                    if timer.as_mut().poll(cx).is_ready() {
                        this.refusal = Refusal::Done;
                        continue;
                    }
                    let mut chunk = [0u8; READ_CHUNK];
                    let mut read = ReadBuf::new(&mut chunk);
                    match ready!(Pin::new(&mut this.io).poll_read(cx, &mut read)) {
                        Ok(()) if !read.filled().is_empty() => {}
                        _ => this.refusal = Refusal::Done,
                    }
                }
                Refusal::Done => return Poll::Ready(Ok(())),
            }
        }
    }
}
