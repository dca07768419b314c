//! A resource request to its verb's handler or to its subresource's: the route table of
//! Kubernetes' `staging/src/k8s.io/apiserver/pkg/endpoints/installer.go`, with the output
//! media type check of `endpoints/handlers/negotiation`.
//!
//! The top of the handlers: it imports every verb ([`super::get`], [`super::list`], ...) and
//! [`crate::subresource`], which is built on the verbs; only the router imports it.

use super::{RequestContext, create, delete, get, list, patch, update, watch};
use crate::error::{ApiError, Result};
use crate::registry::ResourceInfo;
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use std::sync::Arc;

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
    if super::component_status::is_component_status(&info) {
        return super::component_status::serve(ctx, info).await;
    }
    if let Some(review) = crate::auth::review::Review::of(&info.gvr.group, &info.gvr.resource) {
        return super::review::serve(ctx, review).await;
    }
    // An object nested deeper than a worker's stack can take may be decoded, kept, encoded or
    // dropped anywhere in the request: all of it runs on a large stack then.
    let large = crate::deep::needs_large_stack(info.deep_objects, &ctx.body);
    let deprecation = info.deprecation;
    let mut resp = crate::deep::LargeStack::new(dispatch(ctx, info), large).await?;
    // A deprecated kind's warning (`WithWarningRecorder` + `AddWarningsHandler` of the
    // installer); here on successful answers only.
    if let Some(warning) = deprecation {
        super::add_warnings(&mut resp, &[warning.to_owned()]);
    }
    Ok(resp)
}

/// [`resource`], once the route is known to be a resource's. A version served by conversion
/// goes through the storage version's row ([`super::converted`]).
pub(super) async fn dispatch(ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    if info.strategy.conversion().is_some() {
        return super::converted::serve(ctx, info).await;
    }
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
