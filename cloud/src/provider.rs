//! The cloud-provider interface: what a cloud-controller-manager asks of a cloud, mirroring
//! `k8s.io/cloud-provider`'s `cloud.go` (`cloudprovider.Interface` and its `InstancesV2`,
//! `LoadBalancer` and `Routes` parts).
//!
//! ```text
//!   cloud-controller-manager                          a cloud
//!   ┌────────────────────────────┐   Interface   ┌──────────────────────────────┐
//!   │ cloud node, node lifecycle │──InstancesV2─▶│ instances (VMs of the nodes)  │
//!   │ service controller         │──LoadBalancer▶│ load balancers (type=LB Svc)  │
//!   │ route controller           │──Routes──────▶│ routes (pod CIDR → node)      │
//!   └────────────────────────────┘               └──────────────────────────────┘
//! ```
//!
//! A provider returns `None` for a part it does not offer, as a Go provider returns
//! `(nil, false)` from `LoadBalancer()`; the controller of that part then does nothing.
//!
//! Unlike Kubernetes, the types here are not `*v1.Node` and `*v1.Service` but the few fields a
//! provider reads ([`NodeRef`], [`ServiceRef`]) and plain copies of the status types
//! ([`LoadBalancerStatus`], [`NodeAddress`]): this crate knows nothing of the Kubernetes API,
//! so a provider is written without it, and the controllers convert at their edge.
//! `InstancesV2` is the interface current Kubernetes uses; the older `Instances` and `Zones`
//! are not mirrored, nor `Clusters`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// `cloudprovider.Interface`.
pub trait Interface: Send + Sync {
    /// `ProviderName`: the scheme of the nodes' `spec.providerID` (`miniplane` for the
    /// simulated cloud, whose provider IDs are `miniplane:///<zone>/<instance-id>`).
    fn provider_name(&self) -> &str;
    /// `InstancesV2`: the nodes' machines, or `None` when the cloud does not offer it.
    fn instances_v2(&self) -> Option<&dyn InstancesV2>;
    /// `LoadBalancer`: Services of type LoadBalancer, or `None` when not offered.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer>;
    /// `Routes`: the pod CIDR routes of the cluster's network, or `None` when not offered.
    fn routes(&self) -> Option<&dyn Routes>;
}

/// The parts of a *v1.Node a provider reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeRef {
    /// `metadata.name` (the simulated cloud's instance name: the node's hostname).
    pub name: String,
    /// `spec.providerID`, once set (by the cloud node controller or the kubelet).
    pub provider_id: Option<String>,
}

/// `v1.NodeAddress`: one address of a node as the cloud knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP` or `Hostname` (the associated constants).
    pub type_: String,
    /// The address itself.
    pub address: String,
}

impl NodeAddress {
    /// `v1.NodeInternalIP`: reachable inside the cluster's network.
    pub const INTERNAL_IP: &'static str = "InternalIP";
    /// `v1.NodeExternalIP`: reachable from outside the cloud.
    pub const EXTERNAL_IP: &'static str = "ExternalIP";
    /// `v1.NodeHostName`: the node's hostname.
    pub const HOSTNAME: &'static str = "Hostname";
}

/// `cloudprovider.InstanceMetadata`: what the cloud node controller copies onto a new Node
/// (`spec.providerID`, the `node.kubernetes.io/instance-type` and `topology.kubernetes.io/
/// zone|region` labels, `status.addresses`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceMetadata {
    /// `miniplane:///<zone>/<instance-id>` for the simulated cloud.
    pub provider_id: String,
    /// The machine's type, e.g. `sim.standard-2`.
    pub instance_type: String,
    /// The node's addresses, in the cloud's order.
    pub node_addresses: Vec<NodeAddress>,
    /// The zone, e.g. `local-1a`.
    pub zone: String,
    /// The region, e.g. `local-1`.
    pub region: String,
}

/// `cloudprovider.InstancesV2`: whether a node's machine exists, is shut down, and what it
/// is. A node is found by its provider ID when it has one, else by its name.
#[async_trait]
pub trait InstancesV2: Send + Sync {
    /// `InstanceExists`: `false` when the machine is gone (terminated), which makes the
    /// cloud node lifecycle controller delete the Node.
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError>;
    /// `InstanceShutdown`: `true` when the machine exists but is stopped (the Node gets the
    /// `node.cloudprovider.kubernetes.io/shutdown` taint). [`CloudError::InstanceNotFound`]
    /// when it does not exist.
    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError>;
    /// `InstanceMetadata`: [`CloudError::InstanceNotFound`] when the machine does not exist.
    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError>;
}

/// The parts of a *v1.Service a load balancer provider reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: the load balancer's name is made from it.
    pub uid: String,
}

/// A port of the load balancer: a `v1.ServicePort` of the Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPort {
    /// The port's name in the Service, if it has one.
    pub name: Option<String>,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The port the load balancer listens on.
    pub port: i32,
    /// The node port it forwards to on every backend node.
    pub node_port: i32,
}

/// `v1.LoadBalancerIngress`: one way in.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LoadBalancerIngress {
    /// An IP address (the simulated cloud gives one from 203.0.113.0/24).
    pub ip: Option<String>,
    /// A DNS name (clouds whose load balancers have names rather than IPs).
    pub hostname: Option<String>,
    /// `VIP` or `Proxy` (`v1.LoadBalancerIPMode`); `None` means `VIP`.
    pub ip_mode: Option<String>,
}

/// `v1.LoadBalancerStatus`: what the service controller writes to `status.loadBalancer`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LoadBalancerStatus {
    /// The ways in, usually one.
    pub ingress: Vec<LoadBalancerIngress>,
}

/// `cloudprovider.LoadBalancer`: one load balancer per Service of type LoadBalancer,
/// forwarding its ports to the node ports of the backend nodes.
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// None when the service has no load balancer.
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &ServiceRef,
    ) -> Result<Option<LoadBalancerStatus>, CloudError>;
    /// `cloudprovider.DefaultLoadBalancerName`: "a" + the UID without dashes, cut to 32 chars.
    fn get_load_balancer_name(&self, cluster: &str, service: &ServiceRef) -> String;
    /// Creates or updates the LB; returns once it is provisioned (waits out the provisioning delay).
    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &ServiceRef,
        ports: &[LoadBalancerPort],
        nodes: &[NodeRef],
    ) -> Result<LoadBalancerStatus, CloudError>;
    /// Backends (the nodes) of an existing LB.
    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &ServiceRef,
        ports: &[LoadBalancerPort],
        nodes: &[NodeRef],
    ) -> Result<(), CloudError>;
    /// Deletes it; Ok when it is already gone.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &ServiceRef,
    ) -> Result<(), CloudError>;
}

/// `cloudprovider.DefaultLoadBalancerName`: `"a"` followed by the Service's UID without its
/// dashes, cut to 32 bytes (GCE wants a name that starts with a letter, AWS one shorter than
/// 33 bytes). Two Services never share a load balancer since their UIDs differ.
///
/// ```
/// let service = cloud::ServiceRef {
///     namespace: "default".into(),
///     name: "web".into(),
///     uid: "3f2a9c1e-7d4b-4e8a-9b0c-1d2e3f4a5b6c".into(),
/// };
/// assert_eq!(cloud::default_load_balancer_name(&service), "a3f2a9c1e7d4b4e8a9b0c1d2e3f4a5b6");
/// ```
pub fn default_load_balancer_name(service: &ServiceRef) -> String {
    let mut name: String = std::iter::once('a')
        .chain(service.uid.chars().filter(|c| *c != '-'))
        .collect();
    if name.len() > 32 {
        // Cut at a character boundary: a UID is ASCII, but this never panics on one that is not.
        let mut end = 32;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    name
}

/// A route of the cluster's network: traffic for `destination_cidr` (a node's pod CIDR) goes
/// to `target_node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The cloud's name of the route (`<cluster>-<name_hint>` in the simulated cloud); ignored
    /// by [`Routes::create_route`], which names it from the hint.
    pub name: String,
    /// The node (by name) the traffic goes to.
    pub target_node: String,
    /// The destination, e.g. `10.244.1.0/24`.
    pub destination_cidr: String,
    /// The target is gone (its instance is stopped or terminated): traffic is dropped. The
    /// route controller deletes such routes and creates them anew.
    pub blackhole: bool,
}

/// `cloudprovider.Routes`: the routes of the cluster's pod network.
#[async_trait]
pub trait Routes: Send + Sync {
    /// `ListRoutes`: the routes of `cluster`.
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError>;
    /// name_hint is the Node's UID (as Kubernetes' route controller passes it).
    async fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError>;
    /// `DeleteRoute`: deletes the route named `route.name`; Ok when it is already gone.
    async fn delete_route(&self, cluster: &str, route: &Route) -> Result<(), CloudError>;
}

/// What a call to the cloud can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// `cloudprovider.InstanceNotFound`
    #[error("instance not found")]
    InstanceNotFound,
    /// The cloud answered with an error (an injected fault, a quota, a bad request): message as the cloud said it.
    #[error("cloud API error {status}: {message}")]
    Api {
        /// The HTTP status of the answer (503 for an injected fault).
        status: u16,
        /// The cloud's own words.
        message: String,
    },
    /// The cloud could not be reached or did not answer in time.
    #[error("cloud unreachable: {0}")]
    Unavailable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(uid: &str) -> ServiceRef {
        ServiceRef {
            namespace: "default".into(),
            name: "web".into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn load_balancer_name_drops_dashes_and_is_cut_to_32() {
        let name = default_load_balancer_name(&service("3f2a9c1e-7d4b-4e8a-9b0c-1d2e3f4a5b6c"));
        assert_eq!(name, "a3f2a9c1e7d4b4e8a9b0c1d2e3f4a5b6");
        assert_eq!(name.len(), 32);
        assert_eq!(default_load_balancer_name(&service("ab-cd")), "aabcd");
        assert_eq!(default_load_balancer_name(&service("")), "a");
    }

    #[test]
    fn load_balancer_name_cuts_at_a_character_boundary() {
        // 31 ASCII bytes then a two-byte character: byte 32 is inside it.
        let uid = format!("{}é", "x".repeat(30));
        let name = default_load_balancer_name(&service(&uid));
        assert_eq!(name, format!("a{}", "x".repeat(30)));
    }
}
