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
//!
//! Unlike Kubernetes, the order is a total order, as Rust's sort requires (it panics on a
//! comparator that is not one; Go's `sort.Sort` silently returns some permutation). Go's
//! `Less` is not transitive: two ready pods whose ready times fall in the same bucket are
//! ordered by UID when the times differ, but go on to rules 7 and 8 when the times are equal,
//! so with three pods `a < b`, `b < c` and `c < a` can all hold. Here each pod gets a
//! [`DeletionRank`] key, one field per rule, and keys compare field by field:
//!
//! ```text
//!   (assigned, phase, ready, cost, Reverse(crowding),
//!    ready for: Zero < Bucket(log2 age) | Exact(later first),
//!    Reverse(restarts), created: likewise, uid)
//! ```
//!
//! Same-bucket times count as equal for rule 6 *and* 8, so rule 7 (restarts) decides between
//! ready pods of one bucket, and the UID only breaks the ties that remain. The answer differs
//! from Go's `Less` for one kind of pair only: two ready pods of one bucket, ready at
//! different times, with different restarts or creation buckets (Go takes the lower UID,
//! this rules 7 and 8). Pods ready at the same second, the common case for the pods of one
//! rollout, are ordered as Go orders them.

use std::cmp::Reverse;
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

/// How long ago something happened, in the order "newer first": a missing (zero) time first
/// (`afterOrZero`), then by power-of-two age bucket when `now` is given
/// (`logarithmicRankDiff`), else by the exact time, later first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Recency {
    Zero,
    Bucket(i64),
    Exact(Reverse<Timestamp>),
}

impl Recency {
    fn of(t: Option<Timestamp>, now: Option<Timestamp>) -> Recency {
        match (t, now) {
            (None, _) => Recency::Zero,
            (Some(t), Some(now)) => Recency::Bucket(log2_age(t, now)),
            (Some(t), None) => Recency::Exact(Reverse(t)),
        }
    }
}

/// ⌊log2(age in ns)⌋ of `t` at `now` (an age ≤ 0 ranks -1): one side of `logarithmicRankDiff`.
fn log2_age(t: Timestamp, now: Timestamp) -> i64 {
    let ns = now.duration_since(t).as_nanos();
    if ns > 0 {
        i64::from(127 - ns.leading_zeros() as i32)
    } else {
        -1
    }
}

/// A pod's place in the deletion order, compared field by field (derived `Ord`): the smaller
/// goes first. One field per rule of the module's table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeletionRank<'a> {
    assigned: bool,
    phase: u8,
    ready: bool,
    cost: i32,
    crowding: Reverse<usize>,
    /// Only for ready pods (rule 6 compares two ready pods); `None` for the others.
    ready_for: Option<Recency>,
    /// Regular containers' restarts, then sidecars': more first.
    restarts: Reverse<(i32, i32)>,
    created: Recency,
    /// The last tie-break, so the order is total: two distinct pods never compare equal.
    uid: &'a str,
}

/// The [`DeletionRank`] of `pod`, with `crowding` related pods on its node.
pub fn deletion_rank(pod: &Pod, crowding: usize, now: Option<Timestamp>) -> DeletionRank<'_> {
    let ready = is_pod_ready(pod);
    DeletionRank {
        assigned: !node_name(pod).is_empty(),
        phase: phase_ordinal(pod),
        ready,
        cost: deletion_cost(pod),
        crowding: Reverse(crowding),
        ready_for: ready.then(|| Recency::of(pod_ready_time(pod), now)),
        restarts: Reverse(max_container_restarts(pod)),
        created: Recency::of(pod.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
        uid: pod.metadata.uid.as_deref().unwrap_or(""),
    }
}

/// `ActivePodsWithRanks.Less`: should pod `i` (with `rank_i` related pods on its node) be
/// deleted before pod `j`?
pub fn less(i: &Pod, rank_i: usize, j: &Pod, rank_j: usize, now: Option<Timestamp>) -> bool {
    deletion_rank(i, rank_i, now) < deletion_rank(j, rank_j, now)
}

/// Sorts `pods` (with their ranks) so the first are the ones to delete.
pub fn sort_active_pods_with_ranks(pods: &mut [(&Pod, usize)], now: Option<Timestamp>) {
    pods.sort_by_cached_key(|&(pod, rank)| deletion_rank(pod, rank, now));
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
