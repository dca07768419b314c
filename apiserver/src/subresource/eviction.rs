//! `pods/{name}/eviction`: a `policy/v1 Eviction` (`pkg/registry/core/pod/storage/eviction.go`).
//!
//! Unlike Kubernetes, PodDisruptionBudgets are not served, so an eviction is never refused with
//! 429: it is a delete of the pod with the Eviction's `deleteOptions`, honouring the pod's grace
//! period, answered with `201 Status Success`.

use super::success;
use crate::error::{ApiError, Result};
use crate::handlers::delete::{DeleteOptions, delete_object};
use crate::handlers::{RequestContext, object_ref};
use crate::request::decode_body;
use crate::response::json_response;
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;

/// POST `pods/{name}/eviction`.
pub async fn create(
    ctx: RequestContext,
    info: Arc<crate::registry::ResourceInfo>,
    name: &str,
) -> Result<Response> {
    let eviction = decode_body(&ctx.headers, &ctx.body, "Eviction")?;
    if let Some(n) = crate::meta::name(&eviction)
        && n != name
    {
        return Err(ApiError::BadRequest(format!(
            "name in URL does not match name in Eviction object: {name} != {n}"
        )));
    }
    let mut opts: DeleteOptions = match eviction.get("deleteOptions") {
        Some(o) if !o.is_null() => serde_json::from_value(o.clone())
            .map_err(|e| ApiError::BadRequest(format!("invalid deleteOptions: {e}")))?,
        _ => DeleteOptions::default(),
    };
    ctx.query.validate_options("CreateOptions", Vec::new())?;
    if ctx.query.dry_run()? {
        opts.dry_run = vec!["All".into()];
    }
    let r = object_ref(&info, &ctx.path, name);
    delete_object(&ctx, &r, &opts).await?;
    Ok(json_response(StatusCode::CREATED, &success(201)))
}
