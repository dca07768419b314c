//! The StatefulSet controller: pods with stable names, hostnames and storage, created,
//! deleted and updated in ordinal order.
//!
//! Mirrors `pkg/controller/statefulset/` of Kubernetes 1.33: `stateful_set_control.go`
//! (`updateStatefulSet`, `processReplica`, `processCondemned`, `runForAll`,
//! `truncateHistory`), `stateful_set_utils.go` ([`identity`], [`retention`]),
//! `stateful_pod_control.go` (the pod and claim writes, carried out by [`controller`] from
//! the [`SetAction`]s decided here), `stateful_set_status_updater.go` and [`status`].
//!
//! ```text
//!  sync_stateful_set(set, its pods, current + update revision, revisions, claims, now)
//!   ├─ replicas = ordinals [start, start+replicas); condemned = the others, highest first
//!   ├─ per replica, in order (OrderedReady stops at the first that is not ready):
//!   │    failed/succeeded ─▶ delete (recreated next sync)
//!   │    missing          ─▶ create its claims <template>-<set>-<ordinal>, then the pod
//!   │                        (current revision below the partition, update revision above)
//!   │    terminating / not Running and Ready / not available ─▶ OrderedReady waits
//!   │    identity, storage or claim owners off ─▶ update
//!   ├─ condemned claims: owner references for whenScaled
//!   ├─ condemned pods, highest first ─▶ delete (OrderedReady: one at a time, once ready)
//!   ├─ RollingUpdate: highest ordinal ≥ partition not at the update revision ─▶ delete it
//!   │                 (recreated at the update revision); wait while one is unhealthy
//!   └─ status (PUT /status if changed); revisions beyond revisionHistoryLimit ─▶ delete
//! ```
//!
//! Simplified versus Kubernetes: the `MaxUnavailableStatefulSet` feature is alpha (off by
//! default) in 1.33, so `rollingUpdate.maxUnavailable` is ignored as Kubernetes ignores it
//! with the gate off; `Parallel` pod management carries out its writes one after the other
//! (stopping at the first failure) rather than in slow-start batches; a claim created for a
//! pod gets its `whenDeleted` owner reference in the creation itself rather than in an
//! update right after; and claims are read live by the shell rather than from an informer.

pub mod controller;
pub mod identity;
pub mod retention;
pub mod status;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use apimachinery::{EventType, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use self::identity::{
    REVISION_LABEL, apply_revision, claims_for, end_ordinal, identity_matches, in_ordinal_range,
    is_created, is_finished, is_healthy, is_running_and_available, is_running_and_ready,
    is_terminating, new_stateful_set_pod, ordinal, pod_revision, start_ordinal, storage_matches,
    update_identity, update_storage,
};
use self::retention::{claim_owner_matches, has_stale_owner_ref, policy, update_claim_owner_refs};
use self::status::{complete_rolling_update, count_replicas, inconsistent_status};
use crate::action::{Action, event};
use crate::owner_ref::name;
use crate::pod_readiness::pod_phase;

/// One write of a StatefulSet sync, carried out by the shell in order (stopping at the first
/// failure), with the events of `stateful_pod_control.go`.
#[derive(Debug, Clone, PartialEq)]
pub enum SetAction {
    /// `CreateStatefulPod`: create the missing `claims` (event per claim: `SuccessfulCreate`
    /// "create Claim c Pod p in StatefulSet s success", or `FailedCreate`), then the pod
    /// (`SuccessfulCreate` "create Pod p in StatefulSet s successful" / `FailedCreate`).
    CreatePod {
        /// The pod, named `<set>-<ordinal>`.
        pod: Box<Pod>,
        /// Its claims not found in the cluster.
        claims: Vec<PersistentVolumeClaim>,
    },
    /// `createMissingPersistentVolumeClaims` of a pending pod (claim events only).
    CreateClaims {
        /// The pod's name, for events.
        pod: String,
        /// The claims to create.
        claims: Vec<PersistentVolumeClaim>,
    },
    /// `UpdateStatefulPod`: update the claims' owner references, then the pod if
    /// `write_pod`; `SuccessfulUpdate` / `FailedUpdate` "update Pod p in StatefulSet s ...".
    UpdatePod {
        /// The pod with its identity and storage fixed.
        pod: Box<Pod>,
        /// Whether the pod itself changed.
        write_pod: bool,
        /// Claims whose owner references changed.
        claims: Vec<PersistentVolumeClaim>,
    },
    /// `UpdatePodClaimForRetentionPolicy` of a condemned pod (no events).
    UpdateClaims(Vec<PersistentVolumeClaim>),
    /// `DeleteStatefulPod`: `SuccessfulDelete` / `FailedDelete` "delete Pod p in StatefulSet
    /// s ..."; NotFound counts as done.
    DeletePod(ObjectRef),
    /// Record an event ([`Action::Event`]).
    Event(Action),
}

impl SetAction {
    /// A short line for logs and traces.
    pub fn describe(&self) -> String {
        match self {
            SetAction::CreatePod { pod, claims } => {
                let claims: Vec<&str> = claims.iter().map(|c| name(&c.metadata)).collect();
                if claims.is_empty() {
                    format!("create Pod {}", name(&pod.metadata))
                } else {
                    format!(
                        "create Pod {} with claims {}",
                        name(&pod.metadata),
                        claims.join(", ")
                    )
                }
            }
            SetAction::CreateClaims { pod, claims } => {
                let claims: Vec<&str> = claims.iter().map(|c| name(&c.metadata)).collect();
                format!("create claims {} of Pod {pod}", claims.join(", "))
            }
            SetAction::UpdatePod { pod, .. } => format!("update Pod {}", name(&pod.metadata)),
            SetAction::UpdateClaims(claims) => {
                let claims: Vec<&str> = claims.iter().map(|c| name(&c.metadata)).collect();
                format!("update owner references of claims {}", claims.join(", "))
            }
            SetAction::DeletePod(pod) => format!("delete Pod {}", pod.name),
            SetAction::Event(a) => a.describe(),
        }
    }
}

/// Everything one StatefulSet sync reads.
#[derive(Debug, Clone, Copy)]
pub struct StatefulSetSyncInput<'a> {
    /// The StatefulSet (from the lister).
    pub set: &'a StatefulSet,
    /// Its pods (claimed, named `<set>-<ordinal>`).
    pub pods: &'a [&'a Pod],
    /// The current revision (`status.currentRevision`, or the update revision at first).
    pub current_revision: &'a ControllerRevision,
    /// The update revision (the set's template).
    pub update_revision: &'a ControllerRevision,
    /// `status.collisionCount` after the update revision was created.
    pub collision_count: i32,
    /// Every revision the set controls, sorted (for `truncateHistory`).
    pub revisions: &'a [ControllerRevision],
    /// The claims of its templates found in the cluster, by name.
    pub claims: &'a BTreeMap<String, PersistentVolumeClaim>,
    /// The time of this sync.
    pub now: Timestamp,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct StatefulSetSync {
    /// Pod and claim writes, in order.
    pub actions: Vec<SetAction>,
    /// The status after the writes; `Some` when it differs from the set's (PUT /status,
    /// written even when an action failed).
    pub status: Option<StatefulSetStatus>,
    /// Revisions to delete after the status (`truncateHistory`).
    pub delete_revisions: Vec<ObjectRef>,
    /// Sync again after this delay (`minReadySeconds`).
    pub requeue_after: Option<Duration>,
    /// The decision: what was done or what the sync waits for.
    pub reason: String,
    /// What was decided and why, for logs and traces.
    pub summary: String,
}

/// Whether pods are managed in `Parallel` (`allowsBurst`).
pub fn allows_burst(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel")
}

/// `spec.updateStrategy.type` is `OnDelete`.
pub fn is_on_delete(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        == Some("OnDelete")
}

/// `spec.updateStrategy.rollingUpdate.partition` (default 0).
pub fn partition(set: &StatefulSet) -> i64 {
    i64::from(
        set.spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0)
            .max(0),
    )
}

fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// `newVersionedStatefulSetPod`: below the partition (or, without `rollingUpdate`, below
/// `status.currentReplicas`) a pod of the current revision, else of the update revision.
pub fn new_versioned_pod(
    current_set: &StatefulSet,
    update_set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    ordinal: i64,
) -> Pod {
    let spec = current_set.spec.as_ref();
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    let rolling = strategy
        .and_then(|u| u.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    let start = start_ordinal(current_set);
    let current_replicas = i64::from(
        current_set
            .status
            .as_ref()
            .and_then(|s| s.current_replicas)
            .unwrap_or(0),
    );
    let use_current = match strategy.and_then(|u| u.rolling_update.as_ref()) {
        None => rolling && ordinal < start + current_replicas,
        Some(_) => ordinal < start + partition(current_set),
    };
    let (set, revision) = if use_current {
        (current_set, current_revision)
    } else {
        (update_set, update_revision)
    };
    let mut pod = new_stateful_set_pod(set, ordinal);
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(REVISION_LABEL.to_owned(), revision.to_owned());
    pod
}

fn set_ref(set: &StatefulSet) -> ObjectRef {
    ObjectRef::from_object(set)
}

/// State of one sync.
struct Sync<'a> {
    input: StatefulSetSyncInput<'a>,
    update_set: StatefulSet,
    monotonic: bool,
    actions: Vec<SetAction>,
    /// What each step did or waited for.
    notes: Vec<String>,
}

impl<'a> Sync<'a> {
    fn claim(&self, name: &str) -> Option<&'a PersistentVolumeClaim> {
        self.input.claims.get(name)
    }

    /// The claims of `pod` whose owner references the policy wants changed.
    fn claims_to_fix(&self, set: &StatefulSet, pod: &Pod) -> Vec<PersistentVolumeClaim> {
        claims_for(set, ordinal(pod))
            .values()
            .filter_map(|wanted| self.claim(name(&wanted.metadata)))
            .filter(|c| !claim_owner_matches(c, set, pod))
            .map(|c| {
                let mut c = c.clone();
                update_claim_owner_refs(&mut c, set, pod);
                c
            })
            .collect()
    }

    /// `processReplica`: true when the sync must stop here.
    fn process_replica(&mut self, pod: &Pod) -> bool {
        let set = self.input.set;
        let pod_name = name(&pod.metadata).to_owned();
        if is_created(pod) && is_finished(pod) {
            if !is_terminating(pod) {
                self.notes.push(format!(
                    "deleting {pod_name}: it is {} and will be recreated",
                    pod_phase(pod)
                ));
                self.actions
                    .push(SetAction::DeletePod(ObjectRef::from_object(pod)));
            }
            return true;
        }
        if !is_created(pod) {
            let claims = claims_for(set, ordinal(pod));
            if policy(set).delete_when_scaled {
                let stale = claims
                    .values()
                    .filter_map(|c| self.claim(name(&c.metadata)))
                    .find(|c| has_stale_owner_ref(c, pod));
                if let Some(stale) = stale {
                    self.notes.push(format!(
                        "waiting for stale claim {} of {pod_name} to be deleted",
                        name(&stale.metadata)
                    ));
                    return true;
                }
            }
            let mut missing = Vec::new();
            for claim in claims.values() {
                match self.claim(name(&claim.metadata)) {
                    None => {
                        let mut claim = claim.clone();
                        update_claim_owner_refs(&mut claim, set, pod);
                        missing.push(claim);
                    }
                    Some(found) if found.metadata.deletion_timestamp.is_some() => {
                        let claim_name = name(&found.metadata).to_owned();
                        self.actions.push(SetAction::Event(event(
                            set_ref(set),
                            EventType::Warning,
                            "FailedCreate",
                            format!(
                                "create Pod {pod_name} in StatefulSet {} failed error: pvc {claim_name} is being deleted",
                                name(&set.metadata)
                            ),
                        )));
                        self.notes.push(format!(
                            "waiting for claim {claim_name} of {pod_name} to be deleted"
                        ));
                        return true;
                    }
                    Some(_) => {}
                }
            }
            self.notes.push(format!(
                "creating {pod_name} at revision {}",
                pod_revision(pod)
            ));
            self.actions.push(SetAction::CreatePod {
                pod: Box::new(pod.clone()),
                claims: missing,
            });
            if self.monotonic {
                self.notes
                    .push(format!("waiting for {pod_name} to be Running and Ready"));
                return true;
            }
            return false;
        }
        if pod_phase(pod) == "Pending" {
            let missing: Vec<PersistentVolumeClaim> = claims_for(set, ordinal(pod))
                .into_values()
                .filter(|c| self.claim(name(&c.metadata)).is_none())
                .collect();
            if !missing.is_empty() {
                self.actions.push(SetAction::CreateClaims {
                    pod: pod_name.clone(),
                    claims: missing,
                });
            }
        }
        if is_terminating(pod) && self.monotonic {
            self.notes
                .push(format!("waiting for {pod_name} to terminate"));
            return true;
        }
        if !is_running_and_ready(pod) && self.monotonic {
            self.notes
                .push(format!("waiting for {pod_name} to be Running and Ready"));
            return true;
        }
        if !is_running_and_available(pod, min_ready_seconds(set), self.input.now) && self.monotonic
        {
            self.notes.push(format!(
                "waiting for {pod_name} to be Available (minReadySeconds {})",
                min_ready_seconds(set)
            ));
            return true;
        }
        let claims = self.claims_to_fix(&self.update_set, pod);
        let consistent = identity_matches(set, pod) && storage_matches(set, pod);
        if consistent && claims.is_empty() {
            return false;
        }
        let mut updated = pod.clone();
        if !identity_matches(&self.update_set, &updated) {
            update_identity(&self.update_set, &mut updated);
        }
        if !storage_matches(&self.update_set, &updated) {
            update_storage(&self.update_set, &mut updated);
        }
        self.notes.push(format!(
            "updating {pod_name}: identity, storage or claim owners"
        ));
        self.actions.push(SetAction::UpdatePod {
            pod: Box::new(updated),
            write_pod: !consistent,
            claims,
        });
        false
    }

    /// `processCondemned`: true when the sync must stop here.
    fn process_condemned(&mut self, pod: &Pod, first_unhealthy: Option<&str>) -> bool {
        let pod_name = name(&pod.metadata).to_owned();
        let is_first_unhealthy = first_unhealthy == Some(pod_name.as_str());
        if is_terminating(pod) {
            if self.monotonic {
                self.notes.push(format!(
                    "waiting for {pod_name} to terminate prior to scale down"
                ));
            }
            return self.monotonic;
        }
        if !is_running_and_ready(pod) && self.monotonic && !is_first_unhealthy {
            self.notes.push(format!(
                "waiting for {pod_name} to be Running and Ready prior to scale down"
            ));
            return true;
        }
        let set = self.input.set;
        if !is_running_and_available(pod, min_ready_seconds(set), self.input.now)
            && self.monotonic
            && !is_first_unhealthy
        {
            self.notes.push(format!(
                "waiting for {pod_name} to be Available prior to scale down"
            ));
            return true;
        }
        self.notes.push(format!(
            "deleting {pod_name} for scale down to {} replicas",
            identity::replicas(set)
        ));
        self.actions
            .push(SetAction::DeletePod(ObjectRef::from_object(pod)));
        true
    }
}

/// `updateStatefulSet` + `updateStatefulSetStatus` + `truncateHistory`: what one sync of
/// `input.set` writes.
pub fn sync_stateful_set(input: StatefulSetSyncInput<'_>) -> StatefulSetSync {
    let set = input.set;
    let current_set = apply_revision(set, input.current_revision);
    let update_set = apply_revision(set, input.update_revision);
    let current_name = name(&input.current_revision.metadata).to_owned();
    let update_name = name(&input.update_revision.metadata).to_owned();
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        current_revision: Some(current_name.clone()),
        update_revision: Some(update_name.clone()),
        collision_count: Some(input.collision_count),
        ..set.status.clone().unwrap_or_default()
    };
    let min_ready = min_ready_seconds(set);

    // Partition the pods into replicas (by ordinal) and condemned (highest first).
    let start = start_ordinal(set);
    let end = end_ordinal(set);
    let mut slots: BTreeMap<i64, Pod> = BTreeMap::new();
    let mut condemned: Vec<&Pod> = Vec::new();
    for pod in input.pods.iter().copied() {
        if in_ordinal_range(pod, set) {
            slots.insert(ordinal(pod), pod.clone());
        } else if ordinal(pod) >= 0 {
            condemned.push(pod);
        }
    }
    for o in start..=end {
        slots.entry(o).or_insert_with(|| {
            new_versioned_pod(&current_set, &update_set, &current_name, &update_name, o)
        });
    }
    let replicas: Vec<Pod> = slots.into_values().collect();
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));
    let first_unhealthy: Option<String> = replicas
        .iter()
        .find(|p| !is_healthy(p))
        .or_else(|| condemned.iter().rev().copied().find(|p| !is_healthy(p)))
        .map(|p| name(&p.metadata).to_owned());

    let mut sync = Sync {
        input,
        update_set: update_set.clone(),
        monotonic: !allows_burst(set),
        actions: Vec::new(),
        notes: Vec::new(),
    };
    let all: Vec<&Pod> = replicas.iter().chain(condemned.iter().copied()).collect();
    count_replicas(&mut status, min_ready, &all, input.now);

    let done = if set.metadata.deletion_timestamp.is_some() {
        sync.notes.push("being deleted: status only".to_owned());
        true
    } else {
        process_all(&mut sync, &replicas, &condemned, first_unhealthy.as_deref())
    };
    if !done && is_on_delete(set) {
        sync.notes
            .push("OnDelete: pods are updated when they are deleted".to_owned());
    } else if !done {
        rolling_update(&mut sync, &replicas, &update_name, &mut status);
    }

    complete_rolling_update(set, &mut status);
    let write_status = inconsistent_status(set, &status);
    let delete_revisions = truncate_history(
        set,
        input.pods,
        input.revisions,
        &current_name,
        &update_name,
    );
    let available = status.available_replicas.unwrap_or(0);
    let requeue_after = (min_ready > 0 && i64::from(available) != identity::replicas(set))
        .then(|| Duration::from_secs(min_ready as u64));
    if sync.notes.is_empty() {
        sync.notes.push(format!(
            "in sync: {} replicas at revision {update_name}",
            identity::replicas(set)
        ));
    }
    let reason = sync.notes.join("; ");
    let summary = format!(
        "StatefulSet {}: {reason} (replicas {}, ready {}, updated {})",
        name(&set.metadata),
        status.replicas,
        status.ready_replicas.unwrap_or(0),
        status.updated_replicas.unwrap_or(0)
    );
    StatefulSetSync {
        actions: sync.actions,
        status: write_status.then_some(status),
        delete_revisions,
        requeue_after,
        reason,
        summary,
    }
}

/// `runForAll` over the replicas, the condemned pods' claims and the condemned pods: true
/// when the sync stopped early.
fn process_all(
    sync: &mut Sync<'_>,
    replicas: &[Pod],
    condemned: &[&Pod],
    first_unhealthy: Option<&str>,
) -> bool {
    let monotonic = sync.monotonic;
    for pod in replicas {
        if sync.process_replica(pod) && monotonic {
            return true;
        }
    }
    for pod in condemned {
        let claims = sync.claims_to_fix(&sync.update_set.clone(), pod);
        if !claims.is_empty() {
            sync.actions.push(SetAction::UpdateClaims(claims));
        }
    }
    for pod in condemned {
        if sync.process_condemned(pod, first_unhealthy) && monotonic {
            return true;
        }
    }
    // In Parallel mode `runForAll` ignores "should exit": the rolling update runs too.
    false
}

/// The rolling update: the highest ordinal ≥ partition not at the update revision is deleted
/// (and recreated at it next sync); an unhealthy one is waited for.
fn rolling_update(
    sync: &mut Sync<'_>,
    replicas: &[Pod],
    update_revision: &str,
    status: &mut StatefulSetStatus,
) {
    let partition = partition(sync.input.set);
    for (index, pod) in replicas.iter().enumerate().rev() {
        if (index as i64) < partition {
            break;
        }
        let pod_name = name(&pod.metadata);
        if pod_revision(pod) != update_revision && !is_terminating(pod) {
            sync.notes.push(format!(
                "updating {pod_name} to revision {update_revision} (partition {partition})"
            ));
            sync.actions
                .push(SetAction::DeletePod(ObjectRef::from_object(pod)));
            status.current_replicas = Some(status.current_replicas.unwrap_or(0) - 1);
            return;
        }
        if !is_healthy(pod) {
            sync.notes.push(format!(
                "waiting for {pod_name} to be Running and Ready to continue the update (partition {partition})"
            ));
            return;
        }
    }
}

/// `truncateHistory`: revisions neither current, update nor used by a pod, beyond
/// `revisionHistoryLimit`, oldest first.
pub fn truncate_history(
    set: &StatefulSet,
    pods: &[&Pod],
    revisions: &[ControllerRevision],
    current: &str,
    update: &str,
) -> Vec<ObjectRef> {
    let live: Vec<&str> = pods
        .iter()
        .map(|p| pod_revision(p))
        .chain([current, update])
        .collect();
    let history: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| !live.contains(&name(&r.metadata)))
        .collect();
    let limit = set
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize;
    let excess = history.len().saturating_sub(limit);
    history
        .into_iter()
        .take(excess)
        .map(ObjectRef::from_object)
        .collect()
}
