//! The routes of the simulated cloud's HTTP API (the table is in `sim/mod.rs`), the part a
//! real cloud's API endpoints (EC2's, ELB's) play, and their handlers, each a thin shell:
//! decode the request, run one operation of the state model (`instances.rs`,
//! `load_balancers.rs`, `routes.rs`, `faults.rs`) as a read or a saved write (`shared.rs`),
//! answer JSON. In front of each API group sits its fault gate.
//!
//! ```text
//!   request ──▶ router ──▶ fault gate (instances | loadbalancers | routes) ──▶ handler ──▶ JSON
//!                            delay, maybe 503 {"message"}                       ▲
//!   /v1/faults ─────────────────────────────────────────────────────────────────┘ (never faulted)
//! ```
//!
//! Every error, also a malformed body, an unknown path or a wrong method, is answered as
//! `{"message": "..."}` with its status ([`Rejection`]), never as axum's plain text.

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::api::{
    CreateRouteRequest, EnsureLoadBalancerRequest, ErrorBody, LaunchRequest, List, Rejection,
    UpdateBackendsRequest,
};
use super::faults::{Fault, FaultApi};
use super::instances::{CloudInstance, instance_not_found};
use super::load_balancers::CloudLoadBalancer;
use super::routes::CloudRoute;
use super::shared::Shared;

/// The API's routes over `shared`.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let gate = |api| middleware::from_fn_with_state((shared.clone(), api), fault_gate);
    let instances = Router::new()
        .route("/v1/instances", get(list_instances).post(launch_instance))
        .route(
            "/v1/instances/{name}",
            get(get_instance).delete(delete_instance),
        )
        .route("/v1/instances/{name}/stop", post(stop_instance))
        .route("/v1/instances/{name}/start", post(start_instance))
        .route_layer(gate(FaultApi::Instances));
    let load_balancers = Router::new()
        .route("/v1/loadbalancers", get(list_load_balancers))
        .route(
            "/v1/loadbalancers/{name}",
            get(get_load_balancer)
                .put(ensure_load_balancer)
                .delete(delete_load_balancer),
        )
        .route("/v1/loadbalancers/{name}/backends", put(update_backends))
        .route_layer(gate(FaultApi::LoadBalancers));
    let routes = Router::new()
        .route("/v1/routes", get(list_routes).post(create_route))
        .route("/v1/routes/{name}", axum::routing::delete(delete_route))
        .route_layer(gate(FaultApi::Routes));
    Router::new()
        .merge(instances)
        .merge(load_balancers)
        .merge(routes)
        .route(
            "/v1/faults",
            get(list_faults).put(set_fault).delete(clear_faults),
        )
        .fallback(no_such_path)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

// --- instances -----------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct InstanceFilter {
    name: Option<String>,
    id: Option<String>,
}

/// The list carries the state's `ETag`; with `If-None-Match: <that tag>` nothing changed
/// since, and the answer is `304 Not Modified` without a body (RFC 9110, 13.1.2), so a
/// poller of 10,000 instances pays only when one changes.
async fn list_instances(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    Q(filter): Q<InstanceFilter>,
) -> Result<Response, Rejection> {
    let if_none_match = headers
        .get(axum::http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    let (items, tag) = shared
        .read_tagged(if_none_match, |s, _| {
            Ok(s.find_instances(filter.name.as_deref(), filter.id.as_deref()))
        })
        .await?;
    let etag = [(axum::http::header::ETAG, tag)];
    Ok(match items {
        Some(items) => (etag, Json(List { items })).into_response(),
        None => (StatusCode::NOT_MODIFIED, etag).into_response(),
    })
}

async fn launch_instance(
    State(shared): State<Arc<Shared>>,
    Body(request): Body<LaunchRequest>,
) -> Result<(StatusCode, Json<CloudInstance>), Rejection> {
    let launched = shared
        .write(move |s, now, rng| s.launch(&request, now, rng))
        .await?;
    let i = &launched.instance;
    if launched.created {
        tracing::info!(name = %i.name, id = %i.id, zone = %i.zone, internal_ip = %i.internal_ip, "launched instance");
    }
    Ok((created_or_ok(launched.created), Json(launched.instance)))
}

async fn get_instance(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudInstance>, Rejection> {
    shared
        .read(|s, _| {
            s.live_instance(&name)
                .cloned()
                .ok_or_else(|| instance_not_found(&name))
        })
        .await
        .map(Json)
}

async fn stop_instance(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudInstance>, Rejection> {
    let instance = shared.write(move |s, _, _| s.stop(&name)).await?;
    tracing::info!(name = %instance.name, id = %instance.id, "stopped instance");
    Ok(Json(instance))
}

async fn start_instance(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudInstance>, Rejection> {
    let instance = shared.write(move |s, _, _| s.start(&name)).await?;
    tracing::info!(name = %instance.name, id = %instance.id, "started instance");
    Ok(Json(instance))
}

async fn delete_instance(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudInstance>, Rejection> {
    let instance = shared
        .write(move |s, now, _| s.terminate(&name, now))
        .await?;
    tracing::info!(name = %instance.name, id = %instance.id, "terminated instance");
    Ok(Json(instance))
}

// --- load balancers ------------------------------------------------------------------------

async fn list_load_balancers(
    State(shared): State<Arc<Shared>>,
) -> Result<Json<List<CloudLoadBalancer>>, Rejection> {
    let items = shared.read(|s, now| Ok(s.load_balancers(now))).await?;
    Ok(Json(List { items }))
}

async fn get_load_balancer(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudLoadBalancer>, Rejection> {
    shared
        .read(|s, now| s.load_balancer(&name, now))
        .await
        .map(Json)
}

async fn ensure_load_balancer(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
    Body(request): Body<EnsureLoadBalancerRequest>,
) -> Result<(StatusCode, Json<CloudLoadBalancer>), Rejection> {
    let delay = shared.options.lb_provisioning_delay;
    let (lb, created) = shared
        .write(move |s, now, _| s.ensure_load_balancer(&name, request, now, delay))
        .await?;
    if created {
        tracing::info!(name = %lb.name, service = %format!("{}/{}", lb.service.namespace, lb.service.name), ip = %lb.ingress_ip, "created load balancer");
    }
    Ok((created_or_ok(created), Json(lb)))
}

async fn update_backends(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
    Body(request): Body<UpdateBackendsRequest>,
) -> Result<Json<CloudLoadBalancer>, Rejection> {
    let lb = shared
        .write(move |s, now, _| s.update_backends(&name, request.backends, now))
        .await?;
    Ok(Json(lb))
}

async fn delete_load_balancer(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudLoadBalancer>, Rejection> {
    let lb = shared
        .write(move |s, now, _| s.delete_load_balancer(&name, now))
        .await?;
    tracing::info!(name = %lb.name, ip = %lb.ingress_ip, "deleted load balancer");
    Ok(Json(lb))
}

// --- routes --------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct RouteFilter {
    cluster: Option<String>,
}

async fn list_routes(
    State(shared): State<Arc<Shared>>,
    Q(filter): Q<RouteFilter>,
) -> Result<Json<List<CloudRoute>>, Rejection> {
    let items = shared
        .read(|s, _| Ok(s.routes(filter.cluster.as_deref())))
        .await?;
    Ok(Json(List { items }))
}

async fn create_route(
    State(shared): State<Arc<Shared>>,
    Body(request): Body<CreateRouteRequest>,
) -> Result<(StatusCode, Json<CloudRoute>), Rejection> {
    let (route, created) = shared
        .write(move |s, now, _| s.create_route(request, now))
        .await?;
    if created {
        tracing::info!(name = %route.name, target = %route.target_node, destination = %route.destination_cidr, "created route");
    }
    Ok((created_or_ok(created), Json(route)))
}

async fn delete_route(
    State(shared): State<Arc<Shared>>,
    Name(name): Name,
) -> Result<Json<CloudRoute>, Rejection> {
    let route = shared.write(move |s, _, _| s.delete_route(&name)).await?;
    tracing::info!(name = %route.name, "deleted route");
    Ok(Json(route))
}

// --- faults --------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct FaultFilter {
    api: Option<FaultApi>,
}

async fn list_faults(State(shared): State<Arc<Shared>>) -> Result<Json<List<Fault>>, Rejection> {
    let items = shared.read(|s, _| Ok(s.faults())).await?;
    Ok(Json(List { items }))
}

async fn set_fault(
    State(shared): State<Arc<Shared>>,
    Body(fault): Body<Fault>,
) -> Result<Json<List<Fault>>, Rejection> {
    tracing::info!(api = %fault.api, fail_fraction = fault.fail_fraction, delay_ms = fault.delay_ms, "fault set");
    let items = shared
        .write(move |s, _, _| {
            s.set_fault(fault)?;
            Ok(s.faults())
        })
        .await?;
    Ok(Json(List { items }))
}

async fn clear_faults(
    State(shared): State<Arc<Shared>>,
    Q(filter): Q<FaultFilter>,
) -> Result<Json<List<Fault>>, Rejection> {
    let items = shared
        .write(move |s, _, _| {
            s.clear_faults(filter.api);
            Ok(s.faults())
        })
        .await?;
    Ok(Json(List { items }))
}

// --- the fault gate, errors, extractors ---------------------------------------------

/// Applies the faults of `api` to a call: waits out their delay, then maybe fails it with 503.
async fn fault_gate(
    State((shared, api)): State<(Arc<Shared>, FaultApi)>,
    request: Request,
    next: Next,
) -> Response {
    let verdict = shared.fault_verdict(api).await;
    if !verdict.delay.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(verdict.delay) => {}
            () = shared.stopping.cancelled() => {
                return Rejection::Unavailable("the simulated cloud is shutting down".into()).into_response();
            }
        }
    }
    if let Some(message) = verdict.failure {
        tracing::debug!(%api, method = %request.method(), path = %request.uri().path(), "injected fault");
        return Rejection::Unavailable(message).into_response();
    }
    next.run(request).await
}

fn created_or_ok(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

fn error_response(status: StatusCode, message: String) -> Response {
    (status, Json(ErrorBody { message })).into_response()
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        error_response(status, self.to_string())
    }
}

async fn no_such_path(request: Request) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        format!(
            "no such API path: {} {}",
            request.method(),
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    )
}

/// The `{name}` of a path, or a JSON 400.
struct Name(String);

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Name, Rejection> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(name)| Name(name))
            .map_err(|e| Rejection::Invalid(e.body_text()))
    }
}

/// A JSON body, or a JSON 400 saying what is wrong with it.
struct Body<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Rejection;

    async fn from_request(request: Request, state: &S) -> Result<Body<T>, Rejection> {
        Json::<T>::from_request(request, state)
            .await
            .map(|Json(value)| Body(value))
            .map_err(|e| Rejection::Invalid(format!("invalid request body: {}", e.body_text())))
    }
}

/// A query string, or a JSON 400.
struct Q<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Q<T>, Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Q(value))
            .map_err(|e| Rejection::Invalid(e.body_text()))
    }
}
