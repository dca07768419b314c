//! Pod readiness, availability and activity.
//!
//! Mirrors `pkg/api/v1/pod/util.go` (`IsPodReady`, `IsPodAvailable`, `GetPodReadyCondition`)
//! and `pkg/controller/controller_utils.go` (`IsPodActive`, `FilterActivePods`).
//!
//! * **ready**: the `Ready` condition is `True` (set by the kubelet when readiness probes pass);
//! * **available**: ready for at least `minReadySeconds` (so a pod that flaps is not counted);
//! * **active**: not `Succeeded`/`Failed` and not being deleted — what a ReplicaSet counts.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition};

/// The pod's `Ready` condition.
pub fn get_pod_ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
}

/// `IsPodReady`: the `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    get_pod_ready_condition(pod).is_some_and(is_ready)
}

/// Whether a `Ready` condition says ready (`IsPodReadyConditionTrue`).
pub fn is_ready(condition: &PodCondition) -> bool {
    condition.status == "True"
}

/// When the pod became ready (the Ready condition's `lastTransitionTime`), if it is ready.
pub fn pod_ready_time(pod: &Pod) -> Option<Timestamp> {
    get_pod_ready_condition(pod)
        .filter(|c| is_ready(c))?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// `IsPodAvailable`: ready, and either `minReadySeconds` is 0 or the pod has been ready for
/// strictly longer than `minReadySeconds` at `now`.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    get_pod_ready_condition(pod)
        .filter(|c| is_ready(c))
        .is_some_and(|c| ready_long_enough(c, min_ready_seconds, now))
}

/// The second half of `IsPodAvailable`, for a `Ready` condition that is `True`:
/// `minReadySeconds` is 0, or it turned true strictly more than `minReadySeconds` before `now`.
pub fn ready_long_enough(ready: &PodCondition, min_ready_seconds: i32, now: Timestamp) -> bool {
    if min_ready_seconds == 0 {
        return true;
    }
    ready
        .last_transition_time
        .as_ref()
        .is_some_and(|t| t.0 + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now)
}

/// The pod's `status.phase`, or `""`.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// `IsPodActive`: not `Succeeded`, not `Failed`, no `deletionTimestamp`.
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = pod_phase(pod);
    phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

/// `FilterActivePods`: the active pods, in their original order.
pub fn filter_active_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<&'a Pod> {
    pods.into_iter().filter(|p| is_pod_active(p)).collect()
}
