//! GET of one object (`endpoints/handlers/get.go` `GetResource`).
//!
//! Unlike Kubernetes, `?resourceVersion=` on a get is ignored: the store is always read at its
//! latest revision, which satisfies every value a client may send ("", "0", or an RV it saw).

use super::{RequestContext, object_ref, object_response};
use crate::error::Result;
use crate::registry::ResourceInfo;
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;

/// Answers the object, as JSON or a one-row Table; 404 when it does not exist.
pub async fn get(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    let r = object_ref(&info, &ctx.path, name);
    let obj = ctx
        .state
        .storage()
        .get(&r)
        .await?
        .ok_or_else(|| r.not_found())?;
    object_response(&ctx, &info, StatusCode::OK, &obj, &[])
}
