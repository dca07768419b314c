//! The default profile's filter and score plugins
//! (`pkg/scheduler/framework/plugins/`, order and weights from
//! `pkg/scheduler/apis/config/v1/default_plugins.go`).
//!
//! ```text
//! Filter (in order, the first failure decides)   Score (weight)
//!   NodeUnschedulable                               TaintToleration (3)
//!   NodeName                                        NodeAffinity (2)
//!   TaintToleration                                 ControllerSpread (2)  ← stands in for PodTopologySpread
//!   NodeAffinity                                    NodeResourcesFit (1)  LeastAllocated
//!   NodePorts                                       NodeResourcesBalancedAllocation (1)
//!   NodeResourcesFit
//! ```
//!
//! Every plugin is a plain function of the pod and one [`NodeInfo`]. A filter answers
//! `Ok(())` or a [`Status`] with Kubernetes' exact reason strings; a score answers 0–100
//! after its normalisation. Not implemented (nothing in miniplane needs them yet): volume
//! plugins, InterPodAffinity, ImageLocality, extended resources, ephemeral storage.

pub mod balanced_allocation;
pub mod controller_spread;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod taint_toleration;

use crate::node_info::{NodeInfo, PodInfo};

/// `framework.MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// Why a node does not fit (`framework.Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Preemption might help (resources, ports).
    Unschedulable,
    /// Preemption cannot help (affinity, taints, node name, cordoned node).
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
    pub filter: fn(&PodInfo, &NodeInfo) -> Result<(), Status>,
}

/// The default profile's filters, in the order they run.
pub const FILTERS: [FilterPlugin; 6] = [
    FilterPlugin {
        name: node_unschedulable::NAME,
        filter: node_unschedulable::filter,
    },
    FilterPlugin {
        name: node_name::NAME,
        filter: node_name::filter,
    },
    FilterPlugin {
        name: taint_toleration::NAME,
        filter: taint_toleration::filter,
    },
    FilterPlugin {
        name: node_affinity::NAME,
        filter: node_affinity::filter,
    },
    FilterPlugin {
        name: node_ports::NAME,
        filter: node_ports::filter,
    },
    FilterPlugin {
        name: node_resources_fit::NAME,
        filter: node_resources_fit::filter,
    },
];

/// Runs the filters in order and stops at the first failure (`RunFilterPlugins`).
pub fn run_filters(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    FILTERS.iter().try_for_each(|f| (f.filter)(pod, node))
}

/// A score plugin: raw scores per node, then a normalisation over all feasible nodes.
pub struct ScorePlugin {
    /// The Kubernetes plugin name.
    pub name: &'static str,
    /// The default profile's weight.
    pub weight: i64,
    /// The raw score of one node.
    pub score: fn(&PodInfo, &NodeInfo) -> i64,
    /// Maps the raw scores of all feasible nodes to 0–100 (`NormalizeScore`).
    pub normalize: fn(&mut [i64]),
}

/// No normalisation: the raw score is already 0–100.
fn keep(_: &mut [i64]) {}

/// The default profile's scores.
pub const SCORES: [ScorePlugin; 5] = [
    ScorePlugin {
        name: taint_toleration::NAME,
        weight: 3,
        score: taint_toleration::score,
        normalize: taint_toleration::normalize,
    },
    ScorePlugin {
        name: node_affinity::NAME,
        weight: 2,
        score: node_affinity::score,
        normalize: node_affinity::normalize,
    },
    ScorePlugin {
        name: controller_spread::NAME,
        weight: 2,
        score: controller_spread::score,
        normalize: controller_spread::normalize,
    },
    ScorePlugin {
        name: node_resources_fit::NAME,
        weight: 1,
        score: node_resources_fit::least_allocated_score,
        normalize: keep,
    },
    ScorePlugin {
        name: balanced_allocation::NAME,
        weight: 1,
        score: balanced_allocation::score,
        normalize: keep,
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
}
