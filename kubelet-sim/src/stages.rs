//! The pod lifecycle as a simulated kubelet reports it: a pure state machine.
//!
//! Mirrors what the kubelet's pod workers do for one pod (`pkg/kubelet/pod_workers.go`,
//! `kuberuntime/kuberuntime_manager.go` `SyncPod`, `images/image_manager.go` and the
//! back-off in `kuberuntime_container.go`), and what kwok's Stages declare
//! (`kustomize/stage/pod/`). Input: the pod, the kubelet's memory of it ([`PodMemory`]), the
//! node, `now` and the [`StageConfig`]; output: the next memory, the status to post, events
//! and when to be called again. No I/O, no clock.
//!
//! ```text
//!   New ──Pulling──▶ Creating ──(pull_delay+start_delay)──▶ Running ──(ready_after)──▶ Ready
//!                      │  bad image                           │ container exits
//!                      ▼                                      ▼
//!        PullFailed (ErrImagePull) ──sync──▶ (ImagePullBackOff)     restartPolicy says restart?
//!                      └──back-off 10s,20s..5m──▶ Creating      yes ▼                 no ▼
//!                                                 CrashBackOff ──back-off──▶ Running   Completed
//!   any stage ── deletionTimestamp ──▶ Terminating (Killing) ──min(grace, cap)──▶ delete(grace 0)
//! ```
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

use crate::annotations::{Failure, PodOverrides};
use crate::config::StageConfig;
use crate::pod_status::{NodeContext, render_status};

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
    /// The containers run since `since`.
    Running {
        /// When the current containers started.
        since: Timestamp,
    },
    /// The container exited and waits until `until` to be restarted (`CrashLoopBackOff`).
    CrashBackOff {
        /// When the back-off ends.
        until: Timestamp,
    },
    /// The containers finished and will not be restarted (pod Succeeded or Failed).
    Completed,
    /// Deletion requested: containers are stopping until `until`.
    Terminating {
        /// When the simulated grace period ends.
        until: Timestamp,
        /// The stage the pod was in when deletion started (for the status shown meanwhile).
        was_running: bool,
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
            Stage::Running { .. } => "Running",
            Stage::CrashBackOff { .. } => "CrashLoopBackOff",
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
    /// Container restarts so far (`restartCount`).
    pub restarts: i32,
    /// Failed pulls in a row (drives the image back-off).
    pub pull_failures: u32,
    /// When the pod was first seen (`startTime`).
    pub start_time: Option<Timestamp>,
    /// How the previous container run ended.
    pub last_termination: Option<Termination>,
    /// The containers whose image is being pulled (the others' images were already on the
    /// node, or are not pulled: see [`needs_pull`]).
    pub pulling: Vec<String>,
}

impl PodMemory {
    /// A pod the kubelet has not acted on yet.
    pub fn new(uid: impl Into<String>) -> Self {
        PodMemory {
            uid: uid.into(),
            stage: Stage::New,
            restarts: 0,
            pull_failures: 0,
            start_time: None,
            last_termination: None,
            pulling: Vec::new(),
        }
    }

    /// The memory a restarted kubelet rebuilds from the status it posted before (as the real
    /// kubelet asks the container runtime what is running): running containers keep running
    /// with their start time and restart count, finished pods stay finished; anything else
    /// starts over.
    pub fn recover(pod: &Pod) -> Self {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut memory = PodMemory::new(uid.clone());
        let Some(status) = pod.status.as_ref() else {
            return memory;
        };
        let Some(first) = status.container_statuses.as_ref().and_then(|c| c.first()) else {
            return memory;
        };
        let state = first.state.clone().unwrap_or_default();
        memory.start_time = status.start_time.as_ref().map(|t| t.0);
        memory.restarts = first.restart_count;
        if let Some(since) = state.running.and_then(|r| r.started_at) {
            memory.stage = Stage::Running { since: since.0 };
        } else if let (Some(t), Some("Succeeded" | "Failed")) =
            (state.terminated, status.phase.as_deref())
        {
            let at = t.finished_at.map_or(Timestamp::UNIX_EPOCH, |f| f.0);
            memory.last_termination = Some(Termination {
                exit_code: t.exit_code,
                reason: if t.exit_code == 0 {
                    "Completed"
                } else {
                    "Error"
                },
                started_at: t.started_at.map_or(at, |s| s.0),
                finished_at: at,
                container_id: memory.container_id(&first.name),
            });
            memory.stage = Stage::Completed;
        } else {
            memory = PodMemory::new(uid);
        }
        memory
    }

    /// The ID of the current container run, `miniplane://<64 hex>`, derived from the pod UID
    /// and the restart count so it is stable across syncs and changes on every restart.
    pub fn container_id(&self, container: &str) -> String {
        container_id(&self.uid, container, self.restarts)
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

fn after(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| s.containers.as_slice())
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

/// How long the containers run before exiting, and with which code; none: forever.
fn exit_plan(overrides: &PodOverrides, config: &StageConfig) -> Option<(Duration, i32)> {
    let run = overrides.run_for.unwrap_or(config.exit_after);
    match overrides.fail {
        Some(Failure::Crash) => Some((run, 1)),
        Some(Failure::Exit(code)) => Some((run, code)),
        _ => overrides.run_for.map(|run| (run, 0)),
    }
}

/// When the containers of a pod that started at `since` become Ready; none: never.
pub fn ready_at(
    pod: &Pod,
    overrides: &PodOverrides,
    config: &StageConfig,
    since: Timestamp,
) -> Option<Timestamp> {
    if overrides.fail == Some(Failure::NeverReady) {
        return None;
    }
    let delay = overrides.ready_after.unwrap_or_else(|| {
        containers(pod)
            .iter()
            .filter_map(|c| c.readiness_probe.as_ref())
            .map(|p| {
                Duration::from_secs(
                    u64::try_from(p.initial_delay_seconds.unwrap_or(0)).unwrap_or(0),
                )
            })
            .max()
            .unwrap_or(config.ready_delay)
    });
    Some(after(since, delay))
}

fn container_events(
    pod: &Pod,
    reason: &'static str,
    warning: bool,
    message: impl Fn(&Container) -> String,
) -> Vec<PodEvent> {
    containers(pod)
        .iter()
        .map(|c| PodEvent {
            warning,
            reason,
            message: message(c),
            container: Some(c.name.clone()),
        })
        .collect()
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
        Stage::New | Stage::Completed if terminating => Next::Delete,
        Stage::Creating { .. } | Stage::PullFailed { .. } | Stage::CrashBackOff { .. }
            if terminating =>
        {
            memory.stage = Stage::Terminating {
                until: now,
                was_running: false,
            };
            Next::Moved
        }
        Stage::Running { .. } if terminating => {
            events.extend(container_events(pod, "Killing", false, |c| {
                format!("Stopping container {}", c.name)
            }));
            memory.stage = Stage::Terminating {
                until: after(now, grace_period(pod).min(config.max_termination_grace)),
                was_running: true,
            };
            Next::Moved
        }
        Stage::New => {
            memory.start_time = Some(now);
            memory.pulling.clear();
            for c in containers(pod) {
                let pull = needs_pull(c, overrides, present);
                events.push(PodEvent {
                    warning: false,
                    reason: if pull { "Pulling" } else { "Pulled" },
                    message: if pull {
                        format!("Pulling image \"{}\"", image(c))
                    } else {
                        format!(
                            "Container image \"{}\" already present on machine",
                            image(c)
                        )
                    },
                    container: Some(c.name.clone()),
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
            if containers(pod)
                .iter()
                .any(|c| overrides.pull_fails(image(c)))
            {
                if pulled > now {
                    return Next::Wait(Some(pulled));
                }
                for c in containers(pod)
                    .iter()
                    .filter(|c| overrides.pull_fails(image(c)))
                {
                    let name = image(c);
                    events.push(PodEvent {
                        warning: true,
                        reason: "Failed",
                        message: format!(
                            "Failed to pull image \"{name}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{name}\": not found"
                        ),
                        container: Some(c.name.clone()),
                    });
                    events.push(PodEvent {
                        warning: true,
                        reason: "Failed",
                        message: "Error: ErrImagePull".into(),
                        container: Some(c.name.clone()),
                    });
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
            for c in containers(pod)
                .iter()
                .filter(|c| memory.pulling.contains(&c.name))
            {
                events.push(PodEvent {
                    warning: false,
                    reason: "Pulled",
                    message: format!(
                        "Successfully pulled image \"{}\" in {took} ({took} including waiting). Image size: 0 bytes.",
                        image(c)
                    ),
                    container: Some(c.name.clone()),
                });
                pulled_images.push(image(c).to_owned());
            }
            start_containers(pod, memory, events, started);
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
            if !backing_off && sync <= now && sync < retry {
                for c in containers(pod)
                    .iter()
                    .filter(|c| overrides.pull_fails(image(c)))
                {
                    events.push(PodEvent {
                        warning: false,
                        reason: "BackOff",
                        message: format!("Back-off pulling image \"{}\"", image(c)),
                        container: Some(c.name.clone()),
                    });
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
            events.extend(
                container_events(pod, "Pulling", false, |c| {
                    format!("Pulling image \"{}\"", image(c))
                })
                .into_iter()
                .filter(|e| {
                    containers(pod).iter().any(|c| {
                        Some(&c.name) == e.container.as_ref() && overrides.pull_fails(image(c))
                    })
                }),
            );
            memory.pulling = containers(pod)
                .iter()
                .filter(|c| overrides.pull_fails(image(c)))
                .map(|c| c.name.clone())
                .collect();
            memory.stage = Stage::Creating { since: retry };
            Next::Moved
        }
        Stage::Running { since } => {
            let ready = ready_at(pod, overrides, config, since).filter(|t| *t > now);
            let Some((run, code)) = exit_plan(overrides, config) else {
                return Next::Wait(ready);
            };
            let exited = after(since, run);
            if exited > now {
                return Next::Wait(Some(ready.map_or(exited, |r| r.min(exited))));
            }
            let container = containers(pod)
                .first()
                .map(|c| c.name.clone())
                .unwrap_or_default();
            memory.last_termination = Some(Termination {
                exit_code: code,
                reason: if code == 0 { "Completed" } else { "Error" },
                started_at: since,
                finished_at: exited,
                container_id: memory.container_id(&container),
            });
            let restart = match restart_policy(pod) {
                "Never" => false,
                "OnFailure" => code != 0,
                _ => true,
            };
            if !restart {
                memory.stage = Stage::Completed;
                return Next::Moved;
            }
            let wait = backoff(
                u32::try_from(memory.restarts).unwrap_or(0) + 1,
                config.backoff_base,
                config.backoff_max,
            );
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            events.extend(container_events(pod, "BackOff", true, |c| {
                format!(
                    "Back-off restarting failed container {} in pod {name}_{namespace}({})",
                    c.name, memory.uid
                )
            }));
            memory.stage = Stage::CrashBackOff {
                until: after(exited, wait),
            };
            Next::Moved
        }
        Stage::CrashBackOff { until } => {
            if until > now {
                return Next::Wait(Some(until));
            }
            memory.restarts += 1;
            events.extend(container_events(pod, "Pulled", false, |c| {
                format!(
                    "Container image \"{}\" already present on machine",
                    image(c)
                )
            }));
            start_containers(pod, memory, events, until);
            Next::Moved
        }
        Stage::Completed => Next::Wait(None),
    }
}

fn start_containers(pod: &Pod, memory: &mut PodMemory, events: &mut Vec<PodEvent>, at: Timestamp) {
    events.extend(container_events(pod, "Created", false, |c| {
        format!("Created container: {}", c.name)
    }));
    events.extend(container_events(pod, "Started", false, |c| {
        format!("Started container {}", c.name)
    }));
    memory.pull_failures = 0;
    memory.pulling.clear();
    memory.stage = Stage::Running { since: at };
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
    let overrides = PodOverrides::of(pod);
    let inputs = Inputs {
        overrides: &overrides,
        config,
        present,
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
    let status = render_status(pod, &memory, &overrides, config, node, pod_ip, now);
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
