//! The REST handlers: one implementation per verb, shared by every resource.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/` (`get.go`, `create.go`,
//! `update.go`, `patch.go`, `delete.go`, `watch.go`) and the route table of
//! `endpoints/installer.go`:
//!
//! ```text
//!   GET    .../{res}            list (or watch with ?watch=1)   GET    .../{res}/{name}  get
//!   POST   .../{res}            create                          PUT    .../{res}/{name}  update
//!   DELETE .../{res}            deletecollection                PATCH  .../{res}/{name}  patch
//!   DELETE .../{res}/{name}     delete                          *      .../{name}/{sub}  subresource
//! ```

pub mod create;
pub mod delete;
pub mod get;
pub mod list;
pub mod patch;
pub mod update;
pub mod watch;

use crate::error::{ApiError, Result};
use crate::registry::ResourceInfo;
use crate::request::{Accept, Query, ResourcePath, field_manager};
use crate::server::{AppState, json_response};
use crate::storage::ObjectRef;
use crate::table::{self, IncludeObject};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;

/// One resource request, parsed.
pub struct RequestContext {
    /// Server state.
    pub state: AppState,
    /// HTTP method.
    pub method: Method,
    /// The split URL.
    pub path: ResourcePath,
    /// Query parameters.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
    /// What the client accepts.
    pub accept: Accept,
    /// The body (at most [`crate::request::MAX_BODY_BYTES`]).
    pub body: Bytes,
    /// The store for this request's writes: it stamps the request's trace context on the
    /// objects it writes when the request is traced ([`crate::request_trace`]).
    pub storage: crate::storage::Storage,
}

impl RequestContext {
    /// The store, as this request writes to it.
    pub fn storage(&self) -> &crate::storage::Storage {
        &self.storage
    }

    /// The storage for a write answered with the written object ([`stored_object_response`]):
    /// when the answer is the object as plain JSON, the storage returns it as JSON and moves
    /// the object itself to the watch cache ([`crate::storage::Storage::answering_with_json`]).
    pub fn storage_for_written_object(&self) -> crate::storage::Storage {
        if self.accept.table || self.accept.partial_metadata {
            self.storage.clone()
        } else {
            self.storage.answering_with_json()
        }
    }

    /// The field manager of a write.
    pub fn field_manager(&self) -> String {
        field_manager(&self.query, &self.headers)
    }

    /// `?includeObject=` for Tables.
    pub fn include_object(&self) -> Result<IncludeObject> {
        IncludeObject::parse(self.query.get("includeObject"))
    }
}

fn method_not_allowed(method: &Method, info: &ResourceInfo) -> ApiError {
    let verb = match *method {
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "request",
    };
    ApiError::MethodNotAllowed(format!(
        "{verb} is not supported on resources of kind \"{}\"",
        info.gvr.group_resource()
    ))
}

/// The media types a resource answers in, as `negotiation.NegotiateOutputMediaType` lists them.
const ACCEPTED_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// 406 when the client's `Accept` names none of the media types the server can answer in
/// (`negotiation.NewNotAcceptableError`). No header, `*/*` or `application/*` accept anything;
/// YAML and protobuf clients get JSON, which they all list too.
fn check_acceptable(headers: &HeaderMap) -> Result<()> {
    let Some(raw) = headers
        .get(axum::http::header::ACCEPT)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
    else {
        return Ok(());
    };
    if raw.trim().is_empty() {
        return Ok(());
    }
    let acceptable = raw.split(',').any(|range| {
        let essence = range.split(';').next().unwrap_or("").trim();
        matches!(
            essence.to_ascii_lowercase().as_str(),
            "*/*"
                | "application/*"
                | "application/json"
                | "application/yaml"
                | "application/vnd.kubernetes.protobuf"
        )
    });
    if acceptable {
        Ok(())
    } else {
        Err(ApiError::NotAcceptable(format!(
            "only the following media types are accepted: {ACCEPTED_MEDIA_TYPES}"
        )))
    }
}

/// The object a named request addresses.
pub fn object_ref(info: &Arc<ResourceInfo>, path: &ResourcePath, name: &str) -> ObjectRef {
    ObjectRef {
        info: info.clone(),
        namespace: if info.namespaced {
            path.namespace.clone()
        } else {
            None
        },
        name: name.to_string(),
    }
}

/// Routes a resource request to its verb.
pub async fn resource(ctx: RequestContext) -> Result<Response> {
    let info = ctx
        .state
        .registry()
        .lookup(&ctx.path.gv, &ctx.path.resource)
        .ok_or(ApiError::PathNotFound)?;
    // A namespace segment on a cluster-scoped resource, or a named namespaced object without
    // one, is not a route.
    if (!info.namespaced && ctx.path.namespace.is_some())
        || (info.namespaced && ctx.path.namespace.is_none() && ctx.path.name.is_some())
    {
        return Err(ApiError::PathNotFound);
    }
    check_acceptable(&ctx.headers)?;
    if crate::component_status::is_component_status(&info) {
        return crate::component_status::serve(ctx, info).await;
    }
    // An object nested deeper than a worker's stack can take may be decoded, kept, encoded or
    // dropped anywhere in the request: all of it runs on a large stack then.
    let large = crate::deep::needs_large_stack(info.deep_objects, &ctx.body);
    crate::deep::LargeStack::new(dispatch(ctx, info), large).await
}

/// [`resource`], once the route is known to be a resource's.
async fn dispatch(ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    let name = ctx.path.name.clone();
    let sub = ctx.path.subresource.clone();
    match (&ctx.method, name, sub) {
        (&Method::GET, None, None) => {
            if ctx.query.flag("watch")? {
                watch::watch(ctx, info).await
            } else {
                list::list(ctx, info).await
            }
        }
        (&Method::POST, None, None) => create::create(ctx, info).await,
        (&Method::DELETE, None, None) => delete::delete_collection(ctx, info).await,
        (&Method::GET, Some(name), None) => get::get(ctx, info, &name).await,
        (&Method::PUT, Some(name), None) => update::update(ctx, info, &name).await,
        (&Method::PATCH, Some(name), None) => patch::patch(ctx, info, &name).await,
        (&Method::DELETE, Some(name), None) => delete::delete(ctx, info, &name).await,
        (_, Some(name), Some(sub)) => crate::subresource::handle(ctx, info, &name, &sub).await,
        (m, _, _) => Err(method_not_allowed(m, &info)),
    }
}

/// Answers with one object, as JSON or as a one-row Table.
pub fn object_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    code: StatusCode,
    obj: &Value,
    warnings: &[String],
) -> Result<Response> {
    let mut resp = if ctx.accept.table {
        let rv = crate::meta::resource_version(obj).unwrap_or_default();
        let table = table::table(
            info,
            std::slice::from_ref(obj),
            json!({"resourceVersion": rv}),
            ctx.include_object()?,
            true,
            ctx.state.now(),
        );
        json_response(code, &table)
    } else if ctx.accept.partial_metadata {
        json_response(code, &crate::meta::partial_object_metadata(obj))
    } else {
        json_response(code, obj)
    };
    add_warnings(&mut resp, warnings);
    Ok(resp)
}

/// [`object_response`] for an object just written, whose JSON the storage returned (`json`,
/// the stored bytes with the resourceVersion spliced in): a plain JSON answer sends those
/// bytes instead of encoding the object again.
pub fn stored_object_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    code: StatusCode,
    obj: &Value,
    json: Option<&Bytes>,
    warnings: &[String],
) -> Result<Response> {
    match json {
        Some(json) if !ctx.accept.table && !ctx.accept.partial_metadata => {
            // The stored bytes are already in kube-apiserver's order; `json.Encoder` ends the
            // document with a newline.
            let mut body = Vec::with_capacity(json.len() + 1);
            body.extend_from_slice(json);
            body.push(b'\n');
            let mut resp = (code, body).into_response();
            resp.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            add_warnings(&mut resp, warnings);
            Ok(resp)
        }
        _ => object_response(ctx, info, code, obj, warnings),
    }
}

/// Answers a read-modify-write: 201 when it created the object, else 200.
pub fn written_response(
    ctx: &RequestContext,
    info: &ResourceInfo,
    updated: &crate::storage::Updated,
    warnings: &[String],
) -> Result<Response> {
    let code = if updated.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    stored_object_response(
        ctx,
        info,
        code,
        &updated.object,
        updated.json.as_ref(),
        warnings,
    )
}

/// Adds `Warning: 299 - "..."` headers (RFC 7234 warn-code 299, as Kubernetes sends them).
pub fn add_warnings(resp: &mut Response, warnings: &[String]) {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append("warning", v);
        }
    }
}
