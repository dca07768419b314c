//! `serviceaccounts/{name}/token`: the TokenRequest API (`kubectl create token NAME`).
//!
//! Mirrors `pkg/registry/core/serviceaccount/storage/token.go` (`TokenREST.Create`); the
//! token itself is made by [`crate::auth::serviceaccount`].

use crate::error::Result;
use crate::handlers::RequestContext;
use crate::registry::ResourceInfo;
use crate::request::decode_body;
use crate::response::json_response;
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;

/// Issues a token for the ServiceAccount `name` (201 with the TokenRequest and its status).
pub async fn create(ctx: RequestContext, _info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    let body = decode_body(&ctx.headers, &ctx.body, "TokenRequest")?;
    let namespace = ctx.path.namespace.clone().unwrap_or_default();
    let answered =
        crate::auth::serviceaccount::token_request(&ctx.state, &namespace, name, body).await?;
    Ok(json_response(StatusCode::CREATED, &answered))
}
