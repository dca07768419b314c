//! DefaultPreemption, the default profile's PostFilter: when no node fits a pod, find a node
//! where evicting lower-priority pods makes it fit, and say which pods to evict.
//!
//! Mirrors `pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`
//! (`PodEligibleToPreemptOthers`, `SelectVictimsOnNode`, `GetOffsetAndNumCandidates`) and
//! `pkg/scheduler/framework/preemption/preemption.go` (`Preempt`, `findCandidates`,
//! `nodesWherePreemptionMightHelp`, `DryRunPreemption`, `SelectCandidate`,
//! `pickOneNodeForPreemption`). Sans-IO: [`post_filter`] is a function of the pod, the
//! snapshot and the pod's [`FitError`]; the shell (`crate::scheduler`) carries out a
//! [`Outcome::Preempt`]: the preemptor's `status.nominatedNodeName`, each victim's
//! `DisruptionTarget` condition, its deletion and its `Preempted` Event.
//!
//! ```text
//!   preemptionPolicy Never                ─▶ "not eligible due to preemptionPolicy=Never."
//!   nominated node has a lower-priority pod terminating by preemption
//!                                         ─▶ "not eligible due to a terminating pod on the
//!                                             nominated node."
//!   nodes whose filter failed Unschedulable (not ...AndUnresolvable), each:
//!     remove every lower-priority pod ─▶ none: "No preemption victims found for incoming pod"
//!       still no fit ─▶ that filter's status
//!     put them back one by one, most important first (priority, then earliest start);
//!       a pod whose return breaks the fit is a victim
//!   no candidate ─▶ "0/N nodes are available: <per node why>." (as the PostFilter message)
//!   candidates ─▶ pickOneNodeForPreemption: a node with no victim; else fewest PDB
//!     violations, lowest highest-victim priority, lowest sum of priorities, fewest
//!     victims, latest start among the highest-priority victims, first in scan order
//! ```
//!
//! Simplified versus Kubernetes: miniplane has no PodDisruptionBudget informer in the
//! scheduler, so no victim counts as violating one (every PDB-violation count is 0); the
//! dry run starts at the first node rather than a random offset; candidates tie on the scan
//! order (Kubernetes iterates a map). Nominated pods are not added to the nodes when other
//! pods are filtered (`addNominatedPods`): a pod of equal or lower priority may take the room
//! a preemption freed before its preemptor is retried, which then preempts again. There are
//! no extenders and no waiting (Permit) pods.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::cache::Snapshot;
use crate::cycle_state::CycleState;
use crate::fit_error::FitError;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{Code, Status, run_filters};

pub mod shell;
#[cfg(test)]
mod tests;

/// The plugin's name.
pub const NAME: &str = "DefaultPreemption";
/// The condition a victim gets before it is deleted (`v1.DisruptionTarget`).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Its reason (`v1.PodReasonPreemptionByScheduler`).
pub const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";
/// The Event reason on each victim.
pub const PREEMPTED: &str = "Preempted";
/// `minCandidateNodesPercentage`.
pub const MIN_CANDIDATE_NODES_PERCENTAGE: usize = 10;
/// `minCandidateNodesAbsolute`.
pub const MIN_CANDIDATE_NODES_ABSOLUTE: usize = 100;

/// Why a node offers no preemption: no lower-priority pod on it.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Why a node is not looked at: its filter failed in a way evictions cannot fix.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// `PodEligibleToPreemptOthers`' refusal for `preemptionPolicy: Never`.
pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// Its refusal while a victim of an earlier preemption is still terminating.
pub const NOT_ELIGIBLE_TERMINATING: &str =
    "not eligible due to a terminating pod on the nominated node.";

/// The DisruptionTarget condition's message for a preemptor of `scheduler_name`.
pub fn disruption_message(scheduler_name: &str) -> String {
    format!("{scheduler_name}: preempting to accommodate a higher priority pod")
}

/// The `Preempted` Event's message on each victim.
pub fn preempted_message(preemptor_uid: &str, node: &str) -> String {
    format!("Preempted by pod {preemptor_uid} on node {node}")
}

/// `spec.priority` (0 when unset).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// A node where preemption makes the pod fit, and the pods to evict there.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The node.
    pub node: Arc<str>,
    /// The victims, most important first.
    pub victims: Vec<PodInfo>,
    /// How many of them a PodDisruptionBudget protects (always 0 in miniplane).
    pub num_pdb_violations: usize,
}

/// What the PostFilter decided.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The pod may not preempt (`PodEligibleToPreemptOthers`): why.
    NotEligible(&'static str),
    /// No node where evictions help; `message` is the PostFilter message (`0/3 nodes are
    /// available: ...`). A nominated node the pod had is cleared.
    NoCandidates {
        /// The message.
        message: String,
    },
    /// Evict `candidate.victims` and nominate the pod to `candidate.node`.
    Preempt {
        /// The chosen node and its victims.
        candidate: Candidate,
        /// How many nodes were candidates.
        candidates: usize,
        /// Which criterion of `pickOneNodeForPreemption` decided.
        why: &'static str,
    },
}

impl Outcome {
    /// The PostFilter message that follows `preemption: ` in FailedScheduling (none after a
    /// preemption).
    pub fn message(&self) -> Option<String> {
        match self {
            Outcome::NotEligible(why) => Some((*why).to_owned()),
            Outcome::NoCandidates { message } => Some(message.clone()),
            Outcome::Preempt { .. } => None,
        }
    }

    /// One line for the decision's trace.
    pub fn describe(&self) -> String {
        match self {
            Outcome::NotEligible(why) => format!("preemption: {why}"),
            Outcome::NoCandidates { message } => format!("preemption: {message}"),
            Outcome::Preempt {
                candidate,
                candidates,
                why,
            } => {
                let victims: Vec<String> = candidate
                    .victims
                    .iter()
                    .map(|v| format!("{} (priority {})", v.key, priority(&v.pod)))
                    .collect();
                format!(
                    "preemption: nominated {} ({why}; {candidates} candidate node(s)), victims: {}",
                    candidate.node,
                    victims.join(", ")
                )
            }
        }
    }
}

/// `podTerminatingByPreemption`: deleted, with the scheduler's DisruptionTarget condition.
fn terminating_by_preemption(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == DISRUPTION_TARGET
                        && c.status == "True"
                        && c.reason.as_deref() == Some(PREEMPTION_BY_SCHEDULER)
                })
            })
}

/// `PodEligibleToPreemptOthers`.
pub fn eligible(pod: &Pod, snapshot: Snapshot<'_>, fit: &FitError) -> Result<(), &'static str> {
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never")
    {
        return Err(NOT_ELIGIBLE_NEVER);
    }
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    let Some(nominated) = nominated else {
        return Ok(());
    };
    if fit
        .node_to_status
        .get(nominated)
        .is_some_and(|s| s.code == Code::UnschedulableAndUnresolvable)
    {
        return Ok(());
    }
    let mine = priority(pod);
    let blocked = snapshot
        .nodes
        .iter()
        .find(|n| &*n.name == nominated)
        .is_some_and(|n| {
            n.pods
                .values()
                .any(|p| priority(&p.pod) < mine && terminating_by_preemption(&p.pod))
        });
    if blocked {
        return Err(NOT_ELIGIBLE_TERMINATING);
    }
    Ok(())
}

/// `MoreImportantPod`'s order: higher priority first, then the earlier start (a pod not
/// started counts as starting now, after every started one).
fn more_important_first(a: &PodInfo, b: &PodInfo) -> std::cmp::Ordering {
    priority(&b.pod)
        .cmp(&priority(&a.pod))
        .then_with(|| start_key(&a.pod).cmp(&start_key(&b.pod)))
}

/// A pod's start time for ordering: `(not started, time)`.
fn start_key(pod: &Pod) -> (bool, Option<jiff::Timestamp>) {
    let start = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    (start.is_none(), start)
}

/// Filters `pod` on `nodes[index]` as it stands, with PreFilter state that matches: the
/// decision's own `state` when it does not depend on other pods, else recomputed over
/// `nodes` (PodTopologySpread's and InterPodAffinity's counts change as pods leave; Kubernetes
/// updates them with `RunPreFilterExtensionRemovePod`/`AddPod`).
fn fits(
    pod: &PodInfo,
    snapshot: Snapshot<'_>,
    nodes: &[NodeInfo],
    index: usize,
    state: &CycleState,
) -> Result<(), Status> {
    if state.pod_topology_spread.is_some() || state.inter_pod_affinity.is_some() {
        let what_if = Snapshot {
            nodes,
            groups: None,
            ..snapshot
        };
        let fresh = CycleState::pre_filter(pod, what_if);
        return run_filters(pod, &nodes[index], &fresh);
    }
    run_filters(pod, &nodes[index], state)
}

/// `SelectVictimsOnNode` on `snapshot.nodes[index]`: the fewest, least important
/// lower-priority pods whose eviction lets `pod` fit, most important first; or why the node
/// cannot be freed.
pub fn select_victims_on_node(
    pod: &PodInfo,
    snapshot: Snapshot<'_>,
    index: usize,
    state: &CycleState,
) -> Result<Vec<PodInfo>, Status> {
    let mine = priority(&pod.pod);
    let mut nodes: Vec<NodeInfo> = Vec::new();
    let cluster_aware = state.pod_topology_spread.is_some() || state.inter_pod_affinity.is_some();
    // A what-if copy: the whole cluster only when the filters need it.
    let (nodes, index) = if cluster_aware {
        nodes.extend(snapshot.nodes.iter().cloned());
        (&mut nodes, index)
    } else {
        nodes.push(snapshot.nodes[index].clone());
        (&mut nodes, 0)
    };
    let mut potential: Vec<PodInfo> = nodes[index]
        .pods
        .values()
        .filter(|p| priority(&p.pod) < mine)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            NO_VICTIMS,
        ));
    }
    for p in &potential {
        nodes[index].remove_pod(&p.key);
    }
    fits(pod, snapshot, nodes, index, state)?;
    potential.sort_by(more_important_first);
    let mut victims = Vec::new();
    // No PDBs: every potential victim is "non-violating" and reprieved in this one pass.
    for p in potential {
        nodes[index].add_pod(p.clone());
        if fits(pod, snapshot, nodes, index, state).is_err() {
            nodes[index].remove_pod(&p.key);
            victims.push(p);
        }
    }
    Ok(victims)
}

/// `GetOffsetAndNumCandidates` without the random offset: how many candidates the dry run
/// looks for among `num_nodes` potential nodes.
pub fn num_candidates(num_nodes: usize) -> usize {
    (num_nodes * MIN_CANDIDATE_NODES_PERCENTAGE / 100)
        .max(MIN_CANDIDATE_NODES_ABSOLUTE)
        .min(num_nodes)
}

/// `pickOneNodeForPreemption`: the index of the best candidate and the criterion that
/// decided. `candidates` is not empty.
pub fn pick_one_node(candidates: &[Candidate]) -> (usize, &'static str) {
    if candidates.len() == 1 {
        return (0, "the only candidate");
    }
    if let Some(i) = candidates.iter().position(|c| c.victims.is_empty()) {
        return (i, "no victims needed");
    }
    let mut left: Vec<usize> = (0..candidates.len()).collect();
    // Each criterion keeps the candidates with the minimum of its score.
    type Score = fn(&Candidate) -> (i64, i64);
    let criteria: [(&'static str, Score); 5] = [
        ("fewest PodDisruptionBudget violations", |c| {
            (c.num_pdb_violations as i64, 0)
        }),
        ("lowest highest-priority victim", |c| {
            (
                c.victims
                    .first()
                    .map_or(i64::MIN, |v| i64::from(priority(&v.pod))),
                0,
            )
        }),
        ("lowest sum of victim priorities", |c| {
            // Shifted by 2^31 so that negative priorities still count as victims.
            let sum = c
                .victims
                .iter()
                .map(|v| i64::from(priority(&v.pod)) + i64::from(i32::MAX) + 1)
                .sum();
            (sum, 0)
        }),
        ("fewest victims", |c| (c.victims.len() as i64, 0)),
        ("latest start of the highest-priority victims", |c| {
            // The latest earliest-start wins: negate the (not started, time) order.
            let top = c.victims.first().map_or(0, |v| priority(&v.pod));
            let earliest = c
                .victims
                .iter()
                .filter(|v| priority(&v.pod) == top)
                .map(|v| start_key(&v.pod))
                .min();
            match earliest {
                Some((true, _)) | None => (i64::MIN, 0),
                Some((false, t)) => {
                    let t = t.map_or(0, |t| t.as_nanosecond());
                    let nanos = i64::try_from(t).unwrap_or(i64::MAX);
                    (-nanos, 0)
                }
            }
        }),
    ];
    for (why, score) in criteria {
        let best = left
            .iter()
            .map(|&i| score(&candidates[i]))
            .min()
            .unwrap_or((0, 0));
        left.retain(|&i| score(&candidates[i]) == best);
        if left.len() == 1 {
            return (left[0], why);
        }
    }
    (left[0], "first in scan order among equals")
}

/// The PostFilter (`Preempt`) for `pod`, which no node of the decision's `snapshot` fits
/// (`fit`). The PreFilter state is computed again (the decision does not keep it).
pub fn post_filter(pod: &PodInfo, snapshot: Snapshot<'_>, fit: &FitError) -> Outcome {
    if let Err(why) = eligible(&pod.pod, snapshot, fit) {
        return Outcome::NotEligible(why);
    }
    if snapshot.nodes.is_empty() {
        return Outcome::NoCandidates {
            message: crate::fit_error::NO_NODES_AVAILABLE.to_owned(),
        };
    }
    let state = &CycleState::pre_filter(pod, snapshot);
    let potential: Vec<usize> = (0..snapshot.nodes.len())
        .filter(|&i| {
            fit.node_to_status
                .get(&*snapshot.nodes[i].name)
                .is_none_or(|s| s.code != Code::UnschedulableAndUnresolvable)
        })
        .collect();
    let wanted = num_candidates(potential.len());
    let mut statuses: BTreeMap<String, Status> = BTreeMap::new();
    let mut candidates = Vec::new();
    for &i in &potential {
        if candidates.len() >= wanted {
            break;
        }
        match select_victims_on_node(pod, snapshot, i, state) {
            Ok(victims) => candidates.push(Candidate {
                node: snapshot.nodes[i].name.clone(),
                victims,
                num_pdb_violations: 0,
            }),
            Err(status) => {
                statuses.insert(snapshot.nodes[i].name.to_string(), status);
            }
        }
    }
    if candidates.is_empty() {
        // `SetAbsentNodesStatus`: the nodes not tried were not helpful.
        for node in snapshot.nodes {
            statuses.entry(node.name.to_string()).or_insert_with(|| {
                Status::new(NAME, Code::UnschedulableAndUnresolvable, NOT_HELPFUL)
            });
        }
        let inner = FitError {
            num_all_nodes: snapshot.nodes.len(),
            node_to_status: statuses,
            preemption_never: false,
            pre_filter: None,
        };
        return Outcome::NoCandidates {
            message: inner.reasons_message(),
        };
    }
    let (best, why) = pick_one_node(&candidates);
    let count = candidates.len();
    Outcome::Preempt {
        candidate: candidates.swap_remove(best),
        candidates: count,
        why,
    }
}

/// The pod's `status.nominatedNodeName`, when set.
pub fn nominated_node(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The FailedScheduling message of a pod no node fits: the filters' reasons, then the
/// PostFilter's message after `preemption: ` (none after a preemption, as in Kubernetes).
pub fn failure_message(fit: &FitError, outcome: Option<&Outcome>) -> String {
    match outcome.map(Outcome::message) {
        Some(Some(message)) => format!("{} preemption: {message}", fit.reasons_message()),
        Some(None) => fit.reasons_message(),
        None => fit.to_string(),
    }
}

/// Puts the preemption into the decision's span: the summary says the real message and what
/// preemption decided; attributes name the nominated node, the reason and each victim.
pub fn describe_in_trace(
    outcome: &Outcome,
    message: &str,
    summary: &mut String,
    attributes: &mut Vec<(String, client::trace::AttributeValue)>,
) {
    if let Some(rest) = summary.split_once("; ").map(|(_, rest)| rest.to_owned()) {
        *summary = format!(
            "{} → unschedulable: {message}; {rest}",
            summary.split(" → ").next().unwrap_or_default()
        );
    }
    summary.push_str("; ");
    summary.push_str(&outcome.describe());
    match outcome {
        Outcome::Preempt { candidate, why, .. } => {
            attributes.push(("preemption.node".into(), candidate.node.as_ref().into()));
            attributes.push(("preemption.why".into(), (*why).into()));
            for (i, victim) in candidate.victims.iter().enumerate() {
                attributes.push((
                    format!("preemption.victim.{i}"),
                    format!("{} (priority {})", victim.key, priority(&victim.pod)).into(),
                ));
            }
        }
        other => {
            if let Some(message) = other.message() {
                attributes.push(("preemption".into(), message.into()));
            }
        }
    }
}
