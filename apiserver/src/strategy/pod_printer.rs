//! The `kubectl get pods` row (`printPod` in `pkg/printers/internalversion/printers.go`): how
//! READY, STATUS and RESTARTS are computed from the pod's status.
//!
//! STATUS is not simply `status.phase`; the printer walks the container statuses and shows the
//! most telling reason:
//!
//! ```text
//! phase Pending, no statuses                         → Pending
//! init container 0 of 2 still running                → Init:0/2
//! init container waiting in CrashLoopBackOff         → Init:CrashLoopBackOff
//! container waiting: ContainerCreating/ErrImagePull  → ContainerCreating / ErrImagePull / ...
//! container terminated with reason Completed         → Completed
//! deletionTimestamp set, phase not terminal          → Terminating
//! ```
//!
//! RESTARTS is the sum of restart counts, with the age of the last restart: `2 (5m ago)`.

use super::TableColumn;
use super::table::{column, text};
use super::typed::age;
use apimachinery::duration::since;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use serde_json::Value;

/// The pod table's columns after `Name`.
pub fn pod_columns() -> Vec<TableColumn> {
    vec![
        column(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
            0,
        ),
        column(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
            0,
        ),
        column(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            0,
        ),
        super::table::age_column(),
        column(
            "IP",
            "string",
            "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            1,
        ),
        column(
            "Node",
            "string",
            "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
            1,
        ),
        column(
            "Nominated Node",
            "string",
            "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
            1,
        ),
        column(
            "Readiness Gates",
            "string",
            "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
            1,
        ),
    ]
}

fn is_restartable_init(c: Option<&Container>) -> bool {
    c.and_then(|c| c.restart_policy.as_deref()) == Some("Always")
}

fn last_termination(status: &ContainerStatus) -> Option<Timestamp> {
    status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.as_ref())
        .map(|t| t.0)
}

fn condition_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// The pod's first IP (`status.podIPs[0]`), as the printer and the `status.podIP` field
/// selector read it; empty before the kubelet reports one.
pub fn pod_ip(status: &PodStatus) -> String {
    status
        .pod_ips
        .as_ref()
        .and_then(|ips| ips.first())
        .map(|ip| ip.ip.clone())
        .unwrap_or_default()
}

/// The pod's row cells after `Name`, as `printPod` computes them.
pub fn pod_row(pod: &Pod, now: Timestamp) -> Vec<Value> {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let init_specs = spec.init_containers.clone().unwrap_or_default();
    let find_init = |name: &str| init_specs.iter().find(|c| c.name == name);

    let total = spec.containers.len()
        + init_specs
            .iter()
            .filter(|c| is_restartable_init(Some(c)))
            .count();
    let mut ready = 0usize;
    let phase = status.phase.clone().unwrap_or_default();
    let mut reason = status
        .reason
        .clone()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| phase.clone());
    if status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
    {
        reason = "SchedulingGated".to_owned();
    }

    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_sidecar_restart: Option<Timestamp> = None;
    let mut initializing = false;
    let init_statuses = status.init_container_statuses.clone().unwrap_or_default();
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += i64::from(c.restart_count);
        let term = last_termination(c);
        last_restart = last_restart.max(term);
        let restartable = is_restartable_init(find_init(&c.name));
        if restartable {
            sidecar_restarts += i64::from(c.restart_count);
            last_sidecar_restart = last_sidecar_restart.max(term);
        }
        let state = c.state.clone().unwrap_or_default();
        let terminated = state.terminated.as_ref();
        let waiting_reason = state
            .waiting
            .as_ref()
            .and_then(|w| w.reason.clone())
            .unwrap_or_default();
        if terminated.is_some_and(|t| t.exit_code == 0) {
            continue;
        } else if restartable && c.started == Some(true) {
            if c.ready {
                ready += 1;
            }
            continue;
        } else if let Some(t) = terminated {
            reason = match t.reason.as_deref().unwrap_or("") {
                "" => match t.signal.unwrap_or(0) {
                    0 => format!("Init:ExitCode:{}", t.exit_code),
                    sig => format!("Init:Signal:{sig}"),
                },
                r => format!("Init:{r}"),
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in status.container_statuses.iter().flatten().rev() {
            restarts += i64::from(c.restart_count);
            last_restart = last_restart.max(last_termination(c));
            let state = c.state.clone().unwrap_or_default();
            let waiting = state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .unwrap_or_default();
            if !waiting.is_empty() {
                reason = waiting;
            } else if let Some(t) = &state.terminated {
                reason = match t.reason.as_deref().unwrap_or("") {
                    "" => match t.signal.unwrap_or(0) {
                        0 => format!("ExitCode:{}", t.exit_code),
                        sig => format!("Signal:{sig}"),
                    },
                    r => r.to_owned(),
                };
            } else if c.ready && state.running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_true(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .to_owned();
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if status.reason.as_deref() == Some("NodeLost") {
            reason = "Unknown".to_owned();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_owned();
        }
    }

    let restarts_cell = match last_restart {
        Some(ts) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(ts), now)),
        _ => restarts.to_string(),
    };

    let pod_ip = pod_ip(&status);
    let none_if_empty = |s: String| if s.is_empty() { "<none>".to_owned() } else { s };
    let gates = spec.readiness_gates.clone().unwrap_or_default();
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let true_count = gates
            .iter()
            .filter(|g| condition_true(pod, &g.condition_type))
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        text(format!("{ready}/{total}")),
        text(reason),
        text(restarts_cell),
        text(age(&pod.metadata, now)),
        text(none_if_empty(pod_ip)),
        text(none_if_empty(spec.node_name.clone().unwrap_or_default())),
        text(none_if_empty(
            status.nominated_node_name.clone().unwrap_or_default(),
        )),
        text(readiness_gates),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(pod: serde_json::Value) -> Vec<Value> {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        pod_row(&pod, "2024-01-01T01:00:00Z".parse().unwrap())
    }

    fn status_of(status: serde_json::Value) -> (Value, Value, Value) {
        let r = row(json!({
            "metadata": {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"initContainers": [{"name": "init", "image": "busybox"}], "containers": [{"name": "a", "image": "x"}]},
            "status": status
        }));
        (r[0].clone(), r[1].clone(), r[2].clone())
    }

    #[test]
    fn running_pod_with_restarts() {
        let r = row(json!({
            "metadata": {"name": "nginx", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.244.0.5"}], "containerStatuses": [
                {"name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-01-01T00:55:00Z"}}},
                {"name": "b", "image": "y", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
            ]}
        }));
        assert_eq!(
            r,
            vec![
                json!("1/2"),
                json!("ContainerCreating"),
                json!("2 (5m ago)"),
                json!("60m"),
                json!("10.244.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn status_reasons() {
        assert_eq!(status_of(json!({"phase": "Pending"})).1, json!("Pending"));
        assert_eq!(
            status_of(json!({"phase": "Pending", "initContainerStatuses": [{"name": "init", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}}]})).1,
            json!("Init:0/1")
        );
        assert_eq!(
            status_of(json!({"phase": "Pending", "initContainerStatuses": [{"name": "init", "image": "", "imageID": "", "ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})).1,
            json!("Init:CrashLoopBackOff")
        );
        let done_init = json!({"name": "init", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
        assert_eq!(
            status_of(
                json!({"phase": "Running", "initContainerStatuses": [done_init], "containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})
            ),
            (json!("0/1"), json!("CrashLoopBackOff"), json!("4"))
        );
        assert_eq!(
            status_of(json!({"phase": "Succeeded", "initContainerStatuses": [done_init], "containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]})).1,
            json!("Completed")
        );
        assert_eq!(
            status_of(json!({"phase": "Failed", "initContainerStatuses": [done_init], "containerStatuses": [{"name": "a", "image": "", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}]})).1,
            json!("ExitCode:137")
        );
    }

    #[test]
    fn terminating_and_gated() {
        let r = row(json!({
            "metadata": {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z", "deletionTimestamp": "2024-01-01T00:59:00Z"},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running"}
        }));
        assert_eq!(r[1], json!("Terminating"));
        let r = row(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "www.example.com/ready"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}
        }));
        assert_eq!(r[1], json!("SchedulingGated"));
        assert_eq!(r[3], json!("<unknown>"));
        assert_eq!(r[7], json!("0/1"));
    }
}
