//! End to end: placement constraints between pods. The API server, the scheduler, the
//! controller-manager and simulated kubelets as separate processes, Deployments applied with
//! the real kubectl:
//!
//! * required `podAntiAffinity` on `kubernetes.io/hostname`: 3 replicas on 2 nodes run 2, on
//!   different nodes, and the 3rd stays Pending with kube-scheduler's own FailedScheduling
//!   message; a pod the running replicas' anti-affinity matches is kept off both nodes too;
//! * required `podAffinity`: the replicas follow another app's pod onto its node, and a pod
//!   whose affinity nothing matches waits (preemption cannot help it);
//! * `topologySpreadConstraints` (maxSkew 1, `DoNotSchedule`, `topology.kubernetes.io/zone`)
//!   on nodes labelled two zones of unequal size: the zones end even, not the nodes;
//!
//! and in each case the scheduler's verdict per node in the trace (`filter.<node>`, as
//! `miniplane trace` shows it), naming `InterPodAffinity` or `PodTopologySpread`.
// Functions outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;

use serde_json::Value;
use support::process_cluster::ProcessCluster;
use support::scheduler_view::{failed_scheduling, scheduler_spans};
use support::{DEADLINE, Server, eventually};

fn cluster(nodes: usize) -> ProcessCluster {
    ProcessCluster::start(nodes)
}

/// A Deployment of `replicas` pods labelled `app=<name>`, with `placement` (YAML at the pod
/// spec's indentation: `affinity:` or `topologySpreadConstraints:`) in its pod template.
fn deployment(name: &str, replicas: u32, placement: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: main
        image: nginx
{placement}"
    )
}

/// Required anti-affinity (or affinity, with `kind: podAffinity`) to the pods labelled
/// `app=<app>`, on `topology_key`.
fn required(kind: &str, app: &str, topology_key: &str) -> String {
    format!(
        "      affinity:
        {kind}:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels: {{app: {app}}}
            topologyKey: {topology_key}
"
    )
}

/// One pod as the test sees it.
#[derive(Debug, Clone)]
struct PodView {
    name: String,
    node: Option<String>,
    phase: String,
    /// `status.conditions[type=PodScheduled]`: (status, reason, message).
    scheduled: Option<(String, String, String)>,
}

fn pods(s: &Server, selector: &str) -> Vec<PodView> {
    let list = s.kubectl_json(&["get", "pods", "-l", selector]);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| PodView {
            name: text(&p["metadata"]["name"]),
            node: p["spec"]["nodeName"].as_str().map(str::to_owned),
            phase: text(&p["status"]["phase"]),
            scheduled: p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "PodScheduled")
                .map(|c| (text(&c["status"]), text(&c["reason"]), text(&c["message"]))),
        })
        .collect()
}

/// Waits until `selector`'s pods are `running` Running ones and `pending` unschedulable
/// ones (PodScheduled False, reason Unschedulable); returns (running, pending).
fn wait_placed(
    s: &Server,
    selector: &str,
    running: usize,
    pending: usize,
) -> (Vec<PodView>, Vec<PodView>) {
    let what = format!("{selector}: {running} Running, {pending} unschedulable");
    eventually(&what, DEADLINE, || {
        let all = pods(s, selector);
        let (up, rest): (Vec<PodView>, Vec<PodView>) =
            all.into_iter().partition(|p| p.phase == "Running");
        let waiting = rest.iter().all(|p| {
            p.node.is_none()
                && p.scheduled.as_ref().is_some_and(|(status, reason, _)| {
                    status == "False" && reason == "Unschedulable"
                })
        });
        (up.len() == running && rest.len() == pending && waiting).then_some((up, rest))
    })
}

/// Waits for a scheduler span in the trace of `object` that `wanted` accepts; returns its
/// attributes.
fn wait_verdict(
    s: &Server,
    object: &str,
    what: &str,
    wanted: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    eventually(
        &format!("{what} in the trace of {object}"),
        DEADLINE,
        || scheduler_spans(s, object).into_iter().find(|a| wanted(a)),
    )
}

#[test]
fn anti_affinity_keeps_replicas_apart_and_the_third_waits() {
    let c = cluster(2);
    let s = &c.s;
    let anti = required("podAntiAffinity", "web", "kubernetes.io/hostname");
    s.apply_ok(&deployment("web", 3, &anti), &[]);
    let (running, pending) = wait_placed(s, "app=web", 2, 1);
    let mut nodes: Vec<String> = running.iter().filter_map(|p| p.node.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, ["node-0", "node-1"], "{running:?}");

    // kube-scheduler 1.33's words: the filter's reason per node, then DefaultPreemption's
    // (no pod of lower priority to evict on either node).
    let expected = "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. \
                    preemption: 0/2 nodes are available: 2 No preemption victims found for \
                    incoming pod.";
    let waiting = &pending[0];
    let (_, _, message) = waiting.scheduled.clone().unwrap();
    assert_eq!(message, expected, "{waiting:?}");
    let events = eventually("the FailedScheduling event", DEADLINE, || {
        let m = failed_scheduling(s, &waiting.name);
        (!m.is_empty()).then_some(m)
    });
    assert!(events.iter().all(|m| m == expected), "{events:?}");
    let described = s.kubectl_ok(&["describe", "pod", &waiting.name]);
    assert!(described.contains(expected), "{described}");

    // The trace names the plugin and the reason for each node.
    let object = format!("pod/{}", waiting.name);
    let verdict = wait_verdict(s, &object, "the unschedulable verdict", |a| {
        a.get("unschedulable").is_some_and(|v| v == "true")
            && a.get("key") == Some(&format!("default/{}", waiting.name))
    });
    for node in ["node-0", "node-1"] {
        assert_eq!(
            verdict.get(&format!("filter.{node}")).map(String::as_str),
            Some("InterPodAffinity: node(s) didn't match pod anti-affinity rules"),
            "{verdict:?}"
        );
    }

    // Symmetry: a bare pod labelled app=web has no affinity of its own, but the running
    // replicas' anti-affinity matches it, so no node takes it either.
    s.apply_ok(&support::pod_yaml("intruder", "app: web", None), &[]);
    let intruder = eventually("intruder unschedulable", DEADLINE, || {
        pods(s, "app=web")
            .into_iter()
            .find(|p| p.name == "intruder")
            .and_then(|p| p.scheduled)
            .filter(|(status, _, _)| status == "False")
    });
    assert_eq!(
        intruder.2,
        "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules. \
         preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
    let verdict = wait_verdict(s, "pod/intruder", "the intruder's verdict", |a| {
        a.get("key").is_some_and(|k| k == "default/intruder") && a.contains_key("filter.node-0")
    });
    assert_eq!(
        verdict["filter.node-0"],
        "InterPodAffinity: node(s) didn't satisfy existing pods anti-affinity rules"
    );

    // A replica goes away: its node is free, the pods waiting as unschedulable are tried
    // again (a deleted pod may let them fit), one of them takes it and the other waits.
    s.kubectl_ok(&["delete", "pod", "intruder"]);
    let gone = running[0].name.clone();
    s.kubectl_ok(&["delete", "pod", &gone]);
    let what = format!("{gone} replaced: 2 replicas on 2 nodes, 1 waiting");
    let (running, pending) = eventually(&what, DEADLINE, || {
        let (running, pending) = wait_placed(s, "app=web", 2, 1);
        running
            .iter()
            .all(|p| p.name != gone)
            .then_some((running, pending))
    });
    let mut nodes: Vec<String> = running.iter().filter_map(|p| p.node.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, ["node-0", "node-1"], "{running:?}");
    assert_eq!(pending[0].scheduled.clone().unwrap().2, expected);
}

#[test]
fn affinity_follows_another_apps_pod_and_waits_when_there_is_none() {
    let c = cluster(3);
    let s = &c.s;
    // A cache that must sit next to a database that does not exist yet: nothing matches and
    // the pod does not match its own term, so no node fits; evicting pods cannot help.
    let affinity = required("podAffinity", "db", "kubernetes.io/hostname");
    s.apply_ok(&deployment("cache", 2, &affinity), &[]);
    let (_, waiting) = wait_placed(s, "app=cache", 0, 2);
    let (_, _, message) = waiting[0].scheduled.clone().unwrap();
    assert_eq!(
        message,
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. preemption: 0/3 \
         nodes are available: 3 Preemption is not helpful for scheduling."
    );

    // The database comes: a pod bound anywhere requeues the cache pods (InterPodAffinity
    // waits for pods), and both follow it onto its node.
    s.apply_ok(&deployment("db", 1, ""), &[]);
    let (db, _) = wait_placed(s, "app=db", 1, 0);
    let db_node = db[0].node.clone().unwrap();
    let (cache, _) = wait_placed(s, "app=cache", 2, 0);
    for p in &cache {
        assert_eq!(p.node.as_deref(), Some(db_node.as_str()), "{cache:?}");
    }

    // A later replica goes the same way, and its trace says why the other nodes lost.
    s.kubectl_ok(&["scale", "deployment", "cache", "--replicas=3"]);
    let (cache, _) = wait_placed(s, "app=cache", 3, 0);
    assert!(
        cache
            .iter()
            .all(|p| p.node.as_deref() == Some(db_node.as_str())),
        "{cache:?}"
    );
    let others: Vec<String> = ["node-0", "node-1", "node-2"]
        .into_iter()
        .filter(|n| *n != db_node)
        .map(str::to_owned)
        .collect();
    let verdict = wait_verdict(s, "deployment/cache", "a placement of cache", |a| {
        a.get("node") == Some(&db_node)
            && others
                .iter()
                .all(|n| a.contains_key(&format!("filter.{n}")))
    });
    for n in &others {
        assert_eq!(
            verdict[&format!("filter.{n}")],
            "InterPodAffinity: node(s) didn't match pod affinity rules",
            "{verdict:?}"
        );
    }
}

#[test]
fn topology_spread_evens_the_zones_not_the_nodes() {
    // Two zones of unequal size: zone-a holds node-0 and node-1, zone-b node-2 alone. The
    // labels are there before the scheduler starts: a pod placed while it knew only zone-a
    // would count one domain, and then nothing would hold zone-a back.
    let zones = [
        ("node-0", "zone-a"),
        ("node-1", "zone-a"),
        ("node-2", "zone-b"),
    ];
    let c = ProcessCluster::start_with(3, |s| {
        for (node, zone) in zones {
            let label = format!("topology.kubernetes.io/zone={zone}");
            s.kubectl_ok(&["label", "node", node, &label]);
        }
    });
    let s = &c.s;
    let spread = "      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: spread}
";
    s.apply_ok(&deployment("spread", 6, spread), &[]);
    let (running, _) = wait_placed(s, "app=spread", 6, 0);
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in &running {
        *per_node.entry(p.node.clone().unwrap()).or_default() += 1;
    }
    // Spreading over nodes would give 2, 2, 2 (zone-a 4, zone-b 2: a skew of 2). The
    // constraint keeps the zones within 1 of each other at every placement, so after 6 they
    // are even: node-2 holds zone-b's 3 alone.
    let zone_a =
        per_node.get("node-0").copied().unwrap_or(0) + per_node.get("node-1").copied().unwrap_or(0);
    assert_eq!(
        (zone_a, per_node.get("node-2").copied().unwrap_or(0)),
        (3, 3),
        "{per_node:?}"
    );

    // Whichever zone got the first pod was ruled out for the second: the trace holds a
    // verdict naming the plugin for the nodes of the fuller zone.
    let reason = "PodTopologySpread: node(s) didn't match pod topology spread constraints";
    let verdict = wait_verdict(s, "deployment/spread", "a PodTopologySpread verdict", |a| {
        a.iter()
            .any(|(k, v)| k.starts_with("filter.") && v == reason)
    });
    let filtered: Vec<&str> = verdict
        .iter()
        .filter(|(k, v)| k.starts_with("filter.") && *v == reason)
        .map(|(k, _)| k.trim_start_matches("filter."))
        .collect();
    // A zone is ruled out whole: both zone-a nodes, or node-2.
    assert!(
        filtered == ["node-0", "node-1"] || filtered == ["node-2"],
        "{verdict:?}"
    );

    // A 7th replica may go to either zone (4 - 3 = 1 is within maxSkew); an 8th must then go
    // to the other one.
    s.kubectl_ok(&["scale", "deployment", "spread", "--replicas=8"]);
    let (running, _) = wait_placed(s, "app=spread", 8, 0);
    let zone_b = running
        .iter()
        .filter(|p| p.node.as_deref() == Some("node-2"))
        .count();
    assert_eq!(zone_b, 4, "{running:?}");
}
