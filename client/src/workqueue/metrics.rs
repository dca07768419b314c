//! Work-queue metrics: client-go's `util/workqueue/metrics.go`.
//!
//! One [`QueueMetrics`] per queue, labelled by the queue's name. A controller-manager renders
//! all of its queues with [`render_prometheus`], under client-go's metric names:
//!
//! ```text
//!   workqueue_depth{name="deployment"} 3
//!   workqueue_adds_total{name="deployment"} 120
//!   workqueue_queue_duration_seconds_bucket{name="deployment",le="0.001"} 97   (add → get)
//!   workqueue_work_duration_seconds_bucket{name="deployment",le="0.01"} 110    (get → done)
//!   workqueue_retries_total{name="deployment"} 4
//! ```

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A counter or gauge family: name, type, help, and how to read it from a queue.
type ScalarFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&QueueMetrics) -> u64,
);
/// A histogram family: name, help, and which histogram of a queue.
type HistogramFamily = (&'static str, &'static str, fn(&QueueMetrics) -> &Histogram);

/// Histogram bucket bounds in seconds: client-go's `ExponentialBuckets(10e-9, 10, 10)`.
const BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1];

/// The metrics of one work queue.
#[derive(Debug)]
pub struct QueueMetrics {
    name: String,
    depth: AtomicU64,
    adds: AtomicU64,
    retries: AtomicU64,
    queue_duration: Histogram,
    work_duration: Histogram,
}

#[derive(Debug, Default)]
struct Histogram {
    inner: Mutex<HistogramData>,
}

#[derive(Debug, Default, Clone)]
struct HistogramData {
    /// Non-cumulative counts per bucket; the last slot is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS.len());
        let mut data = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        data.counts[slot] += 1;
        data.sum += seconds;
        data.count += 1;
    }

    fn snapshot(&self) -> HistogramData {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl QueueMetrics {
    /// Empty metrics for the queue called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        QueueMetrics {
            name: name.into(),
            depth: AtomicU64::new(0),
            adds: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            queue_duration: Histogram::default(),
            work_duration: Histogram::default(),
        }
    }

    /// The queue's name (the `name` label).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Items ready for a worker right now.
    pub fn depth(&self) -> u64 {
        self.depth.load(Ordering::Relaxed)
    }
    /// Adds that were not coalesced with a pending one.
    pub fn adds(&self) -> u64 {
        self.adds.load(Ordering::Relaxed)
    }
    /// Rate-limited re-adds.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
    /// Number of queue-wait observations (items handed to a worker).
    pub fn queue_duration_count(&self) -> u64 {
        self.queue_duration.snapshot().count
    }
    /// Number of work-duration observations (items marked done).
    pub fn work_duration_count(&self) -> u64 {
        self.work_duration.snapshot().count
    }

    pub(super) fn set_depth(&self, depth: usize) {
        self.depth.store(depth as u64, Ordering::Relaxed);
    }
    pub(super) fn inc_adds(&self) {
        self.adds.fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn inc_retries(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn observe_queue_duration(&self, wait: Duration) {
        self.queue_duration.observe(wait);
    }
    pub(super) fn observe_work_duration(&self, work: Duration) {
        self.work_duration.observe(work);
    }
}

/// Renders the metrics of several queues in the Prometheus text exposition format, one
/// metric family (with its `HELP`/`TYPE` lines) at a time.
pub fn render_prometheus<'a>(queues: impl IntoIterator<Item = &'a QueueMetrics>) -> String {
    let queues: Vec<&QueueMetrics> = queues.into_iter().collect();
    let mut out = String::new();
    let counters: [ScalarFamily; 3] = [
        (
            "workqueue_depth",
            "gauge",
            "Current depth of workqueue",
            QueueMetrics::depth,
        ),
        (
            "workqueue_adds_total",
            "counter",
            "Total number of adds handled by workqueue",
            QueueMetrics::adds,
        ),
        (
            "workqueue_retries_total",
            "counter",
            "Total number of retries handled by workqueue",
            QueueMetrics::retries,
        ),
    ];
    for (metric, kind, help, value) in counters {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
        for q in &queues {
            let _ = writeln!(out, "{metric}{{name=\"{}\"}} {}", q.name, value(q));
        }
    }
    let histograms: [HistogramFamily; 2] = [
        (
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            |q| &q.queue_duration,
        ),
        (
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            |q| &q.work_duration,
        ),
    ];
    for (metric, help, histogram) in histograms {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} histogram");
        for q in &queues {
            let data = histogram(q).snapshot();
            let mut cumulative = 0;
            for (bound, count) in BUCKETS.iter().zip(data.counts) {
                cumulative += count;
                let _ = writeln!(
                    out,
                    "{metric}_bucket{{name=\"{}\",le=\"{bound:e}\"}} {cumulative}",
                    q.name
                );
            }
            let _ = writeln!(
                out,
                "{metric}_bucket{{name=\"{}\",le=\"+Inf\"}} {}",
                q.name, data.count
            );
            let _ = writeln!(out, "{metric}_sum{{name=\"{}\"}} {}", q.name, data.sum);
            let _ = writeln!(out, "{metric}_count{{name=\"{}\"}} {}", q.name, data.count);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Queue;
    use super::*;
    use crate::clock::FakeClock;

    #[tokio::test]
    async fn records_wait_and_work_and_renders_prometheus_text() {
        let clock = FakeClock::new();
        let q = Queue::with_clock("deployment", clock.shared());
        q.add("default/nginx");
        q.add("default/nginx");
        assert_eq!(q.metrics().depth(), 1);
        clock.advance(Duration::from_millis(5));
        let key = q.get().await.expect("queued");
        assert_eq!(q.metrics().depth(), 0);
        clock.advance(Duration::from_millis(50));
        q.done(&key);
        let text = render_prometheus([q.metrics().as_ref()]);
        assert!(
            text.contains("workqueue_depth{name=\"deployment\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_adds_total{name=\"deployment\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_retries_total{name=\"deployment\"} 0"),
            "{text}"
        );
        // 5 ms of queue wait lands in the 0.01 bucket, not the 0.001 one.
        assert!(
            text.contains(
                "workqueue_queue_duration_seconds_bucket{name=\"deployment\",le=\"1e-3\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "workqueue_queue_duration_seconds_bucket{name=\"deployment\",le=\"1e-2\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "workqueue_work_duration_seconds_bucket{name=\"deployment\",le=\"1e-1\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("workqueue_work_duration_seconds_count{name=\"deployment\"} 1"),
            "{text}"
        );
    }
}
