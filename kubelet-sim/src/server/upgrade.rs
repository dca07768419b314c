//! The protocol switch of exec, attach and port-forward: telling a WebSocket request from a
//! SPDY/3.1 one, negotiating the subprotocol, answering `101 Switching Protocols`, and handing
//! the upgraded connection to a session task that ends with its client or the server.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/httpstream` (`Handshake`, `IsUpgradeRequest`),
//! `httpstream/spdy/upgrade.go` (`UpgradeResponse`), `httpstream/wsstream/conn.go`
//! (`IsWebSocketRequest`, the subprotocol choice and its 403), and the API server's
//! `util/proxy` tunnelling handler on the kubelet (SPDY inside WebSocket messages).
//!
//! A SPDY session runs over an in-memory pipe whose other end this module copies to the real
//! connection, so that closing the copy ends the session's own reader and writer tasks at
//! once, whatever the client does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use apimachinery::httpstream::negotiate_protocol;
use apimachinery::httpstream::spdy::tunnel::MessageStream;
use apimachinery::httpstream::spdy::{STREAM_PROTOCOL_HEADER, Session, UPGRADE_PROTOCOL};
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Sink, Stream};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{KubeletServer, Refusal, StreamGuard, http_error};

/// The size of the in-memory pipe between a SPDY session and its connection.
const PIPE_BYTES: usize = 256 * 1024;

/// How long a finished SPDY session waits for the client to close the connection (it does
/// once it has read the last frames) before closing it.
pub const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The values of a header that may repeat and hold comma-separated lists
/// (`commaSeparatedHeaderValues`), in order.
pub fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn connection_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("upgrade"))
}

fn upgrade_is(headers: &HeaderMap, protocol: &str) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.to_ascii_lowercase()
                .contains(&protocol.to_ascii_lowercase())
        })
}

/// `wsstream.IsWebSocketRequest`: `Connection: Upgrade` and `Upgrade: websocket`.
pub fn is_websocket(headers: &HeaderMap) -> bool {
    connection_upgrade(headers) && upgrade_is(headers, "websocket")
}

/// `Connection: Upgrade` and `Upgrade: SPDY/3.1`.
pub fn is_spdy(headers: &HeaderMap) -> bool {
    connection_upgrade(headers) && upgrade_is(headers, UPGRADE_PROTOCOL)
}

/// `httpstream.IsUpgradeRequest`: any `Connection: Upgrade`.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    connection_upgrade(headers)
}

/// The answer to an exec, attach or port-forward request that is no upgrade: the kubelet's
/// upgrade-aware proxy refuses it (`Upgrade request required`, written by its responder as a
/// 500).
pub fn upgrade_required() -> Response {
    http_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Upgrade request required",
    )
}

/// The WebSocket subprotocol both sides speak, in the client's order (`""` when the client
/// offered none); `Err` is the 403 the kubelet answers when none is shared.
pub fn websocket_protocol(headers: &HeaderMap, supported: &[&str]) -> Result<String, Refusal> {
    let offered = header_values(headers, "sec-websocket-protocol");
    let offered: Vec<&str> = offered.iter().map(String::as_str).collect();
    negotiate_protocol(&offered, supported)
        .map(str::to_owned)
        .ok_or_else(|| Box::new(StatusCode::FORBIDDEN.into_response()))
}

/// Accepts the WebSocket of `request` with subprotocol `protocol` (none for `""`) and runs
/// `session` on it as a tracked task, counted open until it ends; the task ends at the
/// latest when the server shuts down.
pub async fn accept_websocket<F, Fut>(
    server: &KubeletServer,
    request: Request,
    protocol: &str,
    session: F,
) -> Response
where
    F: FnOnce(WebSocket, StreamGuard) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (mut parts, _body) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, server).await {
        Ok(u) => u,
        Err(rejection) => return rejection.into_response(),
    };
    let upgrade = if protocol.is_empty() {
        upgrade
    } else {
        upgrade.protocols([protocol.to_owned()])
    };
    let streams = server.streams().clone();
    let guard = streams.guard();
    let token = streams.tracker().token();
    upgrade.on_upgrade(move |socket| async move {
        let _token = token;
        tokio::select! {
            () = session(socket, guard) => {}
            () = streams.shutdown().cancelled() => {}
        }
    })
}

/// `httpstream.Handshake` for SPDY: the protocol chosen from `X-Stream-Protocol-Version` in
/// the client's order, or the kubelet's error answer.
pub fn spdy_protocol(headers: &HeaderMap, supported: &[&str]) -> Result<String, Refusal> {
    if !is_spdy(headers) {
        let shown: Vec<String> = headers
            .iter()
            .map(|(k, v)| format!("{k:?}: {:?}", v.to_str().unwrap_or_default()))
            .collect();
        return Err(Box::new(http_error(
            StatusCode::BAD_REQUEST,
            &format!(
                "unable to upgrade: missing upgrade headers in request: http.Header{{{}}}",
                shown.join(", ")
            ),
        )));
    }
    let offered = header_values(headers, STREAM_PROTOCOL_HEADER);
    if offered.is_empty() {
        return Err(Box::new(http_error(
            StatusCode::BAD_REQUEST,
            &format!("unable to upgrade: {STREAM_PROTOCOL_HEADER} is required"),
        )));
    }
    let refs: Vec<&str> = offered.iter().map(String::as_str).collect();
    match negotiate_protocol(&refs, supported) {
        Some(p) => Ok(p.to_owned()),
        None => {
            let mut response = http_error(
                StatusCode::FORBIDDEN,
                &format!(
                    "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]",
                    offered.join(" "),
                    supported.join(" ")
                ),
            );
            for p in supported {
                if let Ok(v) = HeaderValue::from_str(p) {
                    response
                        .headers_mut()
                        .append("x-accepted-stream-protocol-versions", v);
                }
            }
            Err(Box::new(response))
        }
    }
}

/// Answers `101 Switching Protocols` to SPDY/3.1 with `protocol`, and runs `session` on a
/// SPDY server session over the upgraded connection as a tracked task, counted open until
/// it ends.
pub fn accept_spdy<F, Fut>(
    server: &KubeletServer,
    mut request: Request,
    protocol: &str,
    session: F,
) -> Response
where
    F: FnOnce(Session, StreamGuard) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let on_upgrade = hyper::upgrade::on(&mut request);
    let streams = server.streams().clone();
    let guard = streams.guard();
    streams.tracker().spawn({
        let streams = streams.clone();
        async move {
            let upgraded = tokio::select! {
                upgraded = on_upgrade => upgraded,
                () = streams.shutdown().cancelled() => return,
            };
            match upgraded {
                Ok(io) => run_spdy(TokioIo::new(io), &streams, guard, session).await,
                Err(e) => tracing::debug!(error = %e, "kubelet API: SPDY upgrade failed"),
            }
        }
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static(UPGRADE_PROTOCOL));
    if let Ok(v) = HeaderValue::from_str(protocol) {
        headers.insert(STREAM_PROTOCOL_HEADER, v);
    }
    response
}

/// Runs a SPDY server session over `io` until the client closes, the server shuts down, or
/// `session` has returned and what it wrote has been sent (at most [`FLUSH_TIMEOUT`] later);
/// then closes the connection.
pub async fn run_spdy<IO, F, Fut>(
    mut io: IO,
    streams: &super::Streams,
    guard: StreamGuard,
    session: F,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(Session, StreamGuard) -> Fut,
    Fut: Future<Output = ()>,
{
    let (mut near, far) = tokio::io::duplex(PIPE_BYTES);
    let spdy = match Session::serve(far) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "kubelet API: SPDY session not started");
            return;
        }
    };
    let handler = session(spdy, guard);
    let mut handler = std::pin::pin!(handler);
    let copy = tokio::io::copy_bidirectional(&mut io, &mut near);
    let mut copy = std::pin::pin!(copy);
    let mut flush: Option<Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            () = &mut handler, if flush.is_none() => {
                flush = Some(Box::pin(tokio::time::sleep(FLUSH_TIMEOUT)));
            }
            _ = &mut copy => break,
            () = streams.shutdown().cancelled() => break,
            () = async { if let Some(f) = flush.as_mut() { f.await } else { std::future::pending().await } } => break,
        }
    }
}

/// A WebSocket seen as binary messages (`Vec<u8>`), for SPDY tunnelled inside it: text
/// messages count as their bytes, pings and pongs are skipped, a close ends the stream.
pub struct WebSocketBytes(pub WebSocket);

impl Stream for WebSocketBytes {
    type Item = Result<Vec<u8>, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match Pin::new(&mut self.0).poll_next(cx) {
                Poll::Ready(Some(Ok(Message::Binary(b)))) => {
                    return Poll::Ready(Some(Ok(b.into())));
                }
                Poll::Ready(Some(Ok(Message::Text(t)))) => {
                    return Poll::Ready(Some(Ok(t.as_str().as_bytes().to_vec())));
                }
                Poll::Ready(Some(Ok(Message::Close(_)))) | Poll::Ready(None) => {
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Sink<Vec<u8>> for WebSocketBytes {
    type Error = axum::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.0).poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Vec<u8>) -> Result<(), Self::Error> {
        Pin::new(&mut self.0).start_send(Message::Binary(item.into()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}

/// The byte stream of SPDY tunnelled in `socket`'s binary messages.
pub fn tunnel(socket: WebSocket) -> MessageStream<WebSocketBytes> {
    MessageStream::new(WebSocketBytes(socket))
}
