//! Normalization of the metrics' recommendation into the count to write: the stabilization
//! window over recent recommendations, the scale rate limits, and min/max clamping, with the
//! condition each step sets.
//!
//! Mirrors `pkg/controller/podautoscaler/horizontal.go`: `normalizeDesiredReplicas`,
//! `stabilizeRecommendation`, `convertDesiredReplicasWithRules`, `calculateScaleUpLimit`
//! (no `behavior`), and `normalizeDesiredReplicasWithBehaviors`,
//! `stabilizeRecommendationWithBehaviors`, `convertDesiredReplicasWithBehaviorRate`,
//! `calculateScaleUpLimitWithScalingRules`, `calculateScaleDownLimitWithBehaviors`,
//! `getReplicasChangePerPeriod`, `storeScaleEvent` (with `behavior`); the defaults are those
//! of `pkg/apis/autoscaling/v2/defaults.go`.
//!
//! ```text
//!   recommendations of the last window ─▶ up: min(recent), down: max(recent)
//!   stabilized = clamp(current, up, down)        AbleToScale ScaleUp/DownStabilized
//!   rate limit: periodStart = current − added (+ removed) in each policy's period
//!     Pods: start ± value   Percent: ceil(start × (1+v/100)) up, floor(start × (1−v/100)) down
//!     selectPolicy Max (the biggest change), Min (the smallest), Disabled (no change)
//!   clamp to [minReplicas, maxReplicas] ─▶ ScalingLimited True/False with its reason
//! ```

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscalerBehavior,
};

/// Without `behavior`: how long a scale down waits (`--horizontal-pod-autoscaler-downscale-stabilization`).
pub const DEFAULT_DOWNSCALE_STABILIZATION: SignedDuration = SignedDuration::from_secs(300);
/// Without `behavior`: a scale up at most doubles the count (`scaleUpLimitFactor`)...
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
/// ... or reaches 4 (`scaleUpLimitMinimum`).
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

/// A condition a normalization step sets: its type, status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepCondition {
    /// `AbleToScale` or `ScalingLimited`.
    pub type_: &'static str,
    /// `"True"` or `"False"`.
    pub status: &'static str,
    /// Kubernetes' reason.
    pub reason: &'static str,
    /// Kubernetes' message.
    pub message: &'static str,
}

/// What normalization decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The count to write.
    pub replicas: i32,
    /// The count after stabilization, before the rate limits and clamping.
    pub stabilized: i32,
    /// The `AbleToScale` and `ScalingLimited` conditions, in that order.
    pub conditions: Vec<StepCondition>,
    /// The arithmetic, for traces.
    pub arithmetic: String,
}

/// A timestamped scale change (`timestampedScaleEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleEvent {
    /// Replicas added (scale up list) or removed (scale down list).
    pub change: i32,
    /// When.
    pub at: Timestamp,
}

/// What the controller remembers of one HorizontalPodAutoscaler between syncs: its recent
/// recommendations and scale events (`recommendations`, `scaleUpEvents`, `scaleDownEvents`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Unstabilized recommendations with their times.
    pub recommendations: Vec<(i32, Timestamp)>,
    /// Scale ups.
    pub scale_up_events: Vec<ScaleEvent>,
    /// Scale downs.
    pub scale_down_events: Vec<ScaleEvent>,
}

fn ago(now: Timestamp, secs: i64) -> Timestamp {
    now.checked_sub(SignedDuration::from_secs(secs))
        .unwrap_or(Timestamp::MIN)
}

/// The defaulted scale-up rules: no stabilization, 4 pods or 100% per 15 s, `Max`.
pub fn default_scale_up() -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Pods", 4, 15), policy("Percent", 100, 15)]),
        ..Default::default()
    }
}

/// The defaulted scale-down rules: 300 s stabilization, 100% per 15 s, `Max`.
pub fn default_scale_down() -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(300),
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Percent", 100, 15)]),
        ..Default::default()
    }
}

fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds,
    }
}

/// Fills the unset fields of `rules` from `defaults` (`SetDefaults_HorizontalPodAutoscalerBehavior`).
pub fn with_defaults(
    rules: Option<&HPAScalingRules>,
    defaults: HPAScalingRules,
) -> HPAScalingRules {
    let Some(rules) = rules else { return defaults };
    HPAScalingRules {
        stabilization_window_seconds: rules
            .stabilization_window_seconds
            .or(defaults.stabilization_window_seconds),
        select_policy: rules.select_policy.clone().or(defaults.select_policy),
        policies: rules.policies.clone().or(defaults.policies),
        tolerance: rules.tolerance.clone(),
    }
}

fn able(reason: &'static str, message: &'static str) -> StepCondition {
    StepCondition {
        type_: "AbleToScale",
        status: "True",
        reason,
        message,
    }
}

fn limited(limited: bool, reason: &'static str, message: &'static str) -> StepCondition {
    StepCondition {
        type_: "ScalingLimited",
        status: if limited { "True" } else { "False" },
        reason,
        message,
    }
}

const READY: (&str, &str) = ("ReadyForNewScale", "recommended size matches current size");
const UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const WITHIN: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
const UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);

/// Records `desired` in the history, replacing the oldest sample older than `cutoff`.
fn record(history: &mut History, desired: i32, old: Option<usize>, now: Timestamp) {
    match old {
        Some(i) => history.recommendations[i] = (desired, now),
        None => history.recommendations.push((desired, now)),
    }
}

/// `recordInitialRecommendation`: a new autoscaler's first recommendation is the current count.
pub fn record_initial_recommendation(history: &mut History, current: i32, now: Timestamp) {
    if history.recommendations.is_empty() {
        history.recommendations.push((current, now));
    }
}

/// `normalizeDesiredReplicas`: the path without `behavior`.
pub fn normalize(
    history: &mut History,
    current: i32,
    desired: i32,
    min_replicas: i32,
    max_replicas: i32,
    now: Timestamp,
) -> Normalized {
    let cutoff = ago(now, DEFAULT_DOWNSCALE_STABILIZATION.as_secs());
    let (mut stabilized, mut old) = (desired, None);
    for (i, (rec, at)) in history.recommendations.iter().enumerate() {
        if *at < cutoff {
            old = Some(i);
        } else if *rec > stabilized {
            stabilized = *rec;
        }
    }
    record(history, desired, old, now);
    let first = if stabilized != desired {
        able(DOWN_STABILIZED.0, DOWN_STABILIZED.1)
    } else {
        able(READY.0, READY.1)
    };
    let scale_up_limit =
        (SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM) as i32;
    let (max_allowed, over) = if max_replicas > scale_up_limit {
        (scale_up_limit, UP_LIMIT)
    } else {
        (max_replicas, TOO_MANY)
    };
    let (replicas, why) = if stabilized < min_replicas {
        (min_replicas, TOO_FEW)
    } else if stabilized > max_allowed {
        (max_allowed, over)
    } else {
        (stabilized, WITHIN)
    };
    Normalized {
        replicas,
        stabilized,
        conditions: vec![first, limited(replicas != stabilized, why.0, why.1)],
        arithmetic: format!(
            "desired {desired}, highest in 300s {stabilized}; allowed [{min_replicas}, min({max_replicas}, max(2×{current}, 4)) = {max_allowed}] → {replicas}"
        ),
    }
}

/// Replicas changed by the events within the last `period_seconds` (`getReplicasChangePerPeriod`).
fn change_in_period(period_seconds: i32, events: &[ScaleEvent], now: Timestamp) -> i32 {
    let cutoff = ago(now, i64::from(period_seconds));
    events
        .iter()
        .filter(|e| e.at > cutoff)
        .map(|e| e.change)
        .sum()
}

/// `calculateScaleUpLimitWithScalingRules`.
pub fn scale_up_limit(
    current: i32,
    history: &History,
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let select = rules.select_policy.as_deref().unwrap_or("Max");
    if select == "Disabled" {
        return current;
    }
    let min_change = select == "Min";
    let mut result = if min_change { i32::MAX } else { i32::MIN };
    for p in rules.policies.iter().flatten() {
        let start = current - change_in_period(p.period_seconds, &history.scale_up_events, now);
        let proposed = match p.type_.as_str() {
            "Pods" => start + p.value,
            _ => (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32,
        };
        result = if min_change {
            result.min(proposed)
        } else {
            result.max(proposed)
        };
    }
    result
}

/// `calculateScaleDownLimitWithBehaviors`.
pub fn scale_down_limit(
    current: i32,
    history: &History,
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let select = rules.select_policy.as_deref().unwrap_or("Max");
    if select == "Disabled" {
        return current;
    }
    let min_change = select == "Min";
    let mut result = if min_change { i32::MIN } else { i32::MAX };
    for p in rules.policies.iter().flatten() {
        let start = current - change_in_period(p.period_seconds, &history.scale_up_events, now)
            + change_in_period(p.period_seconds, &history.scale_down_events, now);
        let proposed = match p.type_.as_str() {
            "Pods" => start - p.value,
            _ => (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32,
        };
        result = if min_change {
            result.max(proposed)
        } else {
            result.min(proposed)
        };
    }
    result
}

/// `normalizeDesiredReplicasWithBehaviors`: the path with `behavior` (unset rules defaulted).
pub fn normalize_with_behavior(
    history: &mut History,
    behavior: &HorizontalPodAutoscalerBehavior,
    current: i32,
    desired: i32,
    min_replicas: i32,
    max_replicas: i32,
    now: Timestamp,
) -> Normalized {
    let up_rules = with_defaults(behavior.scale_up.as_ref(), default_scale_up());
    let down_rules = with_defaults(behavior.scale_down.as_ref(), default_scale_down());
    let up_window = i64::from(up_rules.stabilization_window_seconds.unwrap_or(0));
    let down_window = i64::from(down_rules.stabilization_window_seconds.unwrap_or(300));
    let (up_cutoff, down_cutoff) = (ago(now, up_window), ago(now, down_window));
    let (mut up_rec, mut down_rec, mut old) = (desired, desired, None);
    for (i, (rec, at)) in history.recommendations.iter().enumerate() {
        if *at > up_cutoff {
            up_rec = up_rec.min(*rec);
        }
        if *at > down_cutoff {
            down_rec = down_rec.max(*rec);
        }
        if *at < up_cutoff && *at < down_cutoff {
            old = Some(i);
        }
    }
    let stabilized = current.max(up_rec).min(down_rec);
    record(history, desired, old, now);
    let first = if stabilized == desired {
        able(READY.0, READY.1)
    } else if desired >= current {
        able(UP_STABILIZED.0, UP_STABILIZED.1)
    } else {
        able(DOWN_STABILIZED.0, DOWN_STABILIZED.1)
    };
    let (mut replicas, mut why, mut limit_text) = (stabilized, WITHIN, String::new());
    if stabilized > current {
        let limit = scale_up_limit(current, history, &up_rules, now).max(current);
        let (allowed, reason) = if max_replicas > limit {
            (limit, UP_LIMIT)
        } else {
            (max_replicas, TOO_MANY)
        };
        limit_text = format!("; scale-up limit {limit}, max {max_replicas}");
        if stabilized > allowed {
            (replicas, why) = (allowed, reason);
        }
    } else if stabilized < current {
        let limit = scale_down_limit(current, history, &down_rules, now).min(current);
        let (allowed, reason) = if min_replicas < limit {
            (limit, DOWN_LIMIT)
        } else {
            (min_replicas, TOO_FEW)
        };
        limit_text = format!("; scale-down limit {limit}, min {min_replicas}");
        if stabilized < allowed {
            (replicas, why) = (allowed, reason);
        }
    }
    Normalized {
        replicas,
        stabilized,
        conditions: vec![first, limited(replicas != stabilized, why.0, why.1)],
        arithmetic: format!(
            "desired {desired}, lowest in {up_window}s {up_rec}, highest in {down_window}s {down_rec}: stabilized {stabilized} (current {current}){limit_text} → {replicas}"
        ),
    }
}

/// `storeScaleEvent`: remembers a rescale from `prev` to `new` for the rate limits, dropping
/// events older than the longest policy period of that direction.
pub fn store_scale_event(
    history: &mut History,
    behavior: &HorizontalPodAutoscalerBehavior,
    prev: i32,
    new: i32,
    now: Timestamp,
) {
    let longest = |rules: HPAScalingRules| {
        rules
            .policies
            .iter()
            .flatten()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0)
    };
    let (events, change, period) = if new > prev {
        let rules = with_defaults(behavior.scale_up.as_ref(), default_scale_up());
        (&mut history.scale_up_events, new - prev, longest(rules))
    } else {
        let rules = with_defaults(behavior.scale_down.as_ref(), default_scale_down());
        (&mut history.scale_down_events, prev - new, longest(rules))
    };
    let cutoff = ago(now, i64::from(period));
    events.retain(|e| e.at >= cutoff);
    events.push(ScaleEvent { change, at: now });
}

#[cfg(test)]
#[path = "behavior_tests.rs"]
mod tests;
