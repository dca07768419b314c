//! TaintToleration: `NoSchedule`/`NoExecute` taints a pod does not tolerate rule the node
//! out; untolerated `PreferNoSchedule` taints lower its score
//! (`pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`, matching rules
//! from `k8s.io/api/core/v1/toleration.go` `ToleratesTaint`).
//!
//! ```text
//! taint  dedicated=gpu:NoSchedule
//!   toleration {key: dedicated, operator: Equal, value: gpu}          tolerates
//!   toleration {key: dedicated, operator: Exists, effect: NoSchedule} tolerates
//!   toleration {operator: Exists}                                     tolerates everything
//!   none      → "node(s) had untolerated taint {dedicated: gpu}"
//! ```

use k8s_openapi::api::core::v1::{Taint, Toleration};

use super::{Code, Status, default_normalize_score};
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "TaintToleration";

/// `Toleration.ToleratesTaint`.
pub fn toleration_matches(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint` (`TolerationsTolerateTaint`).
pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| toleration_matches(t, taint))
}

fn tolerations(pod: &PodInfo) -> &[Toleration] {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

fn taints(node: &NodeInfo) -> &[Taint] {
    node.node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Fails on the first `NoSchedule` or `NoExecute` taint the pod does not tolerate.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    let tolerations = tolerations(pod);
    let untolerated = taints(node).iter().find(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerates(tolerations, taint)
    });
    match untolerated {
        None => Ok(()),
        Some(taint) => Err(Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            ),
        )),
    }
}

/// Counts the node's `PreferNoSchedule` taints the pod does not tolerate (only tolerations
/// with an empty or `PreferNoSchedule` effect count, as in `getAllTolerationPreferNoSchedule`).
///
/// Runs for every feasible node of every pod (hundreds per pod), so it borrows the pod's
/// tolerations instead of collecting the `PreferNoSchedule` ones per node.
pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let prefer = |t: &&Toleration| {
        matches!(
            t.effect.as_deref(),
            None | Some("") | Some("PreferNoSchedule")
        )
    };
    taints(node)
        .iter()
        .filter(|taint| {
            taint.effect == "PreferNoSchedule"
                && !tolerations(pod)
                    .iter()
                    .filter(prefer)
                    .any(|t| toleration_matches(t, taint))
        })
        .count() as i64
}

/// Fewer untolerated taints is better: the reversed default normalisation.
pub fn normalize(scores: &mut [i64]) {
    default_normalize_score(scores, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            ..Default::default()
        }
    }

    #[test]
    fn toleration_matching_table() {
        let gpu = taint("dedicated", "gpu", "NoSchedule");
        for (t, want) in [
            (toleration("dedicated", "Equal", "gpu", ""), true),
            (toleration("dedicated", "", "gpu", "NoSchedule"), true),
            (toleration("dedicated", "Exists", "", "NoSchedule"), true),
            (toleration("", "Exists", "", ""), true),
            (toleration("dedicated", "Equal", "cpu", ""), false),
            (toleration("dedicated", "Exists", "", "NoExecute"), false),
            (toleration("other", "Exists", "", ""), false),
        ] {
            assert_eq!(toleration_matches(&t, &gpu), want, "{t:?}");
        }
    }

    /// A node with `taints` and no pods.
    fn tainted(taints: Vec<Taint>) -> NodeInfo {
        let mut n = node("n1", "1", "1Gi", "10");
        n.spec.get_or_insert_default().taints = Some(taints);
        node_info(n, vec![])
    }

    #[test]
    fn untolerated_taints_filter_with_kubernetes_reason() {
        let n = tainted(vec![
            taint("soft", "", "PreferNoSchedule"),
            taint("dedicated", "gpu", "NoSchedule"),
        ]);
        assert_eq!(
            filter(&info(pod("p", "", "")), &n).map_err(|s| (s.code, s.reasons)),
            Err((
                Code::UnschedulableAndUnresolvable,
                vec!["node(s) had untolerated taint {dedicated: gpu}".to_owned()]
            ))
        );
        let mut tolerant = pod("t", "", "");
        tolerant.spec.get_or_insert_default().tolerations =
            Some(vec![toleration("dedicated", "Equal", "gpu", "NoSchedule")]);
        assert_eq!(filter(&info(tolerant.clone()), &n), Ok(()));
        // PreferNoSchedule only scores.
        assert_eq!(score(&info(tolerant), &n), 1);
    }

    #[test]
    fn only_tolerations_without_effect_or_with_prefer_no_schedule_lower_the_count() {
        let n = tainted(vec![
            taint("soft", "", "PreferNoSchedule"),
            taint("softer", "x", "PreferNoSchedule"),
            taint("dedicated", "gpu", "NoSchedule"),
        ]);
        let with = |tolerations: Vec<Toleration>| {
            let mut p = pod("p", "", "");
            p.spec.get_or_insert_default().tolerations = Some(tolerations);
            score(&info(p), &n)
        };
        assert_eq!(with(vec![]), 2);
        // A NoSchedule toleration of the key does not count for scoring.
        assert_eq!(
            with(vec![toleration("soft", "Exists", "", "NoSchedule")]),
            2
        );
        assert_eq!(with(vec![toleration("soft", "Exists", "", "")]), 1);
        assert_eq!(
            with(vec![
                toleration("soft", "Exists", "", "PreferNoSchedule"),
                toleration("softer", "Equal", "x", ""),
            ]),
            0
        );
        // A node without taints scores 0.
        let plain = node_info(node("n2", "1", "1Gi", "10"), vec![]);
        assert_eq!(score(&info(pod("p", "", "")), &plain), 0);
    }

    #[test]
    fn prefer_no_schedule_scores_reversed() {
        let mut scores = vec![0, 2, 1];
        normalize(&mut scores);
        assert_eq!(scores, vec![100, 0, 50]);
        let mut zero = vec![0, 0];
        normalize(&mut zero);
        assert_eq!(zero, vec![100, 100]);
    }
}
