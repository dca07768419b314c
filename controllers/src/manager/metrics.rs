//! The controller-manager's own metrics, next to client-go's work-queue metrics.
//!
//! kube-controller-manager exposes hundreds of metrics; miniplane keeps the few a lab needs
//! to see controllers work (and to check that a non-leader does nothing):
//!
//! ```text
//!   miniplane_controller_syncs_total{controller="deployment"} 42
//!   miniplane_controller_sync_errors_total{controller="deployment"} 1
//!   miniplane_controller_sync_panics_total{controller="deployment"} 0
//!   leader_election_master_status{name="kube-controller-manager"} 1
//!   workqueue_depth{name="deployment"} 0      ... (client::workqueue::metrics)
//! ```

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use client::workqueue::QueueMetrics;

/// A counter family: name, help, and how to read it from a controller's counters.
type CounterFamily = (&'static str, &'static str, fn(&ControllerMetrics) -> u64);

/// Sync counters of one controller.
#[derive(Debug)]
pub struct ControllerMetrics {
    name: String,
    syncs: AtomicU64,
    errors: AtomicU64,
    panics: AtomicU64,
}

impl ControllerMetrics {
    /// Zeroed counters for the controller `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ControllerMetrics {
            name: name.into(),
            syncs: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            panics: AtomicU64::new(0),
        }
    }

    /// The controller's name (the `controller` label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Counts one sync, and one error if it failed.
    pub fn observe(&self, ok: bool) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts one sync that panicked (it is also observed as a failed sync).
    pub fn observe_panic(&self) {
        self.panics.fetch_add(1, Ordering::Relaxed);
    }

    /// Syncs that panicked so far.
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Syncs so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Failed syncs so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// Everything `/metrics` shows (shared between the controllers and the HTTP server).
#[derive(Debug, Default)]
pub struct Registry {
    controllers: std::sync::Mutex<Vec<Arc<ControllerMetrics>>>,
    queues: std::sync::Mutex<Vec<Arc<QueueMetrics>>>,
    leader: AtomicBool,
}

impl Registry {
    /// Registers a controller's counters and its queue's metrics.
    pub fn register(&self, controller: Arc<ControllerMetrics>, queue: Arc<QueueMetrics>) {
        self.controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(controller);
        self.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(queue);
    }

    /// Sets `leader_election_master_status`.
    pub fn set_leader(&self, leading: bool) {
        self.leader.store(leading, Ordering::Relaxed);
    }

    /// Total syncs of all controllers (a quick "did it do anything" check).
    pub fn total_syncs(&self) -> u64 {
        self.controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|c| c.syncs())
            .sum()
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let controllers = self
            .controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let queues = self
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut out = String::new();
        let families: [CounterFamily; 3] = [
            (
                "miniplane_controller_syncs_total",
                "Number of syncs (processed work-queue keys) per controller",
                ControllerMetrics::syncs,
            ),
            (
                "miniplane_controller_sync_errors_total",
                "Number of syncs that returned an error per controller",
                ControllerMetrics::errors,
            ),
            (
                "miniplane_controller_sync_panics_total",
                "Number of syncs that panicked (caught, logged and retried) per controller",
                ControllerMetrics::panics,
            ),
        ];
        for (name, help, read) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for c in &controllers {
                let _ = writeln!(out, "{name}{{controller=\"{}\"}} {}", c.name(), read(c));
            }
        }
        let _ = writeln!(
            out,
            "# HELP leader_election_master_status Whether this process leads (1) or not (0)\n\
             # TYPE leader_election_master_status gauge\n\
             leader_election_master_status{{name=\"kube-controller-manager\"}} {}",
            u8::from(self.leader.load(Ordering::Relaxed))
        );
        out.push_str(&client::workqueue::render_prometheus(
            queues.iter().map(|q| q.as_ref()),
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_queue_metrics() {
        let registry = Registry::default();
        let c = Arc::new(ControllerMetrics::new("deployment"));
        registry.register(c.clone(), Arc::new(QueueMetrics::new("deployment")));
        c.observe(true);
        c.observe(false);
        registry.set_leader(true);
        let text = registry.render();
        assert!(text.contains("miniplane_controller_syncs_total{controller=\"deployment\"} 2"));
        assert!(
            text.contains("miniplane_controller_sync_errors_total{controller=\"deployment\"} 1")
        );
        assert!(text.contains("leader_election_master_status{name=\"kube-controller-manager\"} 1"));
        assert!(
            text.contains("workqueue_depth{name=\"deployment\"} 0"),
            "{text}"
        );
        assert_eq!(registry.total_syncs(), 2);
    }
}
