//! NodeResourcesFit: the pod's requests must fit in what the node has left, and, as a
//! score, LeastAllocated prefers the emptiest node
//! (`pkg/scheduler/framework/plugins/noderesources/fit.go`, `least_allocated.go`).
//!
//! ```text
//! node allocatable cpu 2000m   pods on it request 1500m   pod requests 600m
//!   600 > 2000 - 1500  →  "Insufficient cpu"
//! LeastAllocated (cpu and memory, weight 1 each, non-zero requests incl. this pod):
//!   score = Σ ((allocatable - requested) * 100 / allocatable) / 2
//! ```

use super::{Code, MAX_NODE_SCORE, Status};
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "NodeResourcesFit";

/// Every resource the pod lacks on the node, in Kubernetes' order (pods, cpu, memory).
pub fn insufficient_resources(pod: &PodInfo, node: &NodeInfo) -> Vec<&'static str> {
    let mut reasons = Vec::new();
    let (want, have, used) = (pod.requests, node.allocatable, node.requested);
    if node.pods.len() as i64 + 1 > have.pods {
        reasons.push("Too many pods");
    }
    if want.milli_cpu > 0 && want.milli_cpu > have.milli_cpu - used.milli_cpu {
        reasons.push("Insufficient cpu");
    }
    if want.memory > 0 && want.memory > have.memory - used.memory {
        reasons.push("Insufficient memory");
    }
    reasons
}

/// Fails with one reason per missing resource (all of them, not just the first).
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    let reasons = insufficient_resources(pod, node);
    if reasons.is_empty() {
        return Ok(());
    }
    Err(Status {
        plugin: NAME,
        code: Code::Unschedulable,
        reasons: reasons.into_iter().map(str::to_owned).collect(),
    })
}

/// `leastRequestedScore`.
fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// The LeastAllocated strategy over cpu and memory (weight 1 each); resources the node does
/// not report are skipped.
pub fn least_allocated_score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let pairs = [
        (
            node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu,
            node.allocatable.milli_cpu,
        ),
        (
            node.non_zero_requested.memory + pod.non_zero_requests.memory,
            node.allocatable.memory,
        ),
    ];
    let (mut total, mut weights) = (0, 0);
    for (requested, capacity) in pairs {
        if capacity == 0 {
            continue;
        }
        total += least_requested(requested, capacity);
        weights += 1;
    }
    if weights == 0 { 0 } else { total / weights }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, list, node, node_info, pod};
    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};

    #[test]
    fn filter_reasons_table() {
        let n = |pods| node_info(node("n1", "2", "1Gi", "2"), pods);
        for (pod_cpu, pod_mem, existing, want) in [
            ("1", "512Mi", vec![pod("a", "1", "256Mi")], vec![]),
            (
                "1500m",
                "",
                vec![pod("a", "1", "")],
                vec!["Insufficient cpu"],
            ),
            ("", "2Gi", vec![], vec!["Insufficient memory"]),
            (
                "3",
                "2Gi",
                vec![],
                vec!["Insufficient cpu", "Insufficient memory"],
            ),
            (
                "1",
                "",
                vec![pod("a", "", ""), pod("b", "", "")],
                vec!["Too many pods"],
            ),
            ("", "", vec![pod("a", "2", "1Gi")], vec![]),
        ] {
            let got =
                filter(&info(pod("p", pod_cpu, pod_mem)), &n(existing)).map_err(|s| s.reasons);
            let expected = if want.is_empty() {
                Ok(())
            } else {
                Err(want.iter().map(|s| (*s).to_owned()).collect())
            };
            assert_eq!(got, expected, "cpu {pod_cpu:?} memory {pod_mem:?}");
        }
    }

    #[test]
    fn init_containers_count_by_the_max_rule_and_overhead_adds() {
        let mut p = pod("p", "500m", "");
        let init = |cpu: &str, sidecar: bool| Container {
            name: format!("init-{cpu}"),
            restart_policy: sidecar.then(|| "Always".to_owned()),
            resources: Some(ResourceRequirements {
                requests: Some(list(&[("cpu", cpu)])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let spec = p.spec.get_or_insert_default();
        spec.init_containers = Some(vec![
            init("1", false),
            init("200m", true),
            init("900m", false),
        ]);
        spec.overhead = Some(list(&[("cpu", "50m")]));
        // containers 500m + sidecar 200m = 700m; init max(1000m, 900m + 200m) = 1100m; + 50m.
        assert_eq!(info(p).requests.milli_cpu, 1150);
    }

    #[test]
    fn least_allocated_prefers_the_emptier_node() {
        let empty = node_info(node("n1", "4", "8Gi", "110"), vec![]);
        let busy = node_info(node("n2", "4", "8Gi", "110"), vec![pod("a", "2", "4Gi")]);
        let p = info(pod("p", "1", "2Gi"));
        // cpu (4000-1000)*100/4000 = 75, memory (8-2)*100/8 = 75.
        assert_eq!(least_allocated_score(&p, &empty), 75);
        // cpu (4000-3000)*100/4000 = 25, memory 25.
        assert_eq!(least_allocated_score(&p, &busy), 25);
        // No requests: counted as 100m / 200Mi.
        assert_eq!(least_allocated_score(&info(pod("q", "", "")), &empty), 97);
    }
}
