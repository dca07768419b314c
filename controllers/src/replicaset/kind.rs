//! The kinds the ReplicaSet controller runs: apps/v1 ReplicaSet itself and, through a
//! conversion, core/v1 ReplicationController.
//!
//! Kubernetes builds its replication manager from the same base controller
//! (`pkg/controller/replication/replication_controller.go` calls
//! `replicaset.NewBaseController` with informer and client adapters from `conversion.go`):
//! the ReplicaSet logic decides on a ReplicaSet converted from the ReplicationController, and
//! its writes are converted back. [`ReplicaSetKind`] is that adapter.
//!
//! ```text
//!   ReplicationController ──to_replica_set──▶ ReplicaSet view ──sync_replica_set──▶ actions
//!                          ◀──adapt_actions── (owner refs, events and the status write
//!                                              name the ReplicationController)
//! ```

use std::borrow::Cow;
use std::fmt::Debug;

use apimachinery::Selector;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, NamespaceResourceScope};
use kube::Resource;
use serde::de::DeserializeOwned;

use crate::action::Action;
use crate::error::Result;

/// A kind whose objects the ReplicaSet controller keeps at `spec.replicas` pods.
pub trait ReplicaSetKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + k8s_openapi::Resource
    + Metadata<Ty = ObjectMeta>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    /// The work queue's name (Kubernetes': `replicaset`, `replicationmanager`).
    const QUEUE: &'static str;

    /// The ReplicaSet the decisions are taken on.
    fn to_replica_set(&self) -> Cow<'_, ReplicaSet>;

    /// The pods this object selects (an invalid or empty selector selects nothing).
    fn selector(&self) -> Result<Selector>;

    /// The sync's actions, rewritten to name this object instead of its ReplicaSet view.
    fn adapt_actions(&self, actions: Vec<Action>) -> Vec<Action>;
}

impl ReplicaSetKind for ReplicaSet {
    const QUEUE: &'static str = "replicaset";

    fn to_replica_set(&self) -> Cow<'_, ReplicaSet> {
        Cow::Borrowed(self)
    }

    fn selector(&self) -> Result<Selector> {
        crate::selector::from_label_selector(self.spec.as_ref().map(|s| &s.selector))
    }

    fn adapt_actions(&self, actions: Vec<Action>) -> Vec<Action> {
        actions
    }
}
