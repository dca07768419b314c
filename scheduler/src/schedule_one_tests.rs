use super::*;
use crate::plugins::fixtures::{info, labels, node, node_info, pod};
use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

const HOSTNAME: &str = "kubernetes.io/hostname";

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
    // TaintToleration, NodeAffinity, NodeResourcesFit (LeastAllocated), PodTopologySpread
    // and InterPodAffinity (skipped: the pod has no controller and no affinity),
    // BalancedAllocation.
    assert_eq!(best.scores, Some([100, 0, 95, 0, 0, 99]));
    assert_eq!(best.total, 300 + 95 + 99);
    assert!(
        result.summary().starts_with(
            "default/p -> node-2 (3 evaluated, 3 feasible); node-2 494 [TaintToleration=100 \
             NodeAffinity=0 NodeResourcesFit=95 PodTopologySpread=0 InterPodAffinity=0 \
             NodeResourcesBalancedAllocation=99]"
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
fn a_seeded_tie_break_does_not_depend_on_the_order_of_the_nodes() {
    let nodes = three_nodes();
    let reversed: Vec<NodeInfo> = three_nodes().into_iter().rev().collect();
    let choices = |nodes: &[NodeInfo]| {
        let mut algorithm = Algorithm::new(9);
        (0..30)
            .map(|i| {
                let p = info(pod(&format!("p{i}"), "", ""));
                algorithm
                    .schedule_pod(&p, nodes)
                    .expect("fits")
                    .suggested_host
            })
            .collect::<Vec<_>>()
    };
    let first = choices(&nodes);
    assert_eq!(
        first,
        choices(&reversed),
        "the informer's order must not matter"
    );
    // Still each tied node about as likely: none picked in fewer than a sixth of 300 draws.
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for seed in 0..300 {
        let p = info(pod("p", "", ""));
        let host = Algorithm::new(seed)
            .schedule_pod(&p, &nodes)
            .expect("fits")
            .suggested_host;
        *counts.entry(host).or_default() += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(counts.values().all(|n| *n >= 50), "{counts:?}");
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
        scores: (!i.is_multiple_of(11)).then_some([100, 0, 90, 100, 0, 100]),
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

/// `count` nodes `node-1`... with their hostname label; `node-1` is the biggest by far, so
/// LeastAllocated alone would put every small pod there.
fn hostname_nodes(count: usize) -> Vec<NodeInfo> {
    (1..=count)
        .map(|i| {
            let name = format!("node-{i}");
            let cpu = if i == 1 { "64" } else { "2" };
            let mut n = node(&name, cpu, "64Gi", "110");
            n.metadata.labels = Some(labels(&[(HOSTNAME, &name)]));
            node_info(n, vec![])
        })
        .collect()
}

/// Schedules `pod` and, as the cache's assume does, puts it on the chosen node.
fn place(algorithm: &mut Algorithm, pod: Pod, nodes: &mut [NodeInfo]) -> Result<String, String> {
    let pod = info(pod);
    let host = algorithm
        .schedule_pod(&pod, &*nodes)
        .map_err(|e| e.to_string())?
        .suggested_host;
    let node = nodes
        .iter_mut()
        .find(|n| *n.name == *host)
        .expect("the chosen node is one of them");
    node.add_pod(pod);
    Ok(host)
}

fn web(name: &str) -> Pod {
    let mut p = pod(name, "500m", "");
    p.metadata.labels = Some(labels(&[("app", "web")]));
    p
}

#[test]
fn pods_with_required_anti_affinity_never_share_a_node() {
    let anti = |name: &str| {
        let mut p = web(name);
        p.spec.get_or_insert_default().affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(labels(&[("app", "web")])),
                        match_expressions: None,
                    }),
                    topology_key: HOSTNAME.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    };
    for seed in 0..5 {
        let mut nodes = hostname_nodes(2);
        let mut algorithm = Algorithm::new(seed);
        let first = place(&mut algorithm, anti("web-0"), &mut nodes).expect("fits");
        assert_eq!(
            first, "node-1",
            "the biggest node, when nothing is in the way"
        );
        let second = place(&mut algorithm, anti("web-1"), &mut nodes).expect("fits");
        assert_eq!(second, "node-2", "seed {seed}: never node-1 again");
        let verdict = algorithm
            .schedule_pod(&info(anti("web-2")), &nodes)
            .expect_err("both nodes hold a web pod");
        assert_eq!(
            verdict.to_string(),
            "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. \
             preemption: 0/2 nodes are available: 2 No preemption victims found for incoming \
             pod."
        );
        // A plain web pod is kept away by the existing pods' anti-affinity, and the trace
        // names the plugin.
        let ScheduleError::Fit(fit) = algorithm
            .schedule_pod(&info(web("plain")), &nodes)
            .expect_err("the existing pods reject it")
        else {
            panic!("a fit error");
        };
        let status = &fit.node_to_status["node-1"];
        assert_eq!(status.plugin, "InterPodAffinity");
        assert_eq!(
            status.reasons,
            vec!["node(s) didn't satisfy existing pods anti-affinity rules".to_owned()]
        );
    }
}

#[test]
fn max_skew_1_over_3_nodes_places_3_pods_1_1_1() {
    let spread = |name: &str| {
        let mut p = web(name);
        p.spec.get_or_insert_default().topology_spread_constraints =
            Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: HOSTNAME.into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(LabelSelector {
                    match_labels: Some(labels(&[("app", "web")])),
                    match_expressions: None,
                }),
                ..Default::default()
            }]);
        p
    };
    // Without the constraint, the big node-1 takes all three.
    let mut nodes = hostname_nodes(3);
    let mut algorithm = Algorithm::new(11);
    for i in 0..3 {
        let host = place(&mut algorithm, web(&format!("plain-{i}")), &mut nodes);
        assert_eq!(host.as_deref(), Ok("node-1"));
    }
    let mut nodes = hostname_nodes(3);
    let mut algorithm = Algorithm::new(11);
    for i in 0..3 {
        place(&mut algorithm, spread(&format!("web-{i}")), &mut nodes).expect("fits");
    }
    let per_node: Vec<usize> = nodes.iter().map(|n| n.pods.len()).collect();
    assert_eq!(per_node, vec![1, 1, 1]);
    // The filter said why node-1 was out for the second pod.
    let mut nodes = hostname_nodes(3);
    place(&mut algorithm, spread("web-a"), &mut nodes).expect("fits");
    let result = algorithm
        .schedule_pod(&info(spread("web-b")), &nodes)
        .expect("fits");
    let busy = result
        .nodes
        .iter()
        .find(|v| v.filter.is_err())
        .expect("one node is filtered out");
    let status = busy.filter.as_ref().expect_err("filtered out");
    assert_eq!(
        (status.plugin, status.reasons.as_slice()),
        (
            "PodTopologySpread",
            ["node(s) didn't match pod topology spread constraints".to_owned()].as_slice()
        )
    );
}
