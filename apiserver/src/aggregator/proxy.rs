//! The aggregator's half of an aggregated request: find a ready endpoint of the APIService's
//! Service, send it the request with the user in `X-Remote-*` headers, and stream back what it
//! answers; and the plain GET the availability check makes.
//!
//! Mirrors `pkg/apiserver/handler_proxy.go` (`proxyHandler.ServeHTTP`, its `responder`),
//! client-go's `transport.SetAuthProxyHeaders` and `k8s.io/apiserver/pkg/util/proxy`
//! `ResolveEndpoint` over EndpointSlices (a ready endpoint of a slice labelled
//! `kubernetes.io/service-name`, with the port named as the Service's port). Why the endpoint
//! is dialled on the loopback address: see the module docs of [`super`].

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use super::{Registration, ServiceRef};
use crate::auth::RequestUser;
use crate::auth::user::UserInfo;
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::state::AppState;
use crate::storage::{ObjectRef, prefix};

/// How long dialling a backend may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a backend's discovery answer read (a resource list is a few KiB).
pub const MAX_DISCOVERY_BODY: usize = 10 << 20;
/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Request headers not sent on: the client's credentials and impersonation (consumed by the
/// API server's own filters), hop-by-hop headers, and any `X-Remote-*` the client sent.
fn dropped(name: &str) -> bool {
    matches!(
        name,
        "authorization"
            | "cookie"
            | "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "x-remote-user"
            | "x-remote-uid"
            | "x-remote-group"
    ) || name.starts_with("impersonate-")
        || name.starts_with("x-remote-extra-")
}

/// A backend endpoint: the address its EndpointSlice lists and the port it serves on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The endpoint's address, as listed (`192.0.2.2`).
    pub address: String,
    /// The port of the slice's port named as the Service's port.
    pub port: u16,
}

impl Endpoint {
    /// `address:port`, the `Host` the backend is asked as.
    pub fn host(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]:{}", self.address, self.port)
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }

    /// Where it is dialled: every endpoint is on this machine.
    pub fn dial_address(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }
}

/// Why a Service's endpoint could not be found: the `Available` condition's reason and
/// message, as the `AvailableConditionController` words them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// `ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`, `MissingEndpoints`,
    /// `ServiceAccessError`, `EndpointsAccessError` or `FailedDiscoveryCheck`.
    pub reason: &'static str,
    /// The condition's message.
    pub message: String,
}

/// The endpoint of `svc` given the stored Service (if any) and the EndpointSlices labelled
/// with its name (the availability checks in their order, then `ResolveEndpoint`'s choice:
/// the first ready endpoint of a slice with the port).
pub fn pick_endpoint(
    svc: &ServiceRef,
    service: Option<&Value>,
    slices: &[Value],
) -> std::result::Result<Endpoint, Unresolved> {
    let (name, namespace) = (&svc.name, &svc.namespace);
    let Some(service) = service else {
        return Err(Unresolved {
            reason: "ServiceNotFound",
            message: format!("service/{name} in {} is not present", go_quote(namespace)),
        });
    };
    if service["spec"]["type"].as_str() == Some("ExternalName") {
        return Err(Unresolved {
            reason: "FailedDiscoveryCheck",
            message: format!(
                "service/{name} in {} is of type ExternalName, which is not routed here",
                go_quote(namespace)
            ),
        });
    }
    let port_name = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_i64() == Some(i64::from(svc.port)))
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned());
    let Some(port_name) = port_name else {
        return Err(Unresolved {
            reason: "ServicePortError",
            message: format!(
                "service/{name} in {} is not listening on port {}",
                go_quote(namespace),
                svc.port
            ),
        });
    };
    if slices.is_empty() {
        return Err(Unresolved {
            reason: "EndpointsNotFound",
            message: format!(
                "cannot find endpointslices for service/{name} in {}",
                go_quote(namespace)
            ),
        });
    }
    for slice in slices {
        let port = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        let ready = slice["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["conditions"]["ready"].as_bool() != Some(false))
            .find_map(|e| e["addresses"][0].as_str());
        if let Some(address) = ready {
            return Ok(Endpoint {
                address: address.to_owned(),
                port,
            });
        }
    }
    Err(Unresolved {
        reason: "MissingEndpoints",
        message: format!(
            "endpointslices for service/{name} in {} have no addresses with port name {}",
            go_quote(namespace),
            go_quote(&port_name)
        ),
    })
}

fn go_quote(s: &str) -> String {
    apimachinery::fmt::go_quote(s)
}

/// Reads the Service `svc` names and its EndpointSlices, and picks the endpoint.
pub async fn resolve(
    state: &AppState,
    svc: &ServiceRef,
) -> std::result::Result<Endpoint, Unresolved> {
    let access_error = |reason: &'static str, e: ApiError| Unresolved {
        reason,
        message: format!(
            "service/{} in {} cannot be checked due to: {e}",
            svc.name,
            go_quote(&svc.namespace)
        ),
    };
    let reg = state.registry();
    let (Some(services), Some(slices_info)) = (
        reg.lookup(&GroupVersion::new("", "v1"), "services"),
        reg.lookup(
            &GroupVersion::new("discovery.k8s.io", "v1"),
            "endpointslices",
        ),
    ) else {
        return Err(access_error(
            "ServiceAccessError",
            ApiError::Internal("services are not served".into()),
        ));
    };
    let r = ObjectRef {
        info: services,
        namespace: Some(svc.namespace.clone()),
        name: svc.name.clone(),
    };
    let service = state
        .storage()
        .get(&r)
        .await
        .map_err(|e| access_error("ServiceAccessError", e))?;
    let name = svc.name.clone();
    let keep = move |slice: &Value| {
        slice["metadata"]["labels"][SERVICE_NAME_LABEL].as_str() == Some(name.as_str())
    };
    let page = state
        .storage()
        .list(
            &prefix(&slices_info, Some(&svc.namespace)),
            None,
            None,
            0,
            &keep,
        )
        .await
        .map_err(|e| access_error("EndpointsAccessError", e))?;
    pick_endpoint(svc, service.as_ref(), &page.items)
}

/// `http.Error`'s answer: the text and a newline, `text/plain`, `nosniff`.
pub fn text_error(code: StatusCode, message: &str) -> Response {
    let mut resp = (code, format!("{message}\n")).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `headerKeyEscape`: a key of the user's extra as a header name (characters outside an
/// HTTP token percent-encoded).
pub fn header_key_escape(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        let token = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        if token {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `SetAuthProxyHeaders` (without the UID: `RemoteRequestHeaderUID` is off in 1.33).
pub fn set_auth_proxy_headers(headers: &mut HeaderMap, user: &UserInfo) {
    let stale: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("x-remote-"))
        .cloned()
        .collect();
    for k in stale {
        headers.remove(k);
    }
    if let Ok(v) = HeaderValue::from_str(&user.name) {
        headers.insert("x-remote-user", v);
    }
    for group in &user.groups {
        if let Ok(v) = HeaderValue::from_str(group) {
            headers.append("x-remote-group", v);
        }
    }
    for (key, values) in &user.extra {
        let Ok(name) =
            HeaderName::from_bytes(format!("x-remote-extra-{}", header_key_escape(key)).as_bytes())
        else {
            continue;
        };
        for value in values {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.append(name.clone(), v);
            }
        }
    }
}

/// Go's text for a failed dial of `addr`.
fn dial_error(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        std::io::ErrorKind::TimedOut => format!("dial tcp {addr}: i/o timeout"),
        _ => format!("dial tcp {addr}: connect: {e}"),
    }
}

/// Opens an HTTP/1.1 connection to `endpoint` (its task runs on the server's tracker until
/// either side closes or the server stops).
async fn connect(
    state: &AppState,
    endpoint: &Endpoint,
) -> std::result::Result<hyper::client::conn::http1::SendRequest<Body>, String> {
    let host = endpoint.host();
    let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(endpoint.dial_address()))
        .await
    {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(dial_error(&host, &e)),
        Err(_) => return Err(format!("dial tcp {host}: i/o timeout")),
    };
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| e.to_string())?;
    let shutdown = state.shutdown().clone();
    state.tasks().spawn(async move {
        tokio::select! {
            r = conn => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "aggregated server connection ended");
                }
            }
            () = shutdown.cancelled() => {}
        }
    });
    Ok(sender)
}

/// Serves a request for an aggregated group version (see the module docs of [`super`]).
pub async fn serve(state: AppState, parts: Parts, body: Body) -> Result<Response> {
    let (path, raw_query) = crate::request::path_and_query(&parts.uri, &parts.extensions);
    let Some(registration) =
        super::target(path).and_then(|gv| state.aggregator().remote(state.registry(), &gv))
    else {
        return Err(ApiError::PathNotFound);
    };
    let path_and_query = match raw_query.filter(|q| !q.is_empty()) {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    let user = parts
        .extensions
        .get::<RequestUser>()
        .map(|u| u.user.clone())
        .unwrap_or_else(UserInfo::api_server);
    Ok(forward(&state, &registration, &parts, body, &path_and_query, &user).await)
}

async fn forward(
    state: &AppState,
    registration: &Registration,
    parts: &Parts,
    body: Body,
    path_and_query: &str,
    user: &UserInfo,
) -> Response {
    let unavailable = || text_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
    let Some(svc) = registration
        .service
        .as_ref()
        .filter(|_| registration.available)
    else {
        return unavailable();
    };
    let endpoint = match resolve(state, svc).await {
        Ok(e) => e,
        Err(why) => {
            tracing::info!(apiservice = %registration.name, reason = why.reason, message = %why.message, "error resolving the aggregated server");
            return unavailable();
        }
    };
    let mut sender = match connect(state, &endpoint).await {
        Ok(s) => s,
        Err(e) => {
            state.aggregator().suspect(&registration.name);
            return text_error(StatusCode::SERVICE_UNAVAILABLE, &e);
        }
    };
    let mut req = Request::builder()
        .method(parts.method.clone())
        .uri(path_and_query);
    if let Some(headers) = req.headers_mut() {
        for (k, v) in &parts.headers {
            if !dropped(k.as_str()) {
                headers.append(k.clone(), v.clone());
            }
        }
        if let Ok(h) = HeaderValue::from_str(&endpoint.host()) {
            headers.insert(header::HOST, h);
        }
        set_auth_proxy_headers(headers, user);
    }
    let req = match req.body(body) {
        Ok(r) => r,
        Err(e) => return text_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => {
            state.aggregator().suspect(&registration.name);
            return text_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
        }
    };
    let (head, incoming) = resp.into_parts();
    let mut out = Response::new(Body::new(incoming));
    *out.status_mut() = head.status;
    for (k, v) in &head.headers {
        if !matches!(
            k.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "te" | "trailer" | "upgrade"
        ) {
            out.headers_mut().append(k.clone(), v.clone());
        }
    }
    out
}

/// A plain `GET path` to `endpoint` as `user`, within `timeout`: its status and body, or
/// the error as Go's `http.Client` words it for `url`.
pub async fn get(
    state: &AppState,
    endpoint: &Endpoint,
    path: &str,
    user: &UserInfo,
    timeout: Duration,
) -> std::result::Result<(StatusCode, Bytes), String> {
    let url = format!("http://{}{path}", endpoint.host());
    let attempt = async {
        let mut sender = connect(state, endpoint).await?;
        let mut req = Request::get(path).header(header::HOST, endpoint.host());
        if let Some(headers) = req.headers_mut() {
            headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
            set_auth_proxy_headers(headers, user);
        }
        let req = req.body(Body::empty()).map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_DISCOVERY_BODY)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(format!("Get {}: {e}", go_quote(&url))),
        Err(_) => Err(format!(
            "Get {}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            go_quote(&url)
        )),
    }
}
