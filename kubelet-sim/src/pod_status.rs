//! The `PodStatus` a kubelet posts for a pod: phase, conditions, IPs and the statuses of its
//! init, regular and ephemeral containers. Mirrors `generateAPIPodStatus`, `getPhase` and
//! `convertToAPIContainerStatuses` in `pkg/kubelet/kubelet_pods.go`; the conditions are
//! [`crate::conditions`] (`pkg/kubelet/status/generate.go`).
//!
//! | container | state | lastState | ready |
//! | --- | --- | --- | --- |
//! | image pulling | waiting `ContainerCreating` (`PodInitializing` when the pod has init containers) | | false |
//! | image pull failed | waiting `ErrImagePull` / `ImagePullBackOff` | | false |
//! | not started yet | waiting as while pulling | | false |
//! | running | running (`startedAt`), `started` once the startup probe passed | the previous run | per readiness |
//! | exited, restarting | waiting `CrashLoopBackOff` | terminated (`Completed` / `Error`) | false |
//! | exited for good | terminated | the run before | init containers: exit 0 |
//! | stopping (pod deleted) | running until it stops, then terminated | | false |
//!
//! Ephemeral containers get the same rows in `ephemeralContainerStatuses` (their own image pull
//! included), never Ready and without `started`; they take no part in the phase or the
//! conditions.
//!
//! The phase is computed from those statuses as `getPhase` does ([`get_phase`]), so it follows
//! from what the containers show: `Pending` while any has not started, `Running`, and for a
//! pod whose containers will not run again `Succeeded` (all exited 0) or `Failed`.
//!
//! Unlike Kubernetes, where a terminating container stays Ready until its readiness probe
//! fails, every container is reported not Ready from the deletion on.
//!
//! Condition `lastTransitionTime`s are kept from the current status when the condition's
//! status did not change, so rendering the same stage twice gives an identical status (the
//! caller posts only differences).

use apimachinery::duration::go_duration;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::annotations::PodOverrides;
use crate::conditions::conditions;
use crate::containers::{self, Kind, Plan, State};
use crate::stages::{PodMemory, Stage, Termination, container_id, hex64};
use crate::termination;

/// What the status needs to know about the node the pod runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    /// The node's name.
    pub name: String,
    /// The node's InternalIP (`status.hostIP`).
    pub host_ip: String,
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

/// Renders the status of `pod` as `memory` has it (see the module table); `plans` are its
/// containers' plans ([`containers::plans`]).
pub fn render_status(
    pod: &Pod,
    memory: &PodMemory,
    plans: &[Plan<'_>],
    node: &NodeContext,
    pod_ip: &str,
    now: Timestamp,
) -> PodStatus {
    let old = pod.status.as_ref();
    let has_init = plans
        .iter()
        .any(|p| matches!(p.kind, Kind::Init | Kind::Sidecar));
    let stops = match memory.stage {
        Stage::Terminating {
            since, grace_end, ..
        } => termination::stop_times(plans, &memory.containers, since, grace_end),
        _ => Vec::new(),
    };
    let overrides = match memory.stage {
        Stage::PullFailed { .. } => Some(PodOverrides::of(pod)),
        _ => None,
    };
    let mut init_statuses = Vec::new();
    let mut statuses = Vec::new();
    let mut ephemeral_statuses = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let c = &plan.container;
        let image = c.image.clone().unwrap_or_default();
        let default_waiting = || {
            waiting(
                if has_init {
                    "PodInitializing"
                } else {
                    "ContainerCreating"
                },
                None,
            )
        };
        let mut status = ContainerStatus {
            name: c.name.clone(),
            image: image.clone(),
            started: Some(false),
            last_state: Some(ContainerState::default()),
            ..Default::default()
        };
        match (memory.stage, memory.containers.get(i)) {
            (Stage::PullFailed { backing_off, .. }, _)
                if plan.kind != Kind::Ephemeral
                    && overrides.as_ref().is_some_and(|o| o.pull_fails(&image)) =>
            {
                status.state = Some(pull_failed(&image, backing_off));
            }
            (Stage::Running | Stage::Completed | Stage::Terminating { .. }, Some(m)) => {
                let uid = &memory.uid;
                status.restart_count = m.restarts;
                match m.state {
                    State::Waiting => {}
                    State::Running { since, started } => {
                        let stopped = stops.get(i).copied().flatten().filter(|(t, _)| *t <= now);
                        if let Some((at, code)) = stopped {
                            status.state = Some(terminated(&Termination {
                                exit_code: code,
                                reason: if code == 0 { "Completed" } else { "Error" },
                                started_at: since,
                                finished_at: at,
                                container_id: container_id(uid, &c.name, m.restarts),
                            }));
                        } else {
                            status.state = Some(ContainerState {
                                running: Some(ContainerStateRunning {
                                    started_at: Some(Time(since)),
                                }),
                                ..Default::default()
                            });
                            status.started = Some(started);
                            status.ready = memory.stage == Stage::Running
                                && matches!(plan.kind, Kind::Regular | Kind::Sidecar)
                                && containers::timeline(plan, since).ready_at(now);
                        }
                        status.container_id = Some(container_id(uid, &c.name, m.restarts));
                        status.last_state = Some(last_state(m.last.as_deref()));
                    }
                    State::BackOff { .. } => {
                        let window = m.backoff.map(|b| b.window).unwrap_or_default();
                        status.state = Some(waiting(
                            "CrashLoopBackOff",
                            Some(format!(
                                "back-off {} restarting failed container={} pod={}_{}({uid})",
                                go_duration(window),
                                c.name,
                                pod.metadata.name.as_deref().unwrap_or_default(),
                                pod.metadata.namespace.as_deref().unwrap_or("default"),
                            )),
                        ));
                        status.container_id = m.last.as_ref().map(|t| t.container_id.clone());
                        status.last_state = Some(last_state(m.last.as_deref()));
                    }
                    State::Pulling { .. } => {}
                    State::PullFailed { backing_off, .. } => {
                        status.state = Some(pull_failed(&image, backing_off));
                        status.last_state = Some(last_state(m.last.as_deref()));
                    }
                    State::Exited => {
                        if let Some(last) = m.last.as_deref() {
                            status.state = Some(terminated(last));
                            status.container_id = Some(last.container_id.clone());
                            status.ready = plan.kind == Kind::Init && last.exit_code == 0;
                        }
                        status.last_state = Some(last_state(m.previous.as_deref()));
                    }
                }
            }
            _ => {}
        }
        if status.state.is_none() {
            status.state = Some(default_waiting());
        }
        if status.container_id.is_some() {
            status.image_id = image_id(&image);
        }
        match plan.kind {
            Kind::Regular => statuses.push(status),
            Kind::Init | Kind::Sidecar => init_statuses.push(status),
            Kind::Ephemeral => {
                // The prober sets `started` of regular and init containers only.
                status.started = None;
                ephemeral_statuses.push(status);
            }
        }
    }
    let sandbox = !matches!(memory.stage, Stage::New | Stage::Creating { .. });
    let terminal = memory.stage == Stage::Completed;
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let phase = get_phase(policy, plans, &init_statuses, &statuses, terminal);
    let conditions = conditions(old, plans, &init_statuses, &statuses, phase, sandbox, now);
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
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(statuses),
        ephemeral_container_statuses: (!ephemeral_statuses.is_empty())
            .then_some(ephemeral_statuses),
        qos_class: old.and_then(|s| s.qos_class.clone()),
        ..Default::default()
    };
    normalize_status(&mut status);
    status
}

/// The waiting state of an image pull that failed: `ErrImagePull`, then `ImagePullBackOff`.
fn pull_failed(image: &str, backing_off: bool) -> ContainerState {
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

fn last_state(t: Option<&Termination>) -> ContainerState {
    t.map(terminated).unwrap_or_default()
}

/// Whether any regular container has run (`HasAnyRegularContainerStarted`).
pub fn any_regular_started(statuses: &[ContainerStatus]) -> bool {
    statuses.iter().any(|s| {
        let state = s.state.as_ref();
        state.is_some_and(|st| st.running.is_some() || st.terminated.is_some())
            || s.last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some())
    })
}

/// The pod phase from its container statuses, as `getPhase` (`kubelet_pods.go`) computes it;
/// `policy` is the pod's `restartPolicy`; `terminal`: the kubelet will run no container of the pod again.
pub fn get_phase(
    policy: &str,
    plans: &[Plan<'_>],
    init_statuses: &[ContainerStatus],
    statuses: &[ContainerStatus],
    terminal: bool,
) -> &'static str {
    fn find<'a>(list: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
        list.iter().find(|s| s.name == name)
    }
    let empty = ContainerState::default();
    let last_terminated = |s: &ContainerStatus| {
        s.last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .map(|t| t.exit_code)
    };
    let (mut pending_init, mut failed_init) = (0, 0);
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for plan in plans.iter().filter(|p| p.kind == Kind::Init) {
        let Some(s) = find(init_statuses, &plan.container.name) else {
            pending_init += 1;
            continue;
        };
        let state = s.state.as_ref().unwrap_or(&empty);
        if state.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = &state.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if state.waiting.is_some() {
            match last_terminated(s) {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    for plan in plans.iter().filter(|p| p.kind == Kind::Sidecar) {
        let Some(s) = find(init_statuses, &plan.container.name) else {
            unknown += 1;
            continue;
        };
        let state = s.state.as_ref().unwrap_or(&empty);
        if state.running.is_some() {
            if s.started != Some(true) {
                pending_init += 1;
            }
            running += 1;
        } else if state.terminated.is_some() {
            // Terminated sidecars do not count.
        } else if state.waiting.is_some() {
            if last_terminated(s).is_none() {
                pending_init += 1;
            }
            waiting += 1;
        } else {
            pending_init += 1;
            unknown += 1;
        }
    }
    for plan in plans.iter().filter(|p| p.kind == Kind::Regular) {
        let Some(s) = find(statuses, &plan.container.name) else {
            unknown += 1;
            continue;
        };
        let state = s.state.as_ref().unwrap_or(&empty);
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = &state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if last_terminated(s).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if (pending_init > 0 && !any_regular_started(statuses)) || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if terminal {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        return match policy {
            "Always" => "Running",
            _ if stopped == succeeded => "Succeeded",
            "Never" => "Failed",
            _ => "Running",
        };
    }
    "Pending"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StageConfig;
    use k8s_openapi::api::core::v1::{Container, ContainerStateWaiting};

    fn status(name: &str, state: &str, last_exit: Option<i32>) -> ContainerStatus {
        let exit = |code: i32| ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                ..Default::default()
            }),
            ..Default::default()
        };
        let state = match state.split_once(':') {
            Some(("exited", code)) => exit(code.parse().unwrap_or(1)),
            _ if state == "running" => ContainerState {
                running: Some(Default::default()),
                ..Default::default()
            },
            _ => ContainerState {
                waiting: Some(ContainerStateWaiting::default()),
                ..Default::default()
            },
        };
        ContainerStatus {
            name: name.into(),
            state: Some(state),
            last_state: last_exit.map(exit),
            started: Some(true),
            ..Default::default()
        }
    }

    #[test]
    fn get_phase_follows_the_kubelet() {
        let a = Container {
            name: "a".into(),
            ..Default::default()
        };
        let b = Container {
            name: "b".into(),
            ..Default::default()
        };
        let overrides = PodOverrides::default();
        let config = StageConfig::fast();
        let plans: Vec<Plan<'_>> = [&a, &b]
            .into_iter()
            .map(|c| crate::plan::plan_for_tests(c, Kind::Regular, &overrides, &config))
            .collect();
        let phase = |policy, a: ContainerStatus, b: ContainerStatus, terminal| {
            get_phase(policy, &plans, &[], &[a, b], terminal)
        };
        let s = status;
        for (policy, sa, sb, terminal, want) in [
            (
                "Always",
                s("a", "waiting", None),
                s("b", "running", None),
                false,
                "Pending",
            ),
            (
                "Always",
                s("a", "running", None),
                s("b", "running", None),
                false,
                "Running",
            ),
            // Both in back-off: stopped, but restarting.
            (
                "Always",
                s("a", "waiting", Some(1)),
                s("b", "waiting", Some(0)),
                false,
                "Running",
            ),
            (
                "OnFailure",
                s("a", "exited:0", None),
                s("b", "waiting", Some(1)),
                false,
                "Running",
            ),
            (
                "OnFailure",
                s("a", "exited:0", None),
                s("b", "exited:0", None),
                false,
                "Succeeded",
            ),
            (
                "Never",
                s("a", "exited:0", None),
                s("b", "running", None),
                false,
                "Running",
            ),
            (
                "Never",
                s("a", "exited:0", None),
                s("b", "exited:2", None),
                false,
                "Failed",
            ),
            // A pod the kubelet is done with: by exit codes, whatever the policy.
            (
                "Always",
                s("a", "exited:0", None),
                s("b", "exited:0", None),
                true,
                "Succeeded",
            ),
            (
                "Always",
                s("a", "exited:0", None),
                s("b", "exited:137", None),
                true,
                "Failed",
            ),
        ] {
            assert_eq!(phase(policy, sa, sb, terminal), want, "{policy} {want}");
        }
    }
}
