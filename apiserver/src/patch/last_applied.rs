//! The bridge from client-side to server-side apply for kubectl (`kubectl apply` followed by
//! `kubectl apply --server-side`), mirroring
//! `staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/lastappliedmanager.go` and
//! `lastappliedupdater.go`.
//!
//! An object applied client-side is owned by `kubectl-client-side-apply` (an `Update` manager)
//! and carries its last applied configuration in an annotation. When the manager `kubectl`
//! then applies server-side, conflicts on fields whose live value is still the one in that
//! annotation are taken over without `--force-conflicts` (the user is changing their own
//! config, not someone else's), and the annotation is rewritten to the new config so a later
//! client-side apply computes the right three-way patch.

use super::apply;
use super::fieldpath::Set;
use super::schema::Schema;
use serde_json::Value;

/// The annotation `kubectl apply` keeps its last applied configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The only field manager these rules apply to (kubectl's default for `--server-side`).
pub const KUBECTL_MANAGER: &str = "kubectl";

fn annotations(obj: &Value) -> Option<&serde_json::Map<String, Value>> {
    obj.get("metadata")?.get("annotations")?.as_object()
}

fn last_applied(obj: &Value) -> Option<&str> {
    annotations(obj)?.get(LAST_APPLIED_ANNOTATION)?.as_str()
}

/// Fields `kubectl` may take over from other managers when applying onto `live`: those in the
/// last applied configuration whose live value has not changed since (`allowedConflictsFromLastApplied`).
/// Empty for other managers and for objects without the annotation.
pub fn allowed_conflicts(manager: &str, live: &Value, schema: Option<Schema<'_>>) -> Set {
    let parsed = last_applied(live).and_then(|text| serde_json::from_str::<Value>(text).ok());
    match parsed {
        Some(config) if manager == KUBECTL_MANAGER => {
            let fields = apply::field_set(&config, schema).unwrap_or_default();
            fields.difference(&apply::compare(&config, live, schema).modified)
        }
        _ => Set::new(),
    }
}

/// After `kubectl` applied `applied` to an object that had the annotation, rewrite it to the
/// applied configuration (without the annotation itself), encoded as Kubernetes does: compact
/// JSON with a trailing newline.
pub fn update_annotation(manager: &str, live: Option<&Value>, applied: &Value, merged: &mut Value) {
    if manager != KUBECTL_MANAGER || live.is_none_or(|l| last_applied(l).is_none()) {
        return;
    }
    let mut config = applied.clone();
    if let Some(annotations) = config
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    let text = format!("{config}\n");
    if let Some(annotations) = merged
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.insert(LAST_APPLIED_ANNOTATION.to_owned(), Value::String(text));
    }
}
