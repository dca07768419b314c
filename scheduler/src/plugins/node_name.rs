//! NodeName: a pod that names its node (`spec.nodeName` set before scheduling) fits only
//! there (`pkg/scheduler/framework/plugins/nodename/node_name.go`).
//!
//! The scheduler's queue only holds pods without `spec.nodeName`, so this fails only for
//! pods a caller hands to [`crate::schedule_one::Algorithm::schedule_pod`] directly; it is kept for
//! fidelity with the default profile.

use super::{Code, Status};
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "NodeName";
/// `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// Fails unless the pod names no node or names this one.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    match pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
        Some(wanted) if !wanted.is_empty() && wanted != &*node.name => Err(Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            ERR_REASON,
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};

    #[test]
    fn only_the_named_node_fits() {
        let n1 = node_info(node("n1", "1", "1Gi", "10"), vec![]);
        let mut p = pod("p", "", "");
        assert_eq!(filter(&info(p.clone()), &n1), Ok(()));
        p.spec.get_or_insert_default().node_name = Some("n1".into());
        assert_eq!(filter(&info(p.clone()), &n1), Ok(()));
        p.spec.get_or_insert_default().node_name = Some("n2".into());
        assert_eq!(
            filter(&info(p), &n1).map_err(|s| s.reasons),
            Err(vec![ERR_REASON.to_owned()])
        );
    }
}
