//! autoscaling HorizontalPodAutoscaler: the storage version `v2` ([`HorizontalPodAutoscalerRules`])
//! and the `v1` view served by conversion ([`v1::HorizontalPodAutoscalerV1Strategy`]).
//!
//! Mirrors `pkg/apis/autoscaling/v2/defaults.go` (`SetDefaults_HorizontalPodAutoscaler`,
//! `SetDefaults_HorizontalPodAutoscalerBehavior`), `pkg/registry/autoscaling/
//! horizontalpodautoscaler/strategy.go` (status reset, `dropDisabledFields`),
//! [`validation`] (`pkg/apis/autoscaling/validation/validation.go`), [`printer`]
//! (`printHorizontalPodAutoscaler`) and [`conversion`] (`pkg/apis/autoscaling/v1/conversion.go`).
//!
//! ```text
//!   spec.minReplicas         default 1
//!   spec.metrics             default [cpu, Utilization 80%]
//!   spec.behavior (when set) scaleUp   {stabilizationWindowSeconds 0, selectPolicy Max,
//!                                       policies [Pods 4/15s, Percent 100/15s]}
//!                            scaleDown {selectPolicy Max, policies [Percent 100/15s]}
//!                            (scaleDown's window stays unset: the controller's
//!                             --horizontal-pod-autoscaler-downscale-stabilization applies)
//!   behavior.*.tolerance     dropped (the HPAConfigurableTolerance gate is off in 1.33)
//! ```
//!
//! Simplification: a `tolerance` an object already stores is kept on update, as
//! `dropDisabledFields` does, but never validated (its rule is behind the same gate).

pub mod conversion;
pub mod printer;
pub mod v1;
pub mod v1_metrics;
pub mod validation;

use super::typed::KindRules;
use super::{FieldError, TableColumn};
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler, MetricSpec,
};
use serde_json::Value;

/// `autoscaling.DefaultCPUUtilization`: the target of the metric a spec without metrics gets.
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;

/// The autoscaling/v2 HorizontalPodAutoscaler rules (the storage version).
#[derive(Debug, Default, Clone, Copy)]
pub struct HorizontalPodAutoscalerRules;

fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds,
    }
}

/// `GenerateHPAScaleUpRules`: the set fields of `rules` over Kubernetes' scale-up defaults.
pub fn scale_up_rules(rules: Option<HPAScalingRules>) -> HPAScalingRules {
    copy_rules(
        rules,
        HPAScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: Some("Max".into()),
            policies: Some(vec![policy("Pods", 4, 15), policy("Percent", 100, 15)]),
            tolerance: None,
        },
    )
}

/// `GenerateHPAScaleDownRules`: the set fields of `rules` over Kubernetes' scale-down
/// defaults (no stabilization window: the controller's flag supplies it).
pub fn scale_down_rules(rules: Option<HPAScalingRules>) -> HPAScalingRules {
    copy_rules(
        rules,
        HPAScalingRules {
            stabilization_window_seconds: None,
            select_policy: Some("Max".into()),
            policies: Some(vec![policy("Percent", 100, 15)]),
            tolerance: None,
        },
    )
}

/// `copyHPAScalingRules`: every set field of `from` over `to`.
fn copy_rules(from: Option<HPAScalingRules>, mut to: HPAScalingRules) -> HPAScalingRules {
    let Some(from) = from else {
        return to;
    };
    if from.select_policy.is_some() {
        to.select_policy = from.select_policy;
    }
    if from.stabilization_window_seconds.is_some() {
        to.stabilization_window_seconds = from.stabilization_window_seconds;
    }
    if from.policies.is_some() {
        to.policies = from.policies;
    }
    if from.tolerance.is_some() {
        to.tolerance = from.tolerance;
    }
    to
}

/// The metric a spec without metrics gets: cpu at [`DEFAULT_CPU_UTILIZATION`]%.
pub fn default_cpu_metric() -> MetricSpec {
    cpu_utilization_metric(DEFAULT_CPU_UTILIZATION)
}

/// A `Resource` metric spec for cpu at `percent`% of the pods' requests.
pub fn cpu_utilization_metric(percent: i32) -> MetricSpec {
    use k8s_openapi::api::autoscaling::v2::{MetricTarget, ResourceMetricSource};
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// `dropDisabledFields`: the scaling rules' `tolerance` unless the old object uses it.
fn drop_disabled_fields(new: &mut HorizontalPodAutoscaler, old: Option<&HorizontalPodAutoscaler>) {
    let in_use = old
        .and_then(|o| o.spec.as_ref())
        .and_then(|s| s.behavior.as_ref())
        .is_some_and(|b| {
            [&b.scale_up, &b.scale_down]
                .into_iter()
                .flatten()
                .any(|r| r.tolerance.is_some())
        });
    if in_use {
        return;
    }
    if let Some(b) = new.spec.as_mut().and_then(|s| s.behavior.as_mut()) {
        for rules in [&mut b.scale_up, &mut b.scale_down].into_iter().flatten() {
            rules.tolerance = None;
        }
    }
}

impl KindRules for HorizontalPodAutoscalerRules {
    type Object = HorizontalPodAutoscaler;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut HorizontalPodAutoscaler) {
        // The v2 conversion keeps no round-trip annotation of the v1 view.
        if let Some(annotations) = obj.metadata.annotations.as_mut() {
            conversion::drop_round_trip_annotations(annotations);
        }
        let spec = obj.spec.get_or_insert_with(Default::default);
        spec.min_replicas.get_or_insert(1);
        if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
            spec.metrics = Some(vec![default_cpu_metric()]);
        }
        if let Some(b) = spec.behavior.as_mut() {
            b.scale_up = Some(scale_up_rules(b.scale_up.take()));
            b.scale_down = Some(scale_down_rules(b.scale_down.take()));
        }
    }

    fn prepare_for_create(&self, obj: &mut HorizontalPodAutoscaler) {
        drop_disabled_fields(obj, None);
    }

    fn prepare_for_update(&self, new: &mut HorizontalPodAutoscaler, old: &HorizontalPodAutoscaler) {
        drop_disabled_fields(new, Some(old));
    }

    fn validate(&self, obj: &HorizontalPodAutoscaler) -> Vec<FieldError> {
        validation::validate(obj)
    }

    fn validate_update(
        &self,
        new: &HorizontalPodAutoscaler,
        old: &HorizontalPodAutoscaler,
    ) -> Vec<FieldError> {
        validation::validate_update(new, old)
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        printer::columns()
    }

    fn table_row(&self, obj: &HorizontalPodAutoscaler, now: jiff::Timestamp) -> Vec<Value> {
        printer::row(obj, now)
    }
}

#[cfg(test)]
mod tests;
