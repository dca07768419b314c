//! PATCH bodies and server-side apply: JSON patch (RFC 6902), JSON merge patch (RFC 7386),
//! strategic merge patch with the Kubernetes merge keys, and server-side apply with
//! `managedFields` (apimachinery's `pkg/util/strategicpatch`, `pkg/util/managedfields`, and
//! `sigs.k8s.io/structured-merge-diff`).
//!
//! Everything here is a plain function over JSON values: no I/O, no store.

use crate::gvk::GroupVersionKind;
use serde_json::Value;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    /// The manager that owns the field, e.g. `kubectl-client-side-apply`.
    pub manager: String,
    /// The field path as Kubernetes prints it, e.g. `.spec.replicas`.
    pub field: String,
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
    #[error("Apply failed with {} conflict(s)", .0.len())]
    Conflicts(Vec<ApplyConflict>),
    /// The patch type is not supported for this kind (415), e.g. strategic merge on a
    /// custom resource.
    #[error("{0}")]
    Unsupported(String),
}

/// Applies an RFC 7386 JSON merge patch.
pub fn json_merge_patch(original: &Value, patch: &Value) -> Value {
    let _ = patch;
    original.clone()
}

/// Applies an RFC 6902 JSON patch (a list of operations).
pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let _ = (original, patch);
    Err(PatchError::Unsupported(
        "json patch is not implemented yet".into(),
    ))
}

/// Applies a strategic merge patch, using the merge keys and strategies of `gvk`'s schema
/// (e.g. containers merged by `name`). Kinds without a known schema are refused with
/// [`PatchError::Unsupported`], as Kubernetes refuses it for custom resources.
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    gvk: &GroupVersionKind,
) -> Result<Value, PatchError> {
    let _ = (original, patch, gvk);
    Err(PatchError::Unsupported(
        "strategic merge patch is not implemented yet".into(),
    ))
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
    let _ = (live, applied, gvk, manager, force, now);
    Err(PatchError::Unsupported(
        "server-side apply is not implemented yet".into(),
    ))
}

/// Records a non-apply write (create, update, patch) by `manager` in `new`'s
/// `metadata.managedFields`: the fields it changed become owned by `manager` with operation
/// `Update` (and `subresource`, e.g. `status`), and are removed from other managers' sets.
pub fn update_managed_fields(
    old: Option<&Value>,
    new: &mut Value,
    gvk: &GroupVersionKind,
    manager: &str,
    subresource: Option<&str>,
    now: jiff::Timestamp,
) {
    let _ = (old, new, gvk, manager, subresource, now);
}
