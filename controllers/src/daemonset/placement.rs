//! Which nodes a DaemonSet runs on, and how its pods are pinned to them.
//!
//! Mirrors `NodeShouldRunDaemonPod`, `predicates` and `NewPod` in
//! `pkg/controller/daemon/daemon_controller.go`, and `AddOrUpdateDaemonPodTolerations`,
//! `ReplaceDaemonSetPodNodeNameNodeAffinity` and `GetTargetNodeName` in
//! `pkg/controller/daemon/util/daemonset_util.go`.
//!
//! ```text
//!   node                         shouldRun  shouldContinueRunning
//!   template.nodeName ≠ node      false      false
//!   nodeSelector / required
//!     node affinity mismatch      false      false
//!   untolerated NoSchedule taint  false      true  (a pod already there stays)
//!   untolerated NoExecute taint   false      false
//!   otherwise                     true       true
//! ```
//!
//! The tolerations every daemon pod gets (and that the checks above already count) let it
//! run on nodes that are not ready, unreachable, under pressure or cordoned: a DaemonSet is
//! usually what makes a node work. The pod is created with a required node affinity for
//! `metadata.name` = its node, so the scheduler binds it, and that term is how the
//! controller finds a pending pod's node again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    Taint, Toleration,
};

use crate::node_lifecycle::tolerates;

/// `node.kubernetes.io/not-ready`.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `node.kubernetes.io/unreachable`.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `node.kubernetes.io/disk-pressure`.
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `node.kubernetes.io/memory-pressure`.
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `node.kubernetes.io/pid-pressure`.
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// `node.kubernetes.io/unschedulable`.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// `node.kubernetes.io/network-unavailable`.
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
/// The field a node affinity's `matchFields` may select on (`metav1.ObjectNameField`).
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

/// Whether a node should run the DaemonSet's pod, and whether a pod already there may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeFit {
    /// `shouldRun`: a daemon pod belongs here.
    pub should_run: bool,
    /// `shouldContinueRunning`: a daemon pod already here may stay (true also when only a
    /// `NoSchedule` taint stands in the way).
    pub should_continue_running: bool,
}

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some(effect.to_owned()),
        ..Default::default()
    }
}

/// `AddOrUpdateTolerationInPodSpec`: replaces a toleration with the same key, operator, value
/// and effect, or appends it.
fn add_or_update_toleration(spec: &mut PodSpec, toleration: Toleration) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let same = |t: &Toleration| {
        t.key == toleration.key
            && t.effect == toleration.effect
            && t.operator.as_deref().unwrap_or("Equal")
                == toleration.operator.as_deref().unwrap_or("Equal")
            && t.value.as_deref().unwrap_or("") == toleration.value.as_deref().unwrap_or("")
    };
    match tolerations.iter_mut().find(|t| same(t)) {
        Some(existing) => *existing = toleration,
        None => tolerations.push(toleration),
    }
}

/// `AddOrUpdateDaemonPodTolerations`: `not-ready` and `unreachable` (`NoExecute`, forever),
/// `disk-pressure`, `memory-pressure`, `pid-pressure` and `unschedulable` (`NoSchedule`), and
/// `network-unavailable` (`NoSchedule`) for host-network pods.
pub fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    for (key, effect) in [
        (TAINT_NODE_NOT_READY, "NoExecute"),
        (TAINT_NODE_UNREACHABLE, "NoExecute"),
        (TAINT_NODE_DISK_PRESSURE, "NoSchedule"),
        (TAINT_NODE_MEMORY_PRESSURE, "NoSchedule"),
        (TAINT_NODE_PID_PRESSURE, "NoSchedule"),
        (TAINT_NODE_UNSCHEDULABLE, "NoSchedule"),
    ] {
        add_or_update_toleration(spec, exists(key, effect));
    }
    if spec.host_network == Some(true) {
        add_or_update_toleration(spec, exists(TAINT_NODE_NETWORK_UNAVAILABLE, "NoSchedule"));
    }
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes a single
/// term `metadata.name In [node]` (the controller decided the node; any other term was
/// already checked by [`node_should_run_daemon_pod`]); preferred terms are kept.
pub fn replace_daemon_set_pod_node_name_node_affinity(
    affinity: Option<Affinity>,
    node_name: &str,
) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: OBJECT_NAME_FIELD.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![node_name.to_owned()]),
        }]),
        ..Default::default()
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
    affinity
}

/// `GetTargetNodeName`: `spec.nodeName`, else the single `metadata.name In [x]` value of the
/// required node affinity; `None` when neither says.
pub fn get_target_node_name(spec: Option<&PodSpec>) -> Option<String> {
    let spec = spec?;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(name.to_owned());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == OBJECT_NAME_FIELD && r.operator == "In")
        .and_then(|r| match r.values.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        })
}

/// `NodeSelectorRequirementsAsSelector` + `Matches` for one requirement over a value (`None`:
/// the label or field is absent).
fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// One node selector term: its `matchExpressions` (labels) and `matchFields` (only
/// `metadata.name`) all hold; an empty term matches nothing.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == OBJECT_NAME_FIELD && requirement_matches(r, Some(name)))
}

/// `GetRequiredNodeAffinity(pod).Match(node)`: the pod's `nodeSelector` and its required node
/// affinity terms (any one of them).
pub fn matches_required_node_affinity(spec: &PodSpec, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    selector_ok
        && required.is_none_or(|r| {
            r.node_selector_terms
                .iter()
                .any(|t| term_matches(t, labels, name))
        })
}

/// `FindMatchingUntoleratedTaint` restricted to the effects `effects`.
fn has_untolerated_taint(taints: &[Taint], tolerations: &[Toleration], effects: &[&str]) -> bool {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .any(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// `NodeShouldRunDaemonPod`: the DaemonSet's pod for `node` (its template with the daemon
/// tolerations, as `NewPod` builds it) against the node's name, labels and taints.
pub fn node_should_run_daemon_pod(template: Option<&PodSpec>, node: &Node) -> NodeFit {
    const NO: NodeFit = NodeFit {
        should_run: false,
        should_continue_running: false,
    };
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let mut spec = template.cloned().unwrap_or_default();
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != node_name)
    {
        return NO;
    }
    add_or_update_daemon_pod_tolerations(&mut spec);
    if !matches_required_node_affinity(&spec, node) {
        return NO;
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    if has_untolerated_taint(taints, tolerations, &["NoExecute", "NoSchedule"]) {
        // A scheduled daemon pod keeps running if it tolerates the NoExecute taints.
        return NodeFit {
            should_run: false,
            should_continue_running: !has_untolerated_taint(taints, tolerations, &["NoExecute"]),
        };
    }
    NodeFit {
        should_run: true,
        should_continue_running: true,
    }
}
