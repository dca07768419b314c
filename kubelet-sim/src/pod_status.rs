//! The `PodStatus` a kubelet posts for a pod in a given [`Stage`]: phase, conditions, IPs
//! and container statuses. Mirrors `generateAPIPodStatus` and `convertToAPIContainerStatuses`
//! in `pkg/kubelet/kubelet_pods.go` and the condition helpers in `pkg/kubelet/status/`
//! (`generate.go`: `GeneratePodReadyCondition`, `GenerateContainersReadyCondition`, ...).
//!
//! | stage | phase | container state | Ready |
//! | --- | --- | --- | --- |
//! | Creating | Pending | waiting `ContainerCreating` | False `ContainersNotReady` |
//! | PullFailed | Pending | waiting `ErrImagePull` / `ImagePullBackOff` | False |
//! | Running | Running | running (`startedAt`) | True once `ready_at` passed |
//! | CrashBackOff | Running | waiting `CrashLoopBackOff`, `lastState.terminated` | False |
//! | Completed | Succeeded / Failed | terminated `Completed` / `Error` | False `PodCompleted` |
//!
//! Condition `lastTransitionTime`s are kept from the current status when the condition's
//! status did not change, so rendering the same stage twice gives an identical status (the
//! caller posts only differences).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::annotations::PodOverrides;
use crate::config::StageConfig;
use crate::stages::{PodMemory, Stage, Termination, container_id, hex64, ready_at};

/// What the status needs to know about the node the pod runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    /// The node's name.
    pub name: String,
    /// The node's InternalIP (`status.hostIP`).
    pub host_ip: String,
}

fn condition(
    old: Option<&PodStatus>,
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    now: Timestamp,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let previous = old
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone());
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.map(str::to_owned),
        message,
        last_transition_time: Some(previous.unwrap_or(Time(now))),
        ..Default::default()
    }
}

fn terminated(t: &Termination) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: t.exit_code,
            reason: Some(t.reason.into()),
            started_at: Some(Time(t.started_at)),
            finished_at: Some(Time(t.finished_at)),
            container_id: Some(t.container_id.clone()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message,
        }),
        ..Default::default()
    }
}

/// The image ID the runtime reports: `<image>@sha256:<digest>` (a made-up digest).
pub fn image_id(image: &str) -> String {
    let repo = image.split(':').next().unwrap_or(image);
    format!("{repo}@sha256:{}", hex64(image))
}

/// Renders the status of `pod` in the stage `memory` is in (see the module table).
pub fn render_status(
    pod: &Pod,
    memory: &PodMemory,
    overrides: &PodOverrides,
    config: &StageConfig,
    node: &NodeContext,
    pod_ip: &str,
    now: Timestamp,
) -> PodStatus {
    let old = pod.status.as_ref();
    let containers = pod
        .spec
        .as_ref()
        .map_or(&[][..], |s| s.containers.as_slice());
    let ready = match memory.stage {
        Stage::Running { since } => {
            ready_at(pod, overrides, config, since).is_some_and(|t| t <= now)
        }
        _ => false,
    };
    let started = matches!(
        memory.stage,
        Stage::Running { .. }
            | Stage::Terminating {
                was_running: true,
                ..
            }
    );
    let sandbox = !matches!(memory.stage, Stage::New | Stage::Creating { .. });
    let phase = match memory.stage {
        Stage::New | Stage::Creating { .. } | Stage::PullFailed { .. } => "Pending",
        Stage::Completed => match &memory.last_termination {
            Some(t) if t.exit_code == 0 => "Succeeded",
            _ => "Failed",
        },
        Stage::Terminating {
            was_running: false, ..
        } => "Pending",
        _ => "Running",
    };
    let statuses: Vec<ContainerStatus> = containers
        .iter()
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            let pull_fails = overrides.pull_fails(&image);
            let state = match memory.stage {
                Stage::New | Stage::Creating { .. } => waiting("ContainerCreating", None),
                Stage::PullFailed { backing_off, .. } if pull_fails => {
                    if backing_off {
                        waiting(
                            "ImagePullBackOff",
                            Some(format!("Back-off pulling image \"{image}\"")),
                        )
                    } else {
                        waiting(
                            "ErrImagePull",
                            Some(format!(
                                "failed to pull and unpack image \"{image}\": not found"
                            )),
                        )
                    }
                }
                Stage::PullFailed { .. } => waiting("ContainerCreating", None),
                Stage::Running { since } => ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(since)),
                    }),
                    ..Default::default()
                },
                Stage::Terminating {
                    was_running: true,
                    until,
                } => terminated(&Termination {
                    exit_code: 0,
                    reason: "Completed",
                    started_at: memory.start_time.unwrap_or(until),
                    finished_at: until,
                    container_id: memory.container_id(&c.name),
                }),
                Stage::Terminating { .. } => waiting("ContainerCreating", None),
                Stage::CrashBackOff { .. } => waiting(
                    "CrashLoopBackOff",
                    Some(format!(
                        "back-off restarting failed container={} pod={}_{}({})",
                        c.name,
                        pod.metadata.name.as_deref().unwrap_or_default(),
                        pod.metadata.namespace.as_deref().unwrap_or("default"),
                        memory.uid
                    )),
                ),
                Stage::Completed => memory
                    .last_termination
                    .as_ref()
                    .map(terminated)
                    .unwrap_or_default(),
            };
            let last_state = match memory.stage {
                Stage::Completed => None,
                _ => memory.last_termination.as_ref().map(|t| Termination {
                    container_id: container_id(&memory.uid, &c.name, memory.restarts - 1),
                    ..t.clone()
                }),
            };
            let has_run =
                started || last_state.is_some() || matches!(memory.stage, Stage::Completed);
            ContainerStatus {
                name: c.name.clone(),
                image: image.clone(),
                image_id: if has_run {
                    image_id(&image)
                } else {
                    String::new()
                },
                container_id: has_run.then(|| memory.container_id(&c.name)),
                ready,
                started: Some(started),
                restart_count: memory.restarts,
                state: Some(state),
                last_state: Some(last_state.as_ref().map(terminated).unwrap_or_default()),
                ..Default::default()
            }
        })
        .collect();
    let not_ready = |what: &str| {
        let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
        format!("containers with unready status: [{}]", names.join(" ")).replace("containers", what)
    };
    let (ready_reason, ready_message) = match (ready, memory.stage) {
        (true, _) => (None, None),
        (false, Stage::Completed) => (Some("PodCompleted"), None),
        (false, _) => (Some("ContainersNotReady"), Some(not_ready("containers"))),
    };
    let conditions = vec![
        condition(old, "PodReadyToStartContainers", sandbox, None, None, now),
        condition(old, "Initialized", true, None, None, now),
        condition(
            old,
            "Ready",
            ready,
            ready_reason,
            ready_message.clone(),
            now,
        ),
        condition(
            old,
            "ContainersReady",
            ready,
            ready_reason,
            ready_message,
            now,
        ),
        condition(old, "PodScheduled", true, None, None, now),
    ];
    let ip = sandbox.then(|| pod_ip.to_owned());
    let mut status = PodStatus {
        phase: Some(phase.into()),
        conditions: Some(conditions),
        host_ip: Some(node.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: node.host_ip.clone(),
        }]),
        pod_ip: ip.clone(),
        pod_ips: ip.map(|ip| vec![PodIP { ip }]),
        start_time: memory.start_time.map(Time),
        container_statuses: Some(statuses),
        qos_class: old.and_then(|s| s.qos_class.clone()),
        ..Default::default()
    };
    normalize_status(&mut status);
    status
}

/// `normalizeStatus` (`pkg/kubelet/status/status_manager.go`): every timestamp cut to whole
/// seconds, the precision `metav1.Time` has on the wire. Without it a status rendered at
/// 12:00:00.250 never equals the one read back from the API server (12:00:00), and every sync
/// would post it again.
pub fn normalize_status(status: &mut PodStatus) {
    fn second(t: &mut Time) {
        if let Ok(whole) = Timestamp::from_second(t.0.as_second()) {
            t.0 = whole;
        }
    }
    fn state(s: &mut ContainerState) {
        if let Some(r) = s.running.as_mut() {
            r.started_at.iter_mut().for_each(second);
        }
        if let Some(t) = s.terminated.as_mut() {
            t.started_at.iter_mut().for_each(second);
            t.finished_at.iter_mut().for_each(second);
        }
    }
    status.start_time.iter_mut().for_each(second);
    for c in status.conditions.iter_mut().flatten() {
        c.last_probe_time.iter_mut().for_each(second);
        c.last_transition_time.iter_mut().for_each(second);
    }
    for cs in status
        .container_statuses
        .iter_mut()
        .chain(status.init_container_statuses.iter_mut())
        .flatten()
    {
        cs.state.iter_mut().for_each(state);
        cs.last_state.iter_mut().for_each(state);
    }
}
