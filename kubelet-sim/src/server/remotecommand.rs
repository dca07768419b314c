//! The transport of exec and attach: the request's stream options, the WebSocket and SPDY
//! sessions that carry stdin, stdout, stderr, resizes and the final status, and the
//! transport-free [`ProcessIo`] the simulated process sees.
//!
//! Mirrors the kubelet's CRI streaming server, `pkg/kubelet/cri/streaming/remotecommand`
//! (`NewOptions`; `websocket.go` `createWebSocketStreams`, with its empty first message on
//! the lowest writable channel; `httpstream.go` `createHTTPStreamStreams`, which waits up to
//! [`STREAM_CREATION_TIMEOUT`] for the client's streams; the v1 and v4 status writers), and
//! the API server's stream translator that serves `v5.channel.k8s.io` on the kubelet.
//!
//! ```text
//!   client ⇄ WebSocket channels | SPDY streams ⇄ serve_websocket | serve_spdy ⇄ ProcessIo ⇄ process
//!            0 stdin  1 stdout  2 stderr  3 error (status)  4 resize  255 close (v5)
//! ```

use std::time::Duration;

use apimachinery::httpstream::spdy::Session;
use apimachinery::httpstream::spdy::streams::{Expected, RemoteCommandStreams};
use apimachinery::httpstream::status::{
    exit_status_json, exit_status_text_v1, internal_error_json,
};
use apimachinery::httpstream::wsstream::{
    self, ERROR, Framing, RESIZE, STDERR, STDIN, STDOUT, TerminalSize,
};
use axum::extract::Request;
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use axum::http::StatusCode;
use axum::response::Response;
use futures::future::BoxFuture;
use tokio::sync::mpsc;

use super::upgrade::{
    accept_spdy, accept_websocket, is_upgrade, is_websocket, spdy_protocol, upgrade_required,
    websocket_protocol,
};
use super::{KubeletServer, Refusal, query_values, restful_error};

/// How long the kubelet waits for a SPDY client to create its streams
/// (`DefaultStreamCreationTimeout`).
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How many outputs a process may have queued before it waits for the client.
const OUTPUT_QUEUE: usize = 32;

/// The streams a request asks for (`input`, `output`, `error`, `tty` = `1`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// `input=1`.
    pub stdin: bool,
    /// `output=1`.
    pub stdout: bool,
    /// `error=1` (dropped with a tty, as the kubelet drops it).
    pub stderr: bool,
    /// `tty=1`.
    pub tty: bool,
}

impl StreamOptions {
    /// `remotecommand.NewOptions`: the options of a query, or the kubelet's 400.
    pub fn from_query(query: &str) -> Result<Self, Refusal> {
        let flag = |key: &str| {
            query_values(query, key)
                .first()
                .is_some_and(|v| v.as_str() == "1")
        };
        let tty = flag("tty");
        let options = StreamOptions {
            stdin: flag("input"),
            stdout: flag("output"),
            stderr: flag("error") && !tty,
            tty,
        };
        if !options.stdin && !options.stdout && !options.stderr {
            return Err(Box::new(restful_error(
                StatusCode::BAD_REQUEST,
                "you must specify at least 1 of stdin, stdout, stderr",
            )));
        }
        Ok(options)
    }
}

/// Bytes a process writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// To stdout.
    Stdout(Vec<u8>),
    /// To stderr (dropped unless the request asked for it).
    Stderr(Vec<u8>),
}

/// How a process ended: what the kubelet writes on the error channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// A command exited with `code` (`Success` for 0, `NonZeroExitCode` otherwise).
    Code {
        /// The argv, as the runtime names it in the message.
        command: Vec<String>,
        /// The exit code.
        code: i32,
    },
    /// Attach ended: `Success`.
    Success,
    /// The runtime failed: an `InternalError` status.
    Internal(String),
}

impl Exit {
    /// What the error channel carries: the status JSON (v4 and later), or for older
    /// protocols the failure's message alone (nothing on success).
    pub fn status(&self, json: bool) -> Option<Vec<u8>> {
        let text = match (self, json) {
            (Exit::Code { command, code }, true) => exit_status_json(command, *code),
            (Exit::Success, true) => exit_status_json(&[], 0),
            (Exit::Internal(e), true) => internal_error_json(e),
            (Exit::Code { command, code }, false) => exit_status_text_v1(command, *code)?,
            (Exit::Success, false) => return None,
            (Exit::Internal(e), false) => format!("Internal error occurred: {e}"),
        };
        Some(text.into_bytes())
    }
}

/// What a simulated process sees of its client.
#[derive(Debug)]
pub struct ProcessIo {
    /// Standard input; ends at the client's end of input (or at once without `input=1`).
    pub stdin: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Terminal sizes (tty only).
    pub resize: mpsc::UnboundedReceiver<TerminalSize>,
    /// Where to write; the client reads it as it comes.
    pub out: mpsc::Sender<Output>,
    /// What the request asked for.
    pub options: StreamOptions,
}

/// A process to run once the streams are up.
pub type Process = Box<dyn FnOnce(ProcessIo) -> BoxFuture<'static, Exit> + Send>;

/// The SPDY protocols of exec and attach, newest first.
const SPDY_PROTOCOLS: [&str; 4] = apimachinery::httpstream::spdy::streams::REMOTECOMMAND_PROTOCOLS;

/// Upgrades `request` (WebSocket or SPDY/3.1) and runs `process` over it.
pub async fn serve(
    server: &KubeletServer,
    request: Request,
    options: StreamOptions,
    process: Process,
) -> Response {
    let headers = request.headers();
    if is_websocket(headers) {
        let protocol = match websocket_protocol(headers, &wsstream::REMOTECOMMAND_PROTOCOLS) {
            Ok(p) => p,
            Err(response) => return *response,
        };
        let chosen = protocol.clone();
        return accept_websocket(server, request, &chosen, move |socket, guard| async move {
            let _open = guard;
            serve_websocket(socket, &protocol, options, process).await;
        })
        .await;
    }
    if !is_upgrade(headers) {
        return upgrade_required();
    }
    let protocol = match spdy_protocol(headers, &SPDY_PROTOCOLS) {
        Ok(p) => p,
        Err(response) => return *response,
    };
    let chosen = protocol.clone();
    accept_spdy(server, request, &chosen, move |session, guard| async move {
        let _open = guard;
        serve_spdy(session, &protocol, options, process).await;
    })
}

fn channels(options: StreamOptions) -> (ProcessIo, Channels) {
    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
    let (resize_tx, resize_rx) = mpsc::unbounded_channel();
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_QUEUE);
    let io = ProcessIo {
        stdin: stdin_rx,
        resize: resize_rx,
        out: out_tx,
        options,
    };
    let channels = Channels {
        stdin: options.stdin.then_some(stdin_tx),
        resize: resize_tx,
        out: out_rx,
    };
    (io, channels)
}

/// The transport's ends of [`ProcessIo`].
struct Channels {
    /// `None` once stdin has ended.
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    resize: mpsc::UnboundedSender<TerminalSize>,
    out: mpsc::Receiver<Output>,
}

/// Runs `process` over a WebSocket speaking `protocol` until it exits (then the status goes
/// on the error channel and the socket is closed) or the client goes away (then the process
/// is dropped).
pub async fn serve_websocket(
    mut socket: WebSocket,
    protocol: &str,
    options: StreamOptions,
    process: Process,
) {
    let Some(framing) = wsstream::framing(protocol) else {
        return;
    };
    let (io, mut ch) = channels(options);
    let first = if options.stdout {
        STDOUT
    } else if options.stderr {
        STDERR
    } else {
        ERROR
    };
    if send(&mut socket, framing, first, &[]).await.is_err() {
        return;
    }
    let mut running = std::pin::pin!(process(io));
    let exit = loop {
        tokio::select! {
            exit = &mut running => break exit,
            Some(out) = ch.out.recv() => {
                if write_ws(&mut socket, framing, options, out).await.is_err() {
                    return;
                }
            }
            message = socket.recv() => {
                let bytes = match message {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                    Some(Ok(Message::Binary(b))) => b.to_vec(),
                    Some(Ok(Message::Text(t))) => t.as_str().as_bytes().to_vec(),
                    Some(Ok(_)) => continue,
                };
                match wsstream::decode(framing, &bytes) {
                    Ok(wsstream::Message::Data { channel: STDIN, data }) => {
                        if let Some(tx) = &ch.stdin {
                            let _ = tx.send(data);
                        }
                    }
                    Ok(wsstream::Message::Data { channel: RESIZE, data }) => {
                        if let Some(size) = TerminalSize::from_json(&data) {
                            let _ = ch.resize.send(size);
                        }
                    }
                    Ok(wsstream::Message::Close { channel: STDIN }) => ch.stdin = None,
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "kubelet API: bad websocket message"),
                }
            }
        }
    };
    while let Ok(out) = ch.out.try_recv() {
        if write_ws(&mut socket, framing, options, out).await.is_err() {
            return;
        }
    }
    if let Some(status) = exit.status(framing.status_json)
        && send(&mut socket, framing, ERROR, &status).await.is_err()
    {
        return;
    }
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
}

/// Sends `data` on `channel` in `framing` (a text message for the base64 framings).
pub async fn send(
    socket: &mut WebSocket,
    framing: Framing,
    channel: u8,
    data: &[u8],
) -> Result<(), axum::Error> {
    let bytes = wsstream::encode(framing, channel, data);
    let message = if framing.base64 {
        Message::Text(String::from_utf8_lossy(&bytes).into_owned().into())
    } else {
        Message::Binary(bytes.into())
    };
    socket.send(message).await
}

async fn write_ws(
    socket: &mut WebSocket,
    framing: Framing,
    options: StreamOptions,
    out: Output,
) -> Result<(), axum::Error> {
    match out {
        Output::Stdout(data) if options.stdout => send(socket, framing, STDOUT, &data).await,
        Output::Stderr(data) if options.stderr => send(socket, framing, STDERR, &data).await,
        _ => Ok(()),
    }
}

/// Waits on an optional receiver (pending forever without one).
async fn recv_opt<T>(rx: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Runs `process` over a SPDY session speaking `protocol`: waits for the client's streams,
/// then carries them until the process exits (status on the error stream, every stream
/// closed, GOAWAY) or the connection ends.
pub async fn serve_spdy(
    mut session: Session,
    protocol: &str,
    options: StreamOptions,
    process: Process,
) {
    let expected = Expected {
        stdin: options.stdin,
        stdout: options.stdout,
        stderr: options.stderr,
        tty: options.tty,
    };
    let mut streams = RemoteCommandStreams::default();
    let deadline = tokio::time::sleep(STREAM_CREATION_TIMEOUT);
    let mut deadline = std::pin::pin!(deadline);
    while !streams.complete(expected, protocol) {
        tokio::select! {
            stream = session.accept() => match stream {
                Some(stream) => {
                    if let Err(extra) = streams.add(stream) {
                        let _ = extra.writer.reset().await;
                    }
                }
                None => return,
            },
            () = &mut deadline => {
                tracing::debug!("kubelet API: timed out waiting for the client's streams");
                return;
            }
        }
    }
    let RemoteCommandStreams {
        error,
        stdin,
        stdout,
        stderr,
        resize,
    } = streams;
    let Some(error) = error else {
        return;
    };
    let (io, mut ch) = channels(options);
    let mut stdin_data = stdin.map(|s| s.data);
    if stdin_data.is_none() {
        ch.stdin = None;
    }
    let mut resize_data = resize.map(|s| s.data);
    let mut resize_buf: Vec<u8> = Vec::new();
    let stdout = stdout.map(|s| s.writer);
    let stderr = stderr.map(|s| s.writer);
    let mut running = std::pin::pin!(process(io));
    let write = |out: Output| {
        let target = match out {
            Output::Stdout(data) => stdout.as_ref().map(|w| (w, data)),
            Output::Stderr(data) => stderr.as_ref().map(|w| (w, data)),
        };
        async move {
            match target {
                Some((w, data)) => w.write(&data).await.is_ok(),
                None => true,
            }
        }
    };
    let exit = loop {
        tokio::select! {
            exit = &mut running => break exit,
            Some(out) = ch.out.recv() => {
                if !write(out).await {
                    return;
                }
            }
            chunk = recv_opt(&mut stdin_data) => match chunk {
                Some(data) => {
                    if let Some(tx) = &ch.stdin {
                        let _ = tx.send(data);
                    }
                }
                None => {
                    stdin_data = None;
                    ch.stdin = None;
                }
            },
            chunk = recv_opt(&mut resize_data) => match chunk {
                Some(data) => {
                    resize_buf.extend(data);
                    for size in take_sizes(&mut resize_buf) {
                        let _ = ch.resize.send(size);
                    }
                }
                None => resize_data = None,
            },
            stream = session.accept() => match stream {
                Some(extra) => {
                    let _ = extra.writer.reset().await;
                }
                None => return,
            },
        }
    };
    while let Ok(out) = ch.out.try_recv() {
        if !write(out).await {
            return;
        }
    }
    let json = protocol == wsstream::V4_CHANNEL_PROTOCOL;
    if let Some(status) = exit.status(json) {
        let _ = error.writer.write(&status).await;
    }
    for writer in stdout.iter().chain(stderr.iter()) {
        let _ = writer.close().await;
    }
    let _ = error.writer.close().await;
    let _ = session.go_away().await;
}

/// The complete JSON terminal sizes at the start of `buf` (client-go writes one object per
/// line), removed from it.
fn take_sizes(buf: &mut Vec<u8>) -> Vec<TerminalSize> {
    let mut sizes = Vec::new();
    let mut consumed = 0;
    let mut values = serde_json::Deserializer::from_slice(buf).into_iter::<serde_json::Value>();
    while let Some(Ok(value)) = values.next() {
        let end = values.byte_offset();
        if let Some(size) = TerminalSize::from_json(value.to_string().as_bytes()) {
            sizes.push(size);
        }
        consumed = end;
    }
    buf.drain(..consumed);
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_follow_new_options() {
        let o = StreamOptions::from_query("input=1&output=1&error=1&tty=1").expect("valid");
        assert_eq!(
            o,
            StreamOptions {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true
            }
        );
        assert!(StreamOptions::from_query("output=true").is_err());
        assert!(StreamOptions::from_query("tty=1&error=1").is_err());
    }

    #[test]
    fn statuses_per_protocol() {
        let cmd = vec!["false".to_owned()];
        let failed = Exit::Code {
            command: cmd.clone(),
            code: 1,
        };
        let json = String::from_utf8(failed.status(true).unwrap_or_default()).unwrap_or_default();
        assert!(json.contains(r#""reason":"NonZeroExitCode""#), "{json}");
        assert_eq!(
            failed.status(false),
            Some(
                b"command terminated with non-zero exit code: error executing command [false], exit code 1"
                    .to_vec()
            )
        );
        let ok = Exit::Code {
            command: cmd,
            code: 0,
        };
        assert_eq!(ok.status(false), None);
        assert_eq!(
            Exit::Success.status(true),
            Some(br#"{"metadata":{},"status":"Success"}"#.to_vec())
        );
    }

    #[test]
    fn resize_objects_split_across_frames() {
        let mut buf = br#"{"Width":80,"Height":24}
{"Width":100,"#
            .to_vec();
        let sizes = take_sizes(&mut buf);
        assert_eq!(
            sizes,
            [TerminalSize {
                width: 80,
                height: 24
            }]
        );
        buf.extend(br#""Height":40}"#);
        assert_eq!(
            take_sizes(&mut buf),
            [TerminalSize {
                width: 100,
                height: 40
            }]
        );
        assert!(buf.is_empty());
    }
}
