//! Deployment conditions and the rollout predicates built on them.
//!
//! Mirrors the condition half of `pkg/controller/deployment/util/deployment_util.go`:
//! `NewDeploymentCondition`, `SetDeploymentCondition`, `DeploymentComplete`,
//! `DeploymentProgressing`, `DeploymentTimedOut`.
//!
//! A Deployment carries two conditions that `kubectl rollout status` and `kubectl wait` read:
//!
//! ```text
//!   Available    True  MinimumReplicasAvailable     "Deployment has minimum availability."
//!                False MinimumReplicasUnavailable   "Deployment does not have minimum availability."
//!   Progressing  True  NewReplicaSetCreated | FoundNewReplicaSet | ReplicaSetUpdated
//!                True  NewReplicaSetAvailable       (rollout complete)
//!                False ProgressDeadlineExceeded     (no progress for progressDeadlineSeconds)
//!                Unknown DeploymentPaused | DeploymentResumed
//! ```

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSetCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::util::deployment_replicas;

/// Condition type `Available`.
pub const DEPLOYMENT_AVAILABLE: &str = "Available";
/// Condition type `Progressing`.
pub const DEPLOYMENT_PROGRESSING: &str = "Progressing";
/// Condition type `ReplicaFailure` (copied from a ReplicaSet).
pub const DEPLOYMENT_REPLICA_FAILURE: &str = "ReplicaFailure";

/// Progressing: one of its ReplicaSets was scaled as part of the rollout.
pub const REPLICA_SET_UPDATED_REASON: &str = "ReplicaSetUpdated";
/// Progressing False: the new ReplicaSet could not be created.
pub const FAILED_RS_CREATE_REASON: &str = "ReplicaSetCreateError";
/// Progressing: a new ReplicaSet was created.
pub const NEW_REPLICA_SET_REASON: &str = "NewReplicaSetCreated";
/// Progressing: an existing ReplicaSet matches the template.
pub const FOUND_NEW_RS_REASON: &str = "FoundNewReplicaSet";
/// Progressing: the rollout is complete.
pub const NEW_RS_AVAILABLE_REASON: &str = "NewReplicaSetAvailable";
/// Progressing False: no progress within `progressDeadlineSeconds`.
pub const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";
/// Progressing Unknown: the Deployment is paused.
pub const PAUSED_DEPLOY_REASON: &str = "DeploymentPaused";
/// Progressing Unknown: the Deployment was resumed.
pub const RESUMED_DEPLOY_REASON: &str = "DeploymentResumed";
/// Available True.
pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available False.
pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// `NewDeploymentCondition`: both times set to `now`.
pub fn new_deployment_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: Some(reason.into()),
        message: Some(message.into()),
    }
}

/// `GetDeploymentCondition`.
pub fn get_deployment_condition<'a>(
    status: Option<&'a DeploymentStatus>,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// `SetDeploymentCondition`: a no-op when a condition of that type already has the same
/// status and reason; otherwise replaces it (keeping `lastTransitionTime` when only the reason
/// changed) and moves it to the end.
pub fn set_deployment_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = get_deployment_condition(Some(status), &condition.type_) {
        if current.status == condition.status && current.reason == condition.reason {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_deployment_condition(status, &condition.type_.clone());
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition);
}

/// `RemoveDeploymentCondition`.
pub fn remove_deployment_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// `ReplicaSetToDeploymentCondition`: a ReplicaSet's `ReplicaFailure` promoted to the Deployment.
pub fn replica_set_to_deployment_condition(c: &ReplicaSetCondition) -> DeploymentCondition {
    DeploymentCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        last_transition_time: c.last_transition_time.clone(),
        last_update_time: c.last_transition_time.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

fn counts(s: &DeploymentStatus) -> (i32, i32, i32, i32, i64) {
    (
        s.replicas.unwrap_or(0),
        s.updated_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
        s.observed_generation.unwrap_or(0),
    )
}

/// `DeploymentComplete`: every desired replica is updated and available, no old pods remain,
/// and the status describes the current generation.
pub fn deployment_complete(d: &Deployment, new_status: &DeploymentStatus) -> bool {
    let replicas = deployment_replicas(d);
    let (total, updated, _, available, observed) = counts(new_status);
    updated == replicas
        && total == replicas
        && available == replicas
        && observed >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: compared with the Deployment's current status, more pods are
/// updated, ready or available, or fewer old pods remain.
pub fn deployment_progressing(d: &Deployment, new_status: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let (old_total, old_updated, old_ready, old_available, _) = counts(&old);
    let (new_total, new_updated, new_ready, new_available, _) = counts(new_status);
    new_updated > old_updated
        || (new_total - new_updated) < (old_total - old_updated)
        || new_ready > old_ready
        || new_available > old_available
}

/// `spec.progressDeadlineSeconds` unless unset or `MaxInt32` (`HasProgressDeadline`).
pub fn progress_deadline_seconds(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|&s| s != i32::MAX)
}

/// `DeploymentTimedOut`: the Progressing condition was last updated more than
/// `progressDeadlineSeconds` before `now` (or already says so). A completed rollout
/// (`NewReplicaSetAvailable`) never times out.
pub fn deployment_timed_out(d: &Deployment, new_status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline_seconds(d) else {
        return false;
    };
    let Some(condition) = get_deployment_condition(Some(new_status), DEPLOYMENT_PROGRESSING) else {
        return false;
    };
    match condition.reason.as_deref() {
        Some(NEW_RS_AVAILABLE_REASON) => false,
        Some(TIMED_OUT_REASON) => true,
        _ => match &condition.last_update_time {
            Some(from) => from.0 + SignedDuration::from_secs(i64::from(deadline)) < now,
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentSpec;

    use super::*;

    use crate::testing::at;

    #[test]
    fn set_condition_is_a_noop_when_status_and_reason_are_unchanged() {
        let mut status = DeploymentStatus::default();
        set_deployment_condition(
            &mut status,
            new_deployment_condition("Progressing", "True", "A", "first", at(0)),
        );
        set_deployment_condition(
            &mut status,
            new_deployment_condition("Progressing", "True", "A", "second", at(5)),
        );
        let c = get_deployment_condition(Some(&status), "Progressing").expect("set");
        assert_eq!(c.message.as_deref(), Some("first"));
        // Same status, new reason: replaced but the transition time is kept.
        set_deployment_condition(
            &mut status,
            new_deployment_condition("Progressing", "True", "B", "third", at(9)),
        );
        let c = get_deployment_condition(Some(&status), "Progressing").expect("set");
        assert_eq!(
            (c.reason.as_deref(), c.last_transition_time.clone()),
            (Some("B"), Some(Time(at(0))))
        );
        assert_eq!(c.last_update_time, Some(Time(at(9))));
        // New status: transition time moves.
        set_deployment_condition(
            &mut status,
            new_deployment_condition("Progressing", "False", "C", "x", at(12)),
        );
        let c = get_deployment_condition(Some(&status), "Progressing").expect("set");
        assert_eq!(c.last_transition_time, Some(Time(at(12))));
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
    }

    fn deployment(replicas: i32, deadline: Option<i32>) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                progress_deadline_seconds: deadline,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn timed_out_uses_last_update_time_plus_deadline() {
        let d = deployment(1, Some(600));
        let mut status = DeploymentStatus::default();
        set_deployment_condition(
            &mut status,
            new_deployment_condition("Progressing", "True", REPLICA_SET_UPDATED_REASON, "", at(0)),
        );
        assert!(
            !deployment_timed_out(&d, &status, at(600)),
            "exactly at the deadline is not past it"
        );
        assert!(deployment_timed_out(&d, &status, at(601)));
        assert!(!deployment_timed_out(
            &deployment(1, None),
            &status,
            at(10_000)
        ));
        assert!(!deployment_timed_out(
            &deployment(1, Some(i32::MAX)),
            &status,
            at(10_000)
        ));
        let mut done = DeploymentStatus::default();
        set_deployment_condition(
            &mut done,
            new_deployment_condition("Progressing", "True", NEW_RS_AVAILABLE_REASON, "", at(0)),
        );
        assert!(!deployment_timed_out(&d, &done, at(10_000)));
    }

    #[test]
    fn complete_and_progressing() {
        let mut d = deployment(3, Some(600));
        d.metadata.generation = Some(2);
        let status = |r, u, a, g| DeploymentStatus {
            replicas: Some(r),
            updated_replicas: Some(u),
            available_replicas: Some(a),
            observed_generation: Some(g),
            ..Default::default()
        };
        assert!(deployment_complete(&d, &status(3, 3, 3, 2)));
        assert!(!deployment_complete(&d, &status(3, 3, 3, 1)));
        assert!(!deployment_complete(&d, &status(4, 3, 3, 2)));
        d.status = Some(status(4, 1, 3, 2));
        assert!(
            deployment_progressing(&d, &status(4, 2, 3, 2)),
            "more updated"
        );
        assert!(deployment_progressing(&d, &status(3, 1, 3, 2)), "fewer old");
        assert!(!deployment_progressing(&d, &status(4, 1, 3, 2)));
    }
}
