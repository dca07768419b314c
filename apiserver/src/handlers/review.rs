//! POSTs of the access and identity reviews (`crate::auth::review`): create-only resources
//! whose objects are answered, never stored.
//!
//! Mirrors the `rest.Creater`-only registries of `pkg/registry/authorization/` and
//! `pkg/registry/authentication/selfsubjectreview/`: any other verb is 405, and the answer is
//! 201 Created with the object and its `status`.

use super::RequestContext;
use crate::auth::review::{self, Review};
use crate::error::{ApiError, Result};
use crate::request::decode_body;
use crate::response::json_response;
use axum::http::{Method, StatusCode};
use axum::response::Response;

/// Answers a request to a review resource.
pub async fn serve(ctx: RequestContext, which: Review) -> Result<Response> {
    if ctx.method != Method::POST || ctx.path.name.is_some() || ctx.path.subresource.is_some() {
        return Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        ));
    }
    let mut body = decode_body(&ctx.headers, &ctx.body, which.kind())?;
    if which == Review::Token {
        let status = review::token_review(&ctx.state, &body).await?;
        if let Some(obj) = body.as_object_mut() {
            obj.insert("status".into(), status);
        }
    }
    let answered = review::answer(
        ctx.state.auth(),
        which,
        &ctx.user,
        ctx.path.namespace.as_deref(),
        body,
    )?;
    Ok(json_response(StatusCode::CREATED, &answered))
}
