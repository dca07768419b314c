//! The DaemonSet's status: how many nodes run its pod, and how well.
//!
//! Mirrors `updateDaemonSetStatus` and `storeDaemonSetStatus` in
//! `pkg/controller/daemon/daemon_controller.go` (and `podByCreationTimestampAndPhase`).
//!
//! ```text
//!   per node:  should run?  has a pod?   counts
//!              yes          no           desired
//!              yes          yes          desired, current; the oldest pod: ready → ready,
//!                                        available → available, updated → updated
//!              no           yes          misscheduled
//!   numberUnavailable = desired - available
//! ```
//!
//! `kubectl rollout status daemonset/x` waits for `updatedNumberScheduled` and
//! `numberAvailable` to reach `desiredNumberScheduled` once `observedGeneration` caught up.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};

use super::placement::node_should_run_daemon_pod;
use super::rolling::is_pod_updated;
use crate::pod_readiness::{is_pod_available, is_pod_ready};

/// `podByCreationTimestampAndPhase`: scheduled pods first, then oldest first, then by name.
pub fn by_creation_timestamp_and_phase(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    scheduled(b)
        .cmp(&scheduled(a))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a).cmp(&created(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The counts `updateDaemonSetStatus` computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// `desiredNumberScheduled`.
    pub desired: i32,
    /// `currentNumberScheduled`.
    pub current: i32,
    /// `numberMisscheduled`.
    pub misscheduled: i32,
    /// `numberReady`.
    pub ready: i32,
    /// `updatedNumberScheduled`.
    pub updated: i32,
    /// `numberAvailable`.
    pub available: i32,
}

impl Counts {
    /// `numberUnavailable`.
    pub fn unavailable(&self) -> i32 {
        self.desired - self.available
    }
}

/// `updateDaemonSetStatus`'s counting over `nodes` and the pods by target node.
pub fn calculate_counts(
    ds: &DaemonSet,
    nodes: &[&Node],
    node_to_pods: &BTreeMap<String, Vec<&Pod>>,
    hash: &str,
    template_generation: Option<i64>,
    now: Timestamp,
) -> Counts {
    let template = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let mut c = Counts::default();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let pods = node_to_pods
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let scheduled = !pods.is_empty();
        if !node_should_run_daemon_pod(template, node).should_run {
            if scheduled {
                c.misscheduled += 1;
            }
            continue;
        }
        c.desired += 1;
        let Some(pod) = pods
            .iter()
            .copied()
            .min_by(|a, b| by_creation_timestamp_and_phase(a, b))
        else {
            continue;
        };
        c.current += 1;
        if is_pod_ready(pod) {
            c.ready += 1;
            if is_pod_available(pod, min_ready, now) {
                c.available += 1;
            }
        }
        if is_pod_updated(pod, hash, template_generation) {
            c.updated += 1;
        }
    }
    c
}

/// `storeDaemonSetStatus`: the DaemonSet to PUT to `/status`, or `None` when the counts are
/// unchanged and `observedGeneration` is current. `update_observed_generation` is false
/// while creations or deletions are still expected.
pub fn status_update(
    ds: &DaemonSet,
    counts: Counts,
    update_observed_generation: bool,
) -> Option<DaemonSet> {
    let current = ds.status.clone().unwrap_or_default();
    let generation = ds.metadata.generation.unwrap_or(0);
    let unchanged = current.desired_number_scheduled == counts.desired
        && current.current_number_scheduled == counts.current
        && current.number_misscheduled == counts.misscheduled
        && current.number_ready == counts.ready
        && current.updated_number_scheduled.unwrap_or(0) == counts.updated
        && current.number_available.unwrap_or(0) == counts.available
        && current.number_unavailable.unwrap_or(0) == counts.unavailable()
        && current.observed_generation.unwrap_or(0) >= generation;
    if unchanged {
        return None;
    }
    let mut status = DaemonSetStatus {
        desired_number_scheduled: counts.desired,
        current_number_scheduled: counts.current,
        number_misscheduled: counts.misscheduled,
        number_ready: counts.ready,
        updated_number_scheduled: Some(counts.updated),
        number_available: Some(counts.available),
        number_unavailable: Some(counts.unavailable()),
        ..current
    };
    if update_observed_generation {
        status.observed_generation = ds.metadata.generation;
    }
    let mut updated = ds.clone();
    updated.status = Some(status);
    Some(updated)
}
