//! The disruption controller: keeps each PodDisruptionBudget's status (how many of its pods
//! are healthy, how many must be, how many may be disrupted now), which the eviction API
//! reads before it lets a pod go.
//!
//! Mirrors `pkg/controller/disruption/disruption.go` (`trySync`, `getExpectedPodCount`,
//! `getExpectedScale` with its finders, `buildDisruptedPodMap`, `countHealthyPods`,
//! `updatePdbStatus`, `failSafe`); the shell is [`controller`].
//!
//! ```text
//!   PDB web {minAvailable: 2}                pods selected: web-a, web-b, web-c (all Ready)
//!     minAvailable an integer ─▶ expectedPods = 3 (the pods), desiredHealthy = 2
//!     minAvailable "50%" or maxUnavailable ─▶ expectedPods = Σ scale of the pods' controllers
//!        (ReplicaSet, or its Deployment; ReplicationController; StatefulSet), rounded up
//!     currentHealthy = Ready pods, not being deleted, not evicted in the last 2 min
//!                      (`status.disruptedPods`, written by the eviction API)
//!     disruptionsAllowed = max(0, currentHealthy - desiredHealthy) (0 while expectedPods is 0)
//!   condition DisruptionAllowed: True/SufficientPods, False/InsufficientPods,
//!                                False/SyncFailed when the expected count can't be known
//! ```
//!
//! Unlike Kubernetes, pods whose `DisruptionTarget` condition outlived their eviction (the
//! `stalePodDisruption` queue) keep it, and controllers of other kinds are not asked for their
//! `/scale` (a pod owned by one counts as a pod whose controller was not found).

pub mod controller;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use apimachinery::{EventType, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::action::{Action, event};
use crate::deployment::util::get_scaled_value_from_int_or_percent;
use crate::owner_ref::get_controller_of;
use crate::pod_readiness::is_pod_ready;

/// `DeletionTimeout`: how long an evicted pod is expected to take to go.
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);
/// `policyv1.DisruptionAllowedCondition`.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// A controller of the budget's pods and its desired replicas (`controllerAndScale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerScale {
    /// The controller's UID (several pods of one controller count it once).
    pub uid: String,
    /// Its `spec.replicas`.
    pub scale: i32,
}

/// Everything one sync reads.
pub struct SyncInput<'a> {
    /// The budget, from the lister.
    pub pdb: &'a PodDisruptionBudget,
    /// The pods its selector selects in its namespace.
    pub pods: &'a [&'a Pod],
    /// The finders: the controller a pod's controllerRef names (a ReplicaSet under a
    /// Deployment answers as the Deployment), with its scale; `None` when not found.
    pub scale_of: &'a dyn Fn(&OwnerReference, &str) -> Option<ControllerScale>,
    /// The time of this sync.
    pub now: Timestamp,
}

/// What one sync decided.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionSync {
    /// Events and the status write, in order.
    pub actions: Vec<Action>,
    /// Why, e.g. `3 healthy, 2 desired of 3 expected → 1 disruption allowed`.
    pub summary: String,
    /// When an evicted pod that is still there stops counting as disrupted.
    pub recheck_after: Option<Duration>,
}

/// `trySync`, with `failSafe` when the expected count can't be computed.
pub fn sync_pdb(input: SyncInput<'_>) -> DisruptionSync {
    let pdb = input.pdb;
    let me = ObjectRef::from_object(pdb);
    let mut actions = Vec::new();
    if input.pods.is_empty() {
        actions.push(event(
            me.clone(),
            EventType::Normal,
            "NoPods",
            "No matching pods found",
        ));
    }
    let expected = match expected_pod_count(pdb, input.pods, input.scale_of) {
        Ok(expected) => expected,
        Err(error) => {
            actions.push(event(
                me,
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                format!("Failed to calculate the number of expected pods: {error}"),
            ));
            let summary = format!("sync failed: {error} → disruptionsAllowed 0 (SyncFailed)");
            actions.extend(fail_safe(pdb, &error, input.now));
            return DisruptionSync {
                actions,
                summary,
                recheck_after: None,
            };
        }
    };
    if !expected.unmanaged.is_empty() {
        actions.push(event(
            me,
            EventType::Warning,
            "UnmanagedPods",
            format!(
                "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
                go_selector(pdb)
            ),
        ));
    }
    let (disrupted, recheck) = build_disrupted_pod_map(input.pods, pdb, input.now);
    let current_healthy = count_healthy_pods(input.pods, &disrupted, input.now);
    let mut allowed = current_healthy - expected.desired_healthy;
    if expected.count <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let summary = format!(
        "{current_healthy} healthy, {} desired of {} expected → {allowed} disruption(s) allowed{}",
        expected.desired_healthy,
        expected.count,
        if disrupted.is_empty() {
            String::new()
        } else {
            format!(" ({} evicted, not yet gone)", disrupted.len())
        }
    );
    let status = pdb.status.clone().unwrap_or_default();
    let generation = pdb.metadata.generation;
    let same = status.current_healthy == current_healthy
        && status.desired_healthy == expected.desired_healthy
        && status.expected_pods == expected.count
        && status.disruptions_allowed == allowed
        && status.disrupted_pods.clone().unwrap_or_default() == disrupted
        && status.observed_generation == generation
        && conditions_are_up_to_date(&status);
    if !same {
        let mut new_status = PodDisruptionBudgetStatus {
            current_healthy,
            desired_healthy: expected.desired_healthy,
            expected_pods: expected.count,
            disruptions_allowed: allowed,
            disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
            observed_generation: generation,
            conditions: status.conditions,
        };
        update_disruption_allowed_condition(&mut new_status, input.now);
        let mut updated = pdb.clone();
        updated.status = Some(new_status);
        actions.push(Action::UpdatePodDisruptionBudgetStatus(Box::new(updated)));
    }
    DisruptionSync {
        actions,
        summary,
        recheck_after: recheck
            .map(|at| Duration::try_from(at.duration_since(input.now)).unwrap_or(Duration::ZERO)),
    }
}

/// The expected pods, the healthy ones wanted, and the pods without a controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// `expectedPods`.
    pub count: i32,
    /// `desiredHealthy`.
    pub desired_healthy: i32,
    /// Names of selected pods that have no controller.
    pub unmanaged: Vec<String>,
}

/// `getExpectedPodCount`.
pub fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scale_of: &dyn Fn(&OwnerReference, &str) -> Option<ControllerScale>,
) -> Result<Expected, String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let scaled = |v: &IntOrString, total: i32| {
        get_scaled_value_from_int_or_percent(v, total, true).map_err(|e| e.to_string())
    };
    if let Some(max_unavailable) = &spec.max_unavailable {
        let (count, unmanaged) = expected_scale(pods, scale_of)?;
        let max = scaled(max_unavailable, count)?;
        return Ok(Expected {
            count,
            desired_healthy: (count - max).max(0),
            unmanaged,
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Expected {
            count: pods.len() as i32,
            desired_healthy: *n,
            unmanaged: Vec::new(),
        }),
        Some(percent) => {
            let (count, unmanaged) = expected_scale(pods, scale_of)?;
            Ok(Expected {
                count,
                desired_healthy: scaled(percent, count)?,
                unmanaged,
            })
        }
        None => Ok(Expected {
            count: 0,
            desired_healthy: 0,
            unmanaged: Vec::new(),
        }),
    }
}

/// `getExpectedScale`: the sum of the scales of the pods' controllers, each counted once.
fn expected_scale(
    pods: &[&Pod],
    scale_of: &dyn Fn(&OwnerReference, &str) -> Option<ControllerScale>,
) -> Result<(i32, Vec<String>), String> {
    let mut scales: HashMap<String, i32> = HashMap::new();
    let mut unmanaged = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(r) = get_controller_of(&pod.metadata) else {
            unmanaged.push(name);
            continue;
        };
        if scales.contains_key(&r.uid) {
            continue;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        match scale_of(r, namespace) {
            Some(found) => {
                scales.insert(found.uid, found.scale);
            }
            None => return Err(format!("found no controllers for pod {name:?}")),
        }
    }
    Ok((scales.values().sum(), unmanaged))
}

/// `buildDisruptedPodMap`: the evicted pods still there and within [`DELETION_TIMEOUT`], and
/// when the first of them times out.
pub fn build_disrupted_pod_map(
    pods: &[&Pod],
    pdb: &PodDisruptionBudget,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let mut result = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let Some(disrupted) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return (result, recheck);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = disrupted.get(&name) else {
            continue;
        };
        let expected_deletion = at.0 + DELETION_TIMEOUT;
        if expected_deletion >= now {
            if recheck.is_none_or(|r| expected_deletion < r) {
                recheck = Some(expected_deletion);
            }
            result.insert(name, at.clone());
        }
    }
    (result, recheck)
}

/// `countHealthyPods`: Ready pods that are neither being deleted nor recently evicted.
pub fn count_healthy_pods(
    pods: &[&Pod],
    disrupted: &BTreeMap<String, Time>,
    now: Timestamp,
) -> i32 {
    pods.iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            disrupted
                .get(name)
                .is_none_or(|at| at.0 + DELETION_TIMEOUT <= now)
        })
        .filter(|pod| is_pod_ready(pod))
        .count() as i32
}

/// `ConditionsAreUpToDate`: the condition says what `disruptionsAllowed` says, for the
/// observed generation.
fn conditions_are_up_to_date(status: &PodDisruptionBudgetStatus) -> bool {
    let want = if status.disruptions_allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    status.conditions.iter().flatten().any(|c| {
        c.type_ == DISRUPTION_ALLOWED
            && c.observed_generation == status.observed_generation
            && (c.status.as_str(), c.reason.as_str()) == want
    })
}

/// `apimeta.SetStatusCondition` for `DisruptionAllowed`.
fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    value: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let observed = status.observed_generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = Time(now);
            }
            c.status = value.to_owned();
            c.reason = reason.to_owned();
            c.message = message;
            c.observed_generation = observed;
        }
        None => conditions.push(Condition {
            type_: DISRUPTION_ALLOWED.to_owned(),
            status: value.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: Time(now),
            observed_generation: observed,
        }),
    }
}

/// `UpdateDisruptionAllowedCondition`.
pub fn update_disruption_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Timestamp) {
    if status.disruptions_allowed > 0 {
        set_condition(status, "True", "SufficientPods", String::new(), now);
    } else {
        set_condition(status, "False", "InsufficientPods", String::new(), now);
    }
}

/// `failSafe`: no disruption allowed, with the reason why in the condition.
fn fail_safe(pdb: &PodDisruptionBudget, error: &str, now: Timestamp) -> Option<Action> {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    set_condition(&mut status, "False", "SyncFailed", error.to_owned(), now);
    if pdb.status.as_ref() == Some(&status) {
        return None;
    }
    let mut updated = pdb.clone();
    updated.status = Some(status);
    Some(Action::UpdatePodDisruptionBudgetStatus(Box::new(updated)))
}

/// The selector as Go's `%v` prints a `*metav1.LabelSelector` in the UnmanagedPods event.
fn go_selector(pdb: &PodDisruptionBudget) -> String {
    let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return "nil".to_owned();
    };
    let labels: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    let exprs: Vec<String> = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            format!(
                "{{Key:{},Operator:{},Values:[{}],}}",
                e.key,
                e.operator,
                e.values.clone().unwrap_or_default().join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{}}},MatchExpressions:[]LabelSelectorRequirement{{{}}},}}",
        labels.join(","),
        exprs.join(",")
    )
}

#[cfg(test)]
mod tests;
