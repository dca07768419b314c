//! InterPodAffinity's PreFilter and Filter: required pod affinity and anti-affinity
//! (`pkg/scheduler/framework/plugins/interpodaffinity/filtering.go`).
//!
//! PreFilter counts, per topology pair (`topologyKey`, value):
//!
//! ```text
//! existing_anti_affinity_counts  existing pods whose required anti-affinity term matches the
//!                                incoming pod, by the pair of the node they run on
//! affinity_counts                existing pods that match ALL the incoming pod's required
//!                                affinity terms, one count per term's pair
//! anti_affinity_counts           existing pods matching each required anti-affinity term
//! ```
//!
//! Filter then reads one node's labels against those counts; the first failing check decides.

use k8s_openapi::api::core::v1::Pod;

use crate::affinity_term::{AffinityTerm, Namespaces};
use crate::cache::Snapshot;
use crate::cycle_state::{AffinityOnCluster, CycleState, TopologyCounts};
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{Code, Status};

use super::NAME;

/// `ErrReasonAffinityRulesNotMatch`.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// `ErrReasonAntiAffinityRulesNotMatch`.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";
/// `ErrReasonExistingAntiAffinityRulesNotMatch`.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// What PreFilter found (`preFilterState`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterState {
    /// Existing pods whose required anti-affinity matches the incoming pod, per pair.
    pub existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods matching all the incoming pod's required affinity terms, per pair.
    pub affinity_counts: TopologyCounts,
    /// Existing pods matching the incoming pod's required anti-affinity terms, per pair.
    pub anti_affinity_counts: TopologyCounts,
    /// The incoming pod matches all its own required affinity terms (for the first pod of a
    /// group).
    pub matches_own_affinity: bool,
}

/// `podMatchesAllAffinityTerms`: false without terms.
pub fn pod_matches_all_terms(terms: &[AffinityTerm], pod: &Pod, namespaces: &Namespaces) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, namespaces))
}

/// Adds `n` to the pair of `term`'s topology key on `node`, if the node has that label.
fn count_on(counts: &mut TopologyCounts, node: &NodeInfo, term: &AffinityTerm, n: i64) {
    if let Some(value) = node.labels().get(&term.topology_key) {
        counts.add(&term.topology_key, value, n);
    }
}

/// PreFilter; `None` (Skip) when the pod has no required term and no existing pod's
/// required anti-affinity matches it.
pub fn pre_filter(
    pod: &PodInfo,
    snapshot: Snapshot<'_>,
    on_cluster: AffinityOnCluster,
) -> Option<PreFilterState> {
    let Snapshot { nodes, namespaces } = snapshot;
    let terms = pod.affinity_terms();
    let (affinity, anti_affinity) = (&terms.required_affinity, &terms.required_anti_affinity);
    if affinity.is_empty()
        && anti_affinity.is_empty()
        && !on_cluster.pods_with_required_anti_affinity
    {
        return None;
    }
    let mut s = PreFilterState::default();
    // `getExistingAntiAffinityCounts`, over `HavePodsWithRequiredAntiAffinityList`.
    for node in nodes
        .iter()
        .filter(|n| n.pods_with_required_anti_affinity > 0)
    {
        for existing in node
            .pods
            .values()
            .filter(|p| p.has_required_anti_affinity())
        {
            for term in &existing.affinity_terms().required_anti_affinity {
                if term.matches(&pod.pod, namespaces) {
                    count_on(&mut s.existing_anti_affinity_counts, node, term, 1);
                }
            }
        }
    }
    if affinity.is_empty() && anti_affinity.is_empty() {
        return (!s.existing_anti_affinity_counts.is_empty()).then_some(s);
    }
    s.matches_own_affinity = pod_matches_all_terms(affinity, &pod.pod, namespaces);
    // `getIncomingAffinityAntiAffinityCounts`, over every node.
    for node in nodes {
        for existing in node.pods.values() {
            if pod_matches_all_terms(affinity, &existing.pod, namespaces) {
                for term in affinity {
                    count_on(&mut s.affinity_counts, node, term, 1);
                }
            }
            for term in anti_affinity {
                if term.matches(&existing.pod, namespaces) {
                    count_on(&mut s.anti_affinity_counts, node, term, 1);
                }
            }
        }
    }
    Some(s)
}

/// `satisfyPodAffinity`: every term's pair on this node has a matching pod; or no pod in the
/// cluster matches and the pod matches its own terms (the first pod of a group), provided
/// the node has every topology key.
fn satisfies_pod_affinity(pod: &PodInfo, s: &PreFilterState, node: &NodeInfo) -> bool {
    let terms = &pod.affinity_terms().required_affinity;
    let labels = node.labels();
    let mut pods_exist = true;
    for term in terms {
        let Some(value) = labels.get(&term.topology_key) else {
            return false;
        };
        if s.affinity_counts.get(&term.topology_key, value) <= 0 {
            pods_exist = false;
        }
    }
    pods_exist || (s.affinity_counts.is_empty() && s.matches_own_affinity)
}

/// `satisfyPodAntiAffinity`: no term's pair on this node has a matching pod.
fn satisfies_pod_anti_affinity(pod: &PodInfo, s: &PreFilterState, node: &NodeInfo) -> bool {
    if s.anti_affinity_counts.is_empty() {
        return true;
    }
    let labels = node.labels();
    !pod.affinity_terms()
        .required_anti_affinity
        .iter()
        .any(|term| {
            labels
                .get(&term.topology_key)
                .is_some_and(|value| s.anti_affinity_counts.get(&term.topology_key, value) > 0)
        })
}

/// `satisfyExistingPodsAntiAffinity`: none of the node's label pairs holds an existing pod
/// whose anti-affinity rejects the incoming one.
fn satisfies_existing_pods_anti_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    s.existing_anti_affinity_counts.is_empty()
        || !node
            .labels()
            .iter()
            .any(|(k, v)| s.existing_anti_affinity_counts.get(k, v) > 0)
}

/// Filter; passes when PreFilter was skipped. Affinity failures are unresolvable, anti-affinity
/// ones not (preemption could evict the pods in the way).
pub fn filter(pod: &PodInfo, node: &NodeInfo, state: &CycleState) -> Result<(), Status> {
    let Some(s) = &state.inter_pod_affinity else {
        return Ok(());
    };
    if !satisfies_pod_affinity(pod, s, node) {
        return Err(Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_AFFINITY_RULES_NOT_MATCH,
        ));
    }
    if !satisfies_pod_anti_affinity(pod, s, node) {
        return Err(Status::new(
            NAME,
            Code::Unschedulable,
            ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
        ));
    }
    if !satisfies_existing_pods_anti_affinity(s, node) {
        return Err(Status::new(
            NAME,
            Code::Unschedulable,
            ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
        ));
    }
    Ok(())
}
