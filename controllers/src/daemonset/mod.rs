//! The DaemonSet controller: one pod on every eligible node.
//!
//! Mirrors `pkg/controller/daemon/daemon_controller.go` (`syncDaemonSet`, `manage`,
//! `podsShouldBeOnNode`, `syncNodes`, `getNodesToDaemonPods`) and `update.go`, as Kubernetes
//! 1.33 runs them. Files: [`placement`] (`NodeShouldRunDaemonPod`, daemon tolerations, the
//! node-name affinity), [`history`] (ControllerRevisions), [`rolling`] (`rollingUpdate`),
//! [`status`] (the counts), [`failed_pods_backoff`], [`controller`] (the async shell).
//!
//! ```text
//!  sync_daemon_set(DaemonSet, nodes, its pods, current revision hash, old revisions, now)
//!   ├─ selector {} ─▶ Warning SelectingAll, nothing else;  being deleted ─▶ nothing
//!   ├─ creations/deletions still expected ─▶ status only
//!   ├─ manage: per node
//!   │    should run, no pod            ─▶ create one (affinity metadata.name In [node])
//!   │    may stay: failed pod          ─▶ Warning FailedDaemonPod, delete (with back-off)
//!   │              succeeded pod       ─▶ SucceededDaemonPod, delete
//!   │              >1 running          ─▶ keep the oldest (with surge: one old + one new)
//!   │    must not stay, has pods       ─▶ delete them
//!   │  pending pods of vanished nodes  ─▶ delete
//!   ├─ nothing to do and RollingUpdate ─▶ rolling::rolling_update (maxUnavailable / maxSurge)
//!   ├─ old revisions beyond revisionHistoryLimit, unused by pods ─▶ delete
//!   └─ status (PUT /status if changed); requeue after minReadySeconds, failed-pod back-off
//! ```
//!
//! Pods are labelled `controller-revision-hash` (the current ControllerRevision's hash) and
//! `pod-template-generation` (the DaemonSet's `deprecated.daemonset.template.generation`
//! annotation), and carry the daemon tolerations; the scheduler binds them to their node
//! through the node affinity, as Kubernetes' default scheduler does.
//!
//! Simplified: revision hashes differ from a real cluster's (see [`history`]); nodes are
//! visited in name order rather than Go's random map order; when two revisions match the
//! current template the extra one is deleted without relabelling its pods first; a pod creation refused because the namespace is
//! terminating is reported like any other failure; and the `daemonset_*` metrics are not
//! exported.

pub mod controller;
pub mod failed_pods_backoff;
pub mod history;
pub mod placement;
pub mod rolling;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use self::failed_pods_backoff::{FailedPodsBackoff, backoff_key};
use self::history::{CONTROLLER_REVISION_HASH_LABEL, revisions_to_delete};
use self::placement::{
    add_or_update_daemon_pod_tolerations, get_target_node_name, node_should_run_daemon_pod,
    replace_daemon_set_pod_node_name_node_affinity,
};
use self::rolling::{POD_TEMPLATE_GENERATION_LABEL, allows_surge, is_pod_updated};
use self::status::{by_creation_timestamp_and_phase, calculate_counts, status_update};
use crate::action::{Action, event};
use crate::expectations::Expectations;
use crate::owner_ref::{name, new_controller_ref};
use crate::pod_readiness::{is_pod_available, is_pod_ready, pod_phase};
use crate::replicaset::pods::slow_start_batches;

/// The DaemonSet controller's `BurstReplicas`: at most this many creations or deletions per
/// sync.
pub const BURST_REPLICAS: usize = 250;
/// The annotation with the DaemonSet's template generation (set by the API server).
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";
/// Event reason of a failed daemon pod that is deleted.
pub const FAILED_DAEMON_POD_REASON: &str = "FailedDaemonPod";
/// Event reason of a succeeded daemon pod that is deleted.
pub const SUCCEEDED_DAEMON_POD_REASON: &str = "SucceededDaemonPod";
/// Event reason of a DaemonSet whose selector is empty.
pub const SELECTING_ALL_REASON: &str = "SelectingAll";

/// Everything one DaemonSet sync reads.
#[derive(Debug, Clone, Copy)]
pub struct DaemonSetSyncInput<'a> {
    /// The DaemonSet (from the lister).
    pub daemon_set: &'a DaemonSet,
    /// Every node.
    pub nodes: &'a [&'a Node],
    /// The pods it controls, claimed, in any phase.
    pub pods: &'a [&'a Pod],
    /// The hash of the current ControllerRevision (`cur.Labels[controller-revision-hash]`).
    pub hash: &'a str,
    /// The DaemonSet's other ControllerRevisions (for `cleanupHistory`).
    pub old_revisions: &'a [ControllerRevision],
    /// The time of this sync.
    pub now: Timestamp,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonSetSync {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What was decided and why.
    pub summary: String,
}

/// `GetTemplateGeneration`: the DaemonSet's template generation, if annotated.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// Whether the selector is `{}` (which Kubernetes refuses to act on).
pub fn selects_everything(ds: &DaemonSet) -> bool {
    ds.spec
        .as_ref()
        .is_some_and(|s| s.selector == LabelSelector::default())
}

/// `getNodesToDaemonPods`: pods by their target node (`spec.nodeName`, else the node-name
/// affinity); pods with neither are left out. Terminal pods being deleted are left out
/// unless `include_deleted_terminal`.
pub fn nodes_to_daemon_pods<'a>(
    pods: &[&'a Pod],
    include_deleted_terminal: bool,
) -> BTreeMap<String, Vec<&'a Pod>> {
    let mut map: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods.iter().copied() {
        let terminal = matches!(pod_phase(pod), "Failed" | "Succeeded");
        if !include_deleted_terminal && terminal && pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(node) = get_target_node_name(pod.spec.as_ref()) {
            map.entry(node).or_default().push(pod);
        }
    }
    map
}

/// `CreatePodTemplate` + `GetPodFromTemplate` + `ReplaceDaemonSetPodNodeNameNodeAffinity`:
/// the pod to create on `node`.
pub fn new_daemon_pod(
    ds: &DaemonSet,
    node: &str,
    hash: &str,
    template_generation: Option<i64>,
) -> Pod {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    if let Some(generation) = template_generation {
        labels.insert(
            POD_TEMPLATE_GENERATION_LABEL.to_owned(),
            generation.to_string(),
        );
    }
    if !hash.is_empty() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    }
    let mut spec = template.spec.unwrap_or_default();
    add_or_update_daemon_pod_tolerations(&mut spec);
    spec.affinity = Some(replace_daemon_set_pod_node_name_node_affinity(
        spec.affinity.take(),
        node,
    ));
    Pod {
        metadata: ObjectMeta {
            namespace: ds.metadata.namespace.clone(),
            generate_name: Some(format!("{}-", name(&ds.metadata))),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![new_controller_ref(ds)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// What `manage` decided.
#[derive(Debug, Default)]
struct Plan {
    nodes_needing_pods: Vec<String>,
    pods_to_delete: Vec<String>,
    events: Vec<Action>,
    requeue_after: Option<Duration>,
}

/// State shared by the steps of one sync.
struct Sync<'a> {
    ds: &'a DaemonSet,
    ds_ref: ObjectRef,
    key: ObjectKey,
    hash: &'a str,
    generation: Option<i64>,
    now: Timestamp,
}

/// `syncDaemonSet`: the whole decision for one DaemonSet. Updates `expectations` for the
/// creations and deletions it decides and `backoff` for the failed pods it deletes.
pub fn sync_daemon_set(
    expectations: &mut Expectations,
    backoff: &mut FailedPodsBackoff,
    input: DaemonSetSyncInput<'_>,
) -> DaemonSetSync {
    let ds = input.daemon_set;
    let s = Sync {
        ds,
        ds_ref: ObjectRef::from_object(ds),
        key: ObjectKey::from_meta(&ds.metadata),
        hash: input.hash,
        generation: template_generation(ds),
        now: input.now,
    };
    if selects_everything(ds) {
        return DaemonSetSync {
            actions: vec![event(
                s.ds_ref,
                EventType::Warning,
                SELECTING_ALL_REASON,
                "This daemon set is selecting all pods. A non-empty selector is required.",
            )],
            summary: "selector selects everything: skipped".into(),
        };
    }
    if ds.metadata.deletion_timestamp.is_some() {
        return DaemonSetSync {
            actions: Vec::new(),
            summary: "being deleted".into(),
        };
    }
    let node_to_pods = nodes_to_daemon_pods(input.pods, false);
    let mut actions = Vec::new();
    let mut notes = Vec::new();
    let satisfied = expectations.satisfied_expectations(&s.key, s.now);
    if !satisfied {
        let pending = expectations
            .get_expectations(&s.key)
            .map(|e| (e.add, e.del))
            .unwrap_or_default();
        notes.push(format!(
            "waiting for {} creations / {} deletions to be observed",
            pending.0, pending.1
        ));
    } else {
        let plan = manage(&s, backoff, input.nodes, &node_to_pods);
        let (creates, deletes) = (plan.nodes_needing_pods.len(), plan.pods_to_delete.len());
        actions.extend(plan.events);
        actions.extend(sync_nodes(
            &s,
            expectations,
            &plan.pods_to_delete,
            &plan.nodes_needing_pods,
        ));
        notes.push(format!("manage: create {creates}, delete {deletes}"));
        if let Some(after) = plan.requeue_after {
            actions.push(Action::RequeueAfter(after));
        }
        let rolling = ds
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        if creates == 0 && deletes == 0 && rolling {
            let step = rolling::rolling_update(
                ds,
                input.nodes,
                &node_to_pods,
                s.hash,
                s.generation,
                s.now,
            );
            notes.push(format!(
                "rolling update (maxSurge {}, maxUnavailable {}): create on {:?}, delete {:?}",
                step.max_surge, step.max_unavailable, step.nodes_to_create, step.pods_to_delete
            ));
            actions.extend(sync_nodes(
                &s,
                expectations,
                &step.pods_to_delete,
                &step.nodes_to_create,
            ));
        }
        let all_pods: Vec<&Pod> = nodes_to_daemon_pods(input.pods, true)
            .into_values()
            .flatten()
            .collect();
        for revision in revisions_to_delete(ds, input.old_revisions, &all_pods) {
            notes.push(format!("delete old revision {}", name(&revision.metadata)));
            actions.push(Action::Delete {
                target: ObjectRef::from_object(revision),
                propagation: None,
            });
        }
    }
    let counts = calculate_counts(ds, input.nodes, &node_to_pods, s.hash, s.generation, s.now);
    notes.push(format!(
        "desired {}, current {}, ready {}, updated {}, available {}",
        counts.desired, counts.current, counts.ready, counts.updated, counts.available
    ));
    if let Some(updated) = status_update(ds, counts, satisfied) {
        actions.push(Action::UpdateDaemonSetStatus(Box::new(updated)));
    }
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    if min_ready > 0 && counts.ready != counts.available {
        actions.push(Action::RequeueAfter(Duration::from_secs(min_ready as u64)));
    }
    DaemonSetSync {
        actions,
        summary: notes.join(" → "),
    }
}

/// `manage` with `podsShouldBeOnNode` for every node, and `getUnscheduledPodsWithoutNode`.
fn manage(
    s: &Sync<'_>,
    backoff: &mut FailedPodsBackoff,
    nodes: &[&Node],
    node_to_pods: &BTreeMap<String, Vec<&Pod>>,
) -> Plan {
    let mut plan = Plan::default();
    let template =
        s.ds.spec
            .as_ref()
            .and_then(|spec| spec.template.spec.as_ref());
    let mut node_names = BTreeSet::new();
    for node in nodes {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        node_names.insert(node_name);
        let fit = node_should_run_daemon_pod(template, node);
        let pods = node_to_pods.get(node_name);
        match pods {
            None if fit.should_run => plan.nodes_needing_pods.push(node_name.to_owned()),
            Some(pods) if fit.should_continue_running => {
                pods_on_running_node(s, backoff, node_name, pods, &mut plan)
            }
            Some(pods) if !fit.should_continue_running => plan.pods_to_delete.extend(
                pods.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| pod_name(p)),
            ),
            _ => {}
        }
    }
    // Pods pinned to nodes that no longer exist and never scheduled: nothing will run them.
    for (node, pods) in node_to_pods {
        if node_names.contains(node.as_str()) {
            continue;
        }
        plan.pods_to_delete.extend(
            pods.iter()
                .filter(|p| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_none_or(str::is_empty)
                })
                .map(|p| pod_name(p)),
        );
    }
    plan
}

/// The `shouldContinueRunning` arm of `podsShouldBeOnNode`.
fn pods_on_running_node(
    s: &Sync<'_>,
    backoff: &mut FailedPodsBackoff,
    node: &str,
    pods: &[&Pod],
    plan: &mut Plan,
) {
    let namespace = s.ds.metadata.namespace.as_deref().unwrap_or_default();
    let mut running: Vec<&Pod> = Vec::new();
    for pod in pods.iter().copied() {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match pod_phase(pod) {
            "Failed" => {
                // The controller and a kubelet rejecting the pod would fight in a hot loop.
                let observed =
                    s.ds.status
                        .as_ref()
                        .and_then(|st| st.observed_generation)
                        .unwrap_or(0);
                let key = backoff_key(&s.ds_ref.uid, observed, node);
                if backoff.is_in_backoff_since_update(&key, s.now) {
                    let delay = backoff.get(&key);
                    plan.requeue_after = Some(plan.requeue_after.map_or(delay, |d| d.min(delay)));
                    continue;
                }
                backoff.next(&key, s.now);
                plan.events.push(event(
                    s.ds_ref.clone(),
                    EventType::Warning,
                    FAILED_DAEMON_POD_REASON,
                    format!(
                        "Found failed daemon pod {namespace}/{} on node {node}, will try to kill it",
                        pod_name(pod)
                    ),
                ));
                plan.pods_to_delete.push(pod_name(pod));
            }
            "Succeeded" => {
                plan.events.push(event(
                    s.ds_ref.clone(),
                    EventType::Normal,
                    SUCCEEDED_DAEMON_POD_REASON,
                    format!(
                        "Found succeeded daemon pod {namespace}/{} on node {node}, will try to delete it",
                        pod_name(pod)
                    ),
                ));
                plan.pods_to_delete.push(pod_name(pod));
            }
            _ => running.push(pod),
        }
    }
    if running.len() <= 1 {
        return;
    }
    running.sort_by(|a, b| by_creation_timestamp_and_phase(a, b));
    if !allows_surge(s.ds) {
        // Keep the oldest.
        plan.pods_to_delete
            .extend(running[1..].iter().map(|p| pod_name(p)));
        return;
    }
    // With surge: keep the oldest new pod and the oldest old pod; the old one goes once it is
    // not ready or the new one is available.
    let (mut oldest_new, mut oldest_old) = (None, None);
    for pod in running {
        let slot = if is_pod_updated(pod, s.hash, s.generation) {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            plan.pods_to_delete.push(pod_name(pod));
        }
    }
    if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
        let min_ready =
            s.ds.spec
                .as_ref()
                .and_then(|sp| sp.min_ready_seconds)
                .unwrap_or(0);
        if !is_pod_ready(old) || is_pod_available(new, min_ready, s.now) {
            plan.pods_to_delete.push(pod_name(old));
        }
    }
}

/// `syncNodes`: expectations for what follows, then the creations (one pod per node, slow
/// start) and the deletions, each capped at [`BURST_REPLICAS`].
fn sync_nodes(
    s: &Sync<'_>,
    expectations: &mut Expectations,
    pods_to_delete: &[String],
    nodes_needing_pods: &[String],
) -> Vec<Action> {
    let creates = nodes_needing_pods.len().min(BURST_REPLICAS);
    let deletes = pods_to_delete.len().min(BURST_REPLICAS);
    let namespace = s.ds.metadata.namespace.as_deref();
    let keys: Vec<ObjectKey> = pods_to_delete[..deletes]
        .iter()
        .map(|p| ObjectKey::new(namespace, p.clone()))
        .collect();
    expectations.expect_deletions(&s.key, &keys, s.now);
    expectations.raise_expectations(&s.key, creates as i64, 0);
    let mut actions = Vec::new();
    if creates > 0 {
        let pods = nodes_needing_pods[..creates]
            .iter()
            .map(|node| new_daemon_pod(s.ds, node, s.hash, s.generation))
            .collect();
        actions.push(Action::CreateDistinctPods {
            controller: s.ds_ref.clone(),
            pods,
            batches: slow_start_batches(creates),
        });
    }
    if deletes > 0 {
        actions.push(Action::DeletePods {
            controller: s.ds_ref.clone(),
            pods: keys,
        });
    }
    actions
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

#[cfg(test)]
mod rolling_tests;
#[cfg(test)]
mod tests;
