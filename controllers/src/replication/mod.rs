//! The ReplicationController controller ("replication manager"): the ReplicaSet controller
//! run on core/v1 ReplicationControllers.
//!
//! Mirrors `pkg/controller/replication/replication_controller.go` (`NewReplicationManager`:
//! the ReplicaSet base controller with the kind `v1/ReplicationController` and the queue
//! `replicationmanager`) and `conversion.go` (`convertRCtoRS`, `convertRStoRC` and the
//! status conversions). A ReplicationController's selector is a plain label map: it becomes
//! the `matchLabels` of the ReplicaSet view, so an empty map selects every pod, as
//! `labels.SelectorFromSet` does (validation never lets one through).
//!
//! ```text
//!   ReplicationController nginx {selector: {app: nginx}, replicas: 3}
//!     ─▶ ReplicaSet view nginx {selector: {matchLabels: {app: nginx}}} (same uid)
//!     ─▶ sync_replica_set ─▶ CreatePods (owner: v1 ReplicationController nginx)
//!                          ─▶ PUT replicationcontrollers/nginx/status
//! ```

use std::borrow::Cow;

use apimachinery::{ObjectRef, Selector};
use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::action::Action;
use crate::error::Result;
use crate::owner_ref::new_controller_ref;
use crate::replicaset::controller::ReplicaSetController;
use crate::replicaset::kind::ReplicaSetKind;

/// The replication manager: the ReplicaSet controller's shell over ReplicationControllers.
pub type ReplicationManager = ReplicaSetController<ReplicationController>;

/// `convertRCtoRS`: the ReplicaSet the decisions are taken on (same metadata and uid).
pub fn convert_rc_to_rs(rc: &ReplicationController) -> ReplicaSet {
    let spec = rc.spec.clone().unwrap_or_default();
    ReplicaSet {
        metadata: rc.metadata.clone(),
        spec: Some(ReplicaSetSpec {
            replicas: spec.replicas,
            min_ready_seconds: spec.min_ready_seconds,
            selector: LabelSelector {
                match_labels: spec.selector,
                match_expressions: None,
            },
            template: spec.template,
        }),
        status: rc.status.as_ref().map(|s| ReplicaSetStatus {
            replicas: s.replicas,
            fully_labeled_replicas: s.fully_labeled_replicas,
            ready_replicas: s.ready_replicas,
            available_replicas: s.available_replicas,
            observed_generation: s.observed_generation,
            terminating_replicas: None,
            conditions: s.conditions.as_ref().map(|cs| {
                cs.iter()
                    .map(|c| ReplicaSetCondition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        last_transition_time: c.last_transition_time.clone(),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                    })
                    .collect()
            }),
        }),
    }
}

/// `convertRStoRC`'s status half: the ReplicaSet view's status as a ReplicationController's.
pub fn convert_status(status: &ReplicaSetStatus) -> ReplicationControllerStatus {
    ReplicationControllerStatus {
        replicas: status.replicas,
        fully_labeled_replicas: status.fully_labeled_replicas,
        ready_replicas: status.ready_replicas,
        available_replicas: status.available_replicas,
        observed_generation: status.observed_generation,
        conditions: status.conditions.as_ref().map(|cs| {
            cs.iter()
                .map(|c| ReplicationControllerCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect()
        }),
    }
}

impl ReplicaSetKind for ReplicationController {
    const QUEUE: &'static str = "replicationmanager";

    fn to_replica_set(&self) -> Cow<'_, ReplicaSet> {
        Cow::Owned(convert_rc_to_rs(self))
    }

    fn selector(&self) -> Result<Selector> {
        let labels = self.spec.as_ref().and_then(|s| s.selector.clone());
        crate::selector::from_label_selector(Some(&LabelSelector {
            match_labels: labels,
            match_expressions: None,
        }))
    }

    fn adapt_actions(&self, actions: Vec<Action>) -> Vec<Action> {
        let me = ObjectRef::from_object(self);
        actions
            .into_iter()
            .map(|action| match action {
                Action::CreatePods {
                    controller: _,
                    mut pod,
                    batches,
                } => {
                    pod.metadata.owner_references = Some(vec![new_controller_ref(self)]);
                    Action::CreatePods {
                        controller: me.clone(),
                        pod,
                        batches,
                    }
                }
                Action::DeletePods {
                    controller: _,
                    pods,
                } => Action::DeletePods {
                    controller: me.clone(),
                    pods,
                },
                Action::UpdateReplicaSetStatus(rs) => {
                    let mut rc = self.clone();
                    rc.status = rs.status.as_ref().map(convert_status);
                    Action::UpdateReplicationControllerStatus(Box::new(rc))
                }
                other => other,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
