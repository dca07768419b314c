//! Work queues: the hand-off between informer event handlers and controller workers.
//!
//! Mirrors client-go's `util/workqueue` package:
//!
//! | file | client-go | what it adds |
//! | --- | --- | --- |
//! | [`queue`] | `queue.go` | FIFO with dedup (`dirty`), no concurrent processing (`processing`), shutdown/drain |
//! | [`delaying`] | `delaying_queue.go` | `add_after`: a min-heap of items waiting for their ready time |
//! | [`rate_limiting`] | `rate_limiting_queue.go`, `default_rate_limiters.go` | `add_rate_limited`, `forget`, `num_requeues`, rate limiters |
//! | [`metrics`] | `metrics.go` | depth, adds, queue wait, work duration, retries in Prometheus text |
//!
//! The worker loop every controller runs (client-go's `processNextWorkItem`):
//!
//! ```text
//!   while let Some(key) = queue.get().await {
//!       match sync(&key).await {
//!           Ok(())                                   => queue.forget(&key),
//!           Err(_) if queue.num_requeues(&key) < 15  => queue.add_rate_limited(key.clone()),
//!           Err(_)                                   => queue.forget(&key),
//!       }
//!       queue.done(&key);
//!   }
//! ```

pub mod delaying;
pub mod metrics;
pub mod queue;
pub mod rate_limiting;

pub use metrics::{QueueMetrics, render_prometheus};
pub use queue::Queue;
pub use rate_limiting::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter,
    RateLimitingQueue, default_controller_rate_limiter,
};
