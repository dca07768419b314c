//! `namespaces/{name}/finalize` (`pkg/registry/core/namespace/storage/storage.go`
//! `FinalizeREST`): the namespace controller's PUT that replaces `spec.finalizers` once a
//! terminating namespace is empty. When the last finalizer goes, the namespace is removed.

use crate::error::Result;
use crate::handlers::update::decide_update;
use crate::handlers::{RequestContext, object_ref, object_response};
use crate::meta;
use crate::registry::ResourceInfo;
use crate::request::decode_body;
use crate::rest::{WriteContext, WritePart};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;
use std::sync::Arc;

/// PUT `namespaces/{name}/finalize`.
pub async fn update(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    ctx.query.validate_options("UpdateOptions", Vec::new())?;
    let dry_run = ctx.query.dry_run()?;
    let body = decode_body(&ctx.headers, &ctx.body, &info.kind)?;
    let finalizers = meta::spec_finalizers(&body);
    let r = object_ref(&info, &ctx.path, name);
    let wctx = WriteContext {
        manager: Some(ctx.field_manager()),
        now: ctx.state.now(),
        ids: ctx.state.ids().clone(),
        part: WritePart::Finalize,
        escalation: None,
        service_account: None,
        user: None,
        signer_check: None,
    };
    let updated = ctx
        .storage()
        .guaranteed_update(&r, dry_run, |current| {
            let old = current.ok_or_else(|| r.not_found())?;
            let mut new = old.clone();
            meta::spec_mut(&mut new).insert("finalizers".into(), json!(finalizers));
            if let Some(rv) = meta::resource_version(&body) {
                meta::set_meta_str(&mut new, meta::MetaField::ResourceVersion, Some(rv));
            }
            decide_update(&r, old, new, &wctx)
        })
        .await?;
    object_response(&ctx, &info, StatusCode::OK, &updated.object, &[])
}
