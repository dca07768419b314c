//! UPDATE (PUT) (`endpoints/handlers/update.go`, `registry/generic/registry/store.go`
//! `Update`): a read-modify-write guarded by the resourceVersion the client sent (409 Conflict
//! when stale), with create-on-update only for kinds that allow it (`AllowCreateOnUpdate`).
//! Also the shared path of every write that replaces an object: `/status` and finalizer removal
//! (an update that empties the finalizers of an object being deleted removes it).

use super::{RequestContext, object_ref, written_response};
use crate::error::{ApiError, Result};
use crate::meta;
use crate::registry::ResourceInfo;
use crate::request::decode_body_noting_duplicates;
use crate::rest::{self, WriteContext, WritePart};
use crate::storage::{ObjectRef, Update};
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;

/// What an update decides for the current object: put the prepared object, or delete it when
/// it is being deleted and has no finalizers left.
pub fn decide_update(
    r: &ObjectRef,
    old: &Value,
    new: Value,
    wctx: &WriteContext,
) -> Result<Update> {
    decide_update_noting_unknown(r, old, new, wctx, false).map(|(update, _)| update)
}

/// [`decide_update`], also returning the unknown fields of `new` when `note_unknown` (see
/// [`rest::before_update_noting_unknown`]).
pub fn decide_update_noting_unknown(
    r: &ObjectRef,
    old: &Value,
    new: Value,
    wctx: &WriteContext,
    note_unknown: bool,
) -> Result<(Update, Vec<String>)> {
    let (prepared, unknown) = rest::before_update_noting_unknown(r, old, new, wctx, note_unknown)?;
    if rest::finalized(&r.info, &prepared) {
        Ok((Update::Delete(prepared), unknown))
    } else {
        Ok((Update::Put(prepared), unknown))
    }
}

/// Replaces the object (or its status, for `part == Status`) with the request body.
pub async fn replace(
    ctx: RequestContext,
    info: Arc<ResourceInfo>,
    name: &str,
    part: WritePart,
) -> Result<Response> {
    ctx.query.validate_options("UpdateOptions", Vec::new())?;
    let dry_run = ctx.query.dry_run()?;
    let mode = ctx.query.field_validation()?;
    let (mut body, duplicates) =
        decode_body_noting_duplicates(&ctx.headers, &ctx.body, &info.kind)?;
    rest::check_type(&info, &mut body)?;
    if let Some(body_name) = meta::name(&body)
        && body_name != name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if info.namespaced
        && let (Some(b), Some(u)) = (meta::namespace(&body), ctx.path.namespace.as_deref())
        && b != u
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    let unknown = if mode == crate::request::FieldValidation::Ignore {
        Vec::new()
    } else {
        info.strategy.unknown_fields(&body)
    };
    let warnings = rest::render_strict(&info, &duplicates, unknown, mode)?;
    let r = object_ref(&info, &ctx.path, name);
    let create_allowed = info.allow_create_on_update && part == WritePart::Main;
    if create_allowed && let Some(ns) = &r.namespace {
        super::create::check_namespace(&ctx.state, &info, ns).await?;
    }
    let wctx = WriteContext {
        manager: Some(ctx.field_manager()),
        now: ctx.state.now(),
        ids: ctx.state.ids().clone(),
        part,
        escalation: ctx.escalation_check(&info),
        service_account: None,
        user: Some(ctx.user.clone()),
        signer_check: ctx.signer_check(&info),
    };
    let updated = ctx
        .storage_for_written_object()
        .guaranteed_update(&r, dry_run, |current| match current {
            Some(old) => decide_update(&r, old, body.clone(), &wctx),
            None if create_allowed => {
                let mut obj = body.clone();
                meta::set_meta_str(&mut obj, meta::MetaField::Name, Some(name));
                rest::default(&info, &mut obj)?;
                rest::before_create(&info, r.namespace.as_deref(), &mut obj, &wctx)?;
                Ok(Update::Put(obj))
            }
            None => Err(r.not_found()),
        })
        .await?;
    written_response(&ctx, &info, &updated, &warnings)
}

/// PUT on the main resource.
pub async fn update(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    replace(ctx, info, name, WritePart::Main).await
}
