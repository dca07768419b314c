//! The router: every request's path, parsed into a [`Route`], sent to the handler that serves
//! it. The only module that imports every handler; nothing below it imports it.
//!
//! Mirrors the handler chain of `staging/src/k8s.io/apiserver/pkg/server/` (`handler.go`'s
//! `APIServerHandler`, `config.go`'s `DefaultBuildHandlerChain`) and the installed
//! `pkg/endpoints/` routes.
//!
//! ```text
//!   axum ─▶ dispatch ─▶ access check ─▶ route(path) ─┬─ /version, /metrics, /healthz, /livez, /readyz
//!                                                    ├─ /api, /apis, /apis/{g}[/{v}]  (discovery)
//!                                                    ├─ /openapi/v2, /openapi/v3[/...]
//!                                                    ├─ /miniplane/v1/traces[/{id}]  (trace collector)
//!                                                    ├─ /ui[/{file}]  (the web UI's embedded files)
//!                                                    ├─ /miniplane/v1/faults, controllers, lab (admin)
//!                                                    ├─ /apis/{g}/{v}[/...] of an aggregated group ─▶ aggregator::proxy
//!                                                    └─ /api/v1/..., /apis/{g}/{v}/... ─▶ handlers::dispatch
//!                                                         (traced: request_trace::begin → handler → finish)
//! ```
//!
//! In front of every route, [`crate::access`] refuses a foreign `Host` or `Origin`; under the
//! router, [`crate::connections`] accepts and serves the connections.

use crate::access::{self, Verdict};
use crate::admin;
use crate::aggregator;
use crate::auth;
use crate::collector;
use crate::connect;
use crate::connections;
use crate::discovery;
use crate::error::{ApiError, Result};
use crate::handlers;
use crate::healthz;
use crate::openapi::{self, OpenApiKind};
use crate::registry::Registry;
use crate::request::{Accept, MAX_BODY_BYTES, Query, Route};
use crate::request_trace;
use crate::response::{json_response, json_response_as};
use crate::state::AppState;
use crate::ui;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The HTTP router (no socket: tests call it with `tower::ServiceExt::oneshot`).
pub fn router(state: AppState) -> Router {
    Router::new().fallback(dispatch).with_state(state)
}

/// Serves a request made inside the server (the admin API's writes of the faults ConfigMap go
/// through the same handler chain, tracing and fault table reload as a client's): the
/// [`admin::Dispatch`] the router hands to the admin API.
fn dispatch_internal(
    state: AppState,
    req: Request,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match route(state, req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        }
    })
}

async fn dispatch(State(state): State<AppState>, mut req: Request) -> Response {
    let cors = match state.options().access.check(req.method(), req.headers()) {
        Verdict::Serve => None,
        Verdict::ServeCors(origin) => Some(origin),
        Verdict::Answer(resp) => return nosniff(resp),
    };
    let mut resp = match authenticate_and_authorize(&state, &mut req).await {
        Err(refused) => *refused,
        Ok(()) => match route(state, req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        },
    };
    if let Some(origin) = cors {
        access::add_cors_headers(&mut resp, origin);
    }
    nosniff(resp)
}

/// Who sent the request (401 when its credentials are not valid), whom it acts as (its
/// `Impersonate-*` headers, each allowed or 403), and whether that user may do what it asks
/// (403 with Kubernetes' wording); the user is left in the request's extensions.
async fn authenticate_and_authorize(
    state: &AppState,
    req: &mut Request,
) -> std::result::Result<(), Box<Response>> {
    let auth = state.auth();
    let (path, query) = crate::request::path_and_query(req.uri(), req.extensions());
    let secure = state.options().connections.tls.is_some();
    match auth::ui_login(auth, path, query, secure) {
        None => {}
        Some(Err(e)) => return Err(Box::new(e.into_response())),
        Some(Ok(cookie)) => {
            let mut resp = StatusCode::SEE_OTHER.into_response();
            resp.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/ui"));
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().insert(header::SET_COOKIE, value);
            }
            return Err(Box::new(resp));
        }
    }
    let peer = req.extensions().get::<crate::PeerCertificates>();
    let found = match auth.authenticate(req.headers(), peer) {
        Ok(auth::Authenticated::User(user)) => Ok(user),
        Ok(auth::Authenticated::ServiceAccount(token)) => {
            auth::serviceaccount::lookup(state, &token).await
        }
        Err(why) => Err(why),
    };
    let user = match found {
        Ok(user) => user,
        Err(why) => {
            tracing::info!(path = %req.uri().path(), reason = %why, "Unable to authenticate the request");
            return Err(Box::new(ApiError::Unauthorized.into_response()));
        }
    };
    let user = match auth.impersonate(&user, req.headers_mut()) {
        Ok(None) => user,
        Ok(Some(acting)) => {
            tracing::debug!("{} is impersonating {}", user.describe(), acting.describe());
            acting
        }
        Err(auth::Refusal::Forbidden(e)) => return Err(Box::new(e.into_response())),
        Err(auth::Refusal::Malformed(why)) => {
            let text = format!("Internal Server Error: {:?}: {why}", req.uri().to_string());
            let mut resp = (StatusCode::INTERNAL_SERVER_ERROR, text).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return Err(Box::new(resp));
        }
    };
    let allowed_without_asking = auth.options().authorization_mode
        == auth::AuthorizationMode::AlwaysAllow
        || user.in_group(auth::user::SYSTEM_MASTERS);
    let reason = if allowed_without_asking {
        String::new()
    } else {
        let (path, query) = crate::request::path_and_query(req.uri(), req.extensions());
        let attrs =
            auth::attributes::Attributes::of_request(user.clone(), req.method(), path, query);
        let decision = auth.authorize(&attrs);
        if !decision.allowed {
            tracing::info!(user = %attrs.user.describe(), verb = %attrs.verb, resource = %attrs.combined_resource(), namespace = %attrs.namespace, path = %attrs.path, reason = %decision.reason, "Forbidden");
            let err = auth::forbidden(&attrs, &decision.reason);
            trace_refusal(state, req, &attrs, &err);
            return Err(Box::new(err.into_response()));
        }
        decision.reason
    };
    req.extensions_mut()
        .insert(auth::RequestUser { user, reason });
    Ok(())
}

/// Records the span of a resource request refused by authorization (when it would have been
/// traced), so the 403 shows in the caller's trace with the user and the reason.
fn trace_refusal(
    state: &AppState,
    req: &Request,
    attrs: &auth::attributes::Attributes,
    err: &ApiError,
) {
    if !state.options().tracing.enabled {
        return;
    }
    let (path, raw_query) = crate::request::path_and_query(req.uri(), req.extensions());
    let Route::Resource(path) = Route::parse(path) else {
        return;
    };
    let watch = Query::parse(raw_query).flag("watch").unwrap_or(false);
    let Some(mut trace) = request_trace::begin(req.method(), &path, watch, req.headers(), |id| {
        state.collector().samples(id)
    }) else {
        return;
    };
    trace.set_attribute("user", &attrs.user.name);
    if let Some(span) = trace.finish(err.code(), Some(format!("{}: {err}", err.reason()))) {
        state.collector().record(span);
    }
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
    let remote = || state.aggregator().discovery_groups(&reg);
    match route {
        _ if aggregator::proxies(state.aggregator(), &reg, path) => {
            aggregator::proxy::serve(state, parts, body).await
        }
        Route::Version => get_only(json_response(StatusCode::OK, &discovery::version())),
        Route::Metrics => {
            let text =
                crate::metrics::render(state.storage().backend().as_ref(), state.long_running());
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
                &discovery::aggregated(&reg, &[], true, v),
                v.content_type(),
            ),
            None => json_response(StatusCode::OK, &discovery::core_versions()),
        }),
        Route::Groups => get_only(match accept.aggregated {
            Some(v) => json_response_as(
                StatusCode::OK,
                &discovery::aggregated(&reg, &remote(), false, v),
                v.content_type(),
            ),
            None => json_response(StatusCode::OK, &discovery::group_list(&reg, &remote())),
        }),
        Route::Group(g) => {
            let body = discovery::group(&reg, &remote(), &g).ok_or(ApiError::PathNotFound)?;
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
        Route::Connect(path, tail) => connect::serve(state, parts, body, path, tail, query).await,
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
            if let (Some(t), Some(who)) =
                (trace.as_mut(), parts.extensions.get::<auth::RequestUser>())
            {
                t.set_attribute("user", &who.user.name);
                if !who.reason.is_empty() {
                    t.set_attribute("authorization", &who.reason);
                }
            }
            if let Some(t) = trace.as_mut()
                && admin::touches_admin_configmaps(&parts.method, &path)
            {
                for (header, attribute) in [
                    (admin::FAULT_HEADER, "fault"),
                    (admin::clock::CLOCK_HEADER, "clock"),
                ] {
                    if let Some(what) = parts.headers.get(header).and_then(|v| v.to_str().ok()) {
                        t.set_attribute(attribute, what);
                    }
                }
            }
            let collector_state = trace.as_ref().map(|_| state.clone());
            let reload_admin =
                admin::touches_admin_configmaps(&parts.method, &path).then(|| state.clone());
            let injected = injected_failure(&state, &parts.method, &parts.headers, &path);
            let result = match injected {
                Some((fault, err)) => {
                    if let Some(t) = trace.as_mut() {
                        t.set_attribute("fault", fault.as_str());
                    }
                    Err(err)
                }
                None => {
                    handlers::dispatch::resource(handlers::RequestContext {
                        user: parts
                            .extensions
                            .get::<auth::RequestUser>()
                            .map(|u| u.user.clone())
                            .unwrap_or_else(auth::user::UserInfo::api_server),
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
            if let Some(state) = reload_admin
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
            admin::handle(
                state,
                dispatch_internal,
                admin_route,
                parts.method,
                &parts.headers,
                &bytes,
            )
            .await
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
    if !write || admin::touches_admin_configmaps(method, path) {
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
