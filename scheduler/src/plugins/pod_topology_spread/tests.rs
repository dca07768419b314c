//! Table tests after Kubernetes' `filtering_test.go` and `scoring_test.go`.

use k8s_openapi::api::core::v1::{Pod, Taint, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, OwnerReference, Time,
};

use super::filtering::{ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH};
use super::*;
use crate::cycle_state::CycleState;
use crate::plugins::fixtures::{info, labelled_node, labelled_pod, labels, node_info};
use crate::plugins::{Code, Status};

const ZONE: &str = "zone";
const NODE: &str = "node";

fn exists(key: &str) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.into(),
            operator: "Exists".into(),
            values: None,
        }]),
        match_labels: None,
    }
}

fn spread(max_skew: i32, key: &str, action: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: action.into(),
        label_selector: Some(exists("foo")),
        ..Default::default()
    }
}

fn with(mut pod: Pod, constraints: Vec<TopologySpreadConstraint>) -> Pod {
    pod.spec.get_or_insert_default().topology_spread_constraints = Some(constraints);
    pod
}

/// `foo` pods, as the Kubernetes tests name them.
fn foo(name: &str) -> Pod {
    labelled_pod(name, &[("foo", "")])
}

/// node-a, node-b in zone1 and node-x, node-y in zone2, holding `pods` foo pods each.
fn four_nodes(pods: [usize; 4]) -> Vec<NodeInfo> {
    [
        ("node-a", "zone1"),
        ("node-b", "zone1"),
        ("node-x", "zone2"),
        ("node-y", "zone2"),
    ]
    .iter()
    .zip(pods)
    .map(|((name, zone), n)| {
        let node = labelled_node(name, &[(ZONE, zone), (NODE, name)]);
        node_info(
            node,
            (0..n).map(|i| foo(&format!("p-{name}-{i}"))).collect(),
        )
    })
    .collect()
}

/// The filter's verdict on each node: `Ok` or the reason.
fn filter_all(pod: Pod, nodes: &[NodeInfo]) -> Vec<Result<(), String>> {
    let pod = info(pod);
    let state = CycleState::pre_filter(&pod, nodes.into());
    nodes
        .iter()
        .map(|n| filter(&pod, n, &state).map_err(|s| s.reasons.join(", ")))
        .collect()
}

fn fails(reason: &str) -> Result<(), String> {
    Err(reason.to_owned())
}

#[test]
fn no_constraint_skips_the_plugin() {
    let pod = info(foo("p"));
    let nodes = four_nodes([1, 0, 0, 0]);
    assert!(pre_filter(&pod, &nodes).is_none());
    // ScheduleAnyway constraints do not filter either.
    let soft = info(with(foo("p"), vec![spread(1, ZONE, "ScheduleAnyway")]));
    assert!(pre_filter(&soft, &nodes).is_none());
}

#[test]
fn no_existing_pods_every_node_fits() {
    let pod = with(foo("p"), vec![spread(1, ZONE, "DoNotSchedule")]);
    assert_eq!(filter_all(pod, &four_nodes([0; 4])), vec![Ok(()); 4]);
}

#[test]
fn pods_spread_across_zones_as_3_1_only_zone2_fits() {
    // zone1: 3, zone2: 1; the pod matches: zone1 3 + 1 - 1 = 3 > 1, zone2 1 + 1 - 1 = 1.
    let pod = with(foo("p"), vec![spread(1, ZONE, "DoNotSchedule")]);
    let nodes = four_nodes([2, 1, 1, 0]);
    let s = pre_filter(&info(pod.clone()), &nodes).expect("a DoNotSchedule constraint");
    assert_eq!(s.match_num[0].get("zone1"), Some(&3));
    assert_eq!(s.match_num[0].get("zone2"), Some(&1));
    assert_eq!(s.min_match_num(0), 1);
    let not_match = fails(ERR_REASON_CONSTRAINTS_NOT_MATCH);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![not_match.clone(), not_match, Ok(()), Ok(())]
    );
}

#[test]
fn a_pod_that_does_not_match_its_own_selector_adds_nothing() {
    // zone1: 2, zone2: 1: 2 + 0 - 1 = 1 fits everywhere.
    let pod = with(
        labelled_pod("p", &[("bar", "")]),
        vec![spread(1, ZONE, "DoNotSchedule")],
    );
    assert_eq!(filter_all(pod, &four_nodes([1, 1, 1, 0])), vec![Ok(()); 4]);
}

#[test]
fn a_node_without_the_topology_key_is_unresolvable_and_no_domain() {
    // node-b has no zone: it is ruled out and its pods do not count for zone1.
    let mut nodes = four_nodes([1, 3, 1, 1]);
    nodes[1] = node_info(
        labelled_node("node-b", &[(NODE, "node-b")]),
        (0..3).map(|i| foo(&format!("b-{i}"))).collect(),
    );
    let pod = info(with(foo("p"), vec![spread(1, ZONE, "DoNotSchedule")]));
    let state = CycleState::pre_filter(&pod, (&nodes).into());
    let verdicts: Vec<_> = nodes.iter().map(|n| filter(&pod, n, &state)).collect();
    assert_eq!(verdicts[0], Ok(()), "zone1: 1 + 1 - 1");
    assert_eq!(
        verdicts[1],
        Err(Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_NODE_LABEL_NOT_MATCH
        ))
    );
    assert_eq!(
        verdicts[2],
        Err(Status::new(
            NAME,
            Code::Unschedulable,
            ERR_REASON_CONSTRAINTS_NOT_MATCH
        )),
        "zone2: 2 + 1 - 1"
    );
}

#[test]
fn pods_in_other_namespaces_and_terminating_pods_do_not_count() {
    let mut nodes = four_nodes([0, 0, 1, 0]);
    let mut other = foo("other-ns");
    other.metadata.namespace = Some("kube-system".into());
    let mut leaving = foo("leaving");
    leaving.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    nodes[0].add_pod(info(other));
    nodes[1].add_pod(info(leaving));
    // zone1 counts 0, zone2 1: zone2 gets 1 + 1 - 0 = 2 > 1.
    let pod = with(foo("p"), vec![spread(1, ZONE, "DoNotSchedule")]);
    let not_match = fails(ERR_REASON_CONSTRAINTS_NOT_MATCH);
    assert_eq!(
        filter_all(pod, &nodes),
        vec![Ok(()), Ok(()), not_match.clone(), not_match]
    );
}

#[test]
fn min_domains_makes_the_global_minimum_zero() {
    // zone1: 1, zone2: 1. With minDomains 3 (only 2 domains) the minimum is 0: 1 + 1 - 0 > 1.
    let mut c = spread(1, ZONE, "DoNotSchedule");
    let nodes = four_nodes([1, 0, 1, 0]);
    assert_eq!(
        filter_all(with(foo("p"), vec![c.clone()]), &nodes),
        vec![Ok(()); 4]
    );
    c.min_domains = Some(3);
    assert_eq!(
        filter_all(with(foo("p"), vec![c.clone()]), &nodes),
        vec![fails(ERR_REASON_CONSTRAINTS_NOT_MATCH); 4]
    );
    // Two domains satisfy minDomains 2.
    c.min_domains = Some(2);
    assert_eq!(filter_all(with(foo("p"), vec![c]), &nodes), vec![Ok(()); 4]);
}

#[test]
fn two_constraints_must_both_hold() {
    // Per zone: zone1 2, zone2 1; per node: a 2, b 0, x 1, y 0. Zone maxSkew 1 rules out
    // zone1; node maxSkew 1 then leaves node-y (0 + 1 - 0) and rules out node-x (1 + 1 - 0).
    let pod = with(
        foo("p"),
        vec![
            spread(1, ZONE, "DoNotSchedule"),
            spread(1, NODE, "DoNotSchedule"),
        ],
    );
    let not_match = fails(ERR_REASON_CONSTRAINTS_NOT_MATCH);
    assert_eq!(
        filter_all(pod, &four_nodes([2, 0, 1, 0])),
        vec![not_match.clone(), not_match.clone(), not_match, Ok(())]
    );
}

#[test]
fn match_label_keys_narrow_the_selector_to_the_pods_values() {
    // Only pods of the same revision count: the old revision's three pods in zone1 do not.
    let mut nodes = four_nodes([0, 0, 1, 0]);
    for i in 0..3 {
        nodes[0].add_pod(info(labelled_pod(
            &format!("old-{i}"),
            &[("foo", ""), ("rev", "1")],
        )));
    }
    nodes[2] = node_info(
        labelled_node("node-x", &[(ZONE, "zone2"), (NODE, "node-x")]),
        vec![labelled_pod("new-0", &[("foo", ""), ("rev", "2")])],
    );
    let mut c = spread(1, ZONE, "DoNotSchedule");
    c.match_label_keys = Some(vec!["rev".into()]);
    let pod = with(labelled_pod("p", &[("foo", ""), ("rev", "2")]), vec![c]);
    let not_match = fails(ERR_REASON_CONSTRAINTS_NOT_MATCH);
    // zone1 0 + 1 - 0 fits; zone2 1 + 1 - 0 does not.
    assert_eq!(
        filter_all(pod, &nodes),
        vec![Ok(()), Ok(()), not_match.clone(), not_match]
    );
}

#[test]
fn node_inclusion_policies_decide_which_nodes_are_domains() {
    // zone1 (node-a, ssd) holds 2 foo pods; zone2 (node-x, no ssd, tainted) none.
    let nodes = || {
        let mut x = labelled_node("node-x", &[(ZONE, "zone2"), (NODE, "node-x")]);
        x.spec.get_or_insert_default().taints = Some(vec![Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        vec![
            node_info(
                labelled_node(
                    "node-a",
                    &[(ZONE, "zone1"), (NODE, "node-a"), ("disk", "ssd")],
                ),
                vec![foo("a-0"), foo("a-1")],
            ),
            node_info(x, vec![]),
        ]
    };
    let on_ssd = |c: TopologySpreadConstraint| {
        let mut p = with(foo("p"), vec![c]);
        p.spec.get_or_insert_default().node_selector = Some(labels(&[("disk", "ssd")]));
        p
    };
    let not_match = fails(ERR_REASON_CONSTRAINTS_NOT_MATCH);
    // nodeAffinityPolicy Honor (default): zone2 fails the node selector, so it is no domain;
    // zone1 is the only one: 2 + 1 - 2 = 1.
    let c = spread(1, ZONE, "DoNotSchedule");
    assert_eq!(filter_all(on_ssd(c.clone()), &nodes())[0], Ok(()));
    // Ignore: zone2 counts with 0 matching pods, so zone1 gets 2 + 1 - 0 = 3.
    let mut ignore = c.clone();
    ignore.node_affinity_policy = Some("Ignore".into());
    assert_eq!(filter_all(on_ssd(ignore), &nodes())[0], not_match);
    // nodeTaintsPolicy Ignore (default): the tainted zone2 is a domain with 0.
    assert_eq!(
        filter_all(with(foo("p"), vec![c.clone()]), &nodes())[0],
        not_match
    );
    // Honor: the pod does not tolerate the taint, so zone2 is no domain.
    let mut honor = c;
    honor.node_taints_policy = Some("Honor".into());
    assert_eq!(filter_all(with(foo("p"), vec![honor]), &nodes())[0], Ok(()));
}

// ---- scoring ----

/// Normalised scores of every node as feasible, or `None` when PreScore skips.
fn scores(pod: &PodInfo, nodes: &[NodeInfo]) -> Option<Vec<i64>> {
    let feasible: Vec<&NodeInfo> = nodes.iter().collect();
    let mut state = CycleState::pre_filter(pod, nodes.into());
    state.pre_score(pod, nodes.into(), &feasible);
    state.pod_topology_spread_score.as_ref()?;
    let mut raw: Vec<i64> = nodes.iter().map(|n| score(pod, n, &state)).collect();
    normalize(&mut raw, &state);
    Some(raw)
}

#[test]
fn score_one_constraint_on_node_no_existing_pods() {
    let pod = info(with(foo("p"), vec![spread(1, NODE, "ScheduleAnyway")]));
    assert_eq!(scores(&pod, &four_nodes([0; 4])), Some(vec![100; 4]));
}

#[test]
fn score_one_constraint_on_node_fewer_is_better() {
    // weight ln(4 + 2) = 1.79; raw 2 → round(3.58) = 4, 1 → 2, 0 → 0;
    // normalised 100 × (4 + 0 - raw) / 4.
    let pod = info(with(foo("p"), vec![spread(1, NODE, "ScheduleAnyway")]));
    assert_eq!(
        scores(&pod, &four_nodes([2, 1, 0, 1])),
        Some(vec![0, 50, 100, 50])
    );
}

#[test]
fn score_zone_constraint_with_max_skew_and_an_ignored_node() {
    // zone1 3 pods, zone2 1; node-y lacks the zone label: ignored, scores 0.
    // weight ln(2 + 2) = 1.386; maxSkew 2 adds 1: zone1 3×1.386+1 = 5.16 → 5,
    // zone2 1.386+1 = 2.39 → 2; normalised 100 × (5 + 2 - raw) / 5.
    let mut nodes = four_nodes([2, 1, 1, 0]);
    nodes[3] = node_info(labelled_node("node-y", &[(NODE, "node-y")]), vec![]);
    let pod = info(with(foo("p"), vec![spread(2, ZONE, "ScheduleAnyway")]));
    assert_eq!(scores(&pod, &nodes), Some(vec![40, 40, 100, 0]));
}

fn owned_by(mut pod: Pod, kind: &str, uid: &str) -> Pod {
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: "owner".into(),
        uid: uid.into(),
        controller: Some(true),
        ..Default::default()
    }]);
    pod
}

#[test]
fn system_default_constraints_spread_a_replica_sets_pods_by_node_and_zone() {
    // n1, n2 in zone-a, n3 in zone-b; rs-1's pods: n1 2, n2 0, n3 1 (plus another
    // ReplicaSet's pods, which do not count).
    let node = |name: &str, zone: &str| {
        labelled_node(name, &[(LABEL_HOSTNAME, name), (LABEL_TOPOLOGY_ZONE, zone)])
    };
    let rs = |name: &str, uid: &str| owned_by(labelled_pod(name, &[]), "ReplicaSet", uid);
    let nodes = vec![
        node_info(node("n1", "zone-a"), vec![rs("a", "rs-1"), rs("b", "rs-1")]),
        node_info(node("n2", "zone-a"), vec![rs("c", "rs-2"), rs("d", "rs-2")]),
        node_info(node("n3", "zone-b"), vec![rs("e", "rs-1")]),
    ];
    // hostname: weight ln(5), maxSkew 3 adds 2; zone: weight ln(4), maxSkew 5 adds 4.
    // n1: 2×1.609+2 + 2×1.386+4 = 11.99 → 12; n2: 0+2 + 6.77 → 9; n3: 3.61 + 5.39 → 9.
    // Normalised 100 × (12 + 9 - raw) / 12: 75, 100, 100.
    let pod = info(rs("new", "rs-1"));
    let s = pre_score(&pod, &nodes, &nodes.iter().collect::<Vec<_>>()).expect("defaults");
    assert_eq!(
        s.constraints
            .iter()
            .map(|c| (c.topology_key.as_str(), c.max_skew))
            .collect::<Vec<_>>(),
        SYSTEM_DEFAULT_CONSTRAINTS.to_vec()
    );
    assert!(
        s.value_counts[0].is_empty(),
        "hostname: counted per node at Score"
    );
    assert_eq!(s.value_counts[1].get("zone-a"), Some(&2));
    assert_eq!(s.value_counts[1].get("zone-b"), Some(&1));
    assert_eq!(scores(&pod, &nodes), Some(vec![75, 100, 100]));
    // The defaults never filter, and a pod no ReplicaSet, ReplicationController or
    // StatefulSet owns gets none.
    assert!(pre_filter(&pod, &nodes).is_none());
    assert_eq!(scores(&info(labelled_pod("bare", &[])), &nodes), None);
    let job = info(owned_by(labelled_pod("job", &[]), "Job", "job-1"));
    assert_eq!(scores(&job, &nodes), None);
}

#[test]
fn system_defaults_do_not_require_the_zone_label() {
    // Without zone labels, hostname spreading alone decides (no node is ignored).
    let node = |name: &str| labelled_node(name, &[(LABEL_HOSTNAME, name)]);
    let rs = |name: &str| owned_by(labelled_pod(name, &[]), "StatefulSet", "ss-1");
    let nodes = vec![
        node_info(node("n1"), vec![rs("a")]),
        node_info(node("n2"), vec![]),
    ];
    // weight ln(4) = 1.386, maxSkew 3 adds 2: n1 3.39 → 3, n2 2 → 2;
    // 100 × (3 + 2 - raw) / 3 = 66, 100.
    assert_eq!(scores(&info(rs("new")), &nodes), Some(vec![66, 100]));
}
