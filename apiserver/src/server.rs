//! Serving: the shared state, the router, and the `run`/`serve` entry points with graceful
//! shutdown.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/server/` (`genericapiserver.go`'s
//! `PrepareRun().Run(stopCh)`, the handler chain, `/healthz`, `/livez`, `/readyz`) in the shape
//! of mini-redis' `server::run`: a library that takes a bound listener and a shutdown signal.
//!
//! ```text
//!   TcpListener ─▶ axum ─▶ dispatch(path) ─┬─ /version, /healthz, /livez, /readyz
//!                                          ├─ /api, /apis, /apis/{g}[/{v}]  (discovery)
//!                                          ├─ /openapi/v3[/...]
//!                                          ├─ /miniplane/v1/traces[/{id}]  (trace collector)
//!                                          ├─ /ui[/{file}]  (the web UI's embedded files)
//!                                          ├─ /miniplane/v1/faults, controllers, lab (admin)
//!                                          └─ /api/v1/..., /apis/{g}/{v}/... ─▶ handlers::resource
//!                                               (traced: request_trace::begin → handler → finish)
//!   shutdown token cancelled ─▶ watch streams end ─▶ connections drain ─▶ tasks joined
//! ```
//!
//! Under the router, [`crate::connections`] accepts and serves the connections (cap, timeouts)
//! and, in front of every route, [`crate::access`] refuses a foreign `Host` or `Origin`.

use crate::access::{self, AccessOptions, Verdict};
use crate::admin::{self, FaultTable, Reports};
use crate::collector::{self, Collector};
use crate::connections::{self, ConnectionLimits};
use crate::discovery;
use crate::error::{ApiError, Result};
use crate::handlers;
use crate::healthz;
use crate::openapi::{self, OpenApiKind};
use crate::registry::Registry;
use crate::request::{Accept, MAX_BODY_BYTES, Query, Route};
use crate::request_trace::{self, TracingOptions};
use crate::storage::Storage;
use crate::ui;
use crate::watch_cache::{
    DEFAULT_CLIENT_BUFFER, DEFAULT_RING_BYTES, DEFAULT_RING_CAPACITY, WatchCache,
};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::Backend;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How `miniplane apiserver` is configured.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the store keeps its data.
    pub data_dir: PathBuf,
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Acknowledge writes before they are on disk (tests, benchmarks).
    pub no_fsync: bool,
    /// The most bytes of history the store keeps before it compacts the oldest early
    /// (`store::StoreConfig::history_budget`; `None`: no bound).
    pub store_history_budget: Option<u64>,
    /// Tunables of the serving path.
    pub options: ServerOptions,
}

/// The default [`Config::store_history_budget`] (`store::DEFAULT_HISTORY_BUDGET`, 256 MiB).
pub const DEFAULT_STORE_HISTORY_BUDGET: u64 = store::DEFAULT_HISTORY_BUDGET;

/// Tunables of the serving path (defaults as in Kubernetes where it has one).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// How long a watch without `timeoutSeconds` stays open.
    pub default_watch_timeout: Duration,
    /// Events each resource's watch cache keeps.
    pub watch_cache_capacity: usize,
    /// Stored bytes (keys + objects) of the events each resource's watch cache keeps.
    pub watch_cache_bytes: usize,
    /// Events queued per watch client before it is cut off.
    pub watch_client_buffer: usize,
    /// Request spans, the trace annotation and the collector's size.
    pub tracing: TracingOptions,
    /// The connection cap and the timeouts of slow clients.
    pub connections: ConnectionLimits,
    /// The server's names and the origins allowed to call it.
    pub access: AccessOptions,
    /// Where `componentstatuses` finds the scheduler and the controller-manager.
    pub component_probes: crate::ComponentProbes,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(30 * 60),
            watch_cache_capacity: DEFAULT_RING_CAPACITY,
            watch_cache_bytes: DEFAULT_RING_BYTES,
            watch_client_buffer: DEFAULT_CLIENT_BUFFER,
            tracing: TracingOptions::default(),
            connections: ConnectionLimits::default(),
            access: AccessOptions::default(),
            component_probes: crate::ComponentProbes::default(),
        }
    }
}

/// Errors of starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] store::Error),
    /// Creating the initial namespaces failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// Serving HTTP failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

struct Inner {
    registry: Arc<Registry>,
    storage: Storage,
    watch_cache: WatchCache,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    options: ServerOptions,
    /// Recent spans of every component (empty when tracing is off).
    collector: Collector,
    /// The faults in force (`crate::admin`).
    faults: FaultTable,
    /// Components' work-queue reports and the lab status.
    reports: Reports,
}

/// Everything a request handler needs, cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

impl AppState {
    /// State over `backend` with the built-in resources. Tasks it starts (watch caches, watch
    /// streams) stop when `shutdown` is cancelled.
    pub fn new(
        backend: Arc<dyn Backend>,
        options: ServerOptions,
        shutdown: CancellationToken,
    ) -> Self {
        let tasks = TaskTracker::new();
        let storage = Storage::new(backend.clone());
        let watch_cache = WatchCache::new(
            backend,
            tasks.clone(),
            shutdown.clone(),
            options.watch_cache_capacity,
            options.watch_client_buffer,
        )
        .with_handoff(storage.handoff().clone())
        .with_ring_bytes(options.watch_cache_bytes);
        let collector = Collector::new(
            if options.tracing.enabled {
                options.tracing.max_spans
            } else {
                0
            },
            options.tracing.max_spans_per_trace,
        );
        AppState(Arc::new(Inner {
            collector,
            faults: FaultTable::default(),
            reports: Reports::default(),
            registry: Arc::new(Registry::builtin()),
            storage,
            watch_cache,
            tasks,
            shutdown,
            options,
        }))
    }

    /// The resource registry (rows may be added at run time).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.0.registry
    }

    /// The store, as objects.
    pub fn storage(&self) -> &Storage {
        &self.0.storage
    }

    /// The watch caches.
    pub fn watch_cache(&self) -> &WatchCache {
        &self.0.watch_cache
    }

    /// The owner of every task the server spawns.
    pub fn tasks(&self) -> &TaskTracker {
        &self.0.tasks
    }

    /// Cancelled when the server shuts down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    /// The serving tunables.
    pub fn options(&self) -> &ServerOptions {
        &self.0.options
    }

    /// The trace collector.
    pub fn collector(&self) -> &Collector {
        &self.0.collector
    }

    /// The faults in force.
    pub fn faults(&self) -> &FaultTable {
        &self.0.faults
    }

    /// What components and the lab runner reported.
    pub fn reports(&self) -> &Reports {
        &self.0.reports
    }

    /// The server's clock.
    pub fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    /// Creates the namespaces every cluster has (`default`, `kube-system`, `kube-public`,
    /// `kube-node-lease`) if they are missing, as kube-apiserver's bootstrap controller does,
    /// serves the resources of the stored CustomResourceDefinitions and starts the CRD
    /// controller ([`crate::apiextensions::controller`]).
    pub async fn bootstrap(&self) -> Result<()> {
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            handlers::create::ensure_namespace(self, ns).await?;
        }
        // Serve the stored CRDs' resources before the first request, then follow changes.
        let outcome = crate::apiextensions::controller::sync(self).await?;
        self.0
            .tasks
            .spawn(crate::apiextensions::controller::run(self.clone(), outcome));
        Ok(())
    }

    /// Waits for every spawned task (after `shutdown` was cancelled).
    pub async fn wait_for_tasks(&self) {
        self.0.tasks.close();
        self.0.tasks.wait().await;
    }
}

/// The HTTP router (no socket: tests call it with `tower::ServiceExt::oneshot`).
pub fn router(state: AppState) -> Router {
    Router::new().fallback(dispatch).with_state(state)
}

/// Serves on an already-bound listener until `shutdown` is cancelled, then drains open
/// requests, ends watches and joins every task.
pub async fn serve(
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    serve_with(listener, backend, ServerOptions::default(), shutdown).await
}

/// [`serve`] with explicit tunables; while serving, the `default/kubernetes` Service is kept
/// in place ([`crate::kubernetes_service`]) with the listener's port as its targetPort.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    mut options: ServerOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    options.access.bind_address = Some(listener.local_addr()?.ip());
    let limits = options.connections.clone();
    let state = AppState::new(backend, options, shutdown.clone());
    state
        .bootstrap()
        .await
        .map_err(|e| ServeError::Bootstrap(e.to_string()))?;
    admin::reload(&state).await;
    let port = listener.local_addr()?.port();
    state.tasks().spawn(crate::kubernetes_service::run(
        state.clone(),
        port,
        crate::kubernetes_service::INTERVAL,
    ));
    let app = router(state.clone());
    connections::serve(listener, app, limits, shutdown.clone()).await;
    shutdown.cancel();
    state.wait_for_tasks().await;
    Ok(())
}

/// A bound server, so the caller can learn the port before serving (port 0).
pub struct Server {
    listener: tokio::net::TcpListener,
    store: Arc<store::Store>,
    options: ServerOptions,
}

/// How long the store keeps history for watches and consistent lists, like kube-apiserver's
/// default `--etcd-compaction-interval` of 5 minutes.
const HISTORY_RETENTION: Duration = Duration::from_secs(5 * 60);

impl Server {
    /// Opens the store in the data directory (failing if another process holds it) and binds
    /// the listen address.
    pub async fn bind(config: Config) -> Result<Server, ServeError> {
        let mut store_config = store::StoreConfig::new(&config.data_dir);
        store_config.fsync = !config.no_fsync;
        store_config.history_budget = config.store_history_budget;
        store_config.auto_compaction = store::AutoCompaction {
            retain_revisions: None,
            retain_duration: Some(HISTORY_RETENTION),
            interval: Duration::from_secs(10),
        };
        let store = Arc::new(store::Store::open(store_config).await?);
        let listener = match tokio::net::TcpListener::bind(config.listen).await {
            Ok(l) => l,
            Err(source) => {
                let _ = store.close().await;
                return Err(ServeError::Bind {
                    addr: config.listen,
                    source,
                });
            }
        };
        Ok(Server {
            listener,
            store,
            options: config.options,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` is cancelled, then closes the store.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let backend: Arc<dyn Backend> = self.store.clone();
        let served = serve_with(self.listener, backend, self.options, shutdown).await;
        let closed = self.store.close().await;
        served?;
        closed?;
        Ok(())
    }
}

/// Binds and serves until `shutdown` is cancelled (`miniplane apiserver`).
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), ServeError> {
    Server::bind(config).await?.run(shutdown).await
}

/// A JSON response.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    json_response_as(code, body, "application/json")
}

/// A JSON response with a specific content type, written as kube-apiserver writes it
/// ([`crate::wire`]).
pub fn json_response_as(code: StatusCode, body: &Value, content_type: &'static str) -> Response {
    // Most answers are one object of a few hundred bytes to a few KiB: starting at 1 KiB
    // saves the buffer's first reallocations.
    let mut bytes = Vec::with_capacity(1024);
    if crate::wire::write_document(&mut bytes, body).is_err() {
        bytes.clear();
    }
    let mut resp = (code, bytes).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// Serves a request made inside the server (the admin API's writes of the faults ConfigMap go
/// through the same handler chain, tracing and fault table reload as a client's).
pub(crate) async fn dispatch_internal(state: AppState, req: Request) -> Response {
    match route(state, req).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn dispatch(State(state): State<AppState>, req: Request) -> Response {
    let cors = match state.options().access.check(req.method(), req.headers()) {
        Verdict::Serve => None,
        Verdict::ServeCors(origin) => Some(origin),
        Verdict::Answer(resp) => return nosniff(resp),
    };
    let mut resp = match route(state, req).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    };
    if let Some(origin) = cors {
        access::add_cors_headers(&mut resp, origin);
    }
    nosniff(resp)
}

/// `X-Content-Type-Options: nosniff` on every answer, as kube-apiserver's response writers
/// send it: a browser never reads a JSON body as a script or a page.
fn nosniff(mut resp: Response) -> Response {
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// A request's body within [`MAX_BODY_BYTES`] and the body-read timeout; `Err` is the answer.
async fn read_body(state: &AppState, body: Body) -> std::result::Result<bytes::Bytes, Response> {
    connections::read_body(
        body,
        MAX_BODY_BYTES,
        state.options().connections.body_read_timeout,
    )
    .await
}

fn openapi_kinds(reg: &Registry, gv: &crate::gvk::GroupVersion) -> Vec<OpenApiKind> {
    reg.snapshot()
        .iter()
        .filter(|r| r.group_version() == *gv)
        .map(|r| OpenApiKind {
            gvk: r.gvk(),
            plural: r.gvr.resource.clone(),
            namespaced: r.namespaced,
            subresources: r
                .subresources
                .iter()
                .map(|s| s.name().to_string())
                .collect(),
            schema: r.openapi_schema.as_deref().cloned(),
        })
        .collect()
}

async fn route(state: AppState, req: Request) -> Result<Response> {
    let (parts, body) = req.into_parts();
    // A target too long for `Uri` arrives beside a placeholder URI.
    let (path, raw_query) = crate::request::path_and_query(&parts.uri, &parts.extensions);
    let route = Route::parse(path);
    let query = Query::parse(raw_query);
    let accept = Accept::parse(&parts.headers);
    let reg = state.registry().clone();
    let get_only = |resp: Response| -> Result<Response> {
        if parts.method == Method::GET || parts.method == Method::HEAD {
            Ok(resp)
        } else {
            Err(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({})",
                parts.method
            )))
        }
    };
    match route {
        Route::Version => get_only(json_response(StatusCode::OK, &discovery::version())),
        Route::Metrics => {
            let text = crate::metrics::render(state.storage().backend().as_ref());
            let mut resp = (StatusCode::OK, text).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            get_only(resp)
        }
        Route::Health(endpoint, check) => {
            let checkpoint = state.storage().backend().checkpoint_health();
            let resp = healthz::respond(endpoint, check.as_deref(), raw_query, checkpoint.as_ref());
            get_only(resp.ok_or(ApiError::PathNotFound)?)
        }
        Route::CoreVersions => get_only(match accept.aggregated {
            Some(v) => json_response_as(
                StatusCode::OK,
                &discovery::aggregated(&reg, true, v),
                v.content_type(),
            ),
            None => json_response(StatusCode::OK, &discovery::core_versions()),
        }),
        Route::Groups => get_only(match accept.aggregated {
            Some(v) => json_response_as(
                StatusCode::OK,
                &discovery::aggregated(&reg, false, v),
                v.content_type(),
            ),
            None => json_response(StatusCode::OK, &discovery::group_list(&reg)),
        }),
        Route::Group(g) => {
            let body = discovery::group(&reg, &g).ok_or(ApiError::PathNotFound)?;
            get_only(json_response(StatusCode::OK, &body))
        }
        Route::Resources(gv) => {
            let body = discovery::resource_list(&reg, &gv).ok_or(ApiError::PathNotFound)?;
            get_only(json_response(StatusCode::OK, &body))
        }
        Route::OpenApiV2 => {
            let wants_protobuf = parts
                .headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("protobuf"));
            get_only(if wants_protobuf {
                let mut resp = (StatusCode::OK, openapi::v2::document_protobuf()).into_response();
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(openapi::v2::PROTOBUF_CONTENT_TYPE),
                );
                resp
            } else {
                json_response(StatusCode::OK, &openapi::v2::document_json())
            })
        }
        Route::OpenApiIndex => {
            let docs: Vec<_> = reg
                .group_versions()
                .into_iter()
                .map(|gv| {
                    let doc = openapi::document(&gv, &openapi_kinds(&reg, &gv));
                    (gv, doc)
                })
                .collect();
            get_only(json_response(StatusCode::OK, &openapi::index(&docs)))
        }
        Route::OpenApiDocument(gv) => {
            if !reg.serves(&gv) {
                return Err(ApiError::PathNotFound);
            }
            get_only(json_response(
                StatusCode::OK,
                &openapi::document(&gv, &openapi_kinds(&reg, &gv)),
            ))
        }
        Route::Resource(path) => {
            let too_large = parts
                .headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|n| n > MAX_BODY_BYTES);
            if too_large {
                return Err(ApiError::RequestEntityTooLarge {
                    limit: MAX_BODY_BYTES,
                });
            }
            let bytes = match read_body(&state, body).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            let trace = if state.options().tracing.enabled {
                let watch = query.flag("watch").unwrap_or(false);
                request_trace::begin(&parts.method, &path, watch, &parts.headers, |id| {
                    state.collector().samples(id)
                })
            } else {
                None
            };
            let mut trace = trace;
            if let (Some(t), Some(what)) = (
                trace.as_mut(),
                parts
                    .headers
                    .get(admin::FAULT_HEADER)
                    .and_then(|v| v.to_str().ok()),
            ) && admin::touches_faults(&parts.method, &path)
            {
                t.set_attribute("fault", what);
            }
            let collector_state = trace.as_ref().map(|_| state.clone());
            let reload_faults = admin::touches_faults(&parts.method, &path).then(|| state.clone());
            let injected = injected_failure(&state, &parts.method, &parts.headers, &path);
            let result = match injected {
                Some((fault, err)) => {
                    if let Some(t) = trace.as_mut() {
                        t.set_attribute("fault", fault.as_str());
                    }
                    Err(err)
                }
                None => {
                    handlers::resource(handlers::RequestContext {
                        storage: state.storage().traced(trace.as_ref().map(|t| t.write())),
                        state,
                        method: parts.method,
                        path,
                        query,
                        headers: parts.headers,
                        accept,
                        body: bytes,
                    })
                    .await
                }
            };
            if let Some(state) = reload_faults
                && result.is_ok()
            {
                admin::reload(&state).await;
            }
            if let (Some(trace), Some(state)) = (trace, collector_state) {
                let (code, error) = match &result {
                    Ok(resp) => (resp.status(), None),
                    Err(ApiError::Internal(_)) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        Some("internal error".into()),
                    ),
                    Err(e) => (e.code(), Some(format!("{}: {e}", e.reason()))),
                };
                if let Some(span) = trace.finish(code, error) {
                    state.collector().record(span);
                }
            }
            result
        }
        Route::Traces(id) => {
            let bytes = match read_body(&state, body).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            admin::require_json(&parts.headers, &bytes)?;
            collector::handle(
                state.collector(),
                &parts.method,
                id.as_deref(),
                &query,
                &bytes,
            )
        }
        Route::Ui(file) => get_only(ui::serve(file.as_deref())?),
        Route::Admin(admin_route) => {
            let bytes = match read_body(&state, body).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            admin::handle(state, admin_route, parts.method, &parts.headers, &bytes).await
        }
        Route::NotFound => Err(ApiError::PathNotFound),
    }
}

/// A `FailWrites` fault's answer to this request, if it is a write the fault picks: the
/// fault's name and the error (409 as an optimistic-concurrency conflict, 500 internal).
/// Writes of the faults ConfigMap are never failed, so faults can always be cleared.
fn injected_failure(
    state: &AppState,
    method: &Method,
    headers: &axum::http::HeaderMap,
    path: &crate::request::ResourcePath,
) -> Option<(String, ApiError)> {
    let write = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if !write || admin::touches_faults(method, path) {
        return None;
    }
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let program = admin::fault_table::program(agent);
    let (fault, code) = state.faults().fail_write(program, &path.resource)?;
    let target = crate::error::ErrorTarget {
        group: path.gv.group.clone(),
        resource: path.resource.clone(),
        kind: String::new(),
        name: path.name.clone().unwrap_or_default(),
    };
    let err = if code == 409 {
        ApiError::Conflict {
            target,
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        }
    } else {
        ApiError::Internal(format!("injected by fault {fault}"))
    };
    tracing::info!(%fault, %method, resource = %path.resource, code, "fault: failing a write");
    Some((fault, err))
}
