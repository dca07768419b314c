//! ControllerRevision history shared by the DaemonSet and StatefulSet controllers.
//!
//! Mirrors `pkg/controller/history/controller_history.go` (`ControllerRevisionName`,
//! `NewControllerRevision`, `HashControllerRevision`, `SortControllerRevisions`,
//! `EqualRevision`, `FindEqualRevisions`) and the `getPatch` both controllers share: a
//! revision's `data` is `{"spec":{"template":{"$patch":"replace", ...the pod template}}}`, so
//! that `kubectl rollout undo` can apply it to the owner as a strategic merge patch.
//!
//! ```text
//!   owner web, template T ──template_patch──▶ data ──hash_controller_revision──▶ 5d8f7c
//!   new_controller_revision ─▶ ControllerRevision web-5d8f7c
//!                                labels: T's labels + controller-revision-hash=5d8f7c
//!                                ownerReferences: [web, controller]   revision: n
//! ```
//!
//! Unlike Kubernetes, the hash is FNV-1 over the JSON of `data` (Go hashes the same bytes,
//! but Go's JSON field order differs from k8s-openapi's), so names differ from a real
//! cluster's; and two revisions are equal when their `data` are equal as JSON values.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use apimachinery::hash::{fnv32, safe_encode_string};

/// `ControllerRevisionHashLabel`: the revision's hash, on the revision (and, for DaemonSets,
/// the hash on their pods; for StatefulSets, the revision's name on theirs).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// `getPatch` of the DaemonSet and StatefulSet controllers: the template under
/// `spec.template`, marked `"$patch": "replace"`.
pub fn template_patch(template: Option<&PodTemplateSpec>) -> Value {
    let mut template = template
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!({}));
    if let Some(map) = template.as_object_mut() {
        map.insert("$patch".to_owned(), json!("replace"));
    }
    json!({ "spec": { "template": template } })
}

/// The template a revision's `data` holds (`ApplyRevision` for a template-only patch);
/// `None` when `data` is not such a patch.
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision
        .data
        .as_ref()?
        .0
        .get("spec")?
        .get("template")?
        .clone();
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// `HashControllerRevision`: the hash of `data` and, when given, the collision count.
pub fn hash_controller_revision(data: &Value, probe: Option<i32>) -> String {
    let bytes = serde_json::to_vec(data).unwrap_or_default();
    let probe = probe.map(|p| p.to_string());
    let sum = match &probe {
        Some(p) => fnv32(&[&bytes, p.as_bytes()]),
        None => fnv32(&[&bytes]),
    };
    safe_encode_string(&sum.to_string())
}

/// `ControllerRevisionName`: `<prefix>-<hash>`, the prefix cut to 223 characters.
pub fn controller_revision_name(prefix: &str, hash: &str) -> String {
    let prefix: String = prefix.chars().take(223).collect();
    format!("{prefix}-{hash}")
}

/// What [`new_controller_revision`] builds a revision from.
#[derive(Debug, Clone)]
pub struct RevisionParts<'a> {
    /// The owner's metadata (name, namespace).
    pub parent: &'a ObjectMeta,
    /// The owner's controller reference.
    pub controller_ref: OwnerReference,
    /// The pod template's labels, copied onto the revision.
    pub template_labels: Option<&'a BTreeMap<String, String>>,
    /// The revision's data.
    pub data: Value,
    /// The revision number.
    pub revision: i64,
    /// The hash naming it.
    pub hash: String,
}

/// `NewControllerRevision`: named `<parent>-<hash>`, labelled with the template's labels and
/// the hash, controlled by the parent.
pub fn new_controller_revision(parts: RevisionParts<'_>) -> ControllerRevision {
    let mut labels = parts.template_labels.cloned().unwrap_or_default();
    labels.insert(
        CONTROLLER_REVISION_HASH_LABEL.to_owned(),
        parts.hash.clone(),
    );
    let parent_name = parts.parent.name.as_deref().unwrap_or_default();
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(controller_revision_name(parent_name, &parts.hash)),
            namespace: parts.parent.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![parts.controller_ref]),
            ..Default::default()
        },
        data: Some(RawExtension(parts.data)),
        revision: parts.revision,
    }
}

/// The hash label of a revision (its name when the label is missing, as the controllers add
/// it).
pub fn revision_hash(revision: &ControllerRevision) -> String {
    revision
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL))
        .cloned()
        .unwrap_or_else(|| revision.metadata.name.clone().unwrap_or_default())
}

/// `EqualRevision`: same data (hash labels are compared by Kubernetes only when both parse
/// as integers, which the safe-encoded hashes never do).
pub fn equal_revision(lhs: &ControllerRevision, rhs: &ControllerRevision) -> bool {
    lhs.data.as_ref().map(|d| &d.0) == rhs.data.as_ref().map(|d| &d.0)
}

/// `SortControllerRevisions`: by revision, then creation time, then name.
pub fn sort_controller_revisions(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let t =
                    |r: &ControllerRevision| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
                t(a).cmp(&t(b))
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// `FindEqualRevisions`: the revisions equal to `needle`, in the order given.
pub fn find_equal_revisions<'a>(
    revisions: &'a [ControllerRevision],
    needle: &ControllerRevision,
) -> Vec<&'a ControllerRevision> {
    revisions
        .iter()
        .filter(|r| equal_revision(r, needle))
        .collect()
}

/// `nextRevision`: one more than the highest revision, 1 for none.
pub fn next_revision(revisions: &[ControllerRevision]) -> i64 {
    revisions.iter().map(|r| r.revision).max().unwrap_or(0) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(name: &str, number: i64, data: Value) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(RawExtension(data)),
            revision: number,
        }
    }

    #[test]
    fn patch_round_trips_the_template() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            }),
            spec: None,
        };
        let data = template_patch(Some(&template));
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        let r = revision("web-1", 1, data);
        assert_eq!(template_of(&r), Some(template));
    }

    #[test]
    fn hash_depends_on_data_and_probe() {
        let a = hash_controller_revision(&json!({"a": 1}), Some(0));
        assert_eq!(a, hash_controller_revision(&json!({"a": 1}), Some(0)));
        assert_ne!(a, hash_controller_revision(&json!({"a": 1}), Some(1)));
        assert_ne!(a, hash_controller_revision(&json!({"a": 2}), Some(0)));
        assert!(a.len() <= 10);
    }

    #[test]
    fn sorting_equality_and_next_revision() {
        let mut revs = vec![
            revision("b", 3, json!({"x": 1})),
            revision("a", 1, json!({"x": 2})),
        ];
        sort_controller_revisions(&mut revs);
        assert_eq!(revs[0].revision, 1);
        assert_eq!(next_revision(&revs), 4);
        assert_eq!(next_revision(&[]), 1);
        let needle = revision("c", 9, json!({"x": 1}));
        let equal = find_equal_revisions(&revs, &needle);
        assert_eq!(equal.len(), 1);
        assert_eq!(equal[0].revision, 3);
        assert_eq!(controller_revision_name("web", "abc"), "web-abc");
    }
}
