//! `kubectl get hpa`: `printHorizontalPodAutoscaler` and `formatHPAMetrics` of
//! `pkg/printers/internalversion/printers.go`, with its column definitions.
//!
//! ```text
//! NAME   REFERENCE        TARGETS              MINPODS   MAXPODS   REPLICAS   AGE
//! web    Deployment/web   cpu: <unknown>/50%   1         5         2          30s
//! ```
//!
//! TARGETS shows at most two metrics, then ` + N more...`; a metric without a current value
//! in `status.currentMetrics` prints `<unknown>`.

use super::super::TableColumn;
use super::super::table::{age_column, column, int, text};
use super::super::typed::age;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricSpec, MetricStatus};
use serde_json::Value;

/// How many metrics TARGETS lists before ` + N more...`.
const SHOWN_METRICS: usize = 2;
const UNKNOWN: &str = "<unknown>";

/// The columns after NAME, all `string` as Kubernetes declares them.
pub fn columns() -> Vec<TableColumn> {
    vec![
        column(
            "Reference",
            "string",
            "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
            0,
        ),
        column(
            "Targets",
            "string",
            "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.",
            0,
        ),
        column(
            "MinPods",
            "string",
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
            0,
        ),
        column(
            "MaxPods",
            "string",
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
            0,
        ),
        column(
            "Replicas",
            "string",
            "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
            0,
        ),
        age_column(),
    ]
}

/// The cells after NAME.
pub fn row(obj: &HorizontalPodAutoscaler, now: jiff::Timestamp) -> Vec<Value> {
    let spec = obj.spec.clone().unwrap_or_default();
    let status = obj.status.clone().unwrap_or_default();
    vec![
        text(format!(
            "{}/{}",
            spec.scale_target_ref.kind, spec.scale_target_ref.name
        )),
        text(format_metrics(
            spec.metrics.as_deref().unwrap_or_default(),
            status.current_metrics.as_deref().unwrap_or_default(),
        )),
        text(
            spec.min_replicas
                .map_or_else(|| "<unset>".to_owned(), |m| m.to_string()),
        ),
        int(spec.max_replicas),
        int(status.current_replicas.unwrap_or(0)),
        text(age(&obj.metadata, now)),
    ]
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> String {
    q.map_or_else(|| "<nil>".to_owned(), |q| q.0.clone())
}

/// One metric's cell of TARGETS.
fn format_metric(spec: &MetricSpec, status: Option<&MetricStatus>) -> String {
    let known = |current: Option<String>| current.unwrap_or_else(|| UNKNOWN.to_owned());
    match spec.type_.as_str() {
        "External" => {
            let Some(src) = &spec.external else {
                return "<unknown type>".into();
            };
            let cur = status.and_then(|s| s.external.as_ref()).map(|s| &s.current);
            match &src.target.average_value {
                Some(avg) => format!(
                    "{}/{} (avg)",
                    known(
                        cur.and_then(|c| c.average_value.as_ref())
                            .map(|q| q.0.clone())
                    ),
                    avg.0
                ),
                None => format!(
                    "{}/{}",
                    known(cur.map(|c| quantity(c.value.as_ref()))),
                    quantity(src.target.value.as_ref())
                ),
            }
        }
        "Pods" => {
            let Some(src) = &spec.pods else {
                return "<unknown type>".into();
            };
            let cur = status.and_then(|s| s.pods.as_ref());
            format!(
                "{}/{}",
                known(cur.map(|c| quantity(c.current.average_value.as_ref()))),
                quantity(src.target.average_value.as_ref())
            )
        }
        "Object" => {
            let Some(src) = &spec.object else {
                return "<unknown type>".into();
            };
            let cur = status.and_then(|s| s.object.as_ref()).map(|s| &s.current);
            match &src.target.average_value {
                Some(avg) => format!(
                    "{}/{} (avg)",
                    known(
                        cur.and_then(|c| c.average_value.as_ref())
                            .map(|q| q.0.clone())
                    ),
                    avg.0
                ),
                None => format!(
                    "{}/{}",
                    known(cur.map(|c| quantity(c.value.as_ref()))),
                    quantity(src.target.value.as_ref())
                ),
            }
        }
        "Resource" | "ContainerResource" => {
            let (name, target, current) = if spec.type_ == "Resource" {
                let Some(src) = &spec.resource else {
                    return "<unknown type>".into();
                };
                let cur = status.and_then(|s| s.resource.as_ref()).map(|s| &s.current);
                (&src.name, &src.target, cur)
            } else {
                let Some(src) = &spec.container_resource else {
                    return "<unknown type>".into();
                };
                let cur = status
                    .and_then(|s| s.container_resource.as_ref())
                    .map(|s| &s.current);
                (&src.name, &src.target, cur)
            };
            match &target.average_value {
                Some(avg) => format!(
                    "{name}: {}/{}",
                    known(current.map(|c| quantity(c.average_value.as_ref()))),
                    avg.0
                ),
                None => {
                    let cur = current
                        .and_then(|c| c.average_utilization)
                        .map(|u| format!("{u}%"));
                    let want = target
                        .average_utilization
                        .map_or_else(|| "<auto>".to_owned(), |u| format!("{u}%"));
                    format!("{name}: {}/{want}", known(cur))
                }
            }
        }
        _ => "<unknown type>".into(),
    }
}

/// `formatHPAMetrics`: `cpu: 45%/50%`, `<none>` without metrics, at most two listed.
pub fn format_metrics(specs: &[MetricSpec], statuses: &[MetricStatus]) -> String {
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let cells: Vec<String> = specs
        .iter()
        .enumerate()
        .take(SHOWN_METRICS)
        .map(|(i, spec)| format_metric(spec, statuses.get(i)))
        .collect();
    let joined = cells.join(", ");
    if specs.len() > SHOWN_METRICS {
        format!("{joined} + {} more...", specs.len() - SHOWN_METRICS)
    } else {
        joined
    }
}
