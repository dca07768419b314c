//! The API server's half of a connect request: dial the node's kubelet, send it the request,
//! and hand back what it answers — a streamed body (`pods/log`, `nodes/proxy`), or, after
//! `101 Switching Protocols` (`exec`, `attach`, `portforward`), the two connections spliced
//! so bytes flow both ways until either side closes.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go`
//! (`UpgradeAwareHandler`: an upgrade the backend refuses is answered with the backend's own
//! response; an accepted one becomes a byte tunnel) and `pkg/registry/generic/rest/`
//! `streamer.go` and `response_checker.go` (`LocationStreamer`, `GenericHttpResponseChecker`:
//! a log request the kubelet answers with 400, 404 or 500 becomes the matching `Status`
//! carrying its text).
//!
//! With kube-apiserver's kubelet client flags ([`super::tls::KubeletClientTls`], in
//! `ServerOptions::kubelet_client`) the kubelet is dialled over TLS, presenting the API
//! server's kubelet client certificate (`https://NODE:PORT/...` in traces and errors);
//! without them, plain HTTP (`http://...`). An upgrade splices over the TLS stream alike.
//!
//! Every tunnel and every kubelet connection is a task of the server's [`TaskTracker`]
//! (`AppState::tasks`) that ends when either side closes or the server shuts down; the
//! [`LongRunning`] gauge counts the tunnels open now (`apiserver_longrunning_requests` with
//! verb `CONNECT` on `/metrics`).
//!
//! [`TaskTracker`]: tokio_util::task::TaskTracker

use super::Location;
use crate::error::{ApiError, Result};
use crate::metrics::LongRunning;
use crate::state::AppState;
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpStream;

/// How long dialling a kubelet may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of a kubelet's error body read into a `Status` (`maxReadLength` of
/// `response_checker.go`: 50 KB).
pub const MAX_ERROR_BODY: usize = 50_000;

/// Request headers never sent on to the kubelet: the client's credentials and what the
/// API server's own authentication consumed.
const DROPPED: &[&str] = &[
    "authorization",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
];

/// The answer to `pods/log` of a pod no node runs yet: an empty 200.
pub fn empty_log() -> Response {
    let mut resp = (StatusCode::OK, Body::empty()).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// Sends the request to `location`'s kubelet and answers with its response (see the module
/// docs); `body` goes on as it arrives.
pub async fn forward(
    state: &AppState,
    mut parts: Parts,
    body: Body,
    location: Location,
) -> Result<Response> {
    let log = location.subresource == "log";
    let upgrade = parts.headers.contains_key(header::UPGRADE);
    let client_side = if upgrade {
        parts.extensions.remove::<hyper::upgrade::OnUpgrade>()
    } else {
        None
    };
    let host = format!("{}:{}", location.node, location.port);
    let tls = state.options().kubelet_client.as_ref();
    let target = kubelet_url(&location, tls.is_some());
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, location.port));
    let reach_error = |why: String| {
        ApiError::Exhausted(format!(
            "error trying to reach service: {} \"{target}\": {why}",
            parts.method.as_str()
        ))
    };
    let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => {
            return Err(reach_error(format!(
                "dial tcp {addr}: {}",
                connect_error(&e)
            )));
        }
        Err(_) => return Err(reach_error(format!("dial tcp {addr}: i/o timeout"))),
    };
    let _ = tcp.set_nodelay(true);
    let mut sender = match tls {
        Some(tls) => {
            let handshake = tls.connect(addr.ip(), tcp);
            let stream = match tokio::time::timeout(DIAL_TIMEOUT, handshake).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return Err(reach_error(format!("tls: {e}"))),
                Err(_) => return Err(reach_error("net/http: TLS handshake timeout".into())),
            };
            http1_client(state, stream).await?
        }
        None => http1_client(state, tcp).await?,
    };
    let mut req = Request::builder()
        .method(parts.method.clone())
        .uri(location.path_and_query.as_str());
    if let Some(headers) = req.headers_mut() {
        copy_request_headers(&parts.headers, headers);
        if let Ok(h) = HeaderValue::from_str(&host) {
            headers.insert(header::HOST, h);
        }
    }
    let req = req
        .body(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid request for the kubelet: {e}")))?;
    let mut resp = sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::Exhausted(format!("error sending request to the kubelet: {e}")))?;
    drop(sender);
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_side) = client_side else {
            return Err(ApiError::BadRequest(
                "the kubelet switched protocols on a request that did not ask to".into(),
            ));
        };
        let backend_side = hyper::upgrade::on(&mut resp);
        let series = (location.resource.clone(), location.subresource.clone());
        splice(state, client_side, backend_side, series);
        let mut out = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
        if let Some(headers) = out.headers_mut() {
            for (k, v) in resp.headers() {
                headers.append(k.clone(), v.clone());
            }
        }
        return out
            .body(Body::empty())
            .map_err(|e| ApiError::Internal(format!("101 response: {e}")));
    }
    if log && !resp.status().is_success() {
        return Err(log_error(resp).await);
    }
    let (head, incoming) = resp.into_parts();
    let mut out = Response::new(Body::new(incoming));
    *out.status_mut() = head.status;
    for (k, v) in &head.headers {
        if !is_hop_by_hop(k) {
            out.headers_mut().append(k.clone(), v.clone());
        }
    }
    Ok(out)
}

/// The kubelet URL a connect request reaches, as traces and errors name it:
/// `http(s)://NODE:PORT/path?query`.
pub fn kubelet_url(location: &Location, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!(
        "{scheme}://{}:{}{}",
        location.node, location.port, location.path_and_query
    )
}

/// An HTTP/1.1 client connection over `io` (TCP, or TLS over it), driven by a task of the
/// server's tracker until it ends (upgrades included) or the server stops.
async fn http1_client<I>(
    state: &AppState,
    io: I,
) -> Result<hyper::client::conn::http1::SendRequest<Body>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| ApiError::Exhausted(format!("error dialing backend: {e}")))?;
    let shutdown = state.shutdown().clone();
    state.tasks().spawn(async move {
        tokio::select! {
            r = conn.with_upgrades() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "kubelet connection ended");
                }
            }
            () = shutdown.cancelled() => {}
        }
    });
    Ok(sender)
}

/// Go's text for a refused or failed dial.
fn connect_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        _ => format!("connect: {e}"),
    }
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "transfer-encoding" | "te" | "trailer" | "upgrade"
    )
}

/// The client's headers the kubelet sees: everything but credentials and hop-by-hop
/// headers, except that an upgrade keeps its `Connection: Upgrade` and `Upgrade`.
fn copy_request_headers(from: &HeaderMap, to: &mut HeaderMap) {
    let upgrade = from.contains_key(header::UPGRADE);
    for (k, v) in from {
        let name = k.as_str();
        if DROPPED.contains(&name) || name.starts_with("impersonate-") {
            continue;
        }
        if is_hop_by_hop(k) && !(upgrade && matches!(name, "connection" | "upgrade")) {
            continue;
        }
        to.append(k.clone(), v.clone());
    }
}

/// `GenericHttpResponseChecker.Check`: the kubelet's error text as a `Status`.
async fn log_error(resp: hyper::Response<hyper::body::Incoming>) -> ApiError {
    let status = resp.status();
    let limited = http_body_util::Limited::new(resp.into_body(), MAX_ERROR_BODY);
    let text = match limited.collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes())
            .trim_end()
            .to_string(),
        Err(e) => return ApiError::Internal(format!("reading the kubelet's answer: {e}")),
    };
    match status {
        StatusCode::BAD_REQUEST => ApiError::BadRequest(text),
        StatusCode::NOT_FOUND => ApiError::PathNotFound,
        StatusCode::INTERNAL_SERVER_ERROR => ApiError::Exhausted(text),
        _ => ApiError::Exhausted(format!(
            "the server responded with the status code {} but did not return more information",
            status.as_u16()
        )),
    }
}

/// Joins the client's upgraded connection and the kubelet's once both have switched, and
/// copies bytes both ways until one side closes (then the other is shut down) or the server
/// stops.
fn splice(
    state: &AppState,
    client_side: hyper::upgrade::OnUpgrade,
    backend_side: hyper::upgrade::OnUpgrade,
    (resource, subresource): (String, String),
) {
    let shutdown = state.shutdown().clone();
    let gauge = state.long_running().clone();
    state.tasks().spawn(async move {
        let _open = LongRunning::enter(&gauge, resource, subresource);
        let (client, backend) = tokio::select! {
            pair = async { tokio::join!(client_side, backend_side) } => pair,
            () = shutdown.cancelled() => return,
        };
        let (client, backend) = match (client, backend) {
            (Ok(c), Ok(b)) => (c, b),
            (c, b) => {
                tracing::debug!(
                    client = c.is_ok(),
                    kubelet = b.is_ok(),
                    "upgrade did not complete"
                );
                return;
            }
        };
        let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
        tokio::select! {
            r = tokio::io::copy_bidirectional(&mut client, &mut backend) => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "tunnel ended");
                }
            }
            () = shutdown.cancelled() => {}
        }
    });
}
