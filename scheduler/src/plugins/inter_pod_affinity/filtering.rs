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
//! With the cache's pod groups (`crate::pod_groups`) the counts are taken per group rather
//! than per pod; without them (a snapshot that is not the cache's) every pod is walked.

use k8s_openapi::api::core::v1::Pod;

use crate::affinity_term::{AffinityTerm, Namespaces};
use crate::cache::{Groups, Snapshot};
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
    let Snapshot {
        nodes, namespaces, ..
    } = snapshot;
    let terms = pod.affinity_terms();
    let (affinity, anti_affinity) = (&terms.required_affinity, &terms.required_anti_affinity);
    if affinity.is_empty()
        && anti_affinity.is_empty()
        && !on_cluster.pods_with_required_anti_affinity
    {
        return None;
    }
    let mut s = PreFilterState::default();
    match snapshot.groups {
        Some(groups) => existing_anti_affinity_counts_by_group(&mut s, pod, groups, namespaces),
        None => existing_anti_affinity_counts(&mut s, pod, nodes, namespaces),
    }
    if affinity.is_empty() && anti_affinity.is_empty() {
        return (!s.existing_anti_affinity_counts.is_empty()).then_some(s);
    }
    s.matches_own_affinity = pod_matches_all_terms(affinity, &pod.pod, namespaces);
    match snapshot.groups {
        Some(groups) => incoming_counts_by_group(&mut s, pod, groups, namespaces),
        None => incoming_counts(&mut s, pod, nodes, namespaces),
    }
    Some(s)
}

/// `getExistingAntiAffinityCounts`, over `HavePodsWithRequiredAntiAffinityList`: every
/// existing pod's required anti-affinity term that matches the incoming pod, by its node's pair.
fn existing_anti_affinity_counts(
    s: &mut PreFilterState,
    pod: &PodInfo,
    nodes: &[NodeInfo],
    namespaces: &Namespaces,
) {
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
}

/// [`existing_anti_affinity_counts`] from the cache's groups: each distinct term matched once,
/// its pods counted per node.
fn existing_anti_affinity_counts_by_group(
    s: &mut PreFilterState,
    pod: &PodInfo,
    groups: Groups<'_>,
    namespaces: &Namespaces,
) {
    for (term, on_nodes) in groups.pods.anti_affinity_terms() {
        if !term.matches(&pod.pod, namespaces) {
            continue;
        }
        for (name, &n) in on_nodes {
            if let Some(node) = groups.node(name) {
                count_on(
                    &mut s.existing_anti_affinity_counts,
                    node,
                    term,
                    i64::from(n),
                );
            }
        }
    }
}

/// `getIncomingAffinityAntiAffinityCounts`, over every node: the existing pods matching all
/// the incoming pod's required affinity terms, and those matching each anti-affinity term.
fn incoming_counts(
    s: &mut PreFilterState,
    pod: &PodInfo,
    nodes: &[NodeInfo],
    namespaces: &Namespaces,
) {
    let terms = pod.affinity_terms();
    let (affinity, anti_affinity) = (&terms.required_affinity, &terms.required_anti_affinity);
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
}

/// [`incoming_counts`] from the cache's groups: each group of pods with the same namespace
/// and labels matched once, its pods counted per node.
fn incoming_counts_by_group(
    s: &mut PreFilterState,
    pod: &PodInfo,
    groups: Groups<'_>,
    namespaces: &Namespaces,
) {
    let terms = pod.affinity_terms();
    let (affinity, anti_affinity) = (&terms.required_affinity, &terms.required_anti_affinity);
    let mut anti: Vec<&AffinityTerm> = Vec::new();
    for (namespace, labels, on_nodes) in groups.pods.label_groups() {
        let all = !affinity.is_empty()
            && affinity
                .iter()
                .all(|t| t.matches_labels(namespace, Some(labels), namespaces));
        anti.clear();
        anti.extend(
            anti_affinity
                .iter()
                .filter(|t| t.matches_labels(namespace, Some(labels), namespaces)),
        );
        if !all && anti.is_empty() {
            continue;
        }
        for (name, count) in on_nodes {
            let Some(node) = groups.node(name) else {
                continue;
            };
            let n = i64::from(count.all);
            if all {
                for term in affinity {
                    count_on(&mut s.affinity_counts, node, term, n);
                }
            }
            for term in &anti {
                count_on(&mut s.anti_affinity_counts, node, term, n);
            }
        }
    }
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
