//! What one scheduling decision computes once, before it looks at nodes one by one: the
//! PreFilter and PreScore results of the plugins that need the whole cluster
//! (`pkg/scheduler/framework/cycle_state.go`; `RunPreFilterPlugins` and `RunPreScorePlugins`
//! of `pkg/scheduler/framework/runtime/framework.go`).
//!
//! ```text
//!   schedule_pod(pod, nodes)
//!     CycleState::pre_filter(pod, all nodes)        PodTopologySpread: matching pods per domain
//!       │                                           InterPodAffinity: pods matching the terms
//!       ▼                                                             per topology pair
//!       │                                           VolumeBinding: the pod's claims (or a
//!       │                                           rejection for every node)
//!     filters(pod, node, &state)   for each node    (a plugin whose state is None was skipped:
//!       ▼                                            it passes every node, as Kubernetes' Skip)
//!     state.pre_score(pod, all nodes, feasible)     the same for the soft constraints
//!       ▼
//!     scores(pod, node, &state), normalize(scores, &state)
//! ```
//!
//! Most pods have neither spread constraints nor inter-pod affinity, and most clusters no pod
//! with affinity: then every state is `None` and the decision costs one pass over the nodes'
//! two affinity counters ([`AffinityOnCluster`]) more than the plain filters.

use std::collections::{BTreeMap, HashMap};

use crate::cache::Snapshot;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{Status, inter_pod_affinity, pod_topology_spread, volume_binding};

/// Whether any node holds pods with inter-pod affinity: Kubernetes' snapshot keeps the lists
/// `HavePodsWithAffinityList` and `HavePodsWithRequiredAntiAffinityList`; miniplane takes
/// one pass over the nodes' counters per decision, so InterPodAffinity can skip at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AffinityOnCluster {
    /// Some node has a pod with `podAffinity` or `podAntiAffinity`.
    pub pods_with_affinity: bool,
    /// Some node has a pod with required anti-affinity.
    pub pods_with_required_anti_affinity: bool,
    /// Some node has a pod whose terms score other pods ([`PodInfo::scores_others`]).
    pub pods_scoring_others: bool,
}

impl AffinityOnCluster {
    /// One pass over the nodes' counters.
    pub fn of(nodes: &[NodeInfo]) -> Self {
        let mut on = AffinityOnCluster::default();
        for node in nodes {
            on.pods_with_affinity |= node.pods_with_affinity > 0;
            on.pods_with_required_anti_affinity |= node.pods_with_required_anti_affinity > 0;
            on.pods_scoring_others |= node.pods_scoring_others > 0;
        }
        on
    }
}

/// The per-decision state (Kubernetes' `CycleState`, typed: one field per plugin and point).
#[derive(Debug, Default)]
pub struct CycleState {
    /// Which nodes InterPodAffinity needs to visit at all.
    pub affinity_on_cluster: AffinityOnCluster,
    /// PodTopologySpread's PreFilter result; `None`: skipped (no `DoNotSchedule` constraint).
    pub pod_topology_spread: Option<pod_topology_spread::PreFilterState>,
    /// InterPodAffinity's PreFilter result; `None`: skipped (no required term anywhere that
    /// concerns the pod).
    pub inter_pod_affinity: Option<inter_pod_affinity::PreFilterState>,
    /// PodTopologySpread's PreScore result; `None`: skipped (no `ScheduleAnyway` constraint,
    /// and no default one).
    pub pod_topology_spread_score: Option<pod_topology_spread::PreScoreState>,
    /// InterPodAffinity's PreScore result; `None`: skipped (no preferred term concerns the pod).
    pub inter_pod_affinity_score: Option<inter_pod_affinity::PreScoreState>,
    /// VolumeBinding's PreFilter result: skipped (no claim), rejected, or the claims to check.
    pub volume_binding: volume_binding::PreFilterResult,
}

impl CycleState {
    /// Runs the PreFilter points over every node of the cluster.
    pub fn pre_filter(pod: &PodInfo, snapshot: Snapshot<'_>) -> Self {
        let affinity_on_cluster = AffinityOnCluster::of(snapshot.nodes);
        CycleState {
            affinity_on_cluster,
            pod_topology_spread: pod_topology_spread::pre_filter_with_groups(
                pod,
                snapshot.nodes,
                snapshot.groups,
            ),
            inter_pod_affinity: inter_pod_affinity::pre_filter(pod, snapshot, affinity_on_cluster),
            volume_binding: volume_binding::pre_filter(pod, snapshot.volumes),
            ..CycleState::default()
        }
    }

    /// The PreFilter plugin that rejected the pod for every node, if one did (only
    /// VolumeBinding's PreFilter can).
    pub fn pre_filter_rejection(&self) -> Option<&Status> {
        match &self.volume_binding {
            volume_binding::PreFilterResult::Rejected(status) => Some(status),
            _ => None,
        }
    }

    /// Runs the PreScore points, after [`CycleState::pre_filter`]: `snapshot` is the whole
    /// cluster, `feasible` the nodes that passed the filters (the ones to be scored).
    pub fn pre_score(&mut self, pod: &PodInfo, snapshot: Snapshot<'_>, feasible: &[&NodeInfo]) {
        self.pod_topology_spread_score =
            pod_topology_spread::pre_score(pod, snapshot.nodes, feasible);
        self.inter_pod_affinity_score =
            inter_pod_affinity::pre_score(pod, snapshot, self.affinity_on_cluster);
    }
}

/// Counts per topology pair (`topologyKey`, value), e.g. (`topology.kubernetes.io/zone`,
/// `zone-a`) → 2 (Kubernetes' `topologyToMatchedTermCount`). Looked up by borrowed strings,
/// so checking a node's labels allocates nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyCounts {
    by_key: HashMap<String, HashMap<String, i64>>,
    pairs: usize,
}

impl TopologyCounts {
    /// The count of one pair (0 when absent).
    pub fn get(&self, key: &str, value: &str) -> i64 {
        self.by_key
            .get(key)
            .and_then(|values| values.get(value))
            .copied()
            .unwrap_or(0)
    }

    /// Adds `n` to a pair, creating it at 0 first. A pair whose sum comes back to 0 stays, as
    /// in InterPodAffinity's `topologyScore` (its filter counts only grow within a decision).
    pub fn add(&mut self, key: &str, value: &str, n: i64) {
        if !self.by_key.contains_key(key) {
            self.by_key.insert(key.to_owned(), HashMap::new());
        }
        let Some(values) = self.by_key.get_mut(key) else {
            return;
        };
        match values.get_mut(value) {
            Some(count) => *count += n,
            None => {
                values.insert(value.to_owned(), n);
                self.pairs += 1;
            }
        }
    }

    /// How many pairs there are.
    pub fn len(&self) -> usize {
        self.pairs
    }

    /// Whether there is no pair.
    pub fn is_empty(&self) -> bool {
        self.pairs == 0
    }

    /// The sum of the counts of the pairs a node with `labels` is in.
    pub fn sum_over(&self, labels: &BTreeMap<String, String>) -> i64 {
        self.by_key
            .iter()
            .filter_map(|(key, values)| values.get(labels.get(key)?))
            .sum()
    }
}
