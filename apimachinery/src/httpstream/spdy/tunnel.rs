//! SPDY inside WebSocket binary messages: a stream of messages seen as one byte stream, so
//! the same SPDY session runs over it.
//!
//! Mirrors client-go's `tools/portforward/tunneling_connection.go` (kubectl 1.31+ tunnels
//! port-forward's SPDY through a WebSocket with subprotocol `SPDY/3.1+portforward.k8s.io`:
//! every binary message carries the next bytes of the SPDY connection, with no channel byte)
//! and the API server's `util/proxy` tunneling handler on the other end.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Adapts a message stream/sink (binary messages as `Vec<u8>`) to `AsyncRead + AsyncWrite`.
/// Each write becomes one message; reads drain messages in order. The end of the message
/// stream is the end of the byte stream.
pub struct MessageStream<S> {
    inner: S,
    pending: Vec<u8>,
    offset: usize,
}

impl<S> MessageStream<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            offset: 0,
        }
    }

    /// The wrapped stream.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, E> AsyncRead for MessageStream<S>
where
    S: Stream<Item = Result<Vec<u8>, E>> + Unpin,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.offset >= this.pending.len() {
            match ready!(Pin::new(&mut this.inner).poll_next(cx)) {
                Some(Ok(message)) => {
                    this.pending = message;
                    this.offset = 0;
                }
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = buf.remaining().min(this.pending.len() - this.offset);
        buf.put_slice(&this.pending[this.offset..this.offset + n]);
        this.offset += n;
        Poll::Ready(Ok(()))
    }
}

impl<S> AsyncWrite for MessageStream<S>
where
    S: Sink<Vec<u8>> + Unpin,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let inner = &mut self.inner;
        ready!(Pin::new(&mut *inner).poll_ready(cx)).map_err(io::Error::other)?;
        Pin::new(&mut *inner)
            .start_send(buf.to_vec())
            .map_err(io::Error::other)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner)
            .poll_flush(cx)
            .map_err(io::Error::other)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner)
            .poll_close(cx)
            .map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A message stream from one half and a message sink from another.
    struct Both<R, W>(R, W);
    impl<R: Stream + Unpin, W: Unpin> Stream for Both<R, W> {
        type Item = R::Item;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<R::Item>> {
            Pin::new(&mut self.0).poll_next(cx)
        }
    }
    impl<R: Unpin, W: Sink<Vec<u8>> + Unpin> Sink<Vec<u8>> for Both<R, W> {
        type Error = W::Error;
        fn poll_ready(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<(), W::Error>> {
            Pin::new(&mut self.1).poll_ready(cx)
        }
        fn start_send(mut self: Pin<&mut Self>, item: Vec<u8>) -> Result<(), W::Error> {
            Pin::new(&mut self.1).start_send(item)
        }
        fn poll_flush(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<(), W::Error>> {
            Pin::new(&mut self.1).poll_flush(cx)
        }
        fn poll_close(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<(), W::Error>> {
            Pin::new(&mut self.1).poll_close(cx)
        }
    }

    #[tokio::test]
    async fn messages_become_bytes_and_back() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<Vec<u8>>();
        let incoming = futures::stream::iter(vec![
            Ok::<_, io::Error>(b"hel".to_vec()),
            Ok(vec![]),
            Ok(b"lo".to_vec()),
        ]);
        let mut io = MessageStream::new(Both(incoming, tx));
        let mut text = String::new();
        io.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "hello");
        io.write_all(b"abc").await.unwrap();
        io.write_all(b"de").await.unwrap();
        io.shutdown().await.unwrap();
        let sent: Vec<Vec<u8>> = rx.collect().await;
        assert_eq!(sent, vec![b"abc".to_vec(), b"de".to_vec()]);
    }

    #[tokio::test]
    async fn spdy_session_runs_over_messages() {
        use crate::httpstream::spdy::frame::{Frame, HeaderCompressor, HeaderDecompressor};
        use crate::httpstream::spdy::session::Session;
        let (client_tx, server_rx) = futures::channel::mpsc::unbounded::<Vec<u8>>();
        let (server_tx, mut client_rx) = futures::channel::mpsc::unbounded::<Vec<u8>>();
        let io = MessageStream::new(Both(server_rx.map(Ok::<_, io::Error>), server_tx));
        let mut session = Session::serve(io).unwrap();
        let mut cz = HeaderCompressor::new().unwrap();
        let syn = Frame::SynStream {
            flags: 0,
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            headers: vec![("streamtype".into(), vec!["data".into()])],
        }
        .encode(&mut cz)
        .unwrap();
        // A frame split across two messages still reads as one.
        client_tx.unbounded_send(syn[..5].to_vec()).unwrap();
        client_tx.unbounded_send(syn[5..].to_vec()).unwrap();
        let data = Frame::Data {
            stream_id: 1,
            flags: 0,
            data: b"tunnelled".to_vec(),
        };
        client_tx
            .unbounded_send(data.encode(&mut cz).unwrap())
            .unwrap();
        let mut stream = session.accept().await.unwrap();
        assert_eq!(stream.header("streamtype"), Some("data"));
        assert_eq!(stream.data.recv().await.unwrap(), b"tunnelled");
        stream.writer.write(b"back").await.unwrap();
        // The server's frames arrive as messages; read them back as one byte stream.
        let mut bytes = Vec::new();
        while !bytes.ends_with(b"back") {
            bytes.extend(client_rx.next().await.unwrap());
        }
        let mut d = HeaderDecompressor::default();
        let mut r = bytes.as_slice();
        assert!(matches!(
            Frame::read(&mut r, &mut d).await.unwrap(),
            Some(Frame::SynReply { stream_id: 1, .. })
        ));
        assert_eq!(
            Frame::read(&mut r, &mut d).await.unwrap(),
            Some(Frame::Data {
                stream_id: 1,
                flags: 0,
                data: b"back".to_vec()
            })
        );
    }
}
