//! The `/scale` subresource (`ScaleREST` in `pkg/registry/apps/deployment/storage/storage.go`
//! and its ReplicaSet/StatefulSet twins): an `autoscaling/v1 Scale` view of the parent.
//!
//! ```text
//! Deployment{spec.replicas: 3, spec.selector: {matchLabels: {app: nginx}}, status.replicas: 2}
//!   ⇄ Scale{metadata: parent's name/namespace/uid/resourceVersion/creationTimestamp,
//!           spec.replicas: 3, status: {replicas: 2, selector: "app=nginx"}}
//! ```
//!
//! PUT and PATCH change the Scale view and write `spec.replicas` back into the parent (which
//! bumps its generation); a stale `metadata.resourceVersion` on the Scale is a 409.

use crate::error::{ApiError, Result};
use crate::gvk::GroupVersionKind;
use crate::handlers::patch::{apply_patch, patch_body, patch_error, patch_type};
use crate::handlers::update::decide_update;
use crate::handlers::{RequestContext, object_ref};
use crate::meta::{self, MetaField};
use crate::patch::{PatchError, PatchType};
use crate::registry::ResourceInfo;
use crate::request::decode_body;
use crate::response::json_response;
use crate::rest::{WriteContext, WritePart};
use crate::storage::ObjectRef;
use crate::strategy::{FieldError, FieldErrorKind};
use apimachinery::Selector;
use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};
use std::sync::Arc;

/// The steps of a simple `.a.b` JSON path.
fn steps(path: &str) -> Vec<&str> {
    path.split('.').filter(|s| !s.is_empty()).collect()
}

fn read_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    steps(path).into_iter().try_fold(obj, |v, s| v.get(s))
}

/// Writes `value` at a simple `.a.b` path, creating objects on the way.
fn write_path(obj: &mut Value, path: &str, value: Value) {
    let mut cur = obj;
    let parts = steps(path);
    for (i, s) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            map.insert((*s).to_owned(), value);
            return;
        }
        cur = map.entry((*s).to_owned()).or_insert_with(|| json!({}));
    }
}

/// The Scale view of a parent object of `info`.
pub fn scale_of(info: &ResourceInfo, parent: &Value) -> Value {
    match &info.scale {
        None => builtin_scale_of(parent),
        Some(paths) => {
            // A custom resource (`customresource/storage.go` `scaleFromCustomResource`).
            let mut scale = builtin_scale_of(parent);
            scale["spec"]["replicas"] = json!(
                read_path(parent, &paths.spec_replicas)
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            );
            scale["status"]["replicas"] = json!(
                read_path(parent, &paths.status_replicas)
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            );
            scale["status"]["selector"] = json!(
                paths
                    .label_selector
                    .as_deref()
                    .and_then(|p| read_path(parent, p))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            scale
        }
    }
}

/// The Scale view of a built-in parent object.
fn builtin_scale_of(parent: &Value) -> Value {
    let mut md = serde_json::Map::new();
    for f in [
        MetaField::Name,
        MetaField::Namespace,
        MetaField::Uid,
        MetaField::ResourceVersion,
        MetaField::CreationTimestamp,
    ] {
        if let Some(v) = parent.get("metadata").and_then(|m| m.get(f.json_name())) {
            md.insert(f.json_name().into(), v.clone());
        }
    }
    let selector = parent.get("spec").and_then(|s| s.get("selector"));
    let selector = if parent.get("kind").and_then(Value::as_str) == Some("ReplicationController") {
        // A ReplicationController's selector is a plain map (`labels.SelectorFromSet`).
        selector
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .map(|labels| LabelSelector {
                match_labels: Some(labels),
                ..Default::default()
            })
    } else {
        selector.and_then(|s| serde_json::from_value::<LabelSelector>(s.clone()).ok())
    }
    .and_then(|s| Selector::from_label_selector(Some(&s)).ok())
    .map(|s| s.to_string())
    .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": md,
        "spec": {"replicas": meta::spec_i64(parent, "replicas").unwrap_or(1)},
        "status": {
            "replicas": parent.get("status").and_then(|s| s.get("replicas")).and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

fn scale_invalid(r: &ObjectRef, field: &str, value: Option<String>, detail: &str) -> ApiError {
    ApiError::Invalid {
        target: crate::error::ErrorTarget {
            group: "autoscaling".into(),
            resource: "scale".into(),
            kind: "Scale".into(),
            name: r.name.clone(),
        },
        errors: vec![FieldError {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value,
            detail: detail.into(),
        }],
    }
}

/// Writes the replicas of a new Scale into the parent.
fn decide_scale(
    r: &ObjectRef,
    parent: &Value,
    scale: &Value,
    wctx: &WriteContext,
) -> Result<crate::storage::Update> {
    if let Some(rv) = meta::resource_version(scale)
        && Some(rv) != meta::resource_version(parent)
    {
        return Err(r.modified());
    }
    let replicas = scale
        .get("spec")
        .and_then(|s| s.get("replicas"))
        .map(|v| {
            v.as_i64()
                .ok_or_else(|| scale_invalid(r, "spec.replicas", None, "must be an integer"))
        })
        .transpose()?
        .unwrap_or(0);
    if replicas < 0 {
        return Err(scale_invalid(
            r,
            "spec.replicas",
            Some(replicas.to_string()),
            "must be greater than or equal to 0",
        ));
    }
    let mut new = parent.clone();
    match &r.info.scale {
        Some(paths) => write_path(&mut new, &paths.spec_replicas, json!(replicas)),
        None => {
            meta::spec_mut(&mut new).insert("replicas".into(), json!(replicas));
        }
    }
    decide_update(r, parent, new, wctx)
}

fn scale_response(info: &ResourceInfo, updated: &Value) -> Response {
    json_response(StatusCode::OK, &scale_of(info, updated))
}

/// GET `.../{name}/scale`.
pub async fn get(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    let r = object_ref(&info, &ctx.path, name);
    let parent = ctx
        .state
        .storage()
        .get(&r)
        .await?
        .ok_or_else(|| r.not_found())?;
    Ok(scale_response(&info, &parent))
}

fn write_context(ctx: &RequestContext) -> WriteContext {
    WriteContext {
        manager: Some(ctx.field_manager()),
        now: ctx.state.now(),
        ids: ctx.state.ids().clone(),
        part: WritePart::Scale,
        escalation: None,
        service_account: None,
        user: None,
        signer_check: None,
    }
}

/// PUT `.../{name}/scale`.
pub async fn update(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    ctx.query.validate_options("UpdateOptions", Vec::new())?;
    let dry_run = ctx.query.dry_run()?;
    let scale = decode_body(&ctx.headers, &ctx.body, "Scale")?;
    let r = object_ref(&info, &ctx.path, name);
    let wctx = write_context(&ctx);
    let updated = ctx
        .storage()
        .guaranteed_update(&r, dry_run, |current| {
            let parent = current.ok_or_else(|| r.not_found())?;
            decide_scale(&r, parent, &scale, &wctx)
        })
        .await?;
    Ok(scale_response(&info, &updated.object))
}

/// PATCH `.../{name}/scale`: the patch applies to the Scale view. Strategic merge on a Scale
/// (the Python client's choice) is a plain merge: Scale has no lists.
pub async fn patch(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    ctx.query.validate_options("PatchOptions", Vec::new())?;
    let dry_run = ctx.query.dry_run()?;
    let pt = patch_type(&ctx)?;
    if pt == PatchType::Apply {
        return Err(ApiError::UnsupportedMediaType(
            "apply patches are not supported on the scale subresource".into(),
        ));
    }
    let patch_doc = patch_body(&ctx, pt, "Scale")?;
    let r = object_ref(&info, &ctx.path, name);
    let wctx = write_context(&ctx);
    let scale_gvk = GroupVersionKind::new("autoscaling", "v1", "Scale");
    let updated = ctx
        .storage()
        .guaranteed_update(&r, dry_run, |current| {
            let parent = current.ok_or_else(|| r.not_found())?;
            let view = scale_of(&info, parent);
            let patched = match apply_patch(pt, &view, &patch_doc, &scale_gvk) {
                // Work around strategies without a Scale schema: Scale has no merge keys.
                Err(PatchError::Unsupported(_)) if pt == PatchType::StrategicMerge => {
                    crate::patch::json_merge_patch(&view, &patch_doc)
                }
                other => other.map_err(|e| patch_error(&info, name, e))?,
            };
            decide_scale(&r, parent, &patched, &wctx)
        })
        .await?;
    Ok(scale_response(&info, &updated.object))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view_of_a_replication_controller_reads_its_map_selector() {
        let rc = json!({
            "kind": "ReplicationController", "apiVersion": "v1",
            "metadata": {"name": "nginx", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"app": "nginx", "tier": "web"}},
            "status": {"replicas": 1}
        });
        let s = scale_of(
            &ResourceInfo::new(
                "",
                "v1",
                "ReplicationController",
                "replicationcontrollers",
                true,
            ),
            &rc,
        );
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"]["selector"], "app=nginx,tier=web");
    }

    #[test]
    fn scale_view_of_a_deployment() {
        let d = json!({
            "metadata": {"name": "nginx", "namespace": "default", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}}},
            "status": {"replicas": 2}
        });
        let s = scale_of(
            &ResourceInfo::new("apps", "v1", "Deployment", "deployments", true),
            &d,
        );
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"]["replicas"], 2);
        assert_eq!(s["status"]["selector"], "app=nginx");
        assert_eq!(s["metadata"]["uid"], "u");
        assert!(s["metadata"].get("labels").is_none());
    }

    #[test]
    fn scale_view_of_a_custom_resource_follows_its_paths() {
        let mut info = ResourceInfo::new("demo.dev", "v1", "Website", "websites", true);
        info.scale = Some(crate::registry::ScalePaths {
            spec_replicas: ".spec.size".into(),
            status_replicas: ".status.ready".into(),
            label_selector: Some(".status.selector".into()),
        });
        let w = json!({"metadata": {"name": "w"}, "spec": {"size": 4},
                       "status": {"ready": 2, "selector": "app=w"}});
        let s = scale_of(&info, &w);
        assert_eq!(s["spec"]["replicas"], 4);
        assert_eq!(s["status"]["replicas"], 2);
        assert_eq!(s["status"]["selector"], "app=w");
        let mut empty = json!({"metadata": {}});
        write_path(&mut empty, ".spec.size", json!(3));
        assert_eq!(empty["spec"]["size"], 3);
    }
}
