//! The `/status` subresource (`StatusREST` in each kind's `storage/storage.go`, with the
//! `statusStrategy.PrepareForUpdate` that keeps everything but `.status` from the stored
//! object). GET answers the whole object; PUT and PATCH change only `.status` and never bump
//! `metadata.generation`.

use crate::error::Result;
use crate::handlers::{
    RequestContext, get as get_handler, patch as patch_handler, update as update_handler,
};
use crate::registry::ResourceInfo;
use crate::rest::WritePart;
use axum::response::Response;
use std::sync::Arc;

/// GET `.../{name}/status`: the whole object.
pub async fn get(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    get_handler::get(ctx, info, name).await
}

/// PUT `.../{name}/status`: replaces `.status` only.
pub async fn update(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    update_handler::replace(ctx, info, name, WritePart::Status).await
}

/// PATCH `.../{name}/status`: patches the object, keeps only the patched `.status`.
pub async fn patch(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    patch_handler::patch_part(ctx, info, name, WritePart::Status).await
}
