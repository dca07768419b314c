//! Subresources: `.../{name}/status`, `/scale`, `pods/{name}/binding`, `pods/{name}/eviction`,
//! `pods/{name}/ephemeralcontainers`, `namespaces/{name}/finalize`,
//! `serviceaccounts/{name}/token` and `certificatesigningrequests/{name}/approval`.
//!
//! Kubernetes serves each as its own REST object next to the main one
//! (`pkg/registry/apps/deployment/storage/storage.go` `StatusREST`, `ScaleREST`;
//! `pkg/registry/core/pod/storage/storage.go` `BindingREST`, `eviction.go`;
//! `pkg/registry/core/namespace/storage/storage.go` `FinalizeREST`). Here they are functions
//! over the same generic storage, enabled per resource row.

pub mod approval;
pub mod binding;
pub mod ephemeralcontainers;
pub mod eviction;
pub mod finalize;
pub mod scale;
pub mod status;
pub mod token;

use crate::error::{ApiError, Result};
use crate::handlers::RequestContext;
use crate::registry::{ResourceInfo, Subresource};
use axum::http::Method;
use axum::response::Response;
use std::sync::Arc;

/// Routes a subresource request.
pub async fn handle(
    ctx: RequestContext,
    info: Arc<ResourceInfo>,
    name: &str,
    sub: &str,
) -> Result<Response> {
    let Some(sub) = Subresource::parse(sub).filter(|s| info.has(*s)) else {
        return Err(ApiError::PathNotFound);
    };
    let method = ctx.method.clone();
    match (sub, method) {
        (Subresource::Status, Method::GET) => status::get(ctx, info, name).await,
        (Subresource::Status, Method::PUT) => status::update(ctx, info, name).await,
        (Subresource::Status, Method::PATCH) => status::patch(ctx, info, name).await,
        (Subresource::Scale, Method::GET) => scale::get(ctx, info, name).await,
        (Subresource::Scale, Method::PUT) => scale::update(ctx, info, name).await,
        (Subresource::Scale, Method::PATCH) => scale::patch(ctx, info, name).await,
        (Subresource::Binding, Method::POST) => binding::create(ctx, info, name).await,
        (Subresource::Eviction, Method::POST) => eviction::create(ctx, info, name).await,
        (Subresource::Finalize, Method::PUT) => finalize::update(ctx, info, name).await,
        (Subresource::Token, Method::POST) => token::create(ctx, info, name).await,
        (Subresource::Approval, Method::GET) => approval::get(ctx, info, name).await,
        (Subresource::Approval, Method::PUT) => approval::update(ctx, info, name).await,
        (Subresource::Approval, Method::PATCH) => approval::patch(ctx, info, name).await,
        (Subresource::EphemeralContainers, Method::GET) => {
            ephemeralcontainers::get(ctx, info, name).await
        }
        (Subresource::EphemeralContainers, Method::PUT) => {
            ephemeralcontainers::update(ctx, info, name).await
        }
        (Subresource::EphemeralContainers, Method::PATCH) => {
            ephemeralcontainers::patch(ctx, info, name).await
        }
        (sub, m) => Err(ApiError::MethodNotAllowed(format!(
            "{m} is not supported on {}/{}",
            info.gvr.resource,
            sub.name()
        ))),
    }
}

/// A `Status` of kind Success with an HTTP code (what binding and eviction answer).
pub fn success(code: u16) -> serde_json::Value {
    serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}
