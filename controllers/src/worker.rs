//! The worker loop every controller runs: client-go's `processNextWorkItem` /
//! `handleErr` (`pkg/controller/deployment/deployment_controller.go`,
//! `pkg/controller/replicaset/replica_set.go`).
//!
//! ```text
//!   loop {
//!       key = queue.get()              (waits; None once shut down and drained)
//!       match sync(key) {
//!           Ok(None)            → forget(key)                      (reset its backoff)
//!           Ok(Some(after))     → forget(key); add_after(key, after) (zero: add_rate_limited)
//!           Err(e) if retries < max → add_rate_limited(key)         (5 ms · 2^n, 10 qps)
//!           Err(e)              → forget(key), log "dropping"
//!       }
//!       done(key)
//!   }
//! ```
//!
//! `max_retries` is 15 for the Deployment controller and unbounded for the ReplicaSet
//! controller, as in Kubernetes.
//!
//! A sync that panics counts as a sync that failed ([`Error::Panicked`]): the panic is logged
//! (`Observed a panic`, as client-go's `HandleCrash` logs it) and counted
//! (`miniplane_controller_sync_panics_total`), the key is requeued with back-off and marked
//! done, and the worker goes on with the next key. Unlike kube-controller-manager, whose
//! `HandleCrash` re-panics and so restarts the whole process, one bad key never takes a
//! controller down: the other keys keep being synced.
//!
//! Traced (a [`Tracer`] that is enabled): each key's handling records its wait in the queue
//! and a `sync <controller>` span under the event that queued it (linked to every other event
//! the queue merged into it); the sync runs in that span's scope, so its writes carry the
//! trace, and a requeue is caused by the sync (`client::trace`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use client::workqueue::queue::QueueItem;
use client::{RateLimitingQueue, Tracer};
use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::manager::metrics::ControllerMetrics;

/// What one sync asks for: `Some(after)` to look at the key again later.
pub type SyncResult = Result<Option<Duration>>;

/// How a controller's workers run.
#[derive(Clone)]
pub struct Workers<T: QueueItem> {
    /// The controller's queue.
    pub queue: RateLimitingQueue<T>,
    /// Number of workers (`--concurrent-*-syncs`).
    pub count: usize,
    /// Retries before a failing key is dropped (`None`: forever).
    pub max_retries: Option<u32>,
    /// Where sync counts go.
    pub metrics: Arc<ControllerMetrics>,
    /// Records the queue waits and syncs (disabled: nothing).
    pub tracer: Tracer,
    /// The trace context on a key's object, from the controller's cache (`None`: the
    /// controller has no single object per key; its syncs follow their first cause).
    pub object_context: Option<ObjectContext<T>>,
}

/// Looks up the trace context on the object of a key (see [`Tracer::begin_work`]).
pub type ObjectContext<T> = Arc<dyn Fn(&T) -> Option<client::trace::SpanContext> + Send + Sync>;

/// The [`ObjectContext`] of a controller whose keys name objects of `lister`'s kind: the
/// trace context on the cached object.
pub fn object_context_of<K>(lister: &client::Lister<K>) -> ObjectContext<apimachinery::ObjectKey>
where
    K: kube::Resource + Send + Sync + 'static,
{
    let lister = lister.clone();
    Arc::new(move |key: &apimachinery::ObjectKey| {
        lister
            .get(key.namespace.as_deref(), &key.name)
            .and_then(|o| client::trace::object_context(o.meta()))
    })
}

impl<T: QueueItem + std::fmt::Display> Workers<T> {
    /// Spawns the workers on `tracker`. When `shutdown` fires the queue is shut down; the
    /// workers finish the keys already queued (client-go's `ShutDownWithDrain`) and exit.
    pub fn spawn<F, Fut>(self, tracker: &TaskTracker, shutdown: CancellationToken, sync: F)
    where
        F: Fn(T) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = SyncResult> + Send + 'static,
    {
        let queue = self.queue.clone();
        tracker.spawn(async move {
            shutdown.cancelled().await;
            queue.shut_down();
        });
        for _ in 0..self.count.max(1) {
            let this = self.clone();
            let sync = sync.clone();
            tracker.spawn(async move { this.run_worker(sync).await });
        }
    }

    async fn run_worker<F, Fut>(self, sync: F)
    where
        F: Fn(T) -> Fut,
        Fut: Future<Output = SyncResult>,
    {
        let sync_name = format!("sync {}", self.metrics.name());
        while let Some(key) = self.queue.get().await {
            let causes = self.queue.take_causes(&key);
            let retries = self.queue.num_requeues(&key);
            let object = match (&self.object_context, self.tracer.is_enabled()) {
                (Some(lookup), true) => lookup(&key),
                _ => None,
            };
            let work = self.tracer.begin_work(
                self.queue.name(),
                &key,
                &causes,
                retries,
                &sync_name,
                object,
            );
            let span = self.queue.work_span(&key);
            let result = work
                .run(AssertUnwindSafe(sync(key.clone()).instrument(span)).catch_unwind())
                .await
                .unwrap_or_else(|payload| {
                    let message = panic_message(payload.as_ref());
                    tracing::error!(controller = %self.metrics.name(), %key, panic = %message, "Observed a panic");
                    self.metrics.observe_panic();
                    Err(Error::Panicked(message))
                });
            self.metrics.observe(result.is_ok());
            match &result {
                Ok(after) => {
                    self.queue.forget(&key);
                    work.requeue(|| match after {
                        Some(d) if d.is_zero() => self.queue.add_rate_limited(key.clone()),
                        Some(d) => self.queue.add_after(key.clone(), *d),
                        None => {}
                    });
                }
                Err(err) => {
                    if self.max_retries.is_none_or(|max| retries < max) {
                        tracing::info!(controller = %self.metrics.name(), %key, %err, "error syncing, requeuing");
                        work.requeue(|| self.queue.add_rate_limited(key.clone()));
                    } else {
                        tracing::warn!(controller = %self.metrics.name(), %key, %err, "dropping out of the queue");
                        self.queue.forget(&key);
                    }
                }
            }
            work.finish(result.as_ref().err().map(|e| e as &dyn std::fmt::Display));
            self.queue.done(&key);
        }
    }
}

/// The text of a panic's payload (`panic!` with a literal or a formatted message).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::manager::metrics::ControllerMetrics;

    /// A sync that panics on its first two tries of key "bad" neither loses that key nor
    /// stops the worker: "bad" is retried until it succeeds, "good" (queued behind it) is
    /// synced, and both panics are counted as failed syncs.
    #[tokio::test]
    async fn a_panicking_sync_is_retried_and_the_worker_goes_on() {
        let queue: RateLimitingQueue<String> = RateLimitingQueue::new("test");
        let metrics = Arc::new(ControllerMetrics::new("test"));
        let workers = Workers {
            queue: queue.clone(),
            count: 1,
            max_retries: None,
            metrics: metrics.clone(),
            tracer: Tracer::disabled(),
            object_context: None,
        };
        let synced: Arc<Mutex<Vec<String>>> = Arc::default();
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();
        let log = synced.clone();
        workers.spawn(&tracker, shutdown.clone(), move |key: String| {
            let log = log.clone();
            async move {
                let tries = {
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    log.push(key.clone());
                    log.iter().filter(|k| **k == key).count()
                };
                if key == "bad" && tries <= 2 {
                    panic!("comparison function does not implement a total order");
                }
                Ok(None)
            }
        });
        queue.add("bad".to_string());
        queue.add("good".to_string());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let log = synced.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let count = |k: &str| log.iter().filter(|x| *x == k).count();
            if count("bad") == 3 && count("good") == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "syncs so far: {log:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(metrics.panics(), 2);
        assert_eq!(metrics.errors(), 2);
        assert_eq!(metrics.syncs(), 4);
        assert_eq!(
            queue.num_requeues(&"bad".to_string()),
            0,
            "forgotten once it succeeded"
        );
        shutdown.cancel();
        tracker.close();
        tokio::time::timeout(Duration::from_secs(10), tracker.wait())
            .await
            .expect("the workers exit after shutdown");
    }
}
