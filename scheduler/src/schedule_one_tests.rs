use super::*;
use crate::plugins::fixtures::{info, node, node_info, pod};

fn three_nodes() -> Vec<NodeInfo> {
    ["node-1", "node-2", "node-3"]
        .map(|n| node_info(node(n, "2", "4Gi", "110"), vec![]))
        .into()
}

#[test]
fn feasible_nodes_to_find() {
    for (all, want) in [
        (0, 0),
        (50, 50),
        (100, 100),
        (1000, 420),
        (5000, 500),
        (20000, 1000),
    ] {
        assert_eq!(num_feasible_nodes_to_find(all), want, "{all} nodes");
    }
}

#[test]
fn too_much_cpu_is_a_fit_error_with_kubernetes_message() {
    let err = Algorithm::new(1)
        .schedule_pod(&info(pod("big", "5", "")), &three_nodes())
        .expect_err("no node has 5 cpus");
    assert_eq!(
        err.to_string(),
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
         3 No preemption victims found for incoming pod."
    );
    assert_eq!(
        Algorithm::new(1).schedule_pod(&info(pod("p", "", "")), &[]),
        Err(ScheduleError::NoNodesAvailable)
    );
}

#[test]
fn the_emptiest_node_wins_and_the_result_says_why() {
    let mut nodes = three_nodes();
    nodes[0].add_pod(info(pod("a", "1", "1Gi")));
    nodes[2].add_pod(info(pod("b", "1500m", "")));
    let result = Algorithm::new(7)
        .schedule_pod(&info(pod("p", "100m", "128Mi")), &nodes)
        .expect("every node fits");
    assert_eq!(result.suggested_host, "node-2");
    assert_eq!((result.evaluated_nodes, result.feasible_nodes), (3, 3));
    let best = &result.nodes[1];
    assert_eq!(&*best.node, "node-2");
    // TaintToleration, NodeAffinity, ControllerSpread, LeastAllocated, BalancedAllocation.
    assert_eq!(best.scores, Some([100, 0, 100, 95, 99]));
    assert_eq!(best.total, 300 + 200 + 95 + 99);
    assert!(
        result.summary().starts_with(
            "default/p -> node-2 (3 evaluated, 3 feasible); node-2 694 [TaintToleration=100"
        ),
        "{}",
        result.summary()
    );
}

#[test]
fn ties_are_broken_by_the_seeded_rng() {
    let nodes = three_nodes();
    let choices = |seed| {
        let mut algorithm = Algorithm::new(seed);
        (0..12)
            .map(|i| {
                let p = info(pod(&format!("p{i}"), "", ""));
                algorithm
                    .schedule_pod(&p, &nodes)
                    .expect("fits")
                    .suggested_host
            })
            .collect::<Vec<_>>()
    };
    // Same seed, same choices; every node gets picked at some point.
    assert_eq!(choices(42), choices(42));
    let picked: std::collections::BTreeSet<String> = choices(42).into_iter().collect();
    assert_eq!(picked.len(), 3, "{picked:?}");
}

#[test]
fn a_single_feasible_node_is_chosen_without_scoring() {
    let mut nodes = three_nodes();
    nodes[1] = node_info(node("node-2", "8", "4Gi", "110"), vec![]);
    let result = Algorithm::new(1)
        .schedule_pod(&info(pod("p", "4", "")), &nodes)
        .expect("node-2 fits");
    assert_eq!(result.suggested_host, "node-2");
    assert!(result.nodes.iter().all(|v| v.scores.is_none()));
}

#[test]
fn scans_rotate_when_only_part_of_the_nodes_is_evaluated() {
    let nodes: Vec<NodeInfo> = (0..1000)
        .map(|i| node_info(node(&format!("n{i}"), "4", "8Gi", "110"), vec![]))
        .collect();
    let mut algorithm = Algorithm::new(3);
    let first = algorithm
        .schedule_pod(&info(pod("a", "", "")), &nodes)
        .expect("fits");
    assert_eq!(first.evaluated_nodes, 420);
    let second = algorithm
        .schedule_pod(&info(pod("b", "", "")), &nodes)
        .expect("fits");
    assert_eq!(&*second.nodes[0].node, "n420");
}

#[test]
fn the_three_best_are_those_a_full_sort_puts_first() {
    // Hundreds of verdicts in scan order, most tied, some filtered out or unscored.
    let verdict = |i: usize| NodeVerdict {
        node: format!("node-{:03}", (i * 7919) % 500).into(),
        filter: Ok(()),
        scores: (!i.is_multiple_of(11)).then_some([100, 0, 100, 90, 100]),
        total: [697, 697, 697, 496, 700][(i * 31) % 5] - i64::from(i.is_multiple_of(97)),
    };
    for n in [0, 1, 2, 3, 4, 10, 500] {
        let result = ScheduleResult {
            pod: ObjectKey::new(Some("default"), "p"),
            suggested_host: String::new(),
            evaluated_nodes: n,
            feasible_nodes: n,
            nodes: (0..n).map(verdict).collect(),
        };
        let mut sorted: Vec<&NodeVerdict> =
            result.nodes.iter().filter(|v| v.scores.is_some()).collect();
        sorted.sort_by(|a, b| b.total.cmp(&a.total).then(a.node.cmp(&b.node)));
        sorted.truncate(3);
        assert_eq!(result.best_three(), sorted, "{n} verdicts");
    }
}
