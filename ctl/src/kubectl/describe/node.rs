//! Describing a Node (kubectl describe.go's `describeNode`): roles, taints, conditions with
//! their heartbeat times, addresses, capacity, system info and the pods on it.
//!
//! ```text
//!   Taints:             node.kubernetes.io/unreachable:NoExecute
//!   Conditions:
//!     Type    Status   LastHeartbeatTime   LastTransitionTime   Reason            Message
//!     Ready   Unknown  ...                 ...                  NodeStatusUnknown Kubelet stopped posting node status.
//! ```
//!
//! Unlike kubectl, the pods are listed without their resource requests and limits, and the
//! `Allocated resources` and `Lease` sections are left out.

use apimachinery::duration::since;
use k8s_openapi::api::core::v1::{Event, Node, Pod};

use super::writer::{self, PrefixWriter};

/// The Node, the pods bound to it and its events.
pub fn node(n: &Node, pods: &[Pod], events: &[Event], now: jiff::Timestamp) -> String {
    let mut w = PrefixWriter::new();
    let meta = &n.metadata;
    let spec = n.spec.clone().unwrap_or_default();
    let status = n.status.clone().unwrap_or_default();
    w.field(0, "Name", meta.name.as_deref().unwrap_or_default());
    let roles: Vec<&str> = meta
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
        .collect();
    let roles = if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.join(",")
    };
    w.field(0, "Roles", roles);
    writer::labels(&mut w, "Labels", meta.labels.as_ref());
    writer::annotations(&mut w, "Annotations", meta.annotations.as_ref());
    w.field(
        0,
        "CreationTimestamp",
        writer::time(meta.creation_timestamp.as_ref().map(|t| t.0)),
    );
    let taints = spec.taints.clone().unwrap_or_default();
    w.write(0, "Taints:\t");
    if taints.is_empty() {
        w.write(0, "<none>\n");
    }
    for (i, t) in taints.iter().enumerate() {
        if i > 0 {
            w.write(0, "\t");
        }
        let value = t.value.as_deref().filter(|v| !v.is_empty());
        let key = match value {
            Some(v) => format!("{}={v}", t.key),
            None => t.key.clone(),
        };
        w.write(0, &format!("{key}:{}\n", t.effect));
    }
    w.field(0, "Unschedulable", spec.unschedulable.unwrap_or(false));
    let conditions = status.conditions.clone().unwrap_or_default();
    if !conditions.is_empty() {
        w.write(
            0,
            "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n",
        );
        w.write(
            1,
            "----\t------\t-----------------\t------------------\t------\t-------\n",
        );
        for c in conditions {
            w.write(
                1,
                &format!(
                    "{} \t{} \t{} \t{} \t{} \t{}\n",
                    c.type_,
                    c.status,
                    writer::time(c.last_heartbeat_time.map(|t| t.0)),
                    writer::time(c.last_transition_time.map(|t| t.0)),
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default()
                ),
            );
        }
    }
    w.write(0, "Addresses:\n");
    for a in status.addresses.iter().flatten() {
        w.write(1, &format!("{}:\t{}\n", a.type_, a.address));
    }
    for (title, list) in [
        ("Capacity", &status.capacity),
        ("Allocatable", &status.allocatable),
    ] {
        if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
            w.write(0, &format!("{title}:\n"));
            for (name, quantity) in list {
                w.write(1, &format!("{name}:\t{}\n", quantity.0));
            }
        }
    }
    if let Some(info) = &status.node_info {
        w.write(0, "System Info:\n");
        for (title, value) in [
            ("Machine ID", &info.machine_id),
            ("System UUID", &info.system_uuid),
            ("Boot ID", &info.boot_id),
            ("Kernel Version", &info.kernel_version),
            ("OS Image", &info.os_image),
            ("Operating System", &info.operating_system),
            ("Architecture", &info.architecture),
            ("Container Runtime Version", &info.container_runtime_version),
            ("Kubelet Version", &info.kubelet_version),
        ] {
            w.write(1, &format!("{title}:\t{value}\n"));
        }
    }
    if let Some(cidr) = spec.pod_cidr.as_deref().filter(|c| !c.is_empty()) {
        w.field(0, "PodCIDR", cidr);
        let cidrs = spec.pod_cidrs.clone().unwrap_or_default();
        w.field(0, "PodCIDRs", cidrs.join(","));
    }
    let running: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            phase != Some("Succeeded") && phase != Some("Failed")
        })
        .collect();
    w.write(
        0,
        &format!("Non-terminated Pods:\t({} in total)\n", running.len()),
    );
    if !running.is_empty() {
        w.write(1, "Namespace\tName\tAge\n");
        w.write(1, "---------\t----\t---\n");
        for p in running {
            w.write(
                1,
                &format!(
                    "{}\t{}\t{}\n",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default(),
                    since(p.metadata.creation_timestamp.as_ref().map(|t| t.0), now)
                ),
            );
        }
    }
    writer::events(&mut w, events, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unreachable_node() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
            "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"],
                     "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                                       "reason": "NodeStatusUnknown",
                                       "message": "Kubelet stopped posting node status."}],
                       "addresses": [{"type": "InternalIP", "address": "172.16.0.3"}]}
        }))
        .unwrap();
        let text = node(&n, &[], &[], "2024-01-01T00:00:00Z".parse().unwrap());
        for line in [
            "Roles:              <none>\n",
            "Taints:             node.kubernetes.io/unreachable:NoExecute\n",
            "Unschedulable:      false\n",
            "NodeStatusUnknown   Kubelet stopped posting node status.\n",
            "  InternalIP:         172.16.0.3\n",
            "Non-terminated Pods:  (0 in total)\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
    }
}
