//! Tests of one sync: conditions, Events and the status it writes.

use super::*;
use crate::podautoscaler::replica_calculator::PodInfo;
use jiff::SignedDuration;
use std::collections::BTreeMap;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn hpa(min: i32, max: i32, metrics: serde_json::Value) -> HorizontalPodAutoscaler {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": min, "maxReplicas": max, "metrics": metrics}
    }))
    .unwrap()
}

fn cpu50() -> serde_json::Value {
    serde_json::json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 50}}}])
}

fn pods(n: usize, request: Option<i64>) -> Vec<PodInfo> {
    (0..n)
        .map(|i| PodInfo {
            name: format!("web-{i}"),
            phase: "Running".into(),
            deleting: false,
            ready: Some(("True".into(), t(-590))),
            start_time: Some(t(-600)),
            requests: vec![(
                "app".into(),
                request
                    .map(|r| BTreeMap::from([("cpu".to_string(), r)]))
                    .unwrap_or_default(),
            )],
        })
        .collect()
}

fn usage(n: usize, cpu: i64) -> Result<Vec<PodMetrics>, String> {
    Ok((0..n)
        .map(|i| PodMetrics {
            name: format!("web-{i}"),
            timestamp: t(0),
            window: SignedDuration::from_secs(30),
            containers: vec![("app".into(), BTreeMap::from([("cpu".to_string(), cpu)]))],
        })
        .collect())
}

/// One sync of `h` with the target at `current` replicas, selecting `app=web`.
fn run(
    h: &HorizontalPodAutoscaler,
    current: i32,
    pods: &[PodInfo],
    metrics: &Result<Vec<PodMetrics>, String>,
    history: &mut History,
    config: &CalculatorConfig,
    now: Timestamp,
) -> Decision {
    let observed = Observed {
        scale_replicas: current,
        selector: "app=web",
        pods,
        metrics,
    };
    reconcile(h, &observed, history, config, now)
}

fn condition<'a>(d: &'a Decision, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = d
        .status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap();
    (
        c.status.as_str(),
        c.reason.as_deref().unwrap(),
        c.message.as_deref().unwrap(),
    )
}

#[test]
fn scales_up_on_cpu_with_kubernetes_reason_and_event() {
    // 2 pods at 90% of 500m against 50%: ratio 1.8 → ceil(3.6) = 4.
    let h = hpa(1, 10, cpu50());
    let mut d = run(
        &h,
        2,
        &pods(2, Some(500)),
        &usage(2, 450),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert!(d.rescale);
    assert_eq!(d.desired_replicas, 4);
    assert_eq!(
        condition(&d, "ScalingActive"),
        (
            "True",
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
        )
    );
    let m = &d.status.current_metrics.as_ref().unwrap()[0];
    let current = &m.resource.as_ref().unwrap().current;
    assert_eq!(current.average_utilization, Some(90));
    assert_eq!(current.average_value.as_ref().unwrap().0, "450m");
    after_rescale(&mut d, Ok(()), t(0));
    assert_eq!(
        d.events.last().unwrap().message,
        "New size: 4; reason: cpu resource utilization (percentage of request) above target"
    );
    assert_eq!(condition(&d, "AbleToScale").1, "SucceededRescale");
    assert!(d.status.last_scale_time.is_some());
    assert!(
        d.arithmetic.iter().any(|a| a.contains(
            "desired = ceil(current × usage / target) = ceil(2 ready × 90% / 50%) = ceil(3.600) = 4"
        )),
        "{:?}",
        d.arithmetic
    );
}

#[test]
fn missing_requests_fail_the_metric() {
    let h = hpa(1, 10, cpu50());
    let d = run(
        &h,
        2,
        &pods(2, None),
        &usage(2, 450),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert!(!d.rescale);
    assert_eq!(d.events[0].reason, "FailedGetResourceMetric");
    assert_eq!(
        d.events[0].message,
        "failed to get cpu utilization: missing request for cpu in container app of Pod web-0"
    );
    let (status, reason, message) = condition(&d, "ScalingActive");
    assert_eq!((status, reason), ("False", "FailedGetResourceMetric"));
    assert_eq!(
        message,
        "the HPA was unable to compute the replica count: failed to get cpu utilization: missing request for cpu in container app of Pod web-0"
    );
    assert_eq!(d.events[1].reason, "FailedComputeMetricsReplicas");
    assert_eq!(
        d.events[1].message,
        "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: missing request for cpu in container app of Pod web-0"
    );
}

/// What a cluster without metrics-server shows: `kubectl describe hpa`'s conditions and Events.
#[test]
fn without_metrics_server_the_metric_fails_as_in_kubernetes() {
    let h = hpa(1, 5, cpu50());
    let not_served = Err(
        "the server could not find the requested resource (get pods.metrics.k8s.io)".to_string(),
    );
    let d = run(
        &h,
        2,
        &pods(2, Some(500)),
        &not_served,
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    let cause = "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)";
    assert_eq!(
        condition(&d, "AbleToScale"),
        (
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale"
        )
    );
    assert_eq!(
        condition(&d, "ScalingActive"),
        (
            "False",
            "FailedGetResourceMetric",
            format!("the HPA was unable to compute the replica count: {cause}").as_str()
        )
    );
    let events: Vec<(&str, &str, &str)> = d
        .events
        .iter()
        .map(|e| (e.type_, e.reason, e.message.as_str()))
        .collect();
    let computed = format!(
        "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: {cause}"
    );
    assert_eq!(
        events,
        vec![
            ("Warning", "FailedGetResourceMetric", cause),
            ("Warning", "FailedComputeMetricsReplicas", computed.as_str()),
        ]
    );
    assert!(!d.rescale);
    assert_eq!(d.status.current_replicas, Some(2));
    assert_eq!(
        d.status.desired_replicas, 0,
        "the desired count stays what it was"
    );
    assert_eq!(
        d.status.current_metrics,
        Some(vec![MetricStatus::default()])
    );
    assert_eq!(
        d.error.as_deref(),
        Some(format!("failed to compute desired number of replicas based on listed metrics for Deployment/web: {computed}").as_str())
    );
    // No PodMetrics at all: the resource metrics client's own message.
    let d = run(
        &h,
        2,
        &pods(2, Some(500)),
        &Ok(Vec::new()),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert_eq!(
        d.events[0].message,
        "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    );
}

#[test]
fn a_scale_without_selector_is_refused_as_in_kubernetes() {
    let h = hpa(1, 5, cpu50());
    let observed = Observed {
        scale_replicas: 2,
        selector: "",
        pods: &[],
        metrics: &Ok(Vec::new()),
    };
    let d = reconcile(
        &h,
        &observed,
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert_eq!(
        condition(&d, "ScalingActive"),
        (
            "False",
            "InvalidSelector",
            "the HPA target's scale is missing a selector"
        )
    );
    let reasons: Vec<(&str, &str)> = d
        .events
        .iter()
        .map(|e| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            ("SelectorRequired", "selector is required"),
            ("FailedComputeMetricsReplicas", "selector is required"),
        ]
    );
    assert_eq!(d.status.current_metrics, None);
}

#[test]
fn a_failed_metric_beside_a_valid_one_still_scales_up() {
    let mut metrics = cpu50();
    metrics
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "Pods", "pods": {
        "metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}));
    let h = hpa(1, 10, metrics);
    let d = run(
        &h,
        2,
        &pods(2, Some(500)),
        &usage(2, 450),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert_eq!((d.rescale, d.desired_replicas), (true, 4));
    assert_eq!(condition(&d, "ScalingActive").1, "ValidMetricFound");
    assert_eq!(d.events[0].reason, "FailedGetPodsMetric");
    assert_eq!(
        d.events[0].message,
        "unable to get metric qps: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"
    );
    assert!(
        d.error.as_deref().unwrap().starts_with("invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: unable to get metric qps"),
        "{:?}",
        d.error
    );
    assert_eq!(
        d.status.current_metrics.as_ref().unwrap()[1],
        MetricStatus::default()
    );
}

#[test]
fn zero_replicas_disable_scaling_and_bounds_are_enforced() {
    let h = hpa(2, 5, cpu50());
    let d = run(
        &h,
        0,
        &[],
        &usage(0, 0),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert!(!d.rescale);
    assert_eq!(condition(&d, "ScalingActive").1, "ScalingDisabled");
    let d = run(
        &h,
        9,
        &[],
        &usage(0, 0),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert_eq!(
        (d.rescale, d.desired_replicas, d.rescale_reason.as_str()),
        (true, 5, "Current number of replicas above Spec.MaxReplicas")
    );
    let d = run(
        &h,
        1,
        &[],
        &usage(0, 0),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    assert_eq!(
        (d.desired_replicas, d.rescale_reason.as_str()),
        (2, "Current number of replicas below Spec.MinReplicas")
    );
}

#[test]
fn scale_down_waits_out_the_stabilization_window() {
    let h = hpa(1, 10, cpu50());
    let mut history = History::default();
    let cfg = CalculatorConfig::default();
    // At 50%: keep 4, recorded as a recommendation.
    let d = run(
        &h,
        4,
        &pods(4, Some(1000)),
        &usage(4, 500),
        &mut history,
        &cfg,
        t(0),
    );
    assert!(!d.rescale);
    // At 10% a minute later: the metrics ask for 1, the window holds 4.
    let d = run(
        &h,
        4,
        &pods(4, Some(1000)),
        &usage(4, 100),
        &mut history,
        &cfg,
        t(60),
    );
    assert!(!d.rescale);
    assert_eq!(condition(&d, "AbleToScale").1, "ScaleDownStabilized");
    // Past 300 s: 1, with "All metrics below target".
    let d = run(
        &h,
        4,
        &pods(4, Some(1000)),
        &usage(4, 100),
        &mut history,
        &cfg,
        t(361),
    );
    assert_eq!(
        (d.desired_replicas, d.rescale_reason.as_str()),
        (1, "All metrics below target")
    );
}

#[test]
fn failed_rescale_and_failed_get_scale() {
    let h = hpa(1, 10, cpu50());
    let mut d = run(
        &h,
        2,
        &pods(2, Some(500)),
        &usage(2, 450),
        &mut History::default(),
        &CalculatorConfig::default(),
        t(0),
    );
    after_rescale(&mut d, Err("conflict".into()), t(0));
    assert_eq!(d.events.last().unwrap().reason, "FailedRescale");
    assert_eq!(
        d.events.last().unwrap().message,
        "New size: 4; reason: cpu resource utilization (percentage of request) above target; error: conflict"
    );
    assert_eq!(condition(&d, "AbleToScale").1, "FailedUpdateScale");
    let (status, ev) = failed_get_scale(&h, "deployments.apps \"web\" not found", t(0));
    assert_eq!(ev.reason, "FailedGetScale");
    let c = &status.conditions.unwrap()[0];
    assert_eq!(
        c.message.as_deref(),
        Some(
            "the HPA controller was unable to get the target's current scale: deployments.apps \"web\" not found"
        )
    );
}
