//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that tolerate
//! `node.kubernetes.io/unschedulable:NoSchedule`
//! (`pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`).

use k8s_openapi::api::core::v1::Taint;

use super::taint_toleration::tolerates;
use super::{Code, Status};
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "NodeUnschedulable";
/// `ErrReasonUnschedulable`.
pub const ERR_REASON: &str = "node(s) were unschedulable";
/// `v1.TaintNodeUnschedulable`.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Fails on a cordoned node unless the pod tolerates the unschedulable taint.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    let cordoned = node
        .node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if !cordoned {
        return Ok(());
    }
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    let tolerations = pod.pod.spec.as_ref().and_then(|s| s.tolerations.as_deref());
    if tolerates(tolerations.unwrap_or_default(), &taint) {
        return Ok(());
    }
    Err(Status::new(
        NAME,
        Code::UnschedulableAndUnresolvable,
        ERR_REASON,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};
    use k8s_openapi::api::core::v1::Toleration;

    #[test]
    fn cordoned_nodes_take_only_tolerating_pods() {
        let mut cordoned = node("n1", "1", "1Gi", "10");
        cordoned.spec.get_or_insert_default().unschedulable = Some(true);
        let cordoned = node_info(cordoned, vec![]);
        let plain = info(pod("p", "", ""));
        assert_eq!(
            filter(&plain, &cordoned).map_err(|s| s.reasons),
            Err(vec!["node(s) were unschedulable".to_owned()])
        );
        let mut tolerant = pod("t", "", "");
        tolerant.spec.get_or_insert_default().tolerations = Some(vec![Toleration {
            key: Some(TAINT_NODE_UNSCHEDULABLE.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }]);
        assert_eq!(filter(&info(tolerant), &cordoned), Ok(()));
        assert_eq!(
            filter(&plain, &node_info(node("n2", "1", "1Gi", "10"), vec![])),
            Ok(())
        );
    }
}
