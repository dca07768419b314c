//! The CronJob controller's async shell (`pkg/controller/cronjob/cronjob_controllerv2.go`:
//! `NewControllerV2`, `addJob`, `updateJob`, `deleteJob`, `updateCronJob`, `sync`).
//!
//! ```text
//!   CronJob informer ─ add/update ─────────────▶ queue "cronjob" (ns/name)
//!   Job informer ─ add/update/delete ─ its controlling CronJob ─▶ queue
//!     sync(key): its Jobs (controllerRef UID) + a live GET of active Jobs absent from the
//!                cache ─▶ sync_cron_job ─▶ Executor (POST Job, PUT /status, DELETE Jobs,
//!                events) ─▶ requeue at the next time of the schedule
//! ```

use std::collections::HashSet;
use std::sync::Arc;

use apimachinery::ObjectKey;
use client::indexer::{CONTROLLER_UID_INDEX, controller_uid_index_func};
use client::{DeltaObject, Indexer, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{CronJobSyncInput, sync_cron_job};
use crate::error::Error;
use crate::executor::Executor;
use crate::lookup::resolve_controller_ref;
use crate::manager::metrics::ControllerMetrics;
use crate::owner_ref::get_controller_of;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The CronJob controller (cheap to clone).
#[derive(Clone)]
pub struct CronJobController {
    cron_jobs: Lister<CronJob>,
    jobs: Indexer<Job>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl CronJobController {
    /// Builds the controller on the factory's informers and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let cj_informer = factory.informer::<CronJob>();
        let job_informer = factory.informer::<Job>();
        if !job_informer.indexer().has_index(CONTROLLER_UID_INDEX) {
            job_informer.add_indexer(
                CONTROLLER_UID_INDEX,
                Arc::new(controller_uid_index_func::<Job>),
            );
        }
        let this = CronJobController {
            cron_jobs: Lister::new(cj_informer.indexer().clone()),
            jobs: job_informer.indexer().clone(),
            queue: RateLimitingQueue::on_clock("cronjob", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("cronjob")),
        };
        let (add, update) = (this.clone(), this.clone());
        cj_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |cj: Arc<CronJob>, _| add.queue.add(ObjectKey::of(cj.as_ref())))
                .on_update(move |_, cj: Arc<CronJob>| update.queue.add(ObjectKey::of(cj.as_ref()))),
        );
        let (add, update, delete) = (this.clone(), this.clone(), this.clone());
        job_informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |job: Arc<Job>, _| add.enqueue_controller(&job))
                .on_update(move |_, job: Arc<Job>| update.enqueue_controller(&job))
                .on_delete(move |job: DeltaObject<Job>| delete.enqueue_controller(job.object())),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn enqueue_controller(&self, job: &Job) {
        let Some(r) = get_controller_of(&job.metadata).filter(|r| r.kind == "CronJob") else {
            return;
        };
        if let Some(cj) = resolve_controller_ref(&self.cron_jobs, job.namespace().as_deref(), r) {
            self.queue.add(ObjectKey::of(cj.as_ref()));
        }
    }

    /// Starts `workers` workers on `tracker`.
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: Some(object_context_of(&self.cron_jobs)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `sync` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.cron_jobs.get(key.namespace.as_deref(), &key.name) else {
            return Ok(None);
        };
        let cj: CronJob = (*cached).clone();
        let uid = cj.uid().unwrap_or_default();
        let jobs: Vec<Arc<Job>> = self
            .jobs
            .by_index(CONTROLLER_UID_INDEX, &uid)
            .unwrap_or_default();
        let known: HashSet<String> = jobs.iter().filter_map(|j| j.uid()).collect();
        // An active Job absent from the cache may only be late to arrive: ask the API server.
        let mut missing = HashSet::new();
        let namespace = key.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<Job> = Api::namespaced(self.executor.client(), &namespace);
        for r in cj.status.iter().flat_map(|s| s.active.iter().flatten()) {
            let (Some(r_uid), Some(name)) = (&r.uid, &r.name) else {
                continue;
            };
            if known.contains(r_uid) {
                continue;
            }
            let live = api
                .get_opt(name)
                .await
                .map_err(|e| Error::from_kube("get", format!("Job {namespace}/{name}"), e))?;
            if live.is_none_or(|j| j.uid().as_ref() != Some(r_uid)) {
                missing.insert(r_uid.clone());
            }
        }
        let refs: Vec<&Job> = jobs.iter().map(Arc::as_ref).collect();
        let out = sync_cron_job(CronJobSyncInput {
            cron_job: &cj,
            jobs: &refs,
            missing: &missing,
            now: self.executor.clock().wall(),
        });
        tracing::info!(cronjob = %key, "{}", out.summary);
        client::trace::set_summary(&out.summary);
        client::trace::set_attribute(client::trace::attr::REASON, out.summary.as_str());
        match self.executor.execute(out.actions, None).await {
            Ok(outcome) => Ok(outcome.requeue_after),
            Err(failure) => Err(failure.error),
        }
    }
}
