//! Rollout progress: the `Progressing` condition and the progress deadline.
//!
//! Mirrors `pkg/controller/deployment/progress.go` (`syncRolloutStatus`,
//! `getReplicaFailures`, `requeueStuckDeployment`).
//!
//! ```text
//!   rollout complete?        → Progressing True  NewReplicaSetAvailable  "ReplicaSet \"x\" has successfully progressed."
//!   progress since last look? → Progressing True  ReplicaSetUpdated       "ReplicaSet \"x\" is progressing."
//!   lastUpdateTime + deadline < now → Progressing False ProgressDeadlineExceeded "ReplicaSet \"x\" has timed out progressing."
//!   nothing changed          → requeue after (lastUpdateTime + deadline - now) + 1s
//! ```
//!
//! "Progress" is judged by comparing the newly calculated status with the one the
//! Deployment had, so `lastUpdateTime` of Progressing moves only when something moved.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus, ReplicaSet};

use super::conditions::*;
use super::sync::{DeploymentSyncer, calculate_status, name_of};

impl DeploymentSyncer<'_> {
    /// `syncRolloutStatus`: calculate the status, update the Progressing condition (when a
    /// deadline is set and the rollout is not already known complete), promote ReplicaSet
    /// failures, and write the status — or, if nothing changed, requeue for the deadline.
    pub fn sync_rollout_status(&mut self, all: &[&ReplicaSet], new_rs: Option<&ReplicaSet>) {
        let mut new_status = calculate_status(all, new_rs, &self.d, self.now);
        let deadline = progress_deadline_seconds(&self.d);
        if deadline.is_none() {
            remove_deployment_condition(&mut new_status, DEPLOYMENT_PROGRESSING);
        }
        let current =
            get_deployment_condition(self.d.status.as_ref(), DEPLOYMENT_PROGRESSING).cloned();
        let is_complete_deployment = new_status.replicas == new_status.updated_replicas
            && current
                .as_ref()
                .is_some_and(|c| c.reason.as_deref() == Some(NEW_RS_AVAILABLE_REASON));
        if deadline.is_some() && !is_complete_deployment {
            let subject = match new_rs {
                Some(rs) => format!("ReplicaSet {:?}", name_of(rs)),
                None => format!("Deployment {:?}", self.name()),
            };
            if deployment_complete(&self.d, &new_status) {
                let msg = format!("{subject} has successfully progressed.");
                self.note(format!("rollout complete: {msg}"));
                let c = new_deployment_condition(
                    DEPLOYMENT_PROGRESSING,
                    "True",
                    NEW_RS_AVAILABLE_REASON,
                    msg,
                    self.now,
                );
                set_deployment_condition(&mut new_status, c);
            } else if deployment_progressing(&self.d, &new_status) {
                let msg = format!("{subject} is progressing.");
                let mut c = new_deployment_condition(
                    DEPLOYMENT_PROGRESSING,
                    "True",
                    REPLICA_SET_UPDATED_REASON,
                    msg,
                    self.now,
                );
                // Same reason as before but a fresh lastUpdateTime: SetDeploymentCondition
                // would ignore it, so the old condition is removed first.
                if let Some(current) = &current {
                    if current.status == "True" {
                        c.last_transition_time = current.last_transition_time.clone();
                    }
                    remove_deployment_condition(&mut new_status, DEPLOYMENT_PROGRESSING);
                }
                set_deployment_condition(&mut new_status, c);
            } else if deployment_timed_out(&self.d, &new_status, self.now) {
                let msg = format!("{subject} has timed out progressing.");
                self.note(format!("progress deadline exceeded: {msg}"));
                let c = new_deployment_condition(
                    DEPLOYMENT_PROGRESSING,
                    "False",
                    TIMED_OUT_REASON,
                    msg,
                    self.now,
                );
                set_deployment_condition(&mut new_status, c);
            }
        }
        match get_replica_failures(all, new_rs).into_iter().next() {
            Some(failure) => set_deployment_condition(&mut new_status, failure),
            None => remove_deployment_condition(&mut new_status, DEPLOYMENT_REPLICA_FAILURE),
        }
        if self.d.status.as_ref() == Some(&new_status) {
            if let Some(after) = self.requeue_stuck_deployment(&new_status) {
                self.note(format!(
                    "no progress; check the deadline again in {}s",
                    after.as_secs()
                ));
                self.actions
                    .push(crate::action::Action::RequeueAfter(after));
            }
            return;
        }
        self.d.status = Some(new_status);
        self.update_status();
    }

    /// `requeueStuckDeployment`: when nothing changed, when to look again so a stuck rollout
    /// is noticed at its deadline: `lastUpdateTime + deadline - now + 1s`, or zero
    /// ("now, rate limited") when less than a second remains. `None`: no need (no deadline,
    /// complete, or already timed out).
    pub fn requeue_stuck_deployment(&self, new_status: &DeploymentStatus) -> Option<Duration> {
        let deadline = progress_deadline_seconds(&self.d)?;
        let current = get_deployment_condition(self.d.status.as_ref(), DEPLOYMENT_PROGRESSING)?;
        if deployment_complete(&self.d, new_status)
            || current.reason.as_deref() == Some(TIMED_OUT_REASON)
        {
            return None;
        }
        let last_update = current.last_update_time.as_ref()?.0;
        let due = last_update + jiff::SignedDuration::from_secs(i64::from(deadline));
        let after = due.duration_since(self.now);
        if after < jiff::SignedDuration::from_secs(1) {
            return Some(Duration::ZERO);
        }
        let after = Duration::try_from(after).unwrap_or(Duration::ZERO);
        Some(after + Duration::from_secs(1))
    }
}

/// `getReplicaFailures`: `ReplicaFailure` conditions of the new ReplicaSet, or else of any.
pub fn get_replica_failures(
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
) -> Vec<DeploymentCondition> {
    fn failures(rs: &ReplicaSet) -> impl Iterator<Item = DeploymentCondition> + '_ {
        rs.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| c.type_ == DEPLOYMENT_REPLICA_FAILURE)
            .map(replica_set_to_deployment_condition)
    }
    let from_new: Vec<DeploymentCondition> = new_rs.into_iter().flat_map(failures).collect();
    if !from_new.is_empty() {
        return from_new;
    }
    all.iter().flat_map(|rs| failures(rs)).collect()
}
