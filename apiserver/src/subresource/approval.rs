//! The `certificatesigningrequests/{name}/approval` subresource (`ApprovalREST` of
//! `pkg/registry/certificates/certificates/storage/storage.go`, with `csrApprovalStrategy`):
//! what `kubectl certificate approve|deny` writes. GET answers the whole object; PUT and PATCH
//! change only the conditions (the strategy keeps the rest, `crate::strategy::certificates`),
//! and need `approve` on the CSR's signer (`crate::auth::signer`).

use crate::error::Result;
use crate::handlers::{
    RequestContext, get as get_handler, patch as patch_handler, update as update_handler,
};
use crate::registry::ResourceInfo;
use crate::rest::WritePart;
use axum::response::Response;
use std::sync::Arc;

/// GET `.../{name}/approval`: the whole object.
pub async fn get(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    get_handler::get(ctx, info, name).await
}

/// PUT `.../{name}/approval`: replaces the conditions.
pub async fn update(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    update_handler::replace(ctx, info, name, WritePart::Approval).await
}

/// PATCH `.../{name}/approval`: patches the object, keeps only the patched conditions.
pub async fn patch(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    patch_handler::patch_part(ctx, info, name, WritePart::Approval).await
}
