//! One scheduling decision: filter the nodes, score the feasible ones, pick the best
//! (`pkg/scheduler/schedule_one.go`: `schedulePod`, `findNodesThatFitPod`,
//! `numFeasibleNodesToFind`, `prioritizeNodes`, `selectHost`).
//!
//! ```text
//!   all nodes ──▶ CycleState::pre_filter (VolumeBinding, PodTopologySpread, InterPodAffinity;
//!     │            skipped when the pod has no claim, constraint or affinity that needs the
//!     │            cluster; VolumeBinding may reject the pod for every node: FitError with
//!     │            its message "0/N nodes are available: <PreFilter message>. ...")
//!   nodes (from next_start_node_index, round robin)
//!     │ filters, stop after num_feasible_nodes_to_find feasible ones
//!     ▼
//!   feasible ──none──▶ FitError "0/N nodes are available: ..."
//!     │ one  → chosen without scoring
//!     ▼ several
//!   CycleState::pre_score over all nodes and the feasible ones
//!   scores: each plugin raw → normalised 0–100 → × weight → summed per node
//!     ▼
//!   highest total wins; ties → reservoir sampling with the injected RNG
//! ```
//!
//! [`Algorithm`] holds the only state across decisions: where the next node scan starts
//! and the RNG. Everything else comes in as arguments, so a decision is reproducible from
//! the nodes, the pod and the seed. The [`ScheduleResult`] keeps every evaluated node's
//! verdict and scores ("why this node"), and [`ScheduleResult::summary`] is its log line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use apimachinery::ObjectKey;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cache::Snapshot;
use crate::cycle_state::CycleState;
use crate::fit_error::FitError;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{SCORES, Status, run_filters};

/// One node's normalised score from each plugin, in [`SCORES`] order.
pub type PluginScores = [i64; SCORES.len()];

/// `minFeasibleNodesToFind`.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// `minFeasibleNodesPercentageToFind`.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// How many feasible nodes to look for before scoring (adaptive `percentageOfNodesToScore`):
/// all of them below 100 nodes, 42% of 1,000, never under 5% or 100 nodes.
pub fn num_feasible_nodes_to_find(num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let percentage = 50usize
        .saturating_sub(num_all_nodes / 125)
        .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// The pod's `preemptionPolicy` is `Never`.
fn preemption_never(pod: &PodInfo) -> bool {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never")
}

/// One evaluated node: the filter verdict and, if it was scored, the plugin scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVerdict {
    /// The node's name.
    pub node: Arc<str>,
    /// `Ok(())` if it passed every filter, else the failing plugin and its reasons.
    pub filter: Result<(), Status>,
    /// Normalised scores (0–100, before weights), in [`SCORES`] order; `None` if not scored.
    pub scores: Option<PluginScores>,
    /// Σ score × weight.
    pub total: i64,
}

/// A decision and how it was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    /// The pod.
    pub pod: ObjectKey,
    /// The chosen node (`SuggestedHost`).
    pub suggested_host: String,
    /// Nodes the filters ran on (`EvaluatedNodes`).
    pub evaluated_nodes: usize,
    /// Nodes that passed (`FeasibleNodes`).
    pub feasible_nodes: usize,
    /// Every evaluated node, in scan order.
    pub nodes: Vec<NodeVerdict>,
}

impl ScheduleResult {
    /// A compact line for the log: the choice, the counts and the three best nodes with
    /// their plugin scores.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{} -> {} ({} evaluated, {} feasible)",
            self.pod, self.suggested_host, self.evaluated_nodes, self.feasible_nodes
        );
        for v in &self.best_three() {
            let _ = write!(line, "; {} {} [", v.node, v.total);
            for (i, (plugin, score)) in SCORES.iter().zip(v.scores.iter().flatten()).enumerate() {
                let sep = if i == 0 { "" } else { " " };
                let _ = write!(line, "{sep}{}={score}", plugin.name);
            }
            line.push(']');
        }
        line
    }

    /// The three best scored nodes, best first: highest total, ties by name. One pass over
    /// hundreds of verdicts, most of which only meet the third best.
    fn best_three(&self) -> Vec<&NodeVerdict> {
        let best_first =
            |a: &NodeVerdict, b: &NodeVerdict| b.total.cmp(&a.total).then(a.node.cmp(&b.node));
        let mut best: Vec<&NodeVerdict> = Vec::with_capacity(4);
        for v in self.nodes.iter().filter(|v| v.scores.is_some()) {
            if best.len() == 3 && best_first(v, best[2]).is_ge() {
                continue;
            }
            let at = best.partition_point(|b| best_first(b, v).is_lt());
            best.insert(at, v);
            best.truncate(3);
        }
        best
    }
}

/// Why a pod was not placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cluster has no node (`ErrNoNodesAvailable`).
    #[error("{}", crate::fit_error::NO_NODES_AVAILABLE)]
    NoNodesAvailable,
    /// No node passed the filters.
    #[error("{0}")]
    Fit(FitError),
}

/// The decision state carried from one pod to the next.
#[derive(Debug)]
pub struct Algorithm {
    /// Where the next scan of the node list starts (`nextStartNodeIndex`), so successive
    /// pods look at different nodes when not all are evaluated.
    next_start_node_index: usize,
    /// Breaks ties between equally scored nodes (`selectHost`); seeded for tests.
    rng: StdRng,
}

impl Algorithm {
    /// An algorithm whose tie-breaks follow `seed`.
    pub fn new(seed: u64) -> Self {
        Algorithm {
            next_start_node_index: 0,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Chooses a node for `pod` among the snapshot's nodes (`schedulePod`); a plain node list
    /// converts into a snapshot without namespaces.
    pub fn schedule_pod<'a>(
        &mut self,
        pod: &PodInfo,
        snapshot: impl Into<Snapshot<'a>>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let snapshot = snapshot.into();
        let nodes = snapshot.nodes;
        if nodes.is_empty() {
            return Err(ScheduleError::NoNodesAvailable);
        }
        let mut state = CycleState::pre_filter(pod, snapshot);
        if let Some(status) = state.pre_filter_rejection() {
            // Every node gets the PreFilter's status (`SetAbsentNodesStatus`).
            return Err(ScheduleError::Fit(FitError {
                num_all_nodes: nodes.len(),
                node_to_status: nodes
                    .iter()
                    .map(|n| (n.name.to_string(), status.clone()))
                    .collect(),
                preemption_never: preemption_never(pod),
                pre_filter: Some(status.clone()),
            }));
        }
        let to_find = num_feasible_nodes_to_find(nodes.len());
        let mut verdicts = Vec::with_capacity(to_find.min(nodes.len()));
        let mut feasible: Vec<usize> = Vec::new();
        let mut failed: BTreeMap<String, Status> = BTreeMap::new();
        for i in 0..nodes.len() {
            if feasible.len() >= to_find {
                break;
            }
            let index = (self.next_start_node_index + i) % nodes.len();
            let node = &nodes[index];
            let filter = run_filters(pod, node, &state);
            match &filter {
                Ok(()) => feasible.push(index),
                Err(status) => {
                    failed.insert(node.name.to_string(), status.clone());
                }
            }
            verdicts.push(NodeVerdict {
                node: node.name.clone(),
                filter,
                scores: None,
                total: 0,
            });
        }
        let evaluated = verdicts.len();
        self.next_start_node_index = (self.next_start_node_index + evaluated) % nodes.len();
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(FitError {
                num_all_nodes: nodes.len(),
                node_to_status: failed,
                preemption_never: preemption_never(pod),
                pre_filter: None,
            }));
        }
        let mut result = ScheduleResult {
            pod: pod.key.clone(),
            suggested_host: String::new(),
            evaluated_nodes: evaluated,
            feasible_nodes: feasible.len(),
            nodes: verdicts,
        };
        if let [only] = feasible.as_slice() {
            result.suggested_host = nodes[*only].name.to_string();
            return Ok(result);
        }
        let feasible_nodes: Vec<&NodeInfo> = feasible.iter().map(|&i| &nodes[i]).collect();
        state.pre_score(pod, snapshot, &feasible_nodes);
        let totals = Self::prioritize_nodes(pod, &feasible_nodes, &state, &mut result.nodes);
        result.suggested_host = nodes[self.select_host(nodes, &feasible, &totals)]
            .name
            .to_string();
        Ok(result)
    }

    /// Runs every score plugin over the feasible nodes, normalises, weights and sums
    /// (`prioritizeNodes`); fills the verdicts' scores and returns the totals. A plugin whose
    /// PreScore skipped scores 0 everywhere.
    fn prioritize_nodes(
        pod: &PodInfo,
        feasible: &[&NodeInfo],
        state: &CycleState,
        verdicts: &mut [NodeVerdict],
    ) -> Vec<i64> {
        let mut totals = vec![0; feasible.len()];
        let mut per_plugin = Vec::with_capacity(SCORES.len());
        for plugin in &SCORES {
            if (plugin.skipped)(state) {
                per_plugin.push(vec![0; feasible.len()]);
                continue;
            }
            let mut scores: Vec<i64> = feasible
                .iter()
                .map(|node| (plugin.score)(pod, node, state))
                .collect();
            (plugin.normalize)(&mut scores, state);
            for (total, score) in totals.iter_mut().zip(&scores) {
                *total += score * plugin.weight;
            }
            per_plugin.push(scores);
        }
        // Verdicts are in scan order; feasible ones appear in the same order as `feasible`.
        for (next, verdict) in verdicts.iter_mut().filter(|v| v.filter.is_ok()).enumerate() {
            let mut scores = [0; SCORES.len()];
            for (score, plugin) in scores.iter_mut().zip(&per_plugin) {
                *score = plugin[next];
            }
            verdict.scores = Some(scores);
            verdict.total = totals[next];
        }
        totals
    }

    /// The highest total; among equals each is equally likely (`selectHost`), and which one
    /// is picked depends on the seed and the nodes' names, not on the order the nodes were
    /// added in (kube-scheduler's reservoir sampling follows its node list, whose order is
    /// the order the informer delivered the nodes: a seeded run would not repeat itself).
    /// One draw per decision; each tied node gets a key mixed from it and its name's hash,
    /// the smallest key wins. Returns an index into `nodes`.
    fn select_host(&mut self, nodes: &[NodeInfo], feasible: &[usize], totals: &[i64]) -> usize {
        let draw: u64 = self.rng.random();
        let key = |i: usize| {
            let node = &nodes[feasible[i]];
            (mix(draw ^ node.name_hash), &node.name)
        };
        let mut selected = 0;
        let mut selected_key = key(0);
        for i in 1..feasible.len() {
            if totals[i] > totals[selected] {
                selected = i;
                selected_key = key(i);
            } else if totals[i] == totals[selected] {
                let k = key(i);
                if k < selected_key {
                    selected = i;
                    selected_key = k;
                }
            }
        }
        feasible[selected]
    }
}

/// SplitMix64's finalizer: spreads a 64-bit value over all bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
#[path = "schedule_one_tests.rs"]
mod tests;
