//! Tests of exec, attach and port-forward over WebSocket (tokio-tungstenite as the client),
//! SPDY/3.1 (a client made of the frame codec) and SPDY tunnelled in WebSocket, and of the
//! open-stream count going back to zero.

use std::time::Duration;

use apimachinery::httpstream::spdy::Frame;
use apimachinery::httpstream::spdy::frame::{FLAG_FIN, HeaderCompressor, HeaderDecompressor};
use apimachinery::httpstream::status::exit_code_of;
use apimachinery::httpstream::wsstream::{self, Framing};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::tests::{Fixture, PodBuilder};

pub(super) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a WebSocket to `path` on node-0 offering `protocols`; the protocol chosen.
pub(super) async fn ws(
    f: &Fixture,
    path: &str,
    protocols: &[&str],
) -> Result<(Ws, String), String> {
    let mut request = format!("ws://{}{path}", f.addr)
        .into_client_request()
        .map_err(|e| e.to_string())?;
    let headers = request.headers_mut();
    headers.insert("host", f.host("node-0").parse().map_err(|_| "host")?);
    if !protocols.is_empty() {
        headers.insert(
            "sec-websocket-protocol",
            protocols.join(", ").parse().map_err(|_| "protocols")?,
        );
    }
    let (socket, response) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(|e| e.to_string())?;
    let chosen = response
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((socket, chosen))
}

/// Reads channel messages until `done` says so or the socket closes (fails after 5 s).
pub(super) async fn read_until(
    socket: &mut Ws,
    framing: Framing,
    seen: &mut Vec<(u8, Vec<u8>)>,
    done: impl Fn(&[(u8, Vec<u8>)]) -> bool,
) {
    let reading = async {
        while !done(seen) {
            let bytes = match socket.next().await {
                Some(Ok(Message::Binary(b))) => b.to_vec(),
                Some(Ok(Message::Text(t))) => t.as_str().as_bytes().to_vec(),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => continue,
            };
            if let Ok(wsstream::Message::Data { channel, data }) = wsstream::decode(framing, &bytes)
            {
                seen.push((channel, data));
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), reading)
        .await
        .expect("the session answers in time");
}

pub(super) fn channel(seen: &[(u8, Vec<u8>)], ch: u8) -> Vec<u8> {
    seen.iter()
        .filter(|(c, _)| *c == ch)
        .flat_map(|(_, d)| d.clone())
        .collect()
}

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(super) const V5: &str = wsstream::V5_CHANNEL_PROTOCOL;

pub(super) fn v5() -> Framing {
    wsstream::framing(V5).expect("v5")
}

/// Runs an exec over v5 with `stdin` (then the CLOSE signal) and returns every message.
pub(super) async fn exec_v5(f: &Fixture, query: &str, stdin: Option<&[u8]>) -> Vec<(u8, Vec<u8>)> {
    let (mut socket, chosen) = ws(
        f,
        &format!("/exec/default/web/app?{query}"),
        &[V5, wsstream::V4_CHANNEL_PROTOCOL],
    )
    .await
    .expect("upgraded");
    assert_eq!(chosen, V5, "the client's first choice");
    if let Some(input) = stdin {
        let framing = v5();
        let mut data = vec![wsstream::STDIN];
        data.extend_from_slice(input);
        socket
            .send(Message::Binary(data.into()))
            .await
            .expect("stdin");
        let _ = framing;
        socket
            .send(Message::Binary(
                wsstream::encode_close(wsstream::STDIN).into(),
            ))
            .await
            .expect("close signal");
    }
    let mut seen = Vec::new();
    read_until(&mut socket, v5(), &mut seen, |_| false).await;
    seen
}

pub(super) fn exit_code(seen: &[(u8, Vec<u8>)]) -> Option<i32> {
    exit_code_of(&channel(seen, wsstream::ERROR))
}

#[tokio::test]
async fn exec_over_websocket_v5() {
    let f = Fixture::start(vec![PodBuilder::new("web", "busybox").build()]).await;
    let seen = exec_v5(&f, "command=echo&command=hello&output=1&error=1", None).await;
    assert_eq!(
        seen[0],
        (wsstream::STDOUT, Vec::new()),
        "the empty first message"
    );
    assert_eq!(text(&channel(&seen, wsstream::STDOUT)), "hello\n");
    assert_eq!(exit_code(&seen), Some(0));
    assert_eq!(
        text(&channel(&seen, wsstream::ERROR)),
        r#"{"metadata":{},"status":"Success"}"#
    );

    let seen = exec_v5(&f, "command=cat&command=/nope&output=1&error=1", None).await;
    assert_eq!(
        text(&channel(&seen, wsstream::STDERR)),
        "cat: can't open '/nope': No such file or directory\n"
    );
    assert_eq!(exit_code(&seen), Some(1));
    let status: serde_json::Value =
        serde_json::from_slice(&channel(&seen, wsstream::ERROR)).expect("status JSON");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");

    let seen = exec_v5(
        &f,
        "command=cat&input=1&output=1&error=1",
        Some(b"from stdin"),
    )
    .await;
    assert_eq!(text(&channel(&seen, wsstream::STDOUT)), "from stdin");
    assert_eq!(exit_code(&seen), Some(0));
    f.wait_streams(0).await;
    f.stop().await;
}

#[tokio::test]
async fn exec_of_a_missing_command_is_127() {
    let f = Fixture::start(vec![PodBuilder::new("web", "nginx:1.27").build()]).await;
    let seen = exec_v5(&f, "command=frobnicate&output=1&error=1", None).await;
    assert_eq!(
        text(&channel(&seen, wsstream::STDERR)),
        "bash: frobnicate: command not found\n"
    );
    assert_eq!(exit_code(&seen), Some(127));
    f.stop().await;
}

#[tokio::test]
async fn exec_with_a_tty_and_resizes() {
    let f = Fixture::start(vec![PodBuilder::new("web", "busybox").build()]).await;
    let (mut socket, _) = ws(
        &f,
        "/exec/default/web/app?command=sh&input=1&output=1&error=1&tty=1",
        &[V5],
    )
    .await
    .expect("upgraded");
    let mut seen = Vec::new();
    read_until(&mut socket, v5(), &mut seen, |s| {
        text(&channel(s, wsstream::STDOUT)).ends_with("/ # ")
    })
    .await;
    let send = |channel: u8, data: &[u8]| {
        let mut m = vec![channel];
        m.extend_from_slice(data);
        Message::Binary(m.into())
    };
    socket
        .send(send(wsstream::RESIZE, br#"{"Width":120,"Height":40}"#))
        .await
        .expect("resize");
    socket
        .send(send(wsstream::STDIN, b"echo hi\r"))
        .await
        .expect("typed");
    read_until(&mut socket, v5(), &mut seen, |s| {
        text(&channel(s, wsstream::STDOUT)).ends_with("hi\r\n/ # ")
    })
    .await;
    assert_eq!(
        text(&channel(&seen, wsstream::STDOUT)),
        "/ # echo hi\r\nhi\r\n/ # ",
        "echo, output and prompt; the resize is no input"
    );
    socket
        .send(send(wsstream::STDIN, b"exit 3\r"))
        .await
        .expect("typed");
    read_until(&mut socket, v5(), &mut seen, |_| false).await;
    assert_eq!(exit_code(&seen), Some(3));
    assert!(
        channel(&seen, wsstream::STDERR).is_empty(),
        "no stderr with a tty"
    );
    f.stop().await;
}

#[tokio::test]
async fn older_websocket_protocols_and_refusals() {
    let f = Fixture::start(vec![PodBuilder::new("web", "busybox").build()]).await;
    let path = "/exec/default/web/app?command=false&output=1&error=1";
    let (mut socket, chosen) = ws(&f, path, &[wsstream::BASE64_CHANNEL_PROTOCOL])
        .await
        .expect("upgraded");
    assert_eq!(chosen, wsstream::BASE64_CHANNEL_PROTOCOL);
    let mut seen = Vec::new();
    let framing = wsstream::framing(&chosen).expect("base64");
    read_until(&mut socket, framing, &mut seen, |_| false).await;
    assert_eq!(
        text(&channel(&seen, wsstream::ERROR)),
        "command terminated with non-zero exit code: error executing command [false], exit code 1",
        "before v4 the error channel carries the message alone"
    );
    let refused = ws(&f, path, &["SPDY/3.1"]).await;
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("403")),
        "no shared subprotocol: 403, got {:?}",
        refused.map(|(_, p)| p)
    );
    f.stop().await;
}

/// A SPDY/3.1 client on a raw connection: the upgrade, then frames.
struct Spdy {
    stream: TcpStream,
    z: HeaderCompressor,
    d: HeaderDecompressor,
}

impl Spdy {
    async fn connect(f: &Fixture, path: &str, protocol: &str) -> (Spdy, String) {
        let mut stream = TcpStream::connect(f.addr).await.expect("connect");
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: {protocol}\r\nContent-Length: 0\r\n\r\n",
            f.host("node-0")
        );
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut b = [0u8];
            if stream.read(&mut b).await.expect("head") == 0 {
                break;
            }
            head.push(b[0]);
        }
        let spdy = Spdy {
            stream,
            z: HeaderCompressor::new().expect("zlib"),
            d: HeaderDecompressor::default(),
        };
        (spdy, text(&head))
    }

    async fn send(&mut self, frame: Frame) {
        let bytes = frame.encode(&mut self.z).expect("encoded");
        self.stream.write_all(&bytes).await.expect("sent");
    }

    async fn syn(&mut self, id: u32, headers: &[(&str, &str)]) {
        self.send(syn(id, headers)).await;
    }

    /// Frames until the server closes (or `done`), at most 5 s.
    async fn read_until(&mut self, frames: &mut Vec<Frame>, done: impl Fn(&[Frame]) -> bool) {
        let reading = async {
            while !done(frames) {
                match Frame::read(&mut self.stream, &mut self.d).await {
                    Ok(Some(frame)) => frames.push(frame),
                    _ => return,
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), reading)
            .await
            .expect("the session answers in time");
    }
}

fn syn(id: u32, headers: &[(&str, &str)]) -> Frame {
    Frame::SynStream {
        flags: 0,
        stream_id: id,
        associated_to: 0,
        priority: 0,
        slot: 0,
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
            .collect(),
    }
}

fn data_of(frames: &[Frame], id: u32) -> Vec<u8> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Data {
                stream_id, data, ..
            } if *stream_id == id => Some(data.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn finished(frames: &[Frame], id: u32) -> bool {
    frames.iter().any(|f| {
        matches!(f, Frame::Data { stream_id, flags, .. } if *stream_id == id && flags & FLAG_FIN != 0)
    })
}

#[tokio::test]
async fn exec_over_spdy() {
    let f = Fixture::start(vec![PodBuilder::new("web", "busybox").build()]).await;
    let (mut client, head) = Spdy::connect(
        &f,
        "/exec/default/web/app?command=sh&command=-c&command=echo%20spdy%3B%20exit%204&input=1&output=1&error=1",
        "v4.channel.k8s.io",
    )
    .await;
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("upgrade: spdy/3.1"), "{head}");
    assert!(
        lower.contains("x-stream-protocol-version: v4.channel.k8s.io"),
        "{head}"
    );
    client.syn(1, &[("streamtype", "error")]).await;
    client.syn(3, &[("streamtype", "stdin")]).await;
    client.syn(5, &[("streamtype", "stdout")]).await;
    client.syn(7, &[("streamtype", "stderr")]).await;
    client
        .send(Frame::Data {
            stream_id: 3,
            flags: FLAG_FIN,
            data: Vec::new(),
        })
        .await;
    let mut frames = Vec::new();
    client
        .read_until(&mut frames, |fs| {
            fs.iter().any(|f| matches!(f, Frame::GoAway { .. }))
        })
        .await;
    let replies = frames
        .iter()
        .filter(|f| matches!(f, Frame::SynReply { .. }))
        .count();
    assert_eq!(replies, 4);
    assert_eq!(text(&data_of(&frames, 5)), "spdy\n");
    assert_eq!(exit_code_of(&data_of(&frames, 1)), Some(4));
    assert!(
        finished(&frames, 1) && finished(&frames, 5),
        "streams closed: {frames:?}"
    );
    drop(client);
    f.wait_streams(0).await;

    let (mut refused, head) = Spdy::connect(
        &f,
        "/exec/default/web/app?command=ls&output=1",
        "v9.channel.k8s.io",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("x-accepted-stream-protocol-versions: v4.channel.k8s.io"),
        "{head}"
    );
    let length: usize = head
        .to_ascii_lowercase()
        .lines()
        .find_map(|l| l.strip_prefix("content-length: ").map(str::to_owned))
        .and_then(|n| n.trim().parse().ok())
        .expect("a length");
    let mut body = vec![0; length];
    refused.stream.read_exact(&mut body).await.expect("body");
    assert_eq!(
        text(&body),
        "unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io], server accepts [v4.channel.k8s.io v3.channel.k8s.io v2.channel.k8s.io channel.k8s.io]\n"
    );
    f.stop().await;
}

#[tokio::test]
async fn attach_joins_the_main_process() {
    // `cat` (a shell would answer what is typed instead: `tests_exits.rs`).
    let pod = PodBuilder::new("web", "busybox")
        .command(&["cat"])
        .stdin(false)
        .annotation("miniplane.dev/log-lines", "tick")
        .annotation("miniplane.dev/log-rate", "20/s")
        .build();
    let f = Fixture::start(vec![pod]).await;
    let (mut socket, _) = ws(
        &f,
        "/attach/default/web/app?input=1&output=1&error=1",
        &[V5],
    )
    .await
    .expect("upgraded");
    let mut seen = Vec::new();
    read_until(&mut socket, v5(), &mut seen, |s| {
        text(&channel(s, wsstream::STDOUT))
            .matches("tick\n")
            .count()
            >= 2
    })
    .await;
    let mut typed = vec![wsstream::STDIN];
    typed.extend_from_slice(b"typed-in");
    socket
        .send(Message::Binary(typed.into()))
        .await
        .expect("stdin");
    read_until(&mut socket, v5(), &mut seen, |s| {
        text(&channel(s, wsstream::STDOUT)).contains("typed-in")
    })
    .await;
    assert!(
        text(&channel(&seen, wsstream::STDOUT)).contains("typed-in"),
        "stdin echoed"
    );
    f.wait_streams(1).await;
    drop(socket);
    f.wait_streams(0).await;
    f.stop().await;
}

fn forwarded_pod() -> k8s_openapi::api::core::v1::Pod {
    PodBuilder::new("web", "nginx")
        .port(80, Some("http"))
        .port(6379, None)
        .build()
}

#[tokio::test]
async fn port_forward_over_websocket() {
    let f = Fixture::start(vec![forwarded_pod()]).await;
    let (mut socket, chosen) = ws(
        &f,
        "/portForward/default/web?port=80&port=6379&port=7",
        &[wsstream::V4_CHANNEL_PROTOCOL],
    )
    .await
    .expect("upgraded");
    assert_eq!(chosen, wsstream::V4_CHANNEL_PROTOCOL);
    let framing = wsstream::framing(&chosen).expect("v4");
    let mut seen = Vec::new();
    read_until(&mut socket, framing, &mut seen, |s| s.len() >= 6).await;
    assert_eq!(
        seen[..6].to_vec(),
        vec![
            (0, 80u16.to_le_bytes().to_vec()),
            (1, 80u16.to_le_bytes().to_vec()),
            (2, 6379u16.to_le_bytes().to_vec()),
            (3, 6379u16.to_le_bytes().to_vec()),
            (4, 7u16.to_le_bytes().to_vec()),
            (5, 7u16.to_le_bytes().to_vec()),
        ],
        "each channel opens with its port"
    );
    let mut get = vec![0u8];
    get.extend_from_slice(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    socket
        .send(Message::Binary(get.into()))
        .await
        .expect("request");
    let mut echo = vec![2u8];
    echo.extend_from_slice(b"PING\r\n");
    socket
        .send(Message::Binary(echo.into()))
        .await
        .expect("bytes");
    read_until(&mut socket, framing, &mut seen, |s| {
        channel(&s[6..], 2) == b"PING\r\n" && text(&channel(&s[6..], 0)).contains("</html>")
    })
    .await;
    let page = text(&channel(&seen[6..], 0));
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(page.contains("Hello from pod default/web"), "{page}");
    assert!(page.contains("node: node-0"), "{page}");
    assert!(page.contains("container: app"), "{page}");
    let refusal = text(&channel(&seen[6..], 5));
    assert!(
        refusal.starts_with("error forwarding port 7 to pod ")
            && refusal.contains("connection refused"),
        "{refusal:?}"
    );
    assert!(channel(&seen[6..], 1).is_empty(), "port 80 has no error");
    drop(socket);
    f.wait_streams(0).await;
    f.stop().await;
}

/// The complete frames at the start of `buf`, removed from it.
async fn take_frames(buf: &mut Vec<u8>, d: &mut HeaderDecompressor) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        if buf.len() < 8 {
            return frames;
        }
        let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
        if buf.len() < 8 + len {
            return frames;
        }
        let whole: Vec<u8> = buf.drain(..8 + len).collect();
        let mut slice = whole.as_slice();
        if let Ok(Some(frame)) = Frame::read(&mut slice, d).await {
            frames.push(frame);
        }
    }
}

#[tokio::test]
async fn port_forward_over_spdy_tunnelled_in_websocket() {
    let f = Fixture::start(vec![forwarded_pod()]).await;
    let (mut socket, chosen) = ws(
        &f,
        "/portForward/default/web",
        &["SPDY/3.1+portforward.k8s.io"],
    )
    .await
    .expect("upgraded");
    assert_eq!(chosen, "SPDY/3.1+portforward.k8s.io");
    let mut z = HeaderCompressor::new().expect("zlib");
    let mut d = HeaderDecompressor::default();
    let frames_out = [
        syn(
            1,
            &[("streamtype", "error"), ("port", "80"), ("requestid", "0")],
        ),
        syn(
            3,
            &[("streamtype", "data"), ("port", "80"), ("requestid", "0")],
        ),
        Frame::Data {
            stream_id: 3,
            flags: 0,
            data: b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_vec(),
        },
        syn(
            5,
            &[("streamtype", "error"), ("port", "7"), ("requestid", "1")],
        ),
        syn(
            7,
            &[("streamtype", "data"), ("port", "7"), ("requestid", "1")],
        ),
    ];
    for frame in frames_out {
        let bytes = frame.encode(&mut z).expect("encoded");
        socket
            .send(Message::Binary(bytes.into()))
            .await
            .expect("sent");
    }
    let mut buf = Vec::new();
    let mut frames = Vec::new();
    let reading = async {
        while !(finished(&frames, 3) && finished(&frames, 1) && finished(&frames, 5)) {
            match socket.next().await {
                Some(Ok(Message::Binary(b))) => buf.extend_from_slice(&b),
                Some(Ok(_)) => continue,
                _ => break,
            }
            frames.extend(take_frames(&mut buf, &mut d).await);
        }
    };
    tokio::time::timeout(Duration::from_secs(5), reading)
        .await
        .expect("answers in time");
    let page = text(&data_of(&frames, 3));
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(page.contains("request: GET /hello"), "{page}");
    assert!(data_of(&frames, 1).is_empty());
    let refusal = text(&data_of(&frames, 5));
    assert!(
        refusal.starts_with("error forwarding port 7 to pod "),
        "{refusal}"
    );
    drop(socket);
    f.wait_streams(0).await;
    f.stop().await;
}

#[tokio::test]
async fn no_stream_outlives_its_client_or_the_server() {
    let pod = PodBuilder::new("web", "busybox")
        .command(&["sh", "-c", "sleep 3600"])
        .port(8080, None)
        .build();
    let f = Fixture::start(vec![pod]).await;
    let (shell, _) = ws(
        &f,
        "/exec/default/web/app?command=sh&input=1&output=1&tty=1",
        &[V5],
    )
    .await
    .expect("exec");
    let (attach, _) = ws(&f, "/attach/default/web/app?output=1", &[V5])
        .await
        .expect("attach");
    let (forward, head) = Spdy::connect(&f, "/portForward/default/web", "portforward.k8s.io").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let (addr, host) = (f.addr, f.host("node-0"));
    let follow = tokio::spawn(async move {
        super::tests::http(
            addr,
            "GET",
            "/containerLogs/default/web/app?follow=1",
            &host,
        )
        .await
    });
    f.wait_streams(4).await;
    drop((shell, attach, forward));
    follow.abort();
    let _ = follow.await;
    f.wait_streams(0).await;

    // Sessions still open when the server stops end with it.
    let (_shell, _) = ws(
        &f,
        "/exec/default/web/app?command=sh&input=1&output=1&tty=1",
        &[V5],
    )
    .await
    .expect("exec");
    let (_sleeper, _) = ws(
        &f,
        "/exec/default/web/app?command=sleep&command=infinity&output=1",
        &[V5],
    )
    .await
    .expect("exec");
    f.wait_streams(2).await;
    let server = f.server.clone();
    f.stop().await;
    assert_eq!(server.open_streams(), 0);
}
