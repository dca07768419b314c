//! The kubelet's HTTP API for the simulated nodes: what the API server reaches for
//! `kubectl logs`, `exec`, `attach`, `cp` and `port-forward`, what metrics-server scrapes, and
//! what `nodes/NAME/proxy/...` shows.
//!
//! Mirrors `pkg/kubelet/server/server.go` (the routes, their texts and codes) with the CRI
//! streaming server behind it (`pkg/kubelet/cri/streaming/{remotecommand,portforward}`), the
//! Summary API (`pkg/kubelet/server/stats`, `k8s.io/kubelet/pkg/apis/stats/v1alpha1`) and the
//! resource metrics collector (`pkg/kubelet/metrics/collectors/resource_metrics.go`).
//!
//! One listener per simulator process serves all of its nodes. Every Node advertises the
//! bound port as `status.daemonEndpoints.kubeletEndpoint.port`; the API server dials
//! `127.0.0.1:<that port>` and names the node in the `Host` header, `Host: <node name>:<port>`,
//! as if it had dialed the node's own address.
//!
//! | request | answer | file |
//! | --- | --- | --- |
//! | `GET /healthz` | `ok` | here |
//! | `GET /pods` | the `PodList` of the node the `Host` names | [`pods`] |
//! | `GET /containerLogs/{ns}/{pod}/{container}?follow&previous&sinceSeconds&sinceTime&tailLines&timestamps&limitBytes` | the log, streamed with `follow` until the run ends | [`logs`] |
//! | `GET/POST /exec/{ns}/{pod}[/{uid}]/{container}?command=..&input=1&output=1&error=1&tty=1` | WebSocket or SPDY/3.1 upgrade, the command run in the container's shell | [`exec`], [`remotecommand`] |
//! | `GET/POST /attach/{ns}/{pod}[/{uid}]/{container}?input=1&output=1&...` | the same upgrade, joined to the container's main process | [`attach`] |
//! | `GET/POST /portForward/{ns}/{pod}[/{uid}]` | WebSocket (`?port=N`), SPDY `portforward.k8s.io`, or SPDY tunnelled in WebSocket (`SPDY/3.1+portforward.k8s.io`) | [`portforward`], [`ports`] |
//! | `GET /stats/summary` | the Summary API | [`summary`] |
//! | `GET /metrics/resource` | the resource metrics, Prometheus text | [`metrics`] |
//! | anything else | 404 `404 page not found` (Go's mux), or go-restful's `404: Page Not Found` under a known root | here |
//!
//! Node-scoped paths (`/pods`, `/stats/summary`, `/metrics/resource`) take their node from the
//! `Host` header; with a `Host` that names no simulated node (`127.0.0.1:PORT`) they answer for
//! the only node of a one-node simulator, and 404 otherwise. Pod paths look the pod up in the
//! pod informer the pod workers keep, among the pods bound to this process's nodes (to the
//! `Host`'s node alone when it names one), as the kubelet's `GetPodByName` looks among its own.
//!
//! Every open exec, attach, port-forward or followed log is an open stream
//! ([`KubeletServer::open_streams`], also [`crate::SimHandle::open_streams`]); each ends when
//! its client goes away or the simulator shuts down, and the server waits for all of them
//! before it returns.
//!
//! A container's process that ends through a stream — PID 1 signalled by `kill` in an exec'd
//! shell, or a main process that is a shell ending through `attach` — is reported to the pod
//! workers ([`KubeletServer::process_exited`]), which end that run as a runtime would. Files
//! copied in with `kubectl cp` belong to one run: they go with it, and with the pod when it is
//! deleted.
//!
//! Security, as the kubelet's `KubeletConfiguration` sets it ([`crate::Config::kubelet_tls`],
//! [`crate::Config::kubelet_auth`]): with a serving certificate the listener speaks HTTPS
//! ([`tls`]; plain HTTP is answered Go's `400 Client sent an HTTP request to an HTTPS
//! server.`), and each request is authenticated (client certificate, `TokenReview`,
//! anonymous) and authorized (`SubjectAccessReview`) before its route ([`auth`]). A secure
//! cluster runs its kubelets as kubeadm does: HTTPS, no anonymous requests, webhook
//! authentication and authorization.
//!
//! Simplifications: without a serving certificate, plain HTTP on the loopback address (a
//! kubelet then makes itself a self-signed certificate and still serves HTTPS); one
//! certificate for every simulated node of a process (see [`crate::Config::kubelet_tls`]);
//! a node whose heartbeats are stopped answers 503 instead of refusing connections;
//! `/run`, `/configz`, `/logs/`, `/debug/`, `/checkpoint/`, `/metrics`, `/metrics/cadvisor`
//! and `/metrics/probes` are not served (404).

pub mod attach;
pub mod auth;
pub mod context;
pub mod exec;
pub mod logs;
pub mod metrics;
pub mod pods;
pub mod portforward;
pub mod ports;
pub mod remotecommand;
pub mod summary;
pub mod tls;
pub mod upgrade;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_exits;
#[cfg(test)]
mod tests_streams;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use apimachinery::ObjectKey;
use apimachinery::resource::quantity::Quantity;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use client::shared_informer::SharedIndexInformer;
use client::{ResourceEventHandlerFuncs, SharedClock};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Capacity;
use crate::containers::ProcessExit;
use crate::node::NodeState;
use crate::pod_workers::{NodeTable, PodWorkers, lookup};
use crate::shell::CopiedFiles;
use crate::usage::CpuCounter;
use context::RunningContainer;

/// The port a kubelet serves on (`--port`), what Nodes advertise when the server is off.
pub const DEFAULT_PORT: u16 = 10250;

/// The files copied into each container run, by (pod UID, container, restart count).
type CopiedRuns = HashMap<(String, String, i32), CopiedFiles>;

/// The kubelet API of one simulator process (cheap to clone; clones share everything).
#[derive(Clone)]
pub struct KubeletServer {
    inner: Arc<Inner>,
}

struct Inner {
    nodes: NodeTable,
    pods: SharedIndexInformer<Pod>,
    clock: SharedClock,
    /// The simulator's client (acting as each node for its reads); none in tests.
    client: Option<kube::Client>,
    streams: Streams,
    /// Files copied into each container run, by (pod UID, container, restart count): dropped
    /// when the run ends by a signal or an exit seen here, and when the pod is deleted.
    copied: Arc<Mutex<CopiedRuns>>,
    /// The pod workers, told when a container's process ends through a stream
    /// ([`KubeletServer::process_exited`]); unset in tests of the API alone.
    workers: OnceLock<PodWorkers>,
    /// Each node's CPU counter.
    node_cpu: Mutex<HashMap<String, CpuCounter>>,
    /// When the server started: the nodes' boot time for their counters.
    boot: Timestamp,
    /// Each node's memory capacity, in bytes.
    node_memory: Option<u64>,
    /// The loads set on workloads (`crate::load`), kept by a watch while serving.
    loads: crate::load::Loads,
    /// The running containers' CPU counters (`crate::usage::ContainerCounters`).
    container_cpu: Mutex<crate::usage::ContainerCounters>,
    /// HTTPS, when set ([`KubeletServer::secure`]).
    tls: OnceLock<Arc<rustls::ServerConfig>>,
    /// Who may call, when checked ([`KubeletServer::secure`]); unset: everyone.
    auth: OnceLock<Arc<auth::RequestAuth>>,
}

/// The open streaming sessions and what ends them: a counter, the tracker their tasks run on
/// and the token that tells them to stop.
#[derive(Clone)]
pub struct Streams {
    open: Arc<AtomicUsize>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Streams {
    fn new() -> Self {
        Streams {
            open: Arc::new(AtomicUsize::new(0)),
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        }
    }

    /// How many sessions are open.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Counts one session open until the guard is dropped.
    pub fn guard(&self) -> StreamGuard {
        self.open.fetch_add(1, Ordering::SeqCst);
        StreamGuard {
            open: self.open.clone(),
        }
    }

    /// Fires when the server shuts down: every session ends.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// The tracker the sessions' tasks run on (the server waits for it).
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }
}

/// One open session, counted in [`Streams::open`] until dropped.
#[derive(Debug)]
pub struct StreamGuard {
    open: Arc<AtomicUsize>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a pod path found no pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodLookup {
    /// No such pod on the nodes asked about.
    NotFound,
    /// The pod's node does not run (its heartbeats are stopped).
    NodeDown(String),
}

impl KubeletServer {
    /// The API of the nodes in `nodes` of `capacity`, with their pods from `pods` (the pod
    /// workers' informer), on `clock`; `client` reads the ConfigMaps and Secrets an exec's
    /// shell shows.
    pub fn new(
        nodes: NodeTable,
        pods: SharedIndexInformer<Pod>,
        clock: SharedClock,
        client: Option<kube::Client>,
        capacity: &Capacity,
    ) -> Self {
        if !pods.indexer().has_index(client::indexer::NODE_NAME_INDEX) {
            pods.add_indexer(
                client::indexer::NODE_NAME_INDEX,
                Arc::new(client::indexer::pod_node_name_index_func),
            );
        }
        let boot = clock.wall();
        let node_memory = Quantity::parse(&capacity.memory)
            .ok()
            .and_then(|q| u64::try_from(q.value()).ok());
        let copied: Arc<Mutex<CopiedRuns>> = Arc::default();
        {
            // A deleted pod's containers are gone, and what was copied into them with them.
            let copied = copied.clone();
            pods.add_event_handler(ResourceEventHandlerFuncs::new().on_delete(
                move |obj: client::DeltaObject<Pod>| {
                    if let Some(uid) = obj.object().metadata.uid.as_deref() {
                        copied
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .retain(|(u, _, _), _| u != uid);
                    }
                },
            ));
        }
        KubeletServer {
            inner: Arc::new(Inner {
                nodes,
                pods,
                clock,
                client,
                streams: Streams::new(),
                copied,
                workers: OnceLock::new(),
                node_cpu: Mutex::new(HashMap::new()),
                boot,
                node_memory,
                loads: crate::load::Loads::default(),
                container_cpu: Mutex::new(crate::usage::ContainerCounters::default()),
                tls: OnceLock::new(),
                auth: OnceLock::new(),
            }),
        }
    }

    /// Serves HTTPS with `tls` (when given) and checks every request with `auth` (when
    /// given) from now on; set once, before [`KubeletServer::serve`] (a second call changes
    /// nothing).
    pub fn secure(&self, tls: Option<Arc<rustls::ServerConfig>>, auth: Option<auth::RequestAuth>) {
        if let Some(tls) = tls {
            let _ = self.inner.tls.set(tls);
        }
        if let Some(auth) = auth {
            let _ = self.inner.auth.set(Arc::new(auth));
        }
    }

    /// Whether the API is served over HTTPS.
    pub fn is_tls(&self) -> bool {
        self.inner.tls.get().is_some()
    }

    /// The authenticator and authorizer, when requests are checked.
    pub fn auth(&self) -> Option<&Arc<auth::RequestAuth>> {
        self.inner.auth.get()
    }

    /// The node a request is authorized against: the one its `Host` names, else the only
    /// node of a one-node simulator, else the `Host`'s name as given.
    pub fn auth_node_name(&self, headers: &HeaderMap) -> String {
        let host = host_name(headers);
        if let Some(node) = host.and_then(|h| self.node(h)) {
            return node.name().to_owned();
        }
        let table = self.inner.nodes.read().unwrap_or_else(|p| p.into_inner());
        match (table.len(), table.keys().next()) {
            (1, Some(only)) => only.clone(),
            _ => host.unwrap_or_default().to_owned(),
        }
    }

    /// How many exec, attach, port-forward and followed-log sessions are open.
    pub fn open_streams(&self) -> usize {
        self.inner.streams.open()
    }

    /// The sessions' counter, tracker and shutdown token.
    pub fn streams(&self) -> &Streams {
        &self.inner.streams
    }

    /// The clock.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The simulator's client, if any.
    pub fn client(&self) -> Option<&kube::Client> {
        self.inner.client.as_ref()
    }

    /// The current copy of the pod `key` from the informer.
    pub fn pod(&self, key: &ObjectKey) -> Option<Arc<Pod>> {
        self.inner.pods.get(key)
    }

    /// The node `name`, if simulated here.
    pub fn node(&self, name: &str) -> Option<Arc<NodeState>> {
        lookup(&self.inner.nodes, name)
    }

    /// The node a node-scoped request is for: the one its `Host` names, else the only one.
    pub fn node_for(&self, headers: &HeaderMap) -> Result<Arc<NodeState>, Refusal> {
        let host = host_name(headers);
        if let Some(node) = host.and_then(|h| self.node(h)) {
            return alive(node);
        }
        let only = {
            let table = self.inner.nodes.read().unwrap_or_else(|p| p.into_inner());
            (table.len() == 1)
                .then(|| table.values().next().cloned())
                .flatten()
        };
        match only {
            Some(node) => alive(node),
            None => Err(Box::new(http_error(
                StatusCode::NOT_FOUND,
                &format!(
                    "no simulated node is named {:?}: send Host: <node name>:<port>",
                    host.unwrap_or_default()
                ),
            ))),
        }
    }

    /// The pods bound to `node`, as the informer has them, sorted by namespace and name.
    pub fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        let mut pods = self
            .inner
            .pods
            .indexer()
            .by_index(client::indexer::NODE_NAME_INDEX, node)
            .unwrap_or_default();
        pods.sort_by_key(|p| ObjectKey::of(p.as_ref()));
        pods
    }

    /// The pod `namespace/name` bound to a node simulated here (to the `Host`'s node when the
    /// header names one), with its node.
    pub fn find_pod(
        &self,
        headers: &HeaderMap,
        namespace: &str,
        name: &str,
    ) -> Result<(Arc<Pod>, Arc<NodeState>), PodLookup> {
        let pod = self
            .inner
            .pods
            .get(&ObjectKey::new(Some(namespace), name))
            .ok_or(PodLookup::NotFound)?;
        let node_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or_default();
        let node = self.node(node_name).ok_or(PodLookup::NotFound)?;
        if let Some(host) = host_name(headers)
            && self.node(host).is_some()
            && host != node_name
        {
            return Err(PodLookup::NotFound);
        }
        if !node.alive() {
            return Err(PodLookup::NodeDown(node_name.to_owned()));
        }
        Ok((pod, node))
    }

    /// The files copied into run `restarts` of `container` of the pod with UID `uid` (kept
    /// while the simulator runs; a new run starts without them, as a new container does).
    pub fn copied_files(&self, uid: &str, container: &str, restarts: i32) -> CopiedFiles {
        let mut all = self.inner.copied.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(u, c, r), _| !(u == uid && c == container && *r < restarts));
        all.entry((uid.to_owned(), container.to_owned(), restarts))
            .or_default()
            .clone()
    }

    /// How many container runs have files copied in (tests read it).
    pub fn copied_runs(&self) -> usize {
        self.inner
            .copied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Connects the pod workers, which [`KubeletServer::process_exited`] tells (once; a second
    /// call is ignored).
    pub fn set_workers(&self, workers: PodWorkers) {
        let _ = self.inner.workers.set(workers);
    }

    /// The process of `container`'s current run in `pod` ended now with `code`: a signal from
    /// `kill` in one of its shells, or its main process, a shell, exited through `attach`.
    /// What was copied into that run is gone; the pod workers end the container
    /// ([`PodWorkers::process_exited`]).
    pub fn process_exited(&self, pod: &Pod, container: &RunningContainer, code: i32) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        self.inner
            .copied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(uid.clone(), container.name.clone(), container.restarts));
        tracing::info!(
            pod = %ObjectKey::of(pod),
            container = %container.name,
            exit_code = code,
            "container process exited"
        );
        if let Some(workers) = self.inner.workers.get() {
            let exit = ProcessExit {
                container: container.name.clone(),
                restarts: container.restarts,
                exit_code: code,
                at: self.clock().wall(),
            };
            workers.process_exited(&ObjectKey::of(pod), &uid, exit);
        }
    }

    /// The node `name`'s CPU counter, advanced to `now` at `nano_cores`.
    pub fn node_cpu(&self, name: &str, now: Timestamp, nano_cores: u64) -> u64 {
        let mut counters: MutexGuard<'_, _> = self
            .inner
            .node_cpu
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        counters
            .entry(name.to_owned())
            .or_insert_with(|| CpuCounter::new(self.inner.boot))
            .advance(now, nano_cores)
    }

    /// Each node's memory capacity in bytes (its `availableBytes` is that minus the working
    /// set).
    pub fn node_memory(&self) -> Option<u64> {
        self.inner.node_memory
    }

    /// The loads set on workloads.
    pub fn loads(&self) -> &crate::load::Loads {
        &self.inner.loads
    }

    /// The usage of `pod` at `now`, with its workload's load and a CPU counter kept
    /// continuous across changes of its model (`None`: no container runs).
    pub fn pod_usage(&self, pod: &Pod, now: Timestamp) -> Option<crate::usage::PodUsage> {
        let load = self
            .inner
            .loads
            .for_pod_among(pod, || self.inner.pods.indexer().list());
        let mut usage = crate::usage::pod_usage_with(pod, now, load.as_ref())?;
        self.inner
            .container_cpu
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .advance(pod, &mut usage, now, load.as_ref());
        Some(usage)
    }

    /// When the server started (the nodes' boot time).
    pub fn boot(&self) -> Timestamp {
        self.inner.boot
    }

    /// The routes.
    pub fn router(&self) -> Router {
        let get_only = |m: MethodRouter<KubeletServer>| m.fallback(method_not_allowed_get);
        let restful = |m: MethodRouter<KubeletServer>| m.fallback(restful_method_not_allowed);
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/pods", get_only(get(pods::get_pods)))
            .route("/stats/summary", restful(get(summary::get_summary)))
            .route("/metrics/resource", get(metrics::get_resource_metrics))
            .route(
                "/containerLogs/{namespace}/{pod}/{container}",
                get_only(get(logs::get_container_logs)),
            )
            .route(
                "/exec/{namespace}/{pod}/{container}",
                restful(get(exec::exec3).post(exec::exec3)),
            )
            .route(
                "/exec/{namespace}/{pod}/{uid}/{container}",
                restful(get(exec::exec4).post(exec::exec4)),
            )
            .route(
                "/attach/{namespace}/{pod}/{container}",
                restful(get(attach::attach3).post(attach::attach3)),
            )
            .route(
                "/attach/{namespace}/{pod}/{uid}/{container}",
                restful(get(attach::attach4).post(attach::attach4)),
            )
            .route(
                "/portForward/{namespace}/{pod}",
                restful(get(portforward::port_forward2).post(portforward::port_forward2)),
            )
            .route(
                "/portForward/{namespace}/{pod}/{uid}",
                restful(get(portforward::port_forward3).post(portforward::port_forward3)),
            )
            .fallback(not_found)
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                auth::filter,
            ))
            .with_state(self.clone())
    }

    /// Serves the routes on `listener` (over HTTPS when [`KubeletServer::secure`] gave it a
    /// TLS configuration) until `shutdown` fires, then ends every open stream and returns
    /// once all of them (and every connection) have ended.
    pub async fn serve(self, listener: TcpListener, shutdown: CancellationToken) {
        let streams = self.inner.streams.clone();
        if let Some(client) = self.inner.client.clone() {
            streams.tracker.spawn(
                self.inner
                    .loads
                    .clone()
                    .watch(client, streams.shutdown.clone()),
            );
        }
        let app = self.router();
        if let Some(tls) = self.inner.tls.get().cloned() {
            let stopping = streams.shutdown.clone();
            let stop = shutdown.clone();
            streams.tracker.spawn(async move {
                stop.cancelled().await;
                stopping.cancel();
            });
            tls::serve(app, listener, tls, shutdown, streams.tracker.clone()).await;
            streams.shutdown.cancel();
            streams.tracker.close();
            streams.tracker.wait().await;
            return;
        }
        let stop = shutdown.clone();
        let stopping = streams.shutdown.clone();
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                stop.cancelled().await;
                stopping.cancel();
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "kubelet API stopped");
        }
        streams.shutdown.cancel();
        streams.tracker.close();
        streams.tracker.wait().await;
    }
}

fn alive(node: Arc<NodeState>) -> Result<Arc<NodeState>, Refusal> {
    if node.alive() {
        Ok(node)
    } else {
        Err(Box::new(node_down(node.name())))
    }
}

/// An answer that refuses a request (boxed: a `Response` is large).
pub type Refusal = Box<Response>;

/// The answer for a node whose kubelet is "dead" (heartbeats stopped or removed).
pub fn node_down(node: &str) -> Response {
    http_error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("the kubelet of node {node:?} is not running"),
    )
}

/// The node name of a `Host` header (`node-0:10250`, `[::1]:10250`, `node-0`).
pub fn host_name(headers: &HeaderMap) -> Option<&str> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next();
    }
    Some(host.rsplit_once(':').map_or(host, |(name, _)| name))
}

/// A plain-text error as go-restful's `WriteError` writes it: the message alone.
pub fn restful_error(code: StatusCode, message: &str) -> Response {
    let mut response = (code, message.to_owned()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A plain-text error as Go's `http.Error` writes it: the message and a newline, with
/// `X-Content-Type-Options: nosniff`.
pub fn http_error(code: StatusCode, message: &str) -> Response {
    let mut response = restful_error(code, &format!("{message}\n"));
    response.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The roots go-restful serves (an unknown path under them is its own 404).
const RESTFUL_ROOTS: [&str; 7] = [
    "pods",
    "stats",
    "containerLogs",
    "exec",
    "attach",
    "portForward",
    "run",
];

async fn not_found(uri: axum::http::Uri) -> Response {
    let root = uri.path().trim_start_matches('/').split('/').next();
    if root.is_some_and(|r| RESTFUL_ROOTS.contains(&r)) {
        restful_error(StatusCode::NOT_FOUND, "404: Page Not Found")
    } else {
        http_error(StatusCode::NOT_FOUND, "404 page not found")
    }
}

/// go-restful's answer to a method no route of the path takes.
async fn restful_method_not_allowed() -> Response {
    restful_error(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed")
}

/// `GETOnlyRestfulFilter`: 405 `Method Not Allowed` with `Allow: GET`.
async fn method_not_allowed_get() -> Response {
    let mut response = restful_error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET"));
    response
}

/// A JSON body with `Content-Type: application/json`.
pub fn json_response(body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The values of `key` in a URL query (`command=sh&command=-c`), percent-decoded (`+` is a
/// space), in order.
pub fn query_values(query: &str, key: &str) -> Vec<String> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .collect()
}
