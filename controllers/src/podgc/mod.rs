//! The pod garbage collector: removes pods no kubelet will ever finish.
//!
//! Mirrors `pkg/controller/podgc/gc_controller.go` (`gc`, `gcTerminated`, `gcOrphaned`,
//! `gcUnscheduledTerminating`, `gcTerminating`, `markFailedAndDeletePodWithCondition`). Every
//! `gcCheckPeriod` (20 s) it plans from the caches ([`plan`]); the shell ([`controller`])
//! confirms missing nodes with a live GET and force-deletes.
//!
//! | pass | which pods | what happens |
//! | --- | --- | --- |
//! | terminating | being deleted on a NotReady node tainted `node.kubernetes.io/out-of-service` | phase Failed, deleted with grace 0 |
//! | terminated | Succeeded/Failed beyond `--terminated-pod-gc-threshold` (12,500), oldest first | deleted with grace 0 |
//! | orphaned | bound to a node that no longer exists (missing for the 40 s quarantine, then confirmed by a GET) | phase Failed + condition `DisruptionTarget` (`DeletionByPodGC`, "PodGC: node no longer exists"), deleted with grace 0 |
//! | unscheduled terminating | being deleted and never bound | deleted with grace 0 |

pub mod controller;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apimachinery::ObjectKey;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::pod_readiness::pod_phase;

/// The out-of-service taint (`v1.TaintNodeOutOfService`).
pub const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// The condition reason PodGC sets.
pub const REASON_DELETION_BY_POD_GC: &str = "DeletionByPodGC";
/// Its message for orphaned pods.
pub const MESSAGE_NODE_GONE: &str = "PodGC: node no longer exists";

/// The controller's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `--terminated-pod-gc-threshold` (12,500; 0 disables the terminated pass).
    pub terminated_pod_threshold: usize,
    /// `gcCheckPeriod` (20 s).
    pub check_period: Duration,
    /// `quarantineTime` (40 s): how long a node must be missing before its pods go.
    pub quarantine: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            terminated_pod_threshold: 12_500,
            check_period: Duration::from_secs(20),
            quarantine: Duration::from_secs(40),
        }
    }
}

/// One pass's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Terminating pods on out-of-service nodes.
    pub terminating: Vec<ObjectKey>,
    /// Terminated pods beyond the threshold, oldest first.
    pub terminated: Vec<ObjectKey>,
    /// Nodes missing for the whole quarantine: confirm with a GET, then delete their pods.
    pub nodes_to_verify: Vec<String>,
    /// Pods being deleted that were never bound.
    pub unscheduled_terminating: Vec<ObjectKey>,
}

fn is_terminated(pod: &Pod) -> bool {
    matches!(pod_phase(pod), "Succeeded" | "Failed")
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn out_of_service_and_not_ready(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == TAINT_OUT_OF_SERVICE));
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    tainted && !ready
}

/// One `gc` pass over the cached pods and nodes. `missing_since` is the quarantine (node name
/// → when it was first seen missing), kept by the caller across passes.
pub fn plan(
    pods: &[&Pod],
    nodes: &BTreeMap<String, &Node>,
    missing_since: &mut BTreeMap<String, Timestamp>,
    config: &Config,
    now: Timestamp,
) -> Plan {
    let mut out = Plan::default();
    for pod in pods {
        let key = ObjectKey::from_meta(&pod.metadata);
        let node = node_name(pod);
        if pod.metadata.deletion_timestamp.is_some() {
            if node.is_empty() {
                out.unscheduled_terminating.push(key);
                continue;
            }
            if !is_terminated(pod)
                && nodes
                    .get(node)
                    .is_some_and(|n| out_of_service_and_not_ready(n))
            {
                out.terminating.push(key);
            }
        }
    }
    if config.terminated_pod_threshold > 0 {
        let mut terminated: Vec<&&Pod> = pods.iter().filter(|p| is_terminated(p)).collect();
        if terminated.len() > config.terminated_pod_threshold {
            terminated.sort_by_key(|p| {
                (
                    p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    p.metadata.name.clone(),
                )
            });
            let excess = terminated.len() - config.terminated_pod_threshold;
            out.terminated = terminated
                .into_iter()
                .take(excess)
                .map(|p| ObjectKey::from_meta(&p.metadata))
                .collect();
        }
    }
    let missing: BTreeSet<&str> = pods
        .iter()
        .map(|p| node_name(p))
        .filter(|n| !n.is_empty() && !nodes.contains_key(*n))
        .collect();
    missing_since.retain(|n, _| missing.contains(n.as_str()));
    for node in missing {
        let since = *missing_since.entry(node.to_owned()).or_insert(now);
        let quarantine = jiff::SignedDuration::try_from(config.quarantine).unwrap_or_default();
        if now.duration_since(since) >= quarantine {
            out.nodes_to_verify.push(node.to_owned());
        }
    }
    out
}

/// Whether `pod` is bound to `node`.
pub fn on_node(pod: &Pod, node: &str) -> bool {
    node_name(pod) == node
}

/// `markFailedAndDeletePodWithCondition`'s status patch: phase Failed unless already
/// terminal, and with `condition` (`DisruptionTarget`) when given.
pub fn failed_status_patch(
    pod: &Pod,
    with_condition: bool,
    now: Timestamp,
) -> Option<serde_json::Value> {
    let mut status = serde_json::Map::new();
    if !is_terminated(pod) {
        status.insert("phase".into(), "Failed".into());
    }
    if with_condition {
        status.insert(
            "conditions".into(),
            serde_json::json!([{
                "type": "DisruptionTarget",
                "status": "True",
                "reason": REASON_DELETION_BY_POD_GC,
                "message": MESSAGE_NODE_GONE,
                "lastTransitionTime": now.to_string(),
            }]),
        );
    }
    (!status.is_empty()).then(|| serde_json::json!({ "status": status }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str, phase: &str, deleting: bool, created: i64) -> Pod {
        let mut meta = json!({"name": name, "namespace": "default",
            "creationTimestamp": Timestamp::from_second(created).expect("time").to_string()});
        if deleting {
            meta["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        }
        serde_json::from_value(
            json!({"metadata": meta, "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase}}),
        )
        .expect("pod")
    }

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("node")
    }

    #[test]
    fn pods_of_a_missing_node_wait_out_the_quarantine() {
        let pods = [
            pod("a", "gone", "Running", false, 1),
            pod("b", "here", "Running", false, 1),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let here = node("here");
        let nodes: BTreeMap<String, &Node> = [("here".to_owned(), &here)].into_iter().collect();
        let mut quarantine = BTreeMap::new();
        let config = Config::default();
        let t0 = Timestamp::from_second(1_000).expect("time");
        assert!(
            plan(&refs, &nodes, &mut quarantine, &config, t0)
                .nodes_to_verify
                .is_empty()
        );
        let t1 = Timestamp::from_second(1_041).expect("time");
        assert_eq!(
            plan(&refs, &nodes, &mut quarantine, &config, t1).nodes_to_verify,
            vec!["gone".to_owned()]
        );
    }

    #[test]
    fn terminated_pods_beyond_the_threshold_go_oldest_first() {
        let pods = [
            pod("new", "n", "Succeeded", false, 30),
            pod("old", "n", "Failed", false, 10),
            pod("mid", "n", "Succeeded", false, 20),
            pod("run", "n", "Running", false, 5),
            pod("unbound", "", "Pending", true, 5),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let n = node("n");
        let nodes: BTreeMap<String, &Node> = [("n".to_owned(), &n)].into_iter().collect();
        let config = Config {
            terminated_pod_threshold: 1,
            ..Config::default()
        };
        let out = plan(
            &refs,
            &nodes,
            &mut BTreeMap::new(),
            &config,
            Timestamp::UNIX_EPOCH,
        );
        let names: Vec<&str> = out.terminated.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec!["old", "mid"]);
        assert_eq!(out.unscheduled_terminating.len(), 1);
        assert_eq!(
            failed_status_patch(&pods[3], true, Timestamp::UNIX_EPOCH)
                .and_then(|p| p["status"]["phase"].as_str().map(str::to_owned)),
            Some("Failed".to_owned())
        );
        assert_eq!(
            failed_status_patch(&pods[0], false, Timestamp::UNIX_EPOCH),
            None
        );
    }
}
