//! The node lifecycle controller's decisions: is a node still heard from, which conditions
//! and taints should it carry, and when are pods on a `NoExecute`-tainted node evicted.
//!
//! Mirrors `pkg/controller/nodelifecycle/node_lifecycle_controller.go` (`monitorNodeHealth`,
//! `tryUpdateNodeHealth`, `doNoExecuteTaintingPass`, `doNoScheduleTaintingPass`) and
//! `pkg/controller/tainteviction/taint_eviction.go` (`processPodOnNode`,
//! `getMinTolerationTime`). The async shell is in [`controller`].
//!
//! ```text
//!  kubelet ──renews──▶ Lease (kube-node-lease)    every monitor period (5 s):
//!          ──posts──▶ Node status                 heard from (lease renewTime or Ready
//!                                                 heartbeat changed)? → probe = now
//!                                                 now − probe > grace (40 s)?
//!                                                    → conditions Unknown "NodeStatusUnknown"
//!  Ready True    → no taints                     Ready Unknown → unreachable:NoExecute+NoSchedule
//!  Ready False   → not-ready:NoExecute+NoSchedule
//!  pod on a NoExecute node: not tolerated → delete now;
//!     tolerated for S seconds → delete at taint.timeAdded + S; tolerated forever → keep
//! ```
//!
//! Like Kubernetes, "heard from" is measured on the controller's own clock (the time it
//! *observed* a change), never by comparing the kubelet's timestamps with its clock.

pub mod controller;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `node.kubernetes.io/unreachable`: the node stopped reporting (Ready Unknown).
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `node.kubernetes.io/not-ready`: the node reports Ready False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The reason set on conditions of a node that stopped reporting.
pub const REASON_UNKNOWN: &str = "NodeStatusUnknown";
/// Its message.
pub const MESSAGE_UNKNOWN: &str = "Kubelet stopped posting node status.";
/// The reason set on a node that never reported.
pub const REASON_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
/// Its message.
pub const MESSAGE_NEVER_UPDATED: &str = "Kubelet never posted node status.";
/// The conditions the controller marks Unknown (`nodeConditionsToSetUnknown`... in order).
pub const MONITORED_CONDITIONS: [&str; 4] =
    ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// The controller's flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `--node-monitor-grace-period` (40 s): silence after which a node is Unknown.
    pub node_monitor_grace_period: Duration,
    /// `--node-monitor-period` (5 s): how often nodes are checked.
    pub node_monitor_period: Duration,
    /// `--node-startup-grace-period` (60 s): how long a new node may take to post a status.
    pub node_startup_grace_period: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_monitor_grace_period: Duration::from_secs(40),
            node_monitor_period: Duration::from_secs(5),
            node_startup_grace_period: Duration::from_secs(60),
        }
    }
}

/// What the controller remembers of a node (`nodeHealthData`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeHealth {
    /// When the controller last observed the kubelet (on its own clock).
    pub probe_timestamp: Timestamp,
    /// The Ready condition's heartbeat as last observed.
    pub ready_heartbeat: Option<Timestamp>,
    /// The Lease's renewTime as last observed.
    pub lease_renew_time: Option<Timestamp>,
}

/// What to do to one node after a health check.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeDecision {
    /// New conditions to post (the kubelet went silent), if any.
    pub conditions: Option<Vec<NodeCondition>>,
    /// The node's full taint list to write, if it must change.
    pub taints: Option<Vec<Taint>>,
    /// One line for logs: what and why.
    pub summary: Option<String>,
}

fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
}

fn ready_heartbeat(node: &Node) -> Option<Timestamp> {
    ready_condition(node).and_then(|c| c.last_heartbeat_time.as_ref().map(|t| t.0))
}

fn after(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// `tryUpdateNodeHealth`: updates `health` from what the node and its Lease show now, and
/// returns the conditions to post if the node has been silent longer than the grace period.
pub fn try_update_node_health(
    node: &Node,
    lease_renew_time: Option<Timestamp>,
    health: Option<NodeHealth>,
    config: &Config,
    now: Timestamp,
) -> (NodeHealth, Option<Vec<NodeCondition>>) {
    let heartbeat = ready_heartbeat(node);
    let mut health = health.unwrap_or(NodeHealth {
        probe_timestamp: now,
        ready_heartbeat: heartbeat,
        lease_renew_time,
    });
    if health.ready_heartbeat != heartbeat {
        health.ready_heartbeat = heartbeat;
        health.probe_timestamp = now;
    }
    if lease_renew_time.is_some() && health.lease_renew_time < lease_renew_time {
        health.lease_renew_time = lease_renew_time;
        health.probe_timestamp = now;
    }
    let Some(ready) = ready_condition(node) else {
        // Never posted a status: give it the startup grace period.
        let created = node
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        if after(created, config.node_startup_grace_period) >= now {
            return (health, None);
        }
        let conditions = MONITORED_CONDITIONS
            .iter()
            .map(|t| unknown_condition(t, None, REASON_NEVER_UPDATED, MESSAGE_NEVER_UPDATED, now))
            .collect();
        return (health, Some(conditions));
    };
    let silent = after(health.probe_timestamp, config.node_monitor_grace_period) < now;
    if !silent || ready.status == "Unknown" && all_unknown(node) {
        return (health, None);
    }
    let existing = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut conditions: Vec<NodeCondition> = existing
        .iter()
        .map(|c| {
            if MONITORED_CONDITIONS.contains(&c.type_.as_str()) && c.status != "Unknown" {
                unknown_condition(&c.type_, Some(c), REASON_UNKNOWN, MESSAGE_UNKNOWN, now)
            } else {
                c.clone()
            }
        })
        .collect();
    for t in MONITORED_CONDITIONS {
        if !conditions.iter().any(|c| c.type_ == t) {
            conditions.push(unknown_condition(
                t,
                None,
                REASON_UNKNOWN,
                MESSAGE_UNKNOWN,
                now,
            ));
        }
    }
    (health, Some(conditions))
}

fn all_unknown(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    MONITORED_CONDITIONS.iter().all(|t| {
        conditions.is_some_and(|cs| cs.iter().any(|c| c.type_ == *t && c.status == "Unknown"))
    })
}

fn unknown_condition(
    type_: &str,
    previous: Option<&NodeCondition>,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: "Unknown".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        // The heartbeat stays what the kubelet last posted; the transition is now.
        last_heartbeat_time: previous.and_then(|c| c.last_heartbeat_time.clone()),
        last_transition_time: Some(Time(now)),
    }
}

/// The not-ready / unreachable taints (both effects) that `ready_status` calls for.
fn wanted_taints(ready_status: Option<&str>, now: Timestamp) -> Vec<Taint> {
    let key = match ready_status {
        Some("False") => TAINT_NOT_READY,
        Some("Unknown") => TAINT_UNREACHABLE,
        _ => return Vec::new(),
    };
    ["NoSchedule", "NoExecute"]
        .into_iter()
        .map(|effect| Taint {
            key: key.into(),
            effect: effect.into(),
            time_added: (effect == "NoExecute").then_some(Time(now)),
            value: None,
        })
        .collect()
}

/// `doNoExecuteTaintingPass` + `doNoScheduleTaintingPass` for the Ready condition: the full
/// taint list the node should have, or none if it already has it. Taints the controller does
/// not own are kept; an existing taint keeps its `timeAdded`.
pub fn reconcile_taints(
    node: &Node,
    ready_status: Option<&str>,
    now: Timestamp,
) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let owned = |t: &Taint| {
        (t.key == TAINT_NOT_READY || t.key == TAINT_UNREACHABLE)
            && (t.effect == "NoSchedule" || t.effect == "NoExecute")
    };
    let wanted = wanted_taints(ready_status, now);
    let mut next: Vec<Taint> = current.iter().filter(|t| !owned(t)).cloned().collect();
    for w in wanted {
        let kept = current
            .iter()
            .find(|t| t.key == w.key && t.effect == w.effect)
            .cloned();
        next.push(kept.unwrap_or(w));
    }
    let same = next.len() == current.len() && next.iter().all(|n| current.contains(n));
    (!same).then_some(next)
}

/// One monitor pass over one node: its health, conditions and taints.
pub fn monitor_node(
    node: &Node,
    lease_renew_time: Option<Timestamp>,
    health: Option<NodeHealth>,
    config: &Config,
    now: Timestamp,
) -> (NodeHealth, NodeDecision) {
    let (health, conditions) = try_update_node_health(node, lease_renew_time, health, config, now);
    let ready_status = match &conditions {
        Some(cs) => cs
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.as_str()),
        None => ready_condition(node).map(|c| c.status.as_str()),
    };
    let taints = reconcile_taints(node, ready_status, now);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let summary = match (&conditions, &taints) {
        (None, None) => None,
        (Some(_), _) => Some(format!(
            "node {name}: no status for more than {:?}; conditions Unknown, tainted {TAINT_UNREACHABLE}",
            config.node_monitor_grace_period
        )),
        (None, Some(t)) => Some(format!(
            "node {name}: Ready={}; taints now [{}]",
            ready_status.unwrap_or("none"),
            t.iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    (
        health,
        NodeDecision {
            conditions,
            taints,
            summary,
        },
    )
}

/// `MarkPodsNotReady` for one pod: the pod with its Ready condition turned False (its
/// transition time `now`), or `None` when it is not Ready True already.
pub fn mark_pod_not_ready(pod: &Pod, now: Timestamp) -> Option<Pod> {
    let mut pod = pod.clone();
    let ready = pod
        .status
        .as_mut()?
        .conditions
        .as_mut()?
        .iter_mut()
        .find(|c| c.type_ == "Ready")?;
    if ready.status == "False" {
        return None;
    }
    ready.status = "False".into();
    ready.last_transition_time = Some(Time(now));
    Some(pod)
}

/// Whether this check turned the node's Ready condition from True to something else (the
/// moment Kubernetes records `NodeNotReady` and marks the node's pods not ready).
pub fn became_not_ready(node: &Node, decision: &NodeDecision) -> bool {
    let observed = ready_condition(node).map(|c| c.status.as_str());
    let current = decision
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    observed == Some("True") && current.is_some_and(|c| c != "True")
}

/// What taint eviction does with one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Leave it (no NoExecute taint, or all tolerated forever).
    Keep,
    /// Delete it now.
    Now,
    /// Delete it at this time unless the taints go away first.
    At(Timestamp),
}

/// `Toleration.ToleratesTaint` (`k8s.io/api/core/v1/toleration.go`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        _ => {
            !key.is_empty()
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

/// `processPodOnNode` + `getMinTolerationTime`: every NoExecute taint must be tolerated, and
/// the pod goes after the shortest `tolerationSeconds` among the tolerations used, counted
/// from the taint's `timeAdded`.
pub fn eviction(pod: &Pod, taints: &[Taint], now: Timestamp) -> Eviction {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let mut deadline: Option<Timestamp> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Eviction::Now;
        }
        // A matching toleration without seconds tolerates forever.
        if matching.iter().any(|t| t.toleration_seconds.is_none()) {
            continue;
        }
        let seconds = matching
            .iter()
            .filter_map(|t| t.toleration_seconds)
            .min()
            .unwrap_or(0)
            .max(0);
        let added = taint.time_added.as_ref().map_or(now, |t| t.0);
        let at = after(added, Duration::from_secs(seconds.unsigned_abs()));
        deadline = Some(deadline.map_or(at, |d| d.min(at)));
    }
    match deadline {
        None => Eviction::Keep,
        Some(at) if at <= now => Eviction::Now,
        Some(at) => Eviction::At(at),
    }
}

#[cfg(test)]
mod tests;
