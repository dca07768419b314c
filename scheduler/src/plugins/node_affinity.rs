//! NodeAffinity: `spec.nodeSelector` and required node affinity filter nodes; preferred
//! node affinity terms add their weights to the score
//! (`pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`, term matching from
//! `component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`).
//!
//! ```text
//! nodeSelector {disk: ssd}                       every label must match
//! required.nodeSelectorTerms [t1, t2]            t1 OR t2; within a term, every
//!                                                matchExpressions/matchFields ANDed;
//!                                                an empty term matches nothing
//! preferred [{weight: 10, preference: t}]        score = Σ weights of matching terms,
//!                                                then scaled so the best node has 100
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

use super::{Code, Status, default_normalize_score};
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "NodeAffinity";
/// `ErrReasonPod`.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

/// One requirement against a value (`nil` when the label is absent).
fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    let as_int = |s: &str| s.parse::<i64>().ok();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|w| w == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(have), Some(bound)) = (
                value.and_then(as_int),
                values.first().and_then(|w| as_int(w)),
            ) else {
                return false;
            };
            if op == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// Whether one node selector term matches a node with `labels` named `name`.
pub fn term_matches(
    term: &NodeSelectorTerm,
    labels: &BTreeMap<String, String>,
    name: &str,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name);
            r.key == "metadata.name" && requirement_matches(r, value)
        })
}

fn node_labels(node: &NodeInfo) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    node.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// `RequiredNodeAffinity.Match`: the node selector and the required terms.
pub fn matches_required(pod: &PodInfo, node: &NodeInfo) -> bool {
    let Some(spec) = pod.pod.spec.as_ref() else {
        return true;
    };
    let labels = node_labels(node);
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
    let affinity_ok = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|t| term_matches(t, labels, &node.name))
    });
    selector_ok && affinity_ok
}

/// Fails if the node does not match the pod's node selector or required node affinity.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    if matches_required(pod, node) {
        return Ok(());
    }
    Err(Status::new(
        NAME,
        Code::UnschedulableAndUnresolvable,
        ERR_REASON_POD,
    ))
}

/// Sum of the weights of the preferred terms the node matches.
pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let Some(preferred) = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return 0;
    };
    let labels = node_labels(node);
    preferred
        .iter()
        .filter(|p| term_matches(&p.preference, labels, &node.name))
        .map(|p| i64::from(p.weight))
        .sum()
}

/// The default normalisation: the best node gets 100.
pub fn normalize(scores: &mut [i64]) {
    default_normalize_score(scores, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, Pod, PreferredSchedulingTerm,
    };

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }
    }

    fn labelled(labels: &[(&str, &str)]) -> NodeInfo {
        let mut n = node("n1", "1", "1Gi", "10");
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        );
        node_info(n, vec![])
    }

    fn with_affinity(affinity: NodeAffinity) -> Pod {
        let mut p = pod("p", "", "");
        p.spec.get_or_insert_default().affinity = Some(Affinity {
            node_affinity: Some(affinity),
            ..Default::default()
        });
        p
    }

    #[test]
    fn requirement_operators() {
        for (r, value, want) in [
            (req("k", "In", &["a", "b"]), Some("b"), true),
            (req("k", "In", &["a"]), None, false),
            (req("k", "NotIn", &["a"]), None, true),
            (req("k", "NotIn", &["a"]), Some("a"), false),
            (req("k", "Exists", &[]), Some(""), true),
            (req("k", "DoesNotExist", &[]), Some("x"), false),
            (req("k", "Gt", &["3"]), Some("4"), true),
            (req("k", "Lt", &["3"]), Some("4"), false),
            (req("k", "Gt", &["3"]), Some("x"), false),
        ] {
            assert_eq!(requirement_matches(&r, value), want, "{r:?} {value:?}");
        }
    }

    #[test]
    fn node_selector_and_required_terms_filter() {
        let ssd = labelled(&[("disk", "ssd"), ("zone", "a")]);
        let mut selector = pod("p", "", "");
        selector.spec.get_or_insert_default().node_selector =
            Some([("disk".to_owned(), "hdd".to_owned())].into());
        assert_eq!(
            filter(&info(selector), &ssd).map_err(|s| s.reasons),
            Err(vec![ERR_REASON_POD.to_owned()])
        );
        let terms = |terms: Vec<NodeSelectorTerm>| {
            with_affinity(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            })
        };
        let term = |reqs: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        };
        // Terms are ORed.
        let either = terms(vec![
            term(vec![req("zone", "In", &["b"])]),
            term(vec![req("disk", "In", &["ssd"])]),
        ]);
        assert_eq!(filter(&info(either), &ssd), Ok(()));
        // An empty term matches nothing.
        assert!(filter(&info(terms(vec![NodeSelectorTerm::default()])), &ssd).is_err());
        // matchFields on metadata.name.
        let by_name = terms(vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.name", "In", &["n1"])]),
        }]);
        assert_eq!(filter(&info(by_name), &ssd), Ok(()));
    }

    #[test]
    fn preferred_terms_score_their_weights() {
        let p = with_affinity(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                PreferredSchedulingTerm {
                    weight: 10,
                    preference: NodeSelectorTerm {
                        match_expressions: Some(vec![req("disk", "In", &["ssd"])]),
                        match_fields: None,
                    },
                },
                PreferredSchedulingTerm {
                    weight: 5,
                    preference: NodeSelectorTerm {
                        match_expressions: Some(vec![req("zone", "Exists", &[])]),
                        match_fields: None,
                    },
                },
            ]),
            ..Default::default()
        });
        let p = info(p);
        let raw: Vec<i64> = [
            labelled(&[("disk", "ssd"), ("zone", "a")]),
            labelled(&[("zone", "a")]),
            labelled(&[]),
        ]
        .iter()
        .map(|n| score(&p, n))
        .collect();
        assert_eq!(raw, vec![15, 5, 0]);
        let mut scores = raw;
        normalize(&mut scores);
        assert_eq!(scores, vec![100, 33, 0]);
    }
}
