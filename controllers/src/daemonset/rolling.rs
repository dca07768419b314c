//! The DaemonSet's rolling update: replace old pods node by node, within `maxUnavailable`
//! or `maxSurge`.
//!
//! Mirrors `rollingUpdate`, `findUpdatedPodsOnNode` and `updatedDesiredNodeCounts` in
//! `pkg/controller/daemon/update.go`, with `UnavailableCount`, `SurgeCount`, `AllowsSurge`
//! and `IsPodUpdated` from `pkg/controller/daemon/util/daemonset_util.go`.
//!
//! Without surge (`maxUnavailable: 1`, 3 nodes), one node at a time goes without a pod:
//!
//! ```text
//!   a: old ✓  b: old ✓  c: old ✓     unavailable 0 ─▶ delete a's old pod
//!   a: —      b: old ✓  c: old ✓     unavailable 1 ─▶ (the manage step creates a's new pod)
//!   a: new ✗  b: old ✓  c: old ✓     unavailable 1 ─▶ wait
//!   a: new ✓  b: old ✓  c: old ✓     unavailable 0 ─▶ delete b's old pod ...
//! ```
//!
//! With surge (`maxSurge: 1`), a node gets its new pod first and loses the old one once the
//! new one is available; an old pod that is not available is replaced at once on either path.
//!
//! Unlike Kubernetes, which walks a Go map (random order), nodes are visited in name order,
//! so which node goes first is deterministic.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::history::CONTROLLER_REVISION_HASH_LABEL;
use super::placement::node_should_run_daemon_pod;
use crate::deployment::util::get_scaled_value_from_int_or_percent;
use crate::pod_readiness::is_pod_available;

/// `DaemonSetTemplateGenerationKey`: the pod label with the template generation it was
/// created from.
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// `IsPodUpdated`: the pod carries the current revision's hash, or the current template
/// generation.
pub fn is_pod_updated(pod: &Pod, hash: &str, template_generation: Option<i64>) -> bool {
    let generation_matches = template_generation
        .is_some_and(|g| label(pod, POD_TEMPLATE_GENERATION_LABEL) == Some(g.to_string().as_str()));
    let hash_matches = !hash.is_empty() && label(pod, CONTROLLER_REVISION_HASH_LABEL) == Some(hash);
    hash_matches || generation_matches
}

fn rolling_update_params(
    ds: &DaemonSet,
) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    let strategy = ds.spec.as_ref()?.update_strategy.as_ref()?;
    if strategy.type_.as_deref().unwrap_or("RollingUpdate") != "RollingUpdate" {
        return None;
    }
    strategy.rolling_update.as_ref()
}

/// `UnavailableCount`: `maxUnavailable` of `desired`, rounded up (0 for `OnDelete`).
pub fn unavailable_count(ds: &DaemonSet, desired: i32) -> i32 {
    rolling_update_params(ds)
        .and_then(|r| r.max_unavailable.as_ref())
        .and_then(|v| get_scaled_value_from_int_or_percent(v, desired, true).ok())
        .unwrap_or(0)
}

/// `SurgeCount`: `maxSurge` of `desired`, rounded up (0 for `OnDelete`).
pub fn surge_count(ds: &DaemonSet, desired: i32) -> i32 {
    rolling_update_params(ds)
        .and_then(|r| r.max_surge.as_ref())
        .and_then(|v| get_scaled_value_from_int_or_percent(v, desired, true).ok())
        .unwrap_or(0)
}

/// `AllowsSurge`: a node may hold an old and a new pod at once.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1) != 0
}

/// `findUpdatedPodsOnNode`: the node's one new and one old pod (ignoring pods being
/// deleted); `None` when it has two of either kind (the manage step cleans that up first).
pub fn find_updated_pods_on_node<'a>(
    pods: &[&'a Pod],
    hash: &str,
    template_generation: Option<i64>,
) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().copied() {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let slot = if is_pod_updated(pod, hash, template_generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// What one rolling-update step decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RollingStep {
    /// Old pods to delete (names).
    pub pods_to_delete: Vec<String>,
    /// Nodes that get a new pod now (surge only).
    pub nodes_to_create: Vec<String>,
    /// `maxSurge` and `maxUnavailable` as counted for this step, for the summary.
    pub max_surge: i32,
    /// See `max_surge`.
    pub max_unavailable: i32,
}

/// `rollingUpdate` for one sync: `nodes` are all nodes, `node_to_pods` the DaemonSet's pods
/// by target node.
pub fn rolling_update(
    ds: &DaemonSet,
    nodes: &[&Node],
    node_to_pods: &BTreeMap<String, Vec<&Pod>>,
    hash: &str,
    template_generation: Option<i64>,
    now: Timestamp,
) -> RollingStep {
    let template = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let available = |p: &Pod| is_pod_available(p, min_ready, now);
    // `updatedDesiredNodeCounts`: every node that should run a pod is visited, with or
    // without pods.
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = node_to_pods
        .iter()
        .map(|(n, pods)| (n.as_str(), pods.clone()))
        .collect();
    let mut desired = 0;
    let mut node_by_name: BTreeMap<&str, &Node> = BTreeMap::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        node_by_name.insert(name, node);
        if node_should_run_daemon_pod(template, node).should_run {
            desired += 1;
            by_node.entry(name).or_default();
        }
    }
    let mut max_unavailable = unavailable_count(ds, desired);
    let max_surge = surge_count(ds, desired);
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        // An impossible configuration: accept unavailability, as Kubernetes does.
        max_unavailable = 1;
    }
    let should_run = |node: &str| {
        node_by_name
            .get(node)
            .is_some_and(|n| node_should_run_daemon_pod(template, n).should_run)
    };
    let mut step = RollingStep {
        max_surge,
        max_unavailable,
        ..Default::default()
    };
    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replacements = Vec::new();
        let mut candidates = Vec::new();
        for pods in by_node.values() {
            let Some((new, old)) = find_updated_pods_on_node(pods, hash, template_generation)
            else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        replacements.push(pod_name(old));
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(pod_name(old));
                    }
                }
            }
        }
        let remaining = (max_unavailable - unavailable).max(0) as usize;
        let take = remaining.min(candidates.len());
        replacements.extend(candidates.into_iter().take(take));
        step.pods_to_delete = replacements;
        return step;
    }

    let mut old_pods_to_delete = Vec::new();
    let mut should_not_run_pods_to_delete = Vec::new();
    let mut candidate_new_nodes = Vec::new();
    let mut allowed_new_nodes = Vec::new();
    let mut num_surge = 0;
    let mut num_available = 0;
    for (node, pods) in &by_node {
        let Some((new, old)) = find_updated_pods_on_node(pods, hash, template_generation) else {
            num_surge += 1;
            continue;
        };
        if let Some(pod) = old.or(new)
            && available(pod)
        {
            num_available += 1;
        }
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(old) {
                    if !should_run(node) {
                        old_pods_to_delete.push(pod_name(old));
                        continue;
                    }
                    allowed_new_nodes.push((*node).to_owned());
                } else {
                    if !should_run(node) {
                        should_not_run_pods_to_delete.push(pod_name(old));
                        continue;
                    }
                    if num_surge >= max_surge {
                        continue;
                    }
                    candidate_new_nodes.push((*node).to_owned());
                }
            }
            (Some(new), Some(old)) => {
                if !available(new) {
                    num_surge += 1;
                    continue;
                }
                old_pods_to_delete.push(pod_name(old));
            }
        }
    }
    // With surge the owner expects full availability: a pod on a node the DaemonSet left is
    // deleted only once enough pods elsewhere are available.
    let deletable = (num_available - desired).max(0) as usize;
    old_pods_to_delete.extend(should_not_run_pods_to_delete.into_iter().take(deletable));
    let remaining = (max_surge - num_surge).max(0) as usize;
    let take = remaining.min(candidate_new_nodes.len());
    allowed_new_nodes.extend(candidate_new_nodes.into_iter().take(take));
    step.pods_to_delete = old_pods_to_delete;
    step.nodes_to_create = allowed_new_nodes;
    step
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}
