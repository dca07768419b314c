//! Tests of the replica calculator's arithmetic.

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

/// A Running, Ready pod started 10 minutes before `t(0)`, requesting `request` millicores.
fn pod(name: &str, request: i64) -> PodInfo {
    PodInfo {
        name: name.into(),
        phase: "Running".into(),
        deleting: false,
        ready: Some(("True".into(), t(-590))),
        start_time: Some(t(-600)),
        requests: vec![("app".into(), BTreeMap::from([("cpu".to_string(), request)]))],
    }
}

fn metric(value: i64) -> PodMetric {
    PodMetric {
        value,
        timestamp: t(0),
        window: SignedDuration::from_secs(30),
    }
}

fn metrics(values: &[(&str, i64)]) -> BTreeMap<String, PodMetric> {
    values
        .iter()
        .map(|(n, v)| (n.to_string(), metric(*v)))
        .collect()
}

fn calc(
    current: i32,
    target: ResourceTarget,
    pods: &[PodInfo],
    m: &BTreeMap<String, PodMetric>,
) -> Result<Recommendation, String> {
    resource_replicas(
        current,
        target,
        "cpu",
        None,
        pods,
        m,
        &CalculatorConfig::default(),
        t(0),
    )
}

#[test]
fn scale_up_is_ceil_of_ratio_times_ready_pods() {
    // 3 pods at 900m of 1000m: 90% / 50% = 1.8 → ceil(5.4) = 6.
    let pods = [pod("a", 1000), pod("b", 1000), pod("c", 1000)];
    let m = metrics(&[("a", 900), ("b", 900), ("c", 900)]);
    let r = calc(3, ResourceTarget::Utilization(50), &pods, &m).unwrap();
    assert_eq!((r.replicas, r.utilization, r.raw_average), (6, 90, 900));
    assert!(
        r.arithmetic.ends_with(
            "desired = ceil(current × usage / target) = ceil(3 ready × 90% / 50%) = ceil(5.400) = 6"
        ),
        "{}",
        r.arithmetic
    );
}

#[test]
fn scale_down_and_tolerance() {
    let pods = [
        pod("a", 1000),
        pod("b", 1000),
        pod("c", 1000),
        pod("d", 1000),
    ];
    // 20% / 50% = 0.4 → ceil(1.6) = 2.
    let low = metrics(&[("a", 200), ("b", 200), ("c", 200), ("d", 200)]);
    assert_eq!(
        calc(4, ResourceTarget::Utilization(50), &pods, &low)
            .unwrap()
            .replicas,
        2
    );
    // 54% / 50% = 1.08: within 0.1, the current count stays.
    let near = metrics(&[("a", 540), ("b", 540), ("c", 540), ("d", 540)]);
    assert_eq!(
        calc(4, ResourceTarget::Utilization(50), &pods, &near)
            .unwrap()
            .replicas,
        4
    );
    // 56% / 50% = 1.12: outside, ceil(4.48) = 5.
    let over = metrics(&[("a", 560), ("b", 560), ("c", 560), ("d", 560)]);
    assert_eq!(
        calc(4, ResourceTarget::Utilization(50), &pods, &over)
            .unwrap()
            .replicas,
        5
    );
}

#[test]
fn missing_request_is_an_error_with_kubernetes_message() {
    let mut p = pod("a", 0);
    p.requests = vec![("app".into(), BTreeMap::new())];
    let err = calc(
        1,
        ResourceTarget::Utilization(50),
        &[p],
        &metrics(&[("a", 100)]),
    )
    .unwrap_err();
    assert_eq!(err, "missing request for cpu in container app of Pod a");
}

#[test]
fn deleted_and_failed_pods_are_ignored() {
    let mut gone = pod("gone", 1000);
    gone.deleting = true;
    let mut failed = pod("failed", 1000);
    failed.phase = "Failed".into();
    let pods = [pod("a", 1000), gone, failed];
    let m = metrics(&[("a", 1000), ("gone", 0), ("failed", 0)]);
    // Only a counts: 100% / 50% = 2 → ceil(2 × 1) = 2.
    assert_eq!(
        calc(3, ResourceTarget::Utilization(50), &pods, &m)
            .unwrap()
            .replicas,
        2
    );
}

#[test]
fn missing_pods_count_as_zero_on_scale_up() {
    // a, b at 100%; c has no metric. Ratio 2.0; with c at 0: 2000/3000 = 66% → 1.33, ceil(1.33 × 3) = 4.
    let pods = [pod("a", 1000), pod("b", 1000), pod("c", 1000)];
    let m = metrics(&[("a", 1000), ("b", 1000)]);
    let r = calc(3, ResourceTarget::Utilization(50), &pods, &m).unwrap();
    assert_eq!(r.replicas, 4, "{}", r.arithmetic);
}

#[test]
fn missing_pods_count_as_full_request_on_scale_down() {
    // a, b at 10%; c missing counts as max(100, 50)% = 1000m: (100+100+1000)/3000 = 40% → 0.8
    // → ceil(0.8 × 3) = 3, not below the current 3... equals it, so 3.
    let pods = [pod("a", 1000), pod("b", 1000), pod("c", 1000)];
    let m = metrics(&[("a", 100), ("b", 100)]);
    assert_eq!(
        calc(3, ResourceTarget::Utilization(50), &pods, &m)
            .unwrap()
            .replicas,
        3
    );
    // Without the missing pod the plain path would give ceil(0.2 × 2) = 1.
    let two = [pod("a", 1000), pod("b", 1000)];
    assert_eq!(
        calc(2, ResourceTarget::Utilization(50), &two, &m)
            .unwrap()
            .replicas,
        1
    );
}

#[test]
fn unready_pods_count_as_zero_only_on_scale_up() {
    let mut pending = pod("p", 1000);
    pending.phase = "Pending".into();
    let pods = [pod("a", 1000), pod("b", 1000), pending];
    // Ratio 1.6 with a, b; with p at 0: 1600/3000 = 53% → 1.06, within tolerance: keep 3.
    let m = metrics(&[("a", 800), ("b", 800)]);
    assert_eq!(
        calc(3, ResourceTarget::Utilization(50), &pods, &m)
            .unwrap()
            .replicas,
        3
    );
    // Scale down ignores the unready pod: 10% / 50% = 0.2 → ceil(0.2 × 2) = 1.
    let low = metrics(&[("a", 100), ("b", 100)]);
    assert_eq!(
        calc(3, ResourceTarget::Utilization(50), &pods, &low)
            .unwrap()
            .replicas,
        1
    );
}

#[test]
fn cpu_samples_of_starting_pods_are_unready() {
    // Started 60 s ago (inside the 5 min initialization), Ready 20 s ago; the sample at t(0)
    // with a 30 s window began before readiness: unready.
    let mut starting = pod("s", 1000);
    starting.start_time = Some(t(-60));
    starting.ready = Some(("True".into(), t(-20)));
    let groups = group_pods(
        &[starting.clone()],
        &metrics(&[("s", 500)]),
        true,
        &CalculatorConfig::default(),
        t(0),
    );
    assert!(groups.unready.contains("s"));
    // Memory samples don't care.
    let groups = group_pods(
        &[starting],
        &metrics(&[("s", 500)]),
        false,
        &CalculatorConfig::default(),
        t(0),
    );
    assert_eq!(groups.ready, 1);
}

#[test]
fn average_value_targets_divide_the_average() {
    // 3 pods averaging 300m against 100m: ratio 3 → ceil(9) = 9.
    let pods = [pod("a", 1000), pod("b", 1000), pod("c", 1000)];
    let m = metrics(&[("a", 200), ("b", 300), ("c", 400)]);
    let r = calc(3, ResourceTarget::AverageValue(100), &pods, &m).unwrap();
    assert_eq!((r.replicas, r.raw_average), (9, 300));
}

#[test]
fn no_pods_or_no_usable_metrics_are_errors() {
    let err = calc(1, ResourceTarget::Utilization(50), &[], &BTreeMap::new()).unwrap_err();
    assert_eq!(
        err,
        "no pods returned by selector while calculating replica count"
    );
    let mut pending = pod("p", 1000);
    pending.phase = "Pending".into();
    let err = calc(
        1,
        ResourceTarget::Utilization(50),
        &[pending],
        &metrics(&[("p", 1)]),
    )
    .unwrap_err();
    assert_eq!(
        err,
        "did not receive metrics for targeted pods (pods might be unready)"
    );
}
