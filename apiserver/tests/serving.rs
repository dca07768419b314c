//! The server on a loopback socket, for what only the connection layer sees: request targets
//! longer than `http::Uri` holds (served as kube-apiserver's Go `net/http` serves them, up to
//! its 1 MiB + 4 KiB of request line and headers) and Go's 431 past that.

use std::net::SocketAddr;
use std::sync::Arc;

use apiserver::LongTarget;
use apiserver::{MAX_HEAD_BYTES, TOO_LARGE_RESPONSE};
use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use store::MemoryBackend;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::common::Harness;

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A server on 127.0.0.1 over an in-memory store, stopped when dropped.
struct Served {
    addr: SocketAddr,
    shutdown: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start() -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    let backend: Arc<dyn store::Backend> = Arc::new(MemoryBackend::new());
    tokio::spawn(apiserver::serve(listener, backend, shutdown.clone()));
    Served { addr, shutdown }
}

/// A response as read off the socket.
#[derive(Debug)]
struct Answer {
    code: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }
}

/// Reads one response (Content-Length or chunked).
async fn read_answer(r: &mut BufReader<TcpStream>) -> Answer {
    let mut line = String::new();
    r.read_line(&mut line).await.expect("status line");
    let code = line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line {line:?}"));
    let (mut length, mut chunked, mut content_type) = (None, false, String::new());
    loop {
        line.clear();
        r.read_line(&mut line).await.expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("header line");
        match k.to_ascii_lowercase().as_str() {
            "content-length" => length = v.trim().parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            "content-type" => content_type = v.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).await.expect("chunk size");
            let n = usize::from_str_radix(line.trim(), 16).expect("hex size");
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).await.expect("chunk");
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length.unwrap_or(0), 0);
        r.read_exact(&mut body).await.expect("body");
    }
    Answer {
        code,
        content_type,
        body,
    }
}

async fn connect(s: &Served) -> BufReader<TcpStream> {
    BufReader::new(TcpStream::connect(s.addr).await.expect("connect"))
}

async fn send(c: &mut BufReader<TcpStream>, method: &str, target: &str, body: &str) -> Answer {
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.get_mut().write_all(req.as_bytes()).await.expect("write");
    read_answer(c).await
}

async fn create_configmap(c: &mut BufReader<TcpStream>, name: &str, label: &str) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"a": label}}});
    let a = send(c, "POST", CONFIGMAPS, &cm.to_string()).await;
    assert_eq!(a.code, 201, "{}", String::from_utf8_lossy(&a.body));
}

/// `a in (v1,v2,x0,x1,…)` of about 70 KiB, URL-encoded.
fn long_selector(extra: &str) -> String {
    let mut values = vec!["v1".to_owned(), "v2".to_owned()];
    values.extend((0..12_000).map(|i| format!("x{i}")));
    format!("a%20in%20({}){extra}", values.join(","))
}

#[tokio::test]
async fn a_long_label_selector_lists_the_right_items() {
    let s = start().await;
    let mut c = connect(&s).await;
    for (name, label) in [("one", "v1"), ("two", "v2"), ("three", "v3")] {
        create_configmap(&mut c, name, label).await;
    }
    let target = format!("{CONFIGMAPS}?labelSelector={}", long_selector(""));
    assert!(target.len() > 65_534, "{}", target.len());
    let a = send(&mut c, "GET", &target, "").await;
    assert_eq!(a.code, 200, "{}", String::from_utf8_lossy(&a.body));
    let list = a.json();
    let mut names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["one", "two"]);
}

/// A long name routes like a short one: kube-apiserver's NotFound, byte for byte; and the
/// connection serves the next request.
#[tokio::test]
async fn a_long_name_is_not_found_and_the_connection_goes_on() {
    let s = start().await;
    let mut c = connect(&s).await;
    let name = "a".repeat(100 * 1024);
    let a = send(&mut c, "GET", &format!("{CONFIGMAPS}/{name}"), "").await;
    let expected = format!(
        "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":\"configmaps \\\"{name}\\\" not found\",\"reason\":\"NotFound\",\"details\":{{\"name\":\"{name}\",\"kind\":\"configmaps\"}},\"code\":404}}\n"
    );
    assert_eq!(a.code, 404);
    assert_eq!(a.content_type, "application/json");
    assert!(
        a.body == expected.as_bytes(),
        "{}",
        String::from_utf8_lossy(&a.body[..200.min(a.body.len())])
    );
    // Keep-alive: the same connection serves a short request after the long one.
    let a = send(&mut c, "GET", CONFIGMAPS, "").await;
    assert_eq!(a.code, 200);
    assert_eq!(a.json()["kind"], "ConfigMapList");
}

/// A malformed long selector gets the router's 400 Status, as a short one does.
#[tokio::test]
async fn a_bad_long_selector_is_the_usual_400() {
    let s = start().await;
    let mut c = connect(&s).await;
    let target = format!("{CONFIGMAPS}?labelSelector={}", long_selector(",x%3Eabc"));
    let a = send(&mut c, "GET", &target, "").await;
    assert_eq!(a.code, 400, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["reason"], "BadRequest");
    // The router's own answer to the same target (given as the connection layer gives it).
    let h = Harness::new().await;
    let mut req = Request::get("/placeholder")
        .body(Body::empty())
        .expect("request");
    req.extensions_mut().insert(LongTarget::new(target));
    let resp = h.app.clone().oneshot(req).await.expect("infallible");
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    assert_eq!(a.body, body.to_vec());
}

/// A GET whose request line and headers take exactly `len` bytes.
fn head_of(len: usize) -> Vec<u8> {
    let mut h = format!("GET {CONFIGMAPS} HTTP/1.1\r\nHost: localhost\r\nX-Pad: ").into_bytes();
    h.resize(len - 4, b'p');
    h.extend_from_slice(b"\r\n\r\n");
    h
}

/// Go serves a head of up to 1 MiB + 4 KiB; one byte more is its 431, its bytes, and the
/// connection closes.
#[tokio::test]
async fn heads_past_go_s_limit_are_431_and_the_connection_closes() {
    let s = start().await;
    let mut c = connect(&s).await;
    c.get_mut()
        .write_all(&head_of(MAX_HEAD_BYTES))
        .await
        .expect("write");
    let a = read_answer(&mut c).await;
    assert_eq!(a.code, 200, "at the limit");

    let mut c = connect(&s).await;
    c.get_mut()
        .write_all(&head_of(MAX_HEAD_BYTES + 1))
        .await
        .expect("write");
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).await.expect("read to the end");
    assert_eq!(
        String::from_utf8_lossy(&rest),
        String::from_utf8_lossy(TOO_LARGE_RESPONSE)
    );
    assert_eq!(
        TOO_LARGE_RESPONSE,
        b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"
    );
}

/// Pipelined after a request, a head over the limit is refused after that request's answer.
#[tokio::test]
async fn a_refused_head_comes_after_the_answers_before_it() {
    let s = start().await;
    let mut c = connect(&s).await;
    let mut bytes = b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec();
    bytes.extend_from_slice(&head_of(MAX_HEAD_BYTES + 100));
    c.get_mut().write_all(&bytes).await.expect("write");
    let a = read_answer(&mut c).await;
    assert_eq!(a.code, 200);
    assert!(a.json()["gitVersion"].is_string());
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).await.expect("read to the end");
    assert_eq!(
        String::from_utf8_lossy(&rest),
        String::from_utf8_lossy(TOO_LARGE_RESPONSE)
    );
}
