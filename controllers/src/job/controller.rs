//! The Job controller's async shell: `pkg/controller/job/job_controller.go` (`NewController`,
//! the pod and Job handlers, `syncJob`'s I/O half, `getPodsForJob`, the orphan-pod queue).
//!
//! ```text
//!   Job informer ─ add/update ─────────────────────────────────▶ queue "job" (ns/name)
//!              ─ delete: forget expectations; its pods still carrying the finalizer
//!                ──────────────────────────────────────────────▶ queue "orphanpod"
//!   Pod informer ─ add: creation_observed ─ update: finalizer gone → observed,
//!                  deletionTimestamp → deletion_observed ─ delete ─▶ queue "job" after 1 s
//!                                                                  (syncJobBatchPeriod)
//!     sync(key): claim pods ─▶ sync_job(expectations, finalizer expectations, back-off)
//!                ─▶ Executor: POST pods, DELETE pods, PUT /status, PATCH finalizers, events
//!     orphan pod: its Job gone or finished ─▶ PATCH the finalizer away
//! ```
//!
//! Unlike Kubernetes, an orphan pod adopted by a Job does not get the tracking finalizer in
//! the adoption patch; such a pod is counted only if it finishes while it still has one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apimachinery::{ObjectKey, ObjectRef};
use client::indexer::{CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY, controller_uid_index_func};
use client::{DeltaObject, Indexer, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::backoff::BackoffRecord;
use super::conditions::is_finished;
use super::pods::has_tracking_finalizer;
use super::{JOB_TRACKING_FINALIZER, JobSyncInput, sync_job};
use crate::action::Action;
use crate::adoption::claim;
use crate::error::Result;
use crate::executor::Executor;
use crate::expectations::Expectations;
use crate::lookup::{resolve_controller_ref, selecting_controllers};
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::get_controller_of;
use crate::selector;
use crate::worker::{SyncResult, Workers, object_context_of};

/// `syncJobBatchPeriod`: pod events for one Job are merged over this long.
pub const SYNC_JOB_BATCH_PERIOD: Duration = Duration::from_secs(1);

/// The Job controller (cheap to clone).
#[derive(Clone)]
pub struct JobController {
    jobs: Lister<Job>,
    pods: Indexer<Pod>,
    queue: RateLimitingQueue<ObjectKey>,
    orphan_queue: RateLimitingQueue<ObjectKey>,
    expectations: Arc<Mutex<Expectations>>,
    /// `finalizerExpectations`: per Job, pod UIDs whose finalizer removal is not yet observed.
    finalizer_expectations: Arc<Mutex<HashMap<ObjectKey, HashSet<String>>>>,
    /// `podBackoffStore`.
    backoff: Arc<Mutex<HashMap<ObjectKey, BackoffRecord>>>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
    orphan_metrics: Arc<ControllerMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl JobController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let job_informer = factory.informer::<Job>();
        let pod_informer = factory.informer::<Pod>();
        if !pod_informer.indexer().has_index(CONTROLLER_UID_INDEX) {
            pod_informer.add_indexer(
                CONTROLLER_UID_INDEX,
                Arc::new(controller_uid_index_func::<Pod>),
            );
        }
        let this = JobController {
            jobs: Lister::new(job_informer.indexer().clone()),
            pods: pod_informer.indexer().clone(),
            queue: RateLimitingQueue::on_clock("job", executor.clock().clone()),
            orphan_queue: RateLimitingQueue::on_clock("job_orphan_pod", executor.clock().clone()),
            expectations: Arc::new(Mutex::new(Expectations::new())),
            finalizer_expectations: Arc::new(Mutex::new(HashMap::new())),
            backoff: Arc::new(Mutex::new(HashMap::new())),
            executor,
            metrics: Arc::new(ControllerMetrics::new("job")),
            orphan_metrics: Arc::new(ControllerMetrics::new("job_orphan_pod")),
        };
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        job_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |job: Arc<Job>, _| add.queue.add(ObjectKey::of(job.as_ref())))
                .on_update(move |_, job: Arc<Job>| update.queue.add(ObjectKey::of(job.as_ref())))
                .on_delete(move |job: DeltaObject<Job>| delete.delete_job(job.object())),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        pod_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |pod: Arc<Pod>, _| add.add_pod(&pod))
                .on_update(move |old: Arc<Pod>, cur: Arc<Pod>| update.update_pod(&old, &cur))
                .on_delete(move |pod: DeltaObject<Pod>| delete.delete_pod(pod.object(), true)),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced), and one for
    /// orphan pods.
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.jobs)),
        }
        .spawn(tracker, shutdown.clone(), move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
        let this = self.clone();
        Workers {
            queue: self.orphan_queue.clone(),
            count: 1,
            max_retries: None,
            metrics: self.orphan_metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: None,
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.handle_orphan_pod(&key).await }
        });
    }

    fn job_of(&self, pod: &Pod) -> Option<Arc<Job>> {
        let r = get_controller_of(&pod.metadata)?;
        resolve_controller_ref(&self.jobs, pod.namespace().as_deref(), r)
    }

    fn enqueue_batched(&self, job: &Job) {
        self.queue
            .add_after(ObjectKey::of(job), SYNC_JOB_BATCH_PERIOD);
    }

    /// A pod that carries the finalizer of a Job that is gone goes to the orphan queue.
    fn maybe_orphan(&self, pod: &Pod) {
        if has_tracking_finalizer(pod) {
            self.orphan_queue.add(ObjectKey::from_meta(&pod.metadata));
        }
    }

    fn delete_job(&self, job: &Job) {
        let key = ObjectKey::of(job);
        lock(&self.expectations).delete_expectations(&key);
        lock(&self.finalizer_expectations).remove(&key);
        lock(&self.backoff).remove(&key);
        // `cleanupPodFinalizers`: the Job's pods must not be kept by its finalizer.
        let uid = job.uid().unwrap_or_default();
        for pod in self
            .pods
            .by_index(CONTROLLER_UID_INDEX, &uid)
            .unwrap_or_default()
        {
            self.maybe_orphan(&pod);
        }
        self.queue.add(key);
    }

    /// `addPod`.
    fn add_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            return self.delete_pod(pod, false);
        }
        if get_controller_of(&pod.metadata).is_some() {
            match self.job_of(pod) {
                Some(job) => {
                    lock(&self.expectations).creation_observed(&ObjectKey::of(job.as_ref()));
                    self.enqueue_batched(&job);
                }
                None => self.maybe_orphan(pod),
            }
            return;
        }
        self.maybe_orphan(pod);
        self.enqueue_adopters(pod);
    }

    /// `updatePod`.
    fn update_pod(&self, old: &Pod, cur: &Pod) {
        if old.resource_version() == cur.resource_version() {
            return;
        }
        if cur.metadata.deletion_timestamp.is_some() {
            // Observed as deleted now; the final delete event only clears finalizer
            // expectations.
            self.delete_pod(cur, false);
            return;
        }
        if let Some(job) = self.job_of(cur) {
            if has_tracking_finalizer(old) && !has_tracking_finalizer(cur) {
                self.finalizer_removal_observed(&job, cur);
            }
            self.enqueue_batched(&job);
        } else {
            self.maybe_orphan(cur);
        }
        if let Some(old_job) = self.job_of(old)
            && get_controller_of(&old.metadata).map(|r| &r.uid)
                != get_controller_of(&cur.metadata).map(|r| &r.uid)
        {
            self.enqueue_batched(&old_job);
        }
        if get_controller_of(&cur.metadata).is_none() && old.metadata.labels != cur.metadata.labels
        {
            self.enqueue_adopters(cur);
        }
    }

    /// `deletePod`: one deletion observed (once per pod); `final_state` when the pod is gone,
    /// which also settles its finalizer removal.
    fn delete_pod(&self, pod: &Pod, final_state: bool) {
        let Some(job) = self.job_of(pod) else {
            if !final_state {
                self.maybe_orphan(pod);
            }
            return;
        };
        let key = ObjectKey::of(job.as_ref());
        let pod_key = ObjectKey::from_meta(&pod.metadata);
        lock(&self.expectations).deletion_observed(&key, &pod_key);
        if final_state || !has_tracking_finalizer(pod) {
            self.finalizer_removal_observed(&job, pod);
        }
        self.enqueue_batched(&job);
    }

    fn finalizer_removal_observed(&self, job: &Job, pod: &Pod) {
        let key = ObjectKey::of(job);
        let uid = pod.uid().unwrap_or_default();
        let mut expected = lock(&self.finalizer_expectations);
        if let Some(set) = expected.get_mut(&key) {
            set.remove(&uid);
            if set.is_empty() {
                expected.remove(&key);
            }
        }
    }

    fn enqueue_adopters(&self, pod: &Pod) {
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        for job in selecting_controllers(&self.jobs, pod.namespace().as_deref(), labels, |j| {
            j.spec.as_ref().and_then(|s| s.selector.as_ref())
        }) {
            self.queue.add(ObjectKey::of(job.as_ref()));
        }
    }

    /// `syncJob` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.jobs.get(key.namespace.as_deref(), &key.name) else {
            tracing::debug!(job = %key, "job has been deleted");
            lock(&self.expectations).delete_expectations(key);
            lock(&self.finalizer_expectations).remove(key);
            lock(&self.backoff).remove(key);
            return Ok(None);
        };
        let job: Job = (*cached).clone();
        let claimed = self.claim_pods(&job).await?;
        let pods: Vec<&Pod> = claimed.iter().map(Arc::as_ref).collect();
        let expected_rm = lock(&self.finalizer_expectations)
            .get(key)
            .cloned()
            .unwrap_or_default();
        let backoff = lock(&self.backoff).get(key).cloned().unwrap_or_default();
        let now = self.executor.clock().wall();
        let out = {
            let mut expectations = lock(&self.expectations);
            sync_job(
                &mut expectations,
                JobSyncInput {
                    job: &job,
                    pods: &pods,
                    expected_rm_finalizers: &expected_rm,
                    backoff: &backoff,
                    now,
                },
            )
        };
        tracing::info!(job = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        client::trace::set_attribute(client::trace::attr::REASON, out.summary.as_str());
        // Expected before the patches go out (their updates may arrive before `execute`
        // returns), and taken back below for every one that was not carried out.
        if !out.rm_finalizers.is_empty() {
            lock(&self.finalizer_expectations)
                .entry(key.clone())
                .or_default()
                .extend(out.rm_finalizers.iter().cloned());
        }
        let wrote_status = |actions: &[Action]| {
            actions
                .iter()
                .any(|a| matches!(a, Action::UpdateJobStatus(_)))
        };
        let had_status_write = wrote_status(&out.actions);
        let result = self
            .executor
            .execute(out.actions, Some(&self.expectations))
            .await;
        // A removal that failed, or that was never sent because an earlier write failed (a
        // 409 on the status that was to count the pod first), will not be observed: that pod
        // is not counted yet and must not be skipped as if it were.
        let removed = match &result {
            Ok(outcome) => &outcome.removed_finalizers,
            Err(failure) => &failure.outcome.removed_finalizers,
        };
        let not_sent: Vec<&String> = out
            .rm_finalizers
            .iter()
            .filter(|uid| !removed.contains(uid))
            .collect();
        if !not_sent.is_empty() {
            let mut expected = lock(&self.finalizer_expectations);
            if let Some(set) = expected.get_mut(key) {
                for uid in not_sent {
                    set.remove(uid);
                }
                if set.is_empty() {
                    expected.remove(key);
                }
            }
        }
        // The back-off record follows the status that counted the failures
        // (`updateBackoffRecord` after the first flush).
        let status_written = match &result {
            Ok(_) => had_status_write,
            Err(failure) => failure.outcome.writes > 0,
        };
        if out.finished && result.is_ok() {
            lock(&self.backoff).remove(key);
        } else if status_written || result.is_ok() {
            lock(&self.backoff).insert(key.clone(), out.backoff);
        }
        match result {
            Ok(outcome) => Ok(outcome.requeue_after),
            Err(failure) => Err(failure.error),
        }
    }

    /// `getPodsForJob`: the pods this Job controls plus the orphans its selector matches,
    /// claimed.
    async fn claim_pods(&self, job: &Job) -> Result<Vec<Arc<Pod>>> {
        let selector =
            selector::from_label_selector(job.spec.as_ref().and_then(|s| s.selector.as_ref()))?;
        let uid = job.uid().unwrap_or_default();
        let empty = BTreeMap::new();
        let selects = |p: &Pod| selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty));
        // A Job keeps the pods it controls even once they stop matching (Kubernetes lists
        // every pod of the namespace and claims by controllerRef first).
        let mut claimed: Vec<Arc<Pod>> = self
            .pods
            .by_index(CONTROLLER_UID_INDEX, &uid)
            .unwrap_or_default();
        let namespace = job.namespace();
        let orphans: Vec<Pod> = self
            .pods
            .by_index(CONTROLLER_UID_INDEX, ORPHAN_INDEX_KEY)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.metadata.namespace == namespace && selects(p))
            .map(|p| (*p).clone())
            .collect();
        if !orphans.is_empty() && !is_finished(job) && job.metadata.deletion_timestamp.is_none() {
            claimed.extend(
                claim(&self.executor, job, &selector, &orphans)
                    .await?
                    .into_iter()
                    .map(Arc::new),
            );
        }
        Ok(claimed)
    }

    /// `handleOrphanPod`: a pod whose Job is gone or finished loses the tracking finalizer.
    async fn handle_orphan_pod(&self, key: &ObjectKey) -> SyncResult {
        let Some(pod) = self.pods.get_by_key(key) else {
            return Ok(None);
        };
        if !has_tracking_finalizer(&pod) {
            return Ok(None);
        }
        if let Some(job) = self.job_of(&pod)
            && !is_finished(&job)
        {
            // Its Job is alive: the Job's own sync handles it.
            return Ok(None);
        }
        let target = ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.name_any(),
            uid: pod.uid().unwrap_or_default(),
        };
        let action = Action::RemovePodFinalizers {
            controller: target.clone(),
            pods: vec![(key.clone(), target.uid.clone())],
            finalizer: JOB_TRACKING_FINALIZER.to_owned(),
        };
        tracing::info!(pod = %key, "orphan pod: removing the job tracking finalizer");
        self.executor
            .execute(vec![action], None)
            .await
            .map(|_| None)
            .map_err(|f| f.error)
    }
}
