//! `pods/{name}/binding`: the scheduler's assignment of a pod to a node
//! (`pkg/registry/core/pod/storage/storage.go` `BindingREST.Create` and `assignPod`).
//!
//! ```text
//! POST {"kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"node-1"}}
//!   pod unbound   → spec.nodeName = node-1, condition PodScheduled=True   → 201 Status Success
//!   pod bound     → 409 `pod p is already assigned to node "n"`
//!   pod deleting  → 409 `pod p is being deleted, cannot be assigned to a host`
//! ```

use super::success;
use crate::error::{ApiError, ErrorTarget, Result};
use crate::handlers::{RequestContext, object_ref};
use crate::meta;
use crate::registry::ResourceInfo;
use crate::request::decode_body;
use crate::response::json_response;
use crate::storage::Update;
use crate::strategy::{FieldError, FieldErrorKind};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

/// Sets (or replaces) the `PodScheduled` condition to True.
fn set_scheduled(pod: &mut Value, now: &str) {
    let status = meta::status_mut(pod);
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    if let Some(list) = conditions.as_array_mut() {
        list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
        list.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
    }
}

/// POST `pods/{name}/binding`.
pub async fn create(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    ctx.query.validate_options("CreateOptions", Vec::new())?;
    let dry_run = ctx.query.dry_run()?;
    let binding = decode_body(&ctx.headers, &ctx.body, "Binding")?;
    let r = object_ref(&info, &ctx.path, name);
    let conflict_target = ErrorTarget {
        group: String::new(),
        resource: "pods/binding".into(),
        kind: "Binding".into(),
        name: name.to_string(),
    };
    let node = binding
        .get("target")
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::Invalid {
            target: conflict_target.clone(),
            errors: vec![FieldError {
                kind: FieldErrorKind::Required,
                field: "target.name".into(),
                value: None,
                detail: String::new(),
            }],
        })?
        .to_string();
    let uid = meta::uid(&binding).map(str::to_string);
    let now = meta::format_time(ctx.state.now());
    let conflict = |detail: String| ApiError::Conflict {
        target: conflict_target.clone(),
        detail,
    };
    // The answer is a Status, not the pod: the bound pod is moved to the watch cache.
    ctx.storage()
        .answering_with_json()
        .guaranteed_update(&r, dry_run, |current| {
            let mut pod = current.cloned().ok_or_else(|| r.not_found())?;
            if let Some(uid) = &uid
                && Some(uid.as_str()) != meta::uid(&pod)
            {
                return Err(conflict(format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&pod).unwrap_or_default()
                )));
            }
            if meta::deletion_timestamp(&pod).is_some() {
                return Err(conflict(format!(
                    "pod {name} is being deleted, cannot be assigned to a host"
                )));
            }
            if let Some(existing) = meta::spec_str(&pod, "nodeName") {
                return Err(conflict(format!(
                    "pod {name} is already assigned to node \"{existing}\""
                )));
            }
            meta::spec_mut(&mut pod).insert("nodeName".into(), json!(node));
            set_scheduled(&mut pod, &now);
            Ok(Update::Put(pod))
        })
        .await?;
    Ok(json_response(StatusCode::CREATED, &success(201)))
}
