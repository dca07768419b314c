//! The ReplicaSet controller: keep `spec.replicas` pods running.
//!
//! Mirrors `pkg/controller/replicaset/replica_set.go` (`syncReplicaSet`, `manageReplicas`,
//! `getPodsToDelete`) with helpers from `pkg/controller/controller_utils.go`. Files:
//! [`pods`] (pod from template, slow start, events), [`ranking`] (`ActivePodsWithRanks`),
//! [`status`] (`calculateStatus`).
//!
//! ```text
//!  sync_replica_set(expectations, ReplicaSet, its pods, now)
//!    │
//!    ├─ expectations satisfied? (no creates/deletes still in flight, or 5 min passed)
//!    │    └─ yes, not being deleted ─▶ manage_replicas
//!    │          diff = active pods - spec.replicas
//!    │          diff < 0 ─▶ expect_creations(n) ─▶ CreatePods n in batches 1, 2, 4, ...
//!    │          diff > 0 ─▶ rank pods ─▶ expect_deletions(victims) ─▶ DeletePods victims
//!    ├─ calculate_status ─▶ PUT /status if changed
//!    └─ all ready but not yet available (minReadySeconds) ─▶ requeue after minReadySeconds
//! ```
//!
//! `burstReplicas` (500) caps how many pods one sync creates or deletes.

pub mod controller;
pub mod kind;
pub mod pods;
pub mod ranking;
pub mod status;

use std::time::Duration;

use apimachinery::{ObjectKey, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use crate::action::Action;
use crate::expectations::Expectations;
use crate::pod_readiness::filter_active_pods;

/// `BurstReplicas`: at most this many creations or deletions per sync.
pub const BURST_REPLICAS: usize = 500;

/// Everything one ReplicaSet sync reads.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSetSyncInput<'a> {
    /// The ReplicaSet (from the lister).
    pub replica_set: &'a ReplicaSet,
    /// Pods it controls, already claimed (see [`crate::controller_ref::claim_objects`]); any
    /// phase — inactive ones are filtered here. References into the informer's cache: a
    /// sync of a ReplicaSet with 10,000 pods copies none of them.
    pub pods: &'a [&'a Pod],
    /// Pods of all ReplicaSets under the same Deployment (`getIndirectlyRelatedPods`), for
    /// ranking victims by node; empty means "just `pods`".
    pub related_pods: &'a [Pod],
    /// The time of this sync.
    pub now: Timestamp,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSetSync {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What was decided and why, e.g. `desired 3, have 0 → create 3 in batches 1, 2`.
    pub summary: String,
}

/// `syncReplicaSet`: the whole decision for one ReplicaSet key. Updates `expectations` for
/// the creations and deletions it decides (as Go does before issuing them).
pub fn sync_replica_set(
    expectations: &mut Expectations,
    input: ReplicaSetSyncInput<'_>,
) -> ReplicaSetSync {
    let rs = input.replica_set;
    let key = ObjectKey::from_meta(&rs.metadata);
    let active = filter_active_pods(input.pods.iter().copied());
    let desired = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let mut notes = vec![format!("desired {desired}, have {}", active.len())];
    let mut actions = Vec::new();
    if rs.metadata.deletion_timestamp.is_some() {
        notes.push("being deleted: status only".into());
    } else if !expectations.satisfied_expectations(&key, input.now) {
        let pending = expectations
            .get_expectations(&key)
            .map(|e| (e.add, e.del))
            .unwrap_or_default();
        notes.push(format!(
            "waiting for {} creations / {} deletions to be observed",
            pending.0, pending.1
        ));
    } else {
        let related: Vec<&Pod> = if input.related_pods.is_empty() {
            active.clone()
        } else {
            input.related_pods.iter().collect()
        };
        let (manage, note) = manage_replicas(expectations, &active, &related, rs, input.now);
        actions.extend(manage);
        notes.push(note);
    }
    let new_status = status::calculate_status(rs, &active, None, input.now);
    let ready = new_status.ready_replicas.unwrap_or(0);
    let available = new_status.available_replicas.unwrap_or(0);
    if let Some(updated) = status::status_update(rs, new_status) {
        actions.push(Action::UpdateReplicaSetStatus(Box::new(updated)));
    }
    let min_ready = rs
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    if min_ready > 0 && ready == desired && available != desired {
        notes.push(format!(
            "ready but not yet available: check again in {min_ready}s"
        ));
        actions.push(Action::RequeueAfter(Duration::from_secs(min_ready as u64)));
    }
    ReplicaSetSync {
        actions,
        summary: notes.join(" → "),
    }
}

/// `manageReplicas`: create or delete pods to close the gap (at most [`BURST_REPLICAS`]),
/// recording expectations first. Returns the actions and a note.
pub fn manage_replicas(
    expectations: &mut Expectations,
    active: &[&Pod],
    related: &[&Pod],
    rs: &ReplicaSet,
    now: Timestamp,
) -> (Vec<Action>, String) {
    let key = ObjectKey::from_meta(&rs.metadata);
    let desired = rs
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0) as usize;
    let controller = ObjectRef::from_object(rs);
    if active.len() < desired {
        let n = (desired - active.len()).min(BURST_REPLICAS);
        expectations.expect_creations(&key, n, now);
        let batches = pods::slow_start_batches(n);
        let list: Vec<String> = batches.iter().map(usize::to_string).collect();
        let note = format!("create {n} in batches {}", list.join(", "));
        let pod = Box::new(pods::get_pod_from_template(rs));
        (
            vec![Action::CreatePods {
                controller,
                pod,
                batches,
            }],
            note,
        )
    } else if active.len() > desired {
        let n = (active.len() - desired).min(BURST_REPLICAS);
        let victims = ranking::get_pods_to_delete(active, related, n, now);
        let keys: Vec<ObjectKey> = victims
            .iter()
            .map(|p| ObjectKey::from_meta(&p.metadata))
            .collect();
        expectations.expect_deletions(&key, &keys, now);
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        let note = format!(
            "delete {n}: {} (ranked by ActivePodsWithRanks)",
            names.join(", ")
        );
        (
            vec![Action::DeletePods {
                controller,
                pods: keys,
            }],
            note,
        )
    } else {
        (Vec::new(), "in sync".into())
    }
}

/// The status to write when the `CreatePods`/`DeletePods` of this sync failed with `error`
/// (Go passes `manageReplicasErr` to `calculateStatus`): a `ReplicaFailure` condition with
/// reason `FailedCreate` or `FailedDelete`.
pub fn status_after_manage_error(
    rs: &ReplicaSet,
    pods: &[&Pod],
    error: &str,
    now: Timestamp,
) -> Option<Action> {
    let active = filter_active_pods(pods.iter().copied());
    let new_status = status::calculate_status(rs, &active, Some(error), now);
    status::status_update(rs, new_status).map(|rs| Action::UpdateReplicaSetStatus(Box::new(rs)))
}

#[cfg(test)]
pub(crate) mod tests;
