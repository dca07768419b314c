//! The running components of a cluster: each one started as a task or a child process, watched
//! while it runs, and stopped in order.
//!
//! ```text
//!   spawn_task(apiserver) ─┐               stop():
//!   spawn_thread(cm) ──────┤  Members        1. kubelet, scheduler, controller-manager,
//!                          │                     metrics-server
//!   spawn_process(sched) ──┤  (one owner       (cancel / SIGTERM; killed after 10 s)
//!   ...                    ┘   per member)   2. apiserver (drains, closes the store)
//! ```
//!
//! The API server stops last so the others can still finish their last requests (a kubelet's
//! final status, a controller's last write) and close their watches cleanly.
//!
//! A member that ends without being asked is reported as [`Progress::Exited`]. In one process
//! that is a failure and stops the whole cluster (`up` exits non-zero), as a crashing
//! kube-apiserver binary would take its in-process controllers with it. As child processes it
//! is a lab's doing (`kill <pid>` of the controller-manager), so the others keep running.

use std::fmt::Display;
use std::future::Future;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::progress::{Component, Progress};

/// How long a component may take to stop before it is aborted (a task) or killed (a process).
pub(crate) const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Receives each [`Progress`] of a cluster.
pub(crate) type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Reports progress, with the time since the start began.
#[derive(Clone)]
pub(crate) struct Reporter {
    start: Instant,
    progress: Option<ProgressFn>,
}

impl Reporter {
    /// A reporter whose clock starts now.
    pub(crate) fn new(progress: Option<ProgressFn>) -> Self {
        Reporter {
            start: Instant::now(),
            progress,
        }
    }

    /// Since the start began.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Hands `progress` to the callback, if any.
    pub(crate) fn report(&self, progress: Progress) {
        if let Some(f) = &self.progress {
            f(&progress);
        }
    }

    /// Reports that `component` is up.
    pub(crate) fn started(
        &self,
        component: Component,
        url: Option<String>,
        pid: Option<u32>,
        nodes: Option<usize>,
    ) {
        self.report(Progress::Started {
            component,
            url,
            pid,
            nodes,
            elapsed: self.elapsed(),
        });
    }
}

/// One running component.
struct Member {
    component: Component,
    /// Asks it to stop (its task cancels the component or signals the process).
    stop: CancellationToken,
    /// Owns the component (or the process) until it has stopped.
    task: JoinHandle<()>,
}

/// The first error a member ended with; later ones are logged only.
#[derive(Clone, Default)]
struct FirstError(Arc<Mutex<Option<Error>>>);

impl FirstError {
    fn set(&self, error: Error) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            None => *slot = Some(error),
            Some(_) => tracing::warn!(%error, "component failed"),
        }
    }

    fn take(&self) -> Option<Error> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// What to do when an in-process member's run ends: nothing more if it was asked to stop
/// (but keep its error), else report it and stop the cluster.
struct Ending {
    component: Component,
    stop: CancellationToken,
    reporter: Reporter,
    failed: CancellationToken,
    first_error: FirstError,
}

impl Ending {
    fn record<E: Display>(self, result: Result<(), E>) {
        let component = self.component;
        if self.stop.is_cancelled() {
            if let Err(e) = result {
                self.first_error.set(Error::component(component, e));
            }
            return;
        }
        let status = match result {
            Ok(()) => "returned".to_owned(),
            Err(e) => e.to_string(),
        };
        self.reporter.report(Progress::Exited {
            component,
            pid: None,
            status: status.clone(),
        });
        self.first_error
            .set(Error::component(component, format!("stopped: {status}")));
        self.failed.cancel();
    }
}

/// The components of one cluster, in start order.
pub(crate) struct Members {
    members: Vec<Member>,
    reporter: Reporter,
    /// Cancelled when an in-process component ends on its own: the cluster must stop.
    failed: CancellationToken,
    first_error: FirstError,
}

impl Members {
    /// No members yet; `failed` is cancelled when an in-process member fails.
    pub(crate) fn new(reporter: Reporter, failed: CancellationToken) -> Self {
        Members {
            members: Vec::new(),
            reporter,
            failed,
            first_error: FirstError::default(),
        }
    }

    /// How the run of `component`, stopped by `stop`, is to be recorded when it ends.
    fn ending(&self, component: Component, stop: &CancellationToken) -> Ending {
        Ending {
            component,
            stop: stop.clone(),
            reporter: self.reporter.clone(),
            failed: self.failed.clone(),
            first_error: self.first_error.clone(),
        }
    }

    /// The reporter members report through.
    pub(crate) fn reporter(&self) -> &Reporter {
        &self.reporter
    }

    /// Runs `run(shutdown)` as a task of this runtime: an in-process component.
    pub(crate) fn spawn_task<Fut, E>(
        &mut self,
        component: Component,
        run: impl FnOnce(CancellationToken) -> Fut,
    ) where
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let stop = CancellationToken::new();
        let running = run(stop.clone());
        let ending = self.ending(component, &stop);
        let task = tokio::spawn(async move { ending.record(running.await) });
        self.members.push(Member {
            component,
            stop,
            task,
        });
    }

    /// Runs `run(shutdown)` on a thread of its own, in a one-thread runtime: an in-process
    /// client component (controller-manager, scheduler, kubelet), threaded as its own process
    /// is (`client_runtime` in `main.rs`). Everything the component builds, its kube client and
    /// the connections and tasks behind it, lives in that runtime, so the component does its
    /// work in batches as a process of its own does, instead of on the API server's workers
    /// (docs/benchmarks.md, "Apply to Running at scale": on the cluster's shared runtime a
    /// 10,000-pod apply took twice the CPU, the ReplicaSet controller syncing ~17 times as
    /// often).
    ///
    /// Watched and stopped as [`Members::spawn_task`]'s tasks are, and a panic is reported as
    /// its end (`panicked: <message>`); when the watching task is aborted (a component that
    /// does not stop in time), the component's future is dropped on its thread, which then
    /// ends.
    pub(crate) fn spawn_thread<Fut, E>(
        &mut self,
        component: Component,
        run: impl FnOnce(CancellationToken) -> Fut + Send + 'static,
    ) -> Result<(), Error>
    where
        Fut: Future<Output = Result<(), E>> + 'static,
        E: Display,
    {
        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
        let (thread_stop, thread_abort) = (stop.clone(), abort.clone());
        std::thread::Builder::new()
            .name(component.name().to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = done_tx.send(Err(format!("cannot build its runtime: {e}")));
                        return;
                    }
                };
                let running = std::panic::AssertUnwindSafe(|| {
                    runtime.block_on(async move {
                        tokio::select! {
                            result = run(thread_stop) => Some(result.map_err(|e| e.to_string())),
                            () = thread_abort.cancelled() => None,
                        }
                    })
                });
                let result = std::panic::catch_unwind(running).unwrap_or_else(|panic| {
                    Some(Err(format!("panicked: {}", panic_text(&*panic))))
                });
                // Tasks the component left behind are dropped without waiting for them.
                runtime.shutdown_background();
                if let Some(result) = result {
                    let _ = done_tx.send(result);
                }
            })
            .map_err(|e| Error::component(component, format!("cannot start its thread: {e}")))?;
        let ending = self.ending(component, &stop);
        let task = tokio::spawn(async move {
            // Dropping this task (aborted) drops the component on its thread.
            let _abort_on_drop = abort.drop_guard();
            let result = done_rx
                .await
                .unwrap_or_else(|_| Err("its thread ended without a result".to_owned()));
            ending.record(result);
        });
        self.members.push(Member {
            component,
            stop,
            task,
        });
        Ok(())
    }

    /// Watches a child process running `component`, and stops it with SIGTERM when asked.
    pub(crate) fn spawn_process(&mut self, component: Component, mut child: tokio::process::Child) {
        let stop = CancellationToken::new();
        let pid = child.id();
        let (token, reporter, first_error) = (
            stop.clone(),
            self.reporter.clone(),
            self.first_error.clone(),
        );
        let task = tokio::spawn(async move {
            tokio::select! {
                status = child.wait() => reporter.report(Progress::Exited {
                    component,
                    pid,
                    status: describe(status),
                }),
                () = token.cancelled() => {
                    if let Err(message) = terminate(&mut child).await {
                        first_error.set(Error::component(component, message));
                    }
                }
            }
        });
        self.members.push(Member {
            component,
            stop,
            task,
        });
    }

    /// The components running now.
    pub(crate) fn components(&self) -> Vec<Component> {
        self.members.iter().map(|m| m.component).collect()
    }

    /// Stops `component` (for the `StopComponent` fault): asked, not a failure.
    pub(crate) async fn stop_component(&mut self, component: Component) {
        let (stopping, keep): (Vec<Member>, Vec<Member>) = self
            .members
            .drain(..)
            .partition(|m| m.component == component);
        self.members = keep;
        for member in &stopping {
            member.stop.cancel();
        }
        for mut member in stopping {
            if tokio::time::timeout(STOP_DEADLINE * 2, &mut member.task)
                .await
                .is_err()
            {
                member.task.abort();
            }
        }
    }

    /// Stops every member (the API server last) and returns the first error any of them
    /// ended with.
    pub(crate) async fn stop(mut self) -> Result<(), Error> {
        let clients = [
            Component::Kubelet,
            Component::Scheduler,
            Component::ControllerManager,
            // While the API server still answers: it deletes its EndpointSlice as it stops.
            Component::MetricsServer,
        ];
        let (first, last): (Vec<Member>, Vec<Member>) = self
            .members
            .drain(..)
            .partition(|m| clients.contains(&m.component));
        for group in [first, last] {
            for member in &group {
                member.stop.cancel();
            }
            for mut member in group {
                // Processes have their own kill deadline inside the task: give it time.
                match tokio::time::timeout(STOP_DEADLINE * 2, &mut member.task).await {
                    Ok(_) => {}
                    Err(_) => {
                        member.task.abort();
                        self.first_error.set(Error::component(
                            member.component,
                            format!("did not stop within {} s", (STOP_DEADLINE * 2).as_secs()),
                        ));
                    }
                }
            }
        }
        match self.first_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The message a panic was raised with (`panic!("…")`), if it is text.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// SIGTERM, then SIGKILL after [`STOP_DEADLINE`]; `Err` if it had to be killed or exited
/// with a failure.
async fn terminate(child: &mut tokio::process::Child) -> Result<(), String> {
    if let Some(pid) = child.id() {
        send_sigterm(pid);
    }
    match tokio::time::timeout(STOP_DEADLINE, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(status) => Err(format!("stopped with {}", describe(status))),
        Err(_) => {
            let _ = child.kill().await;
            Err(format!(
                "did not stop within {} s of SIGTERM; killed",
                STOP_DEADLINE.as_secs()
            ))
        }
    }
}

/// Asks process `pid` to stop, as `kill -TERM` does.
#[allow(unsafe_code)]
fn send_sigterm(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: `kill` reads two integers and touches no memory of ours. The pid is one of our
    // children that has not been reaped yet (`Child::id` is `None` after `wait`), so it cannot
    // have been reused by another process.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}

/// `exit status: 1`, `signal: 9 (SIGKILL)`.
fn describe(status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("unknown ({e})"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use tokio::runtime::RuntimeFlavor;

    /// Members reporting into a list, on a runtime like the cluster's (two workers).
    fn members() -> (Members, Arc<Mutex<Vec<Progress>>>, CancellationToken) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let reporter = Reporter::new(Some(Arc::new(move |p: &Progress| {
            sink.lock().unwrap().push(p.clone());
        })));
        let failed = CancellationToken::new();
        (Members::new(reporter, failed.clone()), seen, failed)
    }

    /// The cluster is told to stop, and `component` is the one reported, with `status`.
    async fn assert_cluster_stopped_by(
        failed: &CancellationToken,
        seen: &Mutex<Vec<Progress>>,
        component: Component,
        status: &str,
    ) {
        tokio::time::timeout(Duration::from_secs(10), failed.cancelled())
            .await
            .expect("the cluster is told to stop");
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Progress::Exited {
                component,
                pid: None,
                status: status.into(),
            }]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_threaded_component_runs_on_a_one_thread_runtime_of_its_own_and_stops_when_asked() {
        let (mut members, seen, failed) = members();
        let (where_tx, where_rx) = tokio::sync::oneshot::channel();
        let caller = std::thread::current().id();
        members
            .spawn_thread(Component::Scheduler, move |shutdown| async move {
                let thread = std::thread::current();
                let flavor = tokio::runtime::Handle::current().runtime_flavor();
                let _ = where_tx.send((thread.id(), thread.name().map(str::to_owned), flavor));
                shutdown.cancelled().await;
                Ok::<(), String>(())
            })
            .unwrap();
        let (thread, name, flavor) = where_rx.await.unwrap();
        assert_ne!(thread, caller);
        assert_eq!(name.as_deref(), Some("scheduler"));
        assert_eq!(flavor, RuntimeFlavor::CurrentThread);
        assert_eq!(members.components(), vec![Component::Scheduler]);
        members.stop().await.unwrap();
        assert!(!failed.is_cancelled());
        assert!(
            seen.lock().unwrap().is_empty(),
            "{:?}",
            seen.lock().unwrap()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_threaded_component_that_ends_on_its_own_fails_the_cluster_with_its_error() {
        let (mut members, seen, failed) = members();
        members
            .spawn_thread(Component::Kubelet, |_shutdown| async {
                Err::<(), _>("lost its watch")
            })
            .unwrap();
        assert_cluster_stopped_by(&failed, &seen, Component::Kubelet, "lost its watch").await;
        let error = members.stop().await.unwrap_err();
        assert_eq!(error.to_string(), "kubelet: stopped: lost its watch");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_threaded_component_is_reported_as_stopped() {
        let (mut members, seen, failed) = members();
        members
            .spawn_thread(Component::ControllerManager, |_shutdown| async {
                if std::hint::black_box(true) {
                    panic!("a bug");
                }
                Ok::<(), String>(())
            })
            .unwrap();
        let status = "panicked: a bug";
        assert_cluster_stopped_by(&failed, &seen, Component::ControllerManager, status).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopping_one_threaded_component_leaves_the_others_running() {
        let (mut members, _seen, _failed) = members();
        let (ended_tx, mut ended_rx) = tokio::sync::mpsc::unbounded_channel();
        for component in [Component::Scheduler, Component::Kubelet] {
            let ended = ended_tx.clone();
            members
                .spawn_thread(component, move |shutdown| async move {
                    shutdown.cancelled().await;
                    let _ = ended.send(component);
                    Ok::<(), String>(())
                })
                .unwrap();
        }
        members.stop_component(Component::Scheduler).await;
        assert_eq!(ended_rx.recv().await, Some(Component::Scheduler));
        assert_eq!(members.components(), vec![Component::Kubelet]);
        members.stop().await.unwrap();
        assert_eq!(ended_rx.recv().await, Some(Component::Kubelet));
    }
}
