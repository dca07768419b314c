//! The containers of a pod whose sandbox is up, one by one: init containers in order, sidecars,
//! regular containers, their exits, restarts with back-off, probes, and the end of the pod.
//! A pure function of the pod, the kubelet's memory, and `now`, as [`crate::stages`] is.
//!
//! Mirrors `computePodActions` in `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (which
//! containers to start, which to kill, whether the pod is done), the crash back-off of
//! `doBackOff` in the same file (client-go's `flowcontrol.Backoff`), and the probe-driven
//! kills of `prober/`.
//!
//! ```text
//!   init[0] ──exit 0──▶ init[1] ──exit 0──▶ sidecar (restartPolicy: Always) ──started──▶ regular containers
//!      │ exit ≠ 0                                   keeps running ...                     │ exit
//!      ▼                                                                                   ▼
//!   restartPolicy Never: pod Failed              restart? (pod restartPolicy; sidecars: always)
//!   else back-off and run it again                 yes: 1st at once, then 10 s, 20 s ... 5 min
//!                                                  no:  Exited; all regular containers Exited
//!                                                       ⇒ the pod is done, sidecars are stopped
//! ```
//!
//! Crash back-off, as the kubelet does it: the first exit restarts the container at once and
//! opens a window of `backoff_base`; each later exit waits out the window
//! (`CrashLoopBackOff`), and each restart doubles it up to `backoff_max`. A container that
//! exits more than `2 × backoff_max` after the last restart starts over (10 min with the
//! Kubernetes values: "reset after 10 minutes of running").
//!
//! A container's process may also end outside of its plan, reported as a [`ProcessExit`]
//! (`kill 1` or `exit` in its shell): it ends then with that code, and the rules above apply
//! as for any exit. Ephemeral containers (`kubectl debug`) are pulled and started whenever
//! they are added ([`crate::ephemeral`]) and never restarted.
//!
//! Simplifications: every image of the pod's own containers is pulled before the first one
//! starts (the kubelet pulls each container's image just before starting it); a container
//! killed for a failed liveness or startup probe stops at once with exit code 137 (the kubelet
//! gives it its grace period); sidecars and ephemeral containers stopped at the end of a pod
//! exit 0 at once.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::annotations::PodOverrides;
use crate::config::StageConfig;
use crate::probes::{Timing, failure_output};
use crate::stages::{PodEvent, Termination, after, container_id};

pub use crate::plan::{Ending, Kind, Plan, Timeline, plans, timeline};

/// Where one container is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not created yet (waiting for the init containers before it).
    Waiting,
    /// Running since `since`; `started` once its startup probe passed (at once without one).
    Running {
        /// When this run started.
        since: Timestamp,
        /// Whether the startup probe passed (the status' `started`).
        started: bool,
    },
    /// Exited, to be restarted at `until` (`CrashLoopBackOff`).
    BackOff {
        /// When the back-off ends.
        until: Timestamp,
    },
    /// Exited for good (its termination is the memory's `last`).
    Exited,
    /// An ephemeral container whose image is being pulled (`pull`), or is already on the node,
    /// since `since`; `failures` pulls failed before this one ([`crate::ephemeral`]).
    Pulling {
        /// When the pull (or the wait for the start) began.
        since: Timestamp,
        /// Whether the image is pulled (not already present).
        pull: bool,
        /// Failed pulls in a row before this one.
        failures: u32,
    },
    /// An ephemeral container whose image pull failed at `since` (`ErrImagePull`, then
    /// `ImagePullBackOff` once `backing_off`).
    PullFailed {
        /// When the pull failed.
        since: Timestamp,
        /// Failed pulls in a row.
        failures: u32,
        /// Whether `ImagePullBackOff` was reported.
        backing_off: bool,
    },
}

/// A container's process that ended by itself, outside of what its plan foresaw: `kill 1` or
/// `exit` in its shell through `kubectl exec`/`attach` (the kubelet learns it from the
/// runtime's container events, `PLEG`). Reported to the pod workers
/// ([`crate::pod_workers::PodWorkers::process_exited`]) and applied at the next sync as an exit
/// at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessExit {
    /// The container's name.
    pub container: String,
    /// Which run ended (its `restartCount` then): an exit of an earlier run is ignored.
    pub restarts: i32,
    /// The exit code the runtime reports (`128 + signal` for a process a signal killed).
    pub exit_code: i32,
    /// When the process ended.
    pub at: Timestamp,
}

/// The kubelet's `flowcontrol.Backoff` entry for one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashBackOff {
    /// The current back-off window.
    pub window: Duration,
    /// When the entry was last moved (`lastUpdate`).
    pub updated: Timestamp,
}

/// What the kubelet remembers of one container (the runtime's view of it).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerMemory {
    /// Its state.
    pub state: State,
    /// `restartCount`.
    pub restarts: i32,
    /// How the latest run ended (`lastState.terminated`, or `state.terminated` once Exited).
    pub last: Option<Box<Termination>>,
    /// How the run before it ended (`lastState.terminated` once Exited).
    pub previous: Option<Box<Termination>>,
    /// Its crash back-off; none until it first exited.
    pub backoff: Option<CrashBackOff>,
    /// Whether the current run's readiness failure was reported (`Unhealthy`).
    pub unready_reported: bool,
}

impl ContainerMemory {
    /// A container not created yet.
    pub fn waiting() -> Self {
        ContainerMemory {
            state: State::Waiting,
            restarts: 0,
            last: None,
            previous: None,
            backoff: None,
            unready_reported: false,
        }
    }
}

/// What one sync of the containers reads besides their memory.
pub struct Ctx<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// Its containers' plans, in memory order.
    pub plans: &'a [Plan<'a>],
    /// The stage timings.
    pub config: &'a StageConfig,
    /// The pod's IP (probe failure messages name it).
    pub pod_ip: &'a str,
    /// The pod's annotation knobs (image pulls of ephemeral containers read them).
    pub overrides: &'a PodOverrides,
    /// Whether an image is already on the node.
    pub present: &'a dyn Fn(&str) -> bool,
    /// Processes that ended by themselves ([`ProcessExit`]).
    pub exits: &'a [ProcessExit],
}

impl Ctx<'_> {
    fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    fn restart_policy(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always")
    }

    /// `NAME_NAMESPACE(UID)`, the kubelet's `format.Pod`.
    pub fn pod_ref(&self) -> String {
        format!(
            "{}_{}({})",
            self.pod.metadata.name.as_deref().unwrap_or_default(),
            self.pod.metadata.namespace.as_deref().unwrap_or("default"),
            self.uid()
        )
    }

    pub(crate) fn event(
        &self,
        i: usize,
        warning: bool,
        reason: &'static str,
        message: String,
    ) -> PodEvent {
        let plan = &self.plans[i];
        PodEvent {
            warning,
            reason,
            message,
            container: Some(plan.container.name.clone()),
            init: matches!(plan.kind, Kind::Init | Kind::Sidecar),
            ephemeral: plan.kind == Kind::Ephemeral,
        }
    }
}

/// What [`advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Nothing more is due before this time (none: nothing until the pod changes).
    Wait(Option<Timestamp>),
    /// The pod is done at this time: no container will run again (phase Succeeded/Failed).
    Finished(Timestamp),
}

/// The sandbox is up at `at`: remember every container as not created yet and start the
/// first ones (the first init container, or every regular container).
pub fn begin(
    ctx: &Ctx<'_>,
    memory: &mut Vec<ContainerMemory>,
    events: &mut Vec<PodEvent>,
    at: Timestamp,
) {
    memory.clear();
    memory.resize(ctx.plans.len(), ContainerMemory::waiting());
    start_startable(ctx, memory, events, at);
    crate::ephemeral::admit(ctx, memory, events, at);
}

/// One thing due for one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Exit(Ending),
    Started,
    Unready,
    Restart,
    Pull(crate::ephemeral::PullStep),
}

/// Advances the containers as far as `now`, taking what is due in time order, each stamped
/// with the time it was due; the images ephemeral containers pulled go to `pulled`.
pub fn advance(
    ctx: &Ctx<'_>,
    memory: &mut [ContainerMemory],
    events: &mut Vec<PodEvent>,
    pulled: &mut Vec<String>,
    now: Timestamp,
) -> Advance {
    // Each round takes one transition; a crash loop moves forward by at least the back-off
    // base, so this only bounds a pathological configuration (the rest is done next call).
    for _ in 0..256 {
        let mut next: Option<(Timestamp, usize, Due)> = None;
        // The next change of a running container's status alone (started, Ready).
        let mut status_change: Option<Timestamp> = None;
        for (i, (m, plan)) in memory.iter().zip(ctx.plans).enumerate() {
            let due = match m.state {
                State::Running { since, started } => {
                    let tl = timeline(plan, since);
                    for t in [tl.started, tl.ready, tl.unready].into_iter().flatten() {
                        if t > now && status_change.is_none_or(|c| t < c) {
                            status_change = Some(t);
                        }
                    }
                    let exit = tl.exit.map(|(t, why)| (t, Due::Exit(why)));
                    let start = tl.started.filter(|_| !started).map(|t| (t, Due::Started));
                    let unready = tl
                        .unready
                        .filter(|_| !m.unready_reported)
                        .map(|t| (t, Due::Unready));
                    let ended = ctx
                        .exits
                        .iter()
                        .filter(|e| e.container == plan.container.name && e.restarts == m.restarts)
                        .map(|e| (e.at.max(since), Due::Exit(Ending::Exits(e.exit_code))))
                        .min_by_key(|(t, _)| *t);
                    // The earliest; on a tie the one listed first.
                    [start, unready, ended, exit].into_iter().flatten().fold(
                        None,
                        |best: Option<(Timestamp, Due)>, d| match best {
                            Some(b) if b.0 <= d.0 => Some(b),
                            _ => Some(d),
                        },
                    )
                }
                State::BackOff { until } => Some((until, Due::Restart)),
                State::Pulling { .. } | State::PullFailed { .. } => {
                    crate::ephemeral::next_pull_step(ctx, i, m.state)
                        .map(|(t, step)| (t, Due::Pull(step)))
                }
                State::Waiting | State::Exited => None,
            };
            if let Some((t, d)) = due
                && next.is_none_or(|(n, _, _)| t < n)
            {
                next = Some((t, i, d));
            }
        }
        let Some((at, i, due)) = next.filter(|(t, _, _)| *t <= now) else {
            let wake = match (next.map(|n| n.0), status_change) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            return Advance::Wait(wake);
        };
        match due {
            Due::Started => {
                if let State::Running { since, .. } = memory[i].state {
                    memory[i].state = State::Running {
                        since,
                        started: true,
                    };
                }
            }
            Due::Unready => {
                memory[i].unready_reported = true;
                let probe = ctx.plans[i].container.readiness_probe.as_ref();
                if let Some(probe) = probe {
                    let output = failure_output(probe, ctx.pod_ip);
                    for _ in 0..Timing::of(probe).failure_threshold {
                        events.push(ctx.event(
                            i,
                            true,
                            "Unhealthy",
                            format!("Readiness probe failed: {output}"),
                        ));
                    }
                }
            }
            Due::Restart => {
                if let Some(b) = memory[i].backoff.as_mut() {
                    b.window = b.window.saturating_mul(2).min(ctx.config.backoff_max);
                    b.updated = at;
                }
                start(ctx, i, &mut memory[i], events, at, true);
            }
            Due::Exit(why) => exit(ctx, i, &mut memory[i], events, at, why),
            Due::Pull(step) => {
                crate::ephemeral::take_pull_step(ctx, i, &mut memory[i], events, pulled, at, step);
            }
        }
        if finished(ctx, memory) {
            stop_sidecars(ctx, memory, events, at);
            return Advance::Finished(at);
        }
        start_startable(ctx, memory, events, at);
    }
    Advance::Wait(Some(now))
}

pub(crate) fn start(
    ctx: &Ctx<'_>,
    i: usize,
    m: &mut ContainerMemory,
    events: &mut Vec<PodEvent>,
    at: Timestamp,
    restart: bool,
) {
    let c = &ctx.plans[i].container;
    if restart {
        m.restarts += 1;
        events.push(ctx.event(
            i,
            false,
            "Pulled",
            format!(
                "Container image \"{}\" already present on machine",
                c.image.as_deref().unwrap_or_default()
            ),
        ));
    }
    events.push(ctx.event(
        i,
        false,
        "Created",
        format!("Created container: {}", c.name),
    ));
    events.push(ctx.event(i, false, "Started", format!("Started container {}", c.name)));
    m.unready_reported = false;
    m.state = State::Running {
        since: at,
        started: c.startup_probe.is_none(),
    };
}

/// Whether a container that exited with `code` is started again (`ShouldContainerBeRestarted`
/// and, for init containers, `computeInitContainerActions`).
pub fn restarts_after(kind: Kind, pod_policy: &str, code: i32) -> bool {
    match (kind, pod_policy) {
        (Kind::Ephemeral, _) => false,
        (Kind::Sidecar, _) => true,
        (_, "Never") => false,
        (Kind::Init, _) | (Kind::Regular, "OnFailure") => code != 0,
        (Kind::Regular, _) => true,
    }
}

fn exit(
    ctx: &Ctx<'_>,
    i: usize,
    m: &mut ContainerMemory,
    events: &mut Vec<PodEvent>,
    at: Timestamp,
    why: Ending,
) {
    let State::Running { since, .. } = m.state else {
        return;
    };
    let plan = &ctx.plans[i];
    let name = &plan.container.name;
    let policy = ctx.restart_policy();
    let probe = match why {
        Ending::Exits(_) => None,
        Ending::Liveness => Some(("Liveness", "liveness", &plan.container.liveness_probe)),
        Ending::Startup => Some(("Startup", "startup", &plan.container.startup_probe)),
    };
    if let Some((kind, lower, Some(probe))) = probe {
        let timing = Timing::of(probe);
        let output = failure_output(probe, ctx.pod_ip);
        for _ in 0..timing.failure_threshold {
            events.push(ctx.event(
                i,
                true,
                "Unhealthy",
                format!("{kind} probe failed: {output}"),
            ));
        }
        let restarted = if policy == "Never" && plan.kind != Kind::Sidecar {
            ""
        } else {
            ", will be restarted"
        };
        events.push(ctx.event(
            i,
            false,
            "Killing",
            format!("Container {name} failed {lower} probe{restarted}"),
        ));
    }
    let code = match why {
        Ending::Exits(code) => code,
        // Killed: SIGKILL after the (here empty) grace period.
        Ending::Liveness | Ending::Startup => 137,
    };
    m.previous = m.last.take();
    m.last = Some(Box::new(Termination {
        exit_code: code,
        reason: if code == 0 { "Completed" } else { "Error" },
        started_at: since,
        finished_at: at,
        container_id: container_id(ctx.uid(), name, m.restarts),
    }));
    if !restarts_after(plan.kind, policy, code) {
        m.state = State::Exited;
        return;
    }
    // `doBackOff`: no entry (or an expired one) restarts at once and opens the window.
    let config = ctx.config;
    let expired = |b: &CrashBackOff| {
        at.duration_since(b.updated)
            > jiff::SignedDuration::try_from(config.backoff_max.saturating_mul(2))
                .unwrap_or(jiff::SignedDuration::MAX)
    };
    match m.backoff {
        Some(b) if !expired(&b) => {
            events.push(ctx.event(
                i,
                true,
                "BackOff",
                format!(
                    "Back-off restarting failed container {name} in pod {}",
                    ctx.pod_ref()
                ),
            ));
            m.state = State::BackOff {
                until: after(at, b.window),
            };
        }
        _ => {
            m.backoff = Some(CrashBackOff {
                window: config.backoff_base,
                updated: at,
            });
            start(ctx, i, m, events, at, true);
        }
    }
}

/// Starts what may start at `at`: the first init container not done yet (a sidecar is done
/// once started), or, when every init container is, all regular containers not started.
fn start_startable(
    ctx: &Ctx<'_>,
    memory: &mut [ContainerMemory],
    events: &mut Vec<PodEvent>,
    at: Timestamp,
) {
    let regular_started = memory
        .iter()
        .zip(ctx.plans)
        .any(|(m, p)| p.kind == Kind::Regular && m.state != State::Waiting);
    if !regular_started {
        for (i, m) in memory.iter_mut().enumerate() {
            if ctx.plans[i].kind == Kind::Regular {
                break;
            }
            if m.state == State::Waiting {
                // A sidecar without a startup probe is started at once and lets the next go.
                start(ctx, i, m, events, at, false);
            }
            let succeeded = m.last.as_ref().is_some_and(|t| t.exit_code == 0);
            let done = match (ctx.plans[i].kind, m.state) {
                (Kind::Init, State::Exited) => succeeded,
                (Kind::Sidecar, State::Running { started, .. }) => started,
                _ => false,
            };
            if !done {
                return;
            }
        }
    }
    for (i, m) in memory.iter_mut().enumerate() {
        if ctx.plans[i].kind == Kind::Regular && m.state == State::Waiting {
            start(ctx, i, m, events, at, false);
        }
    }
}

/// Whether the pod is done: an init container failed for good, or every regular container
/// exited for good (`computePodActions`' `KillPod` when nothing is left to start or keep).
fn finished(ctx: &Ctx<'_>, memory: &[ContainerMemory]) -> bool {
    let mut regular = memory
        .iter()
        .zip(ctx.plans)
        .filter(|(_, p)| p.kind == Kind::Regular)
        .peekable();
    let init_failed = memory.iter().zip(ctx.plans).any(|(m, p)| {
        p.kind == Kind::Init
            && m.state == State::Exited
            && m.last.as_ref().is_some_and(|t| t.exit_code != 0)
    });
    init_failed || (regular.peek().is_some() && regular.all(|(m, _)| m.state == State::Exited))
}

/// The end of a finished pod: running sidecars (and ephemeral containers) are stopped (last
/// first), restarting ones stay down, an ephemeral container still pulling never starts.
fn stop_sidecars(
    ctx: &Ctx<'_>,
    memory: &mut [ContainerMemory],
    events: &mut Vec<PodEvent>,
    at: Timestamp,
) {
    for i in (0..memory.len()).rev() {
        let name = &ctx.plans[i].container.name;
        let m = &mut memory[i];
        match m.state {
            State::Running { since, .. } => {
                events.push(ctx.event(i, false, "Killing", format!("Stopping container {name}")));
                m.previous = m.last.take();
                m.last = Some(Box::new(Termination {
                    exit_code: 0,
                    reason: "Completed",
                    started_at: since,
                    finished_at: at,
                    container_id: container_id(ctx.uid(), name, m.restarts),
                }));
                m.state = State::Exited;
            }
            State::BackOff { .. } => m.state = State::Exited,
            State::Pulling { .. } | State::PullFailed { .. } => m.state = State::Waiting,
            State::Waiting | State::Exited => {}
        }
    }
}

#[cfg(test)]
#[path = "containers_exits_tests.rs"]
mod exits_tests;
#[cfg(test)]
#[path = "containers_tests.rs"]
mod tests;
