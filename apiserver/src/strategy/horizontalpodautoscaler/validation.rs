//! `ValidateHorizontalPodAutoscaler`, `ValidateHorizontalPodAutoscalerUpdate` and the status
//! rules of `ValidateHorizontalPodAutoscalerStatusUpdate`
//! (`pkg/apis/autoscaling/validation/validation.go`), over the v2 shape Kubernetes validates
//! (its internal type), whichever version the object was written in.
//!
//! ```text
//!   spec.minReplicas ≥ 1 (≥ 0 on update of an object that has 0)
//!   spec.maxReplicas > 0 and ≥ minReplicas
//!   spec.scaleTargetRef.{kind,name} required, path segment names
//!   spec.metrics[i]   type, exactly one source, its target
//!   spec.behavior.{scaleUp,scaleDown}  window 0..3600, selectPolicy, ≥ 1 policy of
//!                                      Pods/Percent, value > 0, period 1..1800
//! ```
//!
//! Simplification: an invalid quantity is printed as its string (Kubernetes prints the
//! `resource.Quantity` struct with `%#v`).

use super::super::FieldError;
use super::super::field::FieldPath;
use apimachinery::validation::{is_dns1123_label, is_path_segment_name, is_qualified_name};
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricSource, CrossVersionObjectReference, ExternalMetricSource,
    HPAScalingRules, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricIdentifier,
    MetricSpec, MetricTarget, ObjectMetricSource, PodsMetricSource, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// `MaxPeriodSeconds`.
pub const MAX_PERIOD_SECONDS: i32 = 1800;
/// `MaxStabilizationWindowSeconds`.
pub const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;

/// `validMetricSourceTypesList` (sorted, as `sets.String.List` gives it).
const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
/// `validSelectPolicyTypesList`.
const SELECT_POLICIES: [&str; 3] = ["Disabled", "Max", "Min"];
/// `validPolicyTypesList`.
const POLICY_TYPES: [&str; 2] = ["Percent", "Pods"];
/// The quantity syntax Kubernetes' parser accepts (its error message).
const QUANTITY_SYNTAX: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `ValidateHorizontalPodAutoscaler` (metadata aside: the typed strategy checks it).
pub fn validate(hpa: &HorizontalPodAutoscaler) -> Vec<FieldError> {
    validate_spec(&hpa.spec.clone().unwrap_or_default(), 1)
}

/// `ValidateHorizontalPodAutoscalerUpdate`: the create rules, with minReplicas 0 allowed
/// when the old object has it; plus the status rules (`/status` writes go through here too).
pub fn validate_update(
    new: &HorizontalPodAutoscaler,
    old: &HorizontalPodAutoscaler,
) -> Vec<FieldError> {
    let old_min = old.spec.as_ref().and_then(|s| s.min_replicas);
    let lower_bound = if old_min == Some(0) { 0 } else { 1 };
    let mut errs = validate_spec(&new.spec.clone().unwrap_or_default(), lower_bound);
    let status = new.status.clone().unwrap_or_default();
    let path = FieldPath::new("status");
    errs.extend(super::super::field::validate_nonnegative(
        i64::from(status.current_replicas.unwrap_or(0)),
        &path.child("currentReplicas"),
    ));
    errs.extend(super::super::field::validate_nonnegative(
        i64::from(status.desired_replicas),
        &path.child("desiredReplicas"),
    ));
    errs
}

fn validate_spec(spec: &HorizontalPodAutoscalerSpec, min_lower_bound: i32) -> Vec<FieldError> {
    let path = FieldPath::new("spec");
    let mut errs = Vec::new();
    if let Some(min) = spec.min_replicas
        && min < min_lower_bound
    {
        errs.push(FieldError::invalid(
            &path.child("minReplicas"),
            min,
            &format!("must be greater than or equal to {min_lower_bound}"),
        ));
    }
    if spec.max_replicas < 1 {
        errs.push(FieldError::invalid(
            &path.child("maxReplicas"),
            spec.max_replicas,
            "must be greater than 0",
        ));
    }
    if let Some(min) = spec.min_replicas
        && spec.max_replicas < min
    {
        errs.push(FieldError::invalid(
            &path.child("maxReplicas"),
            spec.max_replicas,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    errs.extend(validate_reference(
        &spec.scale_target_ref,
        &path.child("scaleTargetRef"),
    ));
    errs.extend(validate_metrics(
        spec.metrics.as_deref().unwrap_or_default(),
        &path.child("metrics"),
        spec.min_replicas,
    ));
    if let Some(b) = &spec.behavior {
        let bp = path.child("behavior");
        for (rules, name) in [(&b.scale_up, "scaleUp"), (&b.scale_down, "scaleDown")] {
            if let Some(r) = rules {
                errs.extend(validate_rules(r, &bp.child(name)));
            }
        }
    }
    errs
}

/// `ValidateCrossVersionObjectReference`.
pub fn validate_reference(r: &CrossVersionObjectReference, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (value, field) in [(&r.kind, "kind"), (&r.name, "name")] {
        if value.is_empty() {
            errs.push(FieldError::required(&path.child(field), ""));
        } else {
            for msg in is_path_segment_name(value) {
                errs.push(FieldError::invalid(
                    &path.child(field),
                    value.as_str(),
                    &msg,
                ));
            }
        }
    }
    errs
}

fn validate_metrics(metrics: &[MetricSpec], path: &FieldPath, min: Option<i32>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, m) in metrics.iter().enumerate() {
        errs.extend(validate_metric_spec(m, &path.index(i)));
    }
    let scales_from_zero = metrics
        .iter()
        .any(|m| m.type_ == "Object" || m.type_ == "External");
    if min == Some(0) && !scales_from_zero {
        errs.push(FieldError::forbidden(
            path,
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    errs
}

fn validate_rules(rules: &HPAScalingRules, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(w) = rules.stabilization_window_seconds {
        let wp = path.child("stabilizationWindowSeconds");
        if w < 0 {
            errs.push(FieldError::invalid(
                &wp,
                w,
                "must be greater than or equal to zero",
            ));
        }
        if w > MAX_STABILIZATION_WINDOW_SECONDS {
            errs.push(FieldError::invalid(
                &wp,
                w,
                &format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(s) = &rules.select_policy
        && !SELECT_POLICIES.contains(&s.as_str())
    {
        errs.push(FieldError::not_supported(
            &path.child("selectPolicy"),
            s.as_str(),
            &SELECT_POLICIES,
        ));
    }
    let pp = path.child("policies");
    let policies = rules.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(
            &pp,
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let ip = pp.index(i);
        if !POLICY_TYPES.contains(&p.type_.as_str()) {
            errs.push(FieldError::not_supported(
                &ip.child("type"),
                p.type_.as_str(),
                &POLICY_TYPES,
            ));
        }
        if p.value <= 0 {
            errs.push(FieldError::invalid(
                &ip.child("value"),
                p.value,
                "must be greater than zero",
            ));
        }
        if p.period_seconds <= 0 {
            errs.push(FieldError::invalid(
                &ip.child("periodSeconds"),
                p.period_seconds,
                "must be greater than zero",
            ));
        }
        if p.period_seconds > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid(
                &ip.child("periodSeconds"),
                p.period_seconds,
                &format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
    errs
}

/// `validateMetricSpec`: a known type, exactly the source of that type, and the source's rules
/// (only the first source present is checked, as in Kubernetes).
fn validate_metric_spec(spec: &MetricSpec, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let type_ = spec.type_.as_str();
    if type_.is_empty() {
        errs.push(FieldError::required(
            &path.child("type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&type_) {
        errs.push(FieldError::not_supported(
            &path.child("type"),
            type_,
            &METRIC_SOURCE_TYPES,
        ));
    }
    let mut present: Vec<&str> = Vec::new();
    if let Some(s) = &spec.object {
        present.push("object");
        if present.len() == 1 {
            errs.extend(validate_object_source(s, &path.child("object")));
        }
    }
    if let Some(s) = &spec.external {
        present.push("external");
        if present.len() == 1 {
            errs.extend(validate_external_source(s, &path.child("external")));
        }
    }
    if let Some(s) = &spec.pods {
        present.push("pods");
        if present.len() == 1 {
            errs.extend(validate_pods_source(s, &path.child("pods")));
        }
    }
    if let Some(s) = &spec.resource {
        present.push("resource");
        if present.len() == 1 {
            errs.extend(validate_resource_source(s, &path.child("resource")));
        }
    }
    if let Some(s) = &spec.container_resource {
        present.push("containerResource");
        if present.len() == 1 {
            errs.extend(validate_container_resource_source(
                s,
                &path.child("containerResource"),
            ));
        }
    }
    let (expected, missing) = match type_ {
        "Object" => ("object", spec.object.is_none()),
        "Pods" => ("pods", spec.pods.is_none()),
        "Resource" => ("resource", spec.resource.is_none()),
        "External" => ("external", spec.external.is_none()),
        "ContainerResource" => ("containerResource", spec.container_resource.is_none()),
        _ => {
            errs.push(FieldError::not_supported(
                &path.child("type"),
                type_,
                &METRIC_SOURCE_TYPES,
            ));
            ("", false)
        }
    };
    if missing {
        errs.push(FieldError::required(
            &path.child(expected),
            "must populate information for the given metric source",
        ));
    }
    if present.len() != 1 {
        present.retain(|p| *p != expected);
        present.sort_unstable();
        for p in present {
            errs.push(FieldError::forbidden(
                &path.child(p),
                "must populate the given metric source only",
            ));
        }
    }
    errs
}

fn validate_object_source(src: &ObjectMetricSource, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_reference(&src.described_object, &path.child("describedObject"));
    errs.extend(validate_metric_identifier(
        &src.metric,
        &path.child("metric"),
    ));
    errs.extend(validate_target(&src.target, &path.child("target")));
    if src.target.value.is_none() && src.target.average_value.is_none() {
        errs.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must set either a target value or averageValue",
        ));
    }
    errs
}

fn validate_external_source(src: &ExternalMetricSource, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_metric_identifier(&src.metric, &path.child("metric"));
    errs.extend(validate_target(&src.target, &path.child("target")));
    let target = path.child("target");
    if src.target.value.is_none() && src.target.average_value.is_none() {
        errs.push(FieldError::required(
            &target.child("averageValue"),
            "must set either a target value for metric or a per-pod target",
        ));
    }
    if src.target.value.is_some() && src.target.average_value.is_some() {
        errs.push(FieldError::forbidden(
            &target.child("value"),
            "may not set both a target value for metric and a per-pod target",
        ));
    }
    errs
}

fn validate_pods_source(src: &PodsMetricSource, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_metric_identifier(&src.metric, &path.child("metric"));
    errs.extend(validate_target(&src.target, &path.child("target")));
    if src.target.average_value.is_none() {
        errs.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must specify a positive target averageValue",
        ));
    }
    errs
}

/// The two target rules the resource sources share.
fn raw_or_utilization(target: &MetricTarget, path: &FieldPath, errs: &mut Vec<FieldError>) {
    let tp = path.child("target");
    if target.average_utilization.is_none() && target.average_value.is_none() {
        errs.push(FieldError::required(
            &tp.child("averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if target.average_utilization.is_some() && target.average_value.is_some() {
        errs.push(FieldError::forbidden(
            &tp.child("averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
}

fn validate_resource_source(src: &ResourceMetricSource, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if src.name.is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "must specify a resource name",
        ));
    }
    errs.extend(validate_target(&src.target, &path.child("target")));
    raw_or_utilization(&src.target, path, &mut errs);
    errs
}

fn validate_container_resource_source(
    src: &ContainerResourceMetricSource,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let np = path.child("name");
    if src.name.is_empty() {
        errs.push(FieldError::required(&np, "must specify a resource name"));
    } else {
        errs.extend(validate_container_resource_name(&src.name, &np));
    }
    let cp = path.child("container");
    if src.container.is_empty() {
        errs.push(FieldError::required(&cp, "must specify a container"));
    } else {
        for msg in is_dns1123_label(&src.container) {
            errs.push(FieldError::invalid(&cp, src.container.as_str(), &msg));
        }
    }
    errs.extend(validate_target(&src.target, &path.child("target")));
    raw_or_utilization(&src.target, path, &mut errs);
    errs
}

/// `ValidateContainerResourceName` for a name without a domain: a qualified name that is one
/// of the standard container resources.
fn validate_container_resource_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = is_qualified_name(name)
        .iter()
        .map(|msg| FieldError::invalid(path, name, msg))
        .collect();
    let standard =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !name.contains('/') && !standard {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource for containers",
        ));
    }
    errs
}

/// Whether a quantity parses and is above zero (`Sign() == 1`); `Err` when it does not parse.
fn positive(q: &Quantity) -> Result<bool, ()> {
    apimachinery::resource::quantity::Quantity::parse(&q.0)
        .map(|q| q.nanos() > 0)
        .map_err(|_| ())
}

/// `validateMetricTarget`.
fn validate_target(t: &MetricTarget, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if t.type_.is_empty() {
        errs.push(FieldError::required(
            &path.child("type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&t.type_.as_str()) {
        errs.push(FieldError::invalid(
            &path.child("type"),
            t.type_.as_str(),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for (q, field) in [(&t.value, "value"), (&t.average_value, "averageValue")] {
        if let Some(q) = q {
            match positive(q) {
                Ok(true) => {}
                Ok(false) => errs.push(FieldError::invalid(
                    &path.child(field),
                    q.0.as_str(),
                    "must be positive",
                )),
                Err(()) => errs.push(FieldError::invalid(
                    &path.child(field),
                    q.0.as_str(),
                    QUANTITY_SYNTAX,
                )),
            }
        }
    }
    if let Some(u) = t.average_utilization
        && u < 1
    {
        errs.push(FieldError::invalid(
            &path.child("averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
    errs
}

/// `validateMetricIdentifier`.
fn validate_metric_identifier(id: &MetricIdentifier, path: &FieldPath) -> Vec<FieldError> {
    let np = path.child("name");
    if id.name.is_empty() {
        return vec![FieldError::required(&np, "must specify a metric name")];
    }
    is_path_segment_name(&id.name)
        .iter()
        .map(|msg| FieldError::invalid(&np, id.name.as_str(), msg))
        .collect()
}
