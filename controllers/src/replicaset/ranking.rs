//! Which pods to delete when scaling down: `ActivePodsWithRanks`.
//!
//! Mirrors `ActivePodsWithRanks.Less` in `pkg/controller/controller_utils.go` and
//! `getPodsToDelete` / `getPodsRankedByRelatedPodsOnSameNode` in
//! `pkg/controller/replicaset/replica_set.go`.
//!
//! The pods that cost least to lose go first. Compared pairwise, the first rule that tells
//! two pods apart decides:
//!
//! ```text
//!   1. not scheduled            before scheduled
//!   2. Pending < Unknown < Running
//!   3. not ready                before ready
//!   4. lower pod-deletion-cost  before higher (annotation controller.kubernetes.io/pod-deletion-cost)
//!   5. more related pods on the same node before fewer (spread what remains)
//!   6. ready for a shorter time before longer   (by log2 buckets of age when `now` is given)
//!   7. more container restarts  before fewer
//!   8. created later            before earlier  (no creation time first; log2 buckets)
//! ```
//!
//! With `now` (as the ReplicaSet controller always passes, `LogarithmicScaleDown`), times in
//! the same power-of-two age bucket count as equal and the pod UID breaks the tie, so
//! scale-down is spread over pods of similar age instead of always taking the very newest.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::pod_readiness::{is_pod_active, is_pod_ready, pod_phase, pod_ready_time};

/// Annotation a user sets to steer which pods go first (`PodDeletionCost`).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// `podPhaseToOrdinal`: Pending 0, Unknown 1, Running 2 (anything else 0).
fn phase_ordinal(pod: &Pod) -> u8 {
    match pod_phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `maxContainerRestarts`: the highest restart count of regular containers, then of
/// restartable init containers (sidecars).
fn max_container_restarts(pod: &Pod) -> (i32, i32) {
    let status = pod.status.as_ref();
    let regular = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    let sidecar_names: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| sidecar_names.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    (regular, sidecar)
}

/// `logarithmicRankDiff`: ⌊log2(age in ns)⌋ of `t1` minus that of `t2` (age ≤ 0 ranks -1).
fn logarithmic_rank_diff(t1: Timestamp, t2: Timestamp, now: Timestamp) -> i64 {
    let rank = |t: Timestamp| {
        let ns = now.duration_since(t).as_nanos();
        if ns > 0 {
            i64::from(127 - ns.leading_zeros() as i32)
        } else {
            -1
        }
    };
    rank(t1) - rank(t2)
}

/// Orders two times "newer first" (`afterOrZero`, or by log buckets when `now` is given);
/// `None` when they are the same, or in the same bucket with the same UID.
fn newer_first(
    t1: Option<Timestamp>,
    t2: Option<Timestamp>,
    uids: (&str, &str),
    now: Option<Timestamp>,
) -> Option<bool> {
    if t1 == t2 {
        return None;
    }
    match (t1, t2, now) {
        (Some(a), Some(b), Some(now)) => match logarithmic_rank_diff(a, b, now) {
            0 => (uids.0 != uids.1).then(|| uids.0 < uids.1),
            diff => Some(diff < 0),
        },
        // afterOrZero: a missing (zero) time sorts first; else the later time first.
        (None, _, _) => Some(true),
        (_, None, _) => Some(false),
        (Some(a), Some(b), None) => Some(a > b),
    }
}

/// `ActivePodsWithRanks.Less`: should pod `i` (with `rank_i` related pods on its node) be
/// deleted before pod `j`?
pub fn less(i: &Pod, rank_i: usize, j: &Pod, rank_j: usize, now: Option<Timestamp>) -> bool {
    let (node_i, node_j) = (node_name(i), node_name(j));
    if node_i != node_j && (node_i.is_empty() || node_j.is_empty()) {
        return node_i.is_empty();
    }
    if phase_ordinal(i) != phase_ordinal(j) {
        return phase_ordinal(i) < phase_ordinal(j);
    }
    let (ready_i, ready_j) = (is_pod_ready(i), is_pod_ready(j));
    if ready_i != ready_j {
        return !ready_i;
    }
    if deletion_cost(i) != deletion_cost(j) {
        return deletion_cost(i) < deletion_cost(j);
    }
    if rank_i != rank_j {
        return rank_i > rank_j;
    }
    let uids = (
        i.metadata.uid.as_deref().unwrap_or(""),
        j.metadata.uid.as_deref().unwrap_or(""),
    );
    if ready_i
        && ready_j
        && let Some(first) = newer_first(pod_ready_time(i), pod_ready_time(j), uids, now)
    {
        return first;
    }
    let (restarts_i, restarts_j) = (max_container_restarts(i), max_container_restarts(j));
    if restarts_i.0 != restarts_j.0 {
        return restarts_i.0 > restarts_j.0;
    }
    if restarts_i.1 != restarts_j.1 {
        return restarts_i.1 > restarts_j.1;
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    newer_first(created(i), created(j), uids, now).unwrap_or(false)
}

/// Sorts `pods` (with their ranks) so the first are the ones to delete. Stable: pods that
/// compare equal keep their order (Go's `sort.Sort` leaves that unspecified).
pub fn sort_active_pods_with_ranks(pods: &mut [(&Pod, usize)], now: Option<Timestamp>) {
    pods.sort_by(|(a, ra), (b, rb)| {
        if less(a, *ra, b, *rb, now) {
            Ordering::Less
        } else if less(b, *rb, a, *ra, now) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    });
}

/// `getPodsToDelete`: the `diff` pods of `filtered` to delete, ranking each by how many
/// active `related` pods (of this ReplicaSet and its siblings under the same Deployment) share
/// its node. Deleting all of them needs no ranking.
pub fn get_pods_to_delete<'a>(
    filtered: &[&'a Pod],
    related: &[&Pod],
    diff: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    if diff >= filtered.len() {
        return filtered.to_vec();
    }
    let mut pods_on_node: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in related.iter().filter(|p| is_pod_active(p)) {
        *pods_on_node.entry(node_name(pod)).or_default() += 1;
    }
    let mut ranked: Vec<(&Pod, usize)> = filtered
        .iter()
        .map(|p| (*p, pods_on_node.get(node_name(p)).copied().unwrap_or(0)))
        .collect();
    sort_active_pods_with_ranks(&mut ranked, Some(now));
    ranked.into_iter().take(diff).map(|(p, _)| p).collect()
}

#[cfg(test)]
#[path = "ranking_tests.rs"]
mod tests;
