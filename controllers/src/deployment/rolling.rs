//! The RollingUpdate strategy: grow the new ReplicaSet within the surge, shrink the old ones
//! within the availability budget, one step per sync.
//!
//! Mirrors `pkg/controller/deployment/rolling.go` (`rolloutRolling`,
//! `reconcileNewReplicaSet`, `reconcileOldReplicaSets`, `cleanupUnhealthyReplicas`,
//! `scaleDownOldReplicaSetsForRollingUpdate`).
//!
//! Worked example — replicas 3, maxSurge 25% (→1), maxUnavailable 25% (→0), new image:
//!
//! ```text
//!   sync  old  new   why
//!    1     3    1    new may grow to replicas+surge-Σ = 4-3 = 1      (4 pods, 3 available)
//!    2     2    1    new pod available: Σ4 - min 3 - new unavailable 0 = 1 may go
//!    3     2    2    room for one more under the surge
//!    4     1    2    ...
//!    5     1    3
//!    6     0    3    done: never more than 4 pods, never fewer than 3 available
//! ```

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::sync::{DeploymentSyncer, name_of};
use super::util::*;
use crate::error::Result;

impl DeploymentSyncer<'_> {
    /// `rolloutRolling`: create/sync the new ReplicaSet, then scale up if possible, else
    /// scale down if possible, else (rollout complete) clean up history; always sync status.
    pub fn rollout_rolling(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        let rss = self.get_all_replica_sets_and_sync_revision(rs_list, true)?;
        let Some(new_rs) = rss.new.clone() else {
            return Ok(()); // unreachable: created when missing
        };
        let all = rss.all();
        if self.reconcile_new_replica_set(&all, &new_rs)? {
            self.sync_rollout_status(&all, Some(&new_rs));
            return Ok(());
        }
        let active_old = rss.active_old();
        if self.reconcile_old_replica_sets(&all, &active_old, &new_rs) {
            self.sync_rollout_status(&all, Some(&new_rs));
            return Ok(());
        }
        let status = self.d.status.clone().unwrap_or_default();
        if super::conditions::deployment_complete(&self.d, &status) {
            self.cleanup_deployment(&rss.old);
        }
        self.sync_rollout_status(&all, Some(&new_rs));
        Ok(())
    }

    /// `reconcileNewReplicaSet`: scale the new ReplicaSet toward `replicas` as far as
    /// `maxSurge` allows (or down, if it is above `replicas`). True if it scaled.
    pub fn reconcile_new_replica_set(
        &mut self,
        all: &[&ReplicaSet],
        new_rs: &ReplicaSet,
    ) -> Result<bool> {
        let replicas = deployment_replicas(&self.d);
        let current = rs_replicas(new_rs);
        if current == replicas {
            return Ok(false);
        }
        if current > replicas {
            return Ok(self.scale_replica_set_and_record_event(new_rs, replicas).0);
        }
        let new_replicas = new_rs_new_replicas(&self.d, all, new_rs)?;
        if new_replicas > current {
            let total = get_replica_count_for_replica_sets(all);
            let surge = max_surge(&self.d);
            self.note(format!(
                "surge room {} = replicas {replicas} + surge {surge} - {total} pods: new {} may grow",
                replicas + surge - total,
                name_of(new_rs),
            ));
        }
        if new_replicas == current {
            let total = get_replica_count_for_replica_sets(all);
            self.note(format!(
                "new {} stays at {current}: {total} pods already at replicas {replicas} + surge {}",
                name_of(new_rs),
                max_surge(&self.d)
            ));
        }
        Ok(self
            .scale_replica_set_and_record_event(new_rs, new_replicas)
            .0)
    }

    /// `reconcileOldReplicaSets`: scale old ReplicaSets down by at most
    /// `Σ replicas - minAvailable - newRS unavailable`, first their unhealthy pods, then
    /// healthy ones while more than `minAvailable` are available. True if anything scaled.
    pub fn reconcile_old_replica_sets(
        &mut self,
        all: &[&ReplicaSet],
        old: &[ReplicaSet],
        new_rs: &ReplicaSet,
    ) -> bool {
        let old_refs: Vec<&ReplicaSet> = old.iter().collect();
        if get_replica_count_for_replica_sets(&old_refs) == 0 {
            return false;
        }
        let all_pods = get_replica_count_for_replica_sets(all);
        let min_available = deployment_replicas(&self.d) - max_unavailable(&self.d);
        let new_rs_unavailable = rs_replicas(new_rs) - rs_available(new_rs);
        let max_scaled_down = all_pods - min_available - new_rs_unavailable;
        if max_scaled_down <= 0 {
            self.note(format!(
                "old stay: {all_pods} pods - min available {min_available} - {new_rs_unavailable} new unavailable leaves nothing to scale down"
            ));
            return false;
        }
        self.note(format!(
            "unavailable budget {max_scaled_down} = {all_pods} pods - min available {min_available} - {new_rs_unavailable} new unavailable: old may shrink"
        ));
        // Kubernetes returns `false, nil` when the cleanup fails: nothing more this sync.
        let (old_after_cleanup, cleanup_count) =
            match self.cleanup_unhealthy_replicas(old, max_scaled_down) {
                Ok(cleaned) => cleaned,
                Err(refused) => {
                    self.note(refused);
                    return false;
                }
            };
        let mut all_after: Vec<&ReplicaSet> = old_after_cleanup.iter().collect();
        all_after.push(new_rs);
        let scaled_down =
            self.scale_down_old_replica_sets_for_rolling_update(&all_after, &old_after_cleanup);
        cleanup_count + scaled_down > 0
    }

    /// `cleanupUnhealthyReplicas`: oldest first, remove old pods that are not available
    /// (they add nothing to availability), at most `max_cleanup_count` in total. Returns the
    /// old ReplicaSets as they will be and how many pods were removed.
    ///
    /// A ReplicaSet whose status reports more available pods than its `spec.replicas` (just
    /// scaled down, its status not yet caught up: common right after a controller-manager
    /// restart) would be "cleaned up" to a larger size, so, as in Kubernetes, the cleanup is
    /// refused with its error (Kubernetes' message) instead of scaling an old ReplicaSet up
    /// past `maxSurge`.
    pub fn cleanup_unhealthy_replicas(
        &mut self,
        old: &[ReplicaSet],
        max_cleanup_count: i32,
    ) -> Result<(Vec<ReplicaSet>, i32), String> {
        let mut old = old.to_vec();
        old.sort_by(by_creation_timestamp);
        let mut total = 0;
        for rs in old.iter_mut() {
            if total >= max_cleanup_count {
                break;
            }
            let replicas = rs_replicas(rs);
            let available = rs_available(rs);
            if replicas == 0 || replicas == available {
                continue;
            }
            let scaled_down = (max_cleanup_count - total).min(replicas - available);
            let new_replicas = replicas - scaled_down;
            if new_replicas > replicas {
                let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
                return Err(format!(
                    "when cleaning up unhealthy replicas, got invalid request to scale down {namespace}/{} {replicas} -> {new_replicas}",
                    name_of(rs)
                ));
            }
            let (_, updated) = self.scale_replica_set_and_record_event(rs, new_replicas);
            total += scaled_down;
            *rs = updated;
        }
        Ok((old, total))
    }

    /// `scaleDownOldReplicaSetsForRollingUpdate`: oldest first, remove old pods while more
    /// than `minAvailable` pods are available. Returns how many.
    pub fn scale_down_old_replica_sets_for_rolling_update(
        &mut self,
        all: &[&ReplicaSet],
        old: &[ReplicaSet],
    ) -> i32 {
        let min_available = deployment_replicas(&self.d) - max_unavailable(&self.d);
        let available = get_available_replica_count_for_replica_sets(all);
        if available <= min_available {
            self.note(format!(
                "old stay: {available} available ≤ min available {min_available}"
            ));
            return 0;
        }
        let mut old: Vec<&ReplicaSet> = old.iter().collect();
        old.sort_by(|a, b| by_creation_timestamp(a, b));
        let budget = available - min_available;
        let mut total = 0;
        for rs in old {
            if total >= budget {
                break;
            }
            let replicas = rs_replicas(rs);
            if replicas == 0 {
                continue;
            }
            let scale_down = replicas.min(budget - total);
            self.scale_replica_set_and_record_event(rs, replicas - scale_down);
            total += scale_down;
        }
        total
    }
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
pub(crate) mod tests;
