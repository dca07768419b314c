//! Why a metric gives no replica count: the error each metrics client and
//! `computeReplicasForMetric` word, with the condition reason it sets.
//!
//! Mirrors the `FailedGet*Metric` paths of `pkg/controller/podautoscaler/horizontal.go`
//! (`computeStatusForPodsMetric`, `computeStatusForObjectMetric`,
//! `computeStatusForExternalMetric`) over clients that find no custom or external metrics API
//! served: miniplane serves neither, so every `Pods`, `Object` and `External` metric fails as
//! it does on a cluster without an adapter.
//!
//! Simplification: an external metric's selector is printed as its JSON where Kubernetes
//! prints the Go struct with `%+v`.

use k8s_openapi::api::autoscaling::v2::MetricSpec;

/// Why one metric gave no count: the condition's reason, the error the condition and the
/// Event carry, and that error as `computeReplicasForMetric` wraps it for the
/// `FailedComputeMetricsReplicas` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricError {
    /// The `ScalingActive` condition's reason and the Event's (`FailedGetResourceMetric`).
    pub reason: &'static str,
    /// The error the condition and the Event carry.
    pub message: String,
    /// The error as the `invalid metrics` message quotes it.
    pub wrapped: String,
}

/// The message of the custom and external metrics clients when those APIs are not served.
const NO_CUSTOM_METRICS: &str = "unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered";
const NO_EXTERNAL_METRICS: &str = "unable to fetch metrics from external metrics API: no external metrics API (external.metrics.k8s.io) registered";

/// `%+v` of an optional label selector, as the external metric messages print it (simplified:
/// the selector's JSON).
fn selector_text(
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> String {
    sel.map_or_else(
        || "nil".to_owned(),
        |s| serde_json::to_string(s).unwrap_or_default(),
    )
}

/// A metric of a type whose API (custom or external metrics) is not served.
pub fn unserved_metric(spec: &MetricSpec, namespace: &str) -> MetricError {
    match spec.type_.as_str() {
        "Pods" => {
            let name = spec
                .pods
                .as_ref()
                .map(|p| p.metric.name.clone())
                .unwrap_or_default();
            let message = format!("unable to get metric {name}: {NO_CUSTOM_METRICS}");
            MetricError {
                reason: "FailedGetPodsMetric",
                wrapped: format!("failed to get pods metric value: {message}"),
                message,
            }
        }
        "Object" => {
            let (name, kind, object, average) = spec
                .object
                .as_ref()
                .map(|o| {
                    (
                        o.metric.name.clone(),
                        o.described_object.kind.clone(),
                        o.described_object.name.clone(),
                        o.target.type_ == "AverageValue",
                    )
                })
                .unwrap_or_default();
            let inner = format!(
                "unable to get metric {name} on {kind} {namespace}/{object}: {NO_CUSTOM_METRICS}"
            );
            let message = if average {
                format!("failed to get {name} object metric: {inner}")
            } else {
                inner
            };
            MetricError {
                reason: "FailedGetObjectMetric",
                wrapped: format!("failed to get object metric value: {message}"),
                message,
            }
        }
        "External" => {
            let (name, selector, average) = spec
                .external
                .as_ref()
                .map(|e| {
                    (
                        e.metric.name.clone(),
                        selector_text(e.metric.selector.as_ref()),
                        e.target.average_value.is_some(),
                    )
                })
                .unwrap_or_default();
            let inner = format!(
                "unable to get external metric {namespace}/{name}/{selector}: {NO_EXTERNAL_METRICS}"
            );
            let message = if average {
                format!("failed to get {name} external metric: {inner}")
            } else {
                format!("failed to get external metric {name}: {inner}")
            };
            MetricError {
                reason: "FailedGetExternalMetric",
                wrapped: format!("failed to get {name} external metric value: {message}"),
                message,
            }
        }
        other => {
            let message = format!("unknown metric source type \"{other}\"");
            MetricError {
                reason: "InvalidMetricSourceType",
                wrapped: message.clone(),
                message,
            }
        }
    }
}
