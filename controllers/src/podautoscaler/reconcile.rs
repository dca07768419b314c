//! One sync of a HorizontalPodAutoscaler (`reconcileAutoscaler`): the count its metrics ask
//! for, normalized, with the status, conditions and Events Kubernetes writes.
//!
//! Mirrors `pkg/controller/podautoscaler/horizontal.go` (`reconcileAutoscaler`,
//! `computeReplicasForMetrics`, `computeStatusForResourceMetric(Generic)`, `setCondition`,
//! `setCurrentReplicasAndMetricsInStatus`, `setStatus`). The shell reads `/scale`, the pods
//! and the metrics, calls [`reconcile`], writes `/scale` when [`Decision::rescale`] says so,
//! then [`after_rescale`], then the status.

use super::behavior::{self, History, StepCondition};
use super::metric_errors::{MetricError, unserved_metric};
use super::metrics::{PodMetrics, resource_metric};
use super::replica_calculator::{CalculatorConfig, PodInfo, ResourceTarget, resource_replicas};
use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricValueStatus,
    ResourceMetricStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// An Event for the HorizontalPodAutoscaler: type (`Normal`/`Warning`), reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HpaEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// Kubernetes' reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// What one sync decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The count to write to `/scale` when `rescale`.
    pub desired_replicas: i32,
    /// Whether to write `/scale`.
    pub rescale: bool,
    /// The reason for the rescale (`SuccessfulRescale`'s "reason: ...").
    pub rescale_reason: String,
    /// The status to write (after [`after_rescale`] when rescaling).
    pub status: HorizontalPodAutoscalerStatus,
    /// The Events to record.
    pub events: Vec<HpaEvent>,
    /// The arithmetic of the decision, for the trace.
    pub arithmetic: Vec<String>,
    /// A one-line summary.
    pub summary: String,
    /// The error `reconcileAutoscaler` returns (logged and traced; the key is synced again
    /// after the sync period all the same), e.g. when no metric gave a count.
    pub error: Option<String>,
}

/// Sets (or replaces) a condition, keeping its transition time when the status is unchanged
/// (`setConditionInList`).
pub fn set_condition(
    status: &mut HorizontalPodAutoscalerStatus,
    type_: &str,
    cond_status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let existing = conditions.iter_mut().find(|c| c.type_ == type_);
    match existing {
        Some(c) => {
            if c.status != cond_status {
                c.last_transition_time = Some(Time(now));
            }
            c.status = cond_status.into();
            c.reason = Some(reason.into());
            c.message = Some(message);
        }
        None => conditions.push(HorizontalPodAutoscalerCondition {
            type_: type_.into(),
            status: cond_status.into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(Time(now)),
        }),
    }
}

fn apply(status: &mut HorizontalPodAutoscalerStatus, c: &StepCondition, now: Timestamp) {
    set_condition(status, c.type_, c.status, c.reason, c.message.into(), now);
}

/// The status after a failed GET of `/scale`, and its Event.
pub fn failed_get_scale(
    hpa: &HorizontalPodAutoscaler,
    err: &str,
    now: Timestamp,
) -> (HorizontalPodAutoscalerStatus, HpaEvent) {
    let mut status = hpa.status.clone().unwrap_or_default();
    set_condition(
        &mut status,
        "AbleToScale",
        "False",
        "FailedGetScale",
        format!("the HPA controller was unable to get the target's current scale: {err}"),
        now,
    );
    (
        status,
        HpaEvent {
            type_: "Warning",
            reason: "FailedGetScale",
            message: err.into(),
        },
    )
}

/// Completes a decision after the shell's `/scale` write: `SucceededRescale` and the
/// `SuccessfulRescale` Event, or `FailedUpdateScale` and `FailedRescale`.
pub fn after_rescale(decision: &mut Decision, result: Result<(), String>, now: Timestamp) {
    let (desired, reason) = (decision.desired_replicas, decision.rescale_reason.clone());
    match result {
        Ok(()) => {
            set_condition(
                &mut decision.status,
                "AbleToScale",
                "True",
                "SucceededRescale",
                format!("the HPA controller was able to update the target scale to {desired}"),
                now,
            );
            decision.events.push(HpaEvent {
                type_: "Normal",
                reason: "SuccessfulRescale",
                message: format!("New size: {desired}; reason: {reason}"),
            });
            decision.status.last_scale_time = Some(Time(now));
        }
        Err(e) => {
            set_condition(
                &mut decision.status,
                "AbleToScale",
                "False",
                "FailedUpdateScale",
                format!("the HPA controller was unable to update the target scale: {e}"),
                now,
            );
            decision.events.push(HpaEvent {
                type_: "Warning",
                reason: "FailedRescale",
                message: format!("New size: {desired}; reason: {reason}; error: {e}"),
            });
        }
    }
}

/// One metric's outcome: the count, the name used in messages, and its status entry.
struct MetricOutcome {
    replicas: i32,
    name: String,
    status: MetricStatus,
}

/// What the shell observed of the target: its `/scale` and the pods and metrics it selects.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The target's `/scale` `spec.replicas`.
    pub scale_replicas: i32,
    /// The target's `/scale` `status.selector` (a label selector string).
    pub selector: &'a str,
    /// The pods the selector selects.
    pub pods: &'a [PodInfo],
    /// The `PodMetrics` list of the selected pods, or the error listing it (the client's
    /// message, e.g. `the server could not find the requested resource (get
    /// pods.metrics.k8s.io)`).
    pub metrics: &'a Result<Vec<PodMetrics>, String>,
}

fn milli_quantity(milli: i64) -> Quantity {
    if milli % 1000 == 0 {
        Quantity(format!("{}", milli / 1000))
    } else {
        Quantity(format!("{milli}m"))
    }
}

/// `computeReplicasForMetric` of one metric: the count it asks for, or why it has none.
fn compute_metric(
    spec: &MetricSpec,
    current: i32,
    namespace: &str,
    observed: &Observed<'_>,
    config: &CalculatorConfig,
    now: Timestamp,
    arithmetic: &mut Vec<String>,
) -> Result<MetricOutcome, MetricError> {
    let (name, target, container) = match (
        spec.type_.as_str(),
        &spec.resource,
        &spec.container_resource,
    ) {
        ("Resource", Some(r), _) => (r.name.clone(), &r.target, None),
        ("ContainerResource", _, Some(r)) => (r.name.clone(), &r.target, Some(r.container.clone())),
        _ => return Err(unserved_metric(spec, namespace)),
    };
    let (reason, wrap) = match &container {
        None => (
            "FailedGetResourceMetric",
            format!("failed to get {name} resource metric value: "),
        ),
        Some(c) => (
            "FailedGetContainerResourceMetric",
            format!("failed to get {c} container metric value: "),
        ),
    };
    let fail = |message: String| MetricError {
        reason,
        wrapped: format!("{wrap}{message}"),
        message,
    };
    let resource_target = if let Some(v) = &target.average_value {
        let q = apimachinery::resource::quantity::Quantity::parse(&v.0)
            .map_err(|e| fail(format!("failed to get {name} usage: {e}")))?;
        ResourceTarget::AverageValue(q.milli_value())
    } else if let Some(u) = target.average_utilization {
        ResourceTarget::Utilization(u)
    } else {
        return Err(fail(
            "invalid resource metric source: neither a utilization target nor a value target was set"
                .into(),
        ));
    };
    let what = match resource_target {
        ResourceTarget::Utilization(_) => "utilization",
        ResourceTarget::AverageValue(_) => "usage",
    };
    // `GetResourceMetric` of the resource metrics client, then the calculator.
    let pod_metrics = match observed.metrics {
        Err(e) => Err(format!(
            "unable to get metrics for resource {name}: unable to fetch metrics from resource metrics API: {e}"
        )),
        Ok(m) if m.is_empty() => Err(format!(
            "unable to get metrics for resource {name}: no metrics returned from resource metrics API"
        )),
        Ok(m) => Ok(resource_metric(m, &name, container.as_deref())),
    }
    .map_err(|inner| fail(format!("failed to get {name} {what}: {inner}")))?;
    let rec = resource_replicas(
        current,
        resource_target,
        &name,
        container.as_deref(),
        observed.pods,
        &pod_metrics,
        config,
        now,
    )
    .map_err(|inner| fail(format!("failed to get {name} {what}: {inner}")))?;
    let label = match (&container, resource_target) {
        (None, ResourceTarget::Utilization(_)) => {
            format!("{name} resource utilization (percentage of request)")
        }
        (None, ResourceTarget::AverageValue(_)) => format!("{name} resource"),
        (Some(_), ResourceTarget::Utilization(_)) => {
            format!("{name} container resource utilization (percentage of request)")
        }
        (Some(_), ResourceTarget::AverageValue(_)) => format!("{name} resource"),
    };
    arithmetic.push(format!("{label}: {}", rec.arithmetic));
    let current_value = MetricValueStatus {
        average_utilization: matches!(resource_target, ResourceTarget::Utilization(_))
            .then_some(rec.utilization),
        average_value: Some(milli_quantity(rec.raw_average)),
        value: None,
    };
    let status = match container {
        None => MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name,
                current: current_value,
            }),
            ..Default::default()
        },
        Some(container) => MetricStatus {
            type_: "ContainerResource".into(),
            container_resource: Some(ContainerResourceMetricStatus {
                name,
                container,
                current: current_value,
            }),
            ..Default::default()
        },
    };
    Ok(MetricOutcome {
        replicas: rec.replicas,
        name: label,
        status,
    })
}

/// What `computeReplicasForMetrics` found: the highest count and its metric, or the error that
/// stops the sync (every metric invalid, or some invalid while the rest would scale down).
struct MetricsResult {
    replicas: i32,
    metric: String,
    statuses: Option<Vec<MetricStatus>>,
    error: Option<String>,
}

/// `computeReplicasForMetrics` (with `validateAndParseSelector`'s checks of the selector).
#[allow(clippy::too_many_arguments)]
fn compute_metrics(
    hpa: &HorizontalPodAutoscaler,
    specs: &[MetricSpec],
    current: i32,
    observed: &Observed<'_>,
    config: &CalculatorConfig,
    status: &mut HorizontalPodAutoscalerStatus,
    events: &mut Vec<HpaEvent>,
    arithmetic: &mut Vec<String>,
    now: Timestamp,
) -> MetricsResult {
    let failed = |error: String| MetricsResult {
        replicas: -1,
        metric: String::new(),
        statuses: None,
        error: Some(error),
    };
    if observed.selector.is_empty() {
        let msg = "selector is required".to_owned();
        events.push(warning("SelectorRequired", msg.clone()));
        set_condition(
            status,
            "ScalingActive",
            "False",
            "InvalidSelector",
            "the HPA target's scale is missing a selector".into(),
            now,
        );
        return failed(msg);
    }
    if let Err(e) = apimachinery::Selector::parse(observed.selector) {
        let msg =
            format!("couldn't convert selector into a corresponding internal selector object: {e}");
        events.push(warning("InvalidSelector", msg.clone()));
        set_condition(
            status,
            "ScalingActive",
            "False",
            "InvalidSelector",
            msg.clone(),
            now,
        );
        return failed(msg);
    }
    let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
    let mut statuses = Vec::with_capacity(specs.len());
    let (mut replicas, mut metric) = (0i32, String::new());
    let (mut invalid, mut first): (usize, Option<MetricError>) = (0, None);
    for spec in specs {
        match compute_metric(spec, current, namespace, observed, config, now, arithmetic) {
            Ok(o) => {
                if replicas == 0 || o.replicas > replicas {
                    replicas = o.replicas;
                    metric = o.name;
                }
                statuses.push(o.status);
            }
            Err(e) => {
                // `getUnableComputeReplicaCountCondition` records an Event per failed metric.
                events.push(warning(e.reason, e.message.clone()));
                statuses.push(MetricStatus::default());
                invalid += 1;
                first.get_or_insert(e);
            }
        }
    }
    let error = first.as_ref().map(|e| {
        format!(
            "invalid metrics ({invalid} invalid out of {}), first error is: {}",
            specs.len(),
            e.wrapped
        )
    });
    if let Some(e) = &first
        && (invalid >= specs.len() || replicas < current)
    {
        set_condition(
            status,
            "ScalingActive",
            "False",
            e.reason,
            format!(
                "the HPA was unable to compute the replica count: {}",
                e.message
            ),
            now,
        );
        return MetricsResult {
            replicas: -1,
            metric: String::new(),
            statuses: Some(statuses),
            error,
        };
    }
    set_condition(
        status,
        "ScalingActive",
        "True",
        "ValidMetricFound",
        format!("the HPA was able to successfully calculate a replica count from {metric}"),
        now,
    );
    MetricsResult {
        replicas,
        metric,
        statuses: Some(statuses),
        error,
    }
}

fn warning(reason: &'static str, message: String) -> HpaEvent {
    HpaEvent {
        type_: "Warning",
        reason,
        message,
    }
}

/// `reconcileAutoscaler` after `/scale` was read: the count to write, the status and Events.
pub fn reconcile(
    hpa: &HorizontalPodAutoscaler,
    observed: &Observed<'_>,
    history: &mut History,
    config: &CalculatorConfig,
    now: Timestamp,
) -> Decision {
    let spec = hpa.spec.as_ref().cloned().unwrap_or_default();
    let mut status = hpa.status.clone().unwrap_or_default();
    let reference = format!(
        "{}/{}",
        spec.scale_target_ref.kind, spec.scale_target_ref.name
    );
    let min = spec.min_replicas.unwrap_or(1);
    let max = spec.max_replicas;
    let current = observed.scale_replicas;
    set_condition(
        &mut status,
        "AbleToScale",
        "True",
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale".into(),
        now,
    );
    behavior::record_initial_recommendation(history, current, now);
    let mut events = Vec::new();
    let mut arithmetic = Vec::new();
    let mut metric_statuses = None;
    // An invalid metric beside valid ones: the sync goes on, the error is returned after.
    let mut error = None;
    let (desired, rescale_reason, rescale) = if current == 0 && min != 0 {
        set_condition(
            &mut status,
            "ScalingActive",
            "False",
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
            now,
        );
        arithmetic.push("target scaled to 0: autoscaling disabled".into());
        (0, String::new(), false)
    } else if current > max {
        arithmetic.push(format!(
            "current {current} > maxReplicas {max}: desired = {max}"
        ));
        (
            max,
            "Current number of replicas above Spec.MaxReplicas".to_string(),
            true,
        )
    } else if current < min {
        arithmetic.push(format!(
            "current {current} < minReplicas {min}: desired = {min}"
        ));
        (
            min,
            "Current number of replicas below Spec.MinReplicas".to_string(),
            true,
        )
    } else {
        let specs = spec.metrics.clone().unwrap_or_default();
        let computed = compute_metrics(
            hpa,
            &specs,
            current,
            observed,
            config,
            &mut status,
            &mut events,
            &mut arithmetic,
            now,
        );
        metric_statuses = computed.statuses;
        if computed.replicas == -1 {
            let err = computed.error.unwrap_or_default();
            events.push(warning("FailedComputeMetricsReplicas", err.clone()));
            // `setCurrentReplicasAndMetricsInStatus`: the desired count stays what it was.
            status.current_replicas = Some(current);
            status.current_metrics = metric_statuses;
            arithmetic.push(format!("no count from the metrics: {err}"));
            return Decision {
                desired_replicas: current,
                rescale: false,
                rescale_reason: String::new(),
                status,
                events,
                summary: format!("{reference}: keep {current}, metrics invalid"),
                error: Some(format!(
                    "failed to compute desired number of replicas based on listed metrics for {reference}: {err}"
                )),
                arithmetic,
            };
        }
        error = computed.error;
        let proposed = computed.replicas;
        let normalized = match &spec.behavior {
            None => behavior::normalize(history, current, proposed, min, max, now),
            Some(b) => {
                behavior::normalize_with_behavior(history, b, current, proposed, min, max, now)
            }
        };
        for c in &normalized.conditions {
            apply(&mut status, c, now);
        }
        arithmetic.push(normalized.arithmetic.clone());
        let reason = if proposed > current {
            format!("{} above target", computed.metric)
        } else if proposed < current {
            "All metrics below target".to_string()
        } else {
            String::new()
        };
        (normalized.replicas, reason, normalized.replicas != current)
    };
    if rescale && let Some(b) = &spec.behavior {
        behavior::store_scale_event(history, b, current, desired, now);
    }
    // `setStatus`: the desired count is the current one when not rescaling.
    let desired = if rescale { desired } else { current };
    status.current_replicas = Some(current);
    status.desired_replicas = desired;
    status.current_metrics = metric_statuses;
    let summary = if rescale {
        format!("{reference}: {current} → {desired} ({rescale_reason})")
    } else {
        format!("{reference}: keep {current}")
    };
    Decision {
        desired_replicas: desired,
        rescale,
        rescale_reason,
        status,
        events,
        arithmetic,
        summary,
        error,
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
