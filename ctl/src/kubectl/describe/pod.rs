//! Describing a Pod (kubectl describe.go's `describePod`): where it runs, its phase, each
//! container's state, its conditions, volumes, QoS class and tolerations.
//!
//! ```text
//!   Node:             node-1/172.16.0.2
//!   Status:           Running
//!   IP:               10.244.0.5
//!   Controlled By:    ReplicaSet/web-5d4f
//!   Containers:
//!     web:
//!       State:          Running
//!         Started:      Mon, 01 Jan 2024 00:00:01 +0000
//!       Ready:          True
//! ```

use apimachinery::duration::since;
use apimachinery::qos::pod_qos;
use k8s_openapi::api::core::v1::{Event, Pod};

use super::pod_template::{containers, tolerations, volumes};
use super::workloads::controller;
use super::writer::{self, PrefixWriter};

/// The Pod with its events.
pub fn pod(p: &Pod, events: &[Event], now: jiff::Timestamp) -> String {
    let mut w = PrefixWriter::new();
    let meta = &p.metadata;
    let spec = p.spec.clone().unwrap_or_default();
    let status = p.status.clone().unwrap_or_default();
    writer::name_and_namespace(&mut w, meta);
    if let Some(priority) = spec.priority {
        w.field(0, "Priority", priority);
    }
    if let Some(pc) = spec
        .priority_class_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        w.field(0, "Priority Class Name", pc);
    }
    if let Some(sa) = spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        w.field(0, "Service Account", sa);
    }
    match spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        Some(node) => w.write(
            0,
            &format!(
                "Node:\t{node}/{}\n",
                status.host_ip.as_deref().unwrap_or_default()
            ),
        ),
        None => w.write(0, "Node:\t<none>\n"),
    }
    if let Some(start) = &status.start_time {
        w.field(0, "Start Time", writer::time(Some(start.0)));
    }
    writer::labels(&mut w, "Labels", meta.labels.as_ref());
    writer::annotations(&mut w, "Annotations", meta.annotations.as_ref());
    let phase = status.phase.as_deref().unwrap_or_default();
    match &meta.deletion_timestamp {
        Some(deleted) if phase != "Failed" && phase != "Succeeded" => {
            w.write(
                0,
                &format!(
                    "Status:\tTerminating (lasts {})\n",
                    since(Some(deleted.0), now)
                ),
            );
            w.write(
                0,
                &format!(
                    "Termination Grace Period:\t{}s\n",
                    meta.deletion_grace_period_seconds.unwrap_or(0)
                ),
            );
        }
        _ => w.field(0, "Status", phase),
    }
    if let Some(reason) = status.reason.as_deref().filter(|r| !r.is_empty()) {
        w.field(0, "Reason", reason);
    }
    if let Some(message) = status.message.as_deref().filter(|m| !m.is_empty()) {
        w.field(0, "Message", message);
    }
    w.field(0, "IP", status.pod_ip.as_deref().unwrap_or_default());
    let ips = status.pod_ips.clone().unwrap_or_default();
    if ips.is_empty() {
        w.write(0, "IPs:\t<none>\n");
    } else {
        w.write(0, "IPs:\n");
        for ip in ips {
            w.field(1, "IP", ip.ip);
        }
    }
    if let Some(owner) = controller(meta) {
        w.write(
            0,
            &format!("Controlled By:\t{}/{}\n", owner.kind, owner.name),
        );
    }
    if let Some(nominated) = status
        .nominated_node_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        w.field(0, "NominatedNodeName", nominated);
    }
    if let Some(init) = spec.init_containers.as_ref().filter(|c| !c.is_empty()) {
        let statuses = status.init_container_statuses.clone().unwrap_or_default();
        containers(&mut w, "Init Containers", init, &statuses, "");
    }
    let statuses = status.container_statuses.clone().unwrap_or_default();
    containers(&mut w, "Containers", &spec.containers, &statuses, "");
    let conditions = status.conditions.clone().unwrap_or_default();
    if !conditions.is_empty() {
        w.write(0, "Conditions:\n  Type\tStatus\n");
        for c in conditions {
            w.write(1, &format!("{} \t{} \n", c.type_, c.status));
        }
    }
    volumes(&mut w, spec.volumes.as_deref().unwrap_or_default(), "");
    let qos = status
        .qos_class
        .clone()
        .unwrap_or_else(|| pod_qos(&spec).as_str().to_owned());
    w.field(0, "QoS Class", qos);
    writer::labels(&mut w, "Node-Selectors", spec.node_selector.as_ref());
    tolerations(
        &mut w,
        "Tolerations",
        spec.tolerations.as_deref().unwrap_or_default(),
    );
    writer::events(&mut w, events, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn running_pod() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f",
                                     "uid": "u", "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx"}]},
            "status": {"phase": "Running", "hostIP": "172.16.0.2", "podIP": "10.244.0.5",
                       "podIPs": [{"ip": "10.244.0.5"}], "qosClass": "BestEffort",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "web", "image": "nginx", "imageID": "img",
                           "containerID": "miniplane://1", "ready": true, "restartCount": 0,
                           "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        }))
        .unwrap();
        let text = pod(&p, &[], "2024-01-01T00:00:00Z".parse().unwrap());
        for line in [
            "Node:         node-1/172.16.0.2\n",
            "Status:       Running\n",
            "Controlled By:  ReplicaSet/web-5d4f\n",
            "    State:          Waiting\n      Reason:       ContainerCreating\n",
            "    Ready:          True\n",
            "  Ready          True \n",
            "QoS Class:       BestEffort\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
    }
}
