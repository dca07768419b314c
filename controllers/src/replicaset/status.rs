//! The ReplicaSet's status: what its pods look like right now.
//!
//! Mirrors `calculateStatus` and `updateReplicaSetStatus` in
//! `pkg/controller/replicaset/replica_set_utils.go`.
//!
//! ```text
//!   replicas             active pods (not terminal, not being deleted)
//!   fullyLabeledReplicas active pods whose labels ⊇ the template's labels
//!   readyReplicas        ... with Ready=True
//!   availableReplicas    ... ready for more than minReadySeconds (at `now`)
//!   ReplicaFailure       True FailedCreate|FailedDelete while managing pods fails
//! ```

use apimachinery::labels::is_superset;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pod_readiness::{get_pod_ready_condition, is_ready, ready_long_enough};

/// Condition type set when creating or deleting pods fails.
pub const REPLICA_SET_REPLICA_FAILURE: &str = "ReplicaFailure";

/// `calculateStatus`: counts over `active` pods; `manage_error` (the error of the last
/// `manageReplicas`, if any) adds a `ReplicaFailure` condition, success removes it.
pub fn calculate_status(
    rs: &ReplicaSet,
    active: &[&Pod],
    manage_error: Option<&str>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut status = rs.status.clone().unwrap_or_default();
    let spec = rs.spec.as_ref();
    let empty = Default::default();
    let template_labels = spec
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    // One pass, reading each pod's labels and Ready condition once: a ReplicaSet's pods are
    // thousands of separate allocations, and this runs on every sync.
    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    for pod in active {
        if is_superset(
            pod.metadata.labels.as_ref().unwrap_or(&empty),
            template_labels,
        ) {
            fully_labeled += 1;
        }
        if let Some(condition) = get_pod_ready_condition(pod).filter(|c| is_ready(c)) {
            ready += 1;
            if ready_long_enough(condition, min_ready, now) {
                available += 1;
            }
        }
    }

    let has_failure = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == REPLICA_SET_REPLICA_FAILURE);
    match manage_error {
        Some(error) if !has_failure => {
            let diff = active.len() as i64 - i64::from(spec.and_then(|s| s.replicas).unwrap_or(1));
            let reason = match diff {
                d if d < 0 => "FailedCreate",
                d if d > 0 => "FailedDelete",
                _ => "",
            };
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(ReplicaSetCondition {
                    type_: REPLICA_SET_REPLICA_FAILURE.into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(now)),
                    reason: Some(reason.into()),
                    message: Some(error.into()),
                });
        }
        None if has_failure => {
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_ != REPLICA_SET_REPLICA_FAILURE);
            }
        }
        _ => {}
    }
    status.replicas = active.len() as i32;
    status.fully_labeled_replicas = Some(fully_labeled);
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status
}

/// `updateReplicaSetStatus`'s first half: the ReplicaSet to PUT to `/status`, or `None` when
/// the counts and conditions are unchanged and `observedGeneration` is current.
pub fn status_update(rs: &ReplicaSet, mut new_status: ReplicaSetStatus) -> Option<ReplicaSet> {
    let current = rs.status.clone().unwrap_or_default();
    let generation = rs.metadata.generation;
    let unchanged = current.replicas == new_status.replicas
        && current.fully_labeled_replicas.unwrap_or(0)
            == new_status.fully_labeled_replicas.unwrap_or(0)
        && current.ready_replicas.unwrap_or(0) == new_status.ready_replicas.unwrap_or(0)
        && current.available_replicas.unwrap_or(0) == new_status.available_replicas.unwrap_or(0)
        && generation.unwrap_or(0) == current.observed_generation.unwrap_or(0)
        && current.conditions == new_status.conditions;
    if unchanged {
        return None;
    }
    new_status.observed_generation = generation;
    let mut updated = rs.clone();
    updated.status = Some(new_status);
    Some(updated)
}
