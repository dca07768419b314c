//! PodTopologySpread's PreFilter and Filter: the `DoNotSchedule` constraints
//! (`pkg/scheduler/framework/plugins/podtopologyspread/filtering.go`).
//!
//! PreFilter counts, for each constraint, the matching pods of every domain over the whole
//! cluster (nodes that lack one of the constraints' keys, or that a node inclusion policy
//! excludes, are no domain). Filter then checks one node:
//!
//! ```text
//! node lacks the topology key             → "... (missing required label)", unresolvable
//! matching in its domain + (pod matches ? 1 : 0) - global minimum > maxSkew
//!                                         → "node(s) didn't match pod topology spread
//!                                            constraints", unschedulable
//! global minimum: the smallest domain's count; 0 while there are fewer domains than minDomains
//! ```

use std::collections::HashMap;

use super::{Action, Constraint, NAME, SpreadSelector, constraints, node_has_all_keys};
use crate::cache::Groups;
use crate::cycle_state::CycleState;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{Code, Status};

/// `ErrReasonConstraintsNotMatch`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// `ErrReasonNodeLabelNotMatch`.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// What PreFilter found (`preFilterState`).
#[derive(Debug, Clone, PartialEq)]
pub struct PreFilterState {
    /// The pod's `DoNotSchedule` constraints.
    pub constraints: Vec<Constraint>,
    /// Per constraint: matching pods per domain (`TpValueToMatchNum`); a domain with no
    /// matching pod is present at 0.
    pub match_num: Vec<HashMap<String, i64>>,
}

impl PreFilterState {
    /// `minMatchNum`: the global minimum of constraint `i`.
    pub fn min_match_num(&self, i: usize) -> i64 {
        let domains = &self.match_num[i];
        if (domains.len() as i64) < i64::from(self.constraints[i].min_domains) {
            return 0;
        }
        // No domain at all (and minDomains 0): Kubernetes' critical paths start at MaxInt32.
        domains
            .values()
            .copied()
            .min()
            .unwrap_or(i64::from(i32::MAX))
    }
}

/// `calPreFilterState`; `None` (Kubernetes' Skip) when the pod has no `DoNotSchedule`
/// constraint.
pub fn pre_filter(pod: &PodInfo, nodes: &[NodeInfo]) -> Option<PreFilterState> {
    pre_filter_with_groups(pod, nodes, None)
}

/// [`pre_filter`], counting a label selector's matches from the cache's pod groups when
/// `groups` (the groups of `nodes`) are given: each group of pods with the same namespace and
/// labels is matched once instead of each pod.
pub fn pre_filter_with_groups(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    groups: Option<Groups<'_>>,
) -> Option<PreFilterState> {
    let constraints = constraints(pod, Action::DoNotSchedule);
    if constraints.is_empty() {
        return None;
    }
    let namespace = pod.key.namespace.as_deref().unwrap_or_default();
    // Per constraint with a label selector: matching pods per node name, from the groups.
    let by_node: Vec<Option<HashMap<&str, i64>>> = constraints
        .iter()
        .map(|c| match (&c.selector, groups) {
            (SpreadSelector::Labels(selector), Some(groups)) if !selector.is_everything() => {
                let mut counts: HashMap<&str, i64> = HashMap::new();
                for (ns, labels, on_nodes) in groups.pods.label_groups() {
                    if ns != namespace || !selector.matches(labels) {
                        continue;
                    }
                    for (name, count) in on_nodes {
                        *counts.entry(&**name).or_insert(0) += i64::from(count.live);
                    }
                }
                Some(counts)
            }
            _ => None,
        })
        .collect();
    let mut match_num: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
    for node in nodes {
        if !node_has_all_keys(node, &constraints) {
            continue;
        }
        let labels = node.labels();
        for ((c, counts), grouped) in constraints.iter().zip(match_num.iter_mut()).zip(&by_node) {
            if !c.includes_node(pod, node) {
                continue;
            }
            let n = match grouped {
                Some(grouped) => grouped.get(&*node.name).copied().unwrap_or(0),
                None => c.count_matching(node, namespace),
            };
            let value = labels
                .get(&c.topology_key)
                .map(String::as_str)
                .unwrap_or_default();
            match counts.get_mut(value) {
                Some(count) => *count += n,
                None => {
                    counts.insert(value.to_owned(), n);
                }
            }
        }
    }
    Some(PreFilterState {
        constraints,
        match_num,
    })
}

/// Checks every `DoNotSchedule` constraint on `node`; passes when PreFilter was skipped.
pub fn filter(pod: &PodInfo, node: &NodeInfo, state: &CycleState) -> Result<(), Status> {
    let Some(s) = &state.pod_topology_spread else {
        return Ok(());
    };
    let labels = node.labels();
    for (i, c) in s.constraints.iter().enumerate() {
        let Some(value) = labels.get(&c.topology_key) else {
            return Err(Status::new(
                NAME,
                Code::UnschedulableAndUnresolvable,
                ERR_REASON_NODE_LABEL_NOT_MATCH,
            ));
        };
        let self_match = i64::from(c.matches_pod(pod));
        let match_num = s.match_num[i].get(value).copied().unwrap_or(0);
        let skew = match_num + self_match - s.min_match_num(i);
        if skew > i64::from(c.max_skew) {
            return Err(Status::new(
                NAME,
                Code::Unschedulable,
                ERR_REASON_CONSTRAINTS_NOT_MATCH,
            ));
        }
    }
    Ok(())
}
