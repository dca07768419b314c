//! The connect subresources: requests the API server answers by reaching the pod's node, its
//! kubelet — `pods/{name}/log`, `exec`, `attach`, `portforward` and `nodes/{name}/proxy/{path}`.
//!
//! Mirrors `pkg/registry/core/pod/rest/log.go` and `subresources.go` (`LogREST`, `ExecREST`,
//! `AttachREST`, `PortForwardREST`), `pkg/registry/core/pod/strategy.go` (`LogLocation`,
//! `streamLocation`, `PortForwardLocation`: which container, which node, which kubelet path),
//! `pkg/registry/core/node/rest/proxy.go` + `node/strategy.go` `ResourceLocation`, and
//! `pkg/kubelet/client/kubelet_client.go` `GetConnectionInfo` (the node's kubelet port from
//! `status.daemonEndpoints.kubeletEndpoint.port`).
//!
//! ```text
//!   GET pods/web-1/log?container=c&follow=true
//!     pod missing ─▶ 404 · options invalid ─▶ 400/422 (ValidatePodLogOptions)
//!     container "" with 2 containers ─▶ 400 "a container name must be specified for pod web-1, choose one of: [a b]"
//!     container not in the pod ─▶ 400 "container x is not valid for pod web-1"
//!     not scheduled ─▶ 200 with an empty body (no node to ask)
//!     else ─▶ GET http(s)://127.0.0.1:<kubelet port>/containerLogs/ns/web-1/c?follow=true  (proxy)
//!   GET|POST pods/web-1/exec?command=sh&stdin=true&tty=true  (Upgrade: websocket | SPDY/3.1)
//!     no command ─▶ 400 "you must specify at least one command for the container"
//!     not scheduled ─▶ 400 "pod web-1 does not have a host assigned"
//!     else ─▶ /exec/ns/web-1/c?command=sh&input=1&tty=1 ─▶ 101, then bytes both ways (proxy)
//!   pods/web-1/attach ─▶ /attach/ns/web-1/c · pods/web-1/portforward ─▶ /portForward/ns/web-1
//!   nodes/node-0/proxy/stats/summary ─▶ /stats/summary on node-0's kubelet
//! ```
//!
//! With `--kubelet-client-certificate`, `--kubelet-client-key` and
//! `--kubelet-certificate-authority` ([`tls::KubeletClientTls`]) the kubelet is dialled over
//! HTTPS, presenting that client certificate and verifying the kubelet's serving certificate
//! with that CA, as kube-apiserver does on a kubeadm cluster; without them, plain HTTP.
//!
//! Simplifications, all of them because every simulated kubelet runs on this machine: the
//! kubelet is dialled on the loopback address at the node's kubelet port (not the node's
//! `InternalIP`), its certificate verified for `127.0.0.1`, and the simulated kubelet tells
//! its nodes apart by the `Host` header (`NODE:PORT`). The kubelet
//! speaks every streaming protocol kubectl offers itself (WebSocket `v5.channel.k8s.io` and
//! `SPDY/3.1`), so the API server splices bytes instead of translating WebSocket to SPDY as
//! kube-apiserver's `StreamTranslator` does.

pub mod proxy;
pub mod tls;

use crate::auth::RequestUser;
use crate::error::{ApiError, ErrorTarget, Result};
use crate::gvk::GroupVersion;
use crate::handlers::object_ref;
use crate::request::{Query, ResourcePath};
use crate::request_trace;
use crate::state::AppState;
use crate::strategy::{FieldError, FieldErrorKind};
use apimachinery::pod_log_options::{LogOptions, StatusReason};
use axum::body::Body;
use axum::http::{Method, request::Parts};
use axum::response::Response;
use k8s_openapi::api::core::v1::{Node, Pod};

/// Whether `resource/{name}/{sub}` is a connect subresource served here.
pub fn is_connect(resource: &str, sub: &str) -> bool {
    matches!(
        (resource, sub),
        ("pods", "log" | "exec" | "attach" | "portforward") | ("nodes", "proxy")
    )
}

/// Where a connect request goes: the node's kubelet and the request line to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The resource asked for: `pods` or `nodes`.
    pub resource: String,
    /// The connect subresource: `log`, `exec`, `attach`, `portforward` or `proxy`.
    pub subresource: String,
    /// The node's name (sent as the `Host`).
    pub node: String,
    /// The kubelet's port on the node.
    pub port: u16,
    /// Path and query on the kubelet, e.g. `/containerLogs/default/web-1/c?follow=true`.
    pub path_and_query: String,
}

/// Serves a connect request (the route's path and, for `nodes/proxy`, the path after
/// `proxy/`); the response streams what the kubelet sends, or, after `101 Switching
/// Protocols`, the connection carries bytes both ways until either side closes.
pub async fn serve(
    state: AppState,
    parts: Parts,
    body: Body,
    path: ResourcePath,
    tail: Option<String>,
    query: Query,
) -> Result<Response> {
    let mut trace = if state.options().tracing.enabled {
        request_trace::begin(&parts.method, &path, false, &parts.headers, |id| {
            state.collector().samples(id)
        })
    } else {
        None
    };
    if let (Some(t), Some(who)) = (trace.as_mut(), parts.extensions.get::<RequestUser>()) {
        t.set_attribute("user", &who.user.name);
    }
    let located = locate(&state, &parts, &path, tail, &query).await;
    let result = match located {
        Err(e) => Err(e),
        // `LogLocation` without a node: the stream is empty.
        Ok(None) => Ok(proxy::empty_log()),
        Ok(Some(location)) => {
            if let Some(t) = trace.as_mut() {
                t.set_attribute("node", &location.node);
                let tls = state.options().kubelet_client.is_some();
                t.set_attribute("kubelet", &proxy::kubelet_url(&location, tls));
            }
            proxy::forward(&state, parts, body, location).await
        }
    };
    if let Some(t) = trace {
        let (code, error) = match &result {
            Ok(resp) => (resp.status(), None),
            Err(e) => (e.code(), Some(format!("{}: {e}", e.reason()))),
        };
        if let Some(span) = t.finish(code, error) {
            state.collector().record(span);
        }
    }
    result
}

/// Which kubelet a connect request goes to, and what it asks there (`None`: the log of a
/// pod no node runs).
async fn locate(
    state: &AppState,
    parts: &Parts,
    path: &ResourcePath,
    tail: Option<String>,
    query: &Query,
) -> Result<Option<Location>> {
    let name = path.name.clone().unwrap_or_default();
    let sub = path.subresource.clone().unwrap_or_default();
    if path.gv != GroupVersion::new("", "v1") {
        return Err(ApiError::PathNotFound);
    }
    allowed_method(&path.resource, &sub, &parts.method)?;
    match path.resource.as_str() {
        "pods" => {
            let pod = get::<Pod>(state, path, &name).await?;
            pod_location(state, &pod, &sub, query).await
        }
        "nodes" => {
            let (node_name, port) = match name.split_once(':') {
                Some((n, p)) => (n.to_string(), p.parse::<u16>().ok()),
                None => (name.clone(), None),
            };
            let node = get::<Node>(state, path, &node_name).await?;
            let port = match port {
                Some(p) => p,
                None => kubelet_port(&node)?,
            };
            let rest = tail.unwrap_or_default();
            let raw = crate::request::path_and_query(&parts.uri, &parts.extensions).1;
            let path_and_query = match raw.filter(|q| !q.is_empty()) {
                Some(q) => format!("/{rest}?{q}"),
                None => format!("/{rest}"),
            };
            Ok(Some(Location {
                resource: "nodes".into(),
                subresource: "proxy".into(),
                node: node_name,
                port,
                path_and_query,
            }))
        }
        _ => Err(ApiError::PathNotFound),
    }
}

/// The verbs each connect subresource registers (`rest.Connecter.ConnectMethods`): 405 for
/// the others, as Kubernetes answers them.
fn allowed_method(resource: &str, sub: &str, method: &Method) -> Result<()> {
    let ok = match (resource, sub) {
        ("pods", "log") => matches!(*method, Method::GET | Method::HEAD),
        ("pods", _) => matches!(*method, Method::GET | Method::POST),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        )))
    }
}

async fn get<T: serde::de::DeserializeOwned>(
    state: &AppState,
    path: &ResourcePath,
    name: &str,
) -> Result<T> {
    let info = state
        .registry()
        .lookup(&path.gv, &path.resource)
        .ok_or(ApiError::PathNotFound)?;
    let r = object_ref(&info, path, name);
    match state.storage().get(&r).await? {
        Some(v) => serde_json::from_value(v)
            .map_err(|e| ApiError::Internal(format!("stored object does not decode: {e}"))),
        None => Err(r.not_found()),
    }
}

/// The kubelet of a pod's node and the request to send it; `None` for the log of a pod that
/// no node runs yet.
async fn pod_location(
    state: &AppState,
    pod: &Pod,
    sub: &str,
    query: &Query,
) -> Result<Option<Location>> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    let (path, params) = match sub {
        "log" => {
            let raw = query.encoded_without(&["container"]);
            LogOptions::parse(&raw, &name).map_err(|e| match e.reason {
                StatusReason::BadRequest => ApiError::BadRequest(e.message),
                StatusReason::Invalid => invalid_log_options(&name, &e.causes),
            })?;
            let container = validate_container(pod, query.get("container").unwrap_or(""), false)?;
            let Some(_) = &node_name else {
                return Ok(None);
            };
            (
                format!("/containerLogs/{namespace}/{name}/{container}"),
                raw,
            )
        }
        "exec" | "attach" => {
            let container = validate_container(pod, query.get("container").unwrap_or(""), true)?;
            if node_name.is_none() {
                return Err(ApiError::BadRequest(format!(
                    "pod {name} does not have a host assigned"
                )));
            }
            let commands: Vec<&str> = query.all("command").collect();
            if sub == "exec" && commands.is_empty() {
                return Err(ApiError::BadRequest(
                    "you must specify at least one command for the container".into(),
                ));
            }
            let mut params = form_urlencoded::Serializer::new(String::new());
            for (flag, param) in [
                ("stdin", "input"),
                ("stdout", "output"),
                ("stderr", "error"),
                ("tty", "tty"),
            ] {
                if query.flag(flag)? {
                    params.append_pair(param, "1");
                }
            }
            if sub == "exec" {
                for c in commands {
                    params.append_pair("command", c);
                }
            }
            let kubelet_path = if sub == "exec" { "exec" } else { "attach" };
            (
                format!("/{kubelet_path}/{namespace}/{name}/{container}"),
                params.finish(),
            )
        }
        "portforward" => {
            if node_name.is_none() {
                return Err(ApiError::BadRequest(format!(
                    "pod {name} does not have a host assigned"
                )));
            }
            let mut params = form_urlencoded::Serializer::new(String::new());
            for p in query.all("ports") {
                for port in p.split(',').filter(|p| !p.is_empty()) {
                    params.append_pair("port", port);
                }
            }
            (format!("/portForward/{namespace}/{name}"), params.finish())
        }
        _ => return Err(ApiError::PathNotFound),
    };
    let Some(node_name) = node_name else {
        return Ok(None);
    };
    let node_path = ResourcePath {
        gv: GroupVersion::new("", "v1"),
        namespace: None,
        resource: "nodes".into(),
        name: Some(node_name.clone()),
        subresource: None,
    };
    let node = get::<Node>(state, &node_path, &node_name).await?;
    let port = kubelet_port(&node)?;
    let path_and_query = if params.is_empty() {
        path
    } else {
        format!("{path}?{params}")
    };
    Ok(Some(Location {
        resource: "pods".into(),
        subresource: sub.to_string(),
        node: node_name,
        port,
        path_and_query,
    }))
}

/// `PodLogOptions "web-1" is invalid: ...`: 422 with a cause per field error.
fn invalid_log_options(pod: &str, causes: &[String]) -> ApiError {
    let errors = causes
        .iter()
        .map(|cause| {
            let (field, body) = match cause.split_once(": ") {
                Some((f, b)) if !f.contains(' ') && f != "Forbidden" => (f, b),
                _ => ("", cause.as_str()),
            };
            let (kind, value, detail) = if let Some(rest) = body.strip_prefix("Invalid value: ") {
                let (v, d) = rest.split_once(": ").unwrap_or((rest, ""));
                (FieldErrorKind::Invalid, Some(v.to_string()), d)
            } else {
                let d = body.strip_prefix("Forbidden: ").unwrap_or(body);
                (FieldErrorKind::Forbidden, None, d)
            };
            FieldError {
                kind,
                field: field.to_string(),
                value,
                detail: detail.to_string(),
            }
        })
        .collect();
    ApiError::Invalid {
        target: ErrorTarget {
            group: String::new(),
            resource: "pods".into(),
            kind: "PodLogOptions".into(),
            name: pod.to_string(),
        },
        errors,
    }
}

/// `status.daemonEndpoints.kubeletEndpoint.port` (`GetConnectionInfo`).
fn kubelet_port(node: &Node) -> Result<u16> {
    let port = node
        .status
        .as_ref()
        .and_then(|s| s.daemon_endpoints.as_ref())
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|e| e.port)
        .unwrap_or(0);
    u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "node {} has no kubelet endpoint",
            node.metadata.name.as_deref().unwrap_or("")
        ))
    })
}

/// The container a request names, or the pod's only one (`validateContainer` /
/// `streamLocation`): init and ephemeral containers may be named too.
pub fn validate_container(pod: &Pod, container: &str, stream: bool) -> Result<String> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let spec = pod.spec.as_ref();
    let names = |v: Option<Vec<String>>| v.unwrap_or_default().join(" ");
    let containers: Vec<String> = spec
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let init: Vec<String> = spec
        .and_then(|s| s.init_containers.as_ref())
        .map(|v| v.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let ephemeral: Vec<String> = spec
        .and_then(|s| s.ephemeral_containers.as_ref())
        .map(|v| v.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    if container.is_empty() {
        return match containers.len() {
            1 => Ok(containers[0].clone()),
            0 if stream => Err(ApiError::BadRequest(format!(
                "pod {name} does not have any containers"
            ))),
            _ => {
                let mut err = format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names(Some(containers))
                );
                if !init.is_empty() {
                    err += &format!(" or one of the init containers: [{}]", names(Some(init)));
                }
                if !stream && !ephemeral.is_empty() {
                    err += &format!(
                        " or one of the ephemeral containers: [{}]",
                        names(Some(ephemeral))
                    );
                }
                Err(ApiError::BadRequest(err))
            }
        };
    }
    let known = containers
        .iter()
        .chain(&init)
        .chain(&ephemeral)
        .any(|c| c == container);
    if known {
        Ok(container.to_string())
    } else {
        Err(ApiError::BadRequest(format!(
            "container {container} is not valid for pod {name}"
        )))
    }
}

#[cfg(test)]
mod tests;
