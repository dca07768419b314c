//! PodTopologySpread: spreads matching pods evenly over topology domains (zones, nodes...)
//! (`pkg/scheduler/framework/plugins/podtopologyspread/`: `common.go` here, `filtering.go` in
//! [`filtering`], `scoring.go` in [`scoring`]; the system default constraints from
//! `pkg/scheduler/apis/config/v1/defaults.go`).
//!
//! ```text
//! constraint {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,
//!             labelSelector: {app: web}}
//!   matching pods per zone:   a: 2   b: 1   c: 1        global minimum 1
//!   a node in zone a:  2 + 1 (the pod itself matches) - 1 = 2 > maxSkew → filtered out
//!   a node in zone b:  1 + 1 - 1 = 1 ≤ maxSkew                           → fits
//! ```
//!
//! `DoNotSchedule` constraints filter ([`filtering`]), `ScheduleAnyway` ones score
//! ([`scoring`]). A constraint's selector gets the pod's values of its `matchLabelKeys`
//! added; `minDomains` (default 1) makes the global minimum 0 while fewer domains exist;
//! `nodeAffinityPolicy` (default `Honor`) and `nodeTaintsPolicy` (default `Ignore`) say
//! whether nodes the pod's node affinity or untolerated taints exclude count as domains.
//!
//! A pod without constraints of its own gets the system defaults: `kubernetes.io/hostname`
//! maxSkew 3 and `topology.kubernetes.io/zone` maxSkew 5, both `ScheduleAnyway`, over the
//! pods Kubernetes' `DefaultSelector` finds (those of the Services, ReplicationControllers,
//! ReplicaSets and StatefulSets that select the pod). Unlike Kubernetes, the scheduler does not
//! watch Services and workloads: the default constraints count the pods of the pod's
//! controlling ReplicaSet, ReplicationController or StatefulSet (by its UID, kept per node in
//! [`NodeInfo::pods_by_controller`], so the count is one lookup per node), and a pod without
//! such an owner gets no default constraint (as a pod nothing selects).

pub mod filtering;
pub mod scoring;

pub use filtering::{PreFilterState, filter, pre_filter, pre_filter_with_groups};
pub use scoring::{PreScoreState, normalize, pre_score, score};

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::Selector;
use apimachinery::labels::{Operator, Requirement};
use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use crate::node_info::{ControllerId, NodeInfo, PodInfo};
use crate::plugins::{node_affinity, taint_toleration};

/// The plugin name.
pub const NAME: &str = "PodTopologySpread";
/// `v1.LabelHostname`: per-node counts are taken at score time, not aggregated.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// `v1.LabelTopologyZone`.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// The system default constraints (`systemDefaultConstraints`): topology key and maxSkew,
/// all `ScheduleAnyway`.
pub const SYSTEM_DEFAULT_CONSTRAINTS: [(&str, i32); 2] =
    [(LABEL_HOSTNAME, 3), (LABEL_TOPOLOGY_ZONE, 5)];

/// `whenUnsatisfiable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Filter: a node that would break the skew is ruled out.
    DoNotSchedule,
    /// Score: nodes that keep the skew low are preferred.
    ScheduleAnyway,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::DoNotSchedule => "DoNotSchedule",
            Action::ScheduleAnyway => "ScheduleAnyway",
        }
    }
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeInclusionPolicy {
    /// Only nodes that pass the pod's node affinity (or tolerate its taints) are domains.
    Honor,
    /// Every node is.
    Ignore,
}

impl NodeInclusionPolicy {
    fn parse(value: Option<&str>, default: Self) -> Self {
        match value {
            Some("Honor") => NodeInclusionPolicy::Honor,
            Some("Ignore") => NodeInclusionPolicy::Ignore,
            _ => default,
        }
    }
}

/// Which pods a constraint counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpreadSelector {
    /// A constraint's own `labelSelector` (plus `matchLabelKeys`), in the pod's namespace.
    Labels(Selector),
    /// The default constraints: the pods of the pod's controller (see the module docs).
    Controller(ControllerId),
}

/// One constraint, parsed (`topologySpreadConstraint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// How uneven the domains may be.
    pub max_skew: i32,
    /// The node label that defines the domains.
    pub topology_key: String,
    /// The pods counted.
    pub selector: SpreadSelector,
    /// Below this many domains the global minimum is taken as 0 (default 1).
    pub min_domains: i32,
    /// Default `Honor`.
    pub node_affinity_policy: NodeInclusionPolicy,
    /// Default `Ignore`.
    pub node_taints_policy: NodeInclusionPolicy,
}

impl Constraint {
    /// `countPodsMatchSelector`: the node's pods this constraint counts (terminating pods
    /// and other namespaces excluded; an empty selector counts nothing).
    pub fn count_matching(&self, node: &NodeInfo, namespace: &str) -> i64 {
        match &self.selector {
            SpreadSelector::Controller(id) => i64::from(node.pods_by_controller.get(*id)),
            SpreadSelector::Labels(selector) if selector.is_everything() => 0,
            SpreadSelector::Labels(selector) => node
                .pods
                .values()
                .filter(|p| {
                    p.pod.metadata.deletion_timestamp.is_none()
                        && p.key.namespace.as_deref().unwrap_or_default() == namespace
                        && selector.matches(&p.pod.metadata.labels.as_ref())
                })
                .count() as i64,
        }
    }

    /// Whether the pod being scheduled is itself one of the pods counted.
    pub fn matches_pod(&self, pod: &PodInfo) -> bool {
        match &self.selector {
            SpreadSelector::Controller(id) => pod.controller == Some(*id),
            SpreadSelector::Labels(selector) => selector.matches(&pod.pod.metadata.labels.as_ref()),
        }
    }

    /// `matchNodeInclusionPolicies`: whether `node` counts as a domain for `pod`.
    pub fn includes_node(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        (self.node_affinity_policy == NodeInclusionPolicy::Ignore
            || node_affinity::matches_required(pod, node))
            && (self.node_taints_policy == NodeInclusionPolicy::Ignore
                || taint_toleration::filter(pod, node).is_ok())
    }
}

/// The pod's own `topologySpreadConstraints`.
fn own_constraints(pod: &PodInfo) -> &[TopologySpreadConstraint] {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_deref())
        .unwrap_or_default()
}

/// Whether the pod has constraints of its own (else the system defaults apply).
pub fn has_own_constraints(pod: &PodInfo) -> bool {
    !own_constraints(pod).is_empty()
}

/// The constraints of `action` that apply to `pod`: its own, else the system defaults
/// (`filterTopologySpreadConstraints`, `buildDefaultConstraints`).
pub fn constraints(pod: &PodInfo, action: Action) -> Vec<Constraint> {
    let own = own_constraints(pod);
    if own.is_empty() {
        return default_constraints(pod, action);
    }
    let labels = pod.pod.metadata.labels.as_ref();
    own.iter()
        .filter(|c| c.when_unsatisfiable == action.as_str())
        .map(|c| {
            let mut selector = Selector::from_label_selector(c.label_selector.as_ref())
                .unwrap_or_else(|_| Selector::nothing());
            let match_labels: BTreeMap<&String, &String> = c
                .match_label_keys
                .iter()
                .flatten()
                .filter_map(|k| labels.and_then(|l| l.get_key_value(k)))
                .collect();
            // `mergeLabelSetWithSelector`; a selector that matches nothing stays so.
            let nothing = !selector.is_everything() && selector.requirements().is_empty();
            if !match_labels.is_empty() && !nothing {
                let mut requirements: Vec<Requirement> = match_labels
                    .into_iter()
                    .map(|(k, v)| Requirement {
                        key: k.clone(),
                        operator: Operator::Equals,
                        values: BTreeSet::from([v.clone()]),
                    })
                    .collect();
                requirements.extend(selector.requirements().iter().cloned());
                selector = Selector::new(requirements);
            }
            Constraint {
                max_skew: c.max_skew,
                topology_key: c.topology_key.clone(),
                selector: SpreadSelector::Labels(selector),
                min_domains: c.min_domains.unwrap_or(1),
                node_affinity_policy: NodeInclusionPolicy::parse(
                    c.node_affinity_policy.as_deref(),
                    NodeInclusionPolicy::Honor,
                ),
                node_taints_policy: NodeInclusionPolicy::parse(
                    c.node_taints_policy.as_deref(),
                    NodeInclusionPolicy::Ignore,
                ),
            }
        })
        .collect()
}

/// `buildDefaultConstraints` with the system defaults: none for `DoNotSchedule`, and none for
/// a pod no controller selects.
fn default_constraints(pod: &PodInfo, action: Action) -> Vec<Constraint> {
    if action != Action::ScheduleAnyway {
        return Vec::new();
    }
    let Some(id) = pod.controller else {
        return Vec::new();
    };
    SYSTEM_DEFAULT_CONSTRAINTS
        .iter()
        .map(|(key, max_skew)| Constraint {
            max_skew: *max_skew,
            topology_key: (*key).to_owned(),
            selector: SpreadSelector::Controller(id),
            min_domains: 1,
            node_affinity_policy: NodeInclusionPolicy::Honor,
            node_taints_policy: NodeInclusionPolicy::Ignore,
        })
        .collect()
}

/// `nodeLabelsMatchSpreadConstraints`: the node has every constraint's topology key.
pub fn node_has_all_keys(node: &NodeInfo, constraints: &[Constraint]) -> bool {
    let labels = node.labels();
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

#[cfg(test)]
mod tests;
