//! A Deployment's revisions and rolling back to one: kubectl's `DeploymentHistoryViewer` and
//! `DeploymentRollbacker` (`staging/src/k8s.io/kubectl/pkg/polymorphichelpers/history.go`,
//! `rollback.go`).
//!
//! The history is not stored anywhere but in the ReplicaSets: the Deployment controller keeps
//! one per pod template (up to `revisionHistoryLimit` old ones) and stamps each with
//! `deployment.kubernetes.io/revision`. Rolling back copies a ReplicaSet's template into the
//! Deployment, which the controller then sees as a new revision:
//!
//! ```text
//!   web-5d4f (rev 1, nginx:1.25)       rollout undo            web-5d4f (rev 3, nginx:1.25)
//!   web-7b9c (rev 2, nginx:1.27)  ───────────────────────▶     web-7b9c (rev 2, nginx:1.27)
//!   Deployment: template nginx:1.27   template of rev 1 minus   Deployment: template nginx:1.25
//!                                     its hash label
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;

/// The revision annotation the Deployment controller sets on its ReplicaSets.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Why a revision was made (`kubectl annotate ... kubernetes.io/change-cause=...`).
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
/// The label that ties a ReplicaSet's pods to its template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Annotations a rollback keeps from the Deployment instead of copying from the ReplicaSet
/// (`annotationsToSkip` in rollback.go).
const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
];

/// A ReplicaSet's revision, if it has a valid one.
pub fn revision(rs: &ReplicaSet) -> Option<i64> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(REVISION_ANNOTATION)?
        .parse()
        .ok()
}

/// The ReplicaSets `d` controls (controller owner reference with its uid), by revision.
pub fn history<'a>(
    d: &Deployment,
    replica_sets: &'a [ReplicaSet],
) -> BTreeMap<i64, &'a ReplicaSet> {
    let uid = d.metadata.uid.as_deref().unwrap_or_default();
    replica_sets
        .iter()
        .filter(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .filter_map(|rs| Some((revision(rs)?, rs)))
        .collect()
}

/// `rollout history`'s table (tab-separated, for the describe tab writer).
pub fn history_table(history: &BTreeMap<i64, &ReplicaSet>) -> String {
    let mut out = String::from("REVISION\tCHANGE-CAUSE\n");
    for (revision, rs) in history {
        let cause = rs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CHANGE_CAUSE_ANNOTATION))
            .filter(|c| !c.is_empty())
            .map_or("<none>", String::as_str);
        out.push_str(&format!("{revision}\t{cause}\n"));
    }
    out
}

/// What `rollout undo` does.
#[derive(Debug, Clone, PartialEq)]
pub enum Rollback {
    /// Give the Deployment this pod template and these annotations.
    Restore {
        /// The revision's template, without its `pod-template-hash` label.
        template: Box<PodTemplateSpec>,
        /// The Deployment's own bookkeeping annotations plus the ReplicaSet's others.
        annotations: BTreeMap<String, String>,
    },
    /// Nothing to do: the template already is that of `revision`.
    Skipped {
        /// The revision asked for (or the previous one).
        revision: i64,
    },
}

/// Plans `rollout undo --to-revision=to_revision` (0: the revision before the latest).
/// `Err` carries kubectl's message.
pub fn rollback(
    d: &Deployment,
    history: &BTreeMap<i64, &ReplicaSet>,
    to_revision: i64,
) -> Result<Rollback, String> {
    let name = d.metadata.name.as_deref().unwrap_or_default();
    if d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
        return Err(format!(
            "you cannot rollback a paused deployment; resume it first with 'miniplane rollout resume deployment/{name}' and try again"
        ));
    }
    let (revision, rs) = if to_revision > 0 {
        history
            .get_key_value(&to_revision)
            .ok_or_else(|| format!("unable to find specified revision {to_revision} in history"))?
    } else {
        history
            .iter()
            .rev()
            .nth(1)
            .ok_or_else(|| format!("no rollout history found for deployment \"{name}\""))?
    };
    let template = without_hash_label(
        rs.spec
            .as_ref()
            .and_then(|s| s.template.clone())
            .unwrap_or_default(),
    );
    let current = without_hash_label(
        d.spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default(),
    );
    if template == current {
        return Ok(Rollback::Skipped {
            revision: *revision,
        });
    }
    let deployment_annotations = d.metadata.annotations.clone().unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = ANNOTATIONS_TO_SKIP
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), deployment_annotations.get(*k)?.clone())))
        .collect();
    for (k, v) in rs.metadata.annotations.iter().flatten() {
        if !ANNOTATIONS_TO_SKIP.contains(&k.as_str()) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    Ok(Rollback::Restore {
        template: Box::new(template),
        annotations,
    })
}

/// `template` without the `pod-template-hash` label (kubectl's `EqualIgnoreHash` compares so).
pub fn without_hash_label(mut template: PodTemplateSpec) -> PodTemplateSpec {
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    template
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(image: &str, paused: bool) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "uid": "d-uid",
                         "annotations": {REVISION_ANNOTATION: "2", "team": "a"}},
            "spec": {"paused": paused, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}
        }))
        .unwrap()
    }

    fn rs(name: &str, revision: &str, image: &str, owner: &str, cause: Option<&str>) -> ReplicaSet {
        let mut annotations = json!({REVISION_ANNOTATION: revision});
        if let Some(c) = cause {
            annotations[CHANGE_CAUSE_ANNOTATION] = json!(c);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                     "uid": owner, "controller": true}]},
            "spec": {"selector": {}, "template": {
                "metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH_LABEL: name}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}
        }))
        .unwrap()
    }

    fn replica_sets() -> Vec<ReplicaSet> {
        vec![
            rs("web-b", "2", "nginx:1.27", "d-uid", None),
            rs("web-a", "1", "nginx:1.25", "d-uid", Some("first")),
            rs("other", "5", "x", "other-uid", None),
        ]
    }

    #[test]
    fn history_lists_owned_replica_sets_by_revision() {
        let rses = replica_sets();
        let h = history(&deployment("nginx:1.27", false), &rses);
        assert_eq!(h.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            history_table(&h),
            "REVISION\tCHANGE-CAUSE\n1\tfirst\n2\t<none>\n"
        );
    }

    #[test]
    fn undo_copies_the_previous_template_without_its_hash() {
        let rses = replica_sets();
        let d = deployment("nginx:1.27", false);
        let h = history(&d, &rses);
        let Rollback::Restore {
            template,
            annotations,
        } = rollback(&d, &h, 0).unwrap()
        else {
            panic!("expected a restore");
        };
        let template = serde_json::to_value(*template).unwrap();
        assert_eq!(template["spec"]["containers"][0]["image"], "nginx:1.25");
        assert_eq!(template["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(
            serde_json::to_value(annotations).unwrap(),
            json!({REVISION_ANNOTATION: "2", CHANGE_CAUSE_ANNOTATION: "first"})
        );
        assert_eq!(
            rollback(&d, &h, 2).unwrap(),
            Rollback::Skipped { revision: 2 }
        );
    }

    #[test]
    fn undo_errors_as_kubectl() {
        let rses = replica_sets();
        let d = deployment("nginx:1.27", false);
        let h = history(&d, &rses);
        assert_eq!(
            rollback(&d, &h, 7).unwrap_err(),
            "unable to find specified revision 7 in history"
        );
        let only_one: BTreeMap<i64, &ReplicaSet> =
            h.iter().take(1).map(|(k, v)| (*k, *v)).collect();
        assert_eq!(
            rollback(&d, &only_one, 0).unwrap_err(),
            "no rollout history found for deployment \"web\""
        );
        assert!(
            rollback(&deployment("x", true), &h, 0)
                .unwrap_err()
                .starts_with("you cannot rollback a paused deployment")
        );
    }
}
