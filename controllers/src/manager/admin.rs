//! The controller-manager's side of the admin API (`docs/faults.md`): it obeys the
//! `PauseController` faults (pause, step, resume a controller's work queue) and reports its
//! queues to `PUT /miniplane/v1/components/kube-controller-manager/controllers`.
//!
//! No Kubernetes counterpart: kube-controller-manager shows its queues only as Prometheus
//! metrics, and cannot be paused. [`PauseState::plan`] is the decision, a plain function of
//! the faults; [`run`] is the shell that applies it and reports.
//!
//! ```text
//!   faults channel (client::faults) ─▶ PauseState::plan ─▶ queue.pause() / step(n) / resume()
//!   every 200 ms: snapshot of every queue ─▶ changed (or 2 s passed)? ─▶ PUT report
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admin::{ControllerList, ControllerStatus, Fault, FaultSpec};
use client::RateLimitingQueue;
use client::workqueue::queue::QueueItem;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::ControllerMetrics;

/// How often the queues are looked at for a report.
const REPORT_TICK: Duration = Duration::from_millis(200);

/// A report is sent at least this often, changed or not (so a stale report means "down").
const REPORT_EVERY: Duration = Duration::from_secs(2);

/// A controller's queue as the admin side sees it, whatever its key type.
pub trait QueueControl: Send + Sync {
    /// Pauses the queue.
    fn pause(&self);
    /// Resumes it.
    fn resume(&self);
    /// Lets `n` more keys through a paused queue.
    fn step(&self, n: u64);
    /// The queue's part of a report (keys, depth, pause state).
    fn status(&self) -> ControllerStatus;
}

impl<T: QueueItem + std::fmt::Display> QueueControl for RateLimitingQueue<T> {
    fn pause(&self) {
        (**self).pause();
    }
    fn resume(&self) {
        (**self).resume();
    }
    fn step(&self, n: u64) {
        (**self).step(n);
    }
    fn status(&self) -> ControllerStatus {
        let snap = self.snapshot(admin::controller::MAX_KEYS);
        let metrics = self.metrics();
        ControllerStatus {
            paused: snap.paused,
            steps_pending: snap.steps_pending,
            depth: snap.depth as u64,
            in_flight: snap.in_flight as u64,
            waiting: snap.waiting as u64,
            adds: metrics.adds(),
            retries: metrics.retries(),
            queued: snap.queued.iter().map(ToString::to_string).collect(),
            processing: snap.processing.iter().map(ToString::to_string).collect(),
            ..ControllerStatus::default()
        }
    }
}

/// One controller the admin side controls.
#[derive(Clone)]
pub struct Controlled {
    /// Its sync counters (their name is the controller's name).
    pub metrics: Arc<ControllerMetrics>,
    /// Its queue.
    pub queue: Arc<dyn QueueControl>,
}

impl Controlled {
    fn status(&self, component: &str) -> ControllerStatus {
        ControllerStatus {
            name: self.metrics.name().to_string(),
            component: component.to_string(),
            syncs: self.metrics.syncs(),
            sync_errors: self.metrics.errors(),
            ..self.queue.status()
        }
    }
}

/// What to do to one controller's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOp {
    /// Pause it (dropping steps not taken).
    Pause,
    /// Let this many more keys through.
    Step(u64),
    /// Resume it.
    Resume,
}

/// The pauses applied so far: controller → steps of its fault already granted.
#[derive(Debug, Default)]
pub struct PauseState {
    applied: HashMap<String, u64>,
}

impl PauseState {
    /// What to do to each controller so its queue matches `faults`. `initial` is the first
    /// look after a start: steps granted before then were for another process and are not
    /// granted again.
    pub fn plan(&mut self, faults: &[Fault], initial: bool) -> Vec<(String, QueueOp)> {
        let mut ops = Vec::new();
        let mut wanted: HashMap<&str, u64> = HashMap::new();
        for f in faults {
            if let FaultSpec::PauseController { controller, steps } = &f.spec {
                wanted.insert(controller.as_str(), *steps);
            }
        }
        let mut names: Vec<&&str> = wanted.keys().collect();
        names.sort();
        for name in names {
            let steps = wanted[*name];
            match self.applied.get(*name).copied() {
                None => {
                    ops.push((name.to_string(), QueueOp::Pause));
                    if steps > 0 && !initial {
                        ops.push((name.to_string(), QueueOp::Step(steps)));
                    }
                }
                Some(done) if steps > done => {
                    ops.push((name.to_string(), QueueOp::Step(steps - done)));
                }
                Some(done) if steps < done => {
                    // The pause was cleared and made again between two looks.
                    ops.push((name.to_string(), QueueOp::Pause));
                    if steps > 0 {
                        ops.push((name.to_string(), QueueOp::Step(steps)));
                    }
                }
                Some(_) => {}
            }
            self.applied.insert(name.to_string(), steps);
        }
        let mut gone: Vec<String> = self
            .applied
            .keys()
            .filter(|name| !wanted.contains_key(name.as_str()))
            .cloned()
            .collect();
        gone.sort();
        for name in gone {
            self.applied.remove(&name);
            ops.push((name, QueueOp::Resume));
        }
        ops
    }
}

/// Applies `ops` to the controllers named.
pub fn apply(controllers: &[Controlled], ops: &[(String, QueueOp)]) {
    for (name, op) in ops {
        let Some(c) = controllers.iter().find(|c| c.metrics.name() == name) else {
            continue;
        };
        tracing::info!(controller = %name, ?op, "fault: work queue");
        match op {
            QueueOp::Pause => c.queue.pause(),
            QueueOp::Step(n) => c.queue.step(*n),
            QueueOp::Resume => c.queue.resume(),
        }
    }
}

/// Applies fault changes and reports the queues of `component` (the program name its
/// User-Agent carries, e.g. [`super::COMPONENT`]) until `shutdown` fires. The first fault snapshot
/// has already been applied by the caller (before the workers started).
pub async fn run(
    component: &str,
    client: kube::Client,
    controllers: Vec<Controlled>,
    mut faults: watch::Receiver<Vec<Fault>>,
    mut state: PauseState,
    shutdown: CancellationToken,
) {
    let path = format!("{}/components/{component}/controllers", admin::PREFIX);
    let mut last: Option<ControllerList> = None;
    let mut last_sent = Instant::now();
    let mut watching = true;
    let mut ticker = tokio::time::interval(REPORT_TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = faults.changed(), if watching => {
                if changed.is_err() {
                    // The watcher stopped: keep reporting until told to stop.
                    watching = false;
                    continue;
                }
                let current = faults.borrow_and_update().clone();
                apply(&controllers, &state.plan(&current, false));
            }
            _ = ticker.tick() => {}
        }
        let report = ControllerList {
            items: controllers.iter().map(|c| c.status(component)).collect(),
        };
        if last.as_ref() == Some(&report) && last_sent.elapsed() < REPORT_EVERY {
            continue;
        }
        let body = serde_json::to_vec(&report).unwrap_or_default();
        let request = http::Request::put(&path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body);
        let sent = match request {
            Ok(request) => client.request_text(request).await.map(|_| ()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot build the queue report");
                continue;
            }
        };
        match sent {
            Ok(()) => {
                last = Some(report);
                last_sent = Instant::now();
            }
            Err(e) => tracing::debug!(error = %e, "queue report not accepted"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(controller: &str, steps: u64) -> Fault {
        Fault::new(FaultSpec::PauseController {
            controller: controller.into(),
            steps,
        })
    }

    #[test]
    fn pause_step_and_resume_follow_the_fault() {
        let mut state = PauseState::default();
        let d = "deployment".to_string();
        assert_eq!(state.plan(&[], true), vec![]);
        assert_eq!(
            state.plan(&[pause("deployment", 0)], false),
            vec![(d.clone(), QueueOp::Pause)]
        );
        assert_eq!(
            state.plan(&[pause("deployment", 2)], false),
            vec![(d.clone(), QueueOp::Step(2))]
        );
        assert_eq!(state.plan(&[pause("deployment", 2)], false), vec![]);
        assert_eq!(state.plan(&[], false), vec![(d.clone(), QueueOp::Resume)]);
        // A pause with steps seen for the first time after a start: the steps were another
        // process's.
        let mut restarted = PauseState::default();
        assert_eq!(
            restarted.plan(&[pause("deployment", 3)], true),
            vec![(d.clone(), QueueOp::Pause)]
        );
        // ...but seen later (made while running), they are granted.
        let mut running = PauseState::default();
        assert_eq!(
            running.plan(&[pause("replicaset", 1)], false),
            vec![
                ("replicaset".to_string(), QueueOp::Pause),
                ("replicaset".to_string(), QueueOp::Step(1))
            ]
        );
    }
}
