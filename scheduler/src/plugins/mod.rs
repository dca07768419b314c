//! The default profile's filter and score plugins
//! (`pkg/scheduler/framework/plugins/`, order and weights from
//! `pkg/scheduler/apis/config/v1/default_plugins.go`).
//!
//! ```text
//! PreFilter / PreScore (once per pod, over all nodes: crate::cycle_state)
//!   VolumeBinding (PreFilter only), PodTopologySpread, InterPodAffinity
//! Filter (in order, the first failure decides)   Score (weight)
//!   NodeUnschedulable                               TaintToleration (3)
//!   NodeName                                        NodeAffinity (2)
//!   TaintToleration                                 NodeResourcesFit (1)  LeastAllocated
//!   NodeAffinity                                    PodTopologySpread (2)
//!   NodePorts                                       InterPodAffinity (2)
//!   NodeResourcesFit                                NodeResourcesBalancedAllocation (1)
//!   VolumeBinding
//!   PodTopologySpread
//!   InterPodAffinity
//! ```
//!
//! Every plugin is a plain function of the pod, one [`NodeInfo`] and the decision's
//! [`CycleState`] (which only VolumeBinding, PodTopologySpread and InterPodAffinity read). A filter answers
//! `Ok(())` or a [`Status`] with Kubernetes' exact reason strings; a score answers a raw
//! score that its normalisation maps to 0–100 over the feasible nodes. A plugin whose
//! PreFilter or PreScore found nothing to do is skipped, as Kubernetes' `Skip` status does:
//! its filter passes every node and its score is 0. Not implemented (nothing in miniplane
//! needs them yet): the other volume plugins (VolumeRestrictions, NodeVolumeLimits,
//! VolumeZone), ImageLocality, extended resources, ephemeral storage.

pub mod balanced_allocation;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod taint_toleration;
pub mod volume_binding;

use crate::cycle_state::CycleState;
use crate::node_info::{NodeInfo, PodInfo};

/// `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// Why a node does not fit (`framework.Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Preemption might help (resources, ports, anti-affinity, spreading).
    Unschedulable,
    /// Preemption cannot help (affinity, taints, node name, cordoned node, a missing
    /// topology label).
    UnschedulableAndUnresolvable,
}

/// A filter's failure (`framework.Status`): the plugin, the code and the reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The plugin that rejected the node.
    pub plugin: &'static str,
    /// Whether preemption could help.
    pub code: Code,
    /// Reasons as Kubernetes words them; each is counted in the FitError message.
    pub reasons: Vec<String>,
}

impl Status {
    /// A failure with one reason.
    pub fn new(plugin: &'static str, code: Code, reason: impl Into<String>) -> Self {
        Status {
            plugin,
            code,
            reasons: vec![reason.into()],
        }
    }
}

/// A filter plugin: its name and its check.
pub struct FilterPlugin {
    /// The Kubernetes plugin name.
    pub name: &'static str,
    /// `Ok(())` when the pod fits the node.
    pub filter: fn(&PodInfo, &NodeInfo, &CycleState) -> Result<(), Status>,
}

/// The default profile's filters, in the order they run.
pub const FILTERS: [FilterPlugin; 9] = [
    FilterPlugin {
        name: node_unschedulable::NAME,
        filter: |pod, node, _| node_unschedulable::filter(pod, node),
    },
    FilterPlugin {
        name: node_name::NAME,
        filter: |pod, node, _| node_name::filter(pod, node),
    },
    FilterPlugin {
        name: taint_toleration::NAME,
        filter: |pod, node, _| taint_toleration::filter(pod, node),
    },
    FilterPlugin {
        name: node_affinity::NAME,
        filter: |pod, node, _| node_affinity::filter(pod, node),
    },
    FilterPlugin {
        name: node_ports::NAME,
        filter: |pod, node, _| node_ports::filter(pod, node),
    },
    FilterPlugin {
        name: node_resources_fit::NAME,
        filter: |pod, node, _| node_resources_fit::filter(pod, node),
    },
    FilterPlugin {
        name: volume_binding::NAME,
        filter: volume_binding::filter,
    },
    FilterPlugin {
        name: pod_topology_spread::NAME,
        filter: pod_topology_spread::filter,
    },
    FilterPlugin {
        name: inter_pod_affinity::NAME,
        filter: inter_pod_affinity::filter,
    },
];

/// Runs the filters in order and stops at the first failure (`RunFilterPlugins`).
pub fn run_filters(pod: &PodInfo, node: &NodeInfo, state: &CycleState) -> Result<(), Status> {
    FILTERS
        .iter()
        .try_for_each(|f| (f.filter)(pod, node, state))
}

/// A score plugin: raw scores per node, then a normalisation over all feasible nodes.
pub struct ScorePlugin {
    /// The Kubernetes plugin name.
    pub name: &'static str,
    /// The default profile's weight.
    pub weight: i64,
    /// Whether its PreScore returned Skip for this pod: then it scores 0 everywhere.
    pub skipped: fn(&CycleState) -> bool,
    /// The raw score of one node.
    pub score: fn(&PodInfo, &NodeInfo, &CycleState) -> i64,
    /// Maps the raw scores of all feasible nodes to 0–100 (`NormalizeScore`).
    pub normalize: fn(&mut [i64], &CycleState),
}

/// The default profile's scores, in Kubernetes' order.
pub const SCORES: [ScorePlugin; 6] = [
    ScorePlugin {
        name: taint_toleration::NAME,
        weight: 3,
        skipped: |_| false,
        score: |pod, node, _| taint_toleration::score(pod, node),
        normalize: |scores, _| taint_toleration::normalize(scores),
    },
    ScorePlugin {
        name: node_affinity::NAME,
        weight: 2,
        skipped: |_| false,
        score: |pod, node, _| node_affinity::score(pod, node),
        normalize: |scores, _| node_affinity::normalize(scores),
    },
    ScorePlugin {
        name: node_resources_fit::NAME,
        weight: 1,
        skipped: |_| false,
        score: |pod, node, _| node_resources_fit::least_allocated_score(pod, node),
        normalize: |_, _| {},
    },
    ScorePlugin {
        name: pod_topology_spread::NAME,
        weight: 2,
        skipped: |state| state.pod_topology_spread_score.is_none(),
        score: pod_topology_spread::score,
        normalize: pod_topology_spread::normalize,
    },
    ScorePlugin {
        name: inter_pod_affinity::NAME,
        weight: 2,
        skipped: |state| state.inter_pod_affinity_score.is_none(),
        score: inter_pod_affinity::score,
        normalize: inter_pod_affinity::normalize,
    },
    ScorePlugin {
        name: balanced_allocation::NAME,
        weight: 1,
        skipped: |_| false,
        score: |pod, node, _| balanced_allocation::score(pod, node),
        normalize: |_, _| {},
    },
];

/// `helper.DefaultNormalizeScore`: scales scores so the highest is 100 (or, `reverse`d, the
/// highest becomes 0); all zero stays 0 (or becomes 100 reversed).
pub fn default_normalize_score(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for score in scores.iter_mut() {
        let scaled = if max == 0 {
            0
        } else {
            MAX_NODE_SCORE * *score / max
        };
        *score = if reverse {
            MAX_NODE_SCORE - scaled
        } else {
            scaled
        };
    }
}

/// Test fixtures shared by the plugin tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use crate::node_info::{NodeInfo, PodInfo};

    /// A resource list from `(name, quantity)` pairs.
    pub fn list(items: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    /// A node with `cpu`, `memory` and `pods` allocatable.
    pub fn node(name: &str, cpu: &str, memory: &str, pods: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(list(&[("cpu", cpu), ("memory", memory), ("pods", pods)])),
                ..Default::default()
            }),
        }
    }

    /// A default-namespace pod with one container requesting `cpu` and `memory` (empty:
    /// no request).
    pub fn pod(name: &str, cpu: &str, memory: &str) -> Pod {
        let requests: Vec<(&str, &str)> = [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .collect();
        Pod {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    resources: Some(ResourceRequirements {
                        requests: (!requests.is_empty()).then(|| list(&requests)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A [`NodeInfo`] for `node` holding `pods`.
    pub fn node_info(node: Node, pods: Vec<Pod>) -> NodeInfo {
        let mut info = NodeInfo::new(Arc::new(node));
        for p in pods {
            info.add_pod(PodInfo::new(Arc::new(p)));
        }
        info
    }

    /// A [`PodInfo`] for `pod`.
    pub fn info(pod: Pod) -> PodInfo {
        PodInfo::new(Arc::new(pod))
    }

    /// A label map from `(key, value)` pairs.
    pub fn labels(items: &[(&str, &str)]) -> BTreeMap<String, String> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A node (4 cpu, 8Gi, 110 pods) with `labels`.
    pub fn labelled_node(name: &str, node_labels: &[(&str, &str)]) -> Node {
        let mut n = node(name, "4", "8Gi", "110");
        n.metadata.labels = Some(labels(node_labels));
        n
    }

    /// A default-namespace pod without requests, with `labels`.
    pub fn labelled_pod(name: &str, pod_labels: &[(&str, &str)]) -> Pod {
        let mut p = pod(name, "", "");
        p.metadata.labels = Some(labels(pod_labels));
        p
    }
}
