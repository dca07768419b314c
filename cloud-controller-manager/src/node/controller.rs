//! The cloud node controller's async shell: `CloudNodeController` in
//! `k8s.io/cloud-provider/controllers/node/node_controller.go` (`Run`, the Node handlers,
//! `syncNode`, `UpdateNodeStatus`, `reconcileNodeLabels`).
//!
//! ```text
//!   Node informer ─ add/update ─▶ queue "Nodes" ─▶ 1 worker
//!     sync(name): tainted uninitialized? ─▶ cloud InstanceMetadata ─▶ PUT Node (retry on
//!                 conflict with a fresh GET) ─▶ PATCH status.addresses ─▶ event Synced
//!                 else: beta labels brought in line with the stable ones
//!   every --node-status-update-frequency: each initialized Node's addresses from the cloud
//! ```

use std::sync::Arc;
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use client::{Lister, RateLimitingQueue, SharedInformerFactory};
use controllers::executor::Executor;
use controllers::manager::metrics::ControllerMetrics;
use controllers::worker::{SyncResult, Workers, object_context_of};
use controllers::{Error, Event};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{LABELS, addresses_to_update, cloud_taint, initialized, node_ref, summary};

/// How many times a PUT that met a conflict is retried with a fresh copy
/// (`UpdateNodeSpecBackoff`: 20 steps).
const UPDATE_RETRIES: usize = 20;

/// The cloud node controller (cheap to clone).
#[derive(Clone)]
pub struct CloudNodeController {
    nodes: Lister<Node>,
    queue: RateLimitingQueue<ObjectKey>,
    cloud: Arc<dyn cloud::Interface>,
    executor: Executor,
    status_update_frequency: Duration,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

/// The error of a cloud call, as the controller reports it.
pub(crate) fn cloud_error(what: &str, e: cloud::CloudError) -> Error {
    Error::Config(format!("{what}: {e}"))
}

/// A Node's reference for events (`involvedObject`).
pub(crate) fn node_object_ref(node: &Node) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Node".into(),
        namespace: None,
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
    }
}

impl CloudNodeController {
    /// Builds the controller on the factory's Node informer; `status_update_frequency` is
    /// `--node-status-update-frequency` (5 min).
    pub fn new(
        factory: &SharedInformerFactory,
        cloud: Arc<dyn cloud::Interface>,
        executor: Executor,
        status_update_frequency: Duration,
    ) -> Self {
        let informer = factory.informer::<Node>();
        let this = CloudNodeController {
            nodes: Lister::new(informer.indexer().clone()),
            queue: RateLimitingQueue::new("Nodes"),
            cloud,
            executor,
            status_update_frequency,
            metrics: Arc::new(ControllerMetrics::new("cloud-node")),
        };
        let (add, update) = (this.clone(), this.clone());
        informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |n: Arc<Node>, _| add.queue.add(ObjectKey::of(n.as_ref())))
                .on_update(move |_, n: Arc<Node>| update.queue.add(ObjectKey::of(n.as_ref()))),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers (`--concurrent-node-syncs`) and the periodic address update on
    /// `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.nodes)),
        }
        .spawn(tracker, shutdown.clone(), move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
        let this = self.clone();
        tracker.spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = this.executor.clock().sleep(this.status_update_frequency) => {}
                }
                this.update_node_status().await;
            }
        });
    }

    fn instances(&self) -> Result<&dyn cloud::InstancesV2, Error> {
        self.cloud
            .instances_v2()
            .ok_or_else(|| Error::Config("the cloud provider does not support InstancesV2".into()))
    }

    /// `syncNode`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(node) = self.nodes.get(None, &key.name) else {
            return Ok(None);
        };
        if cloud_taint(&node).is_none() {
            return self.reconcile_node_labels(&node).await;
        }
        tracing::info!(node = %key.name, "Initializing node with cloud provider");
        let metadata = self
            .instances()?
            .instance_metadata(&node_ref(&node))
            .await
            .map_err(|e| {
                cloud_error(
                    &format!("failed to get instance metadata for node {}", key.name),
                    e,
                )
            })?;
        let api: Api<Node> = Api::all(self.executor.client());
        let mut current = (*node).clone();
        let mut updated = None;
        for _ in 0..UPDATE_RETRIES {
            let new = initialized(&current, &metadata).map_err(|e| {
                Error::Config(format!(
                    "failed to get node modifiers from cloud provider: {e}"
                ))
            })?;
            match api.replace(&key.name, &PostParams::default(), &new).await {
                Ok(node) => {
                    updated = Some(node);
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    current = api
                        .get(&key.name)
                        .await
                        .map_err(|e| Error::from_kube("get", node_object_ref(&node), e))?;
                    if cloud_taint(&current).is_none() {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(Error::from_kube("update", node_object_ref(&node), e)),
            }
        }
        let Some(updated) = updated else {
            return Err(Error::Config(format!(
                "updating node {} kept conflicting",
                key.name
            )));
        };
        self.update_node_address(&updated, &metadata).await;
        let line = summary(&key.name, &metadata);
        tracing::info!("{line}");
        client::trace::set_summary(&line);
        self.executor.record(&Event {
            regarding: node_object_ref(&node),
            type_: EventType::Normal,
            reason: "Synced".into(),
            message: "Node synced successfully".into(),
        });
        Ok(None)
    }

    /// `updateNodeAddress`: PATCH `status.addresses` if the cloud's differ.
    async fn update_node_address(&self, node: &Node, metadata: &cloud::InstanceMetadata) {
        if cloud_taint(node).is_some() {
            return;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let addresses = match addresses_to_update(node, metadata) {
            Ok(Some(a)) => a,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "Failed to update node addresses");
                return;
            }
        };
        let patch = json!({ "status": { "addresses": addresses } });
        if let Err(e) = Api::<Node>::all(self.executor.client())
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(node = %name, error = %e, "Error patching node with cloud ip addresses");
        }
    }

    /// `UpdateNodeStatus`: the addresses of every initialized Node, from the cloud.
    pub async fn update_node_status(&self) {
        let Ok(instances) = self.instances() else {
            return;
        };
        for node in self.nodes.list(None, &apimachinery::Selector::everything()) {
            if cloud_taint(&node).is_some() {
                continue;
            }
            match instances.instance_metadata(&node_ref(&node)).await {
                Ok(metadata) => self.update_node_address(&node, &metadata).await,
                Err(e) => {
                    let name = node.metadata.name.as_deref().unwrap_or_default();
                    tracing::debug!(node = name, error = %e, "no instance metadata");
                }
            }
        }
    }

    /// `reconcileNodeLabels`: a beta label that differs from (or lacks) its stable twin is
    /// set to the stable value.
    async fn reconcile_node_labels(&self, node: &Node) -> SyncResult {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let update: serde_json::Map<String, serde_json::Value> = LABELS
            .iter()
            .filter_map(|(stable, beta)| {
                let value = labels.get(*stable)?;
                (labels.get(*beta) != Some(value)).then(|| ((*beta).to_owned(), json!(value)))
            })
            .collect();
        if update.is_empty() {
            return Ok(None);
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let patch = json!({ "metadata": { "labels": update } });
        Api::<Node>::all(self.executor.client())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::from_kube("patch", node_object_ref(node), e))?;
        client::trace::set_summary(format!("{name}: beta labels set from the stable ones"));
        Ok(None)
    }
}
