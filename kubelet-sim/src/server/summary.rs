//! `GET /stats/summary`: the kubelet's Summary API, from the simulated usage model
//! ([`crate::usage`]).
//!
//! Mirrors `pkg/kubelet/server/stats` (`summary.go`, `handler.go`) and the field names of
//! `k8s.io/kubelet/pkg/apis/stats/v1alpha1` (`Summary`, `NodeStats`, `PodStats`,
//! `ContainerStats`, `CPUStats`, `MemoryStats`, `FsStats`). Simplified: no network, volume,
//! ephemeral-storage, process, rlimit or swap stats; the node's filesystem is a fixed
//! 100Gi with 10% used; system containers are `kubelet` and `runtime` (sharing the node's
//! own usage) and `pods` (the pods' sum). Pods without a running container are left out.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use jiff::Timestamp;
use serde::Serialize;

use super::{KubeletServer, json_response};
use crate::node::NodeState;
use crate::usage::{ContainerUsage, PodUsage, SYSTEM_CPU_NANOCORES, SYSTEM_MEMORY_BYTES};

/// The node filesystem's size (the Node's `ephemeral-storage` capacity).
pub const NODE_FS_BYTES: u64 = 100 * 1024 * 1024 * 1024;

/// `Summary`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `node`.
    pub node: NodeStats,
    /// `pods`.
    pub pods: Vec<PodStats>,
}

/// `NodeStats`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// `nodeName`.
    pub node_name: String,
    /// `systemContainers`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    /// `startTime`.
    pub start_time: String,
    /// `cpu`.
    pub cpu: CpuStats,
    /// `memory`.
    pub memory: MemoryStats,
    /// `fs`.
    pub fs: FsStats,
}

/// `PodStats`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// `podRef`.
    pub pod_ref: PodReference,
    /// `startTime`.
    pub start_time: String,
    /// `containers`.
    pub containers: Vec<ContainerStats>,
    /// `cpu`.
    pub cpu: CpuStats,
    /// `memory`.
    pub memory: MemoryStats,
}

/// `PodReference`.
#[derive(Debug, Clone, Serialize)]
pub struct PodReference {
    /// `name`.
    pub name: String,
    /// `namespace`.
    pub namespace: String,
    /// `uid`.
    pub uid: String,
}

/// `ContainerStats`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// `name`.
    pub name: String,
    /// The start, to the nanosecond (`startTime` is written in whole seconds).
    #[serde(skip)]
    pub start: Timestamp,
    /// `startTime`.
    pub start_time: String,
    /// `cpu`.
    pub cpu: CpuStats,
    /// `memory`.
    pub memory: MemoryStats,
}

/// `CPUStats`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// `time`.
    pub time: String,
    /// `usageNanoCores`.
    pub usage_nano_cores: u64,
    /// `usageCoreNanoSeconds`.
    pub usage_core_nano_seconds: u64,
}

/// `MemoryStats`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// `time`.
    pub time: String,
    /// `availableBytes`: the limit minus the working set, when there is a limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// `usageBytes`: the working set and 10% of page cache.
    pub usage_bytes: u64,
    /// `workingSetBytes`.
    pub working_set_bytes: u64,
    /// `rssBytes`: 80% of the working set.
    pub rss_bytes: u64,
    /// `pageFaults`.
    pub page_faults: u64,
    /// `majorPageFaults`.
    pub major_page_faults: u64,
}

/// `FsStats`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// `time`.
    pub time: String,
    /// `availableBytes`.
    pub available_bytes: u64,
    /// `capacityBytes`.
    pub capacity_bytes: u64,
    /// `usedBytes`.
    pub used_bytes: u64,
}

/// `metav1.Time` as JSON writes it (RFC 3339, whole seconds, UTC).
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn memory(time: &str, working_set: u64, limit: Option<u64>) -> MemoryStats {
    MemoryStats {
        time: time.to_owned(),
        available_bytes: limit.map(|l| l.saturating_sub(working_set)),
        usage_bytes: working_set.saturating_add(working_set / 10),
        working_set_bytes: working_set,
        rss_bytes: working_set / 10 * 8,
        page_faults: 0,
        major_page_faults: 0,
    }
}

fn cpu(time: &str, nano_cores: u64, core_nano_seconds: u64) -> CpuStats {
    CpuStats {
        time: time.to_owned(),
        usage_nano_cores: nano_cores,
        usage_core_nano_seconds: core_nano_seconds,
    }
}

fn container_stats(c: &ContainerUsage, time: &str) -> ContainerStats {
    ContainerStats {
        name: c.name.clone(),
        start: c.start,
        start_time: rfc3339(c.start),
        cpu: cpu(time, c.cpu_nano_cores, c.cpu_core_nano_seconds),
        memory: memory(time, c.memory_working_set_bytes, c.memory_limit_bytes),
    }
}

fn pod_stats(p: &PodUsage, time: &str) -> PodStats {
    PodStats {
        pod_ref: PodReference {
            name: p.name.clone(),
            namespace: p.namespace.clone(),
            uid: p.uid.clone(),
        },
        start_time: rfc3339(p.start),
        containers: p
            .containers
            .iter()
            .map(|c| container_stats(c, time))
            .collect(),
        cpu: cpu(time, p.cpu_nano_cores(), p.cpu_core_nano_seconds()),
        memory: memory(time, p.memory_working_set_bytes(), None),
    }
}

/// The usage of every pod on `node` with a running container, at `now`, by namespace and
/// name.
pub fn pod_usages(server: &KubeletServer, node: &str, now: Timestamp) -> Vec<PodUsage> {
    server
        .pods_on(node)
        .iter()
        .filter_map(|p| server.pod_usage(p, now))
        .collect()
}

/// The Summary of `node` at `now` (advancing the node's CPU counter).
pub fn summary(server: &KubeletServer, node: &NodeState, now: Timestamp) -> Summary {
    let time = rfc3339(now);
    let usages = pod_usages(server, node.name(), now);
    let pods_cpu: u64 = usages.iter().map(PodUsage::cpu_nano_cores).sum();
    let pods_cpu_total: u64 = usages.iter().map(PodUsage::cpu_core_nano_seconds).sum();
    let pods_memory: u64 = usages.iter().map(PodUsage::memory_working_set_bytes).sum();
    let node_cpu = pods_cpu.saturating_add(SYSTEM_CPU_NANOCORES);
    let node_cpu_total = server.node_cpu(node.name(), now, node_cpu);
    let node_memory = pods_memory.saturating_add(SYSTEM_MEMORY_BYTES);
    let boot = server.boot();
    let uptime = now.duration_since(boot).as_secs_f64().max(0.0);
    let half_system = |rate: u64| (rate / 2, (rate as f64 / 2.0 * uptime) as u64);
    let (sys_cpu, sys_cpu_total) = half_system(SYSTEM_CPU_NANOCORES);
    let system = |name: &str| ContainerStats {
        name: name.to_owned(),
        start: boot,
        start_time: rfc3339(boot),
        cpu: cpu(&time, sys_cpu, sys_cpu_total),
        memory: memory(&time, SYSTEM_MEMORY_BYTES / 2, None),
    };
    let fs_used = NODE_FS_BYTES / 10;
    Summary {
        node: NodeStats {
            node_name: node.name().to_owned(),
            system_containers: vec![
                system("kubelet"),
                system("runtime"),
                ContainerStats {
                    name: "pods".to_owned(),
                    start: boot,
                    start_time: rfc3339(boot),
                    cpu: cpu(&time, pods_cpu, pods_cpu_total),
                    memory: memory(&time, pods_memory, server.node_memory()),
                },
            ],
            start_time: rfc3339(boot),
            cpu: cpu(&time, node_cpu, node_cpu_total),
            memory: memory(&time, node_memory, server.node_memory()),
            fs: FsStats {
                time: time.clone(),
                available_bytes: NODE_FS_BYTES - fs_used,
                capacity_bytes: NODE_FS_BYTES,
                used_bytes: fs_used,
            },
        },
        pods: usages.iter().map(|p| pod_stats(p, &time)).collect(),
    }
}

/// `GET /stats/summary` for the node the `Host` names.
pub async fn get_summary(State(server): State<KubeletServer>, headers: HeaderMap) -> Response {
    let node = match server.node_for(&headers) {
        Ok(n) => n,
        Err(response) => return *response,
    };
    let now = server.clock().wall();
    let body = serde_json::to_vec(&summary(&server, &node, now)).unwrap_or_default();
    json_response(body)
}
