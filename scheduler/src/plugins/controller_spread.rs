//! ControllerSpread: spreads the pods of one controller (a ReplicaSet, a StatefulSet...)
//! over nodes by preferring the node with the fewest of them.
//!
//! This stands in for Kubernetes' default spreading, `PodTopologySpread` with the system
//! default constraints (`kubernetes.io/hostname` maxSkew 3 and `topology.kubernetes.io/zone`
//! maxSkew 5, both `ScheduleAnyway`; `pkg/scheduler/framework/plugins/podtopologyspread/`).
//! It is scored like the older `SelectorSpread` plugin
//! (`pkg/scheduler/framework/plugins/selectorspread/selector_spread.go`), per node only:
//! unlike Kubernetes, pods are matched by their controlling owner's UID, not by the
//! selectors of the Services and controllers that select them, and zones are ignored.
//!
//! ```text
//! replicas of rs-1 per node:  n1: 2   n2: 1   n3: 0
//! score = 100 * (max - count) / max:  n1: 0   n2: 50   n3: 100
//! ```

use super::MAX_NODE_SCORE;
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name (miniplane's own: there is no Kubernetes plugin of this name).
pub const NAME: &str = "ControllerSpread";

/// How many pods of the pod's controller the node already holds (0 for a pod without one).
pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    pod.controller
        .map_or(0, |id| i64::from(node.pods_by_controller.get(id)))
}

/// Fewer sibling pods is better: `100 * (max - count) / max`, all 100 when no node has any.
pub fn normalize(scores: &mut [i64]) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for score in scores.iter_mut() {
        *score = if max == 0 {
            MAX_NODE_SCORE
        } else {
            MAX_NODE_SCORE * (max - *score) / max
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned(name: &str, uid: &str) -> k8s_openapi::api::core::v1::Pod {
        let mut p = pod(name, "", "");
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        p
    }

    #[test]
    fn siblings_are_counted_and_normalised() {
        let nodes = [
            node_info(
                node("n1", "1", "1Gi", "10"),
                vec![owned("a", "rs-1"), owned("b", "rs-1")],
            ),
            node_info(
                node("n2", "1", "1Gi", "10"),
                vec![owned("c", "rs-1"), owned("d", "rs-2")],
            ),
            node_info(node("n3", "1", "1Gi", "10"), vec![]),
        ];
        let p = info(owned("new", "rs-1"));
        let mut scores: Vec<i64> = nodes.iter().map(|n| score(&p, n)).collect();
        assert_eq!(scores, vec![2, 1, 0]);
        normalize(&mut scores);
        assert_eq!(scores, vec![0, 50, 100]);
        let mut none = vec![0, 0];
        normalize(&mut none);
        assert_eq!(none, vec![100, 100]);
    }
}
