//! PATCH bodies and server-side apply: JSON patch (RFC 6902), JSON merge patch (RFC 7386),
//! strategic merge patch with the Kubernetes merge keys, and server-side apply with
//! `managedFields` (apimachinery's `pkg/util/strategicpatch`, `pkg/util/managedfields`, and
//! `sigs.k8s.io/structured-merge-diff`; the handler that picks among them is
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`).
//!
//! Everything here is a plain, synchronous function over JSON values: no I/O, no store.
//!
//! ```text
//! Content-Type                             function                    needs schema
//! application/json-patch+json          ──► json_patch                  no
//! application/merge-patch+json         ──► json_merge_patch            no
//! application/strategic-merge-patch+json ► strategic_merge_patch       built-in kinds only
//! application/apply-patch+yaml         ──► server_side_apply           lists atomic without one
//! any other write (POST/PUT/PATCH)     ──► update_managed_fields       (bookkeeping only)
//! ```
//!
//! The pieces: [`merge_keys`] (the patch tags of the built-in types, written into the OpenAPI
//! schemas), [`schema`] (reads them back), [`strategic`], [`mod@json_patch`], [`merge`],
//! [`fieldpath`] (field sets and `FieldsV1`), [`apply`] (merge/compare of typed values),
//! [`managed_fields`] (ownership, conflicts) and [`last_applied`] (kubectl's client-side to
//! server-side migration).
//!
//! For the registry: map [`PatchError`] to a `Status` as Kubernetes does —
//! `BadRequest` → 400 `BadRequest`; `Invalid` → 422 `Invalid`; `Conflicts` → 409 `Conflict`
//! with message [`conflict_message`] and a `FieldManagerConflict` cause per conflict;
//! `Unsupported` → 415 `UnsupportedMediaType`. Call [`update_managed_fields`] on every
//! non-apply write after defaulting and the strategy's preparation, just before storing (for
//! `/scale` pass the parent objects and `Some("scale")`); an apply patch goes through
//! [`server_side_apply`] alone.

use crate::gvk::GroupVersionKind;
use serde_json::Value;

pub mod apply;
pub mod fieldpath;
pub mod json_patch;
pub mod last_applied;
pub mod managed_fields;
pub mod merge;
pub mod merge_keys;
pub mod schema;
pub mod strategic;

/// The four PATCH content types Kubernetes accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json` (built-in kinds only)
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchType {
    /// Maps a request `Content-Type` (parameters ignored) to a patch type.
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// A field two managers disagree on, reported by server-side apply.
///
/// The registry turns a [`PatchError::Conflicts`] into a 409 `Status` with reason `Conflict`,
/// message [`conflict_message`] and one `details.causes` entry per conflict:
/// `{"reason": "FieldManagerConflict", "message": conflict.cause_message(), "field": conflict.field}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    /// The manager that owns the field, e.g. `kubectl-client-side-apply`.
    pub manager: String,
    /// The field path as Kubernetes prints it, e.g. `.spec.replicas` or
    /// `.spec.template.spec.containers[name="nginx"].image`.
    pub field: String,
    /// The manager as Kubernetes prints it in messages (`printManager`): quoted, plus the API
    /// version for `Update` managers and the subresource if any, e.g.
    /// `"kubectl-client-side-apply" using apps/v1`, `"kubectl"` (an applier),
    /// `"kubelet" with subresource "status" using v1`.
    pub printed_manager: String,
}

impl ApplyConflict {
    /// The message of this conflict's `StatusCause`: `conflict with "kubectl" using apps/v1`.
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.printed_manager)
    }
}

/// The message of a 409 for apply conflicts, worded as Kubernetes' `getConflictMessage`
/// (`managedfields/internal/conflict.go`):
///
/// ```text
/// Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas
/// Apply failed with 2 conflicts: conflicts with "a" using v1:
/// - .data.x
/// - .data.y
/// ```
///
/// With several conflicts they are grouped by manager, managers sorted.
pub fn conflict_message(conflicts: &[ApplyConflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.printed_manager, only.field
        );
    }
    let mut managers: Vec<&str> = conflicts
        .iter()
        .map(|c| c.printed_manager.as_str())
        .collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(
            conflicts
                .iter()
                .filter(|c| c.printed_manager == manager)
                .map(|c| format!("- {}", c.field)),
        );
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch body is malformed (400 BadRequest).
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well-formed but cannot be applied to this object (422 Invalid), e.g. a
    /// failed JSON-patch `test` or a path that does not exist.
    #[error("{0}")]
    Invalid(String),
    /// Server-side apply conflicts (409 Conflict, one cause per field).
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<ApplyConflict>),
    /// The patch type is not supported for this kind (415), e.g. strategic merge on a
    /// custom resource.
    #[error("{0}")]
    Unsupported(String),
}

/// Applies an RFC 7386 JSON merge patch.
pub fn json_merge_patch(original: &Value, patch: &Value) -> Value {
    merge::merged(original, patch, &[])
}

/// [`json_merge_patch`] of a stored object, without its `metadata.managedFields` unless the
/// patch sets them. A write that leaves them out keeps the stored ones
/// ([`crate::rest::before_update`]), so the result is written as if they had been copied, and
/// they are not copied only to be compared with the stored ones and put back.
pub fn json_merge_patch_of_stored(original: &Value, patch: &Value) -> Value {
    merge::merged(original, patch, &["metadata", "managedFields"])
}

/// Applies an RFC 6902 JSON patch (a list of operations).
pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    json_patch::apply(original, patch)
}

/// The 415 message Kubernetes gives for a strategic merge patch of a custom resource
/// (`negotiation.NewUnsupportedMediaTypeError` with the patch types CRs accept).
pub const STRATEGIC_MERGE_UNSUPPORTED: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// Applies a strategic merge patch, using the merge keys and strategies of `gvk`'s schema
/// (e.g. containers merged by `name`). Kinds without a known schema are refused with
/// [`PatchError::Unsupported`], as Kubernetes refuses it for custom resources.
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    gvk: &GroupVersionKind,
) -> Result<Value, PatchError> {
    let schema = schema::Schema::builtin(gvk)
        .ok_or_else(|| PatchError::Unsupported(STRATEGIC_MERGE_UNSUPPORTED.into()))?;
    strategic::apply(original, patch, Some(schema))
}

/// Server-side apply of `applied` (the applier's full intent) by `manager` onto `live` (None
/// when the object does not exist yet). Returns the merged object with `metadata.managedFields`
/// updated, or [`PatchError::Conflicts`] when another manager owns a field that `applied` sets
/// to a different value and `force` is false.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    gvk: &GroupVersionKind,
    manager: &str,
    force: bool,
    now: jiff::Timestamp,
) -> Result<Value, PatchError> {
    server_side_apply_subresource(live, applied, gvk, manager, None, force, now)
}

/// [`server_side_apply`] through a subresource (`status`): the manager's entry records the
/// subresource, and only fields under `status` are owned. Kinds without a built-in schema are
/// applied with granular maps and atomic lists.
pub fn server_side_apply_subresource(
    live: Option<&Value>,
    applied: &Value,
    gvk: &GroupVersionKind,
    manager: &str,
    subresource: Option<&str>,
    force: bool,
    now: jiff::Timestamp,
) -> Result<Value, PatchError> {
    let expected = gvk.group_version().api_version();
    let specified = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if specified != expected {
        return Err(PatchError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {specified}, expected: {expected}"
        )));
    }
    let request = managed_fields::ApplyRequest {
        schema: schema::Schema::builtin(gvk),
        manager,
        subresource,
        force,
        now,
    };
    managed_fields::apply(live, applied, request)
}

/// Records a non-apply write (create, update, patch) by `manager` in `new`'s
/// `metadata.managedFields`: the fields it changed become owned by `manager` with operation
/// `Update` (and `subresource`, e.g. `status`), and are removed from other managers' sets.
///
/// `old` is the stored object (None on create). If `new` carries a non-empty `managedFields`
/// (the writer sent them, or a patch kept the stored ones) they are the starting point, else
/// `old`'s are. A write that changes no field (but maybe `managedFields`, or the order of a
/// keyed list: structured-merge-diff's `Comparison.IsSame`) leaves them as they are (no
/// timestamp bump), so no-op updates stay no-ops. Server-set metadata (`name`, `uid`,
/// `resourceVersion`, ...) is never owned; for built-in kinds main-resource writes own nothing
/// under `status` and `/status` writes only that.
pub fn update_managed_fields(
    old: Option<&Value>,
    new: &mut Value,
    gvk: &GroupVersionKind,
    manager: &str,
    subresource: Option<&str>,
    now: jiff::Timestamp,
) {
    managed_fields::update(
        old,
        new,
        schema::Schema::builtin(gvk),
        manager,
        subresource,
        now,
    );
}
