//! # cloud-controller-manager — the controllers that tie a cluster to its cloud
//!
//! What `k8s.io/cloud-provider` builds into every cloud's `cloud-controller-manager`: the
//! controllers that read and change the cloud through the provider interface
//! ([`cloud::Interface`]: InstancesV2, LoadBalancer, Routes), next to kube-controller-manager
//! (which since 1.31 runs no cloud code at all).
//!
//! | module | Kubernetes (`k8s.io/cloud-provider/...`) |
//! | --- | --- |
//! | [`node`] | `controllers/node/node_controller.go`: initializes Nodes tainted `node.cloudprovider.kubernetes.io/uninitialized` (providerID, addresses, instance type, zone, region) |
//! | [`node_lifecycle`] | `controllers/nodelifecycle/`: deletes Nodes whose instance is gone, taints shut-down ones |
//! | [`route`] | `controllers/route/`: a cloud route per Node pod CIDR, `NetworkUnavailable` |
//! | [`service`] | `controllers/service/`: LoadBalancer Services' cloud load balancers, finalizer, status, events |
//! | [`manager`] | `app/controllermanager.go`: informers, leader election, `/healthz`, `/metrics` |
//! | [`config`] | `options/`: the flags |
//!
//! It reaches the cluster only through the API server (the `client` crate) and the cloud
//! only through the provider interface, and reuses kube-controller-manager's machinery
//! (work queues and workers, the executor's event recorder, pause faults) from `controllers`.
//! Like Kubernetes' CCM it never touches EndpointSlices: a LoadBalancer Service's endpoints
//! are the EndpointSlice controller's, in kube-controller-manager.

pub mod config;
pub mod manager;
pub mod node;
pub mod node_lifecycle;
pub mod route;
pub mod service;

pub use config::Config;
pub use controllers::{Error, Result};
pub use manager::{COMPONENT, CloudControllerManager};
