//! The cloud node controller's decisions: how a Node that a kubelet registered with
//! `--cloud-provider=external` is initialized from the cloud, and which addresses a Node
//! should show.
//!
//! Mirrors `k8s.io/cloud-provider/controllers/node/node_controller.go` (`syncNode`,
//! `getNodeModifiersFromCloudProvider`, `updateNodeAddress`) and
//! `node/helpers/address.go` (`GetNodeAddressesFromNodeIP`). The async shell is in
//! [`controller`].
//!
//! ```text
//!   Node tainted node.cloudprovider.kubernetes.io/uninitialized
//!     ─▶ cloud: InstanceMetadata(node) ─▶ providerID (if unset), instance-type, zone and
//!        region labels (stable and beta keys), taint removed ─▶ PUT Node
//!     ─▶ addresses from the cloud, the kubelet's provided node IP first of its type
//!        ─▶ PATCH status.addresses ─▶ event Synced "Node synced successfully"
//!   every --node-status-update-frequency: initialized Nodes' addresses brought in line
//! ```

pub mod controller;

use cloud::{InstanceMetadata, NodeRef};
use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};

/// The taint a kubelet with `--cloud-provider=external` registers with
/// (`cloudproviderapi.TaintExternalCloudProvider`).
pub const TAINT_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// The kubelet's `--node-ip`, for the cloud to honour
/// (`cloudproviderapi.AnnotationAlphaNodeProvidedIPAddr`).
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// The labels the node controller sets, each with its deprecated beta twin:
/// `v1.LabelInstanceTypeStable`, `v1.LabelTopologyZone`, `v1.LabelTopologyRegion`.
pub const LABELS: [(&str, &str); 3] = [
    (
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    ),
    (
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    ),
    (
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    ),
];

/// The parts of a Node the cloud provider reads.
pub fn node_ref(node: &Node) -> NodeRef {
    NodeRef {
        name: node.metadata.name.clone().unwrap_or_default(),
        provider_id: node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .filter(|p| !p.is_empty()),
    }
}

/// The uninitialized taint, if the Node still carries it (`getCloudTaint`).
pub fn cloud_taint(node: &Node) -> Option<&Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .and_then(|ts| ts.iter().find(|t| t.key == TAINT_UNINITIALIZED))
}

/// `GetNodeAddressesFromNodeIP`: with the kubelet's provided node IP, that address (found
/// among the cloud's) is the only one of its type, and the other types follow; without one,
/// the cloud's addresses as they are.
pub fn addresses_from_node_ip(
    node: &Node,
    cloud: &[cloud::NodeAddress],
) -> Result<Vec<NodeAddress>, String> {
    let to_k8s = |a: &cloud::NodeAddress| NodeAddress {
        type_: a.type_.clone(),
        address: a.address.clone(),
    };
    let provided = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_PROVIDED_NODE_IP));
    let Some(provided) = provided else {
        return Ok(cloud.iter().map(to_k8s).collect());
    };
    let ips: Vec<std::net::IpAddr> = provided
        .split(',')
        .map(|ip| {
            ip.trim()
                .parse()
                .map_err(|_| format!("failed to parse node IP {provided:?}: invalid IP"))
        })
        .collect::<Result<_, _>>()?;
    let mut enforced: Vec<NodeAddress> = Vec::new();
    let mut types: Vec<&str> = Vec::new();
    for ip in ips {
        let matching: Vec<&cloud::NodeAddress> = cloud
            .iter()
            .filter(|a| a.address.parse::<std::net::IpAddr>().ok() == Some(ip))
            .collect();
        if matching.is_empty() {
            return Err(format!(
                "failed to get node address from cloud provider that matches ip: {ip}"
            ));
        }
        for a in matching {
            enforced.push(to_k8s(a));
            types.push(&a.type_);
        }
    }
    enforced.extend(
        cloud
            .iter()
            .filter(|a| !types.contains(&a.type_.as_str()))
            .map(to_k8s),
    );
    Ok(enforced)
}

/// `updateNodeAddress`: the addresses an initialized Node should show, if they differ from
/// what it shows (a Hostname address the cloud does not give is kept from the Node).
pub fn addresses_to_update(
    node: &Node,
    metadata: &InstanceMetadata,
) -> Result<Option<Vec<NodeAddress>>, String> {
    if metadata.node_addresses.is_empty() {
        return Ok(None);
    }
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let mut wanted = metadata.node_addresses.clone();
    if !wanted.iter().any(|a| a.type_ == "Hostname") {
        wanted.extend(current.iter().filter(|a| a.type_ == "Hostname").map(|a| {
            cloud::NodeAddress {
                type_: a.type_.clone(),
                address: a.address.clone(),
            }
        }));
    }
    let wanted = addresses_from_node_ip(node, &wanted)?;
    // `nodeAddressesChangeDetected`: the same set, in any order.
    let same = wanted.len() == current.len() && wanted.iter().all(|w| current.contains(w));
    Ok((!same).then_some(wanted))
}

/// `getNodeModifiersFromCloudProvider` + the taint's removal, applied to `node`: the Node to
/// PUT. An error when the cloud's addresses do not contain the kubelet's node IP.
pub fn initialized(node: &Node, metadata: &InstanceMetadata) -> Result<Node, String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    addresses_from_node_ip(node, &metadata.node_addresses)
        .map_err(|e| format!("provided node ip for node {name:?} is not valid: {e}"))?;
    let mut new = node.clone();
    let spec = new.spec.get_or_insert_with(Default::default);
    if spec.provider_id.as_deref().unwrap_or_default().is_empty()
        && !metadata.provider_id.is_empty()
    {
        spec.provider_id = Some(metadata.provider_id.clone());
    }
    if let Some(taints) = spec.taints.as_mut() {
        taints.retain(|t| t.key != TAINT_UNINITIALIZED);
        if taints.is_empty() {
            spec.taints = None;
        }
    }
    let labels = new.metadata.labels.get_or_insert_with(Default::default);
    for ((stable, beta), value) in
        LABELS
            .iter()
            .zip([&metadata.instance_type, &metadata.zone, &metadata.region])
    {
        if !value.is_empty() {
            labels.insert((*stable).to_owned(), value.clone());
            labels.insert((*beta).to_owned(), value.clone());
        }
    }
    Ok(new)
}

/// What the trace and the log say of an initialization.
pub fn summary(name: &str, metadata: &InstanceMetadata) -> String {
    format!(
        "{name}: initialized from the cloud: providerID {}, {} in {}/{}, uninitialized taint removed",
        metadata.provider_id, metadata.instance_type, metadata.region, metadata.zone
    )
}

#[cfg(test)]
mod tests;
