//! core/v1 ComponentStatus: `kubectl get componentstatuses` (`cs`), read-only and computed on
//! every request, as kube-apiserver's `pkg/registry/core/componentstatus` (`rest.go`,
//! `validator.go`) serves it, with `printComponentStatus`' table.
//!
//! ```text
//!   GET /api/v1/componentstatuses[/{name}]          (deprecated in v1.19+: a Warning header)
//!     scheduler           GET http://127.0.0.1:10259/healthz ─┐ all at once, each within
//!     controller-manager  GET http://127.0.0.1:10257/healthz ─┤ 20 s
//!     etcd-0              a read of the store ────────────────┘
//!   → {name, conditions: [{type: Healthy, status: True|False|Unknown, message, error}]}
//! ```
//!
//! A 2xx/3xx answer is `True` with the body as the message (`ok`); another code is `False`
//! with `HTTP probe failed with statuscode: N`; a refused connection is `False` with Go's
//! wording of the error (`Get "http://…/healthz": dial tcp …: connect: connection refused`).
//! Simplifications: the probes speak plain HTTP (kube-apiserver uses HTTPS to these ports),
//! and a name that is not a component is a 404 `NotFound` (kube-apiserver answers 500
//! "Component not found"). Where the components listen is [`crate::ComponentProbes`]: Kubernetes'
//! fixed ports unless whoever started them says otherwise (`miniplane up` does, for
//! components on free ports).

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::response::Response;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::{RequestContext, add_warnings, object_response};
use crate::error::{ApiError, ErrorTarget, Result};
use crate::registry::ResourceInfo;
use crate::response::json_response;
use crate::state::AppState;

/// How long one probe may take (`probeTimeOut` of `validator.go`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// The warning every request gets (`deprecation.WarningMessage` for a kind marked
/// `+k8s:prerelease-lifecycle-gen:deprecated=1.19`).
pub const DEPRECATION_WARNING: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// The store's entry in the list (kube-apiserver names each etcd server `etcd-<i>`).
const STORE: &str = "etcd-0";

/// Whether `info` is the `componentstatuses` row (its requests are served here, not from the store).
pub fn is_component_status(info: &ResourceInfo) -> bool {
    info.gvr.group.is_empty() && info.gvr.resource == "componentstatuses"
}

/// Serves a request to `componentstatuses`: list or get, every other verb refused.
pub async fn serve(ctx: RequestContext, info: std::sync::Arc<ResourceInfo>) -> Result<Response> {
    if ctx.method != Method::GET || ctx.path.subresource.is_some() || ctx.query.flag("watch")? {
        let verb = match (&ctx.method, ctx.query.flag("watch")?) {
            (&Method::GET, true) => "watch",
            (&Method::GET, false) => "get",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, _) => "delete",
            _ => "request",
        };
        return Err(ApiError::MethodNotAllowed(format!(
            "{verb} is not supported on resources of kind \"componentstatuses\""
        )));
    }
    let probes = ctx.state.options().component_probes.snapshot();
    let warnings = [DEPRECATION_WARNING.to_owned()];
    match ctx.path.name.clone() {
        Some(name) => {
            let status = if name == STORE {
                store_status(&ctx.state).await
            } else {
                let addr = probes.get(&name).ok_or_else(|| ApiError::NotFound {
                    target: ErrorTarget {
                        group: String::new(),
                        resource: "componentstatuses".into(),
                        kind: "ComponentStatus".into(),
                        name: name.clone(),
                    },
                })?;
                component_status(&name, probe_http(*addr).await)
            };
            object_response(&ctx, &info, StatusCode::OK, &status, &warnings)
        }
        None => {
            let components = probes
                .into_iter()
                .map(|(name, addr)| async move { component_status(&name, probe_http(addr).await) });
            let (mut items, store) = tokio::join!(
                futures::future::join_all(components),
                store_status(&ctx.state)
            );
            items.push(store);
            items.sort_by(|a, b| {
                a["metadata"]["name"]
                    .as_str()
                    .cmp(&b["metadata"]["name"].as_str())
            });
            list_response(&ctx, &info, items, &warnings)
        }
    }
}

/// The list, as JSON or as a Table (the list has no resourceVersion: nothing is stored).
fn list_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    items: Vec<Value>,
    warnings: &[String],
) -> Result<Response> {
    let mut resp = if ctx.accept.table {
        json_response(
            StatusCode::OK,
            &crate::table::table(
                info,
                &items,
                json!({}),
                ctx.include_object()?,
                true,
                ctx.state.now(),
            ),
        )
    } else {
        json_response(
            StatusCode::OK,
            &json!({
                "kind": "ComponentStatusList",
                "apiVersion": "v1",
                "metadata": {},
                "items": items,
            }),
        )
    };
    add_warnings(&mut resp, warnings);
    Ok(resp)
}

/// What a probe found (`probe.Result` with its message and error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// The body of a successful probe, or why it failed.
    pub message: String,
    /// An error that kept the probe from deciding.
    pub error: String,
}

/// A ComponentStatus object for `name`.
pub fn component_status(name: &str, probed: Probed) -> Value {
    let mut condition = json!({"type": "Healthy", "status": probed.status});
    if !probed.message.is_empty() {
        condition["message"] = json!(probed.message);
    }
    if !probed.error.is_empty() {
        condition["error"] = json!(probed.error);
    }
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    })
}

/// The store's entry: a read of one key, as kube-apiserver's etcd check does a `Get` of
/// `<--etcd-prefix>/health` (`storagebackend/factory/etcd3.go`).
async fn store_status(state: &AppState) -> Value {
    let backend = state.storage().backend();
    let checkpoint = backend.checkpoint_health();
    let probed = match backend.get(b"/registry/health", None).await {
        Err(e) => Probed {
            status: "False",
            message: String::new(),
            error: e.to_string(),
        },
        Ok(_) if checkpoint.as_ref().is_some_and(|c| !c.healthy()) => Probed {
            status: "False",
            message: String::new(),
            error: "the store's checkpoints are failing".into(),
        },
        Ok(_) => Probed {
            status: "True",
            message: "ok".into(),
            error: String::new(),
        },
    };
    component_status(STORE, probed)
}

/// `GET http://<addr>/healthz`, judged as Kubernetes' HTTP prober judges it.
pub async fn probe_http(addr: SocketAddr) -> Probed {
    let url = format!("http://{addr}/healthz");
    match tokio::time::timeout(PROBE_TIMEOUT, get(addr)).await {
        Err(_) => failure(format!(
            "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
        Ok(Err(GetError::Connect(e))) => failure(format!(
            "Get \"{url}\": dial tcp {addr}: connect: {}",
            go_errno_text(&e)
        )),
        Ok(Err(GetError::Http(e))) => failure(format!("Get \"{url}\": {e}")),
        Ok(Ok((code, body))) if (200..400).contains(&code) => Probed {
            status: "True",
            message: body,
            error: String::new(),
        },
        Ok(Ok((code, _))) => failure(format!("HTTP probe failed with statuscode: {code}")),
    }
}

fn failure(message: String) -> Probed {
    Probed {
        status: "False",
        message,
        error: String::new(),
    }
}

/// Go's text of a socket error (`connection refused`, not Rust's `Connection refused (os
/// error 111)`).
fn go_errno_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::ConnectionReset => "connection reset by peer".into(),
        _ => e.to_string(),
    }
}

enum GetError {
    Connect(std::io::Error),
    Http(String),
}

/// One HTTP/1.1 GET of `/healthz`: the status code and the body (at most 64 KiB).
async fn get(addr: SocketAddr) -> std::result::Result<(u16, String), GetError> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(GetError::Connect)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| GetError::Http(e.to_string()))?;
    let driver = tokio::spawn(connection);
    let request = Request::get("/healthz")
        .header("host", addr.to_string())
        .header("user-agent", "kube-probe/1.33")
        .body(Body::empty())
        .map_err(|e| GetError::Http(e.to_string()))?;
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| GetError::Http(e.to_string()))?;
        let code = response.status().as_u16();
        let body = axum::body::to_bytes(Body::new(response.into_body()), 64 * 1024)
            .await
            .map_err(|e| GetError::Http(e.to_string()))?;
        Ok((code, String::from_utf8_lossy(&body).into_owned()))
    }
    .await;
    driver.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ComponentProbes;
    use crate::strategy::Strategy;
    use crate::strategy::componentstatus::ComponentStatusStrategy;

    #[tokio::test]
    async fn a_refused_connection_is_unhealthy_in_go_words() {
        // A port just freed: nothing listens there.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let probed = probe_http(addr).await;
        assert_eq!(probed.status, "False");
        assert_eq!(
            probed.message,
            format!("Get \"http://{addr}/healthz\": dial tcp {addr}: connect: connection refused")
        );
        assert_eq!(probed.error, "");
    }

    #[test]
    fn table_rows_as_kubectl_prints_them() {
        let s = ComponentStatusStrategy;
        let now = jiff::Timestamp::now();
        let ok = component_status(
            "scheduler",
            Probed {
                status: "True",
                message: "ok".into(),
                error: String::new(),
            },
        );
        assert_eq!(
            s.table_row(&ok, now),
            vec![json!("Healthy"), json!("ok"), json!("")]
        );
        let bad = component_status("etcd-0", failure("down".into()));
        assert_eq!(
            s.table_row(&bad, now),
            vec![json!("Unhealthy"), json!("down"), json!("")]
        );
        assert_eq!(
            s.table_columns()
                .iter()
                .map(|c| c.name.as_ref())
                .collect::<Vec<_>>(),
            ["Status", "Message", "Error"]
        );
    }

    #[test]
    fn default_probes_are_kubernetes_ports() {
        let probes = ComponentProbes::default().snapshot();
        assert_eq!(probes["scheduler"].port(), 10259);
        assert_eq!(probes["controller-manager"].port(), 10257);
    }
}
