//! A version served by conversion: requests to a row whose strategy has a
//! [`VersionConversion`] (autoscaling/v1 HorizontalPodAutoscalers) are served by the row of the
//! storage version, with bodies converted on the way in and answers on the way out — what
//! kube-apiserver's codecs do for every non-storage version (`runtime.Scheme.Convert` through
//! the internal type, in `endpoints/handlers` and the storage's versioner).
//!
//! ```text
//!   POST/PUT  v1 body ─ check (type, unknown fields, decoding, as v1) ─▶ to_storage ─▶ v2 row
//!   PATCH     stored v2 ─▶ to_served ─▶ patch applied to the v1 view ─▶ to_storage ─▶
//!             PUT to the v2 row (guarded by the resourceVersion read; retried on conflict)
//!   answers   objects, lists, Tables' row objects, watch events ─▶ to_served
//! ```
//!
//! Simplifications: managedFields are recorded by the storage version's row, so their entries
//! name its apiVersion and fields; a server-side apply through the converted version converts
//! the apply configuration (so it must decode as a whole object of that version) and applies
//! it in the storage version.

use super::patch::{apply_patch, patch_body, patch_error, patch_type};
use super::{RequestContext, object_ref};
use crate::error::{ApiError, Result};
use crate::meta::{self, MetaField};
use crate::patch::PatchType;
use crate::registry::ResourceInfo;
use crate::request::decode_body_noting_duplicates;
use crate::rest;
use crate::strategy::VersionConversion;
use axum::body::Body;
use axum::http::{HeaderValue, Method, header};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;

/// How many times a patch is re-applied when another writer changed the object in between.
const PATCH_ATTEMPTS: usize = 5;

/// The converted version's view of a request to the storage row.
struct View<'a> {
    info: &'a ResourceInfo,
    conversion: &'a dyn VersionConversion,
}

impl View<'_> {
    /// A storage-version object of this kind (not a Status, list or Table).
    fn is_stored_object(&self, v: &Value) -> bool {
        meta::kind(v) == Some(self.info.kind.as_str())
            && meta::api_version(v)
                == Some(
                    self.conversion
                        .storage_gvk()
                        .group_version()
                        .api_version()
                        .as_str(),
                )
    }

    fn to_served(&self, v: &Value) -> Result<Value> {
        self.conversion.to_served(v).map_err(|e| {
            ApiError::Internal(format!("converting to {}: {e}", self.info.api_version()))
        })
    }

    /// Converts what an answer carries: an object, a list's items, a Table's row objects.
    /// Returns whether anything changed.
    fn convert(&self, v: &mut Value) -> Result<bool> {
        if self.is_stored_object(v) {
            *v = self.to_served(v)?;
            return Ok(true);
        }
        let kind = meta::kind(v).unwrap_or_default().to_owned();
        if kind == self.info.list_kind() {
            for item in v
                .get_mut("items")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if self.is_stored_object(item) {
                    *item = self.to_served(item)?;
                }
            }
            meta::set_type(v, &self.info.api_version(), &kind);
            return Ok(true);
        }
        if kind == "Table" {
            let mut changed = false;
            for row in v
                .get_mut("rows")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(obj) = row.get_mut("object")
                    && self.is_stored_object(obj)
                {
                    *obj = self.to_served(obj)?;
                    changed = true;
                }
            }
            return Ok(changed);
        }
        Ok(false)
    }

    /// One watch line (`{"type":..,"object":..}`) in the converted version.
    fn convert_line(&self, line: &[u8]) -> Vec<u8> {
        let Ok(mut event) = serde_json::from_slice::<Value>(line) else {
            return line.to_vec();
        };
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(object) = event.get_mut("object") else {
            return line.to_vec();
        };
        match kind.as_str() {
            "BOOKMARK" => meta::set_type(object, &self.info.api_version(), &self.info.kind),
            "ERROR" => return line.to_vec(),
            _ => {
                if self.convert(object).is_err() {
                    return line.to_vec();
                }
            }
        }
        let mut out = Vec::with_capacity(line.len() + 64);
        out.extend_from_slice(b"{\"type\":");
        out.extend_from_slice(&serde_json::to_vec(&kind).unwrap_or_default());
        out.extend_from_slice(b",\"object\":");
        out.extend_from_slice(&crate::wire::to_vec(object));
        out.extend_from_slice(b"}");
        out
    }
}

/// Serves a request to a converted version's row (`info`) through the storage version's row.
pub async fn serve(mut ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    let strategy = info.strategy.clone();
    let conversion = strategy
        .conversion()
        .ok_or_else(|| ApiError::Internal(format!("{} has no conversion", info.gvk())))?;
    let gv = conversion.storage_gvk().group_version();
    let storage = ctx
        .state
        .registry()
        .lookup(&gv, &info.gvr.resource)
        .ok_or(ApiError::PathNotFound)?;
    let view = View {
        info: &info,
        conversion,
    };
    ctx.path.gv = gv;
    let named = ctx.path.name.clone();
    let watch = ctx.method == Method::GET && named.is_none() && ctx.query.flag("watch")?;
    let mut warnings = Vec::new();
    match (&ctx.method, &named) {
        (&Method::POST, None) | (&Method::PUT, Some(_)) => {
            warnings = convert_body(&mut ctx, &view)?;
        }
        (&Method::PATCH, Some(name)) => {
            return patch(ctx, &view, storage, name).await;
        }
        _ => {}
    }
    let resp = Box::pin(super::dispatch::dispatch(ctx, storage)).await?;
    answer(resp, &view, watch, &warnings).await
}

/// A POST/PUT body checked as the converted version, then replaced by its storage version.
fn convert_body(ctx: &mut RequestContext, view: &View<'_>) -> Result<Vec<String>> {
    let mode = ctx.query.field_validation()?;
    let (mut body, duplicates) =
        decode_body_noting_duplicates(&ctx.headers, &ctx.body, &view.info.kind)?;
    rest::check_type(view.info, &mut body)?;
    let warnings = rest::check_body(view.info, &body, &duplicates, mode)?;
    let converted = view
        .conversion
        .to_storage(&body)
        .map_err(|msg| decode_error(view.info, &msg))?;
    set_json_body(ctx, &converted);
    Ok(warnings)
}

fn decode_error(info: &ResourceInfo, msg: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "{} in version \"{}\" cannot be handled as a {}: {msg}",
        info.kind, info.gvr.version, info.kind
    ))
}

fn set_json_body(ctx: &mut RequestContext, body: &Value) {
    ctx.body = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    ctx.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
}

/// A copy of the request for one attempt of a patch.
fn attempt(ctx: &RequestContext) -> RequestContext {
    RequestContext {
        state: ctx.state.clone(),
        method: ctx.method.clone(),
        path: ctx.path.clone(),
        query: ctx.query.clone(),
        headers: ctx.headers.clone(),
        accept: ctx.accept,
        body: ctx.body.clone(),
        storage: ctx.storage.clone(),
        user: ctx.user.clone(),
    }
}

/// PATCH: applied to the converted view of the stored object, written back as a PUT.
async fn patch(
    ctx: RequestContext,
    view: &View<'_>,
    storage: Arc<ResourceInfo>,
    name: &str,
) -> Result<Response> {
    let pt = patch_type(&ctx)?;
    let patch_doc = patch_body(&ctx, pt, &view.info.kind)?;
    if pt == PatchType::Apply {
        let mut applied = patch_doc;
        rest::check_type(view.info, &mut applied)?;
        let converted = view
            .conversion
            .to_storage(&applied)
            .map_err(|msg| decode_error(view.info, &msg))?;
        let mut forward = attempt(&ctx);
        forward.body = Bytes::from(serde_json::to_vec(&converted).unwrap_or_default());
        let resp = Box::pin(super::dispatch::dispatch(forward, storage)).await?;
        return answer(resp, view, false, &[]).await;
    }
    let pinned = patch_doc
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .is_some();
    let r = object_ref(&storage, &ctx.path, name);
    let mut tries = 0;
    loop {
        tries += 1;
        let current = ctx
            .state
            .storage()
            .get(&r)
            .await?
            .ok_or_else(|| r.not_found())?;
        let stored_rv = meta::resource_version(&current).map(str::to_owned);
        let original = view.to_served(&current)?;
        let patched = apply_patch(pt, &original, &patch_doc, &view.info.gvk())
            .map_err(|e| patch_error(view.info, name, e))?;
        let mut body = view
            .conversion
            .to_storage(&patched)
            .map_err(|msg| decode_error(view.info, &msg))?;
        if meta::resource_version(&body).is_none() {
            meta::set_meta_str(&mut body, MetaField::ResourceVersion, stored_rv.as_deref());
        }
        let mut put = attempt(&ctx);
        put.method = Method::PUT;
        set_json_body(&mut put, &body);
        match Box::pin(super::dispatch::dispatch(put, storage.clone())).await {
            Err(ApiError::Conflict { .. }) if !pinned && tries < PATCH_ATTEMPTS => continue,
            Err(e) => return Err(e),
            Ok(resp) => return answer(resp, view, false, &[]).await,
        }
    }
}

/// The storage row's answer in the converted version, with the body check's warnings.
async fn answer(
    resp: Response,
    view: &View<'_>,
    watch: bool,
    warnings: &[String],
) -> Result<Response> {
    let (mut parts, body) = resp.into_parts();
    if watch {
        let stream = body.into_data_stream();
        let info = Arc::new(view.info.clone());
        let strategy = info.strategy.clone();
        let lines = stream
            .scan(Vec::<u8>::new(), move |pending, chunk| {
                let out = chunk.map(|chunk| {
                    pending.extend_from_slice(&chunk);
                    let mut converted = Vec::new();
                    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        match strategy.conversion() {
                            Some(conversion) => {
                                let view = View {
                                    info: &info,
                                    conversion,
                                };
                                converted.extend(view.convert_line(&line[..line.len() - 1]));
                                converted.push(b'\n');
                            }
                            None => converted.extend(line),
                        }
                    }
                    Bytes::from(converted)
                });
                std::future::ready(Some(out))
            })
            .filter(|chunk| std::future::ready(!matches!(chunk, Ok(b) if b.is_empty())));
        let mut resp = Response::from_parts(parts, Body::from_stream(lines));
        super::add_warnings(&mut resp, warnings);
        return Ok(resp);
    }
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::Internal(format!("reading the answer: {e}")))?;
    let mut converted = bytes;
    if let Ok(mut value) = serde_json::from_slice::<Value>(&converted)
        && view.convert(&mut value)?
    {
        let mut out = Vec::with_capacity(converted.len() + 256);
        crate::wire::write_document(&mut out, &value)
            .map_err(|e| ApiError::Internal(format!("encoding the answer: {e}")))?;
        converted = Bytes::from(out);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    let mut resp = Response::from_parts(parts, Body::from(converted));
    super::add_warnings(&mut resp, warnings);
    Ok(resp)
}
