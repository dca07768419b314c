//! The replica calculator for resource metrics: from the pods a HorizontalPodAutoscaler's
//! target selects and their metrics, how many replicas would bring usage to the target.
//!
//! Mirrors `pkg/controller/podautoscaler/replica_calculator.go` (`GetResourceReplicas`,
//! `groupPods`, `calculatePodRequests`, `removeMetricsForPods`, the tolerance check) and
//! `pkg/controller/podautoscaler/metrics/utilization.go` (`GetResourceUtilizationRatio`,
//! `GetMetricUsageRatio`).
//!
//! ```text
//!   pods ─▶ ignored (being deleted, Failed) │ unready (Pending; cpu: not Ready yet / sample
//!           taken before readiness settled)  │ missing (no metric) │ ready (with a metric)
//!   ratio = utilization / target, utilization = Σ usage·100 / Σ requests (ready pods)
//!   no unready-on-scale-up, no missing:  |ratio-1| ≤ 0.1 ─▶ current, else ceil(ratio × ready)
//!   otherwise missing pods count as 0 (scale up) or as max(100%, target) of request
//!   (scale down), unready pods as 0 on scale up; the ratio is recomputed and a change of
//!   direction or a result within tolerance keeps the current count
//! ```

use jiff::{SignedDuration, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// The default `--horizontal-pod-autoscaler-tolerance`.
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// The default `--horizontal-pod-autoscaler-cpu-initialization-period` (5 minutes).
pub const DEFAULT_CPU_INITIALIZATION_PERIOD: SignedDuration = SignedDuration::from_secs(300);
/// The default `--horizontal-pod-autoscaler-initial-readiness-delay` (30 seconds).
pub const DEFAULT_INITIAL_READINESS_DELAY: SignedDuration = SignedDuration::from_secs(30);

/// How far the usage ratio may stray from 1.0 before the calculator acts (`Tolerances`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Below 1.0: the ratio must fall under `1 - scale_down` to scale down.
    pub scale_down: f64,
    /// Above 1.0: the ratio must rise over `1 + scale_up` to scale up.
    pub scale_up: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            scale_down: DEFAULT_TOLERANCE,
            scale_up: DEFAULT_TOLERANCE,
        }
    }
}

impl Tolerances {
    /// Whether `ratio` is close enough to 1.0 to leave the count alone (`isWithin`).
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

/// What the calculator needs to know of one pod the target selects.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodInfo {
    /// `metadata.name`.
    pub name: String,
    /// `status.phase` (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    pub phase: String,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The `Ready` condition: its status (`"True"`, `"False"`, ...) and last transition time.
    pub ready: Option<(String, Timestamp)>,
    /// `status.startTime`.
    pub start_time: Option<Timestamp>,
    /// Each container's name and requests (resource name → milli-units).
    pub requests: Vec<(String, BTreeMap<String, i64>)>,
}

/// What the calculator needs of a pod.
pub fn pod_info(pod: &k8s_openapi::api::core::v1::Pod) -> PodInfo {
    let status = pod.status.as_ref();
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| {
                (
                    c.status.clone(),
                    c.last_transition_time
                        .as_ref()
                        .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
                )
            }),
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
        requests: container_requests(pod),
    }
}

/// Each container's requests in milli-units.
pub fn container_requests(
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Vec<(String, BTreeMap<String, i64>)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let requests = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|(name, q)| {
                    let q = apimachinery::resource::quantity::Quantity::parse(&q.0).ok()?;
                    Some((name.clone(), q.milli_value()))
                })
                .collect();
            (c.name.clone(), requests)
        })
        .collect()
}

/// One pod's metric sample (`PodMetric`): the value in milli-units, when it was taken and
/// over which window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    /// The usage in milli-units (millicores for cpu, milli-bytes for memory).
    pub value: i64,
    /// When the sample was taken.
    pub timestamp: Timestamp,
    /// The window the sample averages over.
    pub window: SignedDuration,
}

/// The calculator's settings (the controller manager's flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalculatorConfig {
    /// The tolerance around the target.
    pub tolerances: Tolerances,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: SignedDuration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: SignedDuration,
}

impl Default for CalculatorConfig {
    fn default() -> Self {
        CalculatorConfig {
            tolerances: Tolerances::default(),
            cpu_initialization_period: DEFAULT_CPU_INITIALIZATION_PERIOD,
            initial_readiness_delay: DEFAULT_INITIAL_READINESS_DELAY,
        }
    }
}

/// What the calculator found for one resource metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// The replica count the metric asks for.
    pub replicas: i32,
    /// The utilization in percent of the request (0 for `AverageValue` targets).
    pub utilization: i32,
    /// The average usage per pod with a metric, in milli-units.
    pub raw_average: i64,
    /// The arithmetic, for traces.
    pub arithmetic: String,
}

/// The pods sorted into the four groups of `groupPods`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodGroups {
    /// Ready pods with a metric.
    pub ready: usize,
    /// Pods whose samples can't be trusted yet.
    pub unready: BTreeSet<String>,
    /// Pods without a metric.
    pub missing: BTreeSet<String>,
    /// Pods being deleted or failed.
    pub ignored: BTreeSet<String>,
}

/// Sorts the pods as `groupPods` does; `is_cpu` turns on the readiness checks that only cpu
/// samples need (a starting container burns cpu).
pub fn group_pods(
    pods: &[PodInfo],
    metrics: &BTreeMap<String, PodMetric>,
    is_cpu: bool,
    config: &CalculatorConfig,
    now: Timestamp,
) -> PodGroups {
    let mut groups = PodGroups::default();
    for pod in pods {
        if pod.deleting || pod.phase == "Failed" {
            groups.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.phase == "Pending" {
            groups.unready.insert(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            groups.missing.insert(pod.name.clone());
            continue;
        };
        if is_cpu {
            let unready = match (&pod.ready, pod.start_time) {
                (Some((status, transition)), Some(start)) => {
                    if add(start, config.cpu_initialization_period) > now {
                        status == "False" || metric.timestamp < add(*transition, metric.window)
                    } else {
                        status == "False"
                            && add(start, config.initial_readiness_delay) > *transition
                    }
                }
                _ => true,
            };
            if unready {
                groups.unready.insert(pod.name.clone());
                continue;
            }
        }
        groups.ready += 1;
    }
    groups
}

fn add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Each pod's total request (`calculatePodRequests`), of one container when `container` is
/// given; a container without a request is an error with Kubernetes' message.
pub fn pod_requests(
    pods: &[PodInfo],
    container: Option<&str>,
    resource: &str,
) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let mut total = 0i64;
        for (name, request) in &pod.requests {
            if container.is_some_and(|c| c != name) {
                continue;
            }
            match request.get(resource) {
                Some(r) => total += r,
                None => {
                    return Err(format!(
                        "missing request for {resource} in container {name} of Pod {}",
                        pod.name
                    ));
                }
            }
        }
        out.insert(pod.name.clone(), total);
    }
    Ok(out)
}

/// `GetResourceUtilizationRatio`: (ratio, utilization %, average raw usage) over the pods
/// that have both a metric and a request.
pub fn utilization_ratio(
    metrics: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut used, mut requested, mut entries) = (0i64, 0i64, 0i64);
    for (pod, value) in metrics {
        if let Some(r) = requests.get(pod) {
            used += value;
            requested += r;
            entries += 1;
        }
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = ((used * 100) / requested) as i32;
    let ratio = f64::from(utilization) / f64::from(target_utilization.max(1));
    Ok((ratio, utilization, used / entries))
}

/// The target of a resource metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ResourceTarget {
    /// `Utilization`: percent of the pods' requests.
    Utilization(i32),
    /// `AverageValue`: milli-units per pod.
    AverageValue(i64),
}

/// `GetResourceReplicas` / `GetRawResourceReplicas`: the count one resource metric asks for.
#[allow(clippy::too_many_arguments)]
pub fn resource_replicas(
    current_replicas: i32,
    target: ResourceTarget,
    resource: &str,
    container: Option<&str>,
    pods: &[PodInfo],
    metrics: &BTreeMap<String, PodMetric>,
    config: &CalculatorConfig,
    now: Timestamp,
) -> Result<Recommendation, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(pods, metrics, resource == "cpu", config, now);
    let mut values: BTreeMap<String, i64> = metrics
        .iter()
        .filter(|(name, _)| !groups.ignored.contains(*name) && !groups.unready.contains(*name))
        .map(|(name, m)| (name.clone(), m.value))
        .collect();
    if values.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let requests = match target {
        ResourceTarget::Utilization(_) => pod_requests(pods, container, resource)?,
        // Raw values need no requests: every pod weighs one.
        ResourceTarget::AverageValue(_) => pods.iter().map(|p| (p.name.clone(), 1)).collect(),
    };
    let ratio_of = |values: &BTreeMap<String, i64>| -> Result<(f64, i32, i64), String> {
        match target {
            ResourceTarget::Utilization(t) => utilization_ratio(values, &requests, t),
            ResourceTarget::AverageValue(t) => {
                // `GetMetricUsageRatio`: the integer average over the target.
                let total: i64 = values.values().sum();
                let avg = total / values.len().max(1) as i64;
                Ok((avg as f64 / t.max(1) as f64, 0, avg))
            }
        }
    };
    let (ratio, utilization, raw) = ratio_of(&values)?;
    // `usage / target` as the trace prints it.
    let what = match target {
        ResourceTarget::Utilization(t) => format!("{utilization}% / {t}%"),
        ResourceTarget::AverageValue(t) => format!("{raw}m / {t}m"),
    };
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    let tol = config.tolerances;
    if !scale_up_with_unready && groups.missing.is_empty() {
        if tol.is_within(ratio) {
            return Ok(Recommendation {
                replicas: current_replicas,
                utilization,
                raw_average: raw,
                arithmetic: format!(
                    "usage / target = {what} = {ratio:.3}, within tolerance: desired = current = {current_replicas}"
                ),
            });
        }
        let replicas = (ratio * groups.ready as f64).ceil() as i32;
        return Ok(Recommendation {
            replicas,
            utilization,
            raw_average: raw,
            arithmetic: format!(
                "desired = ceil(current × usage / target) = ceil({} ready × {what}) = ceil({:.3}) = {replicas}",
                groups.ready,
                ratio * groups.ready as f64
            ),
        });
    }
    if !groups.missing.is_empty() {
        for name in &groups.missing {
            let value = if ratio < 1.0 {
                match target {
                    ResourceTarget::Utilization(t) => {
                        requests.get(name).copied().unwrap_or(0) * i64::from(t.max(100)) / 100
                    }
                    ResourceTarget::AverageValue(t) => t,
                }
            } else {
                0
            };
            if ratio != 1.0 {
                values.insert(name.clone(), value);
            }
        }
    }
    if scale_up_with_unready {
        for name in &groups.unready {
            values.insert(name.clone(), 0);
        }
    }
    let (new_ratio, _, _) = ratio_of(&values)?;
    let keep = |why: &str| Recommendation {
        replicas: current_replicas,
        utilization,
        raw_average: raw,
        arithmetic: format!(
            "usage / target = {what} = {ratio:.3}; with {} missing and {} unready pods {new_ratio:.3}: {why}, desired = current = {current_replicas}",
            groups.missing.len(),
            groups.unready.len()
        ),
    };
    if tol.is_within(new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(keep("within tolerance or direction changed"));
    }
    let replicas = (new_ratio * values.len() as f64).ceil() as i32;
    if (new_ratio < 1.0 && replicas > current_replicas)
        || (new_ratio > 1.0 && replicas < current_replicas)
    {
        return Ok(keep("the result would move against the ratio"));
    }
    Ok(Recommendation {
        replicas,
        utilization,
        raw_average: raw,
        arithmetic: format!(
            "usage / target = {what} = {ratio:.3}; with {} missing and {} unready pods desired = ceil({} pods × {new_ratio:.3}) = {replicas}",
            groups.missing.len(),
            groups.unready.len(),
            values.len()
        ),
    })
}

#[cfg(test)]
#[path = "replica_calculator_tests.rs"]
mod tests;
