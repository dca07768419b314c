//! One scheduling decision as a trace span: which nodes were filtered out and why, how the
//! others scored, and which one won.
//!
//! kube-scheduler reports the same facts in pieces: the `FailedScheduling` event's message
//! (`FitError`), `-v=10` logs of each plugin's scores, and the `Scheduled` event. Here the
//! span carries them together, under the event that queued the pod:
//!
//! ```text
//! schedule pod: default/web-7f9c-x2k4q → node-2 (3 evaluated, 3 feasible);
//!               node-2 172 [NodeResourcesFit=91 ...]; node-1 170 [...]
//! schedule pod: default/big → unschedulable: 0/3 nodes are available: 3 Insufficient cpu. ...;
//!               filtered out: node-1 (NodeResourcesFit: Insufficient cpu), ...
//! ```
//!
//! Plain functions from the decision to text and attributes, so they are tested without a
//! server.

use client::trace::{AttributeValue, attr};

use crate::schedule_one::{ScheduleError, ScheduleResult};

/// Nodes named one by one in a span; more are counted.
const NODES_NAMED: usize = 10;

/// The span's "what and why" line and its attributes for a decision about `pod`.
pub fn describe(
    pod: &str,
    decision: &Result<ScheduleResult, ScheduleError>,
) -> (String, Vec<(String, AttributeValue)>) {
    let mut attributes: Vec<(String, AttributeValue)> = vec![(attr::KEY.into(), pod.into())];
    match decision {
        Ok(result) => {
            attributes.push(("node".into(), result.suggested_host.as_str().into()));
            attributes.push(("nodes.evaluated".into(), result.evaluated_nodes.into()));
            attributes.push(("nodes.feasible".into(), result.feasible_nodes.into()));
            let mut filtered = Vec::new();
            // Only the first nodes are named (attributes and summary); the rest are counted.
            // Nothing is formatted for them: a decision evaluates hundreds of nodes.
            let max_attributes = 4 + 2 * NODES_NAMED;
            for verdict in &result.nodes {
                let attribute_room = attributes.len() < max_attributes;
                if !attribute_room && filtered.len() >= NODES_NAMED {
                    break;
                }
                match &verdict.filter {
                    Err(status) => {
                        let why = format!("{}: {}", status.plugin, status.reasons.join(", "));
                        if filtered.len() < NODES_NAMED {
                            filtered.push(format!("{} ({why})", verdict.node));
                        }
                        if attribute_room {
                            attributes.push((format!("filter.{}", verdict.node), why.into()));
                        }
                    }
                    Ok(()) if attribute_room && verdict.scores.is_some() => {
                        attributes.push((format!("score.{}", verdict.node), verdict.total.into()));
                    }
                    Ok(()) => {}
                }
            }
            let mut summary = result.summary();
            let rejected = result.evaluated_nodes - result.feasible_nodes;
            if rejected > 0 {
                summary.push_str(&format!("; filtered out: {}", filtered.join(", ")));
                if rejected > filtered.len() {
                    summary.push_str(&format!(" and {} more", rejected - filtered.len()));
                }
            }
            (summary, attributes)
        }
        Err(err) => {
            attributes.push(("unschedulable".into(), true.into()));
            let mut summary = format!("{pod} → unschedulable: {err}");
            if let ScheduleError::Fit(fit) = err
                && let Some(status) = &fit.pre_filter
            {
                // One verdict for every node: named once, not per node.
                let why = format!("{}: {}", status.plugin, status.reasons.join(", "));
                summary.push_str(&format!("; rejected at PreFilter by {why}"));
                attributes.push(("prefilter".into(), why.into()));
            } else if let ScheduleError::Fit(fit) = err {
                let named: Vec<String> = fit
                    .node_to_status
                    .iter()
                    .take(NODES_NAMED)
                    .map(|(node, s)| format!("{node} ({}: {})", s.plugin, s.reasons.join(", ")))
                    .collect();
                summary.push_str(&format!("; filtered out: {}", named.join(", ")));
                for (node, s) in fit.node_to_status.iter().take(NODES_NAMED) {
                    attributes.push((
                        format!("filter.{node}"),
                        format!("{}: {}", s.plugin, s.reasons.join(", ")).into(),
                    ));
                }
            }
            (summary, attributes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit_error::FitError;
    use crate::plugins::{Code, Status};
    use crate::schedule_one::NodeVerdict;
    use apimachinery::ObjectKey;
    use std::collections::BTreeMap;

    #[test]
    fn a_placement_names_the_filtered_out_nodes_and_the_scores() {
        let result = ScheduleResult {
            pod: ObjectKey::new(Some("default"), "web"),
            suggested_host: "node-2".into(),
            evaluated_nodes: 3,
            feasible_nodes: 2,
            nodes: vec![
                NodeVerdict {
                    node: "node-0".into(),
                    filter: Err(Status::new(
                        "NodeUnschedulable",
                        Code::UnschedulableAndUnresolvable,
                        "node(s) were unschedulable",
                    )),
                    scores: None,
                    total: 0,
                },
                NodeVerdict {
                    node: "node-1".into(),
                    filter: Ok(()),
                    scores: Some([1, 2, 0, 0, 0, 0]),
                    total: 150,
                },
                NodeVerdict {
                    node: "node-2".into(),
                    filter: Ok(()),
                    scores: Some([3, 4, 0, 0, 0, 0]),
                    total: 170,
                },
            ],
        };
        let (summary, attrs) = describe("default/web", &Ok(result));
        assert!(
            summary.starts_with("default/web -> node-2 (3 evaluated, 2 feasible)"),
            "{summary}"
        );
        assert!(
            summary.ends_with(
                "; filtered out: node-0 (NodeUnschedulable: node(s) were unschedulable)"
            ),
            "{summary}"
        );
        let get = |k: &str| {
            attrs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(get("node").as_deref(), Some("node-2"));
        assert_eq!(get("score.node-2").as_deref(), Some("170"));
        assert_eq!(
            get("filter.node-0").as_deref(),
            Some("NodeUnschedulable: node(s) were unschedulable")
        );
    }

    #[test]
    fn many_nodes_name_the_first_ten_and_the_three_best() {
        // 60 nodes in scan order: every third is filtered out, the others scored by index.
        let nodes: Vec<NodeVerdict> = (0..60)
            .map(|i| NodeVerdict {
                node: format!("node-{i:02}").into(),
                filter: if i % 3 == 0 {
                    Err(Status::new(
                        "TaintToleration",
                        Code::Unschedulable,
                        "tainted",
                    ))
                } else {
                    Ok(())
                },
                scores: if i % 3 == 0 {
                    None
                } else {
                    Some([i, 0, 0, 0, 0, 0])
                },
                total: if i % 3 == 0 { 0 } else { i },
            })
            .collect();
        let result = ScheduleResult {
            pod: ObjectKey::new(Some("default"), "web"),
            suggested_host: "node-59".into(),
            evaluated_nodes: 60,
            feasible_nodes: 40,
            nodes,
        };
        let (summary, attrs) = describe("default/web", &Ok(result));
        // The first 20 nodes in scan order, after the 4 fixed attributes.
        let keys: Vec<&str> = attrs.iter().skip(4).map(|(k, _)| k.as_str()).collect();
        let expected: Vec<String> = (0..20)
            .map(|i| match i % 3 {
                0 => format!("filter.node-{i:02}"),
                _ => format!("score.node-{i:02}"),
            })
            .collect();
        assert_eq!(keys, expected);
        // The three best, best first, then the first ten filtered out and a count.
        assert!(
            summary.contains("; node-59 59 [") && summary.contains("; node-58 58 ["),
            "{summary}"
        );
        let best = ["node-59 59", "node-58 58", "node-56 56"].map(|n| summary.find(n));
        assert!(best.iter().all(Option::is_some), "{summary}");
        assert!(best[0] < best[1] && best[1] < best[2], "{summary}");
        let named: Vec<String> = (0..10).map(|k| format!("node-{:02} (", 3 * k)).collect();
        for n in &named {
            assert!(summary.contains(n.as_str()), "{n} in {summary}");
        }
        assert!(!summary.contains("node-30 ("), "{summary}");
        assert!(summary.ends_with(" and 10 more"), "{summary}");
    }

    #[test]
    fn an_unschedulable_pod_says_why_per_node() {
        let fit = FitError {
            num_all_nodes: 1,
            node_to_status: BTreeMap::from([(
                "node-0".to_string(),
                Status::new("NodeResourcesFit", Code::Unschedulable, "Insufficient cpu"),
            )]),
            preemption_never: false,
            pre_filter: None,
        };
        let (summary, attrs) = describe("default/big", &Err(ScheduleError::Fit(fit)));
        assert!(
            summary.starts_with("default/big → unschedulable: 0/1 nodes are available"),
            "{summary}"
        );
        assert!(summary.ends_with("filtered out: node-0 (NodeResourcesFit: Insufficient cpu)"));
        assert!(attrs.iter().any(|(k, _)| k == "unschedulable"));
    }
}
