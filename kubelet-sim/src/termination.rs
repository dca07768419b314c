//! Graceful termination of a running pod's containers: the `Killing` events, the preStop
//! hooks, SIGTERM, and SIGKILL when the grace period ends; regular containers first, sidecars
//! once they are gone. Mirrors `killPodWithSyncResult` / `killContainersWithSyncResult` and
//! `killContainer` (with `executePreStopHook`) in
//! `pkg/kubelet/kuberuntime/kuberuntime_container.go`.
//!
//! ```text
//!   DELETE (grace G) ─▶ Killing "Stopping container app" ─▶ preStop (exec `sleep 3`: 3 s)
//!     ─▶ SIGTERM ─▶ exits after `miniplane.dev/stop-after` (exit 0)
//!                   or is killed when G ends (exit 137)
//!     ─▶ then the sidecars, the same way, in reverse order ─▶ pod deleted (grace 0)
//! ```
//!
//! The grace period is the DELETE's (else `terminationGracePeriodSeconds`, else 30 s), capped by
//! [`crate::StageConfig::max_termination_grace`]. Simplification: a preStop hook cannot fail
//! (no `FailedPreStopHook` event).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;

use crate::command::{self, Run};
use crate::containers::{ContainerMemory, Ctx, Kind, Plan, State};
use crate::stages::{PodEvent, after};

/// How long a container's preStop hook takes: an `exec` hook as long as its command runs
/// ([`crate::command`]; one that never ends takes the whole grace period), a `sleep` hook its
/// seconds, an HTTP or TCP hook nothing.
pub fn pre_stop(c: &Container) -> Duration {
    let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) else {
        return Duration::ZERO;
    };
    if let Some(exec) = &hook.exec {
        return match command::run_of(exec.command.as_deref(), None) {
            Run::Exits { after, .. } => after,
            Run::Forever => Duration::MAX,
        };
    }
    if let Some(sleep) = &hook.sleep {
        return Duration::from_secs(u64::try_from(sleep.seconds).unwrap_or(0));
    }
    Duration::ZERO
}

/// When each running container stops after deletion began at `since` with the grace period
/// ending at `grace_end` (`killContainersWithSyncResult`: regular containers first, then the
/// sidecars once they are gone): the preStop hook, then SIGTERM, then the container exits
/// after its `stop-after` knob, or is killed (exit 137) at `grace_end` if it has none or it
/// comes later. None for a container that is not running.
pub fn stop_times(
    plans: &[Plan<'_>],
    memory: &[ContainerMemory],
    since: Timestamp,
    grace_end: Timestamp,
) -> Vec<Option<(Timestamp, i32)>> {
    let stop = |i: usize, from: Timestamp| {
        let plan = &plans[i];
        let own = plan
            .knobs
            .stop_after
            .and_then(|s| pre_stop(&plan.container).checked_add(s))
            .map(|d| after(from, d));
        match own {
            Some(t) if t <= grace_end => (t, 0),
            _ => (grace_end, 137),
        }
    };
    let running = |i: usize| matches!(memory.get(i).map(|m| m.state), Some(State::Running { .. }));
    let mut out: Vec<Option<(Timestamp, i32)>> = vec![None; plans.len()];
    let mut last_regular = since;
    for i in 0..plans.len() {
        if plans[i].kind != Kind::Sidecar && running(i) {
            let s = stop(i, since);
            last_regular = last_regular.max(s.0);
            out[i] = Some(s);
        }
    }
    for i in 0..plans.len() {
        if plans[i].kind == Kind::Sidecar && running(i) {
            out[i] = Some(stop(i, last_regular));
        }
    }
    out
}

/// The `Killing` events at the start of a graceful deletion: running regular containers, then
/// running sidecars in reverse order.
pub fn killing_events(ctx: &Ctx<'_>, memory: &[ContainerMemory]) -> Vec<PodEvent> {
    let running = |i: &usize| matches!(memory[*i].state, State::Running { .. });
    let regular = (0..memory.len()).filter(|i| ctx.plans[*i].kind != Kind::Sidecar);
    let sidecars = (0..memory.len())
        .rev()
        .filter(|i| ctx.plans[*i].kind == Kind::Sidecar);
    regular
        .chain(sidecars)
        .filter(running)
        .map(|i| {
            ctx.event(
                i,
                false,
                "Killing",
                format!("Stopping container {}", ctx.plans[i].container.name),
            )
        })
        .collect()
}
