use super::*;
use crate::plugins::fixtures::{info, node, node_info, pod};
use crate::schedule_one::{Algorithm, ScheduleError};
use k8s_openapi::api::core::v1::{PodCondition, PodStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A pod asking for `cpu` with `priority`, started at second `start` (if any).
fn prio(name: &str, cpu: &str, priority: i32, start: Option<i64>) -> Pod {
    let mut p = pod(name, cpu, "");
    if let Some(spec) = p.spec.as_mut() {
        spec.priority = Some(priority);
    }
    p.status = Some(PodStatus {
        start_time: start.map(|s| Time(jiff::Timestamp::from_second(1_700_000_000 + s).unwrap())),
        ..Default::default()
    });
    p
}

fn fit_error(pod: &PodInfo, nodes: &[NodeInfo]) -> FitError {
    match Algorithm::new(1).schedule_pod(pod, nodes) {
        Err(ScheduleError::Fit(fit)) => fit,
        other => panic!("expected a fit error, got {other:?}"),
    }
}

fn outcome(pod: &PodInfo, nodes: &[NodeInfo]) -> Outcome {
    let fit = fit_error(pod, nodes);
    post_filter(pod, nodes.into(), &fit)
}

fn victims(outcome: &Outcome) -> (String, Vec<String>) {
    match outcome {
        Outcome::Preempt { candidate, .. } => (
            candidate.node.to_string(),
            candidate
                .victims
                .iter()
                .map(|v| v.key.name.clone())
                .collect(),
        ),
        other => panic!("expected a preemption, got {other:?}"),
    }
}

#[test]
fn only_as_many_lower_priority_pods_as_needed_least_important_first() {
    // 2 cpus, full: 500m at 10, 500m at 5, 1 cpu at 1. The preemptor needs 1 cpu.
    let nodes = vec![node_info(
        node("node-1", "2", "4Gi", "110"),
        vec![
            prio("mid", "500m", 10, Some(1)),
            prio("low", "500m", 5, Some(1)),
            prio("lowest", "1", 1, Some(1)),
        ],
    )];
    let high = info(prio("high", "1", 100, None));
    let out = outcome(&high, &nodes);
    // Reprieve from the most important: mid and low come back, lowest must go.
    assert_eq!(victims(&out), ("node-1".into(), vec!["lowest".into()]));
    assert_eq!(out.message(), None);
    // Equal or higher priority pods are never victims.
    let nodes = vec![node_info(
        node("node-1", "2", "4Gi", "110"),
        vec![prio("peer", "2", 100, Some(1))],
    )];
    assert_eq!(
        outcome(&high, &nodes).message().as_deref(),
        Some("0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    );
}

#[test]
fn a_node_that_evictions_cannot_free_keeps_its_filter_reason() {
    // Removing the only lower-priority pod (500m) still leaves 1.5 cpu used of 2.
    let nodes = vec![node_info(
        node("node-1", "2", "4Gi", "110"),
        vec![
            prio("peer", "1500m", 100, Some(1)),
            prio("low", "500m", 1, Some(1)),
        ],
    )];
    let out = outcome(&info(prio("high", "1", 100, None)), &nodes);
    assert_eq!(
        out.message().as_deref(),
        Some("0/1 nodes are available: 1 Insufficient cpu.")
    );
}

#[test]
fn unresolvable_nodes_are_not_helpful_and_the_message_counts_them() {
    let mut tainted = node("node-2", "2", "4Gi", "110");
    tainted.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
        taints: Some(vec![Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let nodes = vec![
        node_info(
            node("node-1", "2", "4Gi", "110"),
            vec![prio("peer", "2", 100, None)],
        ),
        node_info(tainted, vec![prio("low", "2", 0, None)]),
    ];
    let high = info(prio("high", "1", 100, None));
    let fit = fit_error(&high, &nodes);
    let out = post_filter(&high, (&nodes[..]).into(), &fit);
    assert_eq!(
        failure_message(&fit, Some(&out)),
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint \
         {dedicated: gpu}. preemption: 0/2 nodes are available: 1 No preemption victims found \
         for incoming pod, 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn pick_one_node_follows_kubernetes_criteria_in_order() {
    let full = |pods: Vec<Pod>, name: &str| node_info(node(name, "2", "4Gi", "110"), pods);
    let high = info(prio("high", "2", 100, None));
    // node-1: a victim at 50; node-2: two at 10 → the lower highest priority wins.
    let nodes = vec![
        full(vec![prio("a", "2", 50, Some(1))], "node-1"),
        full(
            vec![prio("b", "1", 10, Some(1)), prio("c", "1", 10, Some(1))],
            "node-2",
        ),
    ];
    let out = outcome(&high, &nodes);
    assert_eq!(victims(&out).0, "node-2");
    assert!(matches!(
        out,
        Outcome::Preempt {
            why: "lowest highest-priority victim",
            candidates: 2,
            ..
        }
    ));
    // Same highest priority: the lower sum wins.
    let nodes = vec![
        full(
            vec![prio("a", "1", 10, Some(1)), prio("b", "1", 10, Some(1))],
            "node-1",
        ),
        full(
            vec![prio("c", "1", 10, Some(1)), prio("d", "1", 5, Some(1))],
            "node-2",
        ),
    ];
    let out = outcome(&high, &nodes);
    assert_eq!(victims(&out).0, "node-2");
    assert!(matches!(
        out,
        Outcome::Preempt {
            why: "lowest sum of victim priorities",
            ..
        }
    ));
    // Same priorities: fewer victims, then the most recently started.
    let nodes = vec![
        full(
            vec![prio("a", "1", 10, Some(1)), prio("b", "1", 0, Some(1))],
            "node-1",
        ),
        full(vec![prio("c", "2", 10, Some(5))], "node-2"),
        full(vec![prio("d", "2", 10, Some(9))], "node-3"),
    ];
    let out = outcome(&high, &nodes);
    assert_eq!(victims(&out), ("node-3".into(), vec!["d".into()]));
    assert!(matches!(
        out,
        Outcome::Preempt {
            why: "latest start of the highest-priority victims",
            ..
        }
    ));
    assert!(
        out.describe().contains("victims: default/d (priority 10)"),
        "{}",
        out.describe()
    );
}

#[test]
fn never_and_a_terminating_victim_make_the_pod_ineligible() {
    let nodes = vec![node_info(
        node("node-1", "2", "4Gi", "110"),
        vec![prio("low", "2", 0, None)],
    )];
    let mut never = prio("never", "1", 100, None);
    if let Some(spec) = never.spec.as_mut() {
        spec.preemption_policy = Some("Never".into());
    }
    let never = info(never);
    assert_eq!(
        outcome(&never, &nodes).message().as_deref(),
        Some("not eligible due to preemptionPolicy=Never.")
    );
    // The victim of an earlier preemption is still terminating on the nominated node.
    let mut victim = prio("low", "2", 0, None);
    victim.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    if let Some(status) = victim.status.as_mut() {
        status.conditions = Some(vec![PodCondition {
            type_: DISRUPTION_TARGET.into(),
            status: "True".into(),
            reason: Some(PREEMPTION_BY_SCHEDULER.into()),
            ..Default::default()
        }]);
    }
    let nodes = vec![node_info(node("node-1", "2", "4Gi", "110"), vec![victim])];
    let mut high = prio("high", "1", 100, None);
    if let Some(status) = high.status.as_mut() {
        status.nominated_node_name = Some("node-1".into());
    }
    let high = info(high);
    let fit = fit_error(&high, &nodes);
    let out = post_filter(&high, (&nodes[..]).into(), &fit);
    assert_eq!(
        failure_message(&fit, Some(&out)),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to a \
         terminating pod on the nominated node."
    );
}

#[test]
fn messages_of_the_writes() {
    assert_eq!(
        disruption_message("default-scheduler"),
        "default-scheduler: preempting to accommodate a higher priority pod"
    );
    assert_eq!(
        preempted_message("1234-abcd", "node-1"),
        "Preempted by pod 1234-abcd on node node-1"
    );
    assert_eq!(num_candidates(3), 3);
    assert_eq!(num_candidates(5000), 500);
}
