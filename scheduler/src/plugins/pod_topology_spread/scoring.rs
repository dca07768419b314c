//! PodTopologySpread's PreScore, Score and NormalizeScore: the `ScheduleAnyway` constraints,
//! or the system defaults (`pkg/scheduler/framework/plugins/podtopologyspread/scoring.go`).
//!
//! ```text
//! raw score of a node = Σ over constraints whose key the node has:
//!     matching pods in its domain × ln(domains + 2) + (maxSkew - 1)        rounded
//!   (domains: the constraint's values among the feasible nodes; kubernetes.io/hostname:
//!    one per feasible node, counted on the node itself; other keys: summed over every node
//!    of the cluster)
//! normalised: fewer is better, 100 × (max + min - score) / max; all 100 when max is 0;
//!   a node without every key of the pod's own constraints scores 0
//! ```
//!
//! The pod's own constraints require every topology key on a node; the system defaults do
//! not, so nodes without a zone label still get hostname spreading.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{
    Action, Constraint, LABEL_HOSTNAME, SpreadSelector, constraints, has_own_constraints,
    node_has_all_keys,
};
use crate::cycle_state::CycleState;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::MAX_NODE_SCORE;

/// `invalidScore`: the raw score of an ignored node, 0 after normalisation.
pub const INVALID_SCORE: i64 = -1;

/// What PreScore found (`preScoreState`).
#[derive(Debug, Clone, PartialEq)]
pub struct PreScoreState {
    /// The `ScheduleAnyway` constraints (or the defaults).
    pub constraints: Vec<Constraint>,
    /// Feasible nodes lacking a topology key of the pod's own constraints (`IgnoredNodes`).
    pub ignored_nodes: HashSet<Arc<str>>,
    /// Per constraint: matching pods per domain of the feasible nodes, summed over the
    /// cluster (`TopologyValueToPodCounts`; empty for a hostname constraint: counted per node
    /// at Score).
    pub value_counts: Vec<HashMap<String, i64>>,
    /// `ln(domains + 2)` per constraint (`TopologyNormalizingWeight`).
    pub normalizing_weight: Vec<f64>,
}

/// `topologyNormalizingWeight`.
fn topology_normalizing_weight(size: usize) -> f64 {
    (size as f64 + 2.0).ln()
}

/// `initPreScoreState` and `PreScore`; `None` (Skip) without constraints or nodes.
pub fn pre_score(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    feasible: &[&NodeInfo],
) -> Option<PreScoreState> {
    if feasible.is_empty() || nodes.is_empty() {
        return None;
    }
    let constraints = constraints(pod, Action::ScheduleAnyway);
    if constraints.is_empty() {
        return None;
    }
    // Only the pod's own constraints require every key (the defaults are System-defaulted).
    let require_all = has_own_constraints(pod);
    let mut ignored_nodes = HashSet::new();
    let mut value_counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
    for node in feasible {
        if require_all && !node_has_all_keys(node, &constraints) {
            ignored_nodes.insert(node.name.clone());
            continue;
        }
        let labels = node.labels();
        for (c, counts) in constraints.iter().zip(value_counts.iter_mut()) {
            if c.topology_key == LABEL_HOSTNAME {
                continue;
            }
            let value = labels.get(&c.topology_key).map_or("", String::as_str);
            if !counts.contains_key(value) {
                counts.insert(value.to_owned(), 0);
            }
        }
    }
    let normalizing_weight = constraints
        .iter()
        .zip(&value_counts)
        .map(|(c, counts)| {
            let size = if c.topology_key == LABEL_HOSTNAME {
                feasible.len() - ignored_nodes.len()
            } else {
                counts.len()
            };
            topology_normalizing_weight(size)
        })
        .collect();
    let namespace = pod.key.namespace.as_deref().unwrap_or_default();
    if value_counts.iter().any(|counts| !counts.is_empty()) {
        for node in nodes {
            if require_all && !node_has_all_keys(node, &constraints) {
                continue;
            }
            let labels = node.labels();
            for (c, counts) in constraints.iter().zip(value_counts.iter_mut()) {
                // Hostname pairs are counted at Score. The default constraints' count is one
                // lookup: taken first, a node without matching pods costs nothing more.
                if c.topology_key == LABEL_HOSTNAME
                    || (matches!(c.selector, SpreadSelector::Controller(_))
                        && c.count_matching(node, namespace) == 0)
                {
                    continue;
                }
                let value = labels.get(&c.topology_key).map_or("", String::as_str);
                let Some(total) = counts.get_mut(value) else {
                    continue;
                };
                if c.includes_node(pod, node) {
                    *total += c.count_matching(node, namespace);
                }
            }
        }
    }
    Some(PreScoreState {
        constraints,
        ignored_nodes,
        value_counts,
        normalizing_weight,
    })
}

/// `scoreForCount`.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

/// The raw score of one feasible node ([`INVALID_SCORE`] for an ignored one).
pub fn score(pod: &PodInfo, node: &NodeInfo, state: &CycleState) -> i64 {
    let Some(s) = &state.pod_topology_spread_score else {
        return 0;
    };
    if !s.ignored_nodes.is_empty() && s.ignored_nodes.contains(&node.name) {
        return INVALID_SCORE;
    }
    let namespace = pod.key.namespace.as_deref().unwrap_or_default();
    let labels = node.labels();
    let mut total = 0.0;
    for ((c, weight), counts) in s
        .constraints
        .iter()
        .zip(&s.normalizing_weight)
        .zip(&s.value_counts)
    {
        let Some(value) = labels.get(&c.topology_key) else {
            continue;
        };
        let count = if c.topology_key == LABEL_HOSTNAME {
            c.count_matching(node, namespace)
        } else {
            counts.get(value).copied().unwrap_or(0)
        };
        total += score_for_count(count, c.max_skew, *weight);
    }
    total.round() as i64
}

/// `NormalizeScore`: fewer matching pods is better; ignored nodes get 0.
pub fn normalize(scores: &mut [i64], state: &CycleState) {
    if state.pod_topology_spread_score.is_none() {
        return;
    }
    let valid = scores.iter().copied().filter(|&s| s != INVALID_SCORE);
    let min = valid.clone().min().unwrap_or(i64::MAX);
    let max = valid.max().unwrap_or(0);
    for score in scores.iter_mut() {
        *score = if *score == INVALID_SCORE {
            0
        } else if max == 0 {
            MAX_NODE_SCORE
        } else {
            MAX_NODE_SCORE * (max + min - *score) / max
        };
    }
}
