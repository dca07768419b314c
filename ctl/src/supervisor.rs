//! The running components of a cluster: each one started as a task or a child process, watched
//! while it runs, and stopped in order.
//!
//! ```text
//!   spawn_task(apiserver) ─┐               stop():
//!   spawn_task(cm) ────────┤  Members        1. kubelet, scheduler, controller-manager
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
        let (token, reporter, failed, first_error) = (
            stop.clone(),
            self.reporter.clone(),
            self.failed.clone(),
            self.first_error.clone(),
        );
        let task = tokio::spawn(async move {
            let result = running.await;
            if token.is_cancelled() {
                if let Err(e) = result {
                    first_error.set(Error::component(component, e));
                }
                return;
            }
            let status = match result {
                Ok(()) => "returned".to_owned(),
                Err(e) => e.to_string(),
            };
            reporter.report(Progress::Exited {
                component,
                pid: None,
                status: status.clone(),
            });
            first_error.set(Error::component(component, format!("stopped: {status}")));
            failed.cancel();
        });
        self.members.push(Member {
            component,
            stop,
            task,
        });
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
