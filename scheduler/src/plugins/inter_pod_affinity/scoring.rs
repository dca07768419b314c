//! InterPodAffinity's PreScore, Score and NormalizeScore: preferred pod affinity and
//! anti-affinity, both ways (`pkg/scheduler/framework/plugins/interpodaffinity/scoring.go`).
//!
//! PreScore sums weights per topology pair, looking at each existing pod P on a node N:
//!
//! ```text
//! incoming pod's preferred affinity term t (weight w) matches P      pair of N: +w
//! incoming pod's preferred anti-affinity term t matches P            pair of N: -w
//! P's required affinity term matches the incoming pod                pair of N: +1
//!                                                                    (hardPodAffinityWeight)
//! P's preferred affinity term matches the incoming pod               pair of N: +w
//! P's preferred anti-affinity term matches the incoming pod          pair of N: -w
//! score of a node = Σ of its label pairs' sums
//! normalised: 100 × (score - min) / (max - min), truncated; all 0 when max = min
//! ```
//!
//! Unless the incoming pod has preferred terms, only pods with required or preferred
//! affinity, or preferred anti-affinity, of their own can contribute (a required anti-affinity
//! term only filters), so only nodes holding such pods are visited: Kubernetes visits every
//! pod with affinity (`HavePodsWithAffinityList`), with the same sums.

use k8s_openapi::api::core::v1::Pod;

use crate::affinity_term::{Namespaces, WeightedAffinityTerm};
use crate::cache::Snapshot;
use crate::cycle_state::{AffinityOnCluster, CycleState, TopologyCounts};
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::MAX_NODE_SCORE;

/// `HardPodAffinityWeight`'s default (`pkg/scheduler/apis/config/v1/defaults.go`).
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// What PreScore found (`preScoreState.topologyScore`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreScoreState {
    /// Summed weights per topology pair.
    pub topology_score: TopologyCounts,
}

/// Adds `weight × multiplier` for each term matching `pod`, on `node`'s pair.
fn process_terms(
    scores: &mut TopologyCounts,
    terms: &[WeightedAffinityTerm],
    pod: &Pod,
    namespaces: &Namespaces,
    node: &NodeInfo,
    multiplier: i64,
) {
    for t in terms {
        if t.term.matches(pod, namespaces)
            && let Some(value) = node.labels().get(&t.term.topology_key)
        {
            let weight = i64::from(t.weight) * multiplier;
            scores.add(&t.term.topology_key, value, weight);
        }
    }
}

/// `processExistingPod`: the terms between the incoming `pod` and `existing` on `node`.
fn process_existing_pod(
    scores: &mut TopologyCounts,
    pod: &PodInfo,
    existing: &PodInfo,
    node: &NodeInfo,
    namespaces: &Namespaces,
) {
    let (own, theirs) = (pod.affinity_terms(), existing.affinity_terms());
    let (incoming, other) = (pod.pod.as_ref(), existing.pod.as_ref());
    process_terms(scores, &own.preferred_affinity, other, namespaces, node, 1);
    process_terms(
        scores,
        &own.preferred_anti_affinity,
        other,
        namespaces,
        node,
        -1,
    );
    for term in &theirs.required_affinity {
        if term.matches(incoming, namespaces)
            && let Some(value) = node.labels().get(&term.topology_key)
        {
            scores.add(&term.topology_key, value, HARD_POD_AFFINITY_WEIGHT);
        }
    }
    process_terms(
        scores,
        &theirs.preferred_affinity,
        incoming,
        namespaces,
        node,
        1,
    );
    process_terms(
        scores,
        &theirs.preferred_anti_affinity,
        incoming,
        namespaces,
        node,
        -1,
    );
}

/// PreScore over every node; `None` (Skip) when no pair got a score.
pub fn pre_score(
    pod: &PodInfo,
    snapshot: Snapshot<'_>,
    on_cluster: AffinityOnCluster,
) -> Option<PreScoreState> {
    let own = pod.affinity_terms();
    let has_constraints =
        !own.preferred_affinity.is_empty() || !own.preferred_anti_affinity.is_empty();
    if !has_constraints && !on_cluster.pods_scoring_others {
        return None;
    }
    let mut topology_score = TopologyCounts::default();
    for node in snapshot.nodes {
        // `HavePodsWithAffinityList` unless the pod has preferred terms; a node without
        // labels has no pair to credit.
        if (!has_constraints && node.pods_scoring_others == 0) || node.labels().is_empty() {
            continue;
        }
        for existing in node.pods.values() {
            if has_constraints || existing.scores_others() {
                let namespaces = snapshot.namespaces;
                process_existing_pod(&mut topology_score, pod, existing, node, namespaces);
            }
        }
    }
    (!topology_score.is_empty()).then_some(PreScoreState { topology_score })
}

/// The sum of the scores of the node's label pairs.
pub fn score(_pod: &PodInfo, node: &NodeInfo, state: &CycleState) -> i64 {
    let Some(s) = &state.inter_pod_affinity_score else {
        return 0;
    };
    s.topology_score.sum_over(node.labels())
}

/// `NormalizeScore`: min–max scaling to 0–100.
pub fn normalize(scores: &mut [i64], state: &CycleState) {
    if state.inter_pod_affinity_score.is_none() {
        return;
    }
    let min = scores.iter().copied().min().unwrap_or(0);
    let max = scores.iter().copied().max().unwrap_or(0);
    let diff = max - min;
    for score in scores.iter_mut() {
        *score = if diff > 0 {
            (MAX_NODE_SCORE as f64 * ((*score - min) as f64 / diff as f64)) as i64
        } else {
            0
        };
    }
}
