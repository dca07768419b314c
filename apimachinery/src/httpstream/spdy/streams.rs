//! The streams port-forward and remotecommand (exec, attach) open over a SPDY session, and
//! how the kubelet groups them.
//!
//! Mirrors the kubelet's `pkg/kubelet/cri/streaming/portforward/httpstream.go` (error + data
//! stream per forwarded connection, paired by `requestid`) and
//! `pkg/kubelet/cri/streaming/remotecommand/httpstream.go` (one stream per `streamtype`), with
//! the header names of `k8s.io/api/core/v1` (`StreamType`, `PortHeader`, `PortForwardRequestIDHeader`).

use std::collections::HashMap;

use super::session::Stream;

/// Header naming a stream's role.
pub const STREAM_TYPE_HEADER: &str = "streamtype";
/// Port-forward: the pod port of a stream pair.
pub const PORT_HEADER: &str = "port";
/// Port-forward: the id pairing a connection's error and data streams.
pub const REQUEST_ID_HEADER: &str = "requestid";

/// Stream type: the error stream (port-forward and remotecommand).
pub const STREAM_TYPE_ERROR: &str = "error";
/// Stream type: port-forward's data stream.
pub const STREAM_TYPE_DATA: &str = "data";
/// Stream type: standard input.
pub const STREAM_TYPE_STDIN: &str = "stdin";
/// Stream type: standard output.
pub const STREAM_TYPE_STDOUT: &str = "stdout";
/// Stream type: standard error.
pub const STREAM_TYPE_STDERR: &str = "stderr";
/// Stream type: terminal resizes (a stream of JSON objects `{"Width":..,"Height":..}`).
pub const STREAM_TYPE_RESIZE: &str = "resize";

/// Port-forward's SPDY protocol (`portforward.k8s.io`, in `X-Stream-Protocol-Version`).
pub const PORT_FORWARD_PROTOCOL_V1: &str = "portforward.k8s.io";
/// kubectl 1.33's WebSocket-tunnelled port-forward subprotocol.
pub const TUNNELED_PORT_FORWARD_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// remotecommand's SPDY protocols the kubelet serves, newest first.
pub const REMOTECOMMAND_PROTOCOLS: [&str; 4] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// One forwarded connection: its error and data streams.
#[derive(Debug)]
pub struct PortForwardPair {
    /// The pod port.
    pub port: u16,
    /// The pairing id.
    pub request_id: String,
    /// Where the kubelet writes a failure's message.
    pub error: Stream,
    /// The connection's bytes, both ways.
    pub data: Stream,
}

/// Why a port-forward stream was refused (the kubelet resets it and logs this).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PortForwardStreamError {
    /// No or an unknown `streamtype`.
    #[error("invalid stream type {0:?}")]
    StreamType(String),
    /// No or an invalid `port` header.
    #[error("invalid port header {0:?}")]
    Port(String),
    /// A second stream of a type already received for the request.
    #[error("received duplicate {0} stream for request {1}")]
    Duplicate(&'static str, String),
}

/// Pairs error and data streams into forwarded connections, as the kubelet's
/// `httpStreamHandler` does: by `requestid`, or, for clients that send none, by stream id (a
/// data stream's pair is the error stream created just before it, id − 2).
#[derive(Debug, Default)]
pub struct PortForwardPairer {
    pending: HashMap<String, (Option<Stream>, Option<Stream>)>,
}

impl PortForwardPairer {
    /// Takes one stream; returns a complete pair once both halves have arrived.
    pub fn add(
        &mut self,
        stream: Stream,
    ) -> Result<Option<PortForwardPair>, PortForwardStreamError> {
        let kind = stream
            .header(STREAM_TYPE_HEADER)
            .unwrap_or_default()
            .to_string();
        let is_error = match kind.as_str() {
            STREAM_TYPE_ERROR => true,
            STREAM_TYPE_DATA => false,
            _ => return Err(PortForwardStreamError::StreamType(kind)),
        };
        let port_text = stream.header(PORT_HEADER).unwrap_or_default().to_string();
        port_text
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| PortForwardStreamError::Port(port_text.clone()))?;
        let request_id = match stream.header(REQUEST_ID_HEADER) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ if is_error => stream.id.to_string(),
            _ => stream.id.saturating_sub(2).to_string(),
        };
        let entry = self.pending.entry(request_id.clone()).or_default();
        let slot = if is_error { &mut entry.0 } else { &mut entry.1 };
        if slot.is_some() {
            let which = if is_error {
                STREAM_TYPE_ERROR
            } else {
                STREAM_TYPE_DATA
            };
            return Err(PortForwardStreamError::Duplicate(which, request_id));
        }
        *slot = Some(stream);
        if entry.0.is_none() || entry.1.is_none() {
            return Ok(None);
        }
        let Some((Some(error), Some(data))) = self.pending.remove(&request_id) else {
            return Ok(None);
        };
        let port = data
            .header(PORT_HEADER)
            .and_then(|p| p.parse().ok())
            .unwrap_or_default();
        Ok(Some(PortForwardPair {
            port,
            request_id,
            error,
            data,
        }))
    }

    /// Requests still waiting for their other half.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// The message the kubelet writes on a pair's error stream when forwarding fails
/// (`httpStreamHandler.portForward`).
pub fn port_forward_error_message(port: u16, pod: &str, uid: &str, err: &str) -> String {
    format!("error forwarding port {port} to pod {pod}, uid {uid}: {err}")
}

/// The streams of one exec or attach over SPDY, gathered by `streamtype`.
#[derive(Debug, Default)]
pub struct RemoteCommandStreams {
    /// Status stream.
    pub error: Option<Stream>,
    /// Standard input.
    pub stdin: Option<Stream>,
    /// Standard output.
    pub stdout: Option<Stream>,
    /// Standard error.
    pub stderr: Option<Stream>,
    /// Terminal resizes.
    pub resize: Option<Stream>,
}

/// What the request asked for (its `stdin`, `stdout`, `stderr`, `tty` query parameters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expected {
    /// `stdin=true`.
    pub stdin: bool,
    /// `stdout=true`.
    pub stdout: bool,
    /// `stderr=true` (never with a tty).
    pub stderr: bool,
    /// `tty=true`: a resize stream comes too (protocols v3 and later).
    pub tty: bool,
}

impl RemoteCommandStreams {
    /// Files one stream by its `streamtype`; `Err` returns a stream of an unknown type.
    pub fn add(&mut self, stream: Stream) -> Result<(), Box<Stream>> {
        let slot = match stream.header(STREAM_TYPE_HEADER) {
            Some(STREAM_TYPE_ERROR) => &mut self.error,
            Some(STREAM_TYPE_STDIN) => &mut self.stdin,
            Some(STREAM_TYPE_STDOUT) => &mut self.stdout,
            Some(STREAM_TYPE_STDERR) => &mut self.stderr,
            Some(STREAM_TYPE_RESIZE) => &mut self.resize,
            _ => return Err(Box::new(stream)),
        };
        *slot = Some(stream);
        Ok(())
    }

    /// Whether every stream the request expects has arrived (`waitStreamReply`'s count: the
    /// error stream always, resize with a tty under v3+).
    pub fn complete(&self, expected: Expected, protocol: &str) -> bool {
        let resize_expected =
            expected.tty && protocol != "channel.k8s.io" && protocol != "v2.channel.k8s.io";
        self.error.is_some()
            && (!expected.stdin || self.stdin.is_some())
            && (!expected.stdout || self.stdout.is_some())
            && (!expected.stderr || expected.tty || self.stderr.is_some())
            && (!resize_expected || self.resize.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame::{FLAG_FIN, Frame, HeaderCompressor, HeaderDecompressor};
    use super::super::session::Session;
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn syn(id: u32, pairs: &[(&str, &str)]) -> Frame {
        Frame::SynStream {
            flags: 0,
            stream_id: id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            headers: pairs
                .iter()
                .map(|(n, v)| (n.to_string(), vec![v.to_string()]))
                .collect(),
        }
    }

    #[tokio::test]
    async fn port_forward_session_exchanges_bytes() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut session = Session::serve(server).unwrap();
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let mut cz = HeaderCompressor::new().unwrap();
        let mut cd = HeaderDecompressor::default();
        let mut send = Vec::new();
        for f in [
            syn(
                1,
                &[
                    ("streamtype", "error"),
                    ("port", "8080"),
                    ("requestid", "0"),
                ],
            ),
            syn(
                3,
                &[("streamtype", "data"), ("port", "8080"), ("requestid", "0")],
            ),
            Frame::Data {
                stream_id: 3,
                flags: 0,
                data: b"GET / HTTP/1.0\r\n\r\n".to_vec(),
            },
            Frame::Ping { id: 1 },
            Frame::Data {
                stream_id: 3,
                flags: FLAG_FIN,
                data: vec![],
            },
        ] {
            send.extend(f.encode(&mut cz).unwrap());
        }
        client_write.write_all(&send).await.unwrap();

        let mut pairer = PortForwardPairer::default();
        assert!(
            pairer
                .add(session.accept().await.unwrap())
                .unwrap()
                .is_none()
        );
        assert_eq!(pairer.pending(), 1);
        let mut pair = pairer
            .add(session.accept().await.unwrap())
            .unwrap()
            .unwrap();
        assert_eq!((pair.port, pair.request_id.as_str()), (8080, "0"));
        assert_eq!(
            pair.data.data.recv().await.unwrap(),
            b"GET / HTTP/1.0\r\n\r\n"
        );
        // The client's FIN ends the data.
        assert!(pair.data.data.recv().await.is_none());
        pair.data
            .writer
            .write(b"HTTP/1.0 200 OK\r\n")
            .await
            .unwrap();
        pair.data.writer.close().await.unwrap();
        pair.error.writer.close().await.unwrap();

        // What the client sees: both replies, the ping echo, the data and the FINs.
        let mut seen = Vec::new();
        while seen.len() < 6 {
            seen.push(
                Frame::read(&mut client_read, &mut cd)
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        assert_eq!(
            seen[0],
            Frame::SynReply {
                flags: 0,
                stream_id: 1,
                headers: vec![]
            }
        );
        assert_eq!(
            seen[1],
            Frame::SynReply {
                flags: 0,
                stream_id: 3,
                headers: vec![]
            }
        );
        assert_eq!(seen[2], Frame::Ping { id: 1 });
        assert_eq!(
            seen[3],
            Frame::Data {
                stream_id: 3,
                flags: 0,
                data: b"HTTP/1.0 200 OK\r\n".to_vec()
            }
        );
        assert_eq!(
            seen[4],
            Frame::Data {
                stream_id: 3,
                flags: FLAG_FIN,
                data: vec![]
            }
        );
        assert_eq!(
            seen[5],
            Frame::Data {
                stream_id: 1,
                flags: FLAG_FIN,
                data: vec![]
            }
        );

        // A stream id going backwards is refused with PROTOCOL_ERROR.
        client_write
            .write_all(&syn(1, &[("streamtype", "error")]).encode(&mut cz).unwrap())
            .await
            .unwrap();
        assert_eq!(
            Frame::read(&mut client_read, &mut cd)
                .await
                .unwrap()
                .unwrap(),
            Frame::RstStream {
                stream_id: 1,
                status: 1
            }
        );
        // Closing the connection ends the session.
        drop(client_write);
        drop(client_read);
        assert!(session.accept().await.is_none());
    }

    #[tokio::test]
    async fn pairing_without_request_ids_and_remotecommand_streams() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let mut session = Session::serve(server).unwrap();
        let (_r, mut w) = tokio::io::split(client);
        let mut cz = HeaderCompressor::new().unwrap();
        let mut send = Vec::new();
        for f in [
            syn(1, &[("streamtype", "error"), ("port", "80")]),
            syn(3, &[("streamtype", "data"), ("port", "80")]),
            syn(5, &[("streamtype", "bogus"), ("port", "80")]),
            syn(7, &[("streamtype", "error")]),
            syn(9, &[("streamtype", "stdout")]),
            syn(11, &[("streamtype", "resize")]),
        ] {
            send.extend(f.encode(&mut cz).unwrap());
        }
        w.write_all(&send).await.unwrap();
        let mut pairer = PortForwardPairer::default();
        assert!(
            pairer
                .add(session.accept().await.unwrap())
                .unwrap()
                .is_none()
        );
        let pair = pairer
            .add(session.accept().await.unwrap())
            .unwrap()
            .unwrap();
        assert_eq!((pair.port, pair.request_id.as_str()), (80, "1"));
        assert_eq!(
            pairer.add(session.accept().await.unwrap()).unwrap_err(),
            PortForwardStreamError::StreamType("bogus".into())
        );
        let mut rc = RemoteCommandStreams::default();
        let expected = Expected {
            stdin: false,
            stdout: true,
            stderr: true,
            tty: true,
        };
        rc.add(session.accept().await.unwrap()).unwrap();
        rc.add(session.accept().await.unwrap()).unwrap();
        assert!(!rc.complete(expected, "v4.channel.k8s.io"));
        rc.add(session.accept().await.unwrap()).unwrap();
        assert!(rc.complete(expected, "v4.channel.k8s.io"));
        assert_eq!(
            port_forward_error_message(80, "web", "u1", "connection refused"),
            "error forwarding port 80 to pod web, uid u1: connection refused"
        );
    }
}
