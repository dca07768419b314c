//! The service controller's decisions: which Services want a cloud load balancer, what the
//! cloud is asked for (ports, backend nodes), and the finalizer and status writes around it.
//!
//! Mirrors `k8s.io/cloud-provider/controllers/service/controller.go`
//! (`syncLoadBalancerIfNeeded`, `wantsLoadBalancer`, `needsCleanup`, `needsUpdate`,
//! `stableNodeSetPredicates`, `addFinalizer` / `removeFinalizer`, `patchStatus`). The async
//! shell is in [`controller`].
//!
//! ```text
//!   type LoadBalancer, no loadBalancerClass, not being deleted:
//!     event EnsuringLoadBalancer ─▶ finalizer service.kubernetes.io/load-balancer-cleanup
//!     ─▶ cloud EnsureLoadBalancer(ports, stable nodes) ─▶ event EnsuredLoadBalancer
//!     ─▶ PATCH status.loadBalancer.ingress
//!   not wanted any more (type changed, or deleted with the finalizer):
//!     LB exists? ─▶ event DeletingLoadBalancer ─▶ cloud EnsureLoadBalancerDeleted
//!     ─▶ finalizer removed ─▶ event DeletedLoadBalancer ─▶ status.loadBalancer emptied
//!   the stable node set changed ─▶ cloud UpdateLoadBalancer ─▶ event UpdatedLoadBalancer
//!   any error ─▶ event SyncLoadBalancerFailed, retry after 5 s doubling to 300 s
//! ```
//!
//! The backends are Kubernetes 1.33's *stable* node set (`StableLoadBalancerNodeSet`): every
//! Node not being deleted, without the `node.kubernetes.io/exclude-from-external-load-balancers`
//! label or the cluster autoscaler's `ToBeDeletedByClusterAutoscaler` taint. Readiness no
//! longer moves nodes in and out of a load balancer (the LB's own health checks do).

pub mod controller;

use std::sync::Arc;

use cloud::{LoadBalancerPort, LoadBalancerStatus, NodeRef, ServiceRef};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Node, Service};
use serde_json::{Value, json};

/// The finalizer that holds a Service until its load balancer is gone
/// (`servicehelper.LoadBalancerCleanupFinalizer`).
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// `v1.LabelNodeExcludeBalancers`.
pub const LABEL_EXCLUDE_BALANCERS: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// The cluster autoscaler's taint on a node it is about to remove (`ToBeDeletedTaint`).
pub const TAINT_TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";

/// `wantsLoadBalancer`: a LoadBalancer Service that no other controller claims
/// (`spec.loadBalancerClass` unset).
pub fn wants_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() == Some("LoadBalancer") && s.load_balancer_class.is_none()
    })
}

/// Whether the Service carries the cleanup finalizer.
pub fn has_finalizer(svc: &Service) -> bool {
    svc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// `needsCleanup`: being deleted, with the finalizer still on.
pub fn needs_cleanup(svc: &Service) -> bool {
    svc.metadata.deletion_timestamp.is_some() && has_finalizer(svc)
}

/// Whether a change from `old` to `new` is one the controller must act on (the Service
/// handler's `needsUpdate(old, new) || needsCleanup(new)`): the type, the ports, the IPs the
/// LB should honour, the annotations or the UID changed, or it waits for its load balancer's
/// cleanup. Its own finalizer and status writes are not.
pub fn needs_sync(old: &Service, new: &Service) -> bool {
    let spec = |s: &Service| s.spec.clone().unwrap_or_default();
    let (o, n) = (spec(old), spec(new));
    wants_load_balancer(old) != wants_load_balancer(new)
        || o.type_ != n.type_
        || o.ports != n.ports
        || o.load_balancer_ip != n.load_balancer_ip
        || o.load_balancer_source_ranges != n.load_balancer_source_ranges
        || o.external_ips != n.external_ips
        || o.external_traffic_policy != n.external_traffic_policy
        || o.health_check_node_port != n.health_check_node_port
        || o.load_balancer_class != n.load_balancer_class
        || !client::trace::same_annotations_but_trace(&old.metadata, &new.metadata)
        || old.metadata.uid != new.metadata.uid
        || needs_cleanup(new)
}

/// The Service as the cloud sees it.
pub fn service_ref(svc: &Service) -> ServiceRef {
    ServiceRef {
        namespace: svc.metadata.namespace.clone().unwrap_or_default(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The ports the load balancer forwards: each Service port to its node port.
pub fn lb_ports(svc: &Service) -> Vec<LoadBalancerPort> {
    svc.spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| LoadBalancerPort {
            name: p.name.clone(),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.port,
            node_port: p.node_port.unwrap_or(0),
        })
        .collect()
}

/// `stableNodeSetPredicates`: the nodes a load balancer sends to, sorted by name.
pub fn stable_nodes(nodes: &[Arc<Node>]) -> Vec<NodeRef> {
    let mut out: Vec<NodeRef> = nodes.iter().filter_map(|n| stable_node(n)).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The node's entry in [`stable_nodes`], or `None` if it is left out (being deleted, excluded
/// from load balancers, or tainted to be deleted).
pub fn stable_node(n: &Node) -> Option<NodeRef> {
    let excluded = n.metadata.deletion_timestamp.is_some()
        || n.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(LABEL_EXCLUDE_BALANCERS))
        || n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == TAINT_TO_BE_DELETED));
    (!excluded).then(|| crate::node::node_ref(n))
}

/// The metadata patch that adds or removes the finalizer (with the resourceVersion it was
/// decided on, so a concurrent change of the list is not lost); `None` if nothing changes.
pub fn finalizer_patch(svc: &Service, add: bool) -> Option<Value> {
    let mut finalizers = svc.metadata.finalizers.clone().unwrap_or_default();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    match (add, has) {
        (true, true) | (false, false) => return None,
        (true, false) => finalizers.push(FINALIZER.into()),
        (false, true) => finalizers.retain(|f| f != FINALIZER),
    }
    Some(json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": svc.metadata.resource_version,
        }
    }))
}

/// The Service's `status.loadBalancer.ingress` as the cloud gave it.
pub fn ingress(status: &LoadBalancerStatus) -> Vec<LoadBalancerIngress> {
    status
        .ingress
        .iter()
        .map(|i| LoadBalancerIngress {
            ip: i.ip.clone(),
            hostname: i.hostname.clone(),
            ip_mode: i.ip_mode.clone(),
            ports: None,
        })
        .collect()
}

/// `patchStatus`: the status patch if the ingress changed.
pub fn status_patch(svc: &Service, new: &[LoadBalancerIngress]) -> Option<Value> {
    let current = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default();
    if current == new {
        return None;
    }
    let ingress = if new.is_empty() {
        Value::Null
    } else {
        json!(new)
    };
    Some(json!({ "status": { "loadBalancer": { "ingress": ingress } } }))
}

#[cfg(test)]
mod tests;
