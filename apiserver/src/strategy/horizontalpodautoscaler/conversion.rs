//! autoscaling/v1 ↔ autoscaling/v2 HorizontalPodAutoscaler, as
//! `pkg/apis/autoscaling/v1/conversion.go` converts through the internal (v2-shaped) type.
//!
//! ```text
//!   v2 → v1   spec.metrics: the first cpu Utilization target ─▶ spec.targetCPUUtilizationPercentage
//!             every other metric       ─▶ annotation autoscaling.alpha.kubernetes.io/metrics
//!             spec.behavior            ─▶ annotation .../behavior   (internal Go field names)
//!             status.currentMetrics    ─▶ annotation .../current-metrics (and the cpu one
//!                                         ─▶ status.currentCPUUtilizationPercentage)
//!             status.conditions        ─▶ annotation .../conditions
//!   v1 → v2   the same back; the annotations are dropped; a spec without any metric gets
//!             cpu at 80% (what v1's controller did implicitly)
//! ```
//!
//! The round-trip annotations a client sends on a v2 object are dropped too
//! (`DropRoundTripHorizontalPodAutoscalerAnnotations`).

use super::v1_metrics::{self, Go};
use super::{cpu_utilization_metric, default_cpu_metric};
use k8s_openapi::api::autoscaling::v1;
use k8s_openapi::api::autoscaling::v2;
use serde_json::Value;
use std::collections::BTreeMap;

/// `autoscaling.MetricSpecsAnnotation`: the metrics v1 cannot express.
pub const METRIC_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `autoscaling.MetricStatusesAnnotation`: the status of every metric.
pub const METRIC_STATUSES_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `autoscaling.HorizontalPodAutoscalerConditionsAnnotation`: the status conditions.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `autoscaling.BehaviorSpecsAnnotation`: `spec.behavior`.
pub const BEHAVIOR_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// `autoscaling.ToleranceScaleDownAnnotation` (the v2beta2 round trip of the tolerances).
pub const TOLERANCE_SCALE_DOWN_ANNOTATION: &str =
    "autoscaling.alpha.kubernetes.io/scale-down-tolerance";
/// `autoscaling.ToleranceScaleUpAnnotation`.
pub const TOLERANCE_SCALE_UP_ANNOTATION: &str =
    "autoscaling.alpha.kubernetes.io/scale-up-tolerance";

const ROUND_TRIP_ANNOTATIONS: [&str; 6] = [
    METRIC_SPECS_ANNOTATION,
    METRIC_STATUSES_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_SPECS_ANNOTATION,
    TOLERANCE_SCALE_DOWN_ANNOTATION,
    TOLERANCE_SCALE_UP_ANNOTATION,
];

/// `DropRoundTripHorizontalPodAutoscalerAnnotations`.
pub fn drop_round_trip_annotations(annotations: &mut BTreeMap<String, String>) {
    annotations.retain(|k, _| !ROUND_TRIP_ANNOTATIONS.contains(&k.as_str()));
}

/// Whether a v2 metric is the one v1's `targetCPUUtilizationPercentage` holds.
fn is_cpu_utilization(m: &v2::MetricSpec) -> bool {
    m.type_ == "Resource"
        && m.resource
            .as_ref()
            .is_some_and(|r| r.name == "cpu" && r.target.average_utilization.is_some())
}

/// `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`.
pub fn v2_to_v1(hpa: &v2::HorizontalPodAutoscaler) -> v1::HorizontalPodAutoscaler {
    let spec = hpa.spec.clone().unwrap_or_default();
    let status = hpa.status.clone().unwrap_or_default();
    let metrics = spec.metrics.clone().unwrap_or_default();
    let mut metadata = hpa.metadata.clone();
    let mut annotations = metadata.annotations.take();
    if let Some(a) = annotations.as_mut() {
        drop_round_trip_annotations(a);
    }
    let mut add = |key: &str, value: String| {
        annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value);
    };
    let others: Vec<Go> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(v1_metrics::metric_spec)
        .collect();
    if !others.is_empty() {
        add(METRIC_SPECS_ANNOTATION, Go::Arr(others).marshal());
    }
    let current = status.current_metrics.clone().unwrap_or_default();
    if !current.is_empty() {
        let items = current.iter().map(v1_metrics::metric_status).collect();
        add(METRIC_STATUSES_ANNOTATION, Go::Arr(items).marshal());
    }
    if let Some(b) = &spec.behavior {
        add(BEHAVIOR_SPECS_ANNOTATION, v1_metrics::behavior(b).marshal());
    }
    let conditions = status.conditions.clone().unwrap_or_default();
    if !conditions.is_empty() {
        let items = conditions.iter().map(v1_metrics::condition).collect();
        add(CONDITIONS_ANNOTATION, Go::Arr(items).marshal());
    }
    metadata.annotations = annotations;
    let target_cpu = metrics
        .iter()
        .find(|m| is_cpu_utilization(m))
        .and_then(|m| m.resource.as_ref())
        .and_then(|r| r.target.average_utilization);
    // Each cpu status with a utilization overwrites the last (the Go loop does not break).
    let current_cpu = current
        .iter()
        .filter(|m| m.type_ == "Resource")
        .filter_map(|m| m.resource.as_ref())
        .filter(|r| r.name == "cpu")
        .filter_map(|r| r.current.average_utilization)
        .next_back();
    v1::HorizontalPodAutoscaler {
        metadata,
        spec: Some(v1::HorizontalPodAutoscalerSpec {
            scale_target_ref: v1::CrossVersionObjectReference {
                api_version: spec.scale_target_ref.api_version.clone(),
                kind: spec.scale_target_ref.kind.clone(),
                name: spec.scale_target_ref.name.clone(),
            },
            min_replicas: spec.min_replicas,
            max_replicas: spec.max_replicas,
            target_cpu_utilization_percentage: target_cpu,
        }),
        status: Some(v1::HorizontalPodAutoscalerStatus {
            observed_generation: status.observed_generation,
            last_scale_time: status.last_scale_time.clone(),
            current_replicas: status.current_replicas.unwrap_or(0),
            desired_replicas: status.desired_replicas,
            current_cpu_utilization_percentage: current_cpu,
        }),
    }
}

/// An annotation's value parsed as JSON, if present and well formed (Kubernetes ignores one
/// that does not parse).
fn annotation_json(annotations: Option<&BTreeMap<String, String>>, key: &str) -> Option<Value> {
    annotations?
        .get(key)
        .and_then(|raw| serde_json::from_str(raw).ok())
}

/// `Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`.
pub fn v1_to_v2(hpa: &v1::HorizontalPodAutoscaler) -> v2::HorizontalPodAutoscaler {
    let spec = hpa.spec.clone().unwrap_or_default();
    let status = hpa.status.clone().unwrap_or_default();
    let annotations = hpa.metadata.annotations.as_ref();
    let mut metrics: Vec<v2::MetricSpec> = spec
        .target_cpu_utilization_percentage
        .map(cpu_utilization_metric)
        .into_iter()
        .collect();
    if let Some(Value::Array(others)) = annotation_json(annotations, METRIC_SPECS_ANNOTATION) {
        // The cpu metric of the spec goes after the annotation's.
        let mut all: Vec<v2::MetricSpec> =
            others.iter().map(v1_metrics::read_metric_spec).collect();
        all.append(&mut metrics);
        metrics = all;
    }
    let behavior = annotation_json(annotations, BEHAVIOR_SPECS_ANNOTATION)
        .as_ref()
        .and_then(v1_metrics::read_behavior);
    let mut current_metrics = status.current_cpu_utilization_percentage.map(|u| {
        vec![v2::MetricStatus {
            type_: "Resource".into(),
            resource: Some(v2::ResourceMetricStatus {
                name: "cpu".into(),
                current: v2::MetricValueStatus {
                    average_utilization: Some(u),
                    ..Default::default()
                },
            }),
            ..Default::default()
        }]
    });
    if let Some(Value::Array(items)) = annotation_json(annotations, METRIC_STATUSES_ANNOTATION) {
        // The annotation has more than the cpu utilization: it wins.
        current_metrics = Some(items.iter().map(v1_metrics::read_metric_status).collect());
    }
    if metrics.is_empty() {
        metrics.push(default_cpu_metric());
    }
    let conditions = match annotation_json(annotations, CONDITIONS_ANNOTATION) {
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .filter_map(v1_metrics::read_condition)
                .collect(),
        ),
        _ => None,
    };
    let mut metadata = hpa.metadata.clone();
    if let Some(a) = metadata.annotations.as_mut() {
        drop_round_trip_annotations(a);
    }
    v2::HorizontalPodAutoscaler {
        metadata,
        spec: Some(v2::HorizontalPodAutoscalerSpec {
            scale_target_ref: v2::CrossVersionObjectReference {
                api_version: spec.scale_target_ref.api_version.clone(),
                kind: spec.scale_target_ref.kind.clone(),
                name: spec.scale_target_ref.name.clone(),
            },
            min_replicas: spec.min_replicas,
            max_replicas: spec.max_replicas,
            metrics: Some(metrics),
            behavior,
        }),
        status: Some(v2::HorizontalPodAutoscalerStatus {
            observed_generation: status.observed_generation,
            last_scale_time: status.last_scale_time.clone(),
            // `currentReplicas` is `omitempty` in v2.
            current_replicas: (status.current_replicas != 0).then_some(status.current_replicas),
            desired_replicas: status.desired_replicas,
            current_metrics,
            conditions,
        }),
    }
}

#[cfg(test)]
#[path = "conversion_tests.rs"]
mod tests;
