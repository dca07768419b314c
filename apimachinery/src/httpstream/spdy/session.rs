//! A server-side SPDY/3.1 session: accepts the streams a client creates, replies to each with
//! SYN_REPLY, delivers their data and FIN, and lets the server write back.
//!
//! Mirrors moby/spdystream's `connection.go` as Kubernetes' `httpstream/spdy/connection.go`
//! runs it on the server (`NewServerConnection`): pings from the peer are echoed, GOAWAY stops
//! new streams, WINDOW_UPDATE and SETTINGS are read and ignored (spdystream does no flow
//! control), and the end of the connection ends every stream.

use std::collections::HashMap;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::frame::{FLAG_FIN, Frame, FrameError, HeaderCompressor, HeaderDecompressor, Headers};

/// RST_STREAM status PROTOCOL_ERROR.
pub const RST_PROTOCOL_ERROR: u32 = 1;
/// RST_STREAM status REFUSED_STREAM.
pub const RST_REFUSED_STREAM: u32 = 3;
/// RST_STREAM status CANCEL.
pub const RST_CANCEL: u32 = 5;
/// Largest data frame the session writes; longer writes are split.
pub const MAX_DATA_FRAME: usize = 32 * 1024;

/// The session has ended: nothing more can be written.
#[derive(Debug, thiserror::Error)]
#[error("spdy session closed")]
pub struct SessionClosed;

/// One stream the client created.
#[derive(Debug)]
pub struct Stream {
    /// Its id (odd: client-created).
    pub id: u32,
    /// The SYN_STREAM's headers.
    pub headers: Headers,
    /// The client's data; ends (returns `None`) at the client's FIN or RST, or the
    /// connection's end.
    pub data: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Writes to the client.
    pub writer: StreamWriter,
}

impl Stream {
    /// Value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        super::frame::header(&self.headers, name)
    }
}

/// The server's half of a stream.
#[derive(Debug, Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Frame>,
}

impl StreamWriter {
    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Writes `data` (in frames of at most [`MAX_DATA_FRAME`] bytes).
    pub async fn write(&self, data: &[u8]) -> Result<(), SessionClosed> {
        for chunk in data.chunks(MAX_DATA_FRAME) {
            self.send(Frame::Data {
                stream_id: self.id,
                flags: 0,
                data: chunk.to_vec(),
            })
            .await?;
        }
        Ok(())
    }

    /// Ends the server's half with an empty FIN data frame (spdystream's `Stream.Close`).
    pub async fn close(&self) -> Result<(), SessionClosed> {
        self.send(Frame::Data {
            stream_id: self.id,
            flags: FLAG_FIN,
            data: Vec::new(),
        })
        .await
    }

    /// Aborts the stream (`Stream.Reset`: RST_STREAM CANCEL).
    pub async fn reset(&self) -> Result<(), SessionClosed> {
        self.send(Frame::RstStream {
            stream_id: self.id,
            status: RST_CANCEL,
        })
        .await
    }

    async fn send(&self, frame: Frame) -> Result<(), SessionClosed> {
        self.out.send(frame).await.map_err(|_| SessionClosed)
    }
}

/// A running server session.
pub struct Session {
    incoming: mpsc::Receiver<Stream>,
    out: mpsc::Sender<Frame>,
    last_accepted: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl Session {
    /// Runs a session over `io` (reader and writer tasks on the current tokio runtime).
    pub fn serve<IO>(io: IO) -> Result<Self, FrameError>
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(io);
        let (out_tx, out_rx) = mpsc::channel::<Frame>(64);
        let (in_tx, in_rx) = mpsc::channel::<Stream>(16);
        let compressor = HeaderCompressor::new()?;
        let last_accepted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        tokio::spawn(write_loop(write, out_rx, compressor));
        tokio::spawn(read_loop(
            read,
            out_tx.clone(),
            in_tx,
            last_accepted.clone(),
        ));
        Ok(Self {
            incoming: in_rx,
            out: out_tx,
            last_accepted,
        })
    }

    /// The next stream the client creates; `None` once the connection has ended or gone away.
    pub async fn accept(&mut self) -> Option<Stream> {
        self.incoming.recv().await
    }

    /// Sends GOAWAY (status OK) naming the last stream accepted, as spdystream's `Close`.
    pub async fn go_away(&self) -> Result<(), SessionClosed> {
        let last = self
            .last_accepted
            .load(std::sync::atomic::Ordering::Relaxed);
        self.out
            .send(Frame::GoAway {
                last_good_stream_id: last,
                status: 0,
            })
            .await
            .map_err(|_| SessionClosed)
    }

    /// Sends a PING with an even id (a server's ids are even); the client echoes it.
    pub async fn ping(&self, id: u32) -> Result<(), SessionClosed> {
        self.out
            .send(Frame::Ping { id: id & !1 })
            .await
            .map_err(|_| SessionClosed)
    }
}

async fn write_loop<W: AsyncWrite>(
    write: W,
    mut out: mpsc::Receiver<Frame>,
    mut z: HeaderCompressor,
) {
    let mut write = std::pin::pin!(write);
    while let Some(frame) = out.recv().await {
        let bytes = match frame.encode(&mut z) {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %e, "spdy: frame not encoded");
                continue;
            }
        };
        if write.write_all(&bytes).await.is_err() || write.flush().await.is_err() {
            break;
        }
    }
    let _ = write.shutdown().await;
}

async fn read_loop<R: AsyncRead>(
    read: R,
    out: mpsc::Sender<Frame>,
    incoming: mpsc::Sender<Stream>,
    last_accepted: std::sync::Arc<std::sync::atomic::AtomicU32>,
) {
    let mut read = std::pin::pin!(read);
    let mut z = HeaderDecompressor::default();
    let mut streams: HashMap<u32, mpsc::UnboundedSender<Vec<u8>>> = HashMap::new();
    let mut next_allowed_id = 1u32;
    let mut gone_away = false;
    loop {
        let frame = match Frame::read(&mut read, &mut z).await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "spdy: connection read failed");
                break;
            }
        };
        match frame {
            Frame::SynStream {
                flags,
                stream_id,
                headers,
                ..
            } => {
                if gone_away || stream_id < next_allowed_id || stream_id % 2 == 0 {
                    let _ = out
                        .send(Frame::RstStream {
                            stream_id,
                            status: RST_PROTOCOL_ERROR,
                        })
                        .await;
                    continue;
                }
                next_allowed_id = stream_id.saturating_add(2);
                let (tx, rx) = mpsc::unbounded_channel();
                if flags & FLAG_FIN == 0 {
                    streams.insert(stream_id, tx);
                }
                if out
                    .send(Frame::SynReply {
                        flags: 0,
                        stream_id,
                        headers: Vec::new(),
                    })
                    .await
                    .is_err()
                {
                    break;
                }
                let stream = Stream {
                    id: stream_id,
                    headers,
                    data: rx,
                    writer: StreamWriter {
                        id: stream_id,
                        out: out.clone(),
                    },
                };
                last_accepted.store(stream_id, std::sync::atomic::Ordering::Relaxed);
                if incoming.send(stream).await.is_err() {
                    streams.remove(&stream_id);
                    let _ = out
                        .send(Frame::RstStream {
                            stream_id,
                            status: RST_REFUSED_STREAM,
                        })
                        .await;
                }
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if let Some(tx) = streams.get(&stream_id) {
                    if !data.is_empty() {
                        let _ = tx.send(data);
                    }
                    if flags & FLAG_FIN != 0 {
                        streams.remove(&stream_id);
                    }
                }
            }
            Frame::Headers {
                flags, stream_id, ..
            } => {
                if flags & FLAG_FIN != 0 {
                    streams.remove(&stream_id);
                }
            }
            Frame::RstStream { stream_id, .. } => {
                streams.remove(&stream_id);
            }
            Frame::Ping { id } => {
                // Odd ids are the client's: echo them; even ones answer our own pings.
                if id % 2 == 1 && out.send(Frame::Ping { id }).await.is_err() {
                    break;
                }
            }
            Frame::GoAway { .. } => gone_away = true,
            Frame::SynReply { .. } | Frame::Settings { .. } | Frame::WindowUpdate { .. } => {}
        }
    }
    // Dropping the senders ends every stream's data.
    streams.clear();
}
