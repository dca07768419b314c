//! The Endpoints controller's async shell: `pkg/controller/endpoint/endpoints_controller.go`
//! (`NewEndpointController`, the Service, Pod and Endpoints handlers, `syncService`'s reads
//! and writes, `checkLeftoverEndpoints`).
//!
//! ```text
//!   Service informer ─ add/update/delete ──────────────▶ queue "endpoint" (ns/name)
//!   Pod informer ─ every Service selecting it ─────────▶   │
//!   Endpoints informer ─ delete ───────────────────────▶   │ 5 workers
//!   at start: every Endpoints (leftovers of deleted Services)  ▼
//!     sync(key): Service gone ─▶ DELETE its Endpoints
//!                else its pods, its Endpoints ─▶ sync_endpoints ─▶ POST / PUT
//!                (a write the cache has not caught up with is not judged from it: retry)
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef, Selector};
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{EndpointsSyncInput, sync_endpoints};
use crate::action::{self, Action};
use crate::endpointslice::controller::queue_services_on_changes;
use crate::endpointslice::trackers::TriggerTimeTracker;
use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The annotation of the Endpoints objects old leader election used as locks, left alone
/// (`resourcelock.LeaderElectionRecordAnnotationKey`).
const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// The Endpoints controller (cheap to clone).
#[derive(Clone)]
pub struct EndpointsController {
    services: Lister<Service>,
    pods: Lister<Pod>,
    endpoints: Lister<Endpoints>,
    queue: RateLimitingQueue<ObjectKey>,
    trigger_times: Arc<Mutex<TriggerTimeTracker>>,
    /// `staleEndpointsTracker`: the resourceVersion each Endpoints had before this
    /// controller's last write to it.
    stale: Arc<Mutex<HashMap<ObjectKey, String>>>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EndpointsController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(
        factory: &SharedInformerFactory,
        executor: Executor,
        batch_period: Duration,
    ) -> Self {
        let svc_informer = factory.informer::<Service>();
        let pod_informer = factory.informer::<Pod>();
        let ep_informer = factory.informer::<Endpoints>();
        let this = EndpointsController {
            services: Lister::new(svc_informer.indexer().clone()),
            pods: Lister::new(pod_informer.indexer().clone()),
            endpoints: Lister::new(ep_informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("endpoint", executor.clock().clone()),
            trigger_times: Arc::new(Mutex::new(TriggerTimeTracker::new())),
            stale: Arc::new(Mutex::new(HashMap::new())),
            executor,
            metrics: Arc::new(ControllerMetrics::new("endpoint")),
        };
        queue_services_on_changes(factory, &this.services, &this.queue, batch_period);
        let delete = this.clone();
        ep_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_delete(move |e: DeltaObject<Endpoints>| delete.queue.add(e.key())),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced), after queueing
    /// every Endpoints object (`checkLeftoverEndpoints`: those whose Service is gone are
    /// deleted).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        for ep in self.endpoints.list(None, &Selector::everything()) {
            let leader_lock = ep
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(LEADER_ANNOTATION));
            if !leader_lock {
                self.queue.add(ObjectKey::of(ep.as_ref()));
            }
        }
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.services)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncService` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let ns = key.namespace.as_deref();
        let Some(service) = self.services.get(ns, &key.name) else {
            lock(&self.trigger_times).delete_service(key);
            lock(&self.stale).remove(key);
            let summary = "service deleted → delete its Endpoints";
            client::trace::set_summary(summary);
            tracing::debug!(service = %key, "{summary}");
            let target = ObjectRef {
                api_version: "v1".into(),
                kind: "Endpoints".into(),
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                uid: String::new(),
            };
            let delete = Action::Delete {
                target,
                propagation: None,
            };
            return match self.executor.execute(vec![delete], None).await {
                Ok(_) => Ok(None),
                Err(failure) => Err(failure.error),
            };
        };
        let selector = service
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(Selector::from_set);
        let pods = match &selector {
            Some(selector) => self.pods.list(ns, selector),
            None => Vec::new(),
        };
        let pod_refs: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let current = self.endpoints.get(ns, &key.name);
        if let Some(current) = &current
            && lock(&self.stale).get(key) == current.metadata.resource_version.as_ref()
        {
            return Err(Error::StaleInformerCache(format!(
                "endpoints informer cache is out of date, resource version {} already processed for endpoints {key}",
                current
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default()
            )));
        }
        let trigger_time = if selector.is_some() {
            lock(&self.trigger_times).compute(&service, &pod_refs)
        } else {
            None
        };
        let out = sync_endpoints(EndpointsSyncInput {
            service: &service,
            pods: &pod_refs,
            current: current.as_deref(),
            trigger_time,
        });
        tracing::info!(service = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        let creating = out
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreateEndpoints(_)));
        match self.executor.execute(out.actions, None).await {
            Ok(outcome) => {
                if let (Some(current), Some(written)) = (&current, outcome.endpoints.first())
                    && written.metadata.resource_version != current.metadata.resource_version
                    && let Some(rv) = current.metadata.resource_version.clone()
                {
                    lock(&self.stale).insert(key.clone(), rv);
                }
                Ok(outcome.requeue_after)
            }
            // Creates keep failing in a namespace being deleted: drop the key.
            Err(failure) if creating && failure.error.is_namespace_terminating() => Ok(None),
            Err(failure) => {
                let namespace = key.namespace.as_deref().unwrap_or_default();
                let (reason, message) = if creating {
                    (
                        "FailedToCreateEndpoint",
                        format!(
                            "Failed to create endpoint for service {namespace}/{}: {}",
                            key.name, failure.error
                        ),
                    )
                } else {
                    (
                        "FailedToUpdateEndpoint",
                        format!(
                            "Failed to update endpoint {namespace}/{}: {}",
                            key.name, failure.error
                        ),
                    )
                };
                let regarding = ObjectRef {
                    api_version: "v1".into(),
                    kind: "Endpoints".into(),
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                    uid: current
                        .as_ref()
                        .and_then(|c| c.metadata.uid.clone())
                        .unwrap_or_default(),
                };
                self.executor.record_action(&action::event(
                    regarding,
                    EventType::Warning,
                    reason,
                    message,
                ));
                Err(failure.error)
            }
        }
    }
}
