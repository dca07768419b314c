//! The message of a pod no node fits (`pkg/scheduler/framework/types.go` `FitError.Error()`,
//! and the `preemption: ...` suffix DefaultPreemption's PostFilter adds,
//! `pkg/scheduler/framework/preemption/preemption.go`).
//!
//! ```text
//! 0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu.
//!   preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling,
//!   2 No preemption victims found for incoming pod.
//! ```
//! (one line). Every reason of every node is counted, then the `"<count> <reason>"` strings
//! are sorted as strings (so `"10 ..."` sorts before `"2 ..."`, as in Go's `sort.Strings`).
//!
//! [`FitError`]'s own `Display` guesses the suffix without looking at the pods (nodes that
//! failed with an unresolvable reason are "not helpful", the others have "no preemption
//! victims"); the scheduler's shell writes DefaultPreemption's real answer instead
//! (`crate::preemption::failure_message`: [`FitError::reasons_message`], then the PostFilter's
//! message, none after a preemption).

use std::collections::BTreeMap;
use std::fmt;

use crate::plugins::{Code, Status};

/// `NoNodeAvailableMsg`.
const NO_NODE_AVAILABLE: &str = "0/{} nodes are available";
/// `ErrNoNodesAvailable`: there is no node at all.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// Why no node fits one pod: every node's failed filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    /// How many nodes there are.
    pub num_all_nodes: usize,
    /// The failure of each node, by node name.
    pub node_to_status: BTreeMap<String, Status>,
    /// The pod's `preemptionPolicy` is `Never`: preemption is not even tried.
    pub preemption_never: bool,
    /// The PreFilter plugin that rejected the pod before any node was looked at
    /// (`Diagnosis.PreFilterMsg`): then its message replaces the per-node counts, and every
    /// node has its status in `node_to_status` (`SetAbsentNodesStatus`).
    pub pre_filter: Option<Status>,
}

fn histogram<'a>(reasons: impl Iterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in reasons {
        *counts.entry(reason).or_default() += 1;
    }
    let mut parts: Vec<String> = counts
        .into_iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    parts.sort();
    parts.join(", ")
}

impl FitError {
    /// Whether InterPodAffinity or PodTopologySpread rejected some node: then a pod bound
    /// anywhere may let this one fit (their `EventsToRegister` include `AssignedPodAdd`).
    pub fn waits_for_pods(&self) -> bool {
        if self.pre_filter.is_some() {
            return false;
        }
        self.node_to_status.values().any(|s| {
            s.plugin == crate::plugins::inter_pod_affinity::NAME
                || s.plugin == crate::plugins::pod_topology_spread::NAME
        })
    }

    /// Whether VolumeBinding rejected the pod (at PreFilter or on some node): then a claim,
    /// volume or class added or updated may let it fit (its `EventsToRegister`).
    pub fn waits_for_volumes(&self) -> bool {
        let volume_binding = crate::plugins::volume_binding::NAME;
        self.pre_filter
            .as_ref()
            .is_some_and(|s| s.plugin == volume_binding)
            || self
                .node_to_status
                .values()
                .any(|s| s.plugin == volume_binding)
    }

    /// The PostFilter (preemption) message, without the `preemption: ` prefix.
    pub fn preemption_message(&self) -> String {
        if self.preemption_never {
            return "not eligible due to preemptionPolicy=Never.".into();
        }
        let reasons = self.node_to_status.values().map(|s| match s.code {
            Code::UnschedulableAndUnresolvable => "Preemption is not helpful for scheduling",
            Code::Unschedulable => "No preemption victims found for incoming pod",
        });
        format!(
            "{}: {}.",
            NO_NODE_AVAILABLE.replace("{}", &self.num_all_nodes.to_string()),
            histogram(reasons)
        )
    }
}

impl FitError {
    /// The message without the PostFilter's part (`FitError.Error()` with an empty
    /// `PostFilterMsg`, as after a successful preemption): `0/3 nodes are available: 3
    /// Insufficient cpu.`
    pub fn reasons_message(&self) -> String {
        let reasons = match &self.pre_filter {
            Some(status) => status.reasons.join(", "),
            None => histogram(
                self.node_to_status
                    .values()
                    .flat_map(|s| s.reasons.iter().map(String::as_str)),
            ),
        };
        format!(
            "{}: {reasons}.",
            NO_NODE_AVAILABLE.replace("{}", &self.num_all_nodes.to_string()),
        )
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} preemption: {}",
            self.reasons_message(),
            self.preemption_message()
        )
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, reasons: &[&str]) -> Status {
        Status {
            plugin: "test",
            code,
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    #[test]
    fn insufficient_cpu_everywhere() {
        let err = FitError {
            num_all_nodes: 3,
            node_to_status: ["n1", "n2", "n3"]
                .map(|n| {
                    (
                        n.to_owned(),
                        status(Code::Unschedulable, &["Insufficient cpu"]),
                    )
                })
                .into(),
            preemption_never: false,
            pre_filter: None,
        };
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
             3 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn mixed_reasons_are_counted_and_sorted_as_strings() {
        let mut node_to_status = BTreeMap::new();
        node_to_status.insert(
            "gpu".to_owned(),
            status(
                Code::UnschedulableAndUnresolvable,
                &["node(s) had untolerated taint {dedicated: gpu}"],
            ),
        );
        for i in 0..10 {
            node_to_status.insert(
                format!("small-{i}"),
                status(
                    Code::Unschedulable,
                    &["Insufficient cpu", "Insufficient memory"],
                ),
            );
        }
        node_to_status.insert(
            "full".to_owned(),
            status(Code::Unschedulable, &["Too many pods"]),
        );
        let err = FitError {
            num_all_nodes: 12,
            node_to_status,
            preemption_never: false,
            pre_filter: None,
        };
        assert_eq!(
            err.to_string(),
            "0/12 nodes are available: 1 Too many pods, 1 node(s) had untolerated taint \
             {dedicated: gpu}, 10 Insufficient cpu, 10 Insufficient memory. preemption: 0/12 \
             nodes are available: 1 Preemption is not helpful for scheduling, 11 No preemption \
             victims found for incoming pod."
        );
    }

    #[test]
    fn a_pre_filter_rejection_replaces_the_counts() {
        let rejected = status(
            Code::UnschedulableAndUnresolvable,
            &["persistentvolumeclaim \"data\" not found"],
        );
        let err = FitError {
            num_all_nodes: 3,
            node_to_status: ["n1", "n2", "n3"]
                .map(|n| (n.to_owned(), rejected.clone()))
                .into(),
            preemption_never: false,
            pre_filter: Some(rejected),
        };
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: persistentvolumeclaim \"data\" not found. preemption: \
             0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn preemption_policy_never() {
        let err = FitError {
            num_all_nodes: 1,
            node_to_status: [(
                "n1".to_owned(),
                status(
                    Code::UnschedulableAndUnresolvable,
                    &["node(s) were unschedulable"],
                ),
            )]
            .into(),
            preemption_never: true,
            pre_filter: None,
        };
        assert_eq!(
            err.to_string(),
            "0/1 nodes are available: 1 node(s) were unschedulable. preemption: not eligible \
             due to preemptionPolicy=Never."
        );
    }
}
