//! PATCH (`endpoints/handlers/patch.go`): the four patch types, applied inside the store's
//! read-modify-write loop so a concurrent writer makes the patch re-apply, never lose an update.
//!
//! ```text
//!   application/json-patch+json          RFC 6902 ops            patch::json_patch
//!   application/merge-patch+json         RFC 7386 merge          patch::json_merge_patch
//!   application/strategic-merge-patch+json  merge keys (built-ins)  patch::strategic_merge_patch
//!   application/apply-patch+yaml         server-side apply       patch::server_side_apply
//!                                        (creates when absent: 201; needs ?fieldManager=)
//! ```
//!
//! The patched object then goes through the same checks as a PUT ([`rest::before_update`]).

use super::update::{decide_update, decide_update_noting_unknown};
use super::{RequestContext, object_ref, written_response};
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersionKind;
use crate::patch::{self, PatchError, PatchType};
use crate::registry::ResourceInfo;
use crate::request::{
    FieldValidation, content_type, decode_json, decode_json_noting_duplicates, decode_yaml,
};
use crate::rest::{self, WriteContext, WritePart};
use crate::storage::{ObjectRef, Update, target};
use crate::strategy::{FieldError, FieldErrorKind};
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;

/// The 415 message Kubernetes sends for an unknown PATCH content type.
const UNSUPPORTED_PATCH: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json";

/// Maps a patch failure to the API error Kubernetes answers with.
pub fn patch_error(info: &ResourceInfo, name: &str, e: PatchError) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::BadRequest(m),
        PatchError::Invalid(m) => ApiError::Invalid {
            target: target(info, name),
            errors: vec![FieldError {
                kind: FieldErrorKind::Invalid,
                field: "patch".into(),
                value: None,
                detail: m,
            }],
        },
        PatchError::Conflicts(conflicts) => ApiError::ApplyConflicts { conflicts },
        PatchError::Unsupported(m) => ApiError::UnsupportedMediaType(m),
    }
}

/// Parses the patch type from the request's content type (415 when unknown).
pub fn patch_type(ctx: &RequestContext) -> Result<PatchType> {
    let ct = content_type(&ctx.headers);
    PatchType::from_content_type(&ct)
        .ok_or_else(|| ApiError::UnsupportedMediaType(UNSUPPORTED_PATCH.into()))
}

/// Decodes a patch body: YAML (or JSON) for apply, JSON for the others.
pub fn patch_body(ctx: &RequestContext, pt: PatchType, kind: &str) -> Result<Value> {
    match pt {
        // `applyPatcher`: the apply configuration is YAML (JSON being YAML too).
        PatchType::Apply => serde_norway::from_slice::<Value>(&ctx.body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))
            .and_then(|v| match v {
                Value::Object(_) => Ok(v),
                _ => decode_yaml(&ctx.body, kind),
            }),
        PatchType::Json => crate::deep::check_depth(&ctx.body)
            .and_then(|()| crate::deep::value_from_slice(&ctx.body).map_err(|e| e.to_string()))
            .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}"))),
        PatchType::Merge | PatchType::StrategicMerge => decode_json(&ctx.body, kind),
    }
}

/// [`patch_body`], with the keys a merge or strategic merge patch gives twice (strict
/// decoding errors: `kjson.UnmarshalStrict` of the patch in `jsonPatcher`/`smpPatcher`).
fn patch_body_noting_duplicates(
    ctx: &RequestContext,
    pt: PatchType,
    kind: &str,
) -> Result<(Value, Vec<String>)> {
    match pt {
        PatchType::Merge | PatchType::StrategicMerge => {
            decode_json_noting_duplicates(&ctx.body, kind)
        }
        _ => patch_body(ctx, pt, kind).map(|v| (v, Vec::new())),
    }
}

/// Applies a non-apply patch to `original` (of kind `gvk`). A merge patch's result leaves out
/// `original`'s managedFields unless the patch sets them
/// ([`patch::json_merge_patch_of_stored`]): the update keeps the stored ones.
pub fn apply_patch(
    pt: PatchType,
    original: &Value,
    patch_doc: &Value,
    gvk: &GroupVersionKind,
) -> Result<Value, PatchError> {
    match pt {
        PatchType::Json => patch::json_patch(original, patch_doc),
        PatchType::Merge => Ok(patch::json_merge_patch_of_stored(original, patch_doc)),
        PatchType::StrategicMerge => patch::strategic_merge_patch(original, patch_doc, gvk),
        PatchType::Apply => Err(PatchError::BadRequest(
            "apply patches are handled by server-side apply".into(),
        )),
    }
}

/// The type check of server-side apply (`versionCheckManager.Apply` in
/// `apimachinery/pkg/util/managedfields/internal/versioncheck.go`): the patch must name the
/// endpoint's apiVersion and kind — neither is defaulted from the URL as for other writes.
fn check_apply_type(info: &ResourceInfo, patch_doc: &Value) -> Result<()> {
    let api_version = crate::meta::api_version(patch_doc).unwrap_or("");
    let kind = crate::meta::kind(patch_doc).unwrap_or("");
    if api_version == info.api_version() && kind == info.kind {
        return Ok(());
    }
    // `schema.ParseGroupVersion`; one that does not parse is the empty GroupVersion.
    let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
        [version] => ("", version),
        [group, version] => (group, version),
        _ => ("", ""),
    };
    Err(ApiError::BadRequest(format!(
        "invalid object type: {group}/{version}, Kind={kind}"
    )))
}

/// What `patcher.applyPatch` checks of a patched object (`rest.EnsureObjectNamespaceMatchesRequestNamespace`,
/// then `checkName` in `handlers/rest.go`): a patch may not move the object to another
/// namespace or rename it.
fn check_patched_identity(r: &ObjectRef, obj: &Value) -> Result<()> {
    if let (Some(want), Some(got)) = (r.namespace.as_deref(), crate::meta::namespace(obj))
        && !got.is_empty()
        && got != want
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    let got = crate::meta::name(obj).unwrap_or("");
    if got != r.name {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({got}) does not match the name on the URL ({})",
            r.name
        )));
    }
    Ok(())
}

/// A patched object that does not decode into the kind is the patch's fault: 422 on the
/// field `patch` of no kind, as `applyPatchToObject` and `jsonPatcher` answer
/// (`errors.NewInvalid(schema.GroupKind{}, "", ...)`), with the patch as Go prints a map
/// (strategic merge) or the patched JSON (the others) as the value.
fn undecodable_patch(
    info: &ResourceInfo,
    pt: PatchType,
    patch_doc: &Value,
    patched: Option<String>,
    e: ApiError,
) -> ApiError {
    let prefix = format!(
        "{} in version \"{}\" cannot be handled as a {}: ",
        info.kind, info.gvr.version, info.kind
    );
    match e {
        ApiError::BadRequest(m)
            if m.starts_with(&prefix) && !m.contains("strict decoding error") =>
        {
            invalid_patch(pt, patch_doc, patched, m[prefix.len()..].to_string())
        }
        e => e,
    }
}

/// `errors.NewInvalid(schema.GroupKind{}, "", field.Invalid(field.NewPath("patch"), ...))`.
fn invalid_patch(
    pt: PatchType,
    patch_doc: &Value,
    patched: Option<String>,
    detail: String,
) -> ApiError {
    let value = match (pt, patched) {
        (PatchType::StrategicMerge, _) | (_, None) => go_sprint(patch_doc),
        (_, Some(json)) => json,
    };
    ApiError::Invalid {
        target: crate::error::ErrorTarget {
            group: String::new(),
            resource: String::new(),
            kind: String::new(),
            name: String::new(),
        },
        errors: vec![FieldError {
            kind: FieldErrorKind::Invalid,
            field: "patch".into(),
            value: Some(apimachinery::fmt::go_quote(&value)),
            detail,
        }],
    }
}

/// A JSON value as Go's `fmt` prints the `map[string]interface{}` it decodes to (`%+v`).
fn go_sprint(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_sprint).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_sprint(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// The object a patch decided on, for the store's read-modify-write.
#[allow(clippy::too_many_arguments)]
fn decide_patch(
    r: &ObjectRef,
    pt: PatchType,
    patch_doc: &Value,
    current: Option<&Value>,
    manager: &str,
    force: bool,
    wctx: &WriteContext,
    mode: FieldValidation,
    duplicates: &[String],
    warnings: &mut Vec<String>,
) -> Result<Update> {
    let info = &r.info;
    let gvk = info.gvk();
    let err = |e| patch_error(info, &r.name, e);
    match (pt, current) {
        (PatchType::Apply, None) => {
            let mut obj = patch::server_side_apply(None, patch_doc, &gvk, manager, force, wctx.now)
                .map_err(err)?;
            rest::check_type(info, &mut obj)?;
            if crate::meta::name(&obj).is_some_and(|n| !n.is_empty()) {
                check_patched_identity(r, &obj)?;
            }
            crate::meta::set_meta_str(&mut obj, crate::meta::MetaField::Name, Some(&r.name));
            rest::default(info, &mut obj)?;
            let ssa_ctx = WriteContext {
                manager: None,
                ..wctx.clone()
            };
            rest::before_create(info, r.namespace.as_deref(), &mut obj, &ssa_ctx)?;
            Ok(Update::Put(obj))
        }
        (_, None) => Err(r.not_found()),
        (PatchType::Apply, Some(old)) => {
            let new =
                patch::server_side_apply(Some(old), patch_doc, &gvk, manager, force, wctx.now)
                    .map_err(err)?;
            check_patched_identity(r, &new)?;
            let ssa_ctx = WriteContext {
                manager: None,
                ..wctx.clone()
            };
            decide_update(r, old, new, &ssa_ctx)
        }
        (pt, Some(old)) => {
            let mut new = apply_patch(pt, old, patch_doc, &gvk).map_err(err)?;
            rest::check_type(info, &mut new)?;
            check_patched_identity(r, &new)?;
            if mode == FieldValidation::Strict {
                // Unknown fields fail the patch before anything else is checked.
                rest::unknown_fields(info, &new, mode)?;
            }
            // Under `Warn` they are noted while the update decodes the patched object.
            let note = mode == FieldValidation::Warn;
            let patched = (pt != PatchType::StrategicMerge).then(|| new.to_string());
            let (update, unknown) = decide_update_noting_unknown(r, old, new, wctx, note)
                .map_err(|e| undecodable_patch(info, pt, patch_doc, patched.clone(), e))?;
            *warnings = rest::render_unknown(info, unknown, mode)?;
            let dups = crate::json_strict::duplicate_errors(duplicates);
            match mode {
                _ if dups.is_empty() => {}
                FieldValidation::Strict => {
                    return Err(invalid_patch(
                        pt,
                        patch_doc,
                        patched,
                        format!("strict decoding error: {}", dups.join(", ")),
                    ));
                }
                FieldValidation::Warn => warnings.extend(dups),
                FieldValidation::Ignore => {}
            }
            Ok(update)
        }
    }
}

/// Patches the object (or its status, for `part == Status`).
pub async fn patch_part(
    ctx: RequestContext,
    info: Arc<ResourceInfo>,
    name: &str,
    part: WritePart,
) -> Result<Response> {
    let pt = patch_type(&ctx)?;
    // `ValidatePatchOptions`: `force` only with apply, which needs a field manager.
    let mut first = Vec::new();
    if pt != PatchType::Apply && ctx.query.get("force").is_some() {
        first.push(FieldError {
            kind: FieldErrorKind::Forbidden,
            field: "force".into(),
            value: None,
            detail: "may not be specified for non-apply patch".into(),
        });
    }
    if pt == PatchType::Apply && ctx.query.non_empty("fieldManager").is_none() {
        first.push(FieldError {
            kind: FieldErrorKind::Required,
            field: "fieldManager".into(),
            value: None,
            detail: "is required for apply patch".into(),
        });
    }
    ctx.query.validate_options("PatchOptions", first)?;
    let dry_run = ctx.query.dry_run()?;
    let mode = ctx.query.field_validation()?;
    let force = ctx.query.flag("force")?;
    let manager = ctx.field_manager();
    let (mut patch_doc, duplicates) = patch_body_noting_duplicates(&ctx, pt, &info.kind)?;
    let mut warnings = Vec::new();
    if pt == PatchType::Apply {
        check_apply_type(&info, &patch_doc)?;
        warnings = rest::unknown_fields(&info, &patch_doc, mode)?;
    }
    let r = object_ref(&info, &ctx.path, name);
    let mut service_account = None;
    if pt == PatchType::Apply
        && part == WritePart::Main
        && let Some(ns) = &r.namespace
        && ctx.state.storage().get(&r).await?.is_none()
    {
        // An apply that creates the object is admitted as a create is.
        super::create::check_namespace(&ctx.state, &info, ns).await?;
        service_account =
            super::create::service_account_admission(&ctx, &info, Some(ns), &patch_doc).await?;
        // `Priority`: its mutations belong to the applier, as admission's do in Kubernetes.
        crate::admission::priority::admit_create(&ctx.state, &info, &mut patch_doc).await?;
    }
    let wctx = WriteContext {
        manager: Some(manager.clone()),
        now: ctx.state.now(),
        ids: ctx.state.ids().clone(),
        part,
        escalation: ctx.escalation_check(&info),
        user: Some(ctx.user.clone()),
        signer_check: ctx.signer_check(&info),
        service_account,
    };
    let updated = ctx
        .storage_for_written_object()
        .guaranteed_update(&r, dry_run, |current| {
            let current = match (part, current) {
                // Apply to /status (or /approval, /ephemeralcontainers) of a missing object is
                // a 404, not a create.
                (
                    WritePart::Status | WritePart::Approval | WritePart::EphemeralContainers,
                    None,
                ) => return Err(r.not_found()),
                (_, c) => c,
            };
            decide_patch(
                &r,
                pt,
                &patch_doc,
                current,
                &manager,
                force,
                &wctx,
                mode,
                &duplicates,
                &mut warnings,
            )
        })
        .await?;
    written_response(&ctx, &info, &updated, &warnings)
}

/// PATCH on the main resource.
pub async fn patch(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    patch_part(ctx, info, name, WritePart::Main).await
}
