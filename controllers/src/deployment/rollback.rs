//! Rolling back: `kubectl rollout undo` and the controller's side of it.
//!
//! Mirrors `staging/src/k8s.io/kubectl/pkg/polymorphichelpers/rollback.go`
//! (`DeploymentRollbacker`) and `pkg/controller/deployment/rollback.go`.
//!
//! A rollback is just a template change. kubectl finds the ReplicaSet of the wanted revision
//! (default: the previous one), and JSON-patches the Deployment's template and annotations
//! back to that ReplicaSet's. The controller then sees a template equal to that old
//! ReplicaSet's: [`super::util::find_new_replica_set`] picks it as the *new* ReplicaSet,
//! `getNewReplicaSet` raises its revision to `max + 1` (recording the old number in
//! `revision-history`), and the rolling update scales it back up.
//!
//! ```text
//!   rev 1: nginx-aaa (1.24)   rev 2: nginx-bbb (1.25, current)
//!   kubectl rollout undo ─▶ template := nginx-aaa's ─▶ nginx-aaa is "new", revision 3,
//!                                                      revision-history "1"; nginx-bbb → 0
//! ```
//!
//! The controller also honours the `deprecated.deployment.rollback.to` annotation (the
//! remains of `extensions/v1beta1`'s `spec.rollbackTo`) in [`DeploymentSyncer::rollback`].

use std::collections::BTreeMap;

use apimachinery::EventType;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde_json::json;

use super::sync::DeploymentSyncer;
use super::util::*;
use crate::action::Action;
use crate::error::{Error, Result};

/// Event reason: the revision to roll back to does not exist.
pub const ROLLBACK_REVISION_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
/// Event reason: the revision has the current template already.
pub const ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
/// Event reason: rolled back.
pub const ROLLBACK_DONE: &str = "DeploymentRollback";

/// What `kubectl rollout undo` does.
#[derive(Debug, Clone, PartialEq)]
pub enum RolloutUndo {
    /// Nothing to do; kubectl prints `deployment.apps/x skipped rollback (...)`.
    Skipped(String),
    /// Send this JSON patch (`application/json-patch+json`) to the Deployment; kubectl
    /// prints `deployment.apps/x rolled back`.
    Patch {
        /// The revision rolled back to.
        revision: i64,
        /// The ReplicaSet whose template is restored.
        replica_set: String,
        /// `[{"op":"replace","path":"/spec/template",...},{"op":"replace","path":"/metadata/annotations",...}]`.
        body: serde_json::Value,
    },
}

/// `DeploymentRollbacker.Rollback` with `--to-revision=to_revision` (0: the previous one),
/// given the Deployment and the ReplicaSets it controls.
pub fn rollout_undo(d: &Deployment, rss: &[ReplicaSet], to_revision: i64) -> Result<RolloutUndo> {
    if d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false) {
        return Err(Error::RollbackPaused);
    }
    let rs = rs_for_revision(d, rss, to_revision)?;
    let revision = revision(rs).unwrap_or(0);
    let mut template = rs_template(rs);
    if equal_ignore_hash(&template, &deployment_template(d)) {
        return Ok(RolloutUndo::Skipped(format!(
            "skipped rollback (current template already matches revision {revision})"
        )));
    }
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
    }
    let mut annotations: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in rs.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    let body = json!([
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "replace", "path": "/metadata/annotations", "value": annotations},
    ]);
    Ok(RolloutUndo::Patch {
        revision,
        replica_set: rs.metadata.name.clone().unwrap_or_default(),
        body,
    })
}

/// kubectl's `rsForRevision`: the ReplicaSet of `to_revision`, or for 0 the one with the
/// second-highest revision.
fn rs_for_revision<'a>(
    d: &Deployment,
    rss: &'a [ReplicaSet],
    to_revision: i64,
) -> Result<&'a ReplicaSet> {
    let mut latest: Option<(&ReplicaSet, i64)> = None;
    let mut previous: Option<(&ReplicaSet, i64)> = None;
    for rs in rss {
        let Ok(v) = revision(rs) else { continue };
        if to_revision > 0 {
            if v == to_revision {
                return Ok(rs);
            }
            continue;
        }
        if latest.is_none_or(|(_, l)| l < v) {
            previous = latest;
            latest = Some((rs, v));
        } else if previous.is_none_or(|(_, p)| p < v) {
            previous = Some((rs, v));
        }
    }
    if to_revision > 0 {
        return Err(Error::RevisionNotFound(to_revision));
    }
    previous
        .map(|(rs, _)| rs)
        .ok_or_else(|| Error::NoRolloutHistory(d.metadata.name.clone().unwrap_or_default()))
}

/// `getRollbackTo`: the revision in the `deprecated.deployment.rollback.to` annotation
/// (garbled values are ignored).
pub fn get_rollback_to(d: &Deployment) -> Option<i64> {
    d.metadata
        .annotations
        .as_ref()?
        .get(DEPRECATED_ROLLBACK_TO)?
        .parse()
        .ok()
}

impl DeploymentSyncer<'_> {
    /// `rollback`: the controller's handling of `deprecated.deployment.rollback.to` —
    /// copy the template of that revision (0: the last one) into the Deployment and clear
    /// the annotation, with `DeploymentRollback*` events.
    pub fn rollback(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        let rss = self.get_all_replica_sets_and_sync_revision(rs_list, true)?;
        let all: Vec<ReplicaSet> = rss.all().into_iter().cloned().collect();
        let mut to = get_rollback_to(&self.d).unwrap_or(0);
        if to == 0 {
            to = last_revision(&all.iter().collect::<Vec<_>>());
            if to == 0 {
                self.event(
                    EventType::Warning,
                    ROLLBACK_REVISION_NOT_FOUND,
                    "Unable to find last revision.",
                );
                self.update_deployment_and_clear_rollback_to();
                return Ok(());
            }
        }
        if let Some(rs) = all.iter().find(|rs| revision(rs).ok() == Some(to)) {
            if self.rollback_to_template(rs) {
                let msg = format!("Rolled back deployment {:?} to revision {to}", self.name());
                self.event(EventType::Normal, ROLLBACK_DONE, msg);
            }
            return Ok(());
        }
        self.event(
            EventType::Warning,
            ROLLBACK_REVISION_NOT_FOUND,
            "Unable to find the revision to rollback to.",
        );
        self.update_deployment_and_clear_rollback_to();
        Ok(())
    }

    /// `rollbackToTemplate`: true if the template changed.
    fn rollback_to_template(&mut self, rs: &ReplicaSet) -> bool {
        let performed = !equal_ignore_hash(&deployment_template(&self.d), &rs_template(rs));
        if performed {
            set_from_replica_set_template(&mut self.d, &rs_template(rs));
            set_deployment_annotations_to(&mut self.d, rs);
            self.note(format!(
                "roll back to the template of {}",
                rs.metadata.name.clone().unwrap_or_default()
            ));
        } else {
            let msg = format!(
                "The rollback revision contains the same template as current deployment {:?}",
                self.name()
            );
            self.event(EventType::Warning, ROLLBACK_TEMPLATE_UNCHANGED, msg);
        }
        self.update_deployment_and_clear_rollback_to();
        performed
    }

    /// `updateDeploymentAndClearRollbackTo`.
    fn update_deployment_and_clear_rollback_to(&mut self) {
        if let Some(annotations) = self.d.metadata.annotations.as_mut() {
            annotations.remove(DEPRECATED_ROLLBACK_TO);
        }
        self.actions
            .push(Action::UpdateDeployment(Box::new(self.d.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::fixtures::{annotate, deployment, rs};

    fn with_revision(name: &str, image: &str, revision: &str) -> ReplicaSet {
        let mut r = rs(name, image, 0, 0, 0);
        annotate(&mut r.metadata, REVISION_ANNOTATION, revision);
        r
    }

    #[test]
    fn undo_picks_the_previous_or_the_named_revision() {
        let d = deployment(1, "1", "0"); // template v1 = revision 3's
        let rss = [
            with_revision("r2", "v2", "2"),
            with_revision("r3", "v1", "3"),
            with_revision("r1", "v0", "1"),
        ];
        let picked = |to| match rollout_undo(&d, &rss, to) {
            Ok(RolloutUndo::Patch {
                replica_set,
                revision,
                ..
            }) => Ok((replica_set, revision)),
            Ok(RolloutUndo::Skipped(msg)) => Err(msg),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(
            picked(0),
            Ok(("r2".into(), 2)),
            "default: the second-highest revision"
        );
        assert_eq!(picked(1), Ok(("r1".into(), 1)));
        assert_eq!(
            picked(3),
            Err("skipped rollback (current template already matches revision 3)".into())
        );
        assert_eq!(
            picked(9),
            Err("unable to find specified revision 9 in history".into())
        );
        let only = [with_revision("r1", "v1", "1")];
        assert_eq!(
            rollout_undo(&d, &only, 0),
            Err(Error::NoRolloutHistory("foo".into()))
        );
    }
}
