//! The EndpointSlice controller's async shell: `pkg/controller/endpointslice/
//! endpointslice_controller.go` (`NewController`, the Service, Pod and EndpointSlice
//! handlers, `syncService`'s reads and writes).
//!
//! ```text
//!   Service informer ─ add/update/delete ───────────────────▶ queue "endpoint_slice" (ns/name)
//!   Pod informer ─ every Service of its namespace selecting   │
//!                  it (old or new labels) ───────────────────▶│
//!   EndpointSlice informer ─ a managed slice changed by       │
//!                  someone else (tracker: not our generation) ▶│ 5 workers
//!                                                             ▼
//!     sync(key): Service, its pods, its managed slices (not being deleted), their nodes
//!        stale cache (tracker)? ─▶ error, retry with back-off
//!        ─▶ sync_endpoint_slices ─▶ Executor (POST / PUT / DELETE slices)
//!        ─▶ tracker learns the generations written; failure: FailedToUpdateEndpointSlices
//! ```
//!
//! Nodes are read for the endpoints' `zone` and to skip pods whose node is gone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apimachinery::{EventType, ObjectKey, ObjectRef, Selector};
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::endpoints::{LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use super::trackers::{EndpointSliceTracker, TriggerTimeTracker};
use super::{CONTROLLER_NAME, EndpointSliceSyncInput, service_key_of, sync_endpoint_slices};
use crate::action::{self, Action};
use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The EndpointSlice controller (cheap to clone).
#[derive(Clone)]
pub struct EndpointSliceController {
    services: Lister<Service>,
    pods: Lister<Pod>,
    slices: Lister<EndpointSlice>,
    nodes: Lister<Node>,
    queue: RateLimitingQueue<ObjectKey>,
    tracker: Arc<Mutex<EndpointSliceTracker>>,
    trigger_times: Arc<Mutex<TriggerTimeTracker>>,
    max_endpoints_per_slice: usize,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

/// The pods a Service selects: its selector as a set (`AsSelectorPreValidated`).
fn service_selector(service: &Service) -> Option<Selector> {
    let selector = service.spec.as_ref()?.selector.as_ref()?;
    Some(Selector::from_set(selector))
}

/// Every Service of `namespace` whose selector matches `labels` (`getServicesForPod`).
pub fn services_selecting(
    services: &Lister<Service>,
    namespace: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> Vec<ObjectKey> {
    services
        .list(namespace, &Selector::everything())
        .into_iter()
        .filter(|s| service_selector(s).is_some_and(|sel| sel.matches(labels)))
        .map(|s| ObjectKey::of(s.as_ref()))
        .collect()
}

/// The Services to sync for a pod event (`GetPodUpdateProjectionKey` +
/// `GetServicesToUpdate`): those selecting the pod now, and with changed labels those that
/// selected it before.
pub fn services_for_pod_change(
    services: &Lister<Service>,
    old: Option<&Pod>,
    cur: &Pod,
) -> Vec<ObjectKey> {
    let empty = BTreeMap::new();
    fn labels<'a>(p: &'a Pod, empty: &'a BTreeMap<String, String>) -> &'a BTreeMap<String, String> {
        p.metadata.labels.as_ref().unwrap_or(empty)
    }
    let ns = cur.metadata.namespace.as_deref();
    let Some(old) = old else {
        return services_selecting(services, ns, labels(cur, &empty));
    };
    if old.metadata.resource_version == cur.metadata.resource_version {
        return Vec::new();
    }
    let (pod_changed, labels_changed) = pod_endpoints_changed(old, cur);
    if !pod_changed && !labels_changed {
        return Vec::new();
    }
    let now = services_selecting(services, ns, labels(cur, &empty));
    if !labels_changed {
        return now;
    }
    let before = services_selecting(services, ns, labels(old, &empty));
    let mut out: Vec<ObjectKey> = if pod_changed {
        now.iter().chain(before.iter()).cloned().collect()
    } else {
        // Only the labels changed: the Services gained or lost.
        now.iter()
            .filter(|k| !before.contains(k))
            .chain(before.iter().filter(|k| !now.contains(k)))
            .cloned()
            .collect()
    };
    out.sort();
    out.dedup();
    out
}

/// The Service and Pod handlers of both endpoint controllers (`NewController`'s): a Service
/// change queues it at once; a pod change queues the Services selecting the pod (before or
/// after it) after `batch_period` (`--endpoint(slice)-updates-batch-period`, `AddAfter` in
/// `addPod`/`updatePod`/`deletePod`), joining the changes of that period into one sync.
pub fn queue_services_on_changes(
    factory: &SharedInformerFactory,
    services: &Lister<Service>,
    queue: &RateLimitingQueue<ObjectKey>,
    batch_period: Duration,
) {
    let (add, update, delete) = (queue.clone(), queue.clone(), queue.clone());
    factory.informer::<Service>().add_event_handler(
        client::ResourceEventHandlerFuncs::new()
            .on_add(move |s: Arc<Service>, _| add.add(ObjectKey::of(s.as_ref())))
            .on_update(move |_, s: Arc<Service>| update.add(ObjectKey::of(s.as_ref())))
            .on_delete(move |s: DeltaObject<Service>| delete.add(s.key())),
    );
    let on_pod = move |queue: RateLimitingQueue<ObjectKey>, services: Lister<Service>| {
        move |old: Option<&Pod>, cur: &Pod| {
            for key in services_for_pod_change(&services, old, cur) {
                queue.add_after(key, batch_period);
            }
        }
    };
    let add = on_pod(queue.clone(), services.clone());
    let update = on_pod(queue.clone(), services.clone());
    let delete = on_pod(queue.clone(), services.clone());
    factory.informer::<Pod>().add_event_handler(
        client::ResourceEventHandlerFuncs::new()
            .on_add(move |p: Arc<Pod>, _| add(None, &p))
            .on_update(move |old: Arc<Pod>, cur: Arc<Pod>| update(Some(&old), &cur))
            .on_delete(move |p: DeltaObject<Pod>| delete(None, p.object())),
    );
}

/// `podEndpointsChanged`: (what endpoints show changed, the labels or hostname changed).
fn pod_endpoints_changed(old: &Pod, cur: &Pod) -> (bool, bool) {
    let host = |p: &Pod| {
        let s = p.spec.as_ref();
        (
            s.and_then(|s| s.hostname.clone()),
            s.and_then(|s| s.subdomain.clone()),
        )
    };
    let labels_changed = old.metadata.labels != cur.metadata.labels || host(old) != host(cur);
    let ips = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.pod_ips.clone())
            .unwrap_or_default()
    };
    let changed = old.metadata.deletion_timestamp != cur.metadata.deletion_timestamp
        || crate::pod_readiness::is_pod_ready(old) != crate::pod_readiness::is_pod_ready(cur)
        || ips(old) != ips(cur);
    (changed, labels_changed)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EndpointSliceController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(
        factory: &SharedInformerFactory,
        executor: Executor,
        max_endpoints_per_slice: usize,
        batch_period: Duration,
    ) -> Self {
        let svc_informer = factory.informer::<Service>();
        let pod_informer = factory.informer::<Pod>();
        let slice_informer = factory.informer::<EndpointSlice>();
        let node_informer = factory.informer::<Node>();
        let this = EndpointSliceController {
            services: Lister::new(svc_informer.indexer().clone()),
            pods: Lister::new(pod_informer.indexer().clone()),
            slices: Lister::new(slice_informer.indexer().clone()),
            nodes: Lister::new(node_informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("endpoint_slice", executor.clock().clone()),
            tracker: Arc::new(Mutex::new(EndpointSliceTracker::new())),
            trigger_times: Arc::new(Mutex::new(TriggerTimeTracker::new())),
            max_endpoints_per_slice,
            executor,
            metrics: Arc::new(ControllerMetrics::new("endpointslice")),
        };
        queue_services_on_changes(factory, &this.services, &this.queue, batch_period);
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        slice_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |s: Arc<EndpointSlice>, _| add.on_slice_change(&s))
                .on_update(move |old: Arc<EndpointSlice>, cur: Arc<EndpointSlice>| {
                    // A slice handed to or taken from this controller wakes both Services.
                    if managed(&old) != managed(&cur)
                        || service_key_of(&old) != service_key_of(&cur)
                    {
                        update.queue_all(service_key_of(&old).into_iter().collect());
                        update.queue_all(service_key_of(&cur).into_iter().collect());
                    } else {
                        update.on_slice_change(&cur);
                    }
                })
                .on_delete(move |s: DeltaObject<EndpointSlice>| {
                    let slice = s.object();
                    if managed(slice) && !lock(&delete.tracker).handle_deletion(slice) {
                        delete.queue_all(service_key_of(slice).into_iter().collect());
                    }
                }),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn queue_all(&self, keys: Vec<ObjectKey>) {
        for key in keys {
            self.queue.add(key);
        }
    }

    /// `onEndpointSliceAdd`/`Update`: a managed slice this controller did not write as it
    /// is now wakes its Service.
    fn on_slice_change(&self, slice: &EndpointSlice) {
        if managed(slice) && lock(&self.tracker).should_sync(slice) {
            self.queue_all(service_key_of(slice).into_iter().collect());
        }
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced).
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
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncService` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let ns = key.namespace.as_deref();
        let Some(service) = self.services.get(ns, &key.name) else {
            // Its slices go with it: the garbage collector follows their ownerReferences.
            lock(&self.trigger_times).delete_service(key);
            lock(&self.tracker).delete_service(key);
            tracing::debug!(service = %key, "service deleted: its slices are garbage collected");
            return Ok(None);
        };
        let pods = match service_selector(&service) {
            Some(selector) => self.pods.list(ns, &selector),
            None => Vec::new(),
        };
        let slice_selector = Selector::from_set(&BTreeMap::from([
            (LABEL_SERVICE_NAME.to_owned(), key.name.clone()),
            (LABEL_MANAGED_BY.to_owned(), CONTROLLER_NAME.to_owned()),
        ]));
        let slices: Vec<Arc<EndpointSlice>> = self
            .slices
            .list(ns, &slice_selector)
            .into_iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .collect();
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(Arc::as_ref).collect();
        if lock(&self.tracker).stale_slices(key, &slice_refs) {
            return Err(Error::StaleInformerCache(
                "EndpointSlice informer cache is out of date".into(),
            ));
        }
        let pod_refs: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let mut node_names: Vec<&str> = pod_refs
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
            .collect();
        node_names.sort_unstable();
        node_names.dedup();
        let nodes: Vec<Arc<Node>> = node_names
            .iter()
            .filter_map(|n| self.nodes.get(None, n))
            .collect();
        let node_refs: Vec<&Node> = nodes.iter().map(Arc::as_ref).collect();
        let trigger_time = if service_selector(&service).is_some() {
            lock(&self.trigger_times).compute(&service, &pod_refs)
        } else {
            None
        };
        let out = sync_endpoint_slices(EndpointSliceSyncInput {
            service: &service,
            pods: &pod_refs,
            slices: &slice_refs,
            nodes: &node_refs,
            trigger_time,
            max_endpoints_per_slice: self.max_endpoints_per_slice,
        });
        tracing::info!(service = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        let (outcome, failure) = match self.executor.execute(out.actions, None).await {
            Ok(outcome) => (outcome, None),
            Err(failure) => (failure.outcome.clone(), Some(failure)),
        };
        {
            let mut tracker = lock(&self.tracker);
            for slice in &outcome.endpoint_slices {
                tracker.update(slice);
            }
            for slice in &outcome.deleted_endpoint_slices {
                tracker.expect_deletion(slice);
            }
        }
        match failure {
            None => Ok(outcome.requeue_after),
            // Creates keep failing in a namespace being deleted: drop the key.
            Some(failure)
                if matches!(failure.action, Action::CreateEndpointSlice(_))
                    && failure.error.is_namespace_terminating() =>
            {
                Ok(None)
            }
            Some(failure) => {
                let namespace = key.namespace.as_deref().unwrap_or_default();
                self.executor.record_action(&action::event(
                    ObjectRef::from_object(service.as_ref()),
                    EventType::Warning,
                    "FailedToUpdateEndpointSlices",
                    format!(
                        "Error updating Endpoint Slices for Service {namespace}/{}: {}",
                        key.name, failure.error
                    ),
                ));
                Err(failure.error)
            }
        }
    }
}

/// Whether this controller manages the slice (`ManagedByController`).
fn managed(slice: &EndpointSlice) -> bool {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .is_some_and(|m| m == CONTROLLER_NAME)
}
