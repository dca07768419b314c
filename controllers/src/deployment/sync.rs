//! Syncing ReplicaSets and status: the shared steps of every Deployment sync.
//!
//! Mirrors `pkg/controller/deployment/sync.go`: `getAllReplicaSetsAndSyncRevision` (find or
//! create the new ReplicaSet, keep revisions in order), `scale` (proportional scaling during
//! a rollout), `scaleReplicaSet` (with the `ScalingReplicaSet` event), `cleanupDeployment`
//! (revision history), `calculateStatus`, `syncDeploymentStatus` and `checkPausedConditions`.
//!
//! Go's methods on `*DeploymentController` call the API server; here they are methods on
//! [`DeploymentSyncer`], which records an [`Action`] instead and continues with the object it
//! expects the API server to return.

use std::collections::BTreeMap;

use apimachinery::{EventType, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::conditions::*;
use super::hash::compute_hash;
use super::util::*;
use crate::action::{Action, event};
use crate::error::Result;
use crate::owner_ref::{get_controller_of, new_controller_ref, uid};

/// Plays the part of Go's `*DeploymentController` for one sync: it holds the working copy of
/// the Deployment (whose status the steps update in place, as Go does) and records the
/// actions the steps decide, plus a line of explanation per decision.
#[derive(Debug)]
pub struct DeploymentSyncer<'a> {
    /// Working copy of the Deployment being synced.
    pub d: Deployment,
    /// Pods by the UID of the ReplicaSet controlling them (Recreate waits for old pods).
    pub pods_by_replica_set: &'a BTreeMap<String, Vec<Pod>>,
    /// The time of this sync.
    pub now: Timestamp,
    /// Decided actions, in execution order.
    pub actions: Vec<Action>,
    /// "What and why" notes, joined into the sync's summary.
    pub notes: Vec<String>,
}

/// The new ReplicaSet (if any) and the old ones, as `getAllReplicaSetsAndSyncRevision` returns.
#[derive(Debug, Clone, Default)]
pub struct ReplicaSets {
    /// The ReplicaSet whose template equals the Deployment's.
    pub new: Option<ReplicaSet>,
    /// Every other ReplicaSet of the Deployment.
    pub old: Vec<ReplicaSet>,
}

impl ReplicaSets {
    /// Old then new, as Go's `append(oldRSs, newRS)`.
    pub fn all(&self) -> Vec<&ReplicaSet> {
        self.old.iter().chain(self.new.as_ref()).collect()
    }

    /// Old ReplicaSets with `spec.replicas > 0` (`FilterActiveReplicaSets(oldRSs)`).
    pub fn active_old(&self) -> Vec<ReplicaSet> {
        self.old
            .iter()
            .filter(|rs| rs_replicas(rs) > 0)
            .cloned()
            .collect()
    }

    /// The old ReplicaSets as references.
    pub fn old_refs(&self) -> Vec<&ReplicaSet> {
        self.old.iter().collect()
    }
}

impl<'a> DeploymentSyncer<'a> {
    /// A syncer for `d` at `now`.
    pub fn new(
        d: &Deployment,
        pods_by_replica_set: &'a BTreeMap<String, Vec<Pod>>,
        now: Timestamp,
    ) -> Self {
        DeploymentSyncer {
            d: d.clone(),
            pods_by_replica_set,
            now,
            actions: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The Deployment's name.
    pub fn name(&self) -> String {
        self.d.metadata.name.clone().unwrap_or_default()
    }

    pub(crate) fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub(crate) fn event(&mut self, type_: EventType, reason: &str, message: impl Into<String>) {
        self.actions.push(event(
            ObjectRef::from_object(&self.d),
            type_,
            reason,
            message,
        ));
    }

    pub(crate) fn update_status(&mut self) {
        self.actions
            .push(Action::UpdateDeploymentStatus(Box::new(self.d.clone())));
    }

    fn status_mut(&mut self) -> &mut DeploymentStatus {
        self.d.status.get_or_insert_with(Default::default)
    }

    /// Sets the Progressing condition on the working copy (`SetDeploymentCondition`).
    fn set_progressing(&mut self, status: &str, reason: &str, message: impl Into<String>) {
        let condition =
            new_deployment_condition(DEPLOYMENT_PROGRESSING, status, reason, message, self.now);
        set_deployment_condition(self.status_mut(), condition);
    }

    /// `getAllReplicaSetsAndSyncRevision`: split `rs_list` into new and old, syncing the new
    /// one's revision; with `create_if_not_existed` a missing new ReplicaSet is created.
    pub fn get_all_replica_sets_and_sync_revision(
        &mut self,
        rs_list: &[ReplicaSet],
        create_if_not_existed: bool,
    ) -> Result<ReplicaSets> {
        let (_, all_old) = find_old_replica_sets(&self.d, rs_list);
        let old: Vec<ReplicaSet> = all_old.into_iter().map(|i| rs_list[i].clone()).collect();
        let new = self.get_new_replica_set(rs_list, &old, create_if_not_existed)?;
        Ok(ReplicaSets { new, old })
    }

    /// `getNewReplicaSet`: the existing new ReplicaSet with its annotations and revision
    /// synced, or (if allowed) a freshly created one named `<deployment>-<pod-template-hash>`.
    pub fn get_new_replica_set(
        &mut self,
        rs_list: &[ReplicaSet],
        old: &[ReplicaSet],
        create_if_not_existed: bool,
    ) -> Result<Option<ReplicaSet>> {
        let old_refs: Vec<&ReplicaSet> = old.iter().collect();
        let new_revision = (max_revision(&old_refs) + 1).to_string();
        if let Some(i) = find_new_replica_set(&self.d, rs_list) {
            let mut rs_copy = rs_list[i].clone();
            let annotations_updated = set_new_replica_set_annotations(
                &self.d,
                &mut rs_copy,
                &new_revision,
                true,
                MAX_REV_HISTORY_LENGTH_IN_CHARS,
            );
            let min_ready = deployment_min_ready_seconds(&self.d);
            let min_ready_needs_update = rs_copy
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0)
                != min_ready;
            if annotations_updated || min_ready_needs_update {
                rs_copy
                    .spec
                    .get_or_insert_with(Default::default)
                    .min_ready_seconds = Some(min_ready);
                self.note(format!(
                    "sync annotations of new replica set {}",
                    name_of(&rs_copy)
                ));
                self.actions
                    .push(Action::UpdateReplicaSet(Box::new(rs_copy.clone())));
                return Ok(Some(rs_copy));
            }
            let rs_revision = rs_copy
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            let mut needs_update = set_deployment_revision(&mut self.d, &rs_revision);
            let progressing =
                get_deployment_condition(self.d.status.as_ref(), DEPLOYMENT_PROGRESSING);
            if progress_deadline_seconds(&self.d).is_some() && progressing.is_none() {
                let msg = format!("Found new replica set {:?}", name_of(&rs_copy));
                self.set_progressing("True", FOUND_NEW_RS_REASON, msg);
                needs_update = true;
            }
            if needs_update {
                self.update_status();
            }
            return Ok(Some(rs_copy));
        }
        if !create_if_not_existed {
            return Ok(None);
        }
        let new_rs = self.new_replica_set_object(&old_refs, &new_revision)?;
        let name = name_of(&new_rs);
        let replicas = rs_replicas(&new_rs);
        self.note(format!(
            "create new replica set {name} with {replicas} (revision {new_revision})"
        ));
        self.actions
            .push(Action::CreateReplicaSet(Box::new(new_rs.clone())));
        if replicas > 0 {
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled up replica set {name} from 0 to {replicas}"),
            );
        }
        let mut needs_update = set_deployment_revision(&mut self.d, &new_revision);
        if progress_deadline_seconds(&self.d).is_some() {
            let msg = format!("Created new replica set {name:?}");
            self.set_progressing("True", NEW_REPLICA_SET_REASON, msg);
            needs_update = true;
        }
        if needs_update {
            self.update_status();
        }
        Ok(Some(new_rs))
    }

    /// The ReplicaSet object `getNewReplicaSet` POSTs: template and selector get the
    /// `pod-template-hash` label, the Deployment becomes its controller, and its size is
    /// `NewRSNewReplicas`.
    fn new_replica_set_object(
        &self,
        old: &[&ReplicaSet],
        new_revision: &str,
    ) -> Result<ReplicaSet> {
        let d = &self.d;
        let mut template = deployment_template(d);
        let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&template, collision_count);
        let template_meta = template.metadata.get_or_insert_with(Default::default);
        template_meta
            .labels
            .get_or_insert_with(Default::default)
            .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), hash.clone());
        let labels = template_meta.labels.clone();
        let mut selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(), hash.clone());
        let mut new_rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{}-{hash}", self.name())),
                namespace: d.metadata.namespace.clone(),
                owner_references: Some(vec![new_controller_ref(d)]),
                labels,
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: Some(deployment_min_ready_seconds(d)),
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let mut all = old.to_vec();
        all.push(&new_rs);
        let replicas = new_rs_new_replicas(d, &all, &new_rs)?;
        set_rs_replicas(&mut new_rs, replicas);
        set_new_replica_set_annotations(
            d,
            &mut new_rs,
            new_revision,
            false,
            MAX_REV_HISTORY_LENGTH_IN_CHARS,
        );
        Ok(new_rs)
    }

    /// `scaleReplicaSetAndRecordEvent`: scale `rs` to `new_scale` if it differs; returns
    /// whether it scaled and the ReplicaSet as it will be.
    pub fn scale_replica_set_and_record_event(
        &mut self,
        rs: &ReplicaSet,
        new_scale: i32,
    ) -> (bool, ReplicaSet) {
        let current = rs_replicas(rs);
        if current == new_scale {
            return (false, rs.clone());
        }
        let op = if current < new_scale { "up" } else { "down" };
        self.scale_replica_set(rs, new_scale, op)
    }

    /// `scaleReplicaSet`: PUT the ReplicaSet with `new_scale` and fresh `desired-replicas` /
    /// `max-replicas` annotations; the `ScalingReplicaSet` event only when the size changed.
    pub fn scale_replica_set(
        &mut self,
        rs: &ReplicaSet,
        new_scale: i32,
        op: &str,
    ) -> (bool, ReplicaSet) {
        let old_scale = rs_replicas(rs);
        let desired = deployment_replicas(&self.d);
        let max = desired + max_surge(&self.d);
        let size_needs_update = old_scale != new_scale;
        if !size_needs_update && !replicas_annotations_need_update(rs, desired, max) {
            return (false, rs.clone());
        }
        let mut rs_copy = rs.clone();
        set_rs_replicas(&mut rs_copy, new_scale);
        set_replicas_annotations(&mut rs_copy, desired, max);
        self.actions
            .push(Action::UpdateReplicaSet(Box::new(rs_copy.clone())));
        if size_needs_update {
            let name = name_of(rs);
            self.note(format!("scale {op} {name} {old_scale}→{new_scale}"));
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled {op} replica set {name} from {old_scale} to {new_scale}"),
            );
        }
        (size_needs_update, rs_copy)
    }

    /// `scale`: after the user changed `replicas` (or while paused). One active ReplicaSet
    /// takes it all; a saturated new one means old ones go to 0; otherwise the difference is
    /// spread over the active ReplicaSets in proportion to their size.
    pub fn scale(&mut self, new_rs: Option<&ReplicaSet>, old_rss: &[ReplicaSet]) {
        let old_refs: Vec<&ReplicaSet> = old_rss.iter().collect();
        let replicas = deployment_replicas(&self.d);
        if let Some(rs) = find_active_or_latest(new_rs, &old_refs) {
            if rs_replicas(rs) != replicas {
                let rs = rs.clone();
                self.scale_replica_set_and_record_event(&rs, replicas);
            }
            return;
        }
        if is_saturated(&self.d, new_rs) {
            for old in filter_active_replica_sets(&old_refs) {
                let old = old.clone();
                self.scale_replica_set_and_record_event(&old, 0);
            }
            return;
        }
        if !is_rolling_update(&self.d) {
            return;
        }
        let mut all: Vec<ReplicaSet> = filter_active_replica_sets(&old_refs)
            .into_iter()
            .chain(new_rs.filter(|r| rs_replicas(r) > 0))
            .cloned()
            .collect();
        let all_replicas: i32 = all.iter().map(rs_replicas).sum();
        let allowed = if replicas > 0 {
            replicas + max_surge(&self.d)
        } else {
            0
        };
        let to_add = allowed - all_replicas;
        let op = match to_add {
            n if n > 0 => {
                all.sort_by(by_size_newer);
                "up"
            }
            n if n < 0 => {
                all.sort_by(by_size_older);
                "down"
            }
            _ => "",
        };
        self.note(format!(
            "proportional scaling: {all_replicas} → {allowed} ({to_add:+})"
        ));
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
        for rs in &all {
            if to_add != 0 {
                let proportion = get_proportion(rs, &self.d, to_add, added);
                sizes.push(rs_replicas(rs) + proportion);
                added += proportion;
            } else {
                sizes.push(rs_replicas(rs));
            }
        }
        for (i, rs) in all.iter().enumerate() {
            let mut size = sizes[i];
            if i == 0 && to_add != 0 {
                // Leftovers (rounding) go to the largest ReplicaSet.
                size = (size + to_add - added).max(0);
            }
            self.scale_replica_set(rs, size, op);
        }
    }

    /// `cleanupDeployment`: delete the oldest old ReplicaSets beyond `revisionHistoryLimit`
    /// — only those scaled to 0, with no pods, whose status is current and not already being
    /// deleted.
    pub fn cleanup_deployment(&mut self, old_rss: &[ReplicaSet]) {
        let Some(limit) = revision_history_limit(&self.d) else {
            return;
        };
        let mut cleanable: Vec<&ReplicaSet> = old_rss
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let diff = cleanable.len() as i64 - i64::from(limit);
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| by_revision(a, b));
        for rs in cleanable.into_iter().take(diff as usize) {
            let (status_replicas, _, _) = rs_status_counts(rs);
            let observed = rs
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if status_replicas != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            self.note(format!(
                "delete old replica set {} (revisionHistoryLimit {limit})",
                name_of(rs)
            ));
            self.actions.push(Action::Delete {
                target: ObjectRef::from_object(rs),
                propagation: None,
            });
        }
    }

    /// `syncDeploymentStatus`: write the calculated status if it differs.
    pub fn sync_deployment_status(&mut self, rss: &ReplicaSets) {
        let new_status = calculate_status(&rss.all(), rss.new.as_ref(), &self.d, self.now);
        if self.d.status.as_ref() == Some(&new_status) {
            return;
        }
        self.d.status = Some(new_status);
        self.update_status();
    }

    /// `sync`: the path for paused Deployments and scaling events — scale, clean up (only
    /// when paused), and sync the status; never creates a ReplicaSet.
    pub fn sync(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        let rss = self.get_all_replica_sets_and_sync_revision(rs_list, false)?;
        self.scale(rss.new.as_ref(), &rss.old);
        let paused = self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused && super::rollback::get_rollback_to(&self.d).is_none() {
            self.cleanup_deployment(&rss.old);
        }
        self.sync_deployment_status(&rss);
        Ok(())
    }

    /// `syncStatusOnly`: a Deployment being deleted only gets its status refreshed.
    pub fn sync_status_only(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        let rss = self.get_all_replica_sets_and_sync_revision(rs_list, false)?;
        self.sync_deployment_status(&rss);
        Ok(())
    }

    /// `checkPausedConditions`: Progressing becomes `Unknown/DeploymentPaused` on pause and
    /// `Unknown/DeploymentResumed` on resume, so time spent paused never counts against the
    /// progress deadline. A timed-out condition is left alone.
    pub fn check_paused_conditions(&mut self) {
        if progress_deadline_seconds(&self.d).is_none() {
            return;
        }
        let cond = get_deployment_condition(self.d.status.as_ref(), DEPLOYMENT_PROGRESSING);
        let reason = cond.and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(TIMED_OUT_REASON) {
            return;
        }
        let paused_cond_exists = reason.as_deref() == Some(PAUSED_DEPLOY_REASON);
        let paused = self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let (reason, message) = match (paused, paused_cond_exists) {
            (true, false) => (PAUSED_DEPLOY_REASON, "Deployment is paused"),
            (false, true) => (RESUMED_DEPLOY_REASON, "Deployment is resumed"),
            _ => return,
        };
        self.note(message.to_lowercase());
        self.set_progressing("Unknown", reason, message);
        self.update_status();
    }

    /// `isScalingEvent`: some active ReplicaSet was last sized for another `replicas` (its
    /// `desired-replicas` annotation differs).
    pub fn is_scaling_event(&mut self, rs_list: &[ReplicaSet]) -> Result<bool> {
        // Go calls getAllReplicaSetsAndSyncRevision here too (its writes are idempotent); the
        // pure version only needs the split, so no actions are recorded twice.
        let replicas = deployment_replicas(&self.d);
        Ok(rs_list
            .iter()
            .filter(|rs| rs_replicas(rs) > 0)
            .filter_map(get_desired_replicas_annotation)
            .any(|desired| desired != replicas))
    }
}

/// `calculateStatus`: the Deployment's status from its ReplicaSets' (observedGeneration,
/// replica counts, the `Available` condition; other conditions are carried over).
pub fn calculate_status(
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    d: &Deployment,
    now: Timestamp,
) -> DeploymentStatus {
    let available = get_available_replica_count_for_replica_sets(all);
    let total = get_replica_count_for_replica_sets(all);
    let current = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(get_actual_replica_count_for_replica_sets(all)),
        updated_replicas: Some(new_rs.map_or(0, |rs| rs_status_counts(rs).0)),
        ready_replicas: Some(get_ready_replica_count_for_replica_sets(all)),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: current.collision_count,
        conditions: current.conditions.clone(),
        terminating_replicas: current.terminating_replicas,
    };
    let condition = if available >= deployment_replicas(d) - max_unavailable(d) {
        new_deployment_condition(
            DEPLOYMENT_AVAILABLE,
            "True",
            MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    } else {
        new_deployment_condition(
            DEPLOYMENT_AVAILABLE,
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    };
    set_deployment_condition(&mut status, condition);
    status
}

/// The shell's reaction to `AlreadyExists` on [`Action::CreateReplicaSet`] (the rest of
/// `getNewReplicaSet`): if `existing` is ours with the same template the cache was just
/// behind — requeue; otherwise it is a hash collision — bump `status.collisionCount` so the
/// next sync computes another name.
pub fn on_replica_set_already_exists(d: &Deployment, existing: &ReplicaSet) -> Vec<Action> {
    let ours = get_controller_of(&existing.metadata).is_some_and(|r| r.uid == uid(&d.metadata));
    if ours && equal_ignore_hash(&deployment_template(d), &rs_template(existing)) {
        return vec![Action::RequeueAfter(std::time::Duration::ZERO)];
    }
    let mut d = d.clone();
    let status = d.status.get_or_insert_with(Default::default);
    status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
    vec![Action::UpdateDeploymentStatus(Box::new(d))]
}

/// The shell's reaction to any other error creating the new ReplicaSet: Progressing
/// `False/ReplicaSetCreateError` (when a deadline is set) and a Warning event.
pub fn on_replica_set_create_error(
    d: &Deployment,
    rs_name: &str,
    error: &str,
    now: Timestamp,
) -> Vec<Action> {
    let msg = format!("Failed to create new replica set {rs_name:?}: {error}");
    let mut actions = Vec::new();
    let mut d = d.clone();
    if progress_deadline_seconds(&d).is_some() {
        let condition = new_deployment_condition(
            DEPLOYMENT_PROGRESSING,
            "False",
            FAILED_RS_CREATE_REASON,
            msg.clone(),
            now,
        );
        set_deployment_condition(d.status.get_or_insert_with(Default::default), condition);
        actions.push(Action::UpdateDeploymentStatus(Box::new(d.clone())));
    }
    actions.push(event(
        ObjectRef::from_object(&d),
        EventType::Warning,
        FAILED_RS_CREATE_REASON,
        msg,
    ));
    actions
}

/// The name of a ReplicaSet, or `""`.
pub fn name_of(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap_or_default()
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
