//! End to end: DaemonSets. The API server, the controller-manager, the scheduler and three
//! simulated kubelets as separate processes, driven by the real kubectl: a DaemonSet gets one
//! Running pod per node (`kubectl rollout status` returns), pinned by node affinity and bound
//! by the scheduler; a tainted node gets none unless the template tolerates the taint;
//! `kubectl set image` rolls out a second ControllerRevision, `kubectl rollout history` lists
//! both and `kubectl rollout undo` goes back to the first.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support;

use serde_json::Value;
use support::component::Component;
use support::process_cluster::ProcessCluster;
use support::{Server, eventually};

/// How long a rollout may take on a loaded test machine.
const ROLLOUT: Duration = Duration::from_secs(90);

fn cluster() -> ProcessCluster {
    ProcessCluster::start(3)
}

fn daemon_set_yaml(name: &str, image: &str, extra_pod_spec: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
spec:
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
{extra_pod_spec}      containers:
      - name: main
        image: {image}
"
    )
}

fn rollout_status(s: &Server, name: &str) -> String {
    let run = s.kubectl(&[
        "rollout",
        "status",
        &format!("daemonset/{name}"),
        "--timeout=90s",
    ]);
    assert!(run.ok(), "rollout status: {run}");
    run.stdout
}

/// `(pod, node, image, phase)` of the DaemonSet's pods that are not being deleted.
fn pods_of(s: &Server, name: &str) -> Vec<(String, String, String, String)> {
    let list = s.kubectl_json(&["get", "pods", "-l", &format!("app={name}"), "-o", "json"]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["status"]["phase"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until the DaemonSet runs exactly one Running pod of `image` on each of `nodes`.
fn wait_for_pods(s: &Server, name: &str, image: &str, nodes: &[&str]) {
    let want: BTreeSet<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
    eventually(
        &format!("{name}: {image} Running on {nodes:?}"),
        ROLLOUT,
        || {
            let pods = pods_of(s, name);
            let on: BTreeSet<String> = pods.iter().map(|p| p.1.clone()).collect();
            let all_right = pods.len() == nodes.len()
                && on == want
                && pods.iter().all(|p| p.2 == image && p.3 == "Running");
            all_right.then_some(())
        },
    );
}

fn daemon_set_json(s: &Server, name: &str) -> Value {
    s.kubectl_json(&["get", "daemonset", name, "-o", "json"])
}

#[test]
fn a_daemon_set_runs_on_every_node_rolls_out_and_undoes() {
    let c = cluster();
    let s = &c.s;
    s.apply_ok(&daemon_set_yaml("logger", "logger:v1", ""), &[]);
    let out = rollout_status(s, "logger");
    assert!(
        out.contains("daemon set \"logger\" successfully rolled out"),
        "{out}"
    );
    wait_for_pods(s, "logger", "logger:v1", &["node-0", "node-1", "node-2"]);
    let ds = daemon_set_json(s, "logger");
    let status = &ds["status"];
    assert_eq!(status["desiredNumberScheduled"], 3, "{ds}");
    assert_eq!(status["currentNumberScheduled"], 3, "{ds}");
    assert_eq!(status["numberMisscheduled"], 0, "{ds}");
    assert_eq!(status["updatedNumberScheduled"], 3, "{ds}");
    eventually("numberReady 3", ROLLOUT, || {
        (daemon_set_json(s, "logger")["status"]["numberReady"] == 3).then_some(())
    });

    // The pods are pinned by node affinity (the scheduler bound them), labelled with the
    // revision's hash and the template generation, and tolerate not-ready nodes.
    let pod = &s.kubectl_json(&["get", "pods", "-l", "app=logger", "-o", "json"])["items"][0];
    let term = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0];
    assert_eq!(term["matchFields"][0]["key"], "metadata.name", "{pod}");
    assert_eq!(
        term["matchFields"][0]["values"][0], pod["spec"]["nodeName"],
        "{pod}"
    );
    assert_eq!(
        pod["metadata"]["labels"]["pod-template-generation"], "1",
        "{pod}"
    );
    let hash = pod["metadata"]["labels"]["controller-revision-hash"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!hash.is_empty(), "{pod}");
    let tolerations = pod["spec"]["tolerations"].to_string();
    assert!(
        tolerations.contains("node.kubernetes.io/not-ready"),
        "{tolerations}"
    );

    // One ControllerRevision, served with kube-apiserver's columns.
    let table = s.kubectl_ok(&["get", "controllerrevisions"]);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "CONTROLLER", "REVISION", "AGE"], "{table}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..3],
        [
            format!("logger-{hash}").as_str(),
            "daemonset.apps/logger",
            "1"
        ],
        "{table}"
    );

    // Events as Kubernetes words them.
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=DaemonSet,involvedObject.name=logger",
    ]);
    assert!(events.contains("SuccessfulCreate"), "{events}");
    assert!(events.contains("Created pod: logger-"), "{events}");

    // A new image rolls out node by node.
    s.kubectl_ok(&["set", "image", "daemonset/logger", "main=logger:v2"]);
    rollout_status(s, "logger");
    wait_for_pods(s, "logger", "logger:v2", &["node-0", "node-1", "node-2"]);
    let ds = daemon_set_json(s, "logger");
    assert_eq!(ds["status"]["updatedNumberScheduled"], 3, "{ds}");
    assert_eq!(
        ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"], "2",
        "{ds}"
    );
    let history = s.kubectl_ok(&["rollout", "history", "daemonset/logger"]);
    let revisions: Vec<&str> = history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let detail = s.kubectl_ok(&["rollout", "history", "daemonset/logger", "--revision=1"]);
    assert!(detail.contains("logger:v1"), "{detail}");

    // Undo: back to v1, whose revision is renumbered 3.
    let undo = s.kubectl_ok(&["rollout", "undo", "daemonset/logger"]);
    assert!(undo.contains("rolled back"), "{undo}");
    rollout_status(s, "logger");
    wait_for_pods(s, "logger", "logger:v1", &["node-0", "node-1", "node-2"]);
    eventually("revisions 2 and 3", ROLLOUT, || {
        let history = s.kubectl_ok(&["rollout", "history", "daemonset/logger"]);
        let revisions: Vec<String> = history
            .lines()
            .skip_while(|l| !l.starts_with("REVISION"))
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        (revisions == ["2", "3"]).then_some(())
    });
    let table = s.kubectl_ok(&["get", "controllerrevisions"]);
    assert!(
        table.contains(&format!("logger-{hash}")),
        "the v1 revision is reused: {table}"
    );
}

#[test]
fn a_tainted_node_gets_no_pod_unless_tolerated() {
    let c = cluster();
    let s = &c.s;
    s.kubectl_ok(&["taint", "nodes", "node-0", "dedicated=infra:NoSchedule"]);
    s.apply_ok(&daemon_set_yaml("plain", "logger:v1", ""), &[]);
    rollout_status(s, "plain");
    wait_for_pods(s, "plain", "logger:v1", &["node-1", "node-2"]);
    let ds = daemon_set_json(s, "plain");
    assert_eq!(ds["status"]["desiredNumberScheduled"], 2, "{ds}");

    let toleration = "      tolerations:\n      - key: dedicated\n        operator: Exists\n        effect: NoSchedule\n";
    s.apply_ok(&daemon_set_yaml("tolerant", "logger:v1", toleration), &[]);
    rollout_status(s, "tolerant");
    wait_for_pods(s, "tolerant", "logger:v1", &["node-0", "node-1", "node-2"]);

    // A node that comes to match a nodeSelector gets a pod; one that stops matching loses it.
    let selector = "      nodeSelector:\n        role: edge\n";
    s.apply_ok(&daemon_set_yaml("edge", "logger:v1", selector), &[]);
    s.kubectl_ok(&["label", "nodes", "node-2", "role=edge"]);
    wait_for_pods(s, "edge", "logger:v1", &["node-2"]);
    s.kubectl_ok(&["label", "nodes", "node-2", "role-"]);
    eventually("the edge pod goes", ROLLOUT, || {
        pods_of(s, "edge").is_empty().then_some(())
    });
}

#[test]
fn the_controller_works_with_only_its_role() {
    // As `miniplane up` runs it: each controller writes as its own ServiceAccount, here
    // `kube-system/daemon-set-controller` bound to `system:controller:daemon-set-controller`.
    let s = Server::start_secure(&[]);
    let (_kubelet, _scheduler) = support::process_cluster::secure_nodes_and_scheduler(&s, 2);
    let manager = Component::start_as(
        &s,
        &[
            "controller-manager",
            "--listen",
            "127.0.0.1:0",
            "--controllers",
            "daemonset,garbagecollector",
            "--use-service-account-credentials",
        ],
        "miniplane controller-manager started",
        "system:kube-controller-manager",
        &[],
    );
    eventually("two nodes", ROLLOUT, || {
        let nodes = s.kubectl_json(&["get", "nodes", "-o", "json"]);
        (nodes["items"].as_array().map_or(0, Vec::len) == 2).then_some(())
    });
    s.apply_ok(&daemon_set_yaml("logger", "logger:v1", ""), &[]);
    rollout_status(&s, "logger");
    s.kubectl_ok(&["set", "image", "daemonset/logger", "main=logger:v2"]);
    rollout_status(&s, "logger");
    wait_for_pods(&s, "logger", "logger:v2", &["node-0", "node-1"]);
    let log = manager.log();
    assert!(
        !log.contains("Forbidden") && !log.contains(" 403"),
        "the controller was refused:\n{log}"
    );
}
