//! The ReplicaSet controller's async shell: `pkg/controller/replicaset/replica_set.go`
//! (`NewBaseController`, the pod and ReplicaSet handlers, `syncReplicaSet`'s I/O half,
//! `claimPods`).
//!
//! ```text
//!   ReplicaSet informer ─ add/update/delete ───────────────▶ queue "replicaset" (ns/name)
//!   Pod informer ─ add: creation_observed(rs) ─────────────▶   │
//!                ─ deletionTimestamp / delete: deletion_observed(rs, pod)
//!                ─ orphan: every ReplicaSet selecting it      │ 5 workers
//!                                                             ▼
//!     sync(key): its pods (owned + matching orphans) ─▶ claim (live GET before adopting)
//!                ─▶ sync_replica_set(expectations) ─▶ Executor (POST pods in slow-start
//!                batches, DELETE pods, PUT /status, events)
//! ```
//!
//! The [`Expectations`] live behind a std mutex: handlers and workers take it for a few
//! instructions and never across an `.await`.
//!
//! The shell is generic over a [`ReplicaSetKind`], as Kubernetes' `NewBaseController` is
//! over a GroupVersionKind: the same code runs ReplicaSets and, as
//! [`crate::replication::ReplicationManager`], ReplicationControllers.
//!
//! Unlike Kubernetes, `related_pods` (the pods of sibling ReplicaSets, used to prefer deleting
//! pods on crowded nodes) is not gathered: victims are ranked among the ReplicaSet's own pods.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apimachinery::ObjectKey;
use client::indexer::{CONTROLLER_UID_INDEX, controller_uid_index_func};
use client::{DeltaObject, Indexer, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::action::Action;
use crate::adoption::claim_pods;
use crate::error::Result;
use crate::executor::Executor;
use crate::expectations::Expectations;
use crate::lookup::resolve_controller_ref;
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::get_controller_of;
use crate::pod_readiness::is_pod_ready;
use crate::replicaset::kind::ReplicaSetKind;
use crate::replicaset::{ReplicaSetSyncInput, status_after_manage_error, sync_replica_set};
use crate::worker::{SyncResult, Workers, object_context_of};

/// The ReplicaSet controller (cheap to clone), over ReplicaSets or another
/// [`ReplicaSetKind`].
pub struct ReplicaSetController<K: ReplicaSetKind = ReplicaSet> {
    replica_sets: Lister<K>,
    pods: Indexer<Pod>,
    queue: RateLimitingQueue<ObjectKey>,
    expectations: Arc<Mutex<Expectations>>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl<K: ReplicaSetKind> Clone for ReplicaSetController<K> {
    fn clone(&self) -> Self {
        ReplicaSetController {
            replica_sets: self.replica_sets.clone(),
            pods: self.pods.clone(),
            queue: self.queue.clone(),
            expectations: self.expectations.clone(),
            executor: self.executor.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<K: ReplicaSetKind> ReplicaSetController<K> {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let rs_informer = factory.informer::<K>();
        let pod_informer = factory.informer::<Pod>();
        pod_informer.add_indexer(
            CONTROLLER_UID_INDEX,
            Arc::new(controller_uid_index_func::<Pod>),
        );
        let this = ReplicaSetController {
            replica_sets: Lister::new(rs_informer.indexer().clone()),
            pods: pod_informer.indexer().clone(),
            queue: RateLimitingQueue::on_clock(K::QUEUE, executor.clock().clone()),
            expectations: Arc::new(Mutex::new(Expectations::new())),
            executor,
            metrics: Arc::new(ControllerMetrics::new(K::QUEUE)),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        rs_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |rs: Arc<K>, _| add.queue.add(ObjectKey::of(rs.as_ref())))
                .on_update(move |_, rs: Arc<K>| update.queue.add(ObjectKey::of(rs.as_ref())))
                .on_delete(move |rs: DeltaObject<K>| {
                    let key = rs.key();
                    delete.expectations().delete_expectations(&key);
                    delete.queue.add(key);
                }),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        pod_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |pod: Arc<Pod>, _| add.add_pod(&pod))
                .on_update(move |old: Arc<Pod>, cur: Arc<Pod>| update.update_pod(&old, &cur))
                .on_delete(move |pod: DeltaObject<Pod>| delete.delete_pod(pod.object())),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn expectations(&self) -> std::sync::MutexGuard<'_, Expectations> {
        self.expectations.lock().unwrap_or_else(|p| p.into_inner())
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
            object_context: Some(object_context_of(&self.replica_sets)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// The ReplicaSet controlling `pod`, from the cache.
    fn controller_of(&self, pod: &Pod) -> Option<Arc<K>> {
        let r = get_controller_of(&pod.metadata)?;
        resolve_controller_ref(&self.replica_sets, pod.namespace().as_deref(), r)
    }

    /// Every ReplicaSet whose selector matches an orphan `pod` (empty or invalid selectors
    /// are skipped, as in Kubernetes).
    fn enqueue_adopters(&self, pod: &Pod) {
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        for rs in self.replica_sets.list(
            pod.namespace().as_deref(),
            &apimachinery::Selector::everything(),
        ) {
            if rs
                .selector()
                .is_ok_and(|s| !s.is_everything() && s.matches(labels))
            {
                self.queue.add(ObjectKey::of(rs.as_ref()));
            }
        }
    }

    /// `addPod`: a pod we created showed up — one creation observed.
    fn add_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Restarted controller-manager: a pod that was being deleted shows up as added.
            return self.delete_pod(pod);
        }
        if get_controller_of(&pod.metadata).is_some() {
            if let Some(rs) = self.controller_of(pod) {
                let key = ObjectKey::of(rs.as_ref());
                self.expectations().creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        self.enqueue_adopters(pod);
    }

    /// `updatePod`: a deletionTimestamp counts as the deletion (graceful pods linger); a
    /// changed controllerRef or labels wake both sides; a pod turning ready wakes its
    /// ReplicaSet again after `minReadySeconds`.
    fn update_pod(&self, old: &Pod, cur: &Pod) {
        if old.resource_version() == cur.resource_version() {
            return;
        }
        let labels_changed = old.metadata.labels != cur.metadata.labels;
        if cur.metadata.deletion_timestamp.is_some() {
            self.delete_pod(cur);
            if labels_changed {
                self.delete_pod(old);
            }
            return;
        }
        let old_ref = get_controller_of(&old.metadata);
        let cur_ref = get_controller_of(&cur.metadata);
        let ref_changed = old_ref.map(|r| &r.uid) != cur_ref.map(|r| &r.uid);
        if ref_changed
            && old_ref.is_some()
            && let Some(rs) = self.controller_of(old)
        {
            self.queue.add(ObjectKey::of(rs.as_ref()));
        }
        if cur_ref.is_some() {
            if let Some(rs) = self.controller_of(cur) {
                let key = ObjectKey::of(rs.as_ref());
                self.queue.add(key.clone());
                let min_ready = rs
                    .to_replica_set()
                    .spec
                    .as_ref()
                    .and_then(|s| s.min_ready_seconds)
                    .unwrap_or(0);
                if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(cur) {
                    self.queue
                        .add_after(key, Duration::from_secs(min_ready as u64 + 1));
                }
            }
            return;
        }
        if labels_changed || ref_changed {
            self.enqueue_adopters(cur);
        }
    }

    /// `deletePod`: one deletion observed (counted once per pod).
    fn delete_pod(&self, pod: &Pod) {
        let Some(rs) = self.controller_of(pod) else {
            return;
        };
        let key = ObjectKey::of(rs.as_ref());
        let pod_key = ObjectKey::from_meta(&pod.metadata);
        self.expectations().deletion_observed(&key, &pod_key);
        self.queue.add(key);
    }

    /// `syncReplicaSet` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.replica_sets.get(key.namespace.as_deref(), &key.name) else {
            tracing::debug!(replicaset = %key, "replica set has been deleted");
            self.expectations().delete_expectations(key);
            return Ok(None);
        };
        let claimed = self.claim_pods(&cached).await?;
        let rs = cached.to_replica_set();
        let pods: Vec<&Pod> = claimed.iter().map(Arc::as_ref).collect();
        let now = self.executor.clock().wall();
        let out = {
            let mut expectations = self.expectations();
            sync_replica_set(
                &mut expectations,
                ReplicaSetSyncInput {
                    replica_set: &rs,
                    pods: &pods,
                    related_pods: &[],
                    now,
                },
            )
        };
        tracing::info!(replicaset = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        match self
            .executor
            .execute(cached.adapt_actions(out.actions), Some(&self.expectations))
            .await
        {
            Ok(outcome) => Ok(outcome.requeue_after),
            Err(failure) => {
                if matches!(
                    failure.action,
                    Action::CreatePods { .. } | Action::DeletePods { .. }
                ) && let Some(status) =
                    status_after_manage_error(&rs, &pods, &failure.error.to_string(), now)
                    && let Err(f) = self
                        .executor
                        .execute(cached.adapt_actions(vec![status]), None)
                        .await
                {
                    tracing::info!(replicaset = %key, error = %f.error, "could not record the failure in status");
                }
                Err(failure.error)
            }
        }
    }

    /// `claimPods`: the pods this ReplicaSet controls plus the orphans its selector
    /// matches, claimed.
    ///
    /// The pods it already controls and still selects (nearly all of them, nearly always)
    /// are taken from the cache as they are; only the rest (orphans to adopt, owned pods no
    /// longer selected, to release) go through [`claim`] and its patches.
    async fn claim_pods(&self, rs: &K) -> Result<Vec<Arc<Pod>>> {
        let selector = rs.selector()?;
        claim_pods(&self.executor, &self.pods, rs, &selector).await
    }
}
