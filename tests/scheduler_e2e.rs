//! End-to-end scheduling: a real `miniplane apiserver` and `miniplane scheduler`, nodes
//! created through the API (no kubelet), pods through kubectl and raw HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::scheduler_process::Scheduler;
use support::{DEADLINE, Server, eventually};

/// Creates a Ready node with `cpu`, `memory` and `pods` allocatable, labels and taints.
fn create_node(s: &Server, name: &str, cpu: &str, pods: &str, labels: Value, taints: Value) {
    let mut labels = labels;
    labels["kubernetes.io/hostname"] = json!(name);
    let resources = json!({"cpu": cpu, "memory": "8Gi", "pods": pods});
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    });
    s.send_json("POST", "/api/v1/nodes", &node).expect_created();
}

/// Creates a pod in `default` from its `spec`.
fn create_pod(s: &Server, name: &str, spec: Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec});
    s.send_json("POST", "/api/v1/namespaces/default/pods", &pod)
        .expect_created();
}

/// A one-container pod spec requesting `cpu`.
fn spec(cpu: &str) -> Value {
    json!({"containers": [{"name": "main", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]})
}

fn pod(s: &Server, name: &str) -> Value {
    s.get(&format!("/api/v1/namespaces/default/pods/{name}"))
        .json()
}

/// Waits until the pod is bound; returns its node.
fn wait_bound(s: &Server, name: &str) -> String {
    eventually(&format!("pod {name} bound"), DEADLINE, || {
        pod(s, name)["spec"]["nodeName"].as_str().map(str::to_owned)
    })
}

/// Waits until the pod carries PodScheduled=False/Unschedulable; returns the message.
fn wait_unschedulable(s: &Server, name: &str) -> String {
    eventually(&format!("pod {name} unschedulable"), DEADLINE, || {
        let p = pod(s, name);
        let conditions = p["status"]["conditions"].as_array()?.clone();
        let c = conditions.iter().find(|c| c["type"] == "PodScheduled")?;
        (c["status"] == "False" && c["reason"] == "Unschedulable")
            .then(|| c["message"].as_str().unwrap_or_default().to_owned())
    })
}

/// The messages of the events with `reason` about pod `name`.
fn event_messages(s: &Server, name: &str, reason: &str) -> Vec<String> {
    let events = s.get("/api/v1/namespaces/default/events").json();
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == reason)
        .filter(|e| e["source"]["component"] == "default-scheduler")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn pods_spread_over_three_nodes_and_kubectl_shows_their_node() {
    let s = Server::start();
    for n in ["node-1", "node-2", "node-3"] {
        create_node(&s, n, "4", "110", json!({}), json!([]));
    }
    let mut scheduler = Scheduler::start(&s);
    for i in 0..6 {
        create_pod(&s, &format!("web-{i}"), spec("500m"));
    }
    let mut per_node = std::collections::BTreeMap::new();
    for i in 0..6 {
        *per_node
            .entry(wait_bound(&s, &format!("web-{i}")))
            .or_insert(0) += 1;
    }
    // LeastAllocated and BalancedAllocation even the load: two pods per node.
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{per_node:?}"
    );
    let node = wait_bound(&s, "web-0");
    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let row = wide
        .lines()
        .find(|l| l.starts_with("web-0 "))
        .expect("web-0 row");
    assert!(wide.lines().next().unwrap().contains("NODE"), "{wide}");
    assert!(row.contains(&node), "{wide}");
    let scheduled = eventually("Scheduled event", DEADLINE, || {
        let m = event_messages(&s, "web-0", "Scheduled");
        (!m.is_empty()).then_some(m)
    });
    assert_eq!(
        scheduled,
        vec![format!("Successfully assigned default/web-0 to {node}")]
    );
    assert!(scheduler.stop(), "SIGTERM stops the scheduler gracefully");
}

#[test]
fn a_pod_too_big_for_every_node_waits_until_a_node_fits() {
    let s = Server::start();
    for n in ["node-1", "node-2", "node-3"] {
        create_node(&s, n, "2", "110", json!({}), json!([]));
    }
    let _scheduler = Scheduler::start(&s);
    create_pod(&s, "big", spec("8"));
    let expected = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are \
                    available: 3 No preemption victims found for incoming pod.";
    assert_eq!(wait_unschedulable(&s, "big"), expected);
    let events = eventually("FailedScheduling event", DEADLINE, || {
        let m = event_messages(&s, "big", "FailedScheduling");
        (!m.is_empty()).then_some(m)
    });
    assert_eq!(events, vec![expected.to_owned()]);
    assert!(pod(&s, "big")["spec"]["nodeName"].is_null());
    // A node big enough arrives: the pod leaves the unschedulable pods and is placed.
    create_node(&s, "node-big", "16", "110", json!({}), json!([]));
    assert_eq!(wait_bound(&s, "big"), "node-big");
}

#[test]
fn taints_tolerations_and_node_selectors_are_respected() {
    let s = Server::start();
    create_node(
        &s,
        "gpu-1",
        "4",
        "110",
        json!({"gpu": "true"}),
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    );
    create_node(&s, "ssd-1", "4", "110", json!({"disk": "ssd"}), json!([]));
    let _scheduler = Scheduler::start(&s);
    let mut ssd = spec("100m");
    ssd["nodeSelector"] = json!({"disk": "ssd"});
    create_pod(&s, "wants-ssd", ssd);
    let mut gpu = spec("100m");
    gpu["nodeSelector"] = json!({"gpu": "true"});
    create_pod(&s, "wants-gpu-untolerated", gpu.clone());
    gpu["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
    create_pod(&s, "wants-gpu", gpu);
    // Without a nodeSelector, the taint keeps an ordinary pod off gpu-1.
    for i in 0..3 {
        create_pod(&s, &format!("plain-{i}"), spec("100m"));
    }
    assert_eq!(wait_bound(&s, "wants-ssd"), "ssd-1");
    assert_eq!(wait_bound(&s, "wants-gpu"), "gpu-1");
    for i in 0..3 {
        assert_eq!(wait_bound(&s, &format!("plain-{i}")), "ssd-1");
    }
    assert_eq!(
        wait_unschedulable(&s, "wants-gpu-untolerated"),
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) \
         had untolerated taint {dedicated: gpu}. preemption: 0/2 nodes are available: 2 \
         Preemption is not helpful for scheduling."
    );
}

#[test]
fn full_nodes_are_skipped() {
    let s = Server::start();
    // full-pods allows one pod and has one; full-cpu has 1 cpu, all requested.
    create_node(&s, "full-pods", "8", "1", json!({}), json!([]));
    create_node(&s, "full-cpu", "1", "110", json!({}), json!([]));
    create_node(&s, "roomy", "2", "110", json!({}), json!([]));
    let mut on_pods = spec("100m");
    on_pods["nodeName"] = json!("full-pods");
    create_pod(&s, "resident-1", on_pods);
    let mut on_cpu = spec("1");
    on_cpu["nodeName"] = json!("full-cpu");
    create_pod(&s, "resident-2", on_cpu);
    let _scheduler = Scheduler::start(&s);
    for i in 0..3 {
        create_pod(&s, &format!("new-{i}"), spec("500m"));
    }
    for i in 0..3 {
        assert_eq!(wait_bound(&s, &format!("new-{i}")), "roomy");
    }
    // roomy now has 1500m of 2 cpus requested: the next 1-cpu pod fits nowhere.
    create_pod(&s, "one-too-many", spec("1"));
    assert_eq!(
        wait_unschedulable(&s, "one-too-many"),
        "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu. preemption: 0/3 nodes \
         are available: 3 No preemption victims found for incoming pod."
    );
}
