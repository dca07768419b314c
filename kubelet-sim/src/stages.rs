//! The pod lifecycle as a simulated kubelet reports it: a pure state machine.
//!
//! Mirrors what the kubelet's pod workers do for one pod (`pkg/kubelet/pod_workers.go`,
//! `kuberuntime/kuberuntime_manager.go` `SyncPod`, `images/image_manager.go` and the image
//! pull back-off), and what kwok's Stages declare
//! (`kustomize/stage/pod/`). Input: the pod, the kubelet's memory of it ([`PodMemory`]), the
//! node, `now` and the [`StageConfig`]; output: the next memory, the status to post, events
//! and when to be called again. No I/O, no clock.
//!
//! ```text
//!   New ──Pulling──▶ Creating ──(pull_delay+start_delay)──▶ Running ──every container done──▶ Completed
//!                      │  bad image                           │ (init containers, sidecars,     (Succeeded /
//!                      ▼                                      │  regular ones, restarts,         Failed)
//!        PullFailed (ErrImagePull) ──sync──▶ (ImagePullBackOff)│  probes: crate::containers)
//!                      └──back-off 10s,20s..5m──▶ Creating    ▼
//!   any stage ── deletionTimestamp ──▶ Terminating (Killing, preStop, SIGTERM) ──last container
//!                                      stopped, at most min(grace, cap)──▶ delete(grace 0)
//! ```
//!
//! The pod-level stages live here; what each container does once the sandbox is up (which
//! starts when, how it exits, whether it is restarted, ephemeral containers added on the way,
//! processes ended through the kubelet API: [`Runtime`]) is [`crate::containers`], and how long
//! a container runs comes from its command ([`crate::command`]) or annotations
//! ([`crate::annotations`]); stopping them on deletion is [`crate::termination`].
//!
//! A container whose image is already on the node (pulled there by an earlier pod) and whose
//! `imagePullPolicy` is not `Always` is not pulled: `Pulled` "already present on machine" at
//! once, no pull delay ([`needs_pull`]).
//!
//! Several transitions that are due at `now` are taken in one call (with zero delays a pod
//! goes from New to Running in one step); each is stamped with the time it was due, so the
//! result does not depend on how late the caller woke up.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};

use crate::annotations::PodOverrides;
use crate::config::StageConfig;
use crate::containers::{self, Advance, ContainerMemory, Ctx, Plan, ProcessExit};
use crate::pod_status::{NodeContext, render_status};
use crate::termination;

/// Where one pod is in the simulated lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Not seen by the kubelet yet.
    New,
    /// Pulling images and creating containers since `since` (`ContainerCreating`).
    Creating {
        /// When the pull started.
        since: Timestamp,
    },
    /// The last pull failed at `since` (`ErrImagePull`, then `ImagePullBackOff`).
    PullFailed {
        /// When the pull failed.
        since: Timestamp,
        /// Whether the kubelet has already reported `ImagePullBackOff`.
        backing_off: bool,
    },
    /// The sandbox is up; each container is where [`PodMemory::containers`] says.
    Running,
    /// Every container is done and none will run again (pod Succeeded or Failed).
    Completed,
    /// Deletion requested at `since`: containers are stopping until `until`.
    Terminating {
        /// When the kubelet began stopping the containers.
        since: Timestamp,
        /// When the grace period ends (what still runs then is killed).
        grace_end: Timestamp,
        /// When the last container is stopped.
        until: Timestamp,
    },
}

impl Stage {
    /// The stage's name, as traces and logs print it (`Creating` is what `kubectl get pods`
    /// shows as `ContainerCreating`).
    pub fn name(&self) -> &'static str {
        match self {
            Stage::New => "New",
            Stage::Creating { .. } => "ContainerCreating",
            Stage::PullFailed { .. } => "ErrImagePull",
            Stage::Running => "Running",
            Stage::Completed => "Completed",
            Stage::Terminating { .. } => "Terminating",
        }
    }
}

/// How the last container run ended (`lastState.terminated`, or `state.terminated` when done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// The exit code.
    pub exit_code: i32,
    /// `Completed` (0) or `Error`.
    pub reason: &'static str,
    /// When the container started.
    pub started_at: Timestamp,
    /// When it exited.
    pub finished_at: Timestamp,
    /// The container ID of that run.
    pub container_id: String,
}

/// What the kubelet remembers about a pod between syncs (the pod worker's state and the
/// runtime's view of the containers); the API holds only what the status shows.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMemory {
    /// The pod's UID (a new pod with the same name starts over).
    pub uid: String,
    /// The lifecycle stage.
    pub stage: Stage,
    /// Failed pulls in a row (drives the image back-off).
    pub pull_failures: u32,
    /// When the pod was first seen (`startTime`).
    pub start_time: Option<Timestamp>,
    /// The containers whose image is being pulled (the others' images were already on the
    /// node, or are not pulled: see [`needs_pull`]).
    pub pulling: Vec<String>,
    /// Each container once the sandbox is up: init containers, regular ones, then the
    /// ephemeral ones added so far, in spec order (empty before).
    pub containers: Vec<ContainerMemory>,
}

impl PodMemory {
    /// A pod the kubelet has not acted on yet.
    pub fn new(uid: impl Into<String>) -> Self {
        PodMemory {
            uid: uid.into(),
            stage: Stage::New,
            pull_failures: 0,
            start_time: None,
            pulling: Vec::new(),
            containers: Vec::new(),
        }
    }
}

/// `miniplane://` + 64 hex digits (containerd IDs are 64 hex digits), a hash of the inputs.
pub fn container_id(uid: &str, container: &str, run: i32) -> String {
    format!("miniplane://{}", hex64(&format!("{uid}/{container}/{run}")))
}

/// 64 hex digits from four FNV-1a hashes of `input` (deterministic; not cryptographic).
pub fn hex64(input: &str) -> String {
    (0u8..4)
        .map(|round| {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(round);
            for byte in input.bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            format!("{hash:016x}")
        })
        .collect()
}

/// An event the kubelet records about the pod (`pkg/kubelet/events/event.go` reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// `Pulling`, `Pulled`, `Created`, `Started`, `Killing`, `Failed`, `BackOff`.
    pub reason: &'static str,
    /// The human message, worded as the kubelet words it.
    pub message: String,
    /// The container it is about (`involvedObject.fieldPath: spec.containers{name}`).
    pub container: Option<String>,
    /// Whether that container is an init container (`spec.initContainers{name}`).
    pub init: bool,
    /// Whether that container is an ephemeral container (`spec.ephemeralContainers{name}`).
    pub ephemeral: bool,
}

/// The result of one [`step`].
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The kubelet's memory after the step.
    pub memory: PodMemory,
    /// The status to post, if it differs from the pod's current status.
    pub status: Option<PodStatus>,
    /// Events to record, in order.
    pub events: Vec<PodEvent>,
    /// When to call [`step`] again (none: nothing is due until the pod changes).
    pub wake_at: Option<Timestamp>,
    /// Delete the pod now (gracePeriodSeconds 0, UID precondition): termination finished.
    pub delete: bool,
    /// Images pulled successfully in this step: the node has them from now on.
    pub pulled: Vec<String>,
}

/// Whether the kubelet pulls `c`'s image before starting it (`images/image_manager.go`
/// `shouldPullImage`): always with `imagePullPolicy: Always`, else only when the image is not
/// on the node. The API server has defaulted the policy (`Always` for a `:latest` or untagged
/// image, else `IfNotPresent`); a pod without one is treated as `IfNotPresent`. An image whose
/// pull is made to fail (`miniplane.dev/fail: image-pull`, or a `doesnotexist` image) is never
/// on the node. Unlike Kubernetes, `Never` with the image absent pulls it (no
/// `ErrImageNeverPull`).
pub fn needs_pull(c: &Container, overrides: &PodOverrides, present: &dyn Fn(&str) -> bool) -> bool {
    let name = image(c);
    overrides.pull_fails(name) || c.image_pull_policy.as_deref() == Some("Always") || !present(name)
}

/// Back-off before attempt `n + 1` after `n` failures: `base · 2^(n-1)`, capped at `max`
/// (the kubelet's `flowcontrol.Backoff` with 10 s / 5 min: 10, 20, 40, 80, 160, 300, 300 ...).
pub fn backoff(failures: u32, base: Duration, max: Duration) -> Duration {
    let exponent = failures.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << exponent).min(max)
}

/// `t + d`, saturating at the end of time.
pub(crate) fn after(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// Every container of the pod, init containers first, in the order of
/// [`PodMemory::containers`], with whether it is an init container.
fn all_containers(pod: &Pod) -> impl Iterator<Item = (&Container, bool)> {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|c| (c, true));
    let regular = spec
        .map_or(&[][..], |s| s.containers.as_slice())
        .iter()
        .map(|c| (c, false));
    init.chain(regular)
}

/// The grace period the kubelet honours: the one the DELETE set, else the spec's, else 30 s.
fn grace_period(pod: &Pod) -> Duration {
    let seconds = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

fn event(
    c: &Container,
    init: bool,
    warning: bool,
    reason: &'static str,
    message: String,
) -> PodEvent {
    PodEvent {
        warning,
        reason,
        message,
        container: Some(c.name.clone()),
        init,
        ephemeral: false,
    }
}

fn image(c: &Container) -> &str {
    c.image.as_deref().unwrap_or_default()
}

/// One transition that is due at or before `now`, or the time the next one is due.
enum Next {
    /// Moved to a new stage; more may be due.
    Moved,
    /// Nothing due before this time (none: nothing until the pod changes).
    Wait(Option<Timestamp>),
    /// The pod is to be deleted.
    Delete,
}

/// What one [`transition`] reads besides the pod and the kubelet's memory.
struct Inputs<'a> {
    overrides: &'a PodOverrides,
    config: &'a StageConfig,
    /// Whether an image is on the node.
    present: &'a dyn Fn(&str) -> bool,
    /// What each container does once started.
    ctx: Ctx<'a>,
    now: Timestamp,
}

fn transition(
    pod: &Pod,
    memory: &mut PodMemory,
    events: &mut Vec<PodEvent>,
    pulled_images: &mut Vec<String>,
    inputs: &Inputs<'_>,
) -> Next {
    let Inputs {
        overrides,
        config,
        present,
        ref ctx,
        now,
    } = *inputs;
    let terminating = pod.metadata.deletion_timestamp.is_some();
    match memory.stage {
        Stage::Terminating { until, .. } => {
            if until <= now {
                Next::Delete
            } else {
                Next::Wait(Some(until))
            }
        }
        Stage::New | Stage::Completed | Stage::Creating { .. } | Stage::PullFailed { .. }
            if terminating =>
        {
            Next::Delete
        }
        Stage::Running if terminating => {
            // `killPodWithSyncResult`: preStop hooks, SIGTERM, SIGKILL at the end of the grace
            // period, regular containers before sidecars.
            events.extend(termination::killing_events(ctx, &memory.containers));
            let grace_end = after(now, grace_period(pod).min(config.max_termination_grace));
            let stops = termination::stop_times(ctx.plans, &memory.containers, now, grace_end);
            let until = stops.iter().flatten().map(|(t, _)| *t).max().unwrap_or(now);
            memory.stage = Stage::Terminating {
                since: now,
                grace_end,
                until,
            };
            Next::Moved
        }
        Stage::New => {
            memory.start_time = Some(now);
            memory.pulling.clear();
            for (c, init) in all_containers(pod) {
                let pull = needs_pull(c, overrides, present);
                events.push(if pull {
                    event(
                        c,
                        init,
                        false,
                        "Pulling",
                        format!("Pulling image \"{}\"", image(c)),
                    )
                } else {
                    event(
                        c,
                        init,
                        false,
                        "Pulled",
                        format!(
                            "Container image \"{}\" already present on machine",
                            image(c)
                        ),
                    )
                });
                if pull {
                    memory.pulling.push(c.name.clone());
                }
            }
            memory.stage = Stage::Creating { since: now };
            Next::Moved
        }
        Stage::Creating { since } => {
            let pull = if memory.pulling.is_empty() {
                Duration::ZERO
            } else {
                overrides.pull_delay.unwrap_or(config.pull_delay)
            };
            let pulled = after(since, pull);
            if all_containers(pod).any(|(c, _)| overrides.pull_fails(image(c))) {
                if pulled > now {
                    return Next::Wait(Some(pulled));
                }
                for (c, init) in all_containers(pod).filter(|(c, _)| overrides.pull_fails(image(c)))
                {
                    let name = image(c);
                    events.push(event(
                        c,
                        init,
                        true,
                        "Failed",
                        format!(
                            "Failed to pull image \"{name}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{name}\": not found"
                        ),
                    ));
                    events.push(event(c, init, true, "Failed", "Error: ErrImagePull".into()));
                }
                memory.pull_failures += 1;
                memory.stage = Stage::PullFailed {
                    since: pulled,
                    backing_off: false,
                };
                return Next::Moved;
            }
            let started = after(pulled, config.start_delay);
            if started > now {
                return Next::Wait(Some(started));
            }
            let took = format!("{:.3}s", pull.as_secs_f64());
            for (c, init) in all_containers(pod).filter(|(c, _)| memory.pulling.contains(&c.name)) {
                events.push(event(
                    c,
                    init,
                    false,
                    "Pulled",
                    format!(
                        "Successfully pulled image \"{}\" in {took} ({took} including waiting). Image size: 0 bytes.",
                        image(c)
                    ),
                ));
                pulled_images.push(image(c).to_owned());
            }
            memory.pull_failures = 0;
            memory.pulling.clear();
            containers::begin(ctx, &mut memory.containers, events, started);
            memory.stage = Stage::Running;
            Next::Moved
        }
        Stage::PullFailed { since, backing_off } => {
            let sync = after(since, config.pull_retry_sync);
            let retry = after(
                since,
                backoff(
                    memory.pull_failures,
                    config.backoff_base,
                    config.backoff_max,
                ),
            );
            let failing = || all_containers(pod).filter(|(c, _)| overrides.pull_fails(image(c)));
            if !backing_off && sync <= now && sync < retry {
                for (c, init) in failing() {
                    events.push(event(
                        c,
                        init,
                        false,
                        "BackOff",
                        format!("Back-off pulling image \"{}\"", image(c)),
                    ));
                }
                memory.stage = Stage::PullFailed {
                    since,
                    backing_off: true,
                };
                return Next::Moved;
            }
            if retry > now {
                return Next::Wait(Some(if backing_off { retry } else { sync.min(retry) }));
            }
            for (c, init) in failing() {
                events.push(event(
                    c,
                    init,
                    false,
                    "Pulling",
                    format!("Pulling image \"{}\"", image(c)),
                ));
            }
            memory.pulling = failing().map(|(c, _)| c.name.clone()).collect();
            memory.stage = Stage::Creating { since: retry };
            Next::Moved
        }
        Stage::Running => {
            crate::ephemeral::admit(ctx, &mut memory.containers, events, now);
            match containers::advance(ctx, &mut memory.containers, events, pulled_images, now) {
                Advance::Wait(t) => Next::Wait(t),
                Advance::Finished(_) => {
                    memory.stage = Stage::Completed;
                    Next::Moved
                }
            }
        }
        Stage::Completed => Next::Wait(None),
    }
}

/// Advances `pod` as far as `now` allows and says what to post, on a node that has no image
/// yet (every container's image is pulled): [`step_on`] with no image present.
pub fn step(
    pod: &Pod,
    memory: &PodMemory,
    node: &NodeContext,
    pod_ip: &str,
    now: Timestamp,
    config: &StageConfig,
) -> Step {
    step_on(pod, memory, node, &|_| false, pod_ip, now, config)
}

/// Advances `pod` as far as `now` allows and says what to post.
///
/// `memory` is the kubelet's memory of the pod (a fresh [`PodMemory::new`] the first time or
/// when the UID changed); `present` says whether an image is already on the node (see
/// [`needs_pull`]); `pod_ip` is the address the node allocated for it.
pub fn step_on(
    pod: &Pod,
    memory: &PodMemory,
    node: &NodeContext,
    present: &dyn Fn(&str) -> bool,
    pod_ip: &str,
    now: Timestamp,
    config: &StageConfig,
) -> Step {
    let runtime = Runtime {
        present,
        exits: &[],
    };
    step_with(pod, memory, node, &runtime, pod_ip, now, config)
}

/// What the container runtime tells the kubelet besides the pod: which images the node has
/// (see [`needs_pull`]) and which containers' processes ended by themselves since the last sync
/// ([`ProcessExit`]: `kill 1`, a shell's `exit`).
pub struct Runtime<'a> {
    /// Whether an image is already on the node.
    pub present: &'a dyn Fn(&str) -> bool,
    /// Processes that ended outside their plan, for this pod.
    pub exits: &'a [ProcessExit],
}

/// [`step_on`] with what the runtime reports ([`Runtime`]).
pub fn step_with(
    pod: &Pod,
    memory: &PodMemory,
    node: &NodeContext,
    runtime: &Runtime<'_>,
    pod_ip: &str,
    now: Timestamp,
    config: &StageConfig,
) -> Step {
    let present = runtime.present;
    let overrides = PodOverrides::of(pod);
    let plans: Vec<Plan<'_>> = containers::plans(pod, &overrides, config);
    let inputs = Inputs {
        overrides: &overrides,
        config,
        present,
        ctx: Ctx {
            pod,
            plans: &plans,
            config,
            pod_ip,
            overrides: &overrides,
            present,
            exits: runtime.exits,
        },
        now,
    };
    let mut pulled = Vec::new();
    let mut memory = memory.clone();
    let mut events = Vec::new();
    // Each transition moves forward, so this is bounded; the cap guards against a bug.
    let mut wake_at = None;
    for _ in 0..32 {
        match transition(pod, &mut memory, &mut events, &mut pulled, &inputs) {
            Next::Moved => continue,
            Next::Wait(t) => {
                wake_at = t;
                break;
            }
            Next::Delete => {
                return Step {
                    memory,
                    status: None,
                    events,
                    wake_at: None,
                    delete: true,
                    pulled,
                };
            }
        }
    }
    let status = render_status(pod, &memory, &plans, node, pod_ip, now);
    let status = (pod.status.as_ref() != Some(&status)).then_some(status);
    Step {
        memory,
        status,
        events,
        wake_at,
        delete: false,
        pulled,
    }
}

#[cfg(test)]
#[path = "stages_tests.rs"]
mod tests;
