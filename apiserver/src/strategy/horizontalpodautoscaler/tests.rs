use super::*;
use crate::strategy::Strategy;
use crate::strategy::typed::Typed;
use serde_json::json;

fn hpa(spec: Value) -> Value {
    json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": spec
    })
}

fn target() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

/// The validation messages of a create, after defaulting (as the registry runs them).
fn errors(mut obj: Value) -> Vec<String> {
    let s = Typed(HorizontalPodAutoscalerRules);
    crate::strategy::messages(&s.admit_create(&mut obj).expect("decodes"))
}

#[test]
fn defaults_fill_min_replicas_metrics_and_behavior_as_kubernetes_does() {
    let mut obj = hpa(json!({"scaleTargetRef": target(), "maxReplicas": 5,
        "behavior": {"scaleDown": {"selectPolicy": "Min"}}}));
    Typed(HorizontalPodAutoscalerRules)
        .default(&mut obj)
        .expect("decodes");
    let spec = &obj["spec"];
    assert_eq!(spec["minReplicas"], 1);
    assert_eq!(
        spec["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
    assert_eq!(
        spec["behavior"]["scaleUp"],
        json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]})
    );
    // The scale-down window is the controller's flag: not defaulted in the object.
    assert_eq!(
        spec["behavior"]["scaleDown"],
        json!({"selectPolicy": "Min", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})
    );
    // Without behavior, none is added.
    let mut plain = hpa(json!({"scaleTargetRef": target(), "maxReplicas": 5}));
    Typed(HorizontalPodAutoscalerRules)
        .default(&mut plain)
        .expect("decodes");
    assert!(plain["spec"].get("behavior").is_none());
}

#[test]
fn round_trip_annotations_and_disabled_tolerances_are_dropped() {
    let mut obj = hpa(json!({"scaleTargetRef": target(), "maxReplicas": 5,
        "behavior": {"scaleUp": {"tolerance": "50m"}}}));
    obj["metadata"]["annotations"] = json!({
        "autoscaling.alpha.kubernetes.io/metrics": "[]", "team": "web"});
    let s = Typed(HorizontalPodAutoscalerRules);
    assert!(s.admit_create(&mut obj).expect("decodes").is_empty());
    assert_eq!(obj["metadata"]["annotations"], json!({"team": "web"}));
    assert!(
        obj["spec"]["behavior"]["scaleUp"]
            .get("tolerance")
            .is_none()
    );
}

#[test]
fn a_valid_autoscaler_has_no_errors() {
    assert_eq!(
        errors(hpa(
            json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3})
        )),
        Vec::<String>::new()
    );
}

#[test]
fn replica_bounds_use_kubernetes_messages() {
    assert_eq!(
        errors(hpa(json!({"scaleTargetRef": target(), "maxReplicas": 0}))),
        vec![
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`",
        ]
    );
    assert_eq!(
        errors(hpa(
            json!({"scaleTargetRef": target(), "minReplicas": 4, "maxReplicas": 3})
        )),
        vec!["spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`"]
    );
    assert_eq!(
        errors(hpa(
            json!({"scaleTargetRef": target(), "minReplicas": 0, "maxReplicas": 3})
        )),
        vec![
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
        ]
    );
}

#[test]
fn an_update_may_keep_min_replicas_zero_that_the_object_has() {
    let s = Typed(HorizontalPodAutoscalerRules);
    let external = json!([{"type": "External", "external": {"metric": {"name": "queue"},
        "target": {"type": "Value", "value": "10"}}}]);
    let old = hpa(
        json!({"scaleTargetRef": target(), "minReplicas": 0, "maxReplicas": 3, "metrics": external}),
    );
    let mut new = old.clone();
    new["spec"]["maxReplicas"] = json!(4);
    let (errs, _) = s.admit_update(&mut new, &old, true).expect("decodes");
    assert_eq!(crate::strategy::messages(&errs), Vec::<String>::new());
    let mut from_one = hpa(json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3}));
    let old_one = from_one.clone();
    from_one["spec"]["minReplicas"] = json!(0);
    let (errs, _) = s
        .admit_update(&mut from_one, &old_one, true)
        .expect("decodes");
    assert_eq!(
        crate::strategy::messages(&errs)[0],
        "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"
    );
}

#[test]
fn the_scale_target_reference_is_required_and_a_path_segment() {
    assert_eq!(
        errors(hpa(
            json!({"scaleTargetRef": {"kind": "", "name": "a/b"}, "maxReplicas": 3})
        )),
        vec![
            "spec.scaleTargetRef.kind: Required value",
            "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
        ]
    );
}

#[test]
fn metric_specs_use_kubernetes_messages() {
    let metric =
        |m: Value| hpa(json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [m]}));
    assert_eq!(
        errors(metric(
            json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 0}}})
        )),
        vec![
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"
        ]
    );
    assert_eq!(
        errors(metric(
            json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50, "averageValue": "100m"}}})
        )),
        vec![
            "spec.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization"
        ]
    );
    assert_eq!(
        errors(metric(
            json!({"type": "Resource", "resource": {"name": "memory",
            "target": {"type": "Bytes", "averageValue": "-1Mi"}}})
        )),
        vec![
            "spec.metrics[0].resource.target.type: Invalid value: \"Bytes\": must be either Utilization, Value, or AverageValue",
            "spec.metrics[0].resource.target.averageValue: Invalid value: \"-1Mi\": must be positive",
        ]
    );
    let unsupported = "spec.metrics[0].type: Unsupported value: \"Bogus\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"";
    // Kubernetes reports the unknown type twice (its `Has` check and its switch).
    assert_eq!(
        errors(metric(json!({"type": "Bogus"}))),
        vec![unsupported, unsupported]
    );
    assert_eq!(
        errors(metric(json!({"type": "Pods", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}))),
        vec![
            "spec.metrics[0].pods: Required value: must populate information for the given metric source"
        ]
    );
    assert_eq!(
        errors(metric(json!({"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1"}}}))),
        vec!["spec.metrics[0].pods: Forbidden: must populate the given metric source only"]
    );
    assert_eq!(
        errors(metric(
            json!({"type": "ContainerResource", "containerResource": {"name": "gpu",
            "container": "", "target": {"type": "Utilization", "averageUtilization": 50}}})
        )),
        vec![
            "spec.metrics[0].containerResource.name: Invalid value: \"gpu\": must be a standard resource for containers",
            "spec.metrics[0].containerResource.container: Required value: must specify a container",
        ]
    );
    assert_eq!(
        errors(metric(
            json!({"type": "External", "external": {"metric": {"name": ""},
            "target": {"type": "Value"}}})
        )),
        vec![
            "spec.metrics[0].external.metric.name: Required value: must specify a metric name",
            "spec.metrics[0].external.target.averageValue: Required value: must set either a target value for metric or a per-pod target",
        ]
    );
}

#[test]
fn behavior_rules_use_kubernetes_messages() {
    assert_eq!(
        errors(hpa(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "behavior": {
            "scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Bogus",
                        "policies": [{"type": "Nodes", "value": 0, "periodSeconds": 2000}]},
            "scaleDown": {"stabilizationWindowSeconds": -1, "policies": []}}})
        )),
        vec![
            "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
            "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Bogus\": supported values: \"Disabled\", \"Max\", \"Min\"",
            "spec.behavior.scaleUp.policies[0].type: Unsupported value: \"Nodes\": supported values: \"Percent\", \"Pods\"",
            "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
            "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 2000: must be less than or equal to 1800",
            "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero",
            "spec.behavior.scaleDown.policies: Required value: must specify at least one Policy",
        ]
    );
}

#[test]
fn a_status_write_may_not_go_negative() {
    let s = Typed(HorizontalPodAutoscalerRules);
    let old = hpa(json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3}));
    let mut new = old.clone();
    new["status"] = json!({"currentReplicas": -1, "desiredReplicas": 2});
    let (errs, _) = s.admit_update(&mut new, &old, false).expect("decodes");
    assert_eq!(
        crate::strategy::messages(&errs),
        vec!["status.currentReplicas: Invalid value: -1: must be greater than or equal to 0"]
    );
}

#[test]
fn the_table_prints_kubectl_columns() {
    let s = Typed(HorizontalPodAutoscalerRules);
    let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().expect("a time");
    let names: Vec<String> = s
        .table_columns()
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "Reference",
            "Targets",
            "MinPods",
            "MaxPods",
            "Replicas",
            "Age"
        ]
    );
    assert!(s.table_columns().iter().all(|c| c.type_ == "string"));
    let cpu = json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 50}}});
    let mut obj = hpa(
        json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 10, "metrics": [cpu]}),
    );
    assert_eq!(
        s.table_row(&obj, now),
        vec![
            json!("Deployment/web"),
            json!("cpu: <unknown>/50%"),
            json!("1"),
            json!(10),
            json!(0),
            json!("5m")
        ]
    );
    // A failed metric leaves an empty status entry: still unknown.
    obj["status"] =
        json!({"currentReplicas": 2, "desiredReplicas": 0, "currentMetrics": [{"type": ""}]});
    assert_eq!(s.table_row(&obj, now)[1], json!("cpu: <unknown>/50%"));
    assert_eq!(s.table_row(&obj, now)[4], json!(2));
    obj["status"]["currentMetrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
        "current": {"averageUtilization": 45, "averageValue": "225m"}}}]);
    assert_eq!(s.table_row(&obj, now)[1], json!("cpu: 45%/50%"));
}

#[test]
fn targets_list_two_metrics_then_how_many_more() {
    let memory = json!({"type": "Resource", "resource": {"name": "memory",
        "target": {"type": "AverageValue", "averageValue": "200Mi"}}});
    let pods = json!({"type": "Pods", "pods": {"metric": {"name": "qps"},
        "target": {"type": "AverageValue", "averageValue": "10"}}});
    let external = json!({"type": "External", "external": {"metric": {"name": "queue"},
        "target": {"type": "AverageValue", "averageValue": "30"}}});
    let specs: Vec<MetricSpec> =
        serde_json::from_value(json!([memory, pods, external])).expect("metric specs");
    assert_eq!(
        printer::format_metrics(&specs, &[]),
        "memory: <unknown>/200Mi, <unknown>/10 + 1 more..."
    );
    assert_eq!(
        printer::format_metrics(&specs[2..], &[]),
        "<unknown>/30 (avg)"
    );
    assert_eq!(printer::format_metrics(&[], &[]), "<none>");
}
