//! Ephemeral containers (`kubectl debug`): an image pull and a start of their own, whenever
//! one is added to a pod whose sandbox is up. A pure part of [`crate::containers`].
//!
//! Mirrors `computePodActions` (`EphemeralContainersToStart`: every ephemeral container with no
//! status yet, even before the init containers are done) and `startContainer` in
//! `pkg/kubelet/kuberuntime/` (pull, create, start, with the same Events as any container,
//! `involvedObject.fieldPath: spec.ephemeralContainers{name}`).
//!
//! ```text
//!   added ──Pulling "Pulling image"──▶ (pull delay) ──Pulled, Created, Started──▶ Running ──exit──▶ Exited
//!     │ image already on the node: Pulled "already present on machine" at once       (never restarted)
//!     ▼ bad image: Failed (ErrImagePull) ──sync──▶ BackOff (ImagePullBackOff) ──back-off──▶ Pulling again
//! ```
//!
//! Once running, an ephemeral container is a container like the others for exits, signals and
//! the pod's deletion ([`crate::containers`], [`crate::termination`]), except that it is never
//! restarted and never Ready.

use jiff::Timestamp;

use crate::containers::{ContainerMemory, Ctx, Kind, State, start};
use crate::stages::{PodEvent, after, backoff, needs_pull};

/// What is due next for an ephemeral container's image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStep {
    /// The image is there (pulled, or already present): create and start the container.
    Pulled,
    /// The pull failed (`ErrImagePull`).
    Failed,
    /// The kubelet's next sync reports `ImagePullBackOff`.
    BackOff,
    /// The back-off is over: pull again.
    Retry,
}

/// Remembers ephemeral containers added since the last sync (the plans the memory does not
/// have yet) and starts the image pull of every one not started, at `at`.
pub fn admit(
    ctx: &Ctx<'_>,
    memory: &mut Vec<ContainerMemory>,
    events: &mut Vec<PodEvent>,
    at: Timestamp,
) {
    if memory.len() < ctx.plans.len() {
        memory.resize(ctx.plans.len(), ContainerMemory::waiting());
    }
    for (i, m) in memory.iter_mut().enumerate() {
        if ctx.plans[i].kind != Kind::Ephemeral || m.state != State::Waiting {
            continue;
        }
        let c = &ctx.plans[i].container;
        let image = c.image.as_deref().unwrap_or_default();
        let pull = needs_pull(c, ctx.overrides, ctx.present);
        events.push(if pull {
            ctx.event(i, false, "Pulling", format!("Pulling image \"{image}\""))
        } else {
            ctx.event(
                i,
                false,
                "Pulled",
                format!("Container image \"{image}\" already present on machine"),
            )
        });
        m.state = State::Pulling {
            since: at,
            pull,
            failures: 0,
        };
    }
}

/// When the next step of container `i`'s image is due, and which (none unless it is pulling
/// or backing off).
pub fn next_pull_step(ctx: &Ctx<'_>, i: usize, state: State) -> Option<(Timestamp, PullStep)> {
    let config = ctx.config;
    let image = ctx.plans[i].container.image.as_deref().unwrap_or_default();
    match state {
        State::Pulling { since, pull, .. } => {
            let pulled = if pull {
                after(since, ctx.overrides.pull_delay.unwrap_or(config.pull_delay))
            } else {
                since
            };
            if ctx.overrides.pull_fails(image) {
                Some((pulled, PullStep::Failed))
            } else {
                Some((after(pulled, config.start_delay), PullStep::Pulled))
            }
        }
        State::PullFailed {
            since,
            failures,
            backing_off,
        } => {
            let sync = after(since, config.pull_retry_sync);
            let retry = after(
                since,
                backoff(failures, config.backoff_base, config.backoff_max),
            );
            if !backing_off && sync < retry {
                Some((sync, PullStep::BackOff))
            } else {
                Some((retry, PullStep::Retry))
            }
        }
        _ => None,
    }
}

/// Takes `step` for container `i` at `at`; the image pulled goes to `pulled`.
pub fn take_pull_step(
    ctx: &Ctx<'_>,
    i: usize,
    m: &mut ContainerMemory,
    events: &mut Vec<PodEvent>,
    pulled: &mut Vec<String>,
    at: Timestamp,
    step: PullStep,
) {
    let image = ctx.plans[i].container.image.clone().unwrap_or_default();
    match (step, m.state) {
        (PullStep::Pulled, State::Pulling { pull, .. }) => {
            if pull {
                let delay = ctx.overrides.pull_delay.unwrap_or(ctx.config.pull_delay);
                let took = format!("{:.3}s", delay.as_secs_f64());
                events.push(ctx.event(
                    i,
                    false,
                    "Pulled",
                    format!(
                        "Successfully pulled image \"{image}\" in {took} ({took} including waiting). Image size: 0 bytes."
                    ),
                ));
                pulled.push(image);
            }
            start(ctx, i, m, events, at, false);
        }
        (PullStep::Failed, State::Pulling { failures, .. }) => {
            events.push(ctx.event(
                i,
                true,
                "Failed",
                format!(
                    "Failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": not found"
                ),
            ));
            events.push(ctx.event(i, true, "Failed", "Error: ErrImagePull".into()));
            m.state = State::PullFailed {
                since: at,
                failures: failures + 1,
                backing_off: false,
            };
        }
        (
            PullStep::BackOff,
            State::PullFailed {
                since, failures, ..
            },
        ) => {
            events.push(ctx.event(
                i,
                false,
                "BackOff",
                format!("Back-off pulling image \"{image}\""),
            ));
            m.state = State::PullFailed {
                since,
                failures,
                backing_off: true,
            };
        }
        (PullStep::Retry, State::PullFailed { failures, .. }) => {
            events.push(ctx.event(i, false, "Pulling", format!("Pulling image \"{image}\"")));
            m.state = State::Pulling {
                since: at,
                pull: true,
                failures,
            };
        }
        _ => {}
    }
}
