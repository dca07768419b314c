//! The simulated resource usage of pods and nodes: what cAdvisor measures on a real node and
//! the kubelet reports through its Summary API (`/stats/summary`) and its resource metrics
//! (`/metrics/resource`), which metrics-server, and through it the HPA and `kubectl top`,
//! read. No Kubernetes counterpart: a node measures its cgroups; here usage is a pure function
//! of the Pod and the time ([`pod_usage`]), so the same pod at the same instant always uses
//! the same amount, whichever process asks.
//!
//! Only running containers use anything (`status.*ContainerStatuses[].state.running`, from
//! its `startedAt`): regular, init (sidecars) and ephemeral containers alike.
//!
//! | annotation | value | effect |
//! | --- | --- | --- |
//! | `miniplane.dev/cpu-usage[.<container>]` | a CPU quantity (`250m`, `1.5`) | the container uses exactly this much CPU (the pod-wide one: each running container of the pod) |
//! | `miniplane.dev/memory-usage[.<container>]` | a memory quantity (`64Mi`) | the container's working set is exactly this |
//!
//! A load set on the pod's workload (`miniplane load`, [`crate::load`]) sets the CPU and the
//! working set of each running container the same way, below the pod's own annotations.
//!
//! Without an annotation a container uses [`DEFAULT_CPU_FRACTION`] of its CPU request and
//! [`DEFAULT_MEMORY_FRACTION`] of its memory request (its limit when it has no request,
//! [`DEFAULT_CPU_NANOCORES`] / [`DEFAULT_MEMORY_BYTES`] when it has neither), varied by up
//! to ±[`VARIATION`] (memory: half of it) along a slow wave of period [`PERIOD`] whose phase
//! is derived from the pod's UID and the container's name: deterministic, different per
//! container, never jumping. An annotated value does not vary. A malformed annotation is
//! ignored. A working set is a whole number of 4 KiB pages, as cAdvisor measures it.
//!
//! CPU comes as a rate (`usageNanoCores`) and as the counter the rate is the derivative of
//! (`usageCoreNanoSeconds`, the integral from the container's start, computed exactly), so
//! rates taken from two samples of the counter, as metrics-server takes them, give back the
//! model's average over the window. When a container's model changes while it runs (an
//! annotation or a load set or lifted), [`ContainerCounters`] keeps its counter continuous:
//! each read adds the current model's integral since the previous read, so the counter never
//! jumps or goes back and the rate between two reads is what the container used. The node adds [`SYSTEM_CPU_NANOCORES`] and
//! [`SYSTEM_MEMORY_BYTES`] for its own daemons; its CPU counter is kept by [`CpuCounter`],
//! since pods come and go.

use std::f64::consts::TAU;
use std::time::Duration;

use apimachinery::resource::quantity::Quantity;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};

use crate::annotations::PREFIX;
use crate::load::Load;

/// `miniplane.dev/cpu-usage[.<container>]`.
pub const CPU_USAGE: &str = "miniplane.dev/cpu-usage";
/// `miniplane.dev/memory-usage[.<container>]`.
pub const MEMORY_USAGE: &str = "miniplane.dev/memory-usage";
/// The share of its CPU request a container uses by default.
pub const DEFAULT_CPU_FRACTION: f64 = 0.3;
/// The share of its memory request a container's working set takes by default.
pub const DEFAULT_MEMORY_FRACTION: f64 = 0.5;
/// The CPU of a container with neither request nor limit: 5m.
pub const DEFAULT_CPU_NANOCORES: u64 = 5_000_000;
/// The working set of a container with neither request nor limit: 16Mi.
pub const DEFAULT_MEMORY_BYTES: u64 = 16 * 1024 * 1024;
/// How far the default CPU strays from its mean, as a fraction of it (memory: half of it).
pub const VARIATION: f64 = 0.1;
/// The period of the default usage's wave.
pub const PERIOD: Duration = Duration::from_secs(120);
/// The CPU a node's own daemons (kubelet, runtime, system) use: 100m.
pub const SYSTEM_CPU_NANOCORES: u64 = 100_000_000;
/// The memory a node's own daemons use: 512Mi.
pub const SYSTEM_MEMORY_BYTES: u64 = 512 * 1024 * 1024;

/// One running container's usage at an instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUsage {
    /// The container's name.
    pub name: String,
    /// When this run started (`state.running.startedAt`).
    pub start: Timestamp,
    /// CPU now, in nanocores (`usageNanoCores`).
    pub cpu_nano_cores: u64,
    /// CPU used since the start, in core-nanoseconds (`usageCoreNanoSeconds`).
    pub cpu_core_nano_seconds: u64,
    /// The working set, in bytes (`workingSetBytes`).
    pub memory_working_set_bytes: u64,
    /// The memory limit, in bytes, if any (`availableBytes` = limit − working set).
    pub memory_limit_bytes: Option<u64>,
}

/// One pod's usage at an instant: its running containers'.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `status.startTime` (else the earliest container start).
    pub start: Timestamp,
    /// The running containers, in status order (init, regular, ephemeral).
    pub containers: Vec<ContainerUsage>,
}

impl PodUsage {
    /// The pod's CPU now: its containers' sum.
    pub fn cpu_nano_cores(&self) -> u64 {
        self.containers.iter().map(|c| c.cpu_nano_cores).sum()
    }

    /// The CPU its running containers used since they started.
    pub fn cpu_core_nano_seconds(&self) -> u64 {
        self.containers
            .iter()
            .map(|c| c.cpu_core_nano_seconds)
            .sum()
    }

    /// The pod's working set: its containers' sum.
    pub fn memory_working_set_bytes(&self) -> u64 {
        self.containers
            .iter()
            .map(|c| c.memory_working_set_bytes)
            .sum()
    }
}

/// The usage of `pod` at `now`: `None` when none of its containers runs.
pub fn pod_usage(pod: &Pod, now: Timestamp) -> Option<PodUsage> {
    pod_usage_with(pod, now, None)
}

/// [`pod_usage`] with the load set on the pod's workload, if any.
pub fn pod_usage_with(pod: &Pod, now: Timestamp, load: Option<&Load>) -> Option<PodUsage> {
    let status = pod.status.as_ref()?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let statuses = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .chain(status.ephemeral_container_statuses.iter().flatten());
    let containers: Vec<ContainerUsage> = statuses
        .filter_map(|s| container_usage(pod, &uid, s, now, load))
        .collect();
    let first = containers.iter().map(|c| c.start).min()?;
    let start = status.start_time.as_ref().map_or(first, |t| t.0.min(first));
    Some(PodUsage {
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        uid,
        start,
        containers,
    })
}

/// When the container whose status is `status` started its current run, if it runs.
fn running_since(status: &ContainerStatus) -> Option<Timestamp> {
    Some(
        status
            .state
            .as_ref()?
            .running
            .as_ref()?
            .started_at
            .as_ref()?
            .0,
    )
}

/// The CPU and memory models of container `name`: its annotations, else the load, else the
/// defaults of its requests.
fn models(pod: &Pod, uid: &str, name: &str, load: Option<&Load>) -> (Rate, Rate) {
    let spec = container_spec(pod, name);
    let phase = phase_of(uid, name);
    let cpu = match annotated(pod, CPU_USAGE, name).or_else(|| load.and_then(|l| l.cpu)) {
        Some(q) => Rate::constant(nanos_u64(q.nanos())),
        None => Rate::waving(default_cpu(spec), VARIATION, phase),
    };
    let memory = match annotated(pod, MEMORY_USAGE, name).or_else(|| load.and_then(|l| l.memory)) {
        Some(q) => Rate::constant(nanos_u64(q.value())),
        None => Rate::waving(default_memory(spec), VARIATION / 2.0, phase + 0.25),
    };
    (cpu, memory)
}

/// The usage of the container whose status is `status`, if it runs (and started by `now`).
fn container_usage(
    pod: &Pod,
    uid: &str,
    status: &ContainerStatus,
    now: Timestamp,
    load: Option<&Load>,
) -> Option<ContainerUsage> {
    let start = running_since(status)?;
    if start > now {
        return None;
    }
    let spec = container_spec(pod, &status.name);
    let (cpu, memory) = models(pod, uid, &status.name, load);
    Some(ContainerUsage {
        name: status.name.clone(),
        start,
        cpu_nano_cores: cpu.at(now).round() as u64,
        cpu_core_nano_seconds: cpu.integral(start, now).round() as u64,
        memory_working_set_bytes: pages(memory.at(now).round() as u64),
        memory_limit_bytes: spec
            .and_then(|c| resource(c, "memory", true))
            .map(|q| nanos_u64(q.value())),
    })
}

/// A usage that is `mean · (1 + amplitude · sin(2π (t/PERIOD + phase)))` at wall time `t`.
#[derive(Debug, Clone, Copy)]
struct Rate {
    mean: f64,
    amplitude: f64,
    phase: f64,
}

impl Rate {
    fn constant(value: u64) -> Self {
        Rate {
            mean: value as f64,
            amplitude: 0.0,
            phase: 0.0,
        }
    }

    fn waving(mean: u64, amplitude: f64, phase: f64) -> Self {
        Rate {
            mean: mean as f64,
            amplitude,
            phase,
        }
    }

    /// The angle of the wave at `t`, taken modulo the period first so that the seconds
    /// since 1970 cost no precision.
    fn angle(&self, t: Timestamp) -> f64 {
        let period = PERIOD.as_secs() as i64;
        let secs = t.as_second().rem_euclid(period) as f64 + f64::from(t.subsec_nanosecond()) / 1e9;
        TAU * (secs / period as f64 + self.phase)
    }

    fn at(&self, t: Timestamp) -> f64 {
        self.mean * (1.0 + self.amplitude * self.angle(t).sin())
    }

    /// `∫ at(t) dt` from `from` to `to`, in value·seconds (nanocores·s = core-nanoseconds).
    fn integral(&self, from: Timestamp, to: Timestamp) -> f64 {
        let span = to.duration_since(from).as_secs_f64().max(0.0);
        let period = PERIOD.as_secs_f64();
        let wave = self.amplitude * period / TAU * (self.angle(from).cos() - self.angle(to).cos());
        (self.mean * (span + wave)).max(0.0)
    }
}

/// The size of a memory page: a working set is a whole number of pages, as cAdvisor counts
/// it (so metrics-server's BinarySI quantities come out in `Ki`).
pub const PAGE_BYTES: u64 = 4096;

/// `bytes` rounded down to whole pages.
fn pages(bytes: u64) -> u64 {
    bytes / PAGE_BYTES * PAGE_BYTES
}

/// A phase in `[0, 1)` from the pod's UID and the container's name (FNV-1a).
fn phase_of(uid: &str, container: &str) -> f64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in uid.bytes().chain([0]).chain(container.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash >> 11) as f64 / (1u64 << 53) as f64
}

fn nanos_u64(n: i128) -> u64 {
    u64::try_from(n.max(0)).unwrap_or(u64::MAX)
}

/// The container `name`'s spec among the regular and init containers (ephemeral containers
/// have no resources).
fn container_spec<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// The request (`limit: false`, falling back to the limit) or the limit of `resource`.
fn resource(c: &Container, resource: &str, limit: bool) -> Option<Quantity> {
    let r = c.resources.as_ref()?;
    let from = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        m.as_ref()?
            .get(resource)
            .and_then(|q| Quantity::parse(&q.0).ok())
    };
    if limit {
        from(&r.limits)
    } else {
        from(&r.requests).or_else(|| from(&r.limits))
    }
}

fn default_cpu(spec: Option<&Container>) -> u64 {
    spec.and_then(|c| resource(c, "cpu", false))
        .map_or(DEFAULT_CPU_NANOCORES, |q| {
            (nanos_u64(q.nanos()) as f64 * DEFAULT_CPU_FRACTION).round() as u64
        })
}

fn default_memory(spec: Option<&Container>) -> u64 {
    spec.and_then(|c| resource(c, "memory", false))
        .map_or(DEFAULT_MEMORY_BYTES, |q| {
            (nanos_u64(q.value()) as f64 * DEFAULT_MEMORY_FRACTION).round() as u64
        })
}

/// The quantity of annotation `knob` for `container` (`knob.<container>` first, then the
/// pod-wide `knob`); malformed or negative values are ignored.
fn annotated(pod: &Pod, knob: &str, container: &str) -> Option<Quantity> {
    debug_assert!(knob.starts_with(PREFIX));
    let annotations = pod.metadata.annotations.as_ref()?;
    [format!("{knob}.{container}"), knob.to_owned()]
        .iter()
        .find_map(|key| annotations.get(key))
        .and_then(|v| Quantity::parse(v).ok())
        .filter(|q| q.nanos() >= 0)
}

/// The cumulative CPU counters of running containers, kept continuous across changes of their
/// model (see the module docs), by pod UID, container and run start.
#[derive(Debug, Default)]
pub struct ContainerCounters {
    counters: std::collections::HashMap<(String, String, Timestamp), (Timestamp, f64)>,
    last_prune: Option<Timestamp>,
}

/// How long a counter nobody read is kept.
const COUNTER_IDLE: Duration = Duration::from_secs(600);

impl ContainerCounters {
    /// Sets the CPU counters of `usage` (computed for `pod` at `now` with `load`) from the
    /// kept ones: a container seen before gets its counter plus its current model's integral
    /// since then; a new one its model's integral since its start.
    pub fn advance(
        &mut self,
        pod: &Pod,
        usage: &mut PodUsage,
        now: Timestamp,
        load: Option<&Load>,
    ) {
        for c in &mut usage.containers {
            let key = (usage.uid.clone(), c.name.clone(), c.start);
            match self.counters.get_mut(&key) {
                None => {
                    self.counters
                        .insert(key, (now, c.cpu_core_nano_seconds as f64));
                }
                Some((last, total)) => {
                    if now > *last {
                        let (cpu, _) = models(pod, &usage.uid, &c.name, load);
                        *total += cpu.integral(*last, now);
                        *last = now;
                    }
                    c.cpu_core_nano_seconds = total.round() as u64;
                }
            }
        }
        let prune = self
            .last_prune
            .is_none_or(|p| now.duration_since(p).as_secs_f64() > 60.0);
        if prune {
            self.last_prune = Some(now);
            self.counters.retain(|_, (last, _)| {
                now.duration_since(*last).as_secs_f64() < COUNTER_IDLE.as_secs_f64()
            });
        }
    }

    /// How many containers have a counter.
    pub fn len(&self) -> usize {
        self.counters.len()
    }

    /// Whether no container has a counter.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }
}

/// A node's cumulative CPU counter (`usageCoreNanoSeconds` of the node), advanced at each
/// read by the node's current rate times the time since the last read, so it only grows
/// while pods come and go. The first read counts the node's rate since `boot`.
#[derive(Debug, Clone, Copy)]
pub struct CpuCounter {
    last: Timestamp,
    total: u64,
}

impl CpuCounter {
    /// A counter at zero at `boot`.
    pub fn new(boot: Timestamp) -> Self {
        CpuCounter {
            last: boot,
            total: 0,
        }
    }

    /// The counter at `now` for a node using `nano_cores` since the last read.
    pub fn advance(&mut self, now: Timestamp, nano_cores: u64) -> u64 {
        if now > self.last {
            let secs = now.duration_since(self.last).as_secs_f64();
            self.total = self
                .total
                .saturating_add((nano_cores as f64 * secs).round() as u64);
            self.last = now;
        }
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, PodSpec, PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn pod(annotations: &[(&str, &str)]) -> Pod {
        let container = |name: &str, cpu: Option<&str>| Container {
            name: name.into(),
            resources: cpu.map(|cpu| ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_owned(), Q(cpu.into())),
                    ("memory".to_owned(), Q("100Mi".into())),
                ])),
                limits: Some(BTreeMap::from([("memory".to_owned(), Q("200Mi".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let running = |name: &str| ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(at(0))),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut p = Pod {
            spec: Some(PodSpec {
                containers: vec![container("app", Some("500m")), container("side", None)],
                ..Default::default()
            }),
            status: Some(PodStatus {
                container_statuses: Some(vec![running("app"), running("side")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        p.metadata.name = Some("web".into());
        p.metadata.uid = Some("u1".into());
        p.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p
    }

    #[test]
    fn defaults_follow_requests_within_the_variation() {
        let usage = pod_usage(&pod(&[]), at(600)).expect("running");
        assert_eq!(usage.namespace, "default");
        let app = &usage.containers[0];
        let mean = 150_000_000.0; // 30% of 500m
        let cpu = app.cpu_nano_cores as f64;
        assert!((cpu - mean).abs() <= mean * VARIATION + 1.0, "{cpu}");
        let mem = app.memory_working_set_bytes as f64;
        let mem_mean = 50.0 * 1024.0 * 1024.0;
        assert!((mem - mem_mean).abs() <= mem_mean * VARIATION / 2.0 + PAGE_BYTES as f64);
        assert_eq!(app.memory_working_set_bytes % PAGE_BYTES, 0, "whole pages");
        assert_eq!(app.memory_limit_bytes, Some(200 * 1024 * 1024));
        // The counter is the integral: over whole periods exactly the mean.
        let whole = pod_usage(&pod(&[]), at(2 * PERIOD.as_secs() as i64)).expect("running");
        let expected = mean * 2.0 * PERIOD.as_secs_f64();
        let got = whole.containers[0].cpu_core_nano_seconds as f64;
        assert!((got - expected).abs() < 1e3, "{got} vs {expected}");
        // No request: the fixed default.
        let side = &usage.containers[1];
        let d = DEFAULT_CPU_NANOCORES as f64;
        assert!((side.cpu_nano_cores as f64 - d).abs() <= d * VARIATION + 1.0);
        assert_eq!(
            usage.cpu_nano_cores(),
            app.cpu_nano_cores + side.cpu_nano_cores
        );
        // Deterministic, and the counter only grows.
        assert_eq!(pod_usage(&pod(&[]), at(600)), Some(usage.clone()));
        let mut last = 0;
        for s in (0..400).step_by(7) {
            let c = pod_usage(&pod(&[]), at(s))
                .expect("running")
                .cpu_core_nano_seconds();
            assert!(c >= last, "counter went back at {s}s");
            last = c;
        }
    }

    #[test]
    fn annotations_set_exact_usage() {
        let p = pod(&[
            ("miniplane.dev/cpu-usage", "250m"),
            ("miniplane.dev/cpu-usage.side", "1"),
            ("miniplane.dev/memory-usage.app", "64Mi"),
            ("miniplane.dev/memory-usage.side", "lots"),
        ]);
        let usage = pod_usage(&p, at(10)).expect("running");
        let (app, side) = (&usage.containers[0], &usage.containers[1]);
        assert_eq!(app.cpu_nano_cores, 250_000_000);
        assert_eq!(app.cpu_core_nano_seconds, 2_500_000_000);
        assert_eq!(side.cpu_nano_cores, 1_000_000_000);
        assert_eq!(app.memory_working_set_bytes, 64 * 1024 * 1024);
        let d = DEFAULT_MEMORY_BYTES as f64;
        let side_mem = side.memory_working_set_bytes as f64;
        assert!(
            (side_mem - d).abs() <= d * VARIATION,
            "malformed: the default"
        );
    }

    #[test]
    fn only_running_containers_count() {
        let mut p = pod(&[]);
        if let Some(s) = p
            .status
            .as_mut()
            .and_then(|s| s.container_statuses.as_mut())
        {
            s[1].state = Some(ContainerState::default());
        }
        let usage = pod_usage(&p, at(5)).expect("app runs");
        assert_eq!(usage.containers.len(), 1);
        assert_eq!(pod_usage(&p, at(-5)), None, "not started yet");
        p.status = None;
        assert_eq!(pod_usage(&p, at(5)), None);
    }

    #[test]
    fn a_load_sets_usage_below_the_annotations() {
        let load = Load {
            cpu: Quantity::parse("400m").ok(),
            memory: Quantity::parse("256Mi").ok(),
            total_cpu: None,
        };
        let usage = pod_usage_with(
            &pod(&[("miniplane.dev/cpu-usage.side", "1")]),
            at(10),
            Some(&load),
        )
        .expect("running");
        assert_eq!(usage.containers[0].cpu_nano_cores, 400_000_000);
        assert_eq!(
            usage.containers[0].memory_working_set_bytes,
            256 * 1024 * 1024
        );
        assert_eq!(
            usage.containers[1].cpu_nano_cores, 1_000_000_000,
            "the annotation wins"
        );
    }

    #[test]
    fn counters_stay_continuous_when_the_model_changes() {
        let p = pod(&[]);
        let load = Load {
            cpu: Quantity::parse("400m").ok(),
            memory: None,
            total_cpu: None,
        };
        let mut counters = ContainerCounters::default();
        let mut first = pod_usage(&p, at(100)).expect("running");
        counters.advance(&p, &mut first, at(100), None);
        let before = first.containers[0].cpu_core_nano_seconds;
        // The load starts: 15 s later the counter grew by 15 s at 400m, not by the whole
        // run at 400m.
        let mut second = pod_usage_with(&p, at(115), Some(&load)).expect("running");
        counters.advance(&p, &mut second, at(115), Some(&load));
        let after = second.containers[0].cpu_core_nano_seconds;
        assert_eq!(after - before, 6_000_000_000);
        // Lifted again: the counter does not go back.
        let mut third = pod_usage(&p, at(130)).expect("running");
        counters.advance(&p, &mut third, at(130), None);
        assert!(third.containers[0].cpu_core_nano_seconds > after);
        assert_eq!(counters.len(), 2);
        assert!(!counters.is_empty());
    }

    #[test]
    fn node_counter_only_grows() {
        let mut c = CpuCounter::new(at(0));
        assert_eq!(c.advance(at(10), 100_000_000), 1_000_000_000);
        assert_eq!(c.advance(at(5), 900_000_000), 1_000_000_000);
        assert_eq!(c.advance(at(12), 0), 1_000_000_000);
        assert_eq!(c.advance(at(13), 1_000_000_000), 2_000_000_000);
    }
}
