//! The Deployment controller: from a Deployment and its ReplicaSets to the next step of its
//! rollout.
//!
//! Mirrors `pkg/controller/deployment/deployment_controller.go` (`syncDeployment`) and the
//! files beside it: [`sync`] (`sync.go`), [`rolling`] (`rolling.go`), [`recreate`]
//! (`recreate.go`), [`rollback`] (`rollback.go`), [`progress`] (`progress.go`), and
//! [`util`] + [`conditions`] + [`hash`] (`util/deployment_util.go`, `ComputeHash`).
//!
//! A Deployment never touches pods. It owns ReplicaSets — one per pod template, named
//! `<deployment>-<pod-template-hash>` — and a rollout is nothing but changing their
//! `spec.replicas`, one small step per sync, while the ReplicaSet controller makes pods
//! follow.
//!
//! ```text
//!  sync_deployment(Deployment, its ReplicaSets, pods by RS, now)
//!    │
//!    ├─ selector {} ───────────────▶ Warning SelectingAll, bump observedGeneration, stop
//!    ├─ being deleted ─────────────▶ sync_status_only
//!    ├─ check_paused_conditions     (Progressing Unknown: DeploymentPaused / Resumed)
//!    ├─ spec.paused ───────────────▶ sync: scale(), cleanup_deployment(), status
//!    ├─ rollback annotation ───────▶ rollback: template := that revision's, clear annotation
//!    ├─ is_scaling_event ──────────▶ sync: proportional scale() of all active RSs
//!    └─ strategy
//!         ├─ Recreate ─▶ rollout_recreate: old → 0; wait for old pods; new → replicas
//!         └─ RollingUpdate ─▶ rollout_rolling:
//!              get_all_replica_sets_and_sync_revision (create new RS, revision max+1)
//!              reconcile_new_replica_set   scaled up?   ─▶ sync_rollout_status, stop
//!              reconcile_old_replica_sets  scaled down? ─▶ sync_rollout_status, stop
//!              complete? cleanup_deployment (revisionHistoryLimit)
//!              sync_rollout_status (Available, Progressing, deadline requeue)
//! ```
//!
//! The whole decision for one key is [`sync_deployment`]: it returns the [`Action`]s to
//! carry out and a one-line summary of what it decided and why.

pub mod conditions;
pub mod controller;
pub mod hash;
pub mod progress;
pub mod recent_writes;
pub mod recreate;
pub mod rollback;
pub mod rolling;
pub mod sync;
pub mod util;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod simulation_tests;

use std::collections::BTreeMap;

use apimachinery::{EventType, Selector};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;

pub use self::sync::{DeploymentSyncer, ReplicaSets};
use self::util::*;
use crate::action::Action;
use crate::error::{Error, Result};

/// Everything one Deployment sync reads: a snapshot of the informer caches.
#[derive(Debug, Clone, Copy)]
pub struct DeploymentSyncInput<'a> {
    /// The Deployment (from the Deployment lister).
    pub deployment: &'a Deployment,
    /// Its ReplicaSets, already claimed (see [`crate::controller_ref::claim_objects`]):
    /// those whose controller is this Deployment.
    pub replica_sets: &'a [ReplicaSet],
    /// Pods keyed by the UID of the ReplicaSet that controls them (Recreate waits for old
    /// pods to stop).
    pub pods_by_replica_set: &'a BTreeMap<String, Vec<Pod>>,
    /// The time of this sync.
    pub now: Timestamp,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentSync {
    /// What to do, in order (see [`crate::action`] for the contract).
    pub actions: Vec<Action>,
    /// What was decided and why, e.g.
    /// `desired 3 (surge 1, unavailable 0), have 3 in 1 RS → create new replica set web-5d4f8 with 1 (revision 2)`.
    pub summary: String,
    /// An error that stopped the sync part-way (the shell still runs `actions`, then
    /// requeues with backoff, as Kubernetes does when `syncDeployment` returns an error).
    pub error: Option<Error>,
}

/// `syncDeployment`: the whole decision for one Deployment key.
pub fn sync_deployment(input: DeploymentSyncInput<'_>) -> DeploymentSync {
    let d = input.deployment;
    let mut s = DeploymentSyncer::new(d, input.pods_by_replica_set, input.now);
    let header = summary_header(d, input.replica_sets);
    let selects_all = d.spec.as_ref().is_some_and(|spec| {
        Selector::from_label_selector(Some(&spec.selector)).is_ok_and(|sel| sel.is_everything())
    });
    let error = if selects_all {
        s.event(
            EventType::Warning,
            "SelectingAll",
            "This deployment is selecting all pods. A non-empty selector is required.",
        );
        let generation = d.metadata.generation.unwrap_or(0);
        let status = s.d.status.get_or_insert_with(Default::default);
        if status.observed_generation.unwrap_or(0) < generation {
            status.observed_generation = Some(generation);
            s.update_status();
        }
        s.note("selector selects everything: refusing to manage pods");
        None
    } else {
        dispatch(&mut s, input.replica_sets).err()
    };
    let notes = if s.notes.is_empty() {
        "nothing to do".to_string()
    } else {
        s.notes.join("; ")
    };
    let summary = match &error {
        Some(e) => format!("{header} → {notes}; error: {e}"),
        None => format!("{header} → {notes}"),
    };
    DeploymentSync {
        actions: s.actions,
        summary,
        error,
    }
}

fn dispatch(s: &mut DeploymentSyncer<'_>, rs_list: &[ReplicaSet]) -> Result<()> {
    if s.d.metadata.deletion_timestamp.is_some() {
        s.note("being deleted: status only");
        return s.sync_status_only(rs_list);
    }
    s.check_paused_conditions();
    if s.d
        .spec
        .as_ref()
        .and_then(|spec| spec.paused)
        .unwrap_or(false)
    {
        s.note("paused: scale only");
        return s.sync(rs_list);
    }
    if rollback::get_rollback_to(&s.d).is_some() {
        return s.rollback(rs_list);
    }
    if s.is_scaling_event(rs_list)? {
        s.note("scaling event");
        return s.sync(rs_list);
    }
    match strategy_type(&s.d) {
        "Recreate" => s.rollout_recreate(rs_list),
        "RollingUpdate" => s.rollout_rolling(rs_list),
        other => Err(Error::UnsupportedStrategy(other.to_string())),
    }
}

fn summary_header(d: &Deployment, rss: &[ReplicaSet]) -> String {
    let refs: Vec<&ReplicaSet> = rss.iter().collect();
    let have = get_actual_replica_count_for_replica_sets(&refs);
    let available = get_available_replica_count_for_replica_sets(&refs);
    let strategy = if is_rolling_update(d) {
        format!(
            " (surge {}, unavailable {})",
            max_surge(d),
            max_unavailable(d)
        )
    } else {
        format!(" ({})", strategy_type(d))
    };
    format!(
        "desired {}{strategy}, have {have} ({available} available) in {} RS",
        deployment_replicas(d),
        rss.len()
    )
}
