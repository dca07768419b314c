//! A StatefulSet's status counts.
//!
//! Mirrors `computeReplicaStatus`, `updateStatus`, `completeRollingUpdate` and
//! `inconsistentStatus` in `pkg/controller/statefulset/stateful_set_control.go`.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;

use super::identity::{
    is_created, is_running_and_available, is_running_and_ready, is_terminating, pod_revision,
};

/// `updateStatus`: `replicas`, `readyReplicas`, `availableReplicas`, `currentReplicas` and
/// `updatedReplicas` counted over `pods` (pods not yet created count for nothing).
pub fn count_replicas(
    status: &mut StatefulSetStatus,
    min_ready_seconds: i32,
    pods: &[&Pod],
    now: Timestamp,
) {
    let current = status.current_revision.clone().unwrap_or_default();
    let update = status.update_revision.clone().unwrap_or_default();
    status.replicas = 0;
    status.ready_replicas = Some(0);
    status.available_replicas = Some(0);
    status.current_replicas = Some(0);
    status.updated_replicas = Some(0);
    let bump = |v: &mut Option<i32>| *v = Some(v.unwrap_or(0) + 1);
    for pod in pods {
        if is_created(pod) {
            status.replicas += 1;
        }
        if is_running_and_ready(pod) {
            bump(&mut status.ready_replicas);
            if is_running_and_available(pod, min_ready_seconds, now) {
                bump(&mut status.available_replicas);
            }
        }
        if is_created(pod) && !is_terminating(pod) {
            let revision = pod_revision(pod);
            if revision == current {
                bump(&mut status.current_replicas);
            }
            if revision == update {
                bump(&mut status.updated_replicas);
            }
        }
    }
}

/// `completeRollingUpdate`: once every replica is updated and ready, the update revision
/// becomes the current one.
pub fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let rolling = set
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    if rolling
        && status.updated_replicas.unwrap_or(0) == status.replicas
        && status.ready_replicas.unwrap_or(0) == status.replicas
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

/// `inconsistentStatus`: whether `status` differs from the set's in a field worth a write.
pub fn inconsistent_status(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let old = set.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    status.observed_generation.unwrap_or(0) > old.observed_generation.unwrap_or(0)
        || status.replicas != old.replicas
        || n(status.current_replicas) != n(old.current_replicas)
        || n(status.ready_replicas) != n(old.ready_replicas)
        || n(status.updated_replicas) != n(old.updated_replicas)
        || status.current_revision != old.current_revision
        || n(status.available_replicas) != n(old.available_replicas)
        || status.update_revision != old.update_revision
        || status.collision_count != old.collision_count
}
