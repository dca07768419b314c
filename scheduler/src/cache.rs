//! The scheduler cache: nodes and the pods on them, including pods the scheduler has
//! decided on but whose binding is not yet confirmed ("assumed" pods)
//! (`pkg/scheduler/backend/cache/cache.go`, formerly `internal/cache`).
//!
//! ```text
//!   decide p → node-1 ── assume_pod ──▶ node-1 counts p at once (the next decision sees it)
//!        │ POST binding (async)
//!        ├─ ok:   informer delivers p with spec.nodeName=node-1 → add_pod confirms it
//!        └─ fail: forget_pod → node-1 no longer counts p; p goes back to the queue
//! ```
//!
//! Unlike Kubernetes, there is no separate copy for the snapshot: the scheduling loop reads
//! the cache under its lock for the duration of one (synchronous) decision, through a
//! borrowed [`Snapshot`] (`snapshot.go`: the nodes, plus the namespaces' labels InterPodAffinity
//! matches `namespaceSelector`s against, and the pods grouped as `crate::pod_groups` keeps
//! them). Assumed pods never expire (Kubernetes' default since
//! 1.25 as well: `durationToExpireAssumedPod` is 0).

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::ObjectKey;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};

use crate::affinity_term::Namespaces;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::volume_binding::VolumeCache;
use crate::pod_groups::PodGroups;

/// What one decision reads: every node with its pods, and the namespaces' labels.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    /// Every known node, in scan order.
    pub nodes: &'a [NodeInfo],
    /// Labels by namespace name.
    pub namespaces: &'a Namespaces,
    /// Claims, volumes and storage classes, for VolumeBinding.
    pub volumes: &'a VolumeCache,
    /// The pods of `nodes` grouped by labels and anti-affinity terms (the cache keeps them);
    /// `None`: the PreFilters walk the pods instead (tests, and any caller whose `nodes` are
    /// not the cache's own, such as a what-if copy with pods removed).
    pub groups: Option<Groups<'a>>,
}

/// The cache's [`PodGroups`] with the way from a node name to its [`NodeInfo`].
#[derive(Debug, Clone, Copy)]
pub struct Groups<'a> {
    /// The groups.
    pub pods: &'a PodGroups,
    index: &'a HashMap<String, usize>,
    nodes: &'a [NodeInfo],
}

impl<'a> Groups<'a> {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&'a NodeInfo> {
        self.index.get(name).and_then(|&i| self.nodes.get(i))
    }
}

/// No namespace known (tests and callers that only have nodes).
static NO_NAMESPACES: Namespaces = Namespaces::new();
/// No claim, volume or class known.
static NO_VOLUMES: VolumeCache = VolumeCache::new();

impl<'a> From<&'a [NodeInfo]> for Snapshot<'a> {
    fn from(nodes: &'a [NodeInfo]) -> Self {
        Snapshot {
            nodes,
            namespaces: &NO_NAMESPACES,
            volumes: &NO_VOLUMES,
            groups: None,
        }
    }
}

impl<'a> From<&'a Vec<NodeInfo>> for Snapshot<'a> {
    fn from(nodes: &'a Vec<NodeInfo>) -> Self {
        Snapshot::from(nodes.as_slice())
    }
}

impl<'a, const N: usize> From<&'a [NodeInfo; N]> for Snapshot<'a> {
    fn from(nodes: &'a [NodeInfo; N]) -> Self {
        Snapshot::from(nodes.as_slice())
    }
}

/// Where the cache has a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodState {
    node: String,
    assumed: bool,
}

/// Nodes and their pods.
#[derive(Debug, Default)]
pub struct Cache {
    /// Nodes in a stable order (the decision scans it round robin).
    nodes: Vec<NodeInfo>,
    /// Node name → position in `nodes`.
    index: HashMap<String, usize>,
    pod_states: HashMap<ObjectKey, PodState>,
    /// Pods bound to a node the cache does not know (yet, or any more), by node name.
    orphans: HashMap<String, HashMap<ObjectKey, PodInfo>>,
    /// Namespace labels, for InterPodAffinity's `namespaceSelector`.
    namespaces: Namespaces,
    /// Claims, volumes and storage classes (with assumed ones), for VolumeBinding.
    pub volumes: VolumeCache,
    /// The pods of `nodes` (not the orphans) by labels and anti-affinity terms.
    groups: PodGroups,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every known node, in scan order.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// What a decision reads: the nodes and the namespaces' labels.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            nodes: &self.nodes,
            namespaces: &self.namespaces,
            volumes: &self.volumes,
            groups: Some(Groups {
                pods: &self.groups,
                index: &self.index,
                nodes: &self.nodes,
            }),
        }
    }

    /// A namespace was added or updated: keeps its labels.
    pub fn add_namespace(&mut self, namespace: &Namespace) {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        let labels = namespace.metadata.labels.clone().unwrap_or_default();
        self.namespaces.insert(name, labels);
    }

    /// A namespace was deleted.
    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }

    /// One node.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    /// Adds or updates a node (`AddNode` / `UpdateNode`).
    pub fn add_node(&mut self, node: Arc<Node>) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if let Some(&i) = self.index.get(&name) {
            self.nodes[i].set_node(node);
            return;
        }
        let mut info = NodeInfo::new(node);
        for (_, pod) in self.orphans.remove(&name).unwrap_or_default() {
            self.groups.add(&info.name, &pod);
            info.add_pod(pod);
        }
        self.index.insert(name, self.nodes.len());
        self.nodes.push(info);
    }

    /// Removes a node (`RemoveNode`); its pods are kept aside until they are deleted.
    pub fn remove_node(&mut self, name: &str) {
        let Some(i) = self.index.remove(name) else {
            return;
        };
        let info = self.nodes.swap_remove(i);
        if let Some(moved) = self.nodes.get(i) {
            self.index.insert(moved.name.to_string(), i);
        }
        for pod in info.pods.values() {
            self.groups.remove(&info.name, pod);
        }
        if !info.pods.is_empty() {
            self.orphans.insert(info.name.to_string(), info.pods);
        }
    }

    fn place(&mut self, pod: PodInfo, node: &str) {
        match self.index.get(node) {
            Some(&i) => {
                let node = &mut self.nodes[i];
                if let Some(old) = node.remove_pod(&pod.key) {
                    self.groups.remove(&node.name, &old);
                }
                self.groups.add(&node.name, &pod);
                node.add_pod(pod);
            }
            None => {
                self.orphans
                    .entry(node.to_owned())
                    .or_default()
                    .insert(pod.key.clone(), pod);
            }
        }
    }

    fn unplace(&mut self, key: &ObjectKey, node: &str) {
        match self.index.get(node) {
            Some(&i) => {
                let node = &mut self.nodes[i];
                if let Some(old) = node.remove_pod(key) {
                    self.groups.remove(&node.name, &old);
                }
            }
            None => {
                if let Some(pods) = self.orphans.get_mut(node) {
                    pods.remove(key);
                    if pods.is_empty() {
                        self.orphans.remove(node);
                    }
                }
            }
        }
    }

    /// A pod bound to a node was seen (`AddPod` / `UpdatePod`): confirms an assumed pod,
    /// or adds or moves it.
    pub fn add_pod(&mut self, pod: Arc<Pod>) {
        let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
        else {
            return;
        };
        let info = PodInfo::new(pod);
        if let Some(old) = self.pod_states.get(&info.key).cloned() {
            self.unplace(&info.key, &old.node);
        }
        self.pod_states.insert(
            info.key.clone(),
            PodState {
                node: node.clone(),
                assumed: false,
            },
        );
        self.place(info, &node);
    }

    /// A pod was deleted or finished (`RemovePod`).
    pub fn remove_pod(&mut self, key: &ObjectKey) {
        if let Some(old) = self.pod_states.remove(key) {
            self.unplace(key, &old.node);
        }
    }

    /// Counts `pod` on `node` before its binding is confirmed (`AssumePod`).
    pub fn assume_pod(&mut self, pod: PodInfo, node: &str) {
        self.remove_pod(&pod.key);
        self.pod_states.insert(
            pod.key.clone(),
            PodState {
                node: node.to_owned(),
                assumed: true,
            },
        );
        self.place(pod, node);
    }

    /// Undoes [`Cache::assume_pod`] after a failed binding (`ForgetPod`); a pod the informer
    /// has confirmed meanwhile is kept.
    pub fn forget_pod(&mut self, key: &ObjectKey) {
        if self.is_assumed(key) {
            self.remove_pod(key);
        }
    }

    /// Whether the pod is assumed and not yet confirmed.
    pub fn is_assumed(&self, key: &ObjectKey) -> bool {
        self.pod_states.get(key).is_some_and(|s| s.assumed)
    }

    /// Whether the cache has the pod on some node (assumed or confirmed).
    pub fn has_pod(&self, key: &ObjectKey) -> bool {
        self.pod_states.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, pod};

    fn bound(name: &str, cpu: &str, node: &str) -> Arc<Pod> {
        let mut p = pod(name, cpu, "");
        p.spec.get_or_insert_default().node_name = Some(node.into());
        Arc::new(p)
    }

    #[test]
    fn assumed_pods_count_until_forgotten_or_confirmed() {
        let mut cache = Cache::new();
        cache.add_node(Arc::new(node("n1", "4", "8Gi", "110")));
        let p = info(pod("p", "1", ""));
        cache.assume_pod(p.clone(), "n1");
        assert_eq!(cache.node("n1").map(|n| n.requested.milli_cpu), Some(1000));
        cache.forget_pod(&p.key);
        assert_eq!(cache.node("n1").map(|n| n.requested.milli_cpu), Some(0));
        // Assume, then the informer confirms: counted once, no longer assumed.
        cache.assume_pod(p.clone(), "n1");
        cache.add_pod(bound("p", "1", "n1"));
        assert!(!cache.is_assumed(&p.key));
        cache.forget_pod(&p.key);
        assert_eq!(cache.node("n1").map(|n| n.requested.milli_cpu), Some(1000));
        cache.remove_pod(&p.key);
        assert_eq!(cache.node("n1").map(|n| n.pods.len()), Some(0));
    }

    #[test]
    fn pods_seen_before_their_node_are_kept_aside() {
        let mut cache = Cache::new();
        cache.add_pod(bound("early", "500m", "n2"));
        cache.add_node(Arc::new(node("n1", "4", "8Gi", "110")));
        cache.add_node(Arc::new(node("n2", "4", "8Gi", "110")));
        assert_eq!(cache.node("n2").map(|n| n.requested.milli_cpu), Some(500));
        cache.remove_node("n1");
        assert_eq!(cache.nodes().len(), 1);
        assert_eq!(cache.node("n2").map(|n| &*n.name), Some("n2"));
        cache.remove_node("n2");
        cache.add_node(Arc::new(node("n2", "4", "8Gi", "110")));
        assert_eq!(cache.node("n2").map(|n| n.pods.len()), Some(1));
    }
}
