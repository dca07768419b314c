//! DELETE and DELETECOLLECTION (`endpoints/handlers/delete.go`,
//! `registry/generic/registry/store.go` `Delete`, `pkg/registry/rest/delete.go`
//! `BeforeDelete`), with finalizers, graceful pod deletion and namespace termination:
//!
//! ```text
//!   preconditions (uid, resourceVersion) ── mismatch ──▶ 409
//!   propagationPolicy  Foreground → + "foregroundDeletion" finalizer
//!                      Orphan     → + "orphan" finalizer     (the garbage collector acts later)
//!                      Background → neither
//!   pods bound to a node: grace = ?gracePeriodSeconds ?? spec.terminationGracePeriodSeconds ?? 30
//!   namespaces: default, kube-system, kube-public ──▶ 403 (`NamespaceLifecycle` admission)
//!               others: phase Terminating until spec.finalizers is empty
//!   no finalizers and grace 0 ──▶ removed now  (200 Status, or the object for pods)
//!   otherwise ──▶ deletionTimestamp (+grace) set, object kept  (200 with the object)
//! ```

use super::list::Filter;
use super::{RequestContext, object_ref};
use crate::error::{ApiError, Result};
use crate::meta::{self, FINALIZER_FOREGROUND, FINALIZER_ORPHAN, MetaField};
use crate::registry::{DeletePolicy, ResourceInfo};
use crate::request::{dry_run_errors, invalid_options};
use crate::response::json_response;
use crate::storage::{ObjectRef, Update, prefix};
use crate::strategy::{FieldError, FieldErrorKind};
use apimachinery::fmt::go_quote;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The default pod grace period (`v1.DefaultTerminationGracePeriodSeconds`).
const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// How dependents are treated (`metav1.DeletionPropagation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Propagation {
    /// Orphan the dependents.
    Orphan,
    /// Delete the owner now, the dependents in the background.
    Background,
    /// Delete the dependents first.
    Foreground,
}

/// `Preconditions` of a delete.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Preconditions {
    /// The object's uid must be this.
    pub uid: Option<String>,
    /// The object's resourceVersion must be this.
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<String>,
}

/// `meta.k8s.io/v1 DeleteOptions`, from the body or the query.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    /// Seconds before the object is removed (pods).
    pub grace_period_seconds: Option<i64>,
    /// Conditions the object must meet.
    pub preconditions: Option<Preconditions>,
    /// How dependents are treated (as sent: [`DeleteOptions::from_request`] refuses any but
    /// `Orphan`, `Background` and `Foreground`).
    pub propagation_policy: Option<String>,
    /// Deprecated: true = Orphan, false = Background.
    pub orphan_dependents: Option<bool>,
    /// `["All"]` for a dry run.
    #[serde(default)]
    pub dry_run: Vec<String>,
}

impl DeleteOptions {
    /// Reads the options from the body when there is one, else from the query.
    pub fn from_request(ctx: &RequestContext) -> Result<DeleteOptions> {
        let mut opts = if ctx.body.iter().all(u8::is_ascii_whitespace) {
            DeleteOptions::default()
        } else {
            // Typed Go clients send their options as protobuf, like their objects.
            let v = crate::request::decode_body(&ctx.headers, &ctx.body, "DeleteOptions")?;
            serde_json::from_value(v)
                .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))?
        };
        if opts.grace_period_seconds.is_none() {
            opts.grace_period_seconds = ctx.query.int("gracePeriodSeconds")?;
        }
        if opts.propagation_policy.is_none()
            && let Some(p) = ctx.query.non_empty("propagationPolicy")
        {
            opts.propagation_policy = Some(p.to_string());
        }
        if opts.orphan_dependents.is_none() && ctx.query.get("orphanDependents").is_some() {
            opts.orphan_dependents = Some(ctx.query.flag("orphanDependents")?);
        }
        for v in ctx.query.all("dryRun") {
            if !opts.dry_run.iter().any(|d| d == v) {
                opts.dry_run.push(v.to_string());
            }
        }
        opts.validate()?;
        Ok(opts)
    }

    /// `ValidateDeleteOptions` (apimachinery `pkg/apis/meta/v1/validation`): a 422 on the
    /// `DeleteOptions`, worded `DeleteOptions.meta.k8s.io "" is invalid: ...`.
    fn validate(&self) -> Result<()> {
        let mut errors = Vec::new();
        let policy = self.propagation_policy.as_deref();
        if let (Some(_), Some(p)) = (self.orphan_dependents, policy) {
            errors.push(FieldError {
                kind: FieldErrorKind::Invalid,
                field: "propagationPolicy".into(),
                value: Some(go_quote(p)),
                detail: "orphanDependents and deletionPropagation cannot be both set".into(),
            });
        }
        if let Some(p) = policy
            && Self::parse_policy(p).is_none()
        {
            errors.push(FieldError {
                kind: FieldErrorKind::NotSupported,
                field: "propagationPolicy".into(),
                value: Some(go_quote(p)),
                detail: "supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    .into(),
            });
        }
        let dry_run: Vec<&str> = self.dry_run.iter().map(String::as_str).collect();
        errors.extend(dry_run_errors(&dry_run));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(invalid_options("DeleteOptions", errors))
        }
    }

    fn parse_policy(p: &str) -> Option<Propagation> {
        match p {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
        }
    }

    fn propagation(&self) -> Option<Propagation> {
        let policy = self
            .propagation_policy
            .as_deref()
            .and_then(Self::parse_policy);
        policy.or(match self.orphan_dependents {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        })
    }

    /// Whether the delete is a dry run (`dryRun: [All]`).
    pub fn dry_run(&self) -> bool {
        !self.dry_run.is_empty()
    }
}

fn check_preconditions(r: &ObjectRef, obj: &Value, opts: &DeleteOptions) -> Result<()> {
    let Some(p) = &opts.preconditions else {
        return Ok(());
    };
    let conflict = |detail: String| ApiError::Conflict {
        target: r.target(),
        detail,
    };
    if let Some(uid) = &p.uid {
        let actual = meta::uid(obj).unwrap_or_default();
        if uid != actual {
            return Err(conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
            )));
        }
    }
    if let Some(rv) = &p.resource_version {
        let actual = meta::resource_version(obj).unwrap_or_default();
        if rv != actual {
            return Err(conflict(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in meta: {actual}"
            )));
        }
    }
    Ok(())
}

/// Adds or removes the garbage collector's finalizers for the propagation policy
/// (`deletionFinalizersForGarbageCollection`).
fn apply_propagation(obj: &mut Value, policy: Option<Propagation>) {
    let Some(policy) = policy else { return };
    let mut fins = meta::finalizers(obj);
    fins.retain(|f| f != FINALIZER_FOREGROUND && f != FINALIZER_ORPHAN);
    match policy {
        Propagation::Foreground => fins.push(FINALIZER_FOREGROUND.into()),
        Propagation::Orphan => fins.push(FINALIZER_ORPHAN.into()),
        Propagation::Background => {}
    }
    meta::set_finalizers(obj, fins);
}

/// A pod's grace period (`pkg/registry/core/pod/strategy.go` `CheckGracefulDelete`): 0 for
/// pods not bound to a node or already finished.
fn pod_grace(obj: &Value, opts: &DeleteOptions) -> i64 {
    let unbound = meta::spec_str(obj, "nodeName").is_none();
    let finished = matches!(meta::status_str(obj, "phase"), Some("Succeeded" | "Failed"));
    if unbound || finished {
        return 0;
    }
    opts.grace_period_seconds
        .or_else(|| meta::spec_i64(obj, "terminationGracePeriodSeconds"))
        .unwrap_or(DEFAULT_POD_GRACE_SECONDS)
        .max(0)
}

/// What a delete does to the current object (a pure decision).
pub fn decide_delete(
    r: &ObjectRef,
    current: Option<Value>,
    opts: &DeleteOptions,
    now: jiff::Timestamp,
) -> Result<Update> {
    let info = &r.info;
    let current = current.ok_or_else(|| r.not_found())?;
    check_preconditions(r, &current, opts)?;
    let mut obj = current.clone();
    if info.delete_policy == DeletePolicy::Namespace {
        if meta::spec_finalizers(&obj).is_empty() && meta::finalizers(&obj).is_empty() {
            return Ok(Update::Delete(obj));
        }
        if meta::deletion_timestamp(&obj).is_none() {
            meta::set_meta_str(
                &mut obj,
                MetaField::DeletionTimestamp,
                Some(&meta::format_time(now)),
            );
            meta::set_meta_i64(&mut obj, MetaField::DeletionGracePeriodSeconds, Some(0));
            meta::status_mut(&mut obj).insert("phase".into(), json!("Terminating"));
        }
        return Ok(Update::Put(obj));
    }
    apply_propagation(&mut obj, opts.propagation());
    let grace = match info.delete_policy {
        DeletePolicy::GracefulPod => pod_grace(&obj, opts),
        _ => 0,
    };
    if grace == 0 && meta::finalizers(&obj).is_empty() {
        return Ok(Update::Delete(obj));
    }
    let shorter = meta::deletion_grace_period_seconds(&obj).is_some_and(|g| grace < g);
    if meta::deletion_timestamp(&obj).is_none() || shorter {
        let at = now
            .checked_add(jiff::SignedDuration::from_secs(grace))
            .unwrap_or(now);
        meta::set_meta_str(
            &mut obj,
            MetaField::DeletionTimestamp,
            Some(&meta::format_time(at)),
        );
        meta::set_meta_i64(&mut obj, MetaField::DeletionGracePeriodSeconds, Some(grace));
    }
    Ok(Update::Put(obj))
}

/// The namespaces that may not be deleted: the `NamespaceLifecycle` admission plugin's
/// immortal namespaces (`plugin/pkg/admission/namespace/lifecycle/admission.go`), without
/// which the cluster's own objects (the admission API's ConfigMap, leases) have no home.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// `403 Forbidden` for a delete of an immortal namespace, as `NamespaceLifecycle` answers it
/// (also for a dry run, as admission runs before it).
fn admit_delete(r: &ObjectRef) -> Result<()> {
    crate::admission::priority::admit_delete(r)?;
    if r.info.delete_policy == DeletePolicy::Namespace
        && IMMORTAL_NAMESPACES.contains(&r.name.as_str())
    {
        return Err(ApiError::Forbidden {
            target: r.target(),
            message: format!(
                "{} \"{}\" is forbidden: this namespace may not be deleted",
                r.info.gvr.resource, r.name
            ),
        });
    }
    Ok(())
}

/// Deletes one object per `opts`; returns the outcome of the read-modify-write.
pub async fn delete_object(
    ctx: &RequestContext,
    r: &ObjectRef,
    opts: &DeleteOptions,
) -> Result<crate::storage::Updated> {
    admit_delete(r)?;
    let now = ctx.state.now();
    ctx.storage()
        .guaranteed_update(r, opts.dry_run(), |current| {
            decide_delete(r, current.cloned(), opts, now)
        })
        .await
}

/// The answer to a delete: the object when it was only marked (or for kinds that return it),
/// else a `Status` of kind Success.
fn delete_response(
    r: &ObjectRef,
    updated: &crate::storage::Updated,
    opts: &DeleteOptions,
) -> Response {
    let info = &r.info;
    let mut obj = updated.object.clone();
    meta::set_type(&mut obj, &info.api_version(), &info.kind);
    if !updated.deleted {
        let code = if opts.orphan_dependents == Some(false) {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        return json_response(code, &obj);
    }
    if info.return_deleted_object {
        return json_response(StatusCode::OK, &obj);
    }
    let mut details = json!({"name": r.name, "kind": info.gvr.resource, "uid": meta::uid(&obj).unwrap_or_default()});
    if !info.gvr.group.is_empty() {
        details["group"] = json!(info.gvr.group);
    }
    json_response(
        StatusCode::OK,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
    )
}

/// DELETE of one object.
pub async fn delete(ctx: RequestContext, info: Arc<ResourceInfo>, name: &str) -> Result<Response> {
    let opts = DeleteOptions::from_request(&ctx)?;
    let r = object_ref(&info, &ctx.path, name);
    let updated = delete_object(&ctx, &r, &opts).await?;
    Ok(delete_response(&r, &updated, &opts))
}

/// DELETE of every object matching the selectors; answers the list of deleted objects.
pub async fn delete_collection(ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    if !info.allows("deletecollection") {
        return Err(ApiError::MethodNotAllowed(format!(
            "deletecollection is not supported on resources of kind \"{}\"",
            info.gvr.group_resource()
        )));
    }
    let opts = DeleteOptions::from_request(&ctx)?;
    let filter = Filter::from_request(&ctx, &info)?;
    let pfx = prefix(&info, ctx.path.namespace.as_deref());
    let keep = |o: &Value| filter.matches(&info, o);
    let page = ctx.state.storage().list(&pfx, None, None, 0, &keep).await?;
    let mut items = Vec::new();
    for obj in page.items {
        let r = ObjectRef {
            info: info.clone(),
            namespace: meta::namespace(&obj).map(str::to_string),
            name: meta::name(&obj).unwrap_or_default().to_string(),
        };
        match delete_object(&ctx, &r, &opts).await {
            Ok(u) => items.push(u.object),
            // Deleted by someone else in the meantime: nothing left to do.
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": info.list_kind(),
            "apiVersion": info.api_version(),
            "metadata": {"resourceVersion": ctx.state.storage().backend().current_revision().0.to_string()},
            "items": items,
        }),
    ))
}
