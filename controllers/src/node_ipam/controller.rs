//! The node IPAM controller's async shell: `pkg/controller/nodeipam/node_ipam_controller.go`
//! and the I/O half of `ipam/range_allocator.go` (`NewCIDRRangeAllocator`'s handlers,
//! `syncNode`, `updateCIDRsAllocation`).
//!
//! ```text
//!   Node informer ─ add/update ─▶ queue "cidrallocator_node" ─▶ workers
//!                 ─ delete ─────▶ release its blocks
//!   caches synced: every cached Node's podCIDRs occupied, then the workers start
//!     sync(name): sync_node (sans-IO) ─▶ PATCH spec.podCIDR(s) (strategic merge)
//!                 PATCH failed ─▶ block released, event CIDRAssignmentFailed, retry
//! ```
//!
//! A block written to a Node is remembered until the cache shows it (keyed by the Node's UID):
//! an update of the Node that arrives before the cache has the new `podCIDRs` does not take a
//! second block.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use apimachinery::{Ipv4Cidr, ObjectKey};
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::Node;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{CidrSet, Config, NodeIpamDecision, new_cidr_set, node_status_event, sync_node};
use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers, object_context_of};

/// `cidrUpdateWorkers`: Kubernetes runs 30 workers.
pub const WORKERS: usize = 30;

/// The node IPAM controller (cheap to clone).
#[derive(Clone)]
pub struct NodeIpamController {
    nodes: Lister<Node>,
    queue: RateLimitingQueue<ObjectKey>,
    set: Arc<Mutex<CidrSet>>,
    /// Blocks written to Nodes (by UID) that the cache does not show yet.
    pending: Arc<Mutex<HashMap<String, Ipv4Cidr>>>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl NodeIpamController {
    /// Builds the controller on the factory's Node informer (events go through `executor`'s
    /// recorder: component `cidrAllocator` in Kubernetes). `config` must be valid
    /// ([`Config::validate`]).
    pub fn new(factory: &SharedInformerFactory, executor: Executor, config: &Config) -> Self {
        let informer = factory.informer::<Node>();
        let this = NodeIpamController {
            nodes: Lister::new(informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("cidrallocator_node", executor.clock().clone()),
            set: Arc::new(Mutex::new(new_cidr_set(config))),
            pending: Arc::default(),
            executor,
            metrics: Arc::new(ControllerMetrics::new("nodeipam")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |n: Arc<Node>, _| add.queue.add(ObjectKey::of(n.as_ref())))
                .on_update(move |_, n: Arc<Node>| update.queue.add(ObjectKey::of(n.as_ref())))
                .on_delete(move |n: DeltaObject<Node>| delete.on_delete(n.object())),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn on_delete(&self, node: &Node) {
        if let Some(uid) = &node.metadata.uid {
            lock(&self.pending).remove(uid);
        }
        if let Err(e) = super::release_node(&mut lock(&self.set), node) {
            tracing::warn!(error = %e, "error while processing CIDR Release");
        }
    }

    /// Occupies the blocks of every cached Node (`NewCIDRRangeAllocator`'s node list), so
    /// a restarted controller never hands out a block that is in use.
    pub fn occupy_existing(&self) {
        let mut set = lock(&self.set);
        for node in self.nodes.list(None, &apimachinery::Selector::everything()) {
            if let Err(e) = super::occupy_node(&mut set, &node) {
                tracing::warn!(error = %e, "could not occupy a node's CIDR");
            }
        }
    }

    /// Occupies the cached Nodes' blocks, then starts `workers` workers on `tracker` (call
    /// after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        self.occupy_existing();
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.nodes)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncNode`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(node) = self.nodes.get(None, &key.name) else {
            return Ok(None);
        };
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let has_cidr = node
            .spec
            .as_ref()
            .is_some_and(|s| s.pod_cidrs.as_ref().is_some_and(|c| !c.is_empty()));
        if has_cidr {
            lock(&self.pending).remove(&uid);
        } else if let Some(cidr) = lock(&self.pending).get(&uid) {
            let summary = format!("{}: {cidr} written, not in the cache yet", key.name);
            client::trace::set_summary(&summary);
            return Ok(None);
        }
        let decision = sync_node(&mut lock(&self.set), &node);
        match decision {
            NodeIpamDecision::Nothing(summary) => {
                client::trace::set_summary(&summary);
                Ok(None)
            }
            NodeIpamDecision::Failed { actions, error } => {
                client::trace::set_summary(format!("{}: {error}", key.name));
                let _ = self.executor.execute(actions, None).await;
                Err(Error::Config(error))
            }
            NodeIpamDecision::Assign {
                cidr,
                actions,
                summary,
            } => {
                client::trace::set_summary(&summary);
                match self.executor.execute(actions, None).await {
                    Ok(_) => {
                        tracing::info!(node = %key.name, pod_cidr = %cidr, "Set node PodCIDR");
                        lock(&self.pending).insert(uid, cidr);
                        Ok(None)
                    }
                    Err(failure) => {
                        tracing::warn!(node = %key.name, error = %failure.error,
                            "Failed to update node PodCIDR: releasing the allocated CIDR");
                        if let Err(e) = lock(&self.set).release(&cidr) {
                            tracing::warn!(error = %e, "Error when releasing CIDR");
                        }
                        let event = node_status_event(&node, "CIDRAssignmentFailed");
                        let _ = self.executor.execute(vec![event], None).await;
                        Err(failure.error)
                    }
                }
            }
        }
    }
}
