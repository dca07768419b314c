//! The Recreate strategy: all old pods go before any new pod starts.
//!
//! Mirrors `pkg/controller/deployment/recreate.go` (`rolloutRecreate`,
//! `scaleDownOldReplicaSetsForRecreate`, `oldPodsRunning`,
//! `scaleUpNewReplicaSetForRecreate`).
//!
//! ```text
//!   old RSs → 0 ──▶ wait until no old pod is running (pods by RS) ──▶ create/scale new RS → replicas
//! ```

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::sync::DeploymentSyncer;
use super::util::*;
use crate::error::Result;
use crate::pod_readiness::pod_phase;

impl DeploymentSyncer<'_> {
    /// `rolloutRecreate`.
    pub fn rollout_recreate(&mut self, rs_list: &[ReplicaSet]) -> Result<()> {
        // Don't create the new RS yet: scaling up before the old pods are gone is what
        // Recreate promises not to do.
        let mut rss = self.get_all_replica_sets_and_sync_revision(rs_list, false)?;
        let active_old = rss.active_old();
        if self.scale_down_old_replica_sets_for_recreate(&active_old) {
            self.sync_rollout_status(&rss.all(), rss.new.as_ref());
            return Ok(());
        }
        if self.old_pods_running(rss.new.as_ref(), &rss.old) {
            self.note("waiting for old pods to terminate");
            self.sync_rollout_status(&rss.all(), rss.new.as_ref());
            return Ok(());
        }
        if rss.new.is_none() {
            rss = self.get_all_replica_sets_and_sync_revision(rs_list, true)?;
        }
        if let Some(new_rs) = rss.new.clone() {
            let replicas = deployment_replicas(&self.d);
            self.scale_replica_set_and_record_event(&new_rs, replicas);
        }
        let status = self.d.status.clone().unwrap_or_default();
        if super::conditions::deployment_complete(&self.d, &status) {
            self.cleanup_deployment(&rss.old);
        }
        self.sync_rollout_status(&rss.all(), rss.new.as_ref());
        Ok(())
    }

    /// `scaleDownOldReplicaSetsForRecreate`: every active old ReplicaSet to 0.
    pub fn scale_down_old_replica_sets_for_recreate(&mut self, old: &[ReplicaSet]) -> bool {
        let mut scaled = false;
        for rs in old {
            if rs_replicas(rs) == 0 {
                continue;
            }
            scaled |= self.scale_replica_set_and_record_event(rs, 0).0;
        }
        scaled
    }

    /// `oldPodsRunning`: an old ReplicaSet still reports pods, or a pod of one (by the
    /// pods-by-ReplicaSet map) is not yet `Succeeded`/`Failed`.
    pub fn old_pods_running(&self, new_rs: Option<&ReplicaSet>, old: &[ReplicaSet]) -> bool {
        let old_refs: Vec<&ReplicaSet> = old.iter().collect();
        if get_actual_replica_count_for_replica_sets(&old_refs) > 0 {
            return true;
        }
        let new_uid = new_rs.and_then(|rs| rs.metadata.uid.as_deref());
        self.pods_by_replica_set
            .iter()
            .filter(|(rs_uid, _)| Some(rs_uid.as_str()) != new_uid)
            .flat_map(|(_, pods)| pods)
            .any(|pod| !matches!(pod_phase(pod), "Failed" | "Succeeded"))
    }
}
