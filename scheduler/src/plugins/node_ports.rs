//! NodePorts: a pod's `hostPort`s must be free on the node
//! (`pkg/scheduler/framework/plugins/nodeports/node_ports.go`).

use super::{Code, Status};
use crate::node_info::{NodeInfo, PodInfo};

/// The plugin name.
pub const NAME: &str = "NodePorts";
/// `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// Fails if any host port of the pod collides with one in use on the node.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    let conflict = pod
        .host_ports
        .iter()
        .any(|want| node.used_ports.keys().any(|used| used.conflicts_with(want)));
    if conflict {
        return Err(Status::new(NAME, Code::Unschedulable, ERR_REASON));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::fixtures::{info, node, node_info, pod};
    use k8s_openapi::api::core::v1::{ContainerPort, Pod};

    fn with_port(name: &str, ip: Option<&str>, port: i32, protocol: Option<&str>) -> Pod {
        let mut p = pod(name, "", "");
        p.spec.get_or_insert_default().containers[0].ports = Some(vec![ContainerPort {
            container_port: 80,
            host_port: Some(port),
            host_ip: ip.map(Into::into),
            protocol: protocol.map(Into::into),
            ..Default::default()
        }]);
        p
    }

    #[test]
    fn host_ports_conflict_as_kubernetes_decides() {
        let used = node_info(
            node("n1", "1", "1Gi", "10"),
            vec![with_port("a", Some("10.0.0.1"), 8080, None)],
        );
        for (want, fits) in [
            (with_port("b", None, 8080, None), false), // 0.0.0.0 covers 10.0.0.1
            (with_port("b", Some("10.0.0.1"), 8080, Some("TCP")), false),
            (with_port("b", Some("10.0.0.2"), 8080, None), true),
            (with_port("b", Some("10.0.0.1"), 8080, Some("UDP")), true),
            (with_port("b", None, 8081, None), true),
            (pod("b", "", ""), true),
        ] {
            let got = filter(&info(want.clone()), &used).map_err(|s| s.reasons);
            let expected = if fits {
                Ok(())
            } else {
                Err(vec![ERR_REASON.to_owned()])
            };
            assert_eq!(got, expected, "{:?}", info(want).host_ports);
        }
    }
}
