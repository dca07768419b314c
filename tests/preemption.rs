//! End to end: pod priority and preemption. The API server, the scheduler, the
//! controller-manager and simulated kubelets as separate processes, driven with the real
//! kubectl:
//!
//! * `kubectl get pc` lists the two system PriorityClasses the API server creates at start,
//!   which cannot be deleted;
//! * a pod naming a PriorityClass that does not exist is refused by the Priority admission
//!   plugin with kube-apiserver's message;
//! * nodes filled with low-priority pods, then a high-priority pod: the scheduler preempts
//!   one low-priority pod (DisruptionTarget, deleted, a `Preempted` Event naming the
//!   preemptor), nominates the node, and the high-priority pod runs there; the decision's
//!   span names the victim and the node.
// Functions outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use support::process_cluster::ProcessCluster;
use support::scheduler_view::scheduler_spans;
use support::{DEADLINE, Server, eventually};

/// A pod asking for `cpu` in PriorityClass `class` (none when empty).
fn pod(name: &str, class: &str, cpu: &str) -> String {
    let class = if class.is_empty() {
        String::new()
    } else {
        format!("  priorityClassName: {class}\n")
    };
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: preemption}}
spec:
{class}  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: nginx
    resources:
      requests: {{cpu: \"{cpu}\"}}
"
    )
}

fn priority_class(name: &str, value: i32) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: {name}
value: {value}
"
    )
}

/// (name, node, phase) of the pods labelled `app=preemption`.
fn pods(s: &Server) -> Vec<(String, Option<String>, String)> {
    let list = s.kubectl_json(&["get", "pods", "-l", "app=preemption"]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["spec"]["nodeName"].as_str().map(str::to_owned),
                p["status"]["phase"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The events with `reason` about pod `name`.
fn events(s: &Server, name: &str, reason: &str) -> Vec<Value> {
    let list = s.kubectl_json(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind=Pod,involvedObject.name={name},reason={reason}"),
    ]);
    list["items"].as_array().cloned().unwrap_or_default()
}

#[test]
fn system_classes_unknown_class_and_a_high_priority_pod_preempts() {
    let c = ProcessCluster::start(2);
    let s = &c.s;

    // The system classes, as `kubectl get pc` prints them.
    let table = s.kubectl_ok(&["get", "pc"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
        "{table}"
    );
    for (name, value) in [
        ("system-cluster-critical", "2000000000"),
        ("system-node-critical", "2000001000"),
    ] {
        let row = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], value, "{row}");
        assert_eq!(cells[2], "false", "{row}");
        assert_eq!(cells[4], "PreemptLowerPriority", "{row}");
    }
    let refused = s.kubectl_err(&["delete", "pc", "system-node-critical"]);
    assert!(
        refused.contains(
            "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a \
             system priority class and cannot be deleted"
        ),
        "{refused}"
    );

    // The Priority admission plugin refuses a class that does not exist.
    let run = s.apply_yaml(&pod("x", "foo", "100m"), &[]);
    assert!(!run.ok(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("pods \"x\" is forbidden: no PriorityClass with name foo was found"),
        "{}",
        run.stderr
    );

    // Two nodes of 4 cpus, filled by four low-priority pods of 2 cpus.
    s.apply_ok(&priority_class("low", 10), &[]);
    s.apply_ok(&priority_class("high", 1000), &[]);
    for i in 0..4 {
        s.apply_ok(&pod(&format!("low-{i}"), "low", "2"), &[]);
    }
    eventually("4 low-priority pods Running", DEADLINE, || {
        let all = pods(s);
        (all.len() == 4 && all.iter().all(|(_, _, phase)| phase == "Running")).then_some(())
    });
    let low = s.kubectl_json(&["get", "pod", "low-0"]);
    assert_eq!(low["spec"]["priority"], 10, "{low}");
    assert_eq!(low["spec"]["preemptionPolicy"], "PreemptLowerPriority");

    // The high-priority pod fits nowhere until one low-priority pod makes room.
    s.apply_ok(&pod("high", "high", "2"), &[]);
    let node = eventually("the high-priority pod Running", DEADLINE, || {
        pods(s)
            .into_iter()
            .find(|(name, node, phase)| name == "high" && phase == "Running" && node.is_some())
            .and_then(|(_, node, _)| node)
    });
    let high = s.kubectl_json(&["get", "pod", "high"]);
    assert_eq!(high["spec"]["priority"], 1000);
    assert_eq!(high["status"]["nominatedNodeName"], node.as_str(), "{high}");
    let uid = high["metadata"]["uid"].as_str().unwrap().to_owned();

    // Exactly one victim, on that node, with kube-scheduler's Event.
    let left: Vec<String> = pods(s)
        .into_iter()
        .map(|(name, _, _)| name)
        .filter(|n| n.starts_with("low-"))
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    let victim = (0..4)
        .map(|i| format!("low-{i}"))
        .find(|n| !left.contains(n))
        .unwrap();
    let preempted = eventually("the Preempted event", DEADLINE, || {
        events(s, &victim, "Preempted").into_iter().next()
    });
    assert_eq!(
        preempted["message"],
        format!("Preempted by pod {uid} on node {node}").as_str(),
        "{preempted}"
    );
    assert_eq!(preempted["type"], "Normal");
    // The preemptor's FailedScheduling has no preemption part: preemption succeeded.
    let failed = eventually("the preemptor's FailedScheduling", DEADLINE, || {
        events(s, "high", "FailedScheduling").into_iter().next()
    });
    assert_eq!(
        failed["message"], "0/2 nodes are available: 2 Insufficient cpu.",
        "{failed}"
    );

    // The decision's span names the node, the reason and the victim.
    let spans = eventually("the preemption in the trace", DEADLINE, || {
        scheduler_spans(s, "pod/high")
            .into_iter()
            .find(|a| a.contains_key("preemption.node"))
    });
    assert_eq!(spans["preemption.node"], node, "{spans:?}");
    assert!(
        spans["preemption.victim.0"].contains(&format!("default/{victim} (priority 10)")),
        "{spans:?}"
    );
}
