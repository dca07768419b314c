//! Tests of stabilization, the scale rate limits and the conditions they set.

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn reasons(n: &Normalized) -> Vec<(&str, &str)> {
    n.conditions.iter().map(|c| (c.status, c.reason)).collect()
}

#[test]
fn without_behavior_scale_down_waits_for_the_highest_recent_recommendation() {
    let mut h = History::default();
    let n = normalize(&mut h, 5, 8, 1, 10, t(0));
    assert_eq!(n.replicas, 8);
    // 100 s later the metrics ask for 2: the recommendation 8 of t(0) holds.
    let n = normalize(&mut h, 8, 2, 1, 10, t(100));
    assert_eq!((n.replicas, n.stabilized), (8, 8));
    assert_eq!(
        reasons(&n),
        vec![
            ("True", "ScaleDownStabilized"),
            ("False", "DesiredWithinRange")
        ]
    );
    // After 300 s both older samples are out of the window.
    let n = normalize(&mut h, 8, 2, 1, 10, t(401));
    assert_eq!(n.replicas, 2, "{}", n.arithmetic);
}

#[test]
fn without_behavior_scale_up_is_at_most_double_or_four() {
    let mut h = History::default();
    // From 1: max(2×1, 4) = 4.
    let n = normalize(&mut h, 1, 20, 1, 50, t(0));
    assert_eq!(n.replicas, 4);
    assert_eq!(n.conditions[1].reason, "ScaleUpLimit");
    assert_eq!(
        n.conditions[1].message,
        "the desired replica count is increasing faster than the maximum scale rate"
    );
    // From 10 the limit is 20 but max is 12.
    let n = normalize(&mut History::default(), 10, 30, 1, 12, t(0));
    assert_eq!(
        (n.replicas, n.conditions[1].reason, n.conditions[1].status),
        (12, "TooManyReplicas", "True")
    );
    // Below min.
    let n = normalize(&mut History::default(), 3, 1, 2, 12, t(0));
    assert_eq!((n.replicas, n.conditions[1].reason), (2, "TooFewReplicas"));
}

fn rules(window: i32, select: &str, policies: &[(&str, i32, i32)]) -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(window),
        select_policy: Some(select.into()),
        policies: Some(
            policies
                .iter()
                .map(|(ty, v, p)| policy(ty, *v, *p))
                .collect(),
        ),
        ..Default::default()
    }
}

#[test]
fn default_behavior_scale_up_takes_the_bigger_of_100_percent_and_4_pods() {
    let b = HorizontalPodAutoscalerBehavior::default();
    // From 10: max(ceil(10 × 2), 10 + 4) = 20.
    let n = normalize_with_behavior(&mut History::default(), &b, 10, 50, 1, 100, t(0));
    assert_eq!((n.replicas, n.conditions[1].reason), (20, "ScaleUpLimit"));
    // From 2: max(4, 6) = 6.
    let n = normalize_with_behavior(&mut History::default(), &b, 2, 50, 1, 100, t(0));
    assert_eq!(n.replicas, 6);
}

#[test]
fn scale_events_in_the_period_lower_the_limit() {
    let b = HorizontalPodAutoscalerBehavior {
        scale_up: Some(rules(0, "Max", &[("Pods", 2, 60)])),
        ..Default::default()
    };
    let mut h = History::default();
    // 4 → 6 at t(0): the Pods policy allows 2 per 60 s.
    let n = normalize_with_behavior(&mut h, &b, 4, 10, 1, 20, t(0));
    assert_eq!(n.replicas, 6);
    store_scale_event(&mut h, &b, 4, 6, t(0));
    // 30 s later the period started at 6 − 2 = 4: limit 4 + 2 = 6, no room.
    let n = normalize_with_behavior(&mut h, &b, 6, 10, 1, 20, t(30));
    assert_eq!((n.replicas, n.conditions[1].reason), (6, "ScaleUpLimit"));
    // 61 s later the event left the period: 6 + 2 = 8.
    let n = normalize_with_behavior(&mut h, &b, 6, 10, 1, 20, t(61));
    assert_eq!(n.replicas, 8);
}

#[test]
fn scale_down_policies_min_max_and_disabled() {
    let down = |select: &str| HorizontalPodAutoscalerBehavior {
        scale_down: Some(rules(0, select, &[("Percent", 50, 60), ("Pods", 1, 60)])),
        ..Default::default()
    };
    // From 10 to 1: Max picks the bigger change, floor(10 × 0.5) = 5; Min picks 10 − 1 = 9.
    let n = normalize_with_behavior(&mut History::default(), &down("Max"), 10, 1, 1, 20, t(0));
    assert_eq!((n.replicas, n.conditions[1].reason), (5, "ScaleDownLimit"));
    let n = normalize_with_behavior(&mut History::default(), &down("Min"), 10, 1, 1, 20, t(0));
    assert_eq!(n.replicas, 9);
    let n = normalize_with_behavior(
        &mut History::default(),
        &down("Disabled"),
        10,
        1,
        1,
        20,
        t(0),
    );
    assert_eq!(n.replicas, 10);
    // A Percent scale down of 3 by 50% floors to 1, limited by minReplicas 2: TooFewReplicas.
    let n = normalize_with_behavior(&mut History::default(), &down("Max"), 3, 1, 2, 20, t(0));
    assert_eq!((n.replicas, n.conditions[1].reason), (2, "TooFewReplicas"));
}

#[test]
fn scale_up_stabilization_applies_the_lowest_recent_recommendation() {
    let b = HorizontalPodAutoscalerBehavior {
        scale_up: Some(rules(120, "Max", &[("Pods", 100, 15)])),
        scale_down: Some(rules(0, "Max", &[("Percent", 100, 15)])),
    };
    let mut h = History::default();
    let n = normalize_with_behavior(&mut h, &b, 3, 3, 1, 20, t(0));
    assert_eq!(n.replicas, 3);
    let n = normalize_with_behavior(&mut h, &b, 3, 9, 1, 20, t(60));
    assert_eq!(
        (n.replicas, n.conditions[0].reason),
        (3, "ScaleUpStabilized")
    );
    assert_eq!(
        n.conditions[0].message,
        "recent recommendations were lower than current one, applying the lowest recent recommendation"
    );
    // t(0)'s 3 left the 120 s window; t(60)'s 9 remains: 9.
    let n = normalize_with_behavior(&mut h, &b, 3, 12, 1, 20, t(121));
    assert_eq!(n.replicas, 9);
}

#[test]
fn unset_rules_take_kubernetes_defaults() {
    let partial = HPAScalingRules {
        select_policy: Some("Min".into()),
        ..Default::default()
    };
    let r = with_defaults(Some(&partial), default_scale_down());
    assert_eq!(r.stabilization_window_seconds, Some(300));
    assert_eq!(r.select_policy.as_deref(), Some("Min"));
    assert_eq!(r.policies.unwrap()[0].period_seconds, 15);
    let up = default_scale_up();
    assert_eq!(
        up.policies
            .unwrap()
            .iter()
            .map(|p| (p.type_.as_str(), p.value))
            .collect::<Vec<_>>(),
        vec![("Pods", 4), ("Percent", 100)]
    );
}
