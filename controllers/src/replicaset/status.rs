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

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pod_readiness::{is_pod_available, is_pod_ready};
use crate::selector::labels_superset;

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
    let spec = rs.spec.clone().unwrap_or_default();
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let empty = Default::default();
    let fully_labeled = active
        .iter()
        .filter(|p| {
            labels_superset(
                p.metadata.labels.as_ref().unwrap_or(&empty),
                &template_labels,
            )
        })
        .count();
    let ready = active.iter().filter(|p| is_pod_ready(p)).count();
    let available = active
        .iter()
        .filter(|p| is_pod_available(p, min_ready, now))
        .count();

    let has_failure = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == REPLICA_SET_REPLICA_FAILURE);
    match manage_error {
        Some(error) if !has_failure => {
            let diff = active.len() as i64 - i64::from(spec.replicas.unwrap_or(1));
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
    status.fully_labeled_replicas = Some(fully_labeled as i32);
    status.ready_replicas = Some(ready as i32);
    status.available_replicas = Some(available as i32);
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
