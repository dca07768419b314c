use super::*;
use crate::strategy::horizontalpodautoscaler::v1::HorizontalPodAutoscalerV1Strategy;
use crate::strategy::{Strategy, VersionConversion};
use serde_json::json;

fn v2(obj: Value) -> v2::HorizontalPodAutoscaler {
    serde_json::from_value(obj).expect("a v2 HorizontalPodAutoscaler")
}

fn v1(obj: Value) -> v1::HorizontalPodAutoscaler {
    serde_json::from_value(obj).expect("a v1 HorizontalPodAutoscaler")
}

fn json_of<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).expect("encodes")
}

const CONDITIONS: &str = r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"SucceededGetScale","message":"the HPA controller was able to get the target's current scale"},{"type":"ScalingActive","status":"False","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"FailedGetResourceMetric","message":"the HPA was unable to compute the replica count: failed to get cpu utilization"}]"#;

fn failing_v2() -> Value {
    json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 5,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 50}}}]},
        "status": {"currentReplicas": 2, "desiredReplicas": 0, "currentMetrics": [{"type": ""}],
                   "conditions": [
                       {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": "SucceededGetScale", "message": "the HPA controller was able to get the target's current scale"},
                       {"type": "ScalingActive", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": "FailedGetResourceMetric",
                        "message": "the HPA was unable to compute the replica count: failed to get cpu utilization"}]}
    })
}

#[test]
fn the_cpu_utilization_target_is_v1s_percentage_and_the_status_goes_to_annotations() {
    let out = json_of(&v2_to_v1(&v2(failing_v2())));
    assert_eq!(out["apiVersion"], "autoscaling/v1");
    assert_eq!(out["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(
        out["spec"]["scaleTargetRef"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    );
    assert_eq!(
        out["status"],
        json!({"currentReplicas": 2, "desiredReplicas": 0})
    );
    let annotations = &out["metadata"]["annotations"];
    assert_eq!(annotations[CONDITIONS_ANNOTATION], CONDITIONS);
    assert_eq!(annotations[METRIC_STATUSES_ANNOTATION], r#"[{"type":""}]"#);
    assert!(
        annotations.get(METRIC_SPECS_ANNOTATION).is_none(),
        "{annotations}"
    );
    assert!(annotations.get(BEHAVIOR_SPECS_ANNOTATION).is_none());
    // And back: the status and conditions come out of the annotations, which are dropped.
    let back = json_of(&v1_to_v2(&v1(out)));
    let mut want = failing_v2();
    want["metadata"]["annotations"] = json!({});
    assert_eq!(back, want);
}

#[test]
fn other_metrics_and_behavior_round_trip_through_annotations() {
    let mut obj = failing_v2();
    obj["spec"]["metrics"] = json!([
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "200Mi"}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": {"matchLabels": {"tier": "web"}}},
                                  "target": {"type": "AverageValue", "averageValue": "1k"}}}
    ]);
    obj["spec"]["behavior"] = json!({
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
        "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}});
    obj["status"] = json!({"desiredReplicas": 0, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "225m"}}}]});
    let out = json_of(&v2_to_v1(&v2(obj.clone())));
    assert_eq!(out["spec"]["targetCPUUtilizationPercentage"], 60);
    assert_eq!(out["status"]["currentCPUUtilizationPercentage"], 45);
    let annotations = &out["metadata"]["annotations"];
    assert_eq!(
        annotations[METRIC_SPECS_ANNOTATION],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"200Mi"}},{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"1k","selector":{"matchLabels":{"tier":"web"}}}}]"#
    );
    assert_eq!(
        annotations[BEHAVIOR_SPECS_ANNOTATION],
        r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":null},"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
    );
    assert_eq!(
        annotations[METRIC_STATUSES_ANNOTATION],
        r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":45,"currentAverageValue":"225m"}}]"#
    );
    let back = json_of(&v1_to_v2(&v1(out)));
    // v1 puts its cpu metric after the annotation's.
    assert_eq!(
        back["spec"]["metrics"],
        json!([
            obj["spec"]["metrics"][0],
            obj["spec"]["metrics"][2],
            obj["spec"]["metrics"][1]
        ])
    );
    assert_eq!(back["spec"]["behavior"], obj["spec"]["behavior"]);
    assert_eq!(
        back["status"]["currentMetrics"],
        obj["status"]["currentMetrics"]
    );
    assert_eq!(back["metadata"]["annotations"], json!({}));
}

#[test]
fn a_v1_object_without_a_target_gets_the_default_cpu_metric() {
    let out = json_of(&v1_to_v2(&v1(json!({
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "annotations": {"team": "web"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
        "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 45}
    }))));
    assert_eq!(
        out["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
    assert_eq!(
        out["status"]["currentMetrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45}}}])
    );
    assert_eq!(out["metadata"]["annotations"], json!({"team": "web"}));
    // And back to v1: the default is an 80% cpu target.
    assert_eq!(
        json_of(&v2_to_v1(&v2(out)))["spec"]["targetCPUUtilizationPercentage"],
        80
    );
}

#[test]
fn the_v1_strategy_converts_bodies_and_words_decode_errors_as_go() {
    let s = HorizontalPodAutoscalerV1Strategy;
    // What `kubectl autoscale deployment web --cpu-percent=50 --min=1 --max=5` sends.
    let body = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50},
        "status": {"currentReplicas": 0, "desiredReplicas": 0}});
    let stored = s.to_storage(&body).expect("converts");
    assert_eq!(stored["apiVersion"], "autoscaling/v2");
    assert_eq!(
        stored["spec"]["metrics"][0]["resource"]["target"],
        json!({"type": "Utilization", "averageUtilization": 50})
    );
    let view = s.to_served(&stored).expect("converts back");
    assert_eq!(view["apiVersion"], "autoscaling/v1");
    assert_eq!(view["spec"], body["spec"]);
    let bad = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"}, "spec": {"maxReplicas": "five"}});
    let err = s.to_storage(&bad).expect_err("a string is no int32");
    assert!(err.contains("cannot unmarshal string"), "{err}");
    assert_eq!(
        s.unknown_fields(
            &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"}, "spec": {"maxReplicas": 1, "metrics": []}})
        ),
        vec!["spec.metrics"]
    );
}
