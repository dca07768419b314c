//! NodeResourcesBalancedAllocation: prefers nodes whose cpu and memory would be used in
//! equal fractions after placing the pod
//! (`pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`).
//!
//! ```text
//! fractions: cpu 0.5, memory 0.25  →  std = |0.5 - 0.25| / 2 = 0.125  →  score (1 - 0.125) * 100 = 87
//! ```
//! Unlike LeastAllocated it counts actual requests (a pod without requests adds nothing).

use super::MAX_NODE_SCORE;
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// `balancedResourceScorer` over cpu and memory.
pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let pairs = [
        (
            node.requested.milli_cpu + pod.requests.milli_cpu,
            node.allocatable.milli_cpu,
        ),
        (
            node.requested.memory + pod.requests.memory,
            node.allocatable.memory,
        ),
    ];
    // Computed per feasible node of every pod: no allocation.
    let fraction = |(requested, capacity): (i64, i64)| {
        (capacity != 0).then(|| (requested as f64 / capacity as f64).min(1.0))
    };
    let std = match (fraction(pairs[0]), fraction(pairs[1])) {
        (Some(a), Some(b)) => ((a - b) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};

    #[test]
    fn balanced_nodes_score_higher() {
        let n = node_info(node("n1", "4", "8Gi", "110"), vec![pod("a", "1", "")]);
        // cpu (1000+1000)/4000 = 0.5, memory 2Gi/8Gi = 0.25 → 87.
        assert_eq!(score(&info(pod("p", "1", "2Gi")), &n), 87);
        // cpu 0.5, memory 0.5 → 100.
        assert_eq!(score(&info(pod("p", "1", "4Gi")), &n), 100);
        // Over-full fractions are capped at 1: cpu 1.0, memory 0 → 50.
        assert_eq!(score(&info(pod("p", "8", "")), &n), 50);
        // A resource the node does not report leaves one fraction: nothing to balance, 100.
        let no_memory = node_info(node("n2", "4", "0", "110"), vec![]);
        assert_eq!(score(&info(pod("p", "3", "1Gi")), &no_memory), 100);
    }
}
