//! Rate-limited re-adds: client-go's `util/workqueue/rate_limiting_queue.go` and
//! `default_rate_limiters.go`.
//!
//! A failed sync re-adds its key with [`RateLimitingQueue::add_rate_limited`], which asks the
//! [`RateLimiter`] how long to wait. The controller default is the slower of two limiters:
//!
//! ```text
//!   default_controller_rate_limiter() = MaxOf(
//!       ItemExponentialFailureRateLimiter(5 ms, 1000 s),   per key: 5 ms, 10 ms, 20 ms, … ≤ 1000 s
//!       BucketRateLimiter(10 qps, burst 100),               all keys: an overall token bucket
//!   )
//! ```
//!
//! `forget(key)` after a successful sync resets the key's failure count.
//!
//! The per-item limiter stays a formula over a per-key failure count rather than `backon`'s
//! backoff (which `crate::backoff` uses): it is asked for many keys at once, each key's
//! count is reset by `forget`, and `num_requeues` reads it, none of which a retry
//! iterator holds.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::queue::{Queue, QueueItem};
use crate::clock::{SharedClock, TokioClock};
use crate::flowcontrol::TokenBucket;

/// Decides how long an item waits before it is re-added (client-go's `TypedRateLimiter`).
pub trait RateLimiter<T>: Send + Sync {
    /// The delay for this (failed) attempt at `item`; records the attempt.
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s failures (call after a successful sync).
    fn forget(&self, item: &T);
    /// How many times `item` has been rate-limited since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// Per-item exponential backoff: `base · 2^failures`, capped at `max`.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Backoff starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<T, u32>> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T: QueueItem> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = {
            let mut failures = self.failures();
            let count = failures.entry(item.clone()).or_insert(0);
            let exp = *count;
            *count = count.saturating_add(1);
            exp
        };
        2u32.checked_pow(exp)
            .and_then(|factor| self.base.checked_mul(factor))
            .map_or(self.max, |backoff| backoff.min(self.max))
    }
    fn forget(&self, item: &T) {
        self.failures().remove(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures().get(item).copied().unwrap_or(0)
    }
}

/// One token bucket shared by all items: an overall retry rate limit.
pub struct BucketRateLimiter {
    clock: SharedClock,
    bucket: Mutex<TokenBucket>,
}

impl BucketRateLimiter {
    /// A bucket of `burst` tokens refilled at `qps`, on the given clock.
    pub fn new(qps: f64, burst: u32, clock: SharedClock) -> Self {
        let now = clock.now();
        BucketRateLimiter {
            bucket: Mutex::new(TokenBucket::new(qps, burst, now)),
            clock,
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        let now = self.clock.now();
        self.bucket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .reserve(now)
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The worst (longest) answer of several limiters (client-go's `MaxOfRateLimiter`).
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`; each one records every attempt.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or_default()
    }
    fn forget(&self, item: &T) {
        self.limiters.iter().for_each(|l| l.forget(item));
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultTypedControllerRateLimiter`: per-item 5 ms…1000 s exponential backoff,
/// and an overall 10 qps / burst 100 bucket.
pub fn default_controller_rate_limiter<T: QueueItem>(clock: SharedClock) -> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100, clock)),
    ])
}

/// A work queue with rate-limited re-adds. Dereferences to the [`Queue`] for `add`, `get`,
/// `done`, `add_after` and shutdown.
pub struct RateLimitingQueue<T: QueueItem> {
    queue: Queue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T: QueueItem> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        RateLimitingQueue {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T: QueueItem> RateLimitingQueue<T> {
    /// A queue on the real clock with [`default_controller_rate_limiter`].
    pub fn new(name: impl Into<String>) -> Self {
        Self::on_clock(name, TokioClock::shared())
    }

    /// A queue on `clock` (its delays and the per-item backoff; the overall 10 qps bucket
    /// too, as client-go's queue shares one clock) with [`default_controller_rate_limiter`].
    pub fn on_clock(name: impl Into<String>, clock: SharedClock) -> Self {
        let limiter = Arc::new(default_controller_rate_limiter(clock.clone()));
        Self::with_limiter(Queue::with_clock(name, clock), limiter)
    }

    /// A rate-limiting queue over `queue` with `limiter`.
    pub fn with_limiter(queue: Queue<T>, limiter: Arc<dyn RateLimiter<T>>) -> Self {
        RateLimitingQueue { queue, limiter }
    }

    /// Re-adds `item` once the rate limiter allows it.
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.metrics().inc_retries();
        self.queue.add_after(item, delay);
    }

    /// Stops tracking `item`'s failures; its next backoff starts again at the base delay.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was re-added with [`RateLimitingQueue::add_rate_limited`] since
    /// it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }
}

impl<T: QueueItem> Deref for RateLimitingQueue<T> {
    type Target = Queue<T>;
    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use futures::FutureExt;

    #[test]
    fn exponential_backoff_doubles_and_caps() {
        let limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        );
        let delays: Vec<u128> = (0..5).map(|_| limiter.when(&"k").as_millis()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80]);
        assert_eq!(limiter.num_requeues(&"k"), 5);
        for _ in 5..40 {
            limiter.when(&"k");
        }
        assert_eq!(
            limiter.when(&"k"),
            Duration::from_secs(1000),
            "capped at max, no overflow"
        );
        assert_eq!(limiter.when(&"other"), Duration::from_millis(5), "per item");
    }

    #[test]
    fn forget_resets_backoff() {
        let limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        );
        limiter.when(&"k");
        limiter.when(&"k");
        limiter.forget(&"k");
        assert_eq!(limiter.num_requeues(&"k"), 0);
        assert_eq!(limiter.when(&"k"), Duration::from_millis(5));
    }

    #[test]
    fn bucket_allows_burst_then_ten_per_second() {
        let clock = FakeClock::new();
        let limiter = BucketRateLimiter::new(10.0, 100, clock.shared());
        for _ in 0..100 {
            assert_eq!(RateLimiter::<&str>::when(&limiter, &"k"), Duration::ZERO);
        }
        assert_eq!(
            RateLimiter::<&str>::when(&limiter, &"k"),
            Duration::from_millis(100)
        );
        assert_eq!(
            RateLimiter::<&str>::when(&limiter, &"k"),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn default_limiter_is_max_of_both() {
        let clock = FakeClock::new();
        let limiter = default_controller_rate_limiter::<u32>(clock.shared());
        // Item backoff dominates while the bucket has tokens.
        assert_eq!(limiter.when(&1), Duration::from_millis(5));
        assert_eq!(limiter.when(&1), Duration::from_millis(10));
        // Drain the bucket with other items: then the bucket's wait dominates a fresh item.
        for i in 2..100 {
            limiter.when(&i);
        }
        assert_eq!(limiter.when(&1000), Duration::from_millis(100));
        assert_eq!(limiter.num_requeues(&1), 2);
        limiter.forget(&1);
        assert_eq!(limiter.num_requeues(&1), 0);
    }

    #[tokio::test]
    async fn add_rate_limited_waits_for_backoff_and_counts_retries() {
        let clock = FakeClock::new();
        let limiter = Arc::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        ));
        let q = RateLimitingQueue::with_limiter(Queue::with_clock("rl", clock.shared()), limiter);
        q.add_rate_limited("k");
        assert!(q.get().now_or_never().is_none());
        clock.advance(Duration::from_millis(5));
        assert_eq!(q.get().await, Some("k"));
        q.done(&"k");
        q.add_rate_limited("k");
        clock.advance(Duration::from_millis(9));
        assert_eq!(q.len(), 0, "second retry waits 10 ms");
        clock.advance(Duration::from_millis(1));
        assert_eq!(q.len(), 1);
        assert_eq!(q.num_requeues(&"k"), 2);
        assert_eq!(q.metrics().retries(), 2);
    }
}
