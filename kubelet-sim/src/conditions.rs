//! The pod conditions a kubelet reports: `PodReadyToStartContainers`, `Initialized`,
//! `ContainersReady`, `Ready` and `PodScheduled`, computed from the container statuses and the
//! phase. Mirrors `pkg/kubelet/status/generate.go` (`GeneratePodInitializedCondition`,
//! `GenerateContainersReadyCondition`, `GeneratePodReadyCondition`,
//! `GeneratePodReadyToStartContainersCondition`).
//!
//! | condition | True when | else |
//! | --- | --- | --- |
//! | `PodReadyToStartContainers` | the sandbox and its network are up | False |
//! | `Initialized` | every init container exited 0 (a sidecar: started), or a regular container ran | False `ContainersNotInitialized` "containers with incomplete status: [a b]" |
//! | `ContainersReady` | every regular container and sidecar is Ready | False `ContainersNotReady` "containers with unready status: [a b]"; `PodCompleted` / `PodFailed` once the pod is done |
//! | `Ready` | `ContainersReady` (readiness gates are not simulated) | as `ContainersReady` |
//! | `PodScheduled` | always (the kubelet only sees bound pods) | |

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::containers::{Kind, Plan};
use crate::pod_status::any_regular_started;

/// A condition, its `lastTransitionTime` kept from `old` when its status did not change.
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

/// `[a b]`, Go's `%s` of a string slice.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// The condition's (ok, reason, message) for `Initialized`.
fn initialized(
    plans: &[Plan<'_>],
    init_statuses: &[ContainerStatus],
    statuses: &[ContainerStatus],
    phase: &str,
) -> (bool, Option<&'static str>, Option<String>) {
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for plan in plans
        .iter()
        .filter(|p| matches!(p.kind, Kind::Init | Kind::Sidecar))
    {
        let name = plan.container.name.as_str();
        match init_statuses.iter().find(|s| s.name == name) {
            None => unknown.push(name),
            Some(s) => {
                let done = if plan.kind == Kind::Sidecar {
                    s.started == Some(true)
                } else {
                    s.ready
                };
                if !done {
                    incomplete.push(name);
                }
            }
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return (true, Some("PodCompleted"), None);
    }
    if any_regular_started(statuses) {
        return (true, None, None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        (true, None, None)
    } else {
        (
            false,
            Some("ContainersNotInitialized"),
            Some(messages.join(", ")),
        )
    }
}

/// The condition's (ok, reason, message) for `ContainersReady` (and so `Ready`).
fn containers_ready(
    plans: &[Plan<'_>],
    init_statuses: &[ContainerStatus],
    statuses: &[ContainerStatus],
    phase: &str,
) -> (bool, Option<&'static str>, Option<String>) {
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    for plan in plans
        .iter()
        .filter(|p| matches!(p.kind, Kind::Regular | Kind::Sidecar))
    {
        let name = plan.container.name.as_str();
        let list = if plan.kind == Kind::Sidecar {
            init_statuses
        } else {
            statuses
        };
        match list.iter().find(|s| s.name == name) {
            None => unknown.push(name),
            Some(s) if !s.ready => unready.push(name),
            Some(_) => {}
        }
    }
    match phase {
        "Succeeded" if unknown.is_empty() => return (false, Some("PodCompleted"), None),
        "Failed" => return (false, Some("PodFailed"), None),
        _ => {}
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        (true, None, None)
    } else {
        (false, Some("ContainersNotReady"), Some(messages.join(", ")))
    }
}

/// The five conditions, in the order the kubelet lists them; `sandbox`: the pod sandbox is up.
pub fn conditions(
    old: Option<&PodStatus>,
    plans: &[Plan<'_>],
    init_statuses: &[ContainerStatus],
    statuses: &[ContainerStatus],
    phase: &str,
    sandbox: bool,
    now: Timestamp,
) -> Vec<PodCondition> {
    let (init_ok, init_reason, init_message) = initialized(plans, init_statuses, statuses, phase);
    let (ready, reason, message) = containers_ready(plans, init_statuses, statuses, phase);
    vec![
        condition(old, "PodReadyToStartContainers", sandbox, None, None, now),
        condition(old, "Initialized", init_ok, init_reason, init_message, now),
        condition(old, "Ready", ready, reason, message.clone(), now),
        condition(old, "ContainersReady", ready, reason, message, now),
        condition(old, "PodScheduled", true, None, None, now),
    ]
}
