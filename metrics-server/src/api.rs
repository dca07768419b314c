//! The HTTP API: `metrics.k8s.io/v1beta1` `nodes` and `pods` (get, list with label and field
//! selectors, Tables), the group's discovery, and the health checks.
//!
//! Mirrors metrics-server's `pkg/api/node.go` and `pod.go` (a list walks the node or running
//! pod lister with the label selector, filters by the field selector and returns the items
//! with metrics, sorted by name, or namespace and name; a get of an object without metrics is
//! a 404 of `nodemetrics`/`podmetrics`, of a missing object the lister's own `node "x" not
//! found` / `pods "x" not found`) as k8s.io/apiserver serves them: errors as `Status`
//! objects, other methods 405, `watch` 405 (`watch is not supported on resources of kind
//! ...`), `/readyz` failing until some node or pod has two points.
//!
//! Requests come from the API server's aggregator with the user in `X-Remote-User` (logged);
//! simplification: they are not authenticated (plain HTTP on the loopback address) nor
//! authorized again (the API server authorized them).
//!
//! ```text
//!   GET /apis/metrics.k8s.io/v1beta1/nodes[/NAME]
//!   GET /apis/metrics.k8s.io/v1beta1/pods                      (all namespaces)
//!   GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods[/NAME]
//!       ?labelSelector=app=web&fieldSelector=metadata.name=web-1
//!   GET /apis, /apis/metrics.k8s.io, /apis/metrics.k8s.io/v1beta1   (discovery)
//!   GET /healthz, /livez, /readyz
//! ```

use std::sync::{Arc, RwLock};

use apimachinery::labels::Selector;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use client::SharedIndexInformer;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::objects::{self, FieldRequirement};
use crate::storage::Storage;

/// What the handlers read: the stored points and the node and running-pod listers.
pub struct Shared {
    /// The last two points of everything.
    pub storage: RwLock<Storage>,
    /// Every Node.
    pub nodes: SharedIndexInformer<Node>,
    /// The pods in phase Running.
    pub pods: SharedIndexInformer<Pod>,
    /// The cluster's clock (its virtual one when it runs on one), for the objects' times.
    pub clock: client::SharedClock,
}

/// The routes over `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// A `Status` failure.
pub fn status(code: StatusCode, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    });
    if let Some(d) = details {
        body["details"] = d;
    }
    body["code"] = json!(code.as_u16());
    json_response(code, &body)
}

fn json_response(code: StatusCode, body: &Value) -> Response {
    let mut resp = (code, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn not_found(group: &str, resource: &str, name: &str) -> Response {
    let qualified = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    let mut details = json!({"name": name, "kind": resource});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!(
            "{qualified} {} not found",
            apimachinery::fmt::go_quote(name)
        ),
        Some(details),
    )
}

fn path_not_found() -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

fn bad_request(message: &str) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message, None)
}

/// The query's parameters (percent-decoded).
fn params(uri: &Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| {
            form_urlencoded::parse(q.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// What a list asks for.
struct ListOptions {
    labels: Selector,
    fields: Vec<FieldRequirement>,
}

fn list_options(uri: &Uri, namespaced: bool) -> Result<ListOptions, Box<Response>> {
    let params = params(uri);
    let get = |k: &str| {
        params
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let labels = match get("labelSelector") {
        Some(s) => Selector::parse(s).map_err(|e| Box::new(bad_request(&e.to_string())))?,
        None => Selector::everything(),
    };
    let fields = objects::parse_field_selector(get("fieldSelector").unwrap_or(""), namespaced)
        .map_err(|e| Box::new(bad_request(&e)))?;
    Ok(ListOptions { labels, fields })
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

fn is_watch(uri: &Uri) -> bool {
    params(uri)
        .iter()
        .any(|(k, v)| k == "watch" && matches!(v.as_str(), "true" | "1" | "t" | "True" | "TRUE"))
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path().to_owned();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if method != Method::GET && method != Method::HEAD {
        return match segs.as_slice() {
            ["apis", objects::GROUP, objects::VERSION, ..] => status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                Some(json!({})),
            ),
            _ => path_not_found(),
        };
    }
    if let Some(user) = headers.get("x-remote-user").and_then(|v| v.to_str().ok()) {
        tracing::debug!(user, %path, "request");
    }
    let table = wants_table(&headers);
    match segs.as_slice() {
        ["healthz" | "livez"] => "ok".into_response(),
        ["readyz"] => {
            if shared
                .storage
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .ready()
            {
                "ok".into_response()
            } else {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "[-]metric-storage-ready failed: reason withheld\nreadyz check failed\n",
                )
                    .into_response()
            }
        }
        ["apis"] => json_response(StatusCode::OK, &objects::group_list()),
        ["apis", objects::GROUP] => json_response(StatusCode::OK, &objects::group()),
        ["apis", objects::GROUP, objects::VERSION] => {
            json_response(StatusCode::OK, &objects::resource_list())
        }
        ["apis", objects::GROUP, objects::VERSION, "nodes"] => {
            if is_watch(&uri) {
                return watch_unsupported("nodes");
            }
            match list_options(&uri, false) {
                Ok(opts) => respond_list(&shared.list_nodes(&opts), "NodeMetrics", table),
                Err(resp) => *resp,
            }
        }
        ["apis", objects::GROUP, objects::VERSION, "nodes", name] => {
            respond_one(shared.get_node(name), "NodeMetrics", table)
        }
        ["apis", objects::GROUP, objects::VERSION, "pods"] => {
            if is_watch(&uri) {
                return watch_unsupported("pods");
            }
            match list_options(&uri, true) {
                Ok(opts) => respond_list(&shared.list_pods(None, &opts), "PodMetrics", table),
                Err(resp) => *resp,
            }
        }
        [
            "apis",
            objects::GROUP,
            objects::VERSION,
            "namespaces",
            ns,
            "pods",
        ] => {
            if is_watch(&uri) {
                return watch_unsupported("pods");
            }
            match list_options(&uri, true) {
                Ok(opts) => respond_list(&shared.list_pods(Some(ns), &opts), "PodMetrics", table),
                Err(resp) => *resp,
            }
        }
        [
            "apis",
            objects::GROUP,
            objects::VERSION,
            "namespaces",
            ns,
            "pods",
            name,
        ] => respond_one(shared.get_pod(ns, name), "PodMetrics", table),
        _ => path_not_found(),
    }
}

fn watch_unsupported(resource: &str) -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!(
            "watch is not supported on resources of kind \"{resource}.{}\"",
            objects::GROUP
        ),
        Some(json!({"group": objects::GROUP, "kind": resource})),
    )
}

fn respond_list(items: &[Value], kind: &str, table: bool) -> Response {
    if table {
        return json_response(StatusCode::OK, &objects::table(items));
    }
    json_response(StatusCode::OK, &objects::list(kind, items.to_vec()))
}

fn respond_one(found: Result<Value, Box<Response>>, kind: &str, table: bool) -> Response {
    match found {
        Ok(item) if table => json_response(StatusCode::OK, &objects::table(&[item])),
        Ok(item) => json_response(StatusCode::OK, &objects::single(kind, item)),
        Err(resp) => *resp,
    }
}

impl Shared {
    fn list_nodes(&self, opts: &ListOptions) -> Vec<Value> {
        let now = self.clock.wall();
        let storage = self.storage.read().unwrap_or_else(|p| p.into_inner());
        let mut nodes = self.nodes.indexer().list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        nodes
            .iter()
            .filter(|n| {
                let labels = n.metadata.labels.clone().unwrap_or_default();
                opts.labels.matches(&labels)
                    && objects::fields_match(
                        &opts.fields,
                        n.metadata.name.as_deref().unwrap_or_default(),
                        "",
                    )
            })
            .filter_map(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let usage = storage.node(name)?;
                Some(objects::node_metrics(
                    name,
                    n.metadata.labels.as_ref(),
                    &usage,
                    now,
                ))
            })
            .collect()
    }

    fn get_node(&self, name: &str) -> Result<Value, Box<Response>> {
        let key = apimachinery::ObjectKey::new(None::<&str>, name);
        let Some(node) = self.nodes.get(&key) else {
            return Err(Box::new(not_found("", "node", name)));
        };
        let storage = self.storage.read().unwrap_or_else(|p| p.into_inner());
        let usage = storage
            .node(name)
            .ok_or_else(|| Box::new(not_found(objects::GROUP, "nodemetrics", name)))?;
        Ok(objects::node_metrics(
            name,
            node.metadata.labels.as_ref(),
            &usage,
            self.clock.wall(),
        ))
    }

    fn list_pods(&self, namespace: Option<&str>, opts: &ListOptions) -> Vec<Value> {
        let now = self.clock.wall();
        let storage = self.storage.read().unwrap_or_else(|p| p.into_inner());
        let mut pods: Vec<_> = self
            .pods
            .indexer()
            .list()
            .into_iter()
            .filter(|p| namespace.is_none_or(|ns| p.metadata.namespace.as_deref() == Some(ns)))
            .collect();
        let key = |p: &Pod| (p.metadata.namespace.clone(), p.metadata.name.clone());
        pods.sort_by_key(|p| key(p));
        pods.iter()
            .filter(|p| {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                opts.labels.matches(&labels)
                    && objects::fields_match(
                        &opts.fields,
                        p.metadata.name.as_deref().unwrap_or_default(),
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                    )
            })
            .filter_map(|p| {
                let ns = p.metadata.namespace.as_deref().unwrap_or_default();
                let name = p.metadata.name.as_deref().unwrap_or_default();
                let usage = storage.pod(ns, name)?;
                Some(objects::pod_metrics(
                    ns,
                    name,
                    p.metadata.labels.as_ref(),
                    &usage,
                    now,
                ))
            })
            .collect()
    }

    fn get_pod(&self, namespace: &str, name: &str) -> Result<Value, Box<Response>> {
        let key = apimachinery::ObjectKey::new(Some(namespace), name);
        let Some(pod) = self.pods.get(&key) else {
            return Err(Box::new(not_found("", "pods", name)));
        };
        let storage = self.storage.read().unwrap_or_else(|p| p.into_inner());
        let usage = storage.pod(namespace, name).ok_or_else(|| {
            Box::new(not_found(
                objects::GROUP,
                "podmetrics",
                &format!("{namespace}/{name}"),
            ))
        })?;
        Ok(objects::pod_metrics(
            namespace,
            name,
            pod.metadata.labels.as_ref(),
            &usage,
            self.clock.wall(),
        ))
    }
}
