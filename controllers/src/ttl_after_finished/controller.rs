//! The TTL-after-finished controller's async shell
//! (`pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`: `addJob`, `updateJob`,
//! `processJob`).
//!
//! ```text
//!   Job informer ─ add/update of a finished Job with a TTL ─▶ queue "ttl_jobs_to_delete"
//!     sync(key): decide(cached Job) ─ Wait(d) ─▶ requeue after d
//!                                   ─ Delete  ─▶ GET live, decide again ─▶ DELETE Foreground
//! ```

use std::sync::Arc;

use apimachinery::{ObjectKey, ObjectRef};
use client::{Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{TtlDecision, decide};
use crate::action::{Action, PropagationPolicy};
use crate::error::Error;
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers, object_context_of};

/// The TTL-after-finished controller (cheap to clone).
#[derive(Clone)]
pub struct TtlAfterFinishedController {
    jobs: Lister<Job>,
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl TtlAfterFinishedController {
    /// Builds the controller on the factory's Job informer and registers its handlers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor) -> Self {
        let informer = factory.informer::<Job>();
        let this = TtlAfterFinishedController {
            jobs: Lister::new(informer.indexer().clone()),
            queue: RateLimitingQueue::on_clock("ttl_jobs_to_delete", executor.clock().clone()),
            executor,
            metrics: Arc::new(ControllerMetrics::new("ttl-after-finished")),
        };
        let (add, update) = (this.clone(), this.clone());
        informer.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |job: Arc<Job>, _| add.enqueue(&job))
                .on_update(move |_, job: Arc<Job>| update.enqueue(&job)),
        );
        this
    }

    /// The controller's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    fn enqueue(&self, job: &Job) {
        if job.metadata.deletion_timestamp.is_none()
            && job
                .spec
                .as_ref()
                .is_some_and(|s| s.ttl_seconds_after_finished.is_some())
            && super::finish_time(job).is_some()
        {
            self.queue.add(ObjectKey::of(job));
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
            object_context: Some(object_context_of(&self.jobs)),
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `processJob` for one key.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.jobs.get(key.namespace.as_deref(), &key.name) else {
            return Ok(None);
        };
        let now = self.executor.clock().wall();
        match decide(&cached, now) {
            TtlDecision::Skip => return Ok(None),
            TtlDecision::Wait(d) => return Ok(Some(d)),
            TtlDecision::Delete => {}
        }
        // The cache may be stale (the TTL or the Job changed): check the live Job again.
        let api: Api<Job> = Api::namespaced(
            self.executor.client(),
            key.namespace.as_deref().unwrap_or("default"),
        );
        let fresh = api
            .get_opt(&key.name)
            .await
            .map_err(|e| Error::from_kube("get", format!("Job {key}"), e))?;
        let Some(fresh) = fresh else {
            return Ok(None);
        };
        match decide(&fresh, now) {
            TtlDecision::Skip => return Ok(None),
            TtlDecision::Wait(d) => return Ok(Some(d)),
            TtlDecision::Delete => {}
        }
        let summary = format!(
            "Job {key} finished more than ttlSecondsAfterFinished ({}s) ago: deleting it with its pods",
            fresh
                .spec
                .as_ref()
                .and_then(|s| s.ttl_seconds_after_finished)
                .unwrap_or(0)
        );
        tracing::info!("{summary}");
        client::trace::set_summary(&summary);
        client::trace::set_attribute(client::trace::attr::REASON, summary.as_str());
        let target = ObjectRef::from_object(&fresh);
        self.executor
            .execute(
                vec![Action::Delete {
                    target,
                    propagation: Some(PropagationPolicy::Foreground),
                }],
                None,
            )
            .await
            .map(|_| None)
            .map_err(|f| f.error)
    }
}
