//! How each container of a pod is expected to behave, read from its spec and the pod's
//! annotations: which list it is in (init, sidecar, regular), how its process runs and exits
//! ([`crate::command`], or an annotation), and the timeline of one run: when its startup
//! probe passes, when it is Ready and no longer Ready, when and why it stops by itself
//! ([`crate::probes`]). Nothing here is remembered: the plan is read again at every sync and
//! the timeline follows from the run's start, so a plain container (no command, no probe, no
//! knob) costs next to nothing.
//!
//! No single Kubernetes file: the kubelet learns these from the container runtime and its
//! prober workers as they happen; [`crate::containers`] (`computePodActions`) acts on them.

use std::borrow::Cow;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, Probe};

use crate::annotations::{ContainerOverrides, Failure, PodOverrides};
use crate::command::{self, Run};
use crate::config::StageConfig;
use crate::probes::Timing;
use crate::stages::after;

/// Which list a container is in and how it behaves there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `spec.initContainers`: runs to completion before the next one starts.
    Init,
    /// An init container with `restartPolicy: Always`: started in order, then keeps running
    /// beside the regular containers, always restarted.
    Sidecar,
    /// `spec.containers`.
    Regular,
    /// `spec.ephemeralContainers` (`kubectl debug`): its image is pulled and it is started
    /// whenever it is added to a pod whose sandbox is up; never restarted, never Ready, and
    /// no part of the pod's phase or conditions.
    Ephemeral,
}

/// How one container of the pod is expected to behave: read from its spec and the pod's
/// annotations at every sync (cheap: a plain container has no command, probe or knob).
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// The container (an ephemeral container converted to one, as the kubelet converts it).
    pub container: Cow<'a, Container>,
    /// Which list it is in.
    pub kind: Kind,
    /// How its process runs and exits.
    pub run: Run,
    /// Its annotation knobs (pod-wide ones overlaid by its own).
    pub knobs: ContainerOverrides,
    /// Ready this long after the start, whatever the readiness probe (an annotation).
    pub ready_after: Option<Duration>,
    /// Ready without a readiness probe this long after the start; none: never Ready.
    pub ready_delay: Option<Duration>,
}

/// The plans of the pod's containers: init containers, regular ones, then ephemeral ones, in
/// spec order (the order of the kubelet's memory too; ephemeral containers are only ever
/// added, at the end).
pub fn plans<'a>(pod: &'a Pod, overrides: &PodOverrides, config: &StageConfig) -> Vec<Plan<'a>> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let init = spec.init_containers.iter().flatten().map(|c| {
        let kind = if c.restart_policy.as_deref() == Some("Always") {
            Kind::Sidecar
        } else {
            Kind::Init
        };
        (c, kind)
    });
    let regular = spec.containers.iter().map(|c| (c, Kind::Regular));
    let mut out: Vec<Plan<'a>> = init
        .chain(regular)
        .map(|(c, kind)| plan(Cow::Borrowed(c), kind, overrides, config))
        .collect();
    out.extend(spec.ephemeral_containers.iter().flatten().map(|e| {
        plan(
            Cow::Owned(ephemeral_container(e)),
            Kind::Ephemeral,
            overrides,
            config,
        )
    }));
    out
}

/// An ephemeral container as a container (`EphemeralContainerCommon` has the same fields).
pub fn ephemeral_container(e: &EphemeralContainer) -> Container {
    apimachinery::ephemeral_container::as_container(e)
}

/// [`plan`] for the tests of other modules.
#[cfg(test)]
pub(crate) fn plan_for_tests<'a>(
    c: &'a Container,
    kind: Kind,
    overrides: &PodOverrides,
    config: &StageConfig,
) -> Plan<'a> {
    plan(Cow::Borrowed(c), kind, overrides, config)
}

fn plan<'a>(
    c: Cow<'a, Container>,
    kind: Kind,
    overrides: &PodOverrides,
    config: &StageConfig,
) -> Plan<'a> {
    let own = overrides.container(&c.name);
    let mut knobs = overrides.all.clone();
    if let Some(own) = own {
        let or = |a: Option<Duration>, b: Option<Duration>| a.or(b);
        knobs = ContainerOverrides {
            run_for: own.run_for,
            exit_code: own.exit_code,
            ready_after: own.ready_after,
            liveness_fails_after: or(own.liveness_fails_after, knobs.liveness_fails_after),
            readiness_fails_after: or(own.readiness_fails_after, knobs.readiness_fails_after),
            startup_fails_after: or(own.startup_fails_after, knobs.startup_fails_after),
            stop_after: or(own.stop_after, knobs.stop_after),
        };
    }
    let regular = kind == Kind::Regular;
    let from_command = || command::run_of(c.command.as_deref(), c.args.as_deref());
    let run = if knobs.run_for.is_some() || knobs.exit_code.is_some() {
        let (after, code) = match from_command() {
            Run::Exits { after, exit_code } => (Some(after), exit_code),
            Run::Forever => (None, 0),
        };
        Run::Exits {
            after: knobs.run_for.or(after).unwrap_or(config.exit_after),
            exit_code: knobs.exit_code.unwrap_or(code),
        }
    } else if regular && (overrides.run_for.is_some() || pod_wide_exit(overrides).is_some()) {
        Run::Exits {
            after: overrides.run_for.unwrap_or(config.exit_after),
            exit_code: pod_wide_exit(overrides).unwrap_or(0),
        }
    } else {
        from_command()
    };
    let never_ready =
        (regular && overrides.fail == Some(Failure::NeverReady)) || kind == Kind::Ephemeral;
    Plan {
        container: c,
        kind,
        run,
        ready_after: knobs
            .ready_after
            .or(if regular { overrides.ready_after } else { None }),
        ready_delay: (!never_ready).then_some(config.ready_delay),
        knobs,
    }
}

fn pod_wide_exit(overrides: &PodOverrides) -> Option<i32> {
    match overrides.fail {
        Some(Failure::Crash) => Some(1),
        Some(Failure::Exit(code)) => Some(code),
        _ => None,
    }
}

/// Why a running container stops by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its process exits with this code.
    Exits(i32),
    /// Its liveness probe failed `failureThreshold` times.
    Liveness,
    /// Its startup probe failed `failureThreshold` times.
    Startup,
}

/// The future of a container that started at a given time, from its plan: all of it follows
/// from the start, the probe timings and the annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// When the startup probe passes (the start, without one); none: never.
    pub started: Option<Timestamp>,
    /// When it becomes Ready; none: never.
    pub ready: Option<Timestamp>,
    /// When its readiness probe has failed enough to make it not Ready again.
    pub unready: Option<Timestamp>,
    /// When and why it stops by itself; none: it runs until the pod ends.
    pub exit: Option<(Timestamp, Ending)>,
}

impl Timeline {
    /// Whether it is Ready at `now` (and still running).
    pub fn ready_at(&self, now: Timestamp) -> bool {
        self.ready.is_some_and(|r| r <= now)
            && self.unready.is_none_or(|u| now < u)
            && self.exit.is_none_or(|(e, _)| now < e)
    }
}

fn timing(probe: Option<&Probe>) -> Option<Timing> {
    probe.map(Timing::of)
}

/// The timeline of a container that started at `since`.
pub fn timeline(plan: &Plan<'_>, since: Timestamp) -> Timeline {
    let c = &*plan.container;
    let knobs = &plan.knobs;
    let first = |t: &Timing, from: Timestamp| after(since, t.initial_delay).max(from);
    let startup = timing(c.startup_probe.as_ref());
    let started = match &startup {
        None => Some(since),
        Some(t) => t.passes_at(since, first(t, since), knobs.startup_fails_after),
    };
    let startup_kill = match (&startup, started) {
        (Some(t), None) => t.fails_at(since, first(t, since), knobs.startup_fails_after),
        _ => None,
    };
    let liveness_kill = timing(c.liveness_probe.as_ref()).and_then(|t| {
        let from = started?;
        t.fails_at(since, first(&t, from), knobs.liveness_fails_after)
    });
    let readiness = timing(c.readiness_probe.as_ref());
    let ready = match (plan.ready_after, &readiness) {
        (Some(d), _) => started.map(|s| after(since, d).max(s)),
        (None, Some(t)) => {
            started.and_then(|s| t.passes_at(since, first(t, s), knobs.readiness_fails_after))
        }
        (None, None) => plan.ready_delay.and_then(|d| started.map(|s| after(s, d))),
    }
    .filter(|_| plan.ready_delay.is_some());
    let unready = match (plan.ready_after, &readiness) {
        (None, Some(t)) => {
            started.and_then(|s| t.fails_at(since, first(t, s), knobs.readiness_fails_after))
        }
        _ => None,
    };
    let mut exit = match plan.run {
        Run::Exits {
            after: d,
            exit_code,
        } => Some((after(since, d), Ending::Exits(exit_code))),
        Run::Forever => None,
    };
    for (at, why) in [
        (startup_kill, Ending::Startup),
        (liveness_kill, Ending::Liveness),
    ] {
        if let Some(at) = at
            && exit.is_none_or(|(e, _)| at < e)
        {
            exit = Some((at, why));
        }
    }
    Timeline {
        started,
        ready,
        unready,
        exit,
    }
}
