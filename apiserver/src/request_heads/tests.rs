//! The follower against hyper: random request sequences (short and long targets, no body,
//! Content-Length and chunked bodies with extensions and trailers, pipelined), cut at random
//! points, must reach hyper's service exactly as they were sent; streams with no long target
//! pass through unchanged whatever their bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use http_body_util::BodyExt as _;
use proptest::prelude::*;
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One request as a client sends it.
#[derive(Debug, Clone)]
struct Req {
    method: &'static str,
    target: String,
    body: Body,
    http_10: bool,
    bare_lf: bool,
}

#[derive(Debug, Clone)]
enum Body {
    None,
    Length(Vec<u8>),
    /// The chunks, an extension on each size line, and trailer lines.
    Chunked(Vec<Vec<u8>>, bool, Vec<String>),
}

impl Req {
    fn bytes(&self) -> Vec<u8> {
        let nl: &[u8] = if self.bare_lf { b"\n" } else { b"\r\n" };
        let mut out = Vec::new();
        let version = if self.http_10 { "HTTP/1.0" } else { "HTTP/1.1" };
        out.extend_from_slice(format!("{} {} {version}", self.method, self.target).as_bytes());
        out.extend_from_slice(nl);
        out.extend_from_slice(b"Host: example");
        out.extend_from_slice(nl);
        if self.http_10 {
            out.extend_from_slice(b"Connection: keep-alive");
            out.extend_from_slice(nl);
        }
        match &self.body {
            Body::None => {}
            Body::Length(b) => {
                out.extend_from_slice(format!("Content-Length:  {} ", b.len()).as_bytes());
                out.extend_from_slice(nl);
            }
            Body::Chunked(..) => {
                out.extend_from_slice(b"Transfer-Encoding: gzip, Chunked");
                out.extend_from_slice(nl);
            }
        }
        out.extend_from_slice(nl);
        match &self.body {
            Body::None => {}
            Body::Length(b) => out.extend_from_slice(b),
            Body::Chunked(chunks, ext, trailers) => {
                for c in chunks.iter().filter(|c| !c.is_empty()) {
                    out.extend_from_slice(format!("{:X}", c.len()).as_bytes());
                    if *ext {
                        out.extend_from_slice(b" ;name=\"v\"");
                    }
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(c);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n");
                for t in trailers {
                    out.extend_from_slice(t.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
            }
        }
        out
    }

    fn body_bytes(&self) -> Vec<u8> {
        match &self.body {
            Body::None => Vec::new(),
            Body::Length(b) => b.clone(),
            Body::Chunked(c, ..) => c.concat(),
        }
    }
}

/// Bytes that look like requests, inside bodies.
fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        Just(b"GET /x HTTP/1.1\r\n\r\n0\r\n\r\n".to_vec()),
        Just(format!("GET /{} HTTP/1.1\r\n\r\n", "y".repeat(70_000)).into_bytes()),
    ]
}

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/api/v1/pods?limit=1".to_owned()),
        Just(format!("{PLACEHOLDER_PREFIX}0")),
        "/[a-z0-9/]{0,20}(\\?[a-z=&]{0,10})?",
        (65_500usize..70_000, any::<bool>()).prop_map(|(n, q)| {
            if q {
                format!("/api/v1/pods?labelSelector={}", "a".repeat(n))
            } else {
                format!(
                    "/api/v1/namespaces/default/configmaps/{}",
                    "é".repeat(n / 2)
                )
            }
        }),
    ]
}

fn request() -> impl Strategy<Value = Req> {
    let body = prop_oneof![
        Just(Body::None),
        body_bytes().prop_map(Body::Length),
        (
            proptest::collection::vec(body_bytes(), 0..4),
            any::<bool>(),
            proptest::collection::vec("[A-Za-z-]{1,8}: [a-z\n]{0,6}", 0..3),
        )
            .prop_map(|(c, e, t)| {
                // A bare LF inside a trailer line is a byte of it for hyper's decoder, but
                // not for the header map it is parsed into.
                let t = t.into_iter().map(|l| l.replace('\n', "")).collect();
                Body::Chunked(c, e, t)
            }),
    ];
    (
        prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE"]),
        target(),
        body,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(method, target, body, http_10, bare_lf)| {
            // HTTP/1.0 has no chunked encoding.
            let http_10 = http_10 && !matches!(body, Body::Chunked(..));
            Req {
                method,
                target,
                body,
                http_10,
                bare_lf,
            }
        })
}

/// A socket that yields fixed pieces, then nothing (never an end: the test stops it).
struct Pieces(VecDeque<Vec<u8>>);

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let Some(mut piece) = self.0.pop_front() else {
            return Poll::Pending;
        };
        let n = piece.len().min(buf.remaining());
        buf.put_slice(&piece[..n]);
        if n < piece.len() {
            self.0.push_front(piece.split_off(n));
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Pieces {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Serves `bytes` (cut at `cuts`) with hyper through the follower; what the service saw.
fn serve(bytes: &[u8], cuts: &[usize], expected: usize) -> Vec<(String, String, Vec<u8>)> {
    let mut pieces = VecDeque::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    for c in cuts {
        pieces.push_back(bytes[at..c].to_vec());
        at = c;
    }
    pieces.push_back(bytes[at..].to_vec());
    // An empty read is the end of the stream.
    pieces.retain(|p| !p.is_empty());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let shared = Arc::new(Shared::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let io = hyper_util::rt::TokioIo::new(Following::new(Pieces(pieces), shared.clone()));
        let (s, seen2) = (shared.clone(), seen.clone());
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let long = s.dispatch(req.uri().path());
                let (s, seen, done) = (s.clone(), seen2.clone(), done_tx.clone());
                async move {
                    let (path, query) = match &long {
                        Some(t) => (t.path().to_owned(), t.query().map(str::to_owned)),
                        None => (
                            req.uri().path().to_owned(),
                            req.uri().query().map(str::to_owned),
                        ),
                    };
                    let target = match query {
                        Some(q) => format!("{path}?{q}"),
                        None => path,
                    };
                    let method = req.method().to_string();
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes().to_vec());
                    seen.lock().unwrap().push((
                        method,
                        target,
                        body.unwrap_or_else(|e| format!("{e}").into_bytes()),
                    ));
                    s.answered();
                    let _ = done.send(());
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("ok")))
                }
            });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.max_buf_size(MAX_HEAD_BYTES + 64 * 1024);
        let conn = builder.serve_connection(io, service);
        let wait = async {
            for _ in 0..expected {
                done_rx.recv().await;
            }
        };
        tokio::select! {
            r = conn => panic!("connection ended: {r:?}"),
            () = wait => {}
            () = tokio::time::sleep(Duration::from_secs(20)) => {}
        }
        assert!(shared.lock().is_empty(), "targets left in the side table");
        seen.lock().unwrap().clone()
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MINIPLANE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    /// Every request reaches the service as sent: method, full target, body.
    #[test]
    fn hyper_sees_every_request_as_sent(
        reqs in proptest::collection::vec(request(), 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes: Vec<u8> = reqs.iter().flat_map(Req::bytes).collect();
        let seen = serve(&bytes, &cuts, reqs.len());
        let expected: Vec<(String, String, Vec<u8>)> = reqs
            .iter()
            .map(|r| (r.method.to_owned(), r.target.clone(), r.body_bytes()))
            .collect();
        prop_assert_eq!(seen.len(), expected.len());
        for (s, e) in seen.iter().zip(&expected) {
            prop_assert_eq!(&s.0, &e.0);
            prop_assert!(s.1 == e.1, "target {} != {}", &s.1[..s.1.len().min(80)], &e.1[..e.1.len().min(80)]);
            prop_assert_eq!(&s.2, &e.2);
        }
    }

    /// With no long target, the follower changes nothing, whatever the bytes and cuts.
    #[test]
    fn short_targets_pass_unchanged(
        parts in proptest::collection::vec(prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            request().prop_filter("short", |r| r.target.len() <= MAX_URI_BYTES
                && !r.target.starts_with(PLACEHOLDER_PREFIX)
                && r.bytes().len() < 60_000).prop_map(|r| r.bytes()),
        ], 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes: Vec<u8> = parts.concat();
        let mut f = Follower::new();
        let shared = Shared::default();
        let mut out = Vec::new();
        let mut at = 0;
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        for c in cuts.into_iter().chain([bytes.len()]) {
            f.feed(&bytes[at..c], &mut out, &shared);
            at = c;
        }
        // Bytes of an unfinished head are held back until it ends.
        prop_assert!(bytes.starts_with(&out));
        prop_assert_eq!(&bytes[out.len()..], &f.head[..]);
    }
}

#[test]
fn a_head_at_the_limit_passes_and_one_byte_more_is_refused() {
    let head = |len: usize| {
        let start = b"GET / HTTP/1.1\r\nX-Pad: ".to_vec();
        let mut h = start.clone();
        h.resize(len - 4, b'p');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    for (len, refused) in [(MAX_HEAD_BYTES, false), (MAX_HEAD_BYTES + 1, true)] {
        let bytes = head(len);
        assert_eq!(bytes.len(), len);
        let mut f = Follower::new();
        let shared = Shared::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(7_000) {
            f.feed(piece, &mut out, &shared);
        }
        assert_eq!(f.too_large(), refused, "{len}");
        assert_eq!(out.len(), if refused { 0 } else { len });
    }
}

#[test]
fn a_long_target_becomes_a_placeholder_and_a_bad_one_stays_bad() {
    let shared = Shared::default();
    let mut f = Follower::new();
    let mut out = Vec::new();
    let long = format!("/api/v1/pods?labelSelector={}#frag", "a".repeat(70_000));
    f.feed(
        format!("GET {long} HTTP/1.1\r\n\r\n").as_bytes(),
        &mut out,
        &shared,
    );
    let placeholder = format!("{PLACEHOLDER_PREFIX}0");
    assert_eq!(
        out,
        format!("GET {placeholder} HTTP/1.1\r\n\r\n").into_bytes()
    );
    let t = shared.dispatch(&placeholder).expect("stored");
    assert_eq!(t.path(), "/api/v1/pods");
    assert_eq!(
        t.query().map(str::len),
        Some("labelSelector=".len() + 70_000)
    );
    assert!(shared.dispatch(&placeholder).is_none(), "taken once");

    // A character `http::Uri` refuses: hyper's 400, as for a short target.
    out.clear();
    let bad = format!("/{}<", "b".repeat(70_000));
    f.feed(
        format!("GET {bad} HTTP/1.1\r\n\r\n").as_bytes(),
        &mut out,
        &shared,
    );
    assert_eq!(out, b"GET /\xff HTTP/1.1\r\n\r\n".to_vec());
}
