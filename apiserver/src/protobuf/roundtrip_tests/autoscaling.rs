//! Round trips of the HorizontalPodAutoscaler of both served versions (`kubectl autoscale`
//! sends them as protobuf: autoscaling/v2 first, autoscaling/v1 when v2 is refused).

use super::fixtures::{object_meta, object_meta_json};
use super::{q, round_trip, s, time};
use serde_json::json;

#[test]
fn horizontal_pod_autoscalers() {
    use k8s_pb::api::autoscaling::v1;
    use k8s_pb::api::autoscaling::v2;
    let reference = v2::CrossVersionObjectReference {
        kind: s("Deployment"),
        name: s("web"),
        api_version: s("apps/v1"),
    };
    let hpa = v2::HorizontalPodAutoscaler {
        metadata: Some(object_meta("web")),
        spec: Some(v2::HorizontalPodAutoscalerSpec {
            scale_target_ref: Some(reference),
            min_replicas: Some(1),
            max_replicas: Some(5),
            metrics: vec![v2::MetricSpec {
                r#type: s("Resource"),
                resource: Some(v2::ResourceMetricSource {
                    name: s("cpu"),
                    target: Some(v2::MetricTarget {
                        r#type: s("Utilization"),
                        average_utilization: Some(50),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }],
            behavior: Some(v2::HorizontalPodAutoscalerBehavior {
                scale_up: None,
                scale_down: Some(v2::HpaScalingRules {
                    stabilization_window_seconds: Some(120),
                    select_policy: s("Min"),
                    policies: vec![v2::HpaScalingPolicy {
                        r#type: s("Pods"),
                        value: Some(1),
                        period_seconds: Some(60),
                    }],
                    tolerance: None,
                }),
            }),
        }),
        status: Some(v2::HorizontalPodAutoscalerStatus {
            observed_generation: None,
            last_scale_time: time(),
            current_replicas: Some(2),
            desired_replicas: Some(3),
            current_metrics: vec![v2::MetricStatus {
                r#type: s("Resource"),
                resource: Some(v2::ResourceMetricStatus {
                    name: s("cpu"),
                    current: Some(v2::MetricValueStatus {
                        value: None,
                        average_value: Some(q("450m")),
                        average_utilization: Some(90),
                    }),
                }),
                ..Default::default()
            }],
            conditions: vec![v2::HorizontalPodAutoscalerCondition {
                r#type: s("AbleToScale"),
                status: s("True"),
                last_transition_time: time(),
                reason: s("SucceededRescale"),
                message: s("the HPA controller was able to update the target scale to 3"),
            }],
        }),
    };
    round_trip::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(
        &hpa,
        json!({
            "metadata": object_meta_json("web"),
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120, "selectPolicy": "Min",
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
            },
            "status": {
                "lastScaleTime": "2024-05-06T07:08:09Z", "currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageValue": "450m", "averageUtilization": 90}}}],
                "conditions": [{"type": "AbleToScale", "status": "True",
                    "lastTransitionTime": "2024-05-06T07:08:09Z", "reason": "SucceededRescale",
                    "message": "the HPA controller was able to update the target scale to 3"}]
            }
        }),
    );

    let v1_hpa = v1::HorizontalPodAutoscaler {
        metadata: Some(object_meta("web")),
        spec: Some(v1::HorizontalPodAutoscalerSpec {
            scale_target_ref: Some(v1::CrossVersionObjectReference {
                kind: s("Deployment"),
                name: s("web"),
                api_version: s("apps/v1"),
            }),
            min_replicas: Some(1),
            max_replicas: Some(5),
            target_cpu_utilization_percentage: Some(50),
        }),
        status: Some(v1::HorizontalPodAutoscalerStatus {
            observed_generation: None,
            last_scale_time: None,
            current_replicas: Some(2),
            desired_replicas: Some(2),
            current_cpu_utilization_percentage: Some(45),
        }),
    };
    round_trip::<k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler>(
        &v1_hpa,
        json!({
            "metadata": object_meta_json("web"),
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50
            },
            "status": {"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 45}
        }),
    );
}
