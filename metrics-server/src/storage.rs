//! The last two points of every node and container, and the usage computed from them.
//!
//! Mirrors metrics-server's `pkg/storage` (`node.go`, `pod.go`, `types.go`): each scrape's
//! batch replaces `last`; a stored point moves to `prev` when the new one is newer (and, for a
//! container, when it did not restart in between); a container started within the last
//! resolution, at least 10 s before its first point, gets its start as `prev` (with no CPU
//! used), so a fresh pod has metrics after one scrape. Usage is `resourceUsage`: CPU the rate
//! between `prev` and `last` in nanocores, memory `last`'s working set, the window their
//! distance, the timestamp `last`'s. A pod's metrics need every container's two points; its
//! timestamp and window are its earliest container's.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use jiff::Timestamp;

use crate::decode::{MetricsBatch, MetricsPoint, PodRef};

/// `freshContainerMinMetricsResolution`: a container's first point counts from its start only
/// if that start is at least this long before it.
pub const FRESH_CONTAINER_MIN_RESOLUTION: Duration = Duration::from_secs(10);

/// A usage computed from two points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// CPU in nanocores.
    pub cpu_nanocores: u64,
    /// Working set in bytes.
    pub memory_bytes: u64,
    /// The later point's time.
    pub timestamp: Timestamp,
    /// The time between the two points.
    pub window: Duration,
}

/// `resourceUsage`; `Err` for points that went back (a restart, a counter reset).
pub fn resource_usage(last: &MetricsPoint, prev: &MetricsPoint) -> Result<Usage, String> {
    if let (Some(l), Some(p)) = (last.start_time, prev.start_time)
        && l < p
    {
        return Err("unexpected decrease in startTime of node/container".into());
    }
    if last.cumulative_cpu_used < prev.cumulative_cpu_used {
        return Err("unexpected decrease in cumulative CPU usage value".into());
    }
    let (Some(lt), Some(pt)) = (last.timestamp, prev.timestamp) else {
        return Err("a point without a timestamp".into());
    };
    let window = lt
        .duration_since(pt)
        .try_into()
        .ok()
        .filter(|w: &Duration| !w.is_zero())
        .ok_or_else(|| "a point no later than the one before it".to_string())?;
    let cpu = (last.cumulative_cpu_used - prev.cumulative_cpu_used) as f64 / window.as_secs_f64();
    Ok(Usage {
        cpu_nanocores: cpu as u64,
        memory_bytes: last.memory_usage,
        timestamp: lt,
        window,
    })
}

/// A container's usage, by name.
pub type ContainerUsages = BTreeMap<String, Usage>;

/// The usage of one pod: its containers' and its earliest timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    /// Each container's usage, by name.
    pub containers: ContainerUsages,
    /// The earliest container timestamp.
    pub timestamp: Timestamp,
    /// That container's window.
    pub window: Duration,
}

/// The stored points of every node and pod (`storage.storage`).
#[derive(Debug, Default)]
pub struct Storage {
    nodes_last: HashMap<String, MetricsPoint>,
    nodes_prev: HashMap<String, MetricsPoint>,
    pods_last: HashMap<PodRef, BTreeMap<String, MetricsPoint>>,
    pods_prev: HashMap<PodRef, BTreeMap<String, MetricsPoint>>,
    resolution: Duration,
}

fn before(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a < b)
}

impl Storage {
    /// Storage for scrapes every `resolution`.
    pub fn new(resolution: Duration) -> Self {
        Storage {
            resolution,
            ..Storage::default()
        }
    }

    /// `Ready`: whether some node or container has two points.
    pub fn ready(&self) -> bool {
        !self.nodes_prev.is_empty() || !self.pods_prev.is_empty()
    }

    /// How many containers can report metrics (`metrics_server_storage_points{type=container}`).
    pub fn container_points(&self) -> usize {
        self.pods_prev.values().map(BTreeMap::len).sum()
    }

    /// Stores one scrape's batch.
    pub fn store(&mut self, batch: MetricsBatch) {
        self.store_nodes(batch.nodes);
        self.store_pods(batch.pods);
    }

    fn store_nodes(&mut self, nodes: HashMap<String, MetricsPoint>) {
        let mut prev = HashMap::with_capacity(nodes.len());
        for (name, point) in &nodes {
            if let Some(last) = self.nodes_last.get(name) {
                if before(last.timestamp, point.timestamp) {
                    prev.insert(name.clone(), *last);
                } else if let Some(p) = self.nodes_prev.get(name)
                    && before(p.timestamp, point.timestamp)
                {
                    prev.insert(name.clone(), *p);
                }
            }
        }
        self.nodes_last = nodes;
        self.nodes_prev = prev;
    }

    fn store_pods(&mut self, pods: HashMap<PodRef, BTreeMap<String, MetricsPoint>>) {
        let mut prev_pods = HashMap::with_capacity(pods.len());
        for (pod, containers) in &pods {
            let mut prev = BTreeMap::new();
            for (name, point) in containers {
                let fresh = match (point.start_time, point.timestamp) {
                    (Some(start), Some(at)) if start < at => {
                        let age: Duration = at
                            .duration_since(start)
                            .try_into()
                            .unwrap_or(Duration::ZERO);
                        age < self.resolution && age >= FRESH_CONTAINER_MIN_RESOLUTION
                    }
                    _ => false,
                };
                if fresh {
                    prev.insert(
                        name.clone(),
                        MetricsPoint {
                            timestamp: point.start_time,
                            cumulative_cpu_used: 0,
                            ..*point
                        },
                    );
                    continue;
                }
                let Some(last) = self.pods_last.get(pod).and_then(|c| c.get(name)) else {
                    continue;
                };
                // Not restarted since the stored point.
                let continuous = match point.start_time {
                    Some(start) => before(Some(start), last.timestamp),
                    None => true,
                };
                if !continuous {
                    continue;
                }
                if before(last.timestamp, point.timestamp) {
                    prev.insert(name.clone(), *last);
                } else if let Some(p) = self.pods_prev.get(pod).and_then(|c| c.get(name))
                    && before(p.timestamp, point.timestamp)
                {
                    prev.insert(name.clone(), *p);
                }
            }
            if !prev.is_empty() {
                prev_pods.insert(pod.clone(), prev);
            }
        }
        self.pods_last = pods;
        self.pods_prev = prev_pods;
    }

    /// The usage of node `name`, if it has two points.
    pub fn node(&self, name: &str) -> Option<Usage> {
        let last = self.nodes_last.get(name)?;
        let prev = self.nodes_prev.get(name)?;
        resource_usage(last, prev)
            .inspect_err(|e| tracing::warn!(node = name, error = %e, "skipping node usage metric"))
            .ok()
    }

    /// The usage of pod `namespace/name`, if every container has two points.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<PodUsage> {
        let key = (namespace.to_owned(), name.to_owned());
        let last = self.pods_last.get(&key)?;
        let prev = self.pods_prev.get(&key)?;
        let mut containers = BTreeMap::new();
        let mut earliest: Option<(Timestamp, Duration)> = None;
        for (container, l) in last {
            let p = prev.get(container)?;
            match resource_usage(l, p) {
                Ok(usage) => {
                    if earliest.is_none_or(|(t, _)| t > usage.timestamp) {
                        earliest = Some((usage.timestamp, usage.window));
                    }
                    containers.insert(container.clone(), usage);
                }
                Err(e) => {
                    tracing::warn!(pod = %format!("{namespace}/{name}"), container, error = %e, "skipping container usage metric");
                }
            }
        }
        let (timestamp, window) = earliest.unwrap_or((Timestamp::UNIX_EPOCH, Duration::ZERO));
        Some(PodUsage {
            containers,
            timestamp,
            window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Option<Timestamp> {
        Timestamp::from_second(1_700_000_000 + secs).ok()
    }

    fn point(start: i64, t: i64, cpu_secs: f64, mem: u64) -> MetricsPoint {
        MetricsPoint {
            start_time: at(start),
            timestamp: at(t),
            cumulative_cpu_used: (cpu_secs * 1e9) as u64,
            memory_usage: mem,
        }
    }

    fn batch(node_cpu: f64, t: i64, pods: &[(&str, MetricsPoint)]) -> MetricsBatch {
        let mut b = MetricsBatch::default();
        b.nodes
            .insert("node-0".into(), point(-1000, t, node_cpu, 1 << 30));
        for (pod, p) in pods {
            b.pods
                .entry(("default".into(), (*pod).into()))
                .or_default()
                .insert("app".into(), *p);
        }
        b
    }

    #[test]
    fn usage_is_the_rate_between_the_last_two_points() {
        let mut s = Storage::new(Duration::from_secs(15));
        s.store(batch(10.0, 0, &[("web", point(-100, 0, 5.0, 100))]));
        assert!(!s.ready());
        assert_eq!(s.node("node-0"), None, "one point is not enough");
        s.store(batch(13.0, 15, &[("web", point(-100, 15, 11.0, 200))]));
        assert!(s.ready());
        let node = s.node("node-0").expect("two points");
        assert_eq!(node.cpu_nanocores, 200_000_000);
        assert_eq!(node.window, Duration::from_secs(15));
        assert_eq!(Some(node.timestamp), at(15));
        let web = s.pod("default", "web").expect("two points");
        assert_eq!(web.containers["app"].cpu_nanocores, 400_000_000);
        assert_eq!(web.containers["app"].memory_bytes, 200);
        assert_eq!(web.window, Duration::from_secs(15));
        // The same point again keeps the previous one.
        s.store(batch(13.0, 15, &[("web", point(-100, 15, 11.0, 200))]));
        assert_eq!(s.node("node-0").map(|u| u.cpu_nanocores), Some(200_000_000));
    }

    #[test]
    fn a_fresh_container_counts_from_its_start() {
        let mut s = Storage::new(Duration::from_secs(15));
        // Started 12 s before its first point: 12 s of CPU at 250m.
        s.store(batch(1.0, 12, &[("new", point(0, 12, 3.0, 64))]));
        let usage = s.pod("default", "new").expect("fresh");
        assert_eq!(usage.containers["app"].cpu_nanocores, 250_000_000);
        assert_eq!(usage.window, Duration::from_secs(12));
        // Started 5 s before: too short to tell.
        let mut s = Storage::new(Duration::from_secs(15));
        s.store(batch(1.0, 5, &[("new", point(0, 5, 1.0, 64))]));
        assert_eq!(s.pod("default", "new"), None);
    }

    #[test]
    fn a_restart_or_a_decrease_gives_no_usage() {
        let mut s = Storage::new(Duration::from_secs(15));
        s.store(batch(10.0, 0, &[("web", point(-100, 0, 5.0, 100))]));
        // Restarted at 10 (after the stored point): no previous point.
        s.store(batch(12.0, 15, &[("web", point(10, 15, 1.0, 100))]));
        assert_eq!(s.pod("default", "web"), None);
        let down = resource_usage(&point(0, 30, 1.0, 1), &point(0, 15, 2.0, 1));
        assert_eq!(
            down,
            Err("unexpected decrease in cumulative CPU usage value".into())
        );
    }
}
