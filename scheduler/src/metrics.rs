//! `/healthz` and `/metrics` of the scheduler process (a few of kube-scheduler's metrics,
//! `pkg/scheduler/metrics/metrics.go`, in the Prometheus text format).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Counters the shell updates.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Attempts that placed the pod (`scheduler_schedule_attempts_total{result="scheduled"}`).
    pub scheduled: AtomicU64,
    /// Attempts where no node fit (`result="unschedulable"`).
    pub unschedulable: AtomicU64,
    /// Attempts that failed otherwise: binding errors (`result="error"`).
    pub errors: AtomicU64,
    /// Pods per sub-queue at the last scrape: active, backoff, unschedulable.
    pub pending: [AtomicU64; 3],
}

impl Metrics {
    /// Counts one event.
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::from(
            "# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.\n\
             # TYPE scheduler_schedule_attempts_total counter\n",
        );
        for (result, counter) in [
            ("scheduled", &self.scheduled),
            ("unschedulable", &self.unschedulable),
            ("error", &self.errors),
        ] {
            out += &format!(
                "scheduler_schedule_attempts_total{{profile=\"default-scheduler\",result=\"{result}\"}} {}\n",
                load(counter)
            );
        }
        out += "# HELP scheduler_pending_pods Number of pending pods, by the queue type.\n\
                # TYPE scheduler_pending_pods gauge\n";
        for (queue, gauge) in ["active", "backoff", "unschedulable"]
            .iter()
            .zip(&self.pending)
        {
            out += &format!(
                "scheduler_pending_pods{{queue=\"{queue}\"}} {}\n",
                load(gauge)
            );
        }
        out
    }
}

/// Serves `/healthz` and `/metrics` on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { metrics.render() }
            }),
        );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
