//! What the scheduler knows about one node: the node and the pods bound (or assumed) to it,
//! with their sums precomputed (`pkg/scheduler/framework/types.go`: `NodeInfo`, `PodInfo`,
//! `Resource`, `HostPortInfo`; requests from `component-helpers/resource/helpers.go`).
//!
//! ```text
//!   NodeInfo "node-1"   allocatable cpu 4000m, memory 8Gi, pods 110
//!     pods: default/web-1 (500m, 128Mi), default/web-2 (500m, 128Mi)
//!     requested          cpu 1000m, memory 256Mi, pods 2      ← filters (NodeResourcesFit)
//!     non_zero_requested cpu 1000m, memory 256Mi              ← scores (100m/200Mi if unset)
//!     used_ports {TCP 0.0.0.0:8080}                           ← NodePorts
//!     pods_by_controller {hash(rs-uid): 2}                    ← PodTopologySpread's defaults
//!     pods_with_affinity 0, pods_with_required_anti_affinity 0 ← InterPodAffinity
//! ```
//!
//! Pods and nodes are parsed once, when they enter the cache ([`PodInfo::new`],
//! [`NodeInfo::new`]), so filters and scores only compare integers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use apimachinery::ObjectKey;
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::affinity_term::AffinityTerms;

/// `DefaultMilliCPURequest`: what a container without a CPU request counts for in scores.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// `DefaultMemoryRequest`: what a container without a memory request counts for in scores.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// CPU, memory and pod count (Kubernetes' `framework.Resource`, without ephemeral storage
/// and extended resources).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub milli_cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Number of pods.
    pub pods: i64,
}

impl Resources {
    /// Reads `cpu`, `memory` and `pods` from a resource list; unparsable values count as 0.
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Self {
        let get = |name: &str| {
            list.and_then(|l| l.get(name))
                .and_then(|q| apimachinery::Quantity::parse(&q.0).ok())
        };
        Resources {
            milli_cpu: get("cpu").map_or(0, |q| q.milli_value()),
            memory: get("memory").map_or(0, |q| q.int_value()),
            pods: get("pods").map_or(0, |q| q.int_value()),
        }
    }

    fn add(&mut self, other: Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.pods += other.pods;
    }

    fn sub(&mut self, other: Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.pods -= other.pods;
    }

    fn max(&mut self, other: Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
    }
}

/// One host port a pod binds: `(protocol, hostIP, port)`, hostIP `0.0.0.0` when unset.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: String,
    /// The host IP; `0.0.0.0` means every address.
    pub ip: String,
    /// The port number.
    pub port: i32,
}

impl HostPort {
    /// Whether two host ports collide (`HostPortInfo.CheckConflict`): same protocol and
    /// port, and the same IP or either of them `0.0.0.0`.
    pub fn conflicts_with(&self, other: &HostPort) -> bool {
        self.protocol == other.protocol
            && self.port == other.port
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// A pod parsed for scheduling (Kubernetes' `PodInfo` plus the pod's computed requests).
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// `namespace/name`.
    pub key: ObjectKey,
    /// The pod as last seen.
    pub pod: Arc<Pod>,
    /// Requests as filters count them (`PodRequests`): containers summed, the init
    /// container maximum rule, overhead added; `pods` is 1.
    pub requests: Resources,
    /// Requests as scores count them: a container without a CPU or memory request counts
    /// for 100m / 200Mi (`NonMissingContainerRequests`).
    pub non_zero_requests: Resources,
    /// Host ports of containers and sidecar init containers (`GetHostPorts`).
    pub host_ports: Vec<HostPort>,
    /// The controlling ReplicaSet, ReplicationController or StatefulSet, for the default
    /// spreading (`PodTopologySpread`'s system default constraints); `None` for other pods
    /// and for terminating ones, which spreading does not count.
    pub controller: Option<ControllerId>,
    /// The pod's inter-pod affinity terms, parsed; `None` when it has no `podAffinity` and no
    /// `podAntiAffinity` (most pods).
    pub affinity: Option<Arc<AffinityTerms>>,
}

impl PodInfo {
    /// Parses `pod`.
    pub fn new(pod: Arc<Pod>) -> Self {
        let key = ObjectKey::of(pod.as_ref());
        let requests = pod_requests(&pod, false);
        let non_zero_requests = pod_requests(&pod, true);
        let host_ports = host_ports(&pod);
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .filter(|o| SPREAD_CONTROLLER_KINDS.contains(&o.kind.as_str()))
            .filter(|_| pod.metadata.deletion_timestamp.is_none())
            .map(|o| ControllerId::of(&o.uid));
        let affinity = AffinityTerms::of(&pod).map(Arc::new);
        PodInfo {
            key,
            pod,
            requests,
            non_zero_requests,
            host_ports,
            controller,
            affinity,
        }
    }

    /// `podAffinity` or `podAntiAffinity` is set (Kubernetes' `PodsWithAffinity`).
    pub fn has_affinity(&self) -> bool {
        self.affinity.is_some()
    }

    /// The pod has required anti-affinity terms (`PodsWithRequiredAntiAffinity`).
    pub fn has_required_anti_affinity(&self) -> bool {
        self.affinity
            .as_ref()
            .is_some_and(|a| !a.required_anti_affinity.is_empty())
    }

    /// The pod has terms that score the pods scheduled after it: required or preferred
    /// affinity, or preferred anti-affinity (its required anti-affinity only filters).
    pub fn scores_others(&self) -> bool {
        self.affinity.as_ref().is_some_and(|a| {
            !a.required_affinity.is_empty()
                || !a.preferred_affinity.is_empty()
                || !a.preferred_anti_affinity.is_empty()
        })
    }

    /// The parsed terms (empty when the pod has none).
    pub fn affinity_terms(&self) -> &AffinityTerms {
        static NONE: AffinityTerms = AffinityTerms {
            required_affinity: Vec::new(),
            required_anti_affinity: Vec::new(),
            preferred_affinity: Vec::new(),
            preferred_anti_affinity: Vec::new(),
        };
        self.affinity.as_deref().unwrap_or(&NONE)
    }
}

/// The owners whose pods the default spreading counts: the workload kinds of Kubernetes'
/// `DefaultSelector` (it also takes the Services selecting the pod; see
/// [`crate::plugins::pod_topology_spread`]).
pub const SPREAD_CONTROLLER_KINDS: [&str; 3] =
    ["ReplicaSet", "ReplicationController", "StatefulSet"];

fn container_requests(c: &Container, non_zero: bool) -> Resources {
    let list = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = Resources::from_list(list);
    r.pods = 0;
    if non_zero {
        let has = |name: &str| list.is_some_and(|l| l.contains_key(name));
        if !has("cpu") {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !has("memory") {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// `PodRequests`: the regular containers' sum, at least every init container's need (each
/// init container runs alone, next to the sidecars started before it), plus overhead.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources {
            pods: 1,
            ..Resources::default()
        };
    };
    let mut reqs = Resources::default();
    for c in &spec.containers {
        reqs.add(container_requests(c, non_zero));
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c, non_zero);
        let need = if is_sidecar(c) {
            reqs.add(own);
            sidecars.add(own);
            sidecars
        } else {
            let mut need = own;
            need.add(sidecars);
            need
        };
        init_max.max(need);
    }
    reqs.max(init_max);
    if let Some(overhead) = spec.overhead.as_ref() {
        let mut o = Resources::from_list(Some(overhead));
        o.pods = 0;
        reqs.add(o);
    }
    reqs.pods = 1;
    reqs
}

fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&port| port > 0)?;
            Some(HostPort {
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ip: p
                    .host_ip
                    .clone()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".into()),
                port,
            })
        })
        .collect()
}

/// A controller, by a 64-bit hash of its UID, so that the spreading score compares integers
/// held in each node's own record instead of reading a UID string elsewhere in memory for every
/// evaluated node (hundreds per pod; on a busy host those reads were most of the score's
/// time). Two controllers are only confused if their UIDs' hashes collide (odds of about
/// 2^-64 per pair), and then only their spreading preference is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControllerId(u64);

impl ControllerId {
    /// The id of the controller with this UID.
    pub fn of(uid: &str) -> Self {
        use std::hash::{Hash, Hasher};
        // `DefaultHasher::new()` always starts from the same keys: every pod of a controller
        // gets the same id (ids are compared within this process only).
        let mut hasher = std::hash::DefaultHasher::new();
        uid.hash(&mut hasher);
        ControllerId(hasher.finish())
    }
}

/// How many pods of each controller a node holds. A node holds the pods of one controller or
/// a few, and the spreading score looks this up for every evaluated node of every pod: the
/// first controller's count is kept inline (in the node's record, which the filters have just
/// read), the others in a short list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerCounts {
    /// The first controller and its count (`None` when the node holds no controller's pods;
    /// a count that reaches 0 is replaced by one of `more`).
    first: Option<(ControllerId, u32)>,
    /// The others.
    more: Vec<(ControllerId, u32)>,
}

impl ControllerCounts {
    /// The count for `id` (0 when the node holds none of its pods).
    pub fn get(&self, id: ControllerId) -> u32 {
        match self.first {
            Some((first, n)) if first == id => n,
            _ if self.more.is_empty() => 0,
            _ => self
                .more
                .iter()
                .find(|(c, _)| *c == id)
                .map_or(0, |(_, n)| *n),
        }
    }

    /// One more pod of `id`.
    pub fn add(&mut self, id: ControllerId) {
        match &mut self.first {
            Some((first, n)) if *first == id => *n += 1,
            None => self.first = Some((id, 1)),
            Some(_) => match self.more.iter_mut().find(|(c, _)| *c == id) {
                Some((_, n)) => *n += 1,
                None => self.more.push((id, 1)),
            },
        }
    }

    /// One pod of `id` fewer (the entry goes at zero).
    pub fn remove(&mut self, id: ControllerId) {
        if let Some((first, n)) = &mut self.first
            && *first == id
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.first = self.more.pop();
            }
            return;
        }
        if let Some(i) = self.more.iter().position(|(c, _)| *c == id) {
            self.more[i].1 = self.more[i].1.saturating_sub(1);
            if self.more[i].1 == 0 {
                self.more.swap_remove(i);
            }
        }
    }

    /// How many controllers have pods here.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    /// Whether no controller has pods here.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

/// A node and the pods on it (Kubernetes' `NodeInfo`).
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node's name (shared with the verdicts that name it).
    pub name: Arc<str>,
    /// A hash of the name (FNV-1a), for breaking ties between equally scored nodes in the
    /// same way whatever order the nodes were added in.
    pub name_hash: u64,
    /// The node as last seen.
    pub node: Arc<Node>,
    /// `status.allocatable` (cpu, memory, pods).
    pub allocatable: Resources,
    /// Pods bound or assumed here, by key.
    pub pods: HashMap<ObjectKey, PodInfo>,
    /// Sum of the pods' `requests`.
    pub requested: Resources,
    /// Sum of the pods' `non_zero_requests`.
    pub non_zero_requested: Resources,
    /// Host ports in use, with how many pods use each.
    pub used_ports: HashMap<HostPort, u32>,
    /// Pods per controller UID, for the default spreading.
    pub pods_by_controller: ControllerCounts,
    /// How many pods here have `podAffinity` or `podAntiAffinity` (Kubernetes keeps the list,
    /// `PodsWithAffinity`): InterPodAffinity's scoring only looks at nodes where this is not 0
    /// unless the incoming pod has preferred terms of its own.
    pub pods_with_affinity: u32,
    /// How many pods here have required anti-affinity (`PodsWithRequiredAntiAffinity`): when
    /// no node has one and the incoming pod has no required terms, InterPodAffinity's filter
    /// is skipped.
    pub pods_with_required_anti_affinity: u32,
    /// How many pods here [`PodInfo::scores_others`]: unless the incoming pod has preferred
    /// terms, InterPodAffinity's scoring looks only at those (the other pods with affinity
    /// contribute nothing to a score).
    pub pods_scoring_others: u32,
}

impl NodeInfo {
    /// A node with no pods.
    pub fn new(node: Arc<Node>) -> Self {
        let mut info = NodeInfo {
            name: Arc::from(""),
            name_hash: 0,
            node: node.clone(),
            allocatable: Resources::default(),
            pods: HashMap::new(),
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            used_ports: HashMap::new(),
            pods_by_controller: ControllerCounts::default(),
            pods_with_affinity: 0,
            pods_with_required_anti_affinity: 0,
            pods_scoring_others: 0,
        };
        info.set_node(node);
        info
    }

    /// The node's labels (none when it has none).
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&NONE)
    }

    /// Replaces the node object (an update), keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if *self.name != *name || self.name_hash == 0 {
            self.name = Arc::from(name);
            self.name_hash = apimachinery::hash::fnv64a(&[name.as_bytes()]);
        }
        self.allocatable = Resources::from_list(
            node.status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref())),
        );
        self.node = node;
    }

    /// Adds a pod (or replaces the pod with the same key).
    pub fn add_pod(&mut self, pod: PodInfo) {
        self.remove_pod(&pod.key);
        self.requested.add(pod.requests);
        self.non_zero_requested.add(pod.non_zero_requests);
        for port in &pod.host_ports {
            *self.used_ports.entry(port.clone()).or_default() += 1;
        }
        if let Some(id) = pod.controller {
            self.pods_by_controller.add(id);
        }
        self.pods_with_affinity += u32::from(pod.has_affinity());
        self.pods_with_required_anti_affinity += u32::from(pod.has_required_anti_affinity());
        self.pods_scoring_others += u32::from(pod.scores_others());
        self.pods.insert(pod.key.clone(), pod);
    }

    /// Removes a pod; returns it if it was here.
    pub fn remove_pod(&mut self, key: &ObjectKey) -> Option<PodInfo> {
        let pod = self.pods.remove(key)?;
        self.requested.sub(pod.requests);
        self.non_zero_requested.sub(pod.non_zero_requests);
        for port in &pod.host_ports {
            if let Some(n) = self.used_ports.get_mut(port) {
                *n -= 1;
                if *n == 0 {
                    self.used_ports.remove(port);
                }
            }
        }
        if let Some(id) = pod.controller {
            self.pods_by_controller.remove(id);
        }
        self.pods_with_affinity -= u32::from(pod.has_affinity());
        self.pods_with_required_anti_affinity -= u32::from(pod.has_required_anti_affinity());
        self.pods_scoring_others -= u32::from(pod.scores_others());
        Some(pod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_counts_go_up_and_down_and_forget_a_controller_at_zero() {
        let [a, b, c] = ["rs-1", "rs-2", "rs-3"].map(ControllerId::of);
        assert_ne!(a, b, "different UIDs, different ids");
        assert_eq!(a, ControllerId::of("rs-1"), "the same UID, the same id");
        let mut counts = ControllerCounts::default();
        assert_eq!(counts.get(a), 0);
        counts.add(a);
        counts.add(b);
        counts.add(a);
        counts.add(c);
        assert_eq!(
            (counts.get(a), counts.get(b), counts.get(c), counts.len()),
            (2, 1, 1, 3)
        );
        counts.remove(b);
        assert_eq!((counts.get(b), counts.len()), (0, 2));
        // The inline first entry goes: the last of the others takes its place.
        counts.remove(a);
        counts.remove(a);
        assert_eq!((counts.get(a), counts.get(c), counts.len()), (0, 1, 1));
        counts.remove(a);
        counts.remove(c);
        counts.remove(c);
        assert!(
            counts.is_empty(),
            "no count below zero, no entry left at zero"
        );
        assert_eq!(counts.len(), 0);
        counts.add(b);
        assert_eq!((counts.get(b), counts.len()), (1, 1));
    }
}
