//! The service controller's async shell: `Controller` in
//! `k8s.io/cloud-provider/controllers/service/controller.go` (`Run`, the Service and Node
//! handlers, `syncService`, `processServiceCreateOrUpdate`, `processServiceDeletion`,
//! `nodeSyncLoop` / `updateLoadBalancerHosts`).
//!
//! ```text
//!   Service informer ─ add / relevant update / delete ─▶ queue "service" ─▶ 1 worker
//!        (failures retried after 5 s doubling to 300 s)
//!     sync(ns/name) ─▶ the cloud calls and writes of [`super`], events on the Service
//!   Node informer ─ the stable node set changed ─▶ node sync (also every 100 s):
//!        every LB Service whose backends differ ─▶ cloud UpdateLoadBalancer
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef};
use client::workqueue::queue::Queue;
use client::workqueue::rate_limiting::ItemExponentialFailureRateLimiter;
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use cloud::{NodeRef, ServiceRef};
use controllers::executor::Executor;
use controllers::manager::metrics::ControllerMetrics;
use controllers::worker::{SyncResult, Workers, object_context_of};
use controllers::{Error, Event};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{
    finalizer_patch, ingress, lb_ports, needs_cleanup, needs_sync, service_ref, stable_node,
    stable_nodes, status_patch, wants_load_balancer,
};

/// `nodeSyncPeriod`: the node sync also runs this often without a change.
pub const NODE_SYNC_PERIOD: Duration = Duration::from_secs(100);

/// `minRetryDelay` and `maxRetryDelay` of the service queue.
pub const RETRY_DELAYS: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(300));

/// Each LB Service's cloud name and the backends last sent to the cloud, by Service key.
type SyncedBackends = HashMap<ObjectKey, (ServiceRef, Vec<String>)>;

/// The service controller (cheap to clone).
#[derive(Clone)]
pub struct ServiceController {
    services: Lister<Service>,
    nodes: Lister<Node>,
    queue: RateLimitingQueue<ObjectKey>,
    cloud: Arc<dyn cloud::Interface>,
    executor: Executor,
    cluster_name: String,
    /// Each LB Service's backends as last sent to the cloud (`lastSyncedNodes`), and what
    /// the cloud knows it by (for a Service deleted without its finalizer).
    synced: Arc<Mutex<SyncedBackends>>,
    /// Wakes the node sync; notifications before it runs count once (`nodeQueue`'s one key).
    nodes_changed: Arc<Notify>,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn names(nodes: &[NodeRef]) -> Vec<String> {
    nodes.iter().map(|n| n.name.clone()).collect()
}

impl ServiceController {
    /// Builds the controller on the factory's Service and Node informers.
    pub fn new(
        factory: &SharedInformerFactory,
        cloud: Arc<dyn cloud::Interface>,
        executor: Executor,
        cluster_name: String,
    ) -> Self {
        let clock = executor.clock().clone();
        let limiter = Arc::new(ItemExponentialFailureRateLimiter::new(
            RETRY_DELAYS.0,
            RETRY_DELAYS.1,
        ));
        let svc_informer = factory.informer::<Service>();
        let node_informer = factory.informer::<Node>();
        let this = ServiceController {
            services: Lister::new(svc_informer.indexer().clone()),
            nodes: Lister::new(node_informer.indexer().clone()),
            queue: RateLimitingQueue::with_limiter(Queue::with_clock("service", clock), limiter),
            cloud,
            executor,
            cluster_name,
            synced: Arc::default(),
            nodes_changed: Arc::new(Notify::new()),
            metrics: Arc::new(ControllerMetrics::new("service")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        svc_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |s: Arc<Service>, _| {
                    if wants_load_balancer(&s) || super::has_finalizer(&s) {
                        add.queue.add(ObjectKey::of(s.as_ref()));
                    }
                })
                .on_update(move |old: Arc<Service>, new: Arc<Service>| {
                    if needs_sync(&old, &new) {
                        update.queue.add(ObjectKey::of(new.as_ref()));
                    }
                })
                .on_delete(move |s: DeltaObject<Service>| delete.queue.add(s.key())),
        );
        let (n1, n2, n3) = (this.clone(), this.clone(), this.clone());
        node_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |_, _| n1.nodes_changed.notify_one())
                .on_update(move |old: Arc<Node>, new: Arc<Node>| {
                    // Most updates are status heartbeats: only one that adds, removes or
                    // changes the node's entry in the stable set can change the set
                    // (`shouldSyncUpdatedNode`), and only then does the node sync run.
                    if stable_node(&old) != stable_node(&new) {
                        n2.nodes_changed.notify_one();
                    }
                })
                .on_delete(move |_| n3.nodes_changed.notify_one()),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn current_nodes(&self) -> Vec<NodeRef> {
        stable_nodes(&self.nodes.list(None, &apimachinery::Selector::everything()))
    }

    /// Starts `workers` workers and the node sync on `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.services)),
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
                    () = this.nodes_changed.notified() => {}
                    () = this.executor.clock().sleep(NODE_SYNC_PERIOD) => {}
                }
                this.node_sync().await;
            }
        });
    }

    fn event(&self, svc: &Service, type_: EventType, reason: &str, message: String) {
        self.executor.record(&Event {
            regarding: ObjectRef::from_object(svc),
            type_,
            reason: reason.into(),
            message,
        });
    }

    fn balancer(&self) -> Result<&dyn cloud::LoadBalancer, Error> {
        self.cloud.load_balancer().ok_or_else(|| {
            Error::Config("the cloud provider does not support load balancers".into())
        })
    }

    /// `syncService`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(svc) = self.services.get(key.namespace.as_deref(), &key.name) else {
            return self.process_deletion(key).await;
        };
        match self.sync_load_balancer_if_needed(key, &svc).await {
            Ok(summary) => {
                client::trace::set_summary(format!("{key}: {summary}"));
                Ok(None)
            }
            Err(e) => {
                self.event(
                    &svc,
                    EventType::Warning,
                    "SyncLoadBalancerFailed",
                    format!("Error syncing load balancer: {e}"),
                );
                client::trace::set_summary(format!("{key}: {e}"));
                Err(Error::Config(e))
            }
        }
    }

    /// `processServiceDeletion`: a Service gone without its finalizer (it was never
    /// ensured, or someone removed the finalizer): delete what the cloud still has.
    async fn process_deletion(&self, key: &ObjectKey) -> SyncResult {
        let Some((reference, _)) = lock(&self.synced).remove(key) else {
            return Ok(None);
        };
        self.balancer()?
            .ensure_load_balancer_deleted(&self.cluster_name, &reference)
            .await
            .map_err(|e| Error::Config(format!("failed to delete load balancer: {e}")))?;
        client::trace::set_summary(format!("{key}: gone; its load balancer deleted"));
        Ok(None)
    }

    async fn patch_service(
        &self,
        svc: &Service,
        body: serde_json::Value,
        status: bool,
    ) -> Result<(), String> {
        let api: Api<Service> = Api::namespaced(
            self.executor.client(),
            svc.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = svc.metadata.name.clone().unwrap_or_default();
        let result = if status {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
        } else {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
        };
        match result {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 && status => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `syncLoadBalancerIfNeeded`: returns the summary of what was done, or the error for
    /// the `SyncLoadBalancerFailed` event.
    async fn sync_load_balancer_if_needed(
        &self,
        key: &ObjectKey,
        svc: &Service,
    ) -> Result<String, String> {
        let balancer = self.balancer().map_err(|e| e.to_string())?;
        let reference = service_ref(svc);
        if !wants_load_balancer(svc) || needs_cleanup(svc) {
            let exists = balancer
                .get_load_balancer(&self.cluster_name, &reference)
                .await
                .map_err(|e| {
                    format!("failed to check if load balancer exists before cleanup: {e}")
                })?
                .is_some();
            if exists {
                self.event(
                    svc,
                    EventType::Normal,
                    "DeletingLoadBalancer",
                    "Deleting load balancer".into(),
                );
                balancer
                    .ensure_load_balancer_deleted(&self.cluster_name, &reference)
                    .await
                    .map_err(|e| format!("failed to delete load balancer: {e}"))?;
            }
            lock(&self.synced).remove(key);
            if let Some(patch) = finalizer_patch(svc, false) {
                self.patch_service(svc, patch, false).await.map_err(|e| {
                    format!("failed to remove load balancer cleanup finalizer: {e}")
                })?;
            }
            if exists || super::has_finalizer(svc) {
                self.event(
                    svc,
                    EventType::Normal,
                    "DeletedLoadBalancer",
                    "Deleted load balancer".into(),
                );
            }
            if let Some(patch) = status_patch(svc, &[]) {
                self.patch_service(svc, patch, true)
                    .await
                    .map_err(|e| format!("failed to update load balancer status: {e}"))?;
            }
            return Ok(if exists {
                "load balancer deleted".into()
            } else {
                "no load balancer wanted".into()
            });
        }
        self.event(
            svc,
            EventType::Normal,
            "EnsuringLoadBalancer",
            "Ensuring load balancer".into(),
        );
        if let Some(patch) = finalizer_patch(svc, true) {
            self.patch_service(svc, patch, false)
                .await
                .map_err(|e| format!("failed to add load balancer cleanup finalizer: {e}"))?;
        }
        let nodes = self.current_nodes();
        if nodes.is_empty() {
            self.event(
                svc,
                EventType::Warning,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer".into(),
            );
        }
        let status = balancer
            .ensure_load_balancer(&self.cluster_name, &reference, &lb_ports(svc), &nodes)
            .await
            .map_err(|e| format!("failed to ensure load balancer: {e}"))?;
        lock(&self.synced).insert(key.clone(), (reference, names(&nodes)));
        self.event(
            svc,
            EventType::Normal,
            "EnsuredLoadBalancer",
            "Ensured load balancer".into(),
        );
        let ingress = ingress(&status);
        if let Some(patch) = status_patch(svc, &ingress) {
            self.patch_service(svc, patch, true)
                .await
                .map_err(|e| format!("failed to update load balancer status: {e}"))?;
        }
        let ips: Vec<String> = ingress.iter().filter_map(|i| i.ip.clone()).collect();
        Ok(format!(
            "load balancer ensured at {} with {} backend nodes",
            ips.join(","),
            nodes.len()
        ))
    }

    /// `nodeSyncLoop`: every LB Service whose backends are not the current stable node set
    /// gets `UpdateLoadBalancer` (a failure requeues the Service for a full sync).
    pub async fn node_sync(&self) {
        // No load balancer yet: no backends to bring up to date (and no set to list, which
        // with 10,000 nodes registering would be most of the controller's work).
        if lock(&self.synced).is_empty() {
            return;
        }
        let nodes = self.current_nodes();
        let now = names(&nodes);
        let Ok(balancer) = self.balancer() else {
            return;
        };
        let stale: Vec<ObjectKey> = lock(&self.synced)
            .iter()
            .filter(|(_, (_, hosts))| *hosts != now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            let Some(svc) = self.services.get(key.namespace.as_deref(), &key.name) else {
                continue;
            };
            if !wants_load_balancer(&svc) || svc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let reference = service_ref(&svc);
            match balancer
                .update_load_balancer(&self.cluster_name, &reference, &lb_ports(&svc), &nodes)
                .await
            {
                Ok(()) => {
                    lock(&self.synced).insert(key.clone(), (reference, now.clone()));
                    if nodes.is_empty() {
                        self.event(
                            &svc,
                            EventType::Warning,
                            "UnAvailableLoadBalancer",
                            "There are no available nodes for LoadBalancer".into(),
                        );
                    } else {
                        self.event(
                            &svc,
                            EventType::Normal,
                            "UpdatedLoadBalancer",
                            "Updated load balancer with new hosts".into(),
                        );
                    }
                    tracing::info!(service = %key, nodes = nodes.len(), "load balancer hosts updated");
                }
                Err(e) => {
                    let shown: Vec<&str> = now.iter().take(20).map(String::as_str).collect();
                    self.event(
                        &svc,
                        EventType::Warning,
                        "UpdateLoadBalancerFailed",
                        format!(
                            "Error updating load balancer with new hosts {shown:?} [node names limited, total number of nodes: {}], error: {e}",
                            now.len()
                        ),
                    );
                    self.queue.add_rate_limited(key);
                }
            }
        }
    }
}
